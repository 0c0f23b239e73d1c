"""Dicts (sets: sets.py). Like lists, only those created inside the traced function may be written.
A dict's views and iterators read it live, as CPython's.

Keys (and set members) are constants, hashed by value, objects hashed by identity
(`ObjectKey`s) or dataclasses hashed by value (`ValueKey`s): dict_keys.py."""
from __future__ import annotations

from collections.abc import Mapping

from ..exc import builtin_raises, unsupported
from ..guards import Guard
from ..sources import InDictSource, ItemSource
from .base import VariableTracker
from .constant import ConstantVariable, fold
from .lazy_iterators import advanced
from .lists import IteratorVariable, LiveItems, TupleVariable, items_equal, pulled_one_by_one
from .dict_keys import (MIRRORED, KeyItems, ObjectKey as ObjectKey, ValueKey as ValueKey, _key as _key, has_object_keys,
                        key_var as key_var)


_ABSENT = object()  # no such key (in a dict read one key at a time)


class DictVariable(VariableTracker):
    """`items` (python key -> tracker) may be lazy, like a list's: a dict read from the
    frame is wrapped and its keys guarded when the trace first looks inside it."""

    __slots__ = ("_items", "_lazy", "_size", "dict_type", "real")

    def __init__(self, items: dict, source=None, dict_type=dict, lazy=None, size=None, real=None):
        super().__init__(source)
        self.real = real  # the dict read from `source`, kept while the trace has not looked inside
        self._items = KeyItems(items) if lazy is None else None
        self._lazy = lazy
        self._size = size
        self.dict_type = dict_type

    def _contains_unread(self, tx, key):
        """`key in d` for a dict from outside the trace has not looked inside yet: that one
        key's presence, guarded, not every entry wrapped and every key guarded (`name in
        sys.modules`, whose entries change as modules are imported)."""
        present = self._present_unread(tx, key)
        return None if present is None else ConstantVariable(present)

    def _item_unread(self, tx, key):
        """`d[key]` / `d.get(key)` likewise: that one entry (or _ABSENT), its presence guarded."""
        present = self._present_unread(tx, key)
        if present is None:
            return None
        k = key.as_python_constant()
        return tx.wrap(self.real[k], ItemSource(self.source, k)) if present else _ABSENT

    def _present_unread(self, tx, key):
        if self._lazy is None or self.real is None or self.source is None or not key.is_python_constant():
            return None
        k = key.as_python_constant()
        if type(k) is not str:
            return None
        present = k in self.real
        tx.output.guards.add(Guard("EQUALS_MATCH", InDictSource(self.source, k), present))
        return present

    def rebuild_new(self, rb) -> str:
        body = ", ".join(f"{rb.key(k)}: {rb.expr(x)}" for k, x in self.items.items())
        return "{" + body + "}" if self.dict_type is dict else f"{rb.ns.bind(self.dict_type, 't')}({{{body}}})"

    @property
    def items(self) -> dict:
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._items = KeyItems(lazy())
        return self._items

    @items.setter
    def items(self, value):
        changes = self._items.key_changes + 1 if self._items is not None else 0
        self._lazy = None
        self._items = KeyItems(value)
        self._items.key_changes = changes

    def python_type(self):
        return self.dict_type

    def is_python_constant(self):
        items = self.items
        return all(v.is_python_constant() for v in items.values()) and not has_object_keys(items)

    def as_python_constant(self):
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

    def describe(self):
        n = len(self._items) if self._lazy is None else self._size
        return f"{self.dict_type.__name__} with {n} keys"

    def truthy(self, tx):
        return bool(self.items)

    def as_fx_arg(self):
        return {k: v.as_fx_arg() for k, v in self.items.items()}

    def as_fake(self):
        return {k: v.as_fake() for k, v in self.items.items()}

    def iter_items(self, tx):
        return DictIteration(self, "keys")

    def reversed_items(self, tx):
        return DictIteration(self, "keys", reverse=True)

    def make_iterator(self, tx, reverse: bool = False) -> "DictIterator":
        return DictIterator(DictIteration(self, "keys", reverse))

    def view_item(self, kind: str, key):
        """What iterating view `kind` ('keys', 'values', 'items') yields for `key`, now."""
        return _VIEW_ITEMS[kind](self, key)

    def var_getattr(self, tx, name):
        if name == "__class__":
            return tx.wrap(self.python_type(), None)
        return self.method_getattr(tx, name)

    def check_mutable(self, what, tx):
        if self.source is not None:  # a dict from outside: its final contents are written back
            tx.output.record_mutation(self, f"{what} on the dict {self.source.name()!r}")

    def getitem(self, tx, key):
        found = self._item_unread(tx, key)
        if found is not None:
            if found is _ABSENT:
                builtin_raises(KeyError, [key], f"KeyError: {key.as_python_constant()!r}")
            return found
        k = _key(tx, key)
        if k not in self.items:
            builtin_raises(KeyError, [key], f"KeyError: {k!r}")
        return self.items[k]

    def setitem(self, tx, key, value):
        self.check_mutable("item assignment", tx)
        self.items[_key(tx, key)] = value

    def delitem(self, tx, key):
        self.check_mutable("item deletion", tx)
        k = _key(tx, key)
        if k not in self.items:
            builtin_raises(KeyError, [key], f"KeyError: {k!r}")
        del self.items[k]

    def call_method(self, tx, name, args, kwargs):
        n = len(args)
        if name == "__getitem__" and n == 1:
            return self.getitem(tx, args[0])
        if name == "__setitem__" and n == 2:
            self.setitem(tx, args[0], args[1])
            return ConstantVariable(None)
        if name == "__len__" and n == 0:
            return ConstantVariable(len(self.items))
        if name == "__contains__" and n == 1:
            unread = self._contains_unread(tx, args[0])
            return unread if unread is not None else ConstantVariable(_key(tx, args[0]) in self.items)
        if name in _VIEW_TYPES and n == 0 and not kwargs:
            return DictViewVariable(self, name)
        if name == "get" and n in (1, 2):
            found = self._item_unread(tx, args[0])
            if found is not None:
                return (args[1] if n == 2 else ConstantVariable(None)) if found is _ABSENT else found
            k = _key(tx, args[0])
            return self.items.get(k, args[1] if n == 2 else ConstantVariable(None))
        if name == "copy" and n == 0:
            return self.copy()
        if name == "popitem" and n == 0 and not kwargs:
            self.check_mutable("dict.popitem", tx)
            if not self.items:
                unsupported("exceptions", "KeyError: 'popitem(): dictionary is empty'")
            key = next(reversed(self.items))
            return TupleVariable([key_var(key), self.items.pop(key)])
        if name == "fromkeys" and 1 <= n <= 2 and not kwargs:
            return from_keys(tx, self.python_type(), args)
        if name == "pop" and n in (1, 2):
            self.check_mutable("dict.pop", tx)
            k = _key(tx, args[0])
            if k in self.items:
                return self.items.pop(k)
            if n == 2:
                return args[1]
            builtin_raises(KeyError, [args[0]], f"KeyError: {k!r}")
        if name == "setdefault" and n in (1, 2):
            k = _key(tx, args[0])
            if k not in self.items:
                self.check_mutable("dict.setdefault", tx)
                self.items[k] = args[1] if n == 2 else ConstantVariable(None)
            return self.items[k]
        if name == "update" and n <= 1:
            self.check_mutable("dict.update", tx)
            if args:
                self.update_from(tx, args[0])
            for k, v in kwargs.items():
                self.items[k] = v
            return ConstantVariable(None)
        if name == "clear" and n == 0:
            self.check_mutable("dict.clear", tx)
            self.items.clear()
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def copy(self) -> "DictVariable":
        """`d.copy()`: a new dict of the same type (subclasses keep their own state)."""
        return DictVariable(self.items)

    def equals(self, tx, other: "DictVariable") -> bool:
        """`self == other` as CPython compares dicts: the same keys, each pair of values
        the same object or equal; two OrderedDicts also need the same key order."""
        from collections import OrderedDict
        if len(self.items) != len(other.items) or self.items.keys() != other.items.keys():
            return False
        if not all(items_equal(tx, v, other.items[k]) for k, v in self.items.items()):
            return False
        if issubclass(self.python_type(), OrderedDict) and issubclass(other.python_type(), OrderedDict):
            return list(self.items) == list(other.items)
        return True

    def merge_items(self, tx) -> dict:
        """What `dict.update(d)`, `dict(d)`, `{**d}` and `f(**d)` read of this dict, as
        key → tracker (an object of a dict subclass may read through its own methods)."""
        return self.items

    def update_from(self, tx, other):
        self.check_mutable("dict update", tx)
        if isinstance(other, DictVariable):
            self.items.update(other.merge_items(tx))
        else:
            if has_keys(other):
                self._update_from_mapping(tx, other)
                return
            for i, pair in enumerate(pulled_one_by_one(tx, other)):  # a generator body sees each insertion
                kv = pair.unpack_sequence(tx)
                if len(kv) != 2:
                    unsupported("exceptions", f"ValueError: dictionary update sequence element #{i} has length "
                                              f"{len(kv)}; 2 is required")
                self.items[_key(tx, kv[0])] = kv[1]

    def _update_from_mapping(self, tx, other):
        """CPython's dict_merge of a mapping that is not a dict: `list(other.keys())` first,
        then `other[k]` for each (a MutableMapping's mixin methods traced like any code)."""
        cls = other.python_type()
        if getattr(cls, "keys", None) is Mapping.keys:  # KeysView(other): iterating it iterates other
            keys = list(pulled_one_by_one(tx, other))
        else:
            keys = list(pulled_one_by_one(tx, other.var_getattr(tx, "keys").call_function(tx, [], {})))
        for k in keys:
            self.items[_key(tx, k)] = tx.getitem(other, k)

    def __repr__(self):
        return f"DictVariable({self.items!r})"


