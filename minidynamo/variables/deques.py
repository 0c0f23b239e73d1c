"""collections.deque made inside the trace or passed in: items and maxlen, the methods
that change it at either end, iteration that sees it change. A deque passed in that the
trace changes is written back in place after the graph (side_effects.py)."""
from __future__ import annotations

from collections import deque

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource
from .base import VariableTracker
from .collections_types import bind_params, index_value, is_none
from .constant import ConstantVariable
from .lazy_iterators import advanced
from .lists import IteratorVariable, LiveItems, TupleVariable, items_equal
from .lists import pulled_one_by_one


class DequeVariable(VariableTracker):
    """A deque: items and maxlen. `version` counts changes, as CPython's deque state does,
    so an iterator taken before a change declines when advanced after it."""

    __slots__ = ("_items", "_lazy", "_size", "_maxlen", "_maxlen_lazy", "version")

    def __init__(self, items, maxlen=None, source=None, lazy=None, size=None, maxlen_lazy=None):
        super().__init__(source)
        self._items = list(items) if lazy is None else None
        self._lazy = lazy
        self._size = size
        self._maxlen = maxlen
        self._maxlen_lazy = maxlen_lazy
        self.version = 0

    @property
    def items(self) -> list:
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._items = list(lazy())
        return self._items

    @property
    def maxlen(self):
        if self._maxlen_lazy is not None:
            lazy, self._maxlen_lazy = self._maxlen_lazy, None
            self._maxlen = lazy()
        return self._maxlen

    def python_type(self):
        return deque

    def describe(self):
        return f"deque of length {len(self._items) if self._lazy is None else self._size}"

    def truthy(self, tx):
        return bool(self.items)

    def iter_items(self, tx):
        return DequeIteration(self)

    def reversed_items(self, tx):
        return DequeIteration(self, reverse=True)

    def make_iterator(self, tx, reverse: bool = False) -> "DequeIterator":
        return DequeIterator(DequeIteration(self, reverse))

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return self.method_getattr(tx, name)

    def _changing(self, what: str, tx) -> list:
        if self.source is not None:  # a deque from outside: its final contents are written back
            tx.output.record_mutation(self, f"deque.{what} on {self.source.name()!r}")
        self.version += 1
        return self.items

    def writeback(self, rb, target: str, temp: str) -> tuple[str, str]:
        """(the final contents, how to put them in) for a deque from outside (side_effects.py):
        in place, so the caller's deque stays the same object with its maxlen."""
        return "[" + ", ".join(rb.expr(i) for i in self.items) + "]", f"{target}.clear(); {target}.extend({temp})"

    def _position(self, tx, key, what="deque index") -> int:
        if key.is_python_constant() and isinstance(key.as_python_constant(), slice):
            unsupported("exceptions", "TypeError: sequence index must be integer, not 'slice'")
        i = index_value(key, what)
        n = len(self.items)
        if not -n <= i < n:
            unsupported("exceptions", "IndexError: deque index out of range")
        return i % n

    def getitem(self, tx, key):
        return self.items[self._position(tx, key)]

    def delitem(self, tx, key):
        i = self._position(tx, key)
        del self._changing("__delitem__", tx)[i]

    def setitem(self, tx, key, value):
        i = self._position(tx, key)
        self._changing("__setitem__", tx)[i] = value

    def _trim(self, items: list, from_left: bool) -> None:
        maxlen = self.maxlen
        if maxlen is not None and len(items) > maxlen:
            excess = len(items) - maxlen
            if from_left:
                del items[:excess]
            else:
                del items[len(items) - excess:]

    def _find(self, tx, x, start=0, stop=None) -> int | None:
        version = self.version
        items = self.items
        for i in range(start, len(items) if stop is None else min(stop, len(items))):
            equal = items_equal(tx, items[i], x)
            if self.version != version:  # an __eq__ changed the deque while it was searched
                unsupported("exceptions", "RuntimeError: deque mutated during iteration")
            if equal:
                return i
        return None

    def call_method(self, tx, name, args, kwargs):
        what = f"deque.{name}()"
        one = lambda: bind_params(what, args, kwargs, ("x",), positional_only=True)[0]  # noqa: E731
        none = ConstantVariable(None)
        if name == "append":
            x = one()
            items = self._changing(name, tx)
            items.append(x)
            self._trim(items, from_left=True)
            return none
        if name == "appendleft":
            x = one()
            items = self._changing(name, tx)
            items.insert(0, x)
            self._trim(items, from_left=False)
            return none
        if name in ("pop", "popleft"):
            bind_params(what, args, kwargs, (), positional_only=True)
            if not self.items:
                unsupported("exceptions", "IndexError: pop from an empty deque")
            return self._changing(name, tx).pop(-1 if name == "pop" else 0)
        if name in ("extend", "extendleft"):
            # CPython's deque_extend copies the deque itself first; any other iterable is
            # pulled one item at a time, each appended (and trimmed to maxlen) before the
            # next is asked for: a generator body or map's function sees the deque grow,
            # and an iterator over this deque raises on its next item.
            iterable = one()
            new = list(iterable.iter_items(tx)) if iterable is self else pulled_one_by_one(tx, iterable)
            for x in new:
                items = self._changing(name, tx)
                if name == "extend":
                    items.append(x)
                    self._trim(items, from_left=True)
                else:
                    items.insert(0, x)
                    self._trim(items, from_left=False)
            return none
        if name == "rotate":
            (n,) = bind_params(what, args, kwargs, ("n",), {"n": ConstantVariable(1)}, positional_only=True)
            steps = index_value(n, "deque.rotate()")
            items = self._changing(name, tx)
            if len(items) > 1 and steps % len(items):
                k = steps % len(items)
                items[:] = items[-k:] + items[:-k]
            return none
        if name in ("clear", "reverse"):
            bind_params(what, args, kwargs, (), positional_only=True)
            items = self._changing(name, tx)
            if name == "clear":
                items.clear()
            else:
                items.reverse()
            return none
        if name in ("copy", "__copy__"):
            bind_params(what, args, kwargs, (), positional_only=True)
            return DequeVariable(self.items, self.maxlen)
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._find(tx, args[0]) is not None)
        if name == "count":
            x = one()
            version, items = self.version, list(self.items)
            count = sum(1 for i in items if items_equal(tx, i, x))
            if self.version != version:
                unsupported("exceptions", "RuntimeError: deque mutated during iteration")
            return ConstantVariable(count)
        if name == "index":
            x, start, stop = bind_params(what, args, kwargs, ("x", "start", "stop"),
                                         {"start": ConstantVariable(0), "stop": ConstantVariable(None)},
                                         positional_only=True)
            n = len(self.items)
            lo, hi = index_value(start, what), None if is_none(stop) else index_value(stop, what)
            lo, hi, _ = slice(lo, hi).indices(n)
            found = self._find(tx, x, lo, hi)
            if found is None:
                unsupported("exceptions", f"ValueError: {x.describe()} is not in deque")
            return ConstantVariable(found)
        if name == "remove":
            x = one()
            found = self._find(tx, x)
            if found is None:
                unsupported("exceptions", f"ValueError: {x.describe()} is not in deque")
            del self._changing(name, tx)[found]
            return none
        if name == "insert":
            i, x = bind_params(what, args, kwargs, ("i", "x"), positional_only=True)
            at = index_value(i, what)
            if self.maxlen is not None and len(self.items) >= self.maxlen:
                unsupported("exceptions", "IndexError: deque already at its maximum size")
            self._changing(name, tx).insert(at, x)
            return none
        return super().call_method(tx, name, args, kwargs)

    def rebuild_new(self, rb) -> str:
        inner = "".join(rb.expr(i) + ", " for i in self.items)
        return f"{rb.ns.bind(deque, 't')}(({inner}), {self.maxlen!r})"

    def __repr__(self):
        return f"DequeVariable({self._items!r}, maxlen={self._maxlen!r})"


