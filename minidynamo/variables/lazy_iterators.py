"""Lazy iterators made inside the trace: the base of the models of `map`, `filter`,
`iter(callable, sentinel)` and the itertools iterators (itertools_items.py).

Each is an `IteratorVariable` over a `ModelItems`: an item is computed when a next()
asks for it, in CPython's order, so a function with side effects is called when CPython
calls it, and a list changed during the iteration is seen changed. What escapes the trace
(returned, or live at a graph break) is made again for real in the state the trace left
it (`rebuild`), as an object of the same type; the few states that cannot be made again
decline with the reason.
"""
from __future__ import annotations

import itertools
import operator

from ..exc import current_location, unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import IteratorVariable, LiveItems, iterator_of

# More items than this taken from an infinite iterator (count, repeat, cycle): the trace
# would never end (`list(count())` never returns in CPython either).
INFINITE_LIMIT = 100_000


def advanced(it, n: int):
    """`it` after n items were taken from it (the state a rebuilt iterator must be in)."""
    next(itertools.islice(it, n, n), None)
    return it


def never(_item) -> bool:
    """The predicate of a rebuilt dropwhile whose dropping is over."""
    return False


def decline_type(detail: str):
    unsupported("exceptions", f"TypeError: {detail}")


def decline_value(detail: str):
    unsupported("exceptions", f"ValueError: {detail}")


class ModelItems(LiveItems):
    """The items of a lazy iterator: `produce()` computes the next one (None: none now)."""

    __slots__ = ("tx", "made", "done")
    kind: type = object  # the real iterator type (what type() gives)
    name = "iterator"
    calls_code = False  # computing an item calls a traced function
    sticky = True  # once exhausted, always (map and filter ask their source again)
    infinite = False

    def __init__(self, tx):
        super().__init__()
        self.tx = tx  # the translator that made it: traced functions are called through it
        self.made: list = []
        self.done = False

    def at(self, index: int):
        while len(self.made) <= index and not self.done:
            if self.calls_code and current_location.get() is None:
                # Only a rebuild reads items after the trace (an outer zip or enumerate that
                # escapes): the function would run at the wrong time, or not at all.
                unsupported("construct", f"a {self.name} iterator read after the trace (inside an "
                                         "iterator that outlives it)")
            if self.infinite and len(self.made) >= INFINITE_LIMIT:
                unsupported("construct", f"more than {INFINITE_LIMIT} items taken from "
                                         f"{self.name} (an unbounded loop?)")
            item = self.produce()
            if item is None:
                self.done = self.sticky
                return None
            self.made.append(item)
        return self.made[index] if index < len(self.made) else None

    def produce(self):
        raise NotImplementedError

    def call(self, fn: VariableTracker, args: list) -> VariableTracker:
        return fn.call_function(self.tx, args, {})

    def rebuild(self, rb) -> str:
        """An expression making this iterator, in its current state, at run time."""
        raise NotImplementedError

    def bind(self, rb, obj, hint: str) -> str:
        return rb.ns.bind(obj, hint)


class ModelIterator(IteratorVariable):
    """An iterator whose items a ModelItems computes: its type is the real one's."""

    __slots__ = ()

    def python_type(self):
        return self.items.kind

    def describe(self):
        return f"{self.items.name} iterator"

    def rebuild_new(self, rb) -> str:
        return self.items.rebuild(rb)


def exprs(rb, values) -> str:
    return "".join(rb.expr(v) + ", " for v in values)


def tuple_expr(rb, values) -> str:
    return f"({exprs(rb, values)})"


def is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def rich_equal(tx, a, b) -> bool:
    """`a == b` as PyObject_RichCompareBool: identity first."""
    if tx.is_same(a, b) is True:
        return True
    return tx.compare("==", a, b).truthy(tx)


def int_arg(v, what: str, allow_none: bool = False):
    if allow_none and is_none(v):
        return None
    if not v.is_python_constant():
        unsupported("data_dependent", f"{what} is {v.describe()}, not a constant")
    value = v.as_python_constant()
    try:
        return operator.index(value)
    except TypeError:
        decline_type(f"{type(value).__name__!r} object cannot be interpreted as an integer ({what})")


