"""Backends: what turns a captured fx.GraphModule into the callable that runs it.

A backend is a registered name or a callable `backend(gm, example_inputs) -> callable`,
the convention of torch.compile's custom backends, so those plug in unchanged.
"""
from __future__ import annotations

import contextlib

import torch

import torch.fx as fx

from .ddp import splitting as ddp_splitting
from .exc import BackendError
from .torch_backends import torch_backend, torch_backend_names, user_backend_context, with_numpy_scalars_built
from .triton.capture import direct_launches
from .triton.functional import functionalize

_REGISTRY: dict = {}


def register_backend(name: str, fn=None):
    """Register `fn(gm, example_inputs) -> callable` under `name` (usable as a decorator)."""
    def deco(f):
        _REGISTRY[name] = f
        return f
    return deco(fn) if fn is not None else deco


@register_backend("eager")
def eager(gm: fx.GraphModule, example_inputs):
    # The generated forward itself: skips nn.Module.__call__ machinery on every call;
    # Triton launch nodes call their launchers directly.
    if getattr(gm, "_minidynamo_kernels", None):
        gm = direct_launches(gm)
    return gm.forward


@register_backend("debug")
def debug(gm: fx.GraphModule, example_inputs):
    print(f"minidynamo graph ({len(example_inputs)} inputs):\n{gm.code.strip()}\n")
    return gm.forward


_REGISTRY["print"] = debug


@register_backend("functional_eager")
def functional_eager(gm: fx.GraphModule, example_inputs):
    """Rewrite Triton launches into their functional form, then run eagerly: what a
    functional backend receives, checked against plain eager."""
    return functionalize(gm).forward


def lookup_backend(backend):
    if callable(backend):
        return backend
    if isinstance(backend, str):
        if backend not in _REGISTRY:
            found = torch_backend(backend)  # torch's own: "aot_eager", "inductor", ...
            if found is None:
                raise ValueError(f"unknown minidynamo backend {backend!r}; registered: "
                                 f"{list_backends()} (or pass a callable backend(gm, example_inputs))")
            _REGISTRY[backend] = found
        return _REGISTRY[backend]
    raise TypeError(f"a minidynamo backend must be a registered name or a callable "
                    f"(gm, example_inputs) -> callable, not {type(backend).__name__}")


def list_backends() -> list:
    """Backend names `optimize(backend=...)` takes: minidynamo's own and torch's registry's."""
    return sorted(set(_REGISTRY) | set(torch_backend_names()))


def backend_name(backend) -> str:
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__qualname__", None) or getattr(backend, "__name__", None) or repr(backend)


def compile_with(backend, gm, example_inputs):
    """Call the backend once; a raise or a non-callable result names the backend."""
    fn = lookup_backend(backend)
    name = backend_name(backend)
    gm = with_numpy_scalars_built(gm)  # NumPy scalar constants: code that runs, for any backend
    grad_mode = torch.is_grad_enabled()  # a backend that runs the graph (AOTAutograd) runs its state changes
    # Inside a DDP forward: one graph per gradient bucket, so DDP's all-reduces overlap the
    # backward (minidynamo's own backends run op by op: DDP's hooks fire as in eager).
    call = fn if fn in _BUILTIN_BACKENDS else ddp_splitting(fn)
    own = fn in _BUILTIN_BACKENDS or fn in _REGISTRY.values() or getattr(fn, "_minidynamo_trusted", False)
    try:
        with contextlib.nullcontext(example_inputs) if own else user_backend_context(gm, example_inputs) as inputs:
            compiled = call(gm, inputs)
    except BackendError:
        raise  # already says what is wrong, naming the backend's limits
    except Exception as e:
        raise BackendError(f"minidynamo backend {name!r} raised {type(e).__name__}: {e}") from e
    finally:
        torch._C._set_grad_enabled(grad_mode)
    if not callable(compiled):
        raise BackendError(f"minidynamo backend {name!r} returned {type(compiled).__name__}, "
                           "not a callable that runs the graph")
    if isinstance(compiled, torch.nn.Module):
        # Its forward, not Module.__call__: process-wide module hooks are the user's, for
        # their modules; run through __call__, they would see (and change) the graph.
        compiled = compiled.forward
    if fn in _BUILTIN_BACKENDS or getattr(fn, "_minidynamo_trusted", False):
        return compiled
    return _checked(compiled, name, _output_count(gm))


def _output_count(gm) -> int:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return len(out.args[0]) if isinstance(out.args[0], (tuple, list)) else 1


def _checked(compiled, name: str, n: int):
    """A user backend's callable, checked to return the graph's n outputs."""
    def run(*args):
        out = compiled(*args)
        if not isinstance(out, (tuple, list)) or len(out) != n:
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else type(out).__name__
            raise BackendError(f"minidynamo backend {name!r}: its compiled graph returned {got}, "
                               f"expected a tuple or list of the graph's {n} outputs")
        return out
    run.__wrapped__ = compiled
    return run


_BUILTIN_BACKENDS = (eager, debug, functional_eager)
