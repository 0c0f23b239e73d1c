"""Objects hashed by value as dict keys and set members: instances of dataclasses whose
`__hash__` and `__eq__` are the ones `@dataclass` generated (frozen=True, or
unsafe_hash=True, with eq=True).

The generated methods read the fields and nothing else: `hash((self.a, self.b))`, and
equal only to an object of the very same class whose compared fields are equal
(NotImplemented for any other: CPython then compares identities, so `K(1)` and `1` are two
keys). Such an object's key is a `ValueKey` (dict_keys.py) holding those values, computed
as the methods would: its hash is the object's own, so a set of them iterates as the
program's. Valid where each field read is a constant, a tuple of them or itself such an
object; a NaN (unequal to itself, where the tuple's identity check would still match) or
any other value (a tensor, hashed by identity there) declines.

Guards: the class's `__hash__` and `__eq__` by identity (patching one recompiles); the
fields of an object passed in are read through its source, so their values are guarded.
A write to a field after the key was taken makes the key stale (`ValueKey.fresh`).
"""
from __future__ import annotations

import dataclasses
import enum
import math
import types
import weakref
from dataclasses import dataclass

from .._compat import PY311
from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ObjectSource, Source
from .dict_keys import ValueKey
from .lists import TupleVariable
from .objects import UserObjectVariable
from .user_objects import InstanceAttributes, NewObjectVariable


def _generated(cls, name: str):
    """`cls`'s own `name`, where dataclass generated it for `cls`, else None. Its code was
    exec'd from text (no file), by a function `__create_fn__` (3.11+ keeps the nesting in
    co_qualname), and renamed after the class; a method written in the class body (which
    dataclass keeps) has the user's file."""
    fn = vars(cls).get(name)
    if type(fn) is not types.FunctionType:
        return None
    code = fn.__code__
    if code.co_filename != "<string>" or code.co_name != name or fn.__qualname__ != f"{cls.__qualname__}.{name}":
        return None
    if PY311 and code.co_qualname != f"__create_fn__.<locals>.{name}":
        return None
    return fn


def is_value_hashed(cls) -> bool:
    """Whether objects of `cls` hash and compare by the methods dataclass generated for it."""
    params = vars(cls).get("__dataclass_params__") if isinstance(cls, type) else None
    return (params is not None and params.eq and "__dataclass_fields__" in vars(cls)
            and _generated(cls, "__hash__") is not None and _generated(cls, "__eq__") is not None)


# output → id(tracker) → (tracker, the first key taken of it)
_taken: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _guard_value_hash(tx, cls) -> None:
    klass = ObjectSource(cls, cls.__qualname__)
    for name in ("__hash__", "__eq__"):
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(klass, name), vars(cls)[name]))


def _class_of(v):
    if isinstance(v, NewObjectVariable):
        return v.cls
    if type(v) is UserObjectVariable and not v.is_module():
        return type(v.value)
    return None


def _field_writes(output, v, names) -> list:
    """What the trace has written to fields `names` of `v`'s object, now: a new object's
    instance dictionary (nothing else can be that object); for an object passed in, the
    stores of every tracker of it the trace wrote through (two sources may reach one object)."""
    if isinstance(v, InstanceAttributes):
        return [v.attrs.get(n) for n in names]
    writers = [v] + [m for m, _ in output.mutated.values()
                     if type(m) is UserObjectVariable and m.value is v.value and m is not v]
    return [m.stored.get(n) for m in writers for n in names]


def _enum_member(obj) -> bool:
    """A member of an Enum without a mixin: Enum's hash (of its name), object's identity ==."""
    cls = type(obj)
    return isinstance(obj, enum.Enum) and cls.__hash__ is enum.Enum.__hash__ and cls.__eq__ is object.__eq__


def _has_nan(c) -> bool:
    if type(c) in (tuple, frozenset):
        return any(_has_nan(x) for x in c)
    return (type(c) is float and math.isnan(c)) or (type(c) is complex and c != c)


def _component(tx, value, owner: str, name: str):
    """A field's value as the key holds it: a constant, a tuple of components, a ValueKey."""
    if type(value) is TupleVariable and value.python_type() is tuple:
        return tuple(_component(tx, item, owner, name) for item in value.items)
    cls = _class_of(value)
    if cls is not None and is_value_hashed(cls):
        return make_value_key(tx, value, cls)
    if type(value) is UserObjectVariable and _enum_member(value.value):
        member = value.value  # hashed by its name, equal only to itself: held as the member
        klass = ObjectSource(type(member), type(member).__qualname__)
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(klass, "__hash__"), enum.Enum.__hash__))
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(klass, "__eq__"), object.__eq__))
        if value.source is not None:
            tx.output.guards.add(Guard("ID_MATCH", value.source, member))
        return member
    if value.is_python_constant():
        c = value.as_python_constant()
        if _has_nan(c):
            unsupported("construct", f"{owner} object as a dict key or set member: its field {name!r} is NaN "
                                     "(equal to itself only by identity)")
        return c
    unsupported("construct", f"{owner} object as a dict key or set member: its field {name!r} is "
                             f"{value.describe()} (only constants, tuples of them and dataclasses hashed by "
                             "value are hashed by value here)")


def make_value_key(tx, v, cls) -> ValueKey:
    """`v`'s key: the fields its class's generated `__hash__` hashes and `__eq__` compares,
    read as they read them (`self.a`)."""
    _guard_value_hash(tx, cls)
    fields = dataclasses.fields(cls)
    read = {}
    for f in fields:
        if f.compare or f.hash:
            read[f.name] = _component(tx, v.var_getattr(tx, f.name), cls.__qualname__, f.name)
    hashed = tuple(read[f.name] for f in fields if (f.compare if f.hash is None else f.hash))
    compared = tuple(read[f.name] for f in fields if f.compare)
    taken = _taken.setdefault(tx.output, {})
    first = taken.get(id(v))
    if first is not None and not first[1].fresh():
        # its key in a table is under the old hash, where CPython's identity check may still
        # find it, depending on the table's layout
        unsupported("construct", f"a {cls.__qualname__} object hashed again after its fields changed")
    names = tuple(read)
    output = tx.output
    seen = _field_writes(output, v, names)

    def fresh() -> bool:
        now = _field_writes(output, v, names)
        return len(now) == len(seen) and all(a is b for a, b in zip(now, seen))
    key = ValueKey(cls, hashed, compared, v, fresh)
    if first is None:
        taken[id(v)] = (v, key)
    try:
        hash(key)
    except TypeError as e:  # a field of an unhashable type (a list made a constant)
        unsupported("exceptions", f"TypeError: {e}")
    return key


def value_key(tx, v):
    """The ValueKey of tracker `v`, or None where `v` is not an object hashed by value."""
    cls = _class_of(v)
    if cls is None or not is_value_hashed(cls):
        return None
    return make_value_key(tx, v, cls)


@dataclass(frozen=True)
class KeysSource(Source):
    """`tuple(d)`: a dict's keys in order (a key is read from it by position)."""

    base: Source

    def expr(self, ns):
        return f"tuple({self.base.ref(ns)})"

    def name(self, naming=None):
        return f"the keys of {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1