def has_keys(v) -> bool:
    """dict()/dict.update() take `v` as a mapping (keys() and [k]), not as pairs."""
    try:
        return hasattr(v.python_type(), "keys")
    except Exception:  # noqa: BLE001 - a tracker of no known class: maybe a mapping
        return True


_VIEW_TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}
# Set-like methods of keys and items views, folded on a view of the dict as it is now.
_SET_METHODS = {"isdisjoint", "__and__", "__or__", "__sub__", "__xor__", "__rand__", "__ror__",
                "__rsub__", "__rxor__", "__eq__", "__ne__", "__le__", "__lt__", "__ge__", "__gt__"}


def view_type(dict_type, kind: str) -> type:
    """The type of `d.keys()` (values, items) for a dict of `dict_type` (odict_keys...)."""
    if dict_type is dict:
        return _VIEW_TYPES[kind]
    from collections import OrderedDict
    return type(getattr(OrderedDict(), kind)()) if issubclass(dict_type, OrderedDict) else _VIEW_TYPES[kind]


def from_keys(tx, dict_type, args) -> DictVariable:
    """`dict_type.fromkeys(iterable, value=None)`: every key maps to the one value object."""
    value = args[1] if len(args) == 2 else ConstantVariable(None)
    keys = [_key(tx, k) for k in args[0].iter_items(tx)]
    if dict_type is dict:
        return DictVariable(dict.fromkeys(keys, value))
    from .collections_types import new_dict_of_type  # a cycle: collections_types builds on this module
    return new_dict_of_type(tx, dict_type, dict.fromkeys(keys, value))


