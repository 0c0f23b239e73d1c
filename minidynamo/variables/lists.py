"""Tuples, lists and iterators over them.

Tuples are immutable values. A list created inside the traced function is a mutable
tracker shared by reference (so aliasing inside the function behaves as in Python); a
list that came from outside (it has a source) outlives the call, so writing to it
declines the trace.
"""
from __future__ import annotations

import functools

import torch

from ..exc import builtin_raises, unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .constant import fold
from .made_classes import class_expr, is_made
from .tuple_types import is_plain_tuple_type, namedtuple_base


def constant_index(key: VariableTracker):
    """`lst[t]` where tensor `t` was made from constants in the trace (`torch.as_tensor(2)`,
    arithmetic on it): the int `t.__index__()` gives, known from the fake's constant (the
    fake mode computes it with every op and drops it when the tensor is written). None
    where not known."""
    fake = getattr(key, "fake", None)
    constant = getattr(fake, "constant", None)
    if not isinstance(constant, torch.Tensor) or constant.numel() != 1 or \
            constant.is_floating_point() or constant.is_complex():
        return None
    return constant.__index__()


def _index(tx, key: VariableTracker, n: int, what: str, error: str | None = None):
    known = constant_index(key)
    if known is not None:
        key = ConstantVariable(known)
    if not key.is_python_constant():
        unsupported("data_dependent", f"indexing {what} with {key.describe()}")
    k = key.as_python_constant()
    if isinstance(k, bool) or not isinstance(k, (int, slice)):
        if hasattr(k, "__index__") and not isinstance(k, slice):
            k = k.__index__()
        else:
            unsupported("exceptions", f"{what} indices must be integers or slices, not {type(k).__name__}")
    if isinstance(k, int) and not -n <= k < n:
        if error is not None:  # CPython's own message: the trace raises it (a handler may catch it)
            builtin_raises(IndexError, [ConstantVariable(error)], f"IndexError: {what} index {k} out of range")
        unsupported("exceptions", f"IndexError: {what} index {k} out of range")
    return k


