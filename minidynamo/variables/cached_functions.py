"""`functools.lru_cache` / `functools.cache` wrappers in a trace: their function is traced
(a cached result equals a new one for the pure functions people cache: device probes,
settings tables). A body that cannot be traced declines where the call is made, so the
call runs natively (the wrapper decides there, hit or miss, as in eager): calling it at
trace time would run the body outside its place in the program, once too often where it
raises (an exception is not cached) or too early for state the graph's write-backs change.

A function marked constant for the process (`torch.compiler.assume_constant_result`,
transformers' install probes) is called at trace time and its answer taken as a constant,
as torch.compile does (functions.marked_constant)."""
from __future__ import annotations

from ..exc import unsupported
from .base import VariableTracker
from .functions import UserFunctionVariable, constant_call, marked_constant


class CachedFunctionVariable(VariableTracker):
    """A `functools.lru_cache` / `functools.cache` wrapper, its function traced."""

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
        if marked_constant(self.wrapper.__wrapped__) or marked_constant(self.wrapper):
            return constant_call(tx, self.wrapper, args, kwargs, self.describe())
        mutated = dict(tx.output.mutated)
        contents = {k: _contents(v) for k, (v, _) in mutated.items()}
        attrs = _tensor_attrs(tx.output)
        result = UserFunctionVariable(self.wrapper.__wrapped__).call_function(tx, args, kwargs)
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
