"""Objects hashed by identity as dict keys and set members: modules and other objects whose
class keeps `object.__hash__` and `object.__eq__` (or, for an Enum without a mixin, Enum's
`__hash__`), and tensors the function was given (torch's
`named_modules()` keeps a `memo = set()` of modules, `parameters()` one of tensors;
`{m: i for i, m in enumerate(model.children())}`).

Such a key is an `ObjectKey` (dicts.py): the real object for one passed in (its tracker
rebuilds it after the graph, from its source), the tracker itself for one made in the
trace (nothing else can be that object). What the trace decided by hashing them is which
of them are one object, so the sources of the keys an entry used are pinned together by
one guard, `same_objects(...)`: the same pattern of identities on every call it serves
(`m.a is m.b` as traced, and no two others the same). Their classes' `__hash__`/`__eq__`
are guarded by identity (patching one in recompiles).

Dicts passed in whose keys are such objects (a cache keyed by tensors or modules) or
`torch.Size`s: keys guarded in order, those hashed by identity as the very objects (the
entry holds them), each of them one of the sources `same_objects` pins (a key that is also
the function's argument `x` is `x` on every call the entry serves, and no other is).
Keys that are dataclasses hashed by value (value_keys.py) are guarded equal, their fields
read through the dict (`tuple(d)[i].a`).

Also: sets of classes or functions passed in (a registry of types, of hooks), guarded by their
contents in order.
"""
from __future__ import annotations

import enum
import types

import torch

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource, ObjectSource
from .constant import is_constant_value
from .dicts import DictVariable, ObjectKey
from .sets import SetVariable
from .nn_modules import NewContainerVariable
from .objects import UserObjectVariable
from .tensor import TensorVariable
from .user_objects import InstanceAttributes
from .same_objects import note_identity  # noqa: F401 (imported from here too)
from .value_keys import KeysSource, is_value_hashed, make_value_key


def _identity_hash(cls) -> object:
    """The `__hash__` a class of objects compared by identity keeps: object's, or Enum's (a
    member hashes by its name; its class has no other member of that name)."""
    return enum.Enum.__hash__ if isinstance(cls, enum.EnumMeta) else object.__hash__


def _guard_identity_hash(tx, cls) -> None:
    """`cls` hashes and compares by identity, now and on every call the entry serves."""
    klass = ObjectSource(cls, cls.__qualname__)
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(klass, "__hash__"), _identity_hash(cls)))
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(klass, "__eq__"), object.__eq__))


def _hashed_by_identity(tx, cls, what: str) -> None:
    if cls.__hash__ is None:
        unsupported("exceptions", f"TypeError: unhashable type: {cls.__qualname__!r}")
    if cls.__hash__ is not _identity_hash(cls) or cls.__eq__ is not object.__eq__:
        unsupported("construct", f"{what} as a dict key or set member: {cls.__qualname__} defines its own "
                                 "__hash__ or __eq__")
    _guard_identity_hash(tx, cls)


def identity_key(tx, v):
    """The ObjectKey of tracker `v`, or None where `v` is not an object hashed by identity."""
    if isinstance(v, TensorVariable):  # Tensor.__hash__ is id(): an input's own tensor
        example = tx.output.example_of(v)
        if example is None or v.source is None:
            return None  # made by the graph: which real tensor it will be is not known here
        cls = type(example)
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(ObjectSource(cls, cls.__qualname__), "__hash__"),
                                   cls.__hash__))
        note_identity(tx, v.source, example)
        return ObjectKey(example, v)
    if isinstance(v, UserObjectVariable):  # passed in (or a module template made in the trace)
        _hashed_by_identity(tx, type(v.value), v.describe())
        note_identity(tx, v.source, v.value)
        return ObjectKey(v.value, v)
    if isinstance(v, InstanceAttributes) or isinstance(v, NewContainerVariable):  # made in the trace
        _hashed_by_identity(tx, v.cls, v.describe())
        return ObjectKey(v, v)
    return None



