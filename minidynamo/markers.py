"""What user code says to minidynamo: `graph_break()`, `disable(fn)`, `allow_in_graph(fn)`."""
from __future__ import annotations

import functools
from .api import OptimizedFunction


def graph_break() -> None:
    """In an optimized function: end the graph here and go on in a new one. Called
    outside an optimized function, it does nothing."""


graph_break._minidynamo_graph_break = True


def disable(fn=None, *, recursive: bool = True):
    """`fn` always runs eagerly; called from an optimized function it is a graph break
    (the graph before it runs, then `fn` natively, then the rest in a new graph).
    Usable as `@minidynamo.disable` or `minidynamo.disable(fn)`. `recursive` is accepted
    for torch.compiler.disable's call form: a disabled function is never traced, so what
    it calls is not either."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if not callable(fn):
        raise TypeError(f"minidynamo.disable needs a callable, got {type(fn).__name__}")
    inner = fn._fn if isinstance(fn, OptimizedFunction) else fn

    @functools.wraps(inner)
    def disabled(*args, **kwargs):
        return inner(*args, **kwargs)

    disabled._minidynamo_disable = True
    return disabled


def allow_in_graph(fn):
    """Calls of `fn` in an optimized function are recorded as one node of the graph, `fn`
    itself, instead of being traced into: the trace runs it on fake tensors to learn its
    outputs (so it must take and return tensors, and do nothing but tensor work), the graph
    calls it for real. Returns `fn` (usable as a decorator)."""
    if not callable(fn):
        raise TypeError(f"minidynamo.allow_in_graph needs a callable, got {type(fn).__name__}")
    try:
        fn._minidynamo_allow_in_graph = True
    except (AttributeError, TypeError):
        raise TypeError(f"minidynamo.allow_in_graph cannot mark {fn!r} (it takes no attributes): "
                        "wrap it in a Python function") from None
    return fn