class DequeIteration(LiveItems):
    """What iterating a deque yields: the items now, for callers that use them at once;
    for an iterator, each item when it is taken. CPython's deque iterator raises once the
    deque changed (even after it is exhausted)."""

    __slots__ = ("deque_var", "version", "size", "reverse")

    def __init__(self, deque_var: DequeVariable, reverse: bool = False):
        self.deque_var, self.reverse = deque_var, reverse
        self.version = deque_var.version
        self.size = len(deque_var.items)
        super().__init__(reversed(deque_var.items) if reverse else deque_var.items)

    def at(self, index: int):
        if self.deque_var.version != self.version:
            unsupported("exceptions", "RuntimeError: deque mutated during iteration")
        if index >= self.size:
            return None
        return self.deque_var.items[self.size - 1 - index if self.reverse else index]


class DequeIterator(IteratorVariable):
    """iter(d) / reversed(d): each item read when taken (DequeIteration). What outlives the
    trace (returned, live at a graph break) is made again over the same deque, advanced to
    where the trace left it; one over a deque changed since cannot be (CPython's raises on
    its next item, a new one would not) and declines."""

    __slots__ = ()

    def python_type(self):
        return _REVERSE_ITERATOR if self.items.reverse else _ITERATOR

    def describe(self):
        return "deque iterator"

    def rebuild_new(self, rb) -> str:
        it = self.items
        if it.deque_var.version != it.version:
            unsupported("construct", "an iterator over a deque changed since it was made would "
                                     "outlive the trace (CPython's raises on its next item)")
        make = rb.ns.bind(reversed if it.reverse else iter, "reversed" if it.reverse else "iter")
        return f"{rb.ns.bind(advanced, 'advanced')}({make}({rb.expr(it.deque_var)}), {self.index})"


_ITERATOR, _REVERSE_ITERATOR = type(iter(deque())), type(reversed(deque()))


def _make_deque(tx, cls, args, kwargs):
    iterable, maxlen = bind_params("deque()", args, kwargs, ("iterable", "maxlen"),
                                   {"iterable": TupleVariable([]), "maxlen": ConstantVariable(None)})
    limit = None if is_none(maxlen) else index_value(maxlen, "deque maxlen")
    if limit is not None and limit < 0:
        unsupported("exceptions", "ValueError: maxlen must be non-negative")
    d = DequeVariable(list(iterable.iter_items(tx)), limit)
    d._trim(d.items, from_left=True)
    return d


def _wrap_deque(tx, value, source):
    """A deque read from the frame: its length guarded when its items are first looked
    at, its maxlen when first read; one tracker per object however it is reached."""
    if source is None:
        return DequeVariable([tx.wrap(v, None) for v in value], value.maxlen)
    guards = tx.output.guards
    seen = tx.output.containers.get(id(value))
    if seen is not None and seen[0] is value:
        guards.add(Guard("ALIAS_MATCH", source, True, {"other": seen[2]}))
        return seen[1]
    guards.add(Guard("TYPE_MATCH", source, deque))

    def items():
        guards.add(Guard("LEN_MATCH", source, len(value), {"type": deque}))
        return [tx.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]

    def maxlen():
        guards.add(Guard("EQUALS_MATCH", AttrSource(source, "maxlen"), value.maxlen))
        return value.maxlen

    var = DequeVariable((), source=source, lazy=items, size=len(value), maxlen_lazy=maxlen)
    tx.output.containers[id(value)] = (value, var, source)
    return var
