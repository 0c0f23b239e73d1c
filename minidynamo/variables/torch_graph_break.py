"""`torch._dynamo.graph_break()` in traced code: a graph break where torch.compile breaks."""
from __future__ import annotations

import contextlib
import sys
import threading


class _Depth(threading.local):
    depth = 0


# Inside an autograd.Function that torch._dynamo.allow_in_graph marks, torch.compile does
# not break at torch._dynamo.graph_break(): neither do we (it does nothing eagerly).
_in_torch_allowed = _Depth()


def breaks_here(fn) -> bool:
    """`fn` is torch._dynamo.graph_break (known by name: checking never imports Dynamo),
    called where torch.compile breaks at it."""
    return getattr(fn, "__module__", None) == "torch._dynamo.decorators" and \
        getattr(fn, "__name__", None) == "graph_break" and not _in_torch_allowed.depth


@contextlib.contextmanager
def torch_allowed_function(fn_cls):
    """While tracing the Function `fn_cls`: whether torch allows it in the graph whole."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    allowed = rules is not None and id(fn_cls) in getattr(rules, "_allowed_callable_ids", ())
    _in_torch_allowed.depth += allowed
    try:
        yield
    finally:
        _in_torch_allowed.depth -= allowed