# --- dicts passed in with keys hashed by identity ------------------------------------------
def _value_key(k) -> bool:
    """A key the trace holds as it is: a constant, a torch.Size, a class, or a function — a
    function is hashed by identity, and its tracker is that very object as a constant, so
    a lookup by it (`fn in d`, `d[fn]`) finds the real key."""
    return is_constant_value(k) or type(k) is torch.Size or _identity_hashed_class(k) or _plain_function(k)


def _plain_function(k) -> bool:
    return type(k) is types.FunctionType or (
        type(k) is types.BuiltinFunctionType and (k.__self__ is None or isinstance(k.__self__, types.ModuleType)))


def _identity_object(k) -> bool:
    """A key hashed by identity: a tensor (Tensor.__hash__ is id) or an object whose class
    keeps object's __hash__ and __eq__ (a module, a plain object)."""
    cls = type(k)
    if isinstance(k, torch.Tensor):
        return cls.__hash__ is torch.Tensor.__hash__
    return not isinstance(k, type) and cls.__hash__ is _identity_hash(cls) and cls.__eq__ is object.__eq__


def passed_in_keys(tx, value, source, kind) -> list:
    """The keys of dict `value` (of type `kind`) read from `source`, as a dict tracker holds
    them, and the guard on them: in order, each hashed by identity the very object."""
    keys = tuple(value)
    by_value = tuple(not _value_key(k) and is_value_hashed(type(k)) for k in keys)
    by_id = tuple(not _value_key(k) and not v for k, v in zip(keys, by_value))
    out = []
    for i, (k, identity) in enumerate(zip(keys, by_id)):
        if by_value[i]:  # a frozen dataclass: equal keys (the guard), fields read from the key itself
            var = tx.wrap(k, ItemSource(KeysSource(source), i)) if source is not None else tx.wrap(k, None)
            out.append(make_value_key(tx, var, type(k)))
            continue
        if not identity:
            out.append(k)
            continue
        if not _identity_object(k):
            unsupported("construct", f"a {kind.__name__} with the key {type(k).__qualname__}(...) (only "
                                     "constants, torch.Size, classes, tensors, objects hashed by identity "
                                     "and dataclasses hashed by value are supported)")
        cls = type(k)
        if not isinstance(k, torch.Tensor):
            _guard_identity_hash(tx, cls)
        key_source = ObjectSource(k, f"{source.name() if source else 'dict'}.keys()[{i}]")
        note_identity(tx, key_source, k)
        out.append(ObjectKey(k, make=lambda k=k, s=key_source: tx.wrap(k, s)))
    if source is not None:
        tx.output.guards.add(Guard("DICT_KEYS", source, keys, {"type": kind, "by_id": by_id if any(by_id) else None}))
    return out


def _wrap_dict(tx, value, source):
    """A plain dict passed in with keys hashed by identity (see the module's docstring)."""
    def entries():
        items = tuple(value.items())  # a snapshot, as the builder's
        keys = passed_in_keys(tx, value, source, dict)
        return {key: tx.wrap(v, ItemSource(source, k) if source else None)
                for key, (k, v) in zip(keys, items)}
    if source is None:
        return DictVariable(entries())
    tx.output.guards.add(Guard("TYPE_MATCH", source, dict))
    return DictVariable({}, source, lazy=entries, size=len(value), real=value)


# --- sets of classes passed in ------------------------------------------------------------
def _identity_hashed_class(k) -> bool:
    """A class whose metaclass keeps type's identity __eq__ and __hash__."""
    return isinstance(k, type) and type(k).__eq__ is type.__eq__ and type(k).__hash__ is type.__hash__


def _is_set_of_classes(value) -> bool:
    """A set of constants and classes or plain functions (both hashed by identity, held as
    themselves: `fn in hooks` finds the real member)."""
    return type(value) in (set, frozenset) and not all(is_constant_value(v) for v in value) and all(
        is_constant_value(v) or _identity_hashed_class(v) or _plain_function(v) for v in value)


def _wrap_set_of_classes(tx, value, source):
    snapshot = frozenset(value)  # a set changes in place: guard and trace its contents now
    if source is not None:
        # its iteration order too: equal sets iterate in the order they were made in
        tx.output.guards.add(Guard("DICT_KEYS", source, tuple(value), {"type": type(value)}))
    return SetVariable(set(snapshot), source, set_type=type(value), order=tuple(value) if source else None)
