"""Dicts and sets with constant keys. Like lists, only those created inside the
traced function may be written."""
from __future__ import annotations

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import BaseListVariable, TupleVariable


def _key(tx, k: VariableTracker):
    if not k.is_python_constant():
        unsupported("construct", f"dict key {k.describe()} (only constant keys are supported)")
    value = k.as_python_constant()
    try:
        hash(value)
    except TypeError:
        unsupported("exceptions", f"TypeError: unhashable type: {type(value).__name__!r}")
    return value


class DictVariable(VariableTracker):
    """`items` (python key -> tracker) may be lazy, like a list's: a dict read from the
    frame is wrapped and its keys guarded when the trace first looks inside it."""

    __slots__ = ("_items", "_lazy", "_size", "dict_type")

    def __init__(self, items: dict, source=None, dict_type=dict, lazy=None, size=None):
        super().__init__(source)
        self._items = dict(items) if lazy is None else None
        self._lazy = lazy
        self._size = size
        self.dict_type = dict_type

    @property
    def items(self) -> dict:
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._items = dict(lazy())
        return self._items

    @items.setter
    def items(self, value):
        self._lazy = None
        self._items = value

    def python_type(self):
        return self.dict_type

    def is_python_constant(self):
        return all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self):
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

    def describe(self):
        return f"dict with {len(self._items) if self._lazy is None else self._size} keys"

    def truthy(self, tx):
        return bool(self.items)

    def as_fx_arg(self):
        return {k: v.as_fx_arg() for k, v in self.items.items()}

    def as_fake(self):
        return {k: v.as_fake() for k, v in self.items.items()}

    def iter_items(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def check_mutable(self, what):
        if self.source is not None:
            unsupported("side_effect", f"{what} on the dict {self.source.name()!r}, which outlives the call")

    def getitem(self, tx, key):
        k = _key(tx, key)
        if k not in self.items:
            unsupported("exceptions", f"KeyError: {k!r}")
        return self.items[k]

    def setitem(self, tx, key, value):
        self.check_mutable("item assignment")
        self.items[_key(tx, key)] = value

    def delitem(self, tx, key):
        self.check_mutable("item deletion")
        k = _key(tx, key)
        if k not in self.items:
            unsupported("exceptions", f"KeyError: {k!r}")
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
            return ConstantVariable(_key(tx, args[0]) in self.items)
        if name == "keys" and n == 0:
            return DictViewVariable([ConstantVariable(k) for k in self.items], type({}.keys()))
        if name == "values" and n == 0:
            return DictViewVariable(list(self.items.values()), type({}.values()))
        if name == "items" and n == 0:
            return DictViewVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()],
                                    type({}.items()))
        if name == "get" and n in (1, 2):
            k = _key(tx, args[0])
            return self.items.get(k, args[1] if n == 2 else ConstantVariable(None))
        if name == "copy" and n == 0:
            return DictVariable(self.items)
        if name == "pop" and n in (1, 2):
            self.check_mutable("dict.pop")
            k = _key(tx, args[0])
            if k in self.items:
                return self.items.pop(k)
            if n == 2:
                return args[1]
            unsupported("exceptions", f"KeyError: {k!r}")
        if name == "setdefault" and n in (1, 2):
            k = _key(tx, args[0])
            if k not in self.items:
                self.check_mutable("dict.setdefault")
                self.items[k] = args[1] if n == 2 else ConstantVariable(None)
            return self.items[k]
        if name == "update" and n <= 1:
            self.check_mutable("dict.update")
            if args:
                self.update_from(tx, args[0])
            for k, v in kwargs.items():
                self.items[k] = v
            return ConstantVariable(None)
        if name == "clear" and n == 0:
            self.check_mutable("dict.clear")
            self.items.clear()
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def update_from(self, tx, other):
        if isinstance(other, DictVariable):
            self.items.update(other.items)
        else:
            for pair in other.iter_items(tx):
                k, v = pair.unpack_sequence(tx)
                self.items[_key(tx, k)] = v

    def __repr__(self):
        return f"DictVariable({self.items!r})"


class DictViewVariable(BaseListVariable):
    """`d.keys()`/`d.values()`/`d.items()`: iterable and sized like a list, but not a list
    (returning one, or calling a list method on it, declines)."""

    __slots__ = ("view_type",)

    def __init__(self, items, view_type):
        super().__init__(items)
        self.view_type = view_type

    def python_type(self):
        return self.view_type

    def is_python_constant(self):
        return False

    def getitem(self, tx, key):
        unsupported("exceptions", f"TypeError: {self.view_type.__name__!r} object is not subscriptable")

    def describe(self):
        return f"{self.view_type.__name__} of {len(self.items)} items"


class SetVariable(VariableTracker):
    """A set (or frozenset) of constants: literals, comprehensions, constant arguments."""

    __slots__ = ("values", "set_type")

    def __init__(self, values=(), source=None, set_type=set):
        super().__init__(source)
        self.values = set(values)
        self.set_type = set_type

    def python_type(self):
        return self.set_type

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.set_type(self.values)

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def describe(self):
        return f"set of {len(self.values)} items"

    def truthy(self, tx):
        return bool(self.values)

    def add(self, tx, item):
        if self.source is not None:
            unsupported("side_effect", f"set.add on {self.source.name()!r}, which outlives the call")
        self.values.add(_key(tx, item))

    def iter_items(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def call_method(self, tx, name, args, kwargs):
        if name == "add" and len(args) == 1:
            self.add(tx, args[0])
            return ConstantVariable(None)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(_key(tx, args[0]) in self.values)
        if name == "__len__":
            return ConstantVariable(len(self.values))
        if name in ("union", "intersection", "difference") and all(a.is_python_constant() for a in args):
            return SetVariable(getattr(self.values, name)(*[a.as_python_constant() for a in args]),
                               set_type=self.set_type)
        return super().call_method(tx, name, args, kwargs)
