"""Keys of dict trackers (and members of set trackers): constants, hashed by value;
`ObjectKey`s, objects hashed by identity (a module, an object of a class without
`__hash__`/`__eq__`, a tensor: identity_keys.py); `ValueKey`s, objects hashed by value (a
frozen dataclass: value_keys.py), made by the models in registry.IDENTITY_KEYS; and
`KeyItems`, a dict tracker's items."""
from __future__ import annotations

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable


MIRRORED = "mirrored"  # a set tracker's order: its own table was made as the program's (sets.py)


class ObjectKey:
    """A key hashed and compared by identity: `obj` (a real object, or the tracker of one
    made in the trace) and `var`, the tracker the trace reads it as (and rebuilds it from).
    A key of a dict passed in gets its tracker only when the trace reads the key itself
    (`make`): a lookup needs only its identity, and the entry binds the object (guards pin it)."""

    __slots__ = ("obj", "_var", "_make")

    def __init__(self, obj, var: VariableTracker | None = None, make=None):
        self.obj = obj
        self._var = var
        self._make = make

    @property
    def var(self) -> VariableTracker:
        if self._var is None:
            make, self._make = self._make, None
            self._var = make()
        return self._var

    @property
    def has_var(self) -> bool:
        return self._var is not None

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, ObjectKey) and other.obj is self.obj

    def __repr__(self):
        return f"ObjectKey({self.var.describe() if self.has_var else type(self.obj).__qualname__})"


class ValueKey:
    """A key hashed and compared by value, as its class's generated `__hash__`/`__eq__`
    (value_keys.py): `cls`, the values its `__hash__` hashes (`hashed`) and those its
    `__eq__` compares (`compared`): constants, tuples, ValueKeys; `var`, the object's
    tracker. `fresh()`: the object's fields are still those read (a later write leaves
    this key's values behind the object's: comparing it then declines)."""

    __slots__ = ("cls", "hashed", "compared", "var", "fresh")

    def __init__(self, cls, hashed: tuple, compared: tuple, var: VariableTracker, fresh):
        self.cls, self.hashed, self.compared, self.var, self.fresh = cls, hashed, compared, var, fresh

    def __hash__(self):
        return hash(self.hashed)

    def __eq__(self, other):
        if type(other) is not ValueKey or other.cls is not self.cls:
            return False  # the generated __eq__'s NotImplemented: then identity, and they differ
        if other.var is self.var:  # one object (CPython's look-up and __eq__ check identity first)
            return True
        if not (self.fresh() and other.fresh()):
            unsupported("construct", f"comparing a {self.cls.__qualname__} key whose fields changed after "
                                     "it was hashed")
        return self.compared == other.compared

    def __repr__(self):
        return f"{self.cls.__qualname__}{self.compared!r}"


def key_var(k) -> VariableTracker:
    """The tracker of key `k` of a dict (member of a set) tracker."""
    return k.var if type(k) in (ObjectKey, ValueKey) else ConstantVariable(k)


def is_object_key(k) -> bool:
    """A key that is an object of the program's, not a constant: rebuilt from its tracker."""
    return type(k) in (ObjectKey, ValueKey)


def has_object_keys(keys) -> bool:
    return any(type(k) in (ObjectKey, ValueKey) for k in keys)


def has_identity_keys(keys) -> bool:
    """Keys hashed by address here, by the object's own hash there (ValueKeys hash as their
    objects do)."""
    return any(type(k) is ObjectKey for k in keys)


def _key(tx, k: VariableTracker):
    if not k.is_python_constant():
        for identity_key in tx.registry.IDENTITY_KEYS:
            key = identity_key(tx, k)
            if key is not None:
                return key
        unsupported("construct", f"dict key {k.describe()} (only constants, objects hashed by identity "
                                 "and dataclasses hashed by value are supported)")
    value = k.as_python_constant()
    try:
        hash(value)
    except TypeError:
        unsupported("exceptions", f"TypeError: unhashable type: {type(value).__name__!r}")
    return value


class KeyItems(dict):
    """A dict tracker's items (key -> tracker) that count the changes to its set of keys
    (a value replaced under an existing key is not one), so an iterator can tell a dict
    whose keys changed from one that kept them (CPython raises or moves on; see DictIteration)."""

    __slots__ = ("key_changes",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.key_changes = 0

    def __setitem__(self, k, v):
        if k not in self:
            self.key_changes += 1
        super().__setitem__(k, v)

    def __delitem__(self, k):
        super().__delitem__(k)
        self.key_changes += 1

    def pop(self, *args):
        if args and args[0] in self:
            self.key_changes += 1
        return super().pop(*args)

    def popitem(self):
        item = super().popitem()
        self.key_changes += 1
        return item

    def clear(self):
        if self:
            self.key_changes += 1
        super().clear()

    def setdefault(self, k, default=None):
        if k not in self:
            self.key_changes += 1
        return super().setdefault(k, default)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __ior__(self, other):
        self.update(other)
        return self
