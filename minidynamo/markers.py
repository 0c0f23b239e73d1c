"""What user code says to minidynamo: `graph_break()` and `disable(fn)`."""
from __future__ import annotations

import functools


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
    from .api import OptimizedFunction
    inner = fn._fn if isinstance(fn, OptimizedFunction) else fn

    @functools.wraps(inner)
    def disabled(*args, **kwargs):
        return inner(*args, **kwargs)

    disabled._minidynamo_disable = True
    return disabled
