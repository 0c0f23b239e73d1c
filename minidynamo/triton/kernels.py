"""A launched Triton kernel's decorator layers: the one walk from what the user launched
(``kernel[grid](...)``) through @triton.autotune / @triton.heuristics to the @triton.jit
function and the user's Python function under it. Everything in triton/ that looks at the
layers (capture, mutation analysis, the launcher, resolution) walks them here.
"""
from __future__ import annotations

import inspect

MAX_LAYERS = 16  # a longer stack is cut here (resolution declines it as too deep)


def kernel_chain(kernel, *, function: bool = False) -> list:
    """``[kernel, kernel.fn, kernel.fn.fn, ...]``, outermost first.

    Stopping rule: `.fn` is followed while it is itself a Triton ``KernelInterface``
    (Autotuner, Heuristics, JITFunction, InterpretedFunction, a library's subclass), so the
    chain ends at the innermost such layer: the @triton.jit function. With
    ``function=True`` every `.fn` is followed, so the chain ends one step further, at the
    user's Python function (what the launcher reads names and parameters from, and what
    resolution runs past to decline a wrapper it does not know). Either way at most
    MAX_LAYERS objects: a longer stack ends there, still wrapped.
    """
    from triton.runtime.jit import KernelInterface  # triton is optional: imported once a kernel is seen
    chain = [kernel]
    while len(chain) < MAX_LAYERS:
        inner = getattr(chain[-1], "fn", None)
        if inner is None or not (function or isinstance(inner, KernelInterface)):
            break
        chain.append(inner)
    return chain


def kernel_name(kernel) -> str:
    """The user's name for the kernel: its Python function's ``__name__``."""
    inner = kernel_chain(kernel)[-1]
    fn = getattr(inner, "fn", inner)
    return getattr(fn, "__name__", type(inner).__name__)


def kernel_signature(kernel) -> inspect.Signature:
    inner = kernel_chain(kernel)[-1]
    return inspect.signature(getattr(inner, "fn", inner))