# Per view (its method's name): what iterating it yields for a key, and whether it folds
# to a constant (a values view compares by identity: never).
_VIEW_ITEMS = {
    "keys": lambda d, key: key_var(key),
    "values": lambda d, key: d.items[key],
    "items": lambda d, key: TupleVariable([key_var(key), d.items[key]]),
}
_VIEW_CONSTANTS = {
    "keys": lambda items: dict.fromkeys(items).keys(),
    "items": lambda items: {k: v.as_python_constant() for k, v in items.items()}.items(),
}
_VIEW_FOLDS = {
    "keys": lambda items: True,
    "values": lambda items: False,
    "items": lambda items: all(v.is_python_constant() for v in items.values()),
}


class DictViewVariable(VariableTracker):
    """`d.keys()` / `d.values()` / `d.items()`: live, as CPython's views: every query reads
    the dict's tracker when it happens, so a key added after the view was taken is in it.

    A keys view (an items view, while its values are constants) is a Python constant: it
    folds to a view of a dict built at that moment, so comparisons and set operations are
    the real view's. A values view compares by identity only: it never folds. Returning a
    view declines (it would have to be a view of the returned dict itself)."""

    __slots__ = ("dict_var", "kind")

    def __init__(self, dict_var: DictVariable, kind: str):
        super().__init__(None)
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self):
        return view_type(self.dict_var.python_type(), self.kind)

    def is_python_constant(self):
        items = self.dict_var.items
        return not has_object_keys(items) and _VIEW_FOLDS[self.kind](items)

    def as_python_constant(self):
        if not self.is_python_constant():
            return super().as_python_constant()
        # a view of a dict built now: the real view's comparisons and set operations
        return _VIEW_CONSTANTS[self.kind](self.dict_var.items)

    def describe(self):
        return f"{self.python_type().__name__} of a {self.dict_var.describe()}"

    def truthy(self, tx):
        return bool(self.dict_var.items)

    def iter_items(self, tx):
        return DictIteration(self.dict_var, self.kind)

    def reversed_items(self, tx):
        return DictIteration(self.dict_var, self.kind, reverse=True)

    def make_iterator(self, tx, reverse: bool = False) -> "DictIterator":
        return DictIterator(DictIteration(self.dict_var, self.kind, reverse))

    def getitem(self, tx, key):
        unsupported("exceptions", f"TypeError: {self.python_type().__name__!r} object is not subscriptable")

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return tx.contains(self, args[0])
        if name in _SET_METHODS and not kwargs and self.is_python_constant() and all(
                a.is_python_constant() for a in args):
            made = fold(tx, getattr(self.as_python_constant(), name), [a.as_python_constant() for a in args],
                        {}, f"{self.python_type().__name__}.{name}")
            if made.python_type() in (set, frozenset) and all(getattr(a, "mirrors", lambda: True)() for a in args):
                made.order = MIRRORED  # CPython's own result from the views the program holds
            return made
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"DictViewVariable({self.kind}, {self.dict_var!r})"