def items_equal(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """Two container items compared as CPython's containers compare them
    (PyObject_RichCompareBool): the same object is equal without calling ==."""
    if tx.is_same(a, b):
        return True
    return tx.compare("==", a, b).truthy(tx)


class BaseListVariable(VariableTracker):
    """`items` may be lazy: a sequence read from the frame wraps its items, and guards its
    length, only when the trace first looks inside it (see builder.wrap). So a fallback
    caused by appending to an outside list is not keyed on that list's length."""

    __slots__ = ("_items", "_lazy", "_size", "appended")

    def __init__(self, items, source=None, lazy=None, size=None):
        super().__init__(source)
        self._items = list(items) if lazy is None else None
        self._lazy = lazy  # () -> list of trackers, installing the guards it relies on
        self._size = size
        self.appended = None  # items appended to an outside list never looked into (see append)

    @property
    def items(self) -> list:
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._items = list(lazy()) + (self.appended or [])
        return self._items

    @property
    def loaded(self) -> bool:
        return self._lazy is None

    @items.setter
    def items(self, value):
        self._lazy = None
        self._items = value

    def _length_for_messages(self):
        return len(self._items) if self._lazy is None else self._size

    def is_python_constant(self):
        return all(i.is_python_constant() for i in self.items)

    def iter_items(self, tx):
        return list(self.items)

    def as_fx_arg(self):
        # A torch.Size lowers to a plain tuple, as an fx node stores it anyway (its args are
        # rebuilt as tuples); the fake run gets the same tuple, so it agrees with the graph.
        # The calls that read a Size differently from a tuple (Tensor.new) pass its items.
        lowered = [i.as_fx_arg() for i in self.items]
        return lowered if isinstance(self, ListVariable) else tuple(lowered)

    def as_fake(self):
        fakes = [i.as_fake() for i in self.items]
        return fakes if isinstance(self, ListVariable) else tuple(fakes)

    def truthy(self, tx):
        return bool(self.items)

    def getitem(self, tx, key):
        t = self.python_type()
        error = "list index out of range" if issubclass(t, list) else (
            "tuple index out of range" if issubclass(t, tuple) else None)
        k = _index(tx, key, len(self.items), t.__name__, error)
        if isinstance(k, slice):
            return self.new_like(self.items[k])
        return self.items[k]

    def new_like(self, items):
        return type(self)(items)

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name == "__contains__" and len(args) == 1:
            return tx.contains(self, args[0])
        if name in ("index", "count") and not kwargs and args and all(
                a.is_python_constant() for a in args) and self.is_python_constant():
            values = [i.as_python_constant() for i in self.items]
            if issubclass(self.python_type(), tuple):  # tuple's own method: its own error message
                values = tuple(values)
            return fold(tx, getattr(values, name), [a.as_python_constant() for a in args], {},
                        f"{self.python_type().__name__}.{name}")
        if name in ("index", "count") and not kwargs and 1 <= len(args) <= (3 if name == "index" else 1):
            return self._search(tx, name, args)
        return super().call_method(tx, name, args, kwargs)

    def _search(self, tx, name, args):
        """index/count over items that are not all constants: each item compared as CPython
        compares them (the same object is equal; a tensor compared with == declines)."""
        items = self.items  # read live: an __eq__ may change a list as it is searched
        bounds = [a.as_python_constant() if a.is_python_constant() else None for a in args[1:]]
        if any(b is None or isinstance(b, bool) or not isinstance(b, int) for b in bounds):
            unsupported("construct", f"{self.python_type().__name__}.index with bounds {[a.describe() for a in args[1:]]}")
        start, stop, _ = slice(*(bounds + [None] * (2 - len(bounds)))).indices(len(items)) if bounds else \
            (0, len(items), 1)
        count, i = 0, start
        while i < min(stop, len(items)):
            if items_equal(tx, items[i], args[0]):
                if name == "index":
                    return ConstantVariable(i)
                count += 1
            i += 1
        if name == "count":
            return ConstantVariable(count)
        what = self.python_type().__name__
        unsupported("exceptions", f"ValueError: {what}.index(x): x not in {what}" if what == "tuple"
                    else f"ValueError: {args[0].describe()} is not in list")


class TupleVariable(BaseListVariable):
    # stored: attributes the trace set on a namedtuple subclass's instance passed in (its
    # __dict__), name → tracker, set on it after the graph (side_effects.py)
    __slots__ = ("tuple_type", "stored")

    def __init__(self, items, source=None, tuple_type=tuple, lazy=None, size=None):
        super().__init__(items, source, lazy, size)
        self.tuple_type = tuple_type
        self.stored = None

    def python_type(self):
        return self.tuple_type

    def rebuild_new(self, rb) -> str:
        # (built once, as every object made in the trace: `t is u` holds after a break)
        inner = "".join(rb.expr(i) + ", " for i in self.items)
        if self.tuple_type is tuple:
            return f"({inner})"
        if is_made(self.tuple_type):  # a class made in the trace: made again per call
            return f"{rb.ns.bind(tuple.__new__, 'tuple_new')}({class_expr(rb, self.tuple_type)}, ({inner}))"
        return f"{rb.ns.bind(tuple_maker(self.tuple_type), 't')}(({inner}))"

    def is_python_constant(self):
        # A tuple subclass with Python dunder methods is not folded: that would run them.
        return (self.tuple_type is tuple or _foldable_tuple_type(self.tuple_type)) and super().is_python_constant()

    def as_python_constant(self):
        values = tuple(i.as_python_constant() for i in self.items)
        return values if self.tuple_type is tuple else tuple_maker(self.tuple_type)(values)

    def call_method(self, tx, name, args, kwargs):
        if name == "numel" and not args and not kwargs and _size_or_tuple(self.tuple_type) is not tuple:
            # torch.Size.numel(): the product of the sizes (symbolic ones stay graph values)
            product = ConstantVariable(1)
            for item in self.items:
                product = tx.binary_op("mul", product, item)
            return product
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if self.tuple_type is not tuple:
            found = _namedtuples().namedtuple_getattr(tx, self, name)
            if found is not None:
                return found
        return self.method_getattr(tx, name)

    def store_attr(self, tx, name, value):
        """`p.name = v` on an instance of a namedtuple subclass passed in (its __dict__)."""
        _namedtuples().namedtuple_setattr(tx, self, name, value)

    @property
    def writeback(self):
        """The attributes set on a namedtuple passed in, through setattr (side_effects.py)."""
        if not self.stored:
            return None
        return lambda rb, target, temp: _namedtuples().attribute_writeback(self, rb, target, temp)

    def new_like(self, items):
        # Slicing or repeating a torch.Size gives a torch.Size; a namedtuple gives a tuple.
        return TupleVariable(items, tuple_type=_size_or_tuple(self.tuple_type))

    def describe(self):
        return f"tuple of length {self._length_for_messages()}"

    def __repr__(self):
        return f"TupleVariable({self.items!r})"


def _namedtuples():
    from . import namedtuples  # a cycle: namedtuples builds on lists
    return namedtuples


def _size_or_tuple(tuple_type):
    import torch
    return torch.Size if tuple_type is torch.Size else tuple


def tuple_maker(tuple_type):
    """What makes a `tuple_type` from one iterable of its items: the type itself for C
    tuple types (torch.Size, torch.return_types), `tuple.__new__` for namedtuple classes
    (calling those takes one argument per field)."""
    if namedtuple_base(tuple_type) is not None:
        return functools.partial(tuple.__new__, tuple_type)
    return tuple_type


def _foldable_tuple_type(tuple_type) -> bool:
    return is_plain_tuple_type(tuple_type)


class ListVariable(BaseListVariable):
    __slots__ = ()

    def python_type(self):
        return list

    def rebuild_new(self, rb) -> str:
        return "[" + ", ".join(rb.expr(i) for i in self.items) + "]"

    def as_python_constant(self):
        return [i.as_python_constant() for i in self.items]

    def describe(self):
        return f"list of length {self._length_for_messages()}"

    def check_mutable(self, what: str, tx):
        if self.source is not None:  # a list from outside: its final contents are written back
            tx.output.record_mutation(self, f"{what} on the list {self.source.name()!r}")

    def setitem(self, tx, key, value):
        self.check_mutable("item assignment", tx)
        k = _index(tx, key, len(self.items), "list", "list assignment index out of range")
        if isinstance(k, slice):
            self.items[k] = value.iter_items(tx)
        else:
            self.items[k] = value

    def delitem(self, tx, key):
        self.check_mutable("item deletion", tx)
        k = _index(tx, key, len(self.items), "list", "list assignment index out of range")
        del self.items[k]

    def call_method(self, tx, name, args, kwargs):
        n = len(args)
        if name in ("append", "extend") and n == 1 and not kwargs and self.source is not None \
                and not self.loaded and not (name == "extend" and isinstance(args[0], IteratorVariable)):
            # An outside list only appended to: the entry appends the same items after the
            # graph, and nothing about its contents (not even its length) is guarded.
            new = [args[0]] if name == "append" else list(args[0].iter_items(tx))
            self.appended = (self.appended or []) + new
            self._size += len(new)
            tx.output.record_append(self)
            return ConstantVariable(None)
        if name in _MUTATORS:
            self.check_mutable(f"list.{name}", tx)
        if name == "append" and n == 1:
            self.items.append(args[0])
        elif name == "extend" and n == 1:
            self.items.extend(pulled_one_by_one(tx, args[0], self))  # code making an item sees each append
        elif name == "insert" and n == 2:
            self.items.insert(args[0].as_python_constant(), args[1])
        elif name == "pop" and n <= 1:
            if not self.items:
                unsupported("exceptions", "IndexError: pop from empty list")
            k = _index(tx, args[0], len(self.items), "pop", "pop index out of range") if args else -1
            return self.items.pop(k)
        elif name == "clear" and n == 0:
            self.items.clear()
        elif name == "reverse" and n == 0:
            self.items.reverse()
        elif name == "copy" and n == 0:
            return ListVariable(self.items)
        elif name == "remove" and n == 1:
            for i, item in enumerate(self.items):
                if tx.compare("==", item, args[0]).truthy(tx):
                    del self.items[i]
                    break
            else:
                unsupported("exceptions", "ValueError: list.remove(x): x not in list")
        elif name == "sort" and n == 0:
            if set(kwargs) - {"key", "reverse"}:
                bad = next(iter(set(kwargs) - {"key", "reverse"}))
                unsupported("exceptions", f"TypeError: sort() got an unexpected keyword argument {bad!r}")
            # CPython empties the list while it sorts: a key function reads it empty, and
            # one that changes it makes sort() raise (the eager run raises it for real).
            before, self.items = list(self.items), []
            try:
                ordered = tx.sort_items(before, kwargs.get("key"), kwargs.get("reverse"))
                if self.items:
                    unsupported("exceptions", "ValueError: list modified during sort")
            finally:
                self.items = before
            self.items = ordered
        elif name == "__setitem__" and n == 2:
            self.setitem(tx, args[0], args[1])
        else:
            return super().call_method(tx, name, args, kwargs)
        return ConstantVariable(None)

    def __repr__(self):
        return f"ListVariable({self.items!r})"


_MUTATORS = {"append", "extend", "insert", "pop", "clear", "reverse", "remove", "sort", "__setitem__"}


class LiveItems(list):
    """`iter_items` of a container whose iterator reads it as it goes (a dict): a list of
    the items now, for callers that use them at once, and `at(i)`, the i-th item as a
    next() taken now yields it (None when exhausted), which IteratorVariable asks."""

    __slots__ = ()

    def at(self, index: int):
        raise NotImplementedError


class PulledItems(LiveItems):
    """Items made from other iterators as they are asked for (enumerate, zip): nothing is
    read from a source before CPython would read it, so a container changed during the
    loop is seen changed, as in CPython."""

    __slots__ = ("iterators", "combine", "made", "strict")

    def __init__(self, iterators: list, combine, strict: bool = False):
        super().__init__()
        self.iterators = iterators  # IteratorVariables, advanced in order (zip's order)
        self.combine = combine  # (position, [item of each iterator]) -> tracker
        self.made: list = []
        self.strict = strict  # zip(strict=True): the lengths are checked at the end, as they run out

    def at(self, index: int):
        while len(self.made) <= index:
            parts = []
            for i, it in enumerate(self.iterators):
                item = it.next_item()
                if item is None:  # zip stops at the first exhausted one (after taking the others'),
                    if self.strict:
                        self._check_all_done(i)
                    return None  # not for good: a later next() pulls again, as CPython's zip
                parts.append(item)
            self.made.append(self.combine(len(self.made), parts))
        return self.made[index] if index < len(self.made) else None

    def _check_all_done(self, i: int) -> None:
        """CPython's strict zip_next once iterator i ran out: the first one may, if every
        other one (pulled once more, in order) has run out too."""
        def plural(k):
            return " " if k == 1 else "s 1-"
        if i:
            message = f"zip() argument {i + 1} is shorter than argument{plural(i)}{i}"
            builtin_raises(ValueError, [ConstantVariable(message)], f"ValueError: {message}")
        for k, it in enumerate(self.iterators[1:], 1):
            if it.next_item() is not None:
                message = f"zip() argument {k + 1} is longer than argument{plural(k)}{k}"
                builtin_raises(ValueError, [ConstantVariable(message)], f"ValueError: {message}")


class ReversedItems(LiveItems):
    """reversed(list): the index counts down from the length at the call; CPython's
    iterator stops where the list has shrunk below it."""

    __slots__ = ("seq", "start")

    def __init__(self, seq: list):
        super().__init__()
        self.seq = seq  # the list tracker's own items list (live)
        self.start = len(seq) - 1

    def at(self, index: int):
        i = self.start - index
        return self.seq[i] if 0 <= i < len(self.seq) else None


def iterator_of(tx, v) -> "IteratorVariable":
    """iter(v), as GET_ITER does: an iterator is itself; a list is iterated live."""
    if isinstance(v, IteratorVariable):
        return v
    if isinstance(v, ListVariable):
        return IteratorVariable(v.items, owner=v)  # live, as CPython's list iterator
    make = getattr(v, "make_iterator", None)  # a container whose iterator is its own type (deque)
    if make is not None:
        return make(tx)
    made = tx.user_iterator(v)  # an object of a user class: its __iter__
    if made is not None:
        return made
    return IteratorVariable(v.iter_items(tx))


class IteratorVariable(VariableTracker):
    """A live iterator: FOR_ITER advances it in place."""

    __slots__ = ("items", "index", "owner", "rest", "done")

    def __init__(self, items, owner=None):
        super().__init__(None)
        self.items = items  # a Python list of trackers (a list tracker's live items, or LiveItems)
        self.index = 0
        self.owner = owner  # the list tracker whose items these are, if any
        self.rest = None  # what was left, once a graph break read it (rebuild.py)
        self.done = 0  # next() calls that found nothing (a list iterator: exhausted for good)

    def python_type(self):
        return type(iter([]))

    def next_item(self):
        if isinstance(self.items, LiveItems):
            item = self.items.at(self.index)
        elif self.index < len(self.items):
            item = self.items[self.index]
        else:
            # CPython's list iterator lets go of its list once exhausted: items appended
            # later are not seen (and it is rebuilt as an empty iterator).
            self.items, self.owner, self.index, self.done = [], None, 0, 1
            return None
        if item is not None:
            self.index += 1
        else:
            self.done += 1
        return item

    def iter_items(self, tx):
        rest = []
        while (item := self.next_item()) is not None:
            rest.append(item)
        return rest

    def describe(self):
        return "iterator"

    def rebuild_new(self, rb) -> str:
        owner = self.owner if self.owner is not None else rb.list_owning(self.items)
        if owner is not None:  # iterating a list made in the trace: the same list, live
            return f"{rb.ns.bind(list_iterator, 'list_iterator')}({rb.expr(owner)}, {self.index})"
        if self.rest is None:  # read once: pulling live items advances what they pull from
            if isinstance(self.items, LiveItems):
                self.rest = []
                while (item := self.items.at(self.index + len(self.rest))) is not None:
                    self.rest.append(item)
            else:
                self.rest = list(self.items[self.index:])
        rest = self.rest
        make_iter = rb.ns.bind(iter, "iter")
        ints = [r.value for r in rest if isinstance(r, ConstantVariable) and type(r.value) is int]
        if len(ints) == len(rest) and len(rest) >= 2:
            step = ints[1] - ints[0]
            if step and all(b - a == step for a, b in zip(ints, ints[1:])):
                return f"{make_iter}({rb.ns.bind(range, 'range')}({ints[0]}, {ints[-1] + step}, {step}))"
        return f"{make_iter}((" + "".join(rb.expr(r) + ", " for r in rest) + "))"


def list_iterator(items: list, index: int):
    """An iterator over the list object `items` that has already yielded `index` items."""
    it = iter(items)
    it.__setstate__(index)
    return it


class PulledIterator(IteratorVariable):
    """zip(...) / enumerate(...): items made from the iterators as they are asked for
    (PulledItems). What outlives the trace (returned, live at a graph break) is made again
    as the same call over those iterators made again (a list's iterator over the same list,
    where it stood), so what they read after the break is read then, as CPython's."""

    __slots__ = ("maker", "start")

    def __init__(self, items: PulledItems, maker, start: int = 0):
        super().__init__(items)
        self.maker = maker  # zip or enumerate
        self.start = start  # enumerate's first count

    def python_type(self):
        return self.maker

    def describe(self):
        return f"{self.maker.__name__} iterator"

    def rebuild_new(self, rb) -> str:
        items = self.items
        if len(items.made) != self.index:  # items made ahead of the next() that takes them
            unsupported("construct", f"a {self.maker.__name__} iterator read ahead would outlive the trace")
        make = rb.ns.bind(self.maker, self.maker.__name__)
        inner = "".join(rb.expr(it) + ", " for it in items.iterators)
        if self.maker is enumerate:
            return f"{make}({inner}{self.start + self.index})"
        return f"{make}({inner}{'strict=True' if items.strict else ''})"


def make_zip(iterators: list, strict: bool = False) -> PulledIterator:
    return PulledIterator(PulledItems(iterators, lambda i, parts: TupleVariable(list(parts)), strict), zip)


def make_enumerate(iterator: IteratorVariable, start: int) -> PulledIterator:
    return PulledIterator(PulledItems([iterator], lambda i, parts: TupleVariable([ConstantVariable(start + i), parts[0]])),
                          enumerate, start)


def pulled_one_by_one(tx, v, target=None):
    """The items of `v` for a consumer that acts on each before taking the next, as CPython's
    C loops do (list.extend and `+=` on a list, deque.extend/extendleft, dict.update,
    Counter.update, set.update, sum): any iterator's (a generator, map, filter, zip, an
    itertools iterator, an iterator over a container) are pulled as the consumer asks for
    them, so code run to make an item (a generator body, map's function) sees the
    consumer's work so far in CPython's order; a container's (a list, tuple, dict, deque:
    CPython copies or walks it with no code of the user's in between) all at once.
    `target`: the container being filled, when an iterator over it would never end."""
    if isinstance(v, IteratorVariable):
        if target is not None and v.owner is target:
            unsupported("construct", f"an iterator over the {target.describe()} it extends: CPython "
                                     "keeps appending until memory runs out")
        return _pulling(v)
    return v.iter_items(tx)


def _pulling(it: IteratorVariable):
    while (item := it.next_item()) is not None:
        yield item