def bind_args(what: str, args: list, kwargs: dict, names: tuple, defaults: dict | None = None,
              keywords: bool = True) -> list:
    """The arguments of a C callable `what(names...)`, bound as CPython binds them."""
    defaults = defaults or {}
    if kwargs and not keywords:
        decline_type(f"{what}() takes no keyword arguments")
    if len(args) > len(names):
        decline_type(f"{what}() takes at most {len(names)} arguments ({len(args)} given)")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            decline_type(f"{what}() got an unexpected or repeated argument {k!r}")
        bound[k] = v
    missing = [n for n in names if n not in bound and n not in defaults]
    if missing:
        decline_type(f"{what}() missing required argument {missing[0]!r}")
    return [bound.get(n, defaults.get(n)) for n in names]


# --- builtins ------------------------------------------------------------------------
class MapItems(ModelItems):
    __slots__ = ("fn", "iterators")
    kind, name, calls_code, sticky = map, "map", True, False

    def __init__(self, tx, fn, iterators):
        super().__init__(tx)
        self.fn, self.iterators = fn, iterators

    def produce(self):
        parts = []
        for it in self.iterators:  # as zip: stops at the first exhausted, after the others'
            item = it.next_item()
            if item is None:
                return None
            parts.append(item)
        return self.call(self.fn, parts)

    def rebuild(self, rb):
        return f"{self.bind(rb, map, 'map')}({rb.expr(self.fn)}, {exprs(rb, self.iterators)})"


class FilterItems(ModelItems):
    __slots__ = ("fn", "it")
    kind, name, calls_code, sticky = filter, "filter", True, False
    keep = True  # the truth value of the items kept

    def __init__(self, tx, fn, it):
        super().__init__(tx)
        self.fn, self.it = fn, it

    def produce(self):
        while (item := self.it.next_item()) is not None:
            test = item if self.fn is None else self.call(self.fn, [item])
            if test.truthy(self.tx) == self.keep:
                return item
        return None

    def rebuild(self, rb):
        fn = "None" if self.fn is None else rb.expr(self.fn)
        return f"{self.bind(rb, self.kind, self.name)}({fn}, {rb.expr(self.it)})"


class FilterfalseItems(FilterItems):
    __slots__ = ()
    kind, name, keep = itertools.filterfalse, "filterfalse", False


class CallUntilItems(ModelItems):
    """iter(callable, sentinel): calls until a result equals the sentinel."""

    __slots__ = ("fn", "sentinel")
    kind, name, calls_code = type(iter(int, 1)), "callable_iterator", True

    def __init__(self, tx, fn, sentinel):
        super().__init__(tx)
        self.fn, self.sentinel = fn, sentinel

    def produce(self):
        value = self.call(self.fn, [])
        return None if rich_equal(self.tx, self.sentinel, value) else value

    def rebuild(self, rb):
        made = f"{self.bind(rb, iter, 'iter')}({rb.expr(self.fn)}, {rb.expr(self.sentinel)})"
        return f"{self.bind(rb, advanced, 'advanced')}({self.bind(rb, iter, 'iter')}(" \
               f"{self.bind(rb, _raise_stop, 'stop')}, None), 1)" if self.done else made


def _raise_stop():
    raise StopIteration


def make_map(tx, args, kwargs):
    if kwargs:
        decline_type("map() takes no keyword arguments")
    if len(args) < 2:
        decline_type("map() must have at least two arguments.")
    return ModelIterator(MapItems(tx, args[0], [iterator_of(tx, a) for a in args[1:]]))


def make_filter(tx, args, kwargs, keep=True):
    what = "filter" if keep else "filterfalse"
    fn, iterable = bind_args(what, args, kwargs, ("function", "iterable"), keywords=False)
    if is_none(fn) or getattr(fn, "value", None) is bool:  # CPython: the item's truth (bool(item))
        fn = None
    return ModelIterator((FilterItems if keep else FilterfalseItems)(tx, fn, iterator_of(tx, iterable)))


def make_call_until(tx, fn, sentinel):
    return ModelIterator(CallUntilItems(tx, fn, sentinel))