class DictIterator(IteratorVariable):
    """iter() / reversed() of a dict or one of its views: each item read when taken
    (DictIteration). What outlives the trace (returned, live at a graph break) is made again
    over the same dict, advanced to where the trace left it; one over a dict whose keys
    changed since cannot be (CPython's raises on its next item, a new one would not) and
    declines."""

    __slots__ = ()

    def python_type(self):
        it = self.items
        view = getattr({}, it.kind)()
        return type(reversed(view) if it.reverse else iter(view))

    def describe(self):
        return f"dict {self.items.kind} iterator"

    def rebuild_new(self, rb) -> str:
        it = self.items
        make = rb.ns.bind(reversed if it.reverse else iter, "reversed" if it.reverse else "iter")
        if it.done:  # exhausted: it has let go of its dict
            return f"{make}({{}}.{it.kind}())"
        if it.dict_var.items.key_changes != it.changes:
            unsupported("construct", "an iterator over a dict whose keys changed since it was made would "
                                     "outlive the trace (CPython's raises on its next item)")
        return f"{rb.ns.bind(advanced, 'advanced')}({make}({rb.expr(it.dict_var)}.{it.kind}()), {self.index})"


class DictIteration(LiveItems):
    """What iterating a dict (or one of its views) yields: the items now, for callers that
    use them at once; for an iterator, each item read when it is taken. CPython's dict
    iterator raises once the dict changed size, an OrderedDict's once its keys changed at
    all; other key changes (a key deleted and added again) are declined."""

    __slots__ = ("dict_var", "kind", "keys", "done", "reverse", "changes")

    def __init__(self, dict_var: DictVariable, kind: str, reverse: bool = False):
        self.dict_var, self.kind, self.reverse = dict_var, kind, reverse
        self.keys = self._keys_now()
        self.changes = dict_var.items.key_changes
        self.done = False
        super().__init__(dict_var.view_item(kind, k) for k in self.keys)

    def _keys_now(self) -> tuple:
        keys = tuple(self.dict_var.items)
        return keys[::-1] if self.reverse else keys

    def at(self, index: int):
        if self.done:  # an exhausted dict iterator has let go of its dict
            return None
        items = self.dict_var.items
        if items.key_changes != self.changes:
            from collections import OrderedDict
            if issubclass(self.dict_var.python_type(), OrderedDict):
                unsupported("exceptions", "RuntimeError: OrderedDict mutated during iteration")
            if len(items) != len(self.keys):
                unsupported("exceptions", "RuntimeError: dictionary changed size during iteration")
            unsupported("construct", "the keys of a dict changed while iterating over it")
        if index >= len(self.keys):
            self.done = True
            return None
        return self.dict_var.view_item(self.kind, self.keys[index])
