"""`functools.lru_cache` / `functools.cache` wrappers in a trace: their function is traced,
or the wrapper itself called where the body cannot be (constant arguments only)."""
from __future__ import annotations

from ..exc import Unsupported, unsupported
from .base import VariableTracker
from .functions import UserFunctionVariable
from .constant import fold


class CachedFunctionVariable(VariableTracker):
    """A `functools.lru_cache` / `functools.cache` wrapper. Its function is traced like any
    other (a cached result equals a new one for the pure functions people cache: device
    probes, settings tables). Where that body cannot be traced and the arguments are
    constants, the wrapper itself is called, as the eager call would call it: its body runs
    at most once per key, in the trace or in eager, and the answer is fixed for that key."""

    __slots__ = ("wrapper",)

    def __init__(self, wrapper, source=None):
        super().__init__(source)
        self.wrapper = wrapper

    def describe(self):
        return f"cached function {getattr(self.wrapper, '__qualname__', '?')!r}"

    def python_type(self):
        return type(self.wrapper)

    def call_function(self, tx, args, kwargs):
        constant = all(a.is_python_constant() for a in args) and all(
            v.is_python_constant() for v in kwargs.values())
        if not constant:
            unsupported("call", f"{self.describe()} with arguments that are not constants (it caches "
                                "by their identity)")
        graph = tx.output.graph
        before = set(graph.nodes)
        mutated = dict(tx.output.mutated)
        appended = {k: (list(v.appended or []), v._size) for k, (v, _) in mutated.items()
                    if getattr(v, "appended", None) is not None and not v.loaded}
        stored = {k: dict(v.stored) for k, (v, _) in mutated.items() if getattr(v, "stored", None) is not None}
        tensor_attrs = {k: [v[0], dict(v[1])] for k, v in tx.output.tensor_attrs.items()}
        cells = {k: v.contents for k, (v, _) in mutated.items() if hasattr(v, "cell")}  # cells assigned
        contents = {k: _contents(v) for k, (v, _) in mutated.items()}
        attrs = _tensor_attrs(tx.output)
        try:
            result = UserFunctionVariable(self.wrapper.__wrapped__).call_function(tx, args, kwargs)
        except Unsupported:
            tx.output.tensor_attrs.clear()  # attributes the attempt set on tensors: taken back
            tx.output.tensor_attrs.update(tensor_attrs)
            for key, (var, _) in list(tx.output.mutated.items()):
                if key in stored:  # attributes the attempt set on an object already written: taken back
                    var.stored.clear()
                    var.stored.update(stored[key])
                    continue
                if key in cells:  # a cell already assigned: its value before the attempt
                    var.contents = cells[key]
                    continue
                if key in mutated and key not in appended:
                    continue
                if getattr(var, "appended", None) is None or var.loaded:
                    raise  # the attempt changed an outside container's tracker: no way back
                if key in appended:  # appends only: the attempt's are taken back
                    var.appended, var._size = list(appended[key][0]), appended[key][1]
                else:
                    var._size -= len(var.appended)
                    var.appended = None
                    del tx.output.mutated[key]
            for node in reversed(list(graph.nodes)):  # what the attempt recorded is dropped
                if node not in before and node.op != "placeholder":  # (inputs: pruned if unused)
                    graph.erase_node(node)
            return fold(tx, self.wrapper, [a.as_python_constant() for a in args],
                        {k: v.as_python_constant() for k, v in kwargs.items()}, self.describe())
        # Eager runs the body only on a cache miss: a body that changed anything outside
        # itself would do it again on every call of the graph.
        now = tx.output.mutated
        if (now.keys() != mutated.keys() or _tensor_attrs(tx.output) != attrs
                or any(_contents(v) != contents[k] for k, (v, _) in now.items())):
            unsupported("side_effect", f"{self.describe()} changes state outside itself: eager runs its body "
                                       "only when the cache misses")
        return result


def _contents(var) -> tuple:
    """What a written tracker holds now: its items, attributes, cell contents and appends,
    by the identity of their trackers."""
    items = getattr(var, "_items", None)
    if isinstance(items, dict):
        items = [(k, id(x)) for k, x in items.items()]
    elif items is not None:
        items = [id(x) for x in items]
    stored = getattr(var, "stored", None)
    return (items, None if stored is None else [(k, id(x)) for k, x in stored.items()],
            id(getattr(var, "contents", None)), len(getattr(var, "appended", None) or ()))


def _tensor_attrs(output) -> dict:
    return {k: (id(v[0]), [(n, id(x)) for n, x in v[1].items()]) for k, v in output.tensor_attrs.items()}
