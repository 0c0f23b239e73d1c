"""Objects of dict and OrderedDict subclasses — transformers' `ModelOutput` and its kind —
made in the trace, passed in, and rebuilt after the graph.

Such an object is a dict tracker (its items: len(), iteration, `dict(o)`, `**o` and the views
treat it as the dict it is) and an `InstanceAttributes` (its `__dict__`, methods, class
attributes). The class's own Python methods (`__init__`, a dataclass's too, `__post_init__`,
`__setitem__`, `__getitem__`, `__setattr__`, `keys`, `to_tuple`...) are inlined wherever
CPython calls them: `o[k]`, `o[k] = v`, `del o[k]`, `k in o`, `iter(o)`, attribute writes,
and where dict's or OrderedDict's C code calls back into the object (OrderedDict.update,
setdefault and copy, `dict(o)` of an OrderedDict or of a class with its own `__iter__`).
What the builtin base defines runs on the items as that base does (`BaseMethodVariable`,
reached through the class, `super()` or `dict.__setitem__(o, ...)`).

Made in the trace, nothing outside holds the object until it escapes: changes are not side
effects. Escaping, it is rebuilt: `dict.__new__(cls)`, its items set through the base's
`__setitem__` (never the class's), its `__dict__` filled. Passed in, it is guarded by type and
by its keys in order (read through the base, never the class's methods), its items and
attributes read through their own sources; changes are written back after the graph,
through the base.
"""
from __future__ import annotations

import dataclasses
import sys
import types
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, Source
from .base import VariableTracker
from .collections_types import OrderedDictVariable
from .constant import ConstantVariable
from .dicts import DictVariable, _key, key_var
from .lists import pulled_one_by_one
from .identity_keys import note_identity
from .lists import iterator_of
from .made_classes import class_expr
from .objects import UserObjectVariable
from .user_objects import (InstanceAttributes, InstanceDictVariable, _class_var, init_object, is_user_class,
                           python_method, why_not_modelled)
from ..side_effects import read_first

_BASES = (dict, OrderedDict)
# OrderedDict's pop and popitem ask a subclass's own __contains__/__getitem__/__delitem__ on
# 3.10 only (3.11's read the items directly).
_ODICT_POP_CALLS_BACK = sys.version_info < (3, 11)


def why_not_modelled_dict(cls) -> str | None:
    """Why objects of dict subclass `cls` are not modelled (None: they are)."""
    why = why_not_modelled(cls, bases=_BASES)
    if why is None and python_method(cls, "__len__") is not None:
        why = f"{cls.__qualname__} defines __len__ (len() of a dict tracker reads its items)"
    return why


def is_dict_subclass(cls) -> bool:
    """A user class with dict (or OrderedDict) among its bases (defaultdict and Counter have
    models of their own)."""
    return isinstance(cls, type) and issubclass(cls, dict) and cls not in (dict, OrderedDict) \
        and not issubclass(cls, (defaultdict, Counter)) and is_user_class(cls)


def _modelled_instance(value) -> bool:
    cls = type(value)
    return is_dict_subclass(cls) and why_not_modelled_dict(cls) is None


# --- run time: filling the real object through its builtin base ---------------------------
def set_items(obj, items: dict) -> None:
    """Put `items` into `obj`, through its builtin base (never the class's __setitem__)."""
    if isinstance(obj, OrderedDict):
        for k, v in items.items():
            OrderedDict.__setitem__(obj, k, v)
    else:
        dict.update(obj, items)


def replace_items(obj, items: dict) -> None:
    """`obj`'s items become `items` (a write-back after the graph)."""
    (OrderedDict if isinstance(obj, OrderedDict) else dict).clear(obj)
    set_items(obj, items)


def base_keys(obj) -> tuple:
    """`obj`'s keys in order, read through its builtin base (never the class's own keys())."""
    return tuple((OrderedDict if isinstance(obj, OrderedDict) else dict).keys(obj))


@dataclass(frozen=True)
class BaseKeysSource(Source):
    """`base_keys(x)`: the keys in order, read without the class's own methods."""

    base: Source

    def expr(self, ns):
        return f"{ns.bind(base_keys, 'base_keys')}({self.base.expr(ns)})"

    def name(self, naming=None):
        return f"the keys of {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


@dataclass(frozen=True)
class BaseItemSource(Source):
    """`dict.__getitem__(x, key)`: an item, read without the class's own __getitem__."""

    base: Source
    key: object

    def expr(self, ns):
        key = repr(self.key) if type(self.key) in (int, str, bool, float, type(None)) else ns.bind(self.key, "key")
        return f"{ns.bind(dict.__getitem__, 'dict_getitem')}({self.base.expr(ns)}, {key})"

    def name(self, naming=None):
        return f"{self.base.name(naming)}[{self.key!r}]"

    @property
    def depth(self):
        return self.base.depth + 1


# --- the trackers ---------------------------------------------------------------------------
class _DictObject(InstanceAttributes):
    """What both trackers (dict and OrderedDict bases) share; `base_tracker` is the tracker
    class of the builtin base, whose methods run the base's own behaviour on the items."""

    __slots__ = ()
    base_tracker = DictVariable

    @property
    def base(self) -> type:
        return OrderedDict if issubclass(self.cls, OrderedDict) else dict

    def describe(self):
        return f"{self.cls.__qualname__} object" + (" made in the trace" if self.source is None else "")

    def is_python_constant(self):
        return False

    def as_python_constant(self):
        return VariableTracker.as_python_constant(self)

    def __repr__(self):
        return f"{type(self).__name__}({self.cls.__qualname__}, {self.items!r}, {list(self.attrs)})"

    # --- the item protocol: the class's own methods where it has them --------------------
    def getitem(self, tx, key):
        return self.call_method(tx, "__getitem__", [key], {})

    def setitem(self, tx, key, value):
        self.call_method(tx, "__setitem__", [key, value], {})

    def delitem(self, tx, key):
        self.call_method(tx, "__delitem__", [key], {})

    def make_iterator(self, tx, reverse: bool = False):
        name = "__reversed__" if reverse else "__iter__"
        if python_method(self.cls, name) is None:
            return self.base_tracker.make_iterator(self, tx, reverse)
        return iterator_of(tx, self.call_method(tx, name, [], {}))

    def iter_items(self, tx):
        if python_method(self.cls, "__iter__") is None:
            return self.base_tracker.iter_items(self, tx)
        return list(pulled_one_by_one(tx, self.make_iterator(tx)))

    def reversed_items(self, tx):
        if python_method(self.cls, "__reversed__") is None:
            return self.base_tracker.reversed_items(self, tx)
        return list(pulled_one_by_one(tx, self.make_iterator(tx, reverse=True)))

    def merge_items(self, tx) -> dict:
        """dict(o), d.update(o), {**o}, f(**o): CPython reads the items directly only for a
        dict whose iteration is dict's own; otherwise through `o.keys()` and `o[k]`."""
        if self.base is dict and python_method(self.cls, "__iter__") is None:
            return self.items
        keys = self.call_method(tx, "keys", [], {})
        return {_key(tx, k): self.getitem(tx, k) for k in list(pulled_one_by_one(tx, keys))}

    def equals(self, tx, other):
        return DictVariable.equals(self, tx, other)

    # --- the builtin base's methods ------------------------------------------------------
    def builtin_attr(self, tx, name, owner):
        if not callable(vars(owner)[name]):
            unsupported("construct", f"attribute {name!r} of {owner.__qualname__} on a {self.describe()}")
        return BaseMethodVariable(self, owner, name)

    def base_call(self, tx, owner, name, args, kwargs):
        """`owner.name(self, *args, **kwargs)`, owner a builtin base of the class: what that C
        method does, calling back into the class's Python methods where it does."""
        n = len(args)
        if name == "__init__":
            self._update(tx, "__init__", args, kwargs)
            return ConstantVariable(None)
        if kwargs and name != "update":
            unsupported("exceptions", f"TypeError: {owner.__name__}.{name}() takes no keyword arguments")
        if name == "__getitem__" and n == 1:
            k = _key(tx, args[0])
            if k in self.items:
                return self.items[k]
            if python_method(self.cls, "__missing__") is not None:  # dict.__getitem__ asks a subclass
                return self.call_method(tx, "__missing__", [args[0]], {})
            unsupported("exceptions", f"KeyError: {k!r}")
        if name == "__setitem__" and n == 2:
            DictVariable.setitem(self, tx, args[0], args[1])
            return ConstantVariable(None)
        if name == "__delitem__" and n == 1:
            DictVariable.delitem(self, tx, args[0])
            return ConstantVariable(None)
        if name in ("__iter__", "__reversed__") and n == 0:
            return self.base_tracker.make_iterator(self, tx, name == "__reversed__")
        if name in ("__eq__", "__ne__") and n == 1:
            if not isinstance(args[0], DictVariable):
                return ConstantVariable(NotImplemented)
            return ConstantVariable(self.equals(tx, args[0]) == (name == "__eq__"))
        if name == "update":
            self._update(tx, "update", args, kwargs)
            return ConstantVariable(None)
        if name == "copy" and n == 0:
            return self._copy(tx)
        if self.base is OrderedDict and name == "setdefault" and n in (1, 2):
            return self._setdefault(tx, args[0], args[1] if n == 2 else ConstantVariable(None))
        if _ODICT_POP_CALLS_BACK and self.base is OrderedDict and name in ("pop", "popitem") and any(
                python_method(self.cls, m) for m in ("__contains__", "__getitem__", "__delitem__")):
            unsupported("construct", f"OrderedDict.{name} on a {self.describe()} whose class defines "
                                     "__contains__, __getitem__ or __delitem__ (Python 3.10 calls them back)")
        if name in ("__or__", "__ror__", "__ior__", "fromkeys", "__reduce__", "__repr__", "__sizeof__"):
            unsupported("call", f"{owner.__qualname__}.{name} on a {self.describe()} is not traced")
        return self.base_tracker.call_method(self, tx, name, args, kwargs)

    def _update(self, tx, what, args, kwargs) -> None:
        """dict.__init__/update (the items directly), or OrderedDict's (each pair through the
        object's own __setitem__, as its C code does for a subclass)."""
        if len(args) > 1:
            unsupported("exceptions", f"TypeError: {what} expected at most 1 argument, got {len(args)}")
        if self.base is dict:
            if args:
                self.update_from(tx, args[0])
            for k, v in kwargs.items():
                DictVariable.setitem(self, tx, ConstantVariable(k), v)
            return
        pairs = []
        if args:
            other = args[0]
            if isinstance(other, DictVariable) and other.python_type() is dict:
                pairs = [(key_var(k), v) for k, v in other.items.items()]
            elif isinstance(other, DictVariable):  # a mapping: its keys(), then other[k]
                keys = other.call_method(tx, "keys", [], {})
                pairs = [(k, other.getitem(tx, k)) for k in list(pulled_one_by_one(tx, keys))]
            else:
                for pair in pulled_one_by_one(tx, other):
                    k, v = pair.unpack_sequence(tx)
                    self.setitem(tx, k, v)
        for k, v in pairs + [(ConstantVariable(k), v) for k, v in kwargs.items()]:
            self.setitem(tx, k, v)

    def _copy(self, tx):
        """dict.copy: a plain dict. OrderedDict.copy: `type(o)()`, then each item read and
        set through the objects' own methods."""
        if self.base is dict:
            return DictVariable(dict(self.items))
        made = _class_var(self.cls).call_function(tx, [], {})
        for k in list(self.items):
            made.setitem(tx, key_var(k), self.getitem(tx, key_var(k)))
        return made

    def _setdefault(self, tx, key, default):
        """OrderedDict.setdefault on a subclass: `key in o`, then o[key] or o[key] = default."""
        if self.call_method(tx, "__contains__", [key], {}).truthy(tx):
            return self.getitem(tx, key)
        self.setitem(tx, key, default)
        return default

    # --- after the graph (rebuild.py, side_effects.py) ------------------------------------
    def rebuild_new(self, rb) -> str:
        return f"{rb.ns.bind(dict.__new__, 'dict_new')}({class_expr(rb, self.cls)})"

    def rebuild_fill(self, rb, name) -> list:
        lines = []
        if self.items:
            body = ", ".join(f"{rb.key(k)}: {rb.expr(v)}" for k, v in self.items.items())
            lines.append(f"{rb.ns.bind(set_items, 'set_items')}({name}, {{{body}}})")
        return lines + self.fill_attrs(rb, name)

    def writeback(self, rb, target, temp):
        """(the new items, the statement putting them in): a passed-in object the trace changed."""
        self._read_replaced_first(rb)
        body = ", ".join(f"{rb.key(k)}: {rb.expr(v)}" for k, v in self.items.items())
        return f"{{{body}}}", f"{rb.ns.bind(replace_items, 'replace_items')}({target}, {temp})"

    def _read_replaced_first(self, rb) -> None:
        """What the trace read from an item the write-back replaces (`old = o["a"]; o["a"] = new;
        return old`) is read into a temporary before the write-back, and rebuilt from it."""
        wrapped = self.outside.wrapped
        read_first(rb, wrapped, {source for source, (_, var) in wrapped.items() if isinstance(source, BaseItemSource)
                                 and source.base == self.source and self.items.get(source.key) is not var})


class DictObjectVariable(_DictObject, DictVariable):
    """An object of a dict subclass (`outside`: the trace's OutputGraph, for one passed in)."""

    __slots__ = ("cls", "instance_dict", "outside")

    def __init__(self, cls, source=None, lazy=None, size=None, instance_dict=None, outside=None):
        DictVariable.__init__(self, {}, source, dict_type=cls, lazy=lazy, size=size)
        self.cls = cls
        self.instance_dict = instance_dict if instance_dict is not None else InstanceDictVariable(self)
        self.outside = outside


class OrderedDictObjectVariable(_DictObject, OrderedDictVariable):
    """An object of an OrderedDict subclass."""

    __slots__ = ("cls", "instance_dict", "outside")
    base_tracker = OrderedDictVariable

    def __init__(self, cls, source=None, lazy=None, size=None, instance_dict=None, outside=None):
        OrderedDictVariable.__init__(self, {}, source, lazy=lazy, size=size)
        self.dict_type = cls
        self.cls = cls
        self.instance_dict = instance_dict if instance_dict is not None else InstanceDictVariable(self)
        self.outside = outside


def _tracker_class(cls):
    return OrderedDictObjectVariable if issubclass(cls, OrderedDict) else DictObjectVariable


class BaseMethodVariable(VariableTracker):
    """A method of a builtin base (dict, OrderedDict) bound to an object of a subclass:
    `o.keys`, `super().__setitem__`. It exists only in the trace (returning it declines)."""

    __slots__ = ("obj", "owner", "name")

    def __init__(self, obj, owner, name):
        super().__init__(None)
        self.obj, self.owner, self.name = obj, owner, name

    def describe(self):
        return f"method {self.owner.__qualname__}.{self.name} of a {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        return self.obj.base_call(tx, self.owner, self.name, args, kwargs)


# --- made in the trace ----------------------------------------------------------------------
def _construct(tx, cls, args, kwargs):
    why = why_not_modelled_dict(cls)
    if why is not None:
        unsupported("call", f"creating a {cls.__qualname__} object while tracing: {why}")
    obj = _tracker_class(cls)(cls)
    if python_method(cls, "__init__") is None:  # dict's or OrderedDict's own
        obj.base_call(tx, obj.base, "__init__", args, kwargs)
    else:
        init_object(tx, cls, obj, args, kwargs)
    return obj


# --- passed in ------------------------------------------------------------------------------
def _wrap_dict_object(tx, value, source):
    """An object of a modelled dict subclass read from the frame: guarded by type, its keys
    in order (when first looked into) and its attributes' names; one tracker per object."""
    cls = type(value)
    seen = tx.output.containers.get(id(value))
    if seen is not None and seen[0] is value:
        tx.output.guards.add(Guard("ALIAS_MATCH", source, True, {"other": seen[2]}))
        return seen[1]
    tx.output.guards.add(Guard("TYPE_MATCH", source, cls))

    def entries():
        keys = base_keys(value)
        tx.output.guards.add(Guard("EQUALS_MATCH", BaseKeysSource(source), keys))
        return {k: tx.wrap(dict.__getitem__(value, k), BaseItemSource(source, k)) for k in keys}

    instance_dict = tx.wrap(vars(value), AttrSource(source, "__dict__"))
    var = _tracker_class(cls)(cls, source, lazy=entries, size=len(value), instance_dict=instance_dict,
                              outside=tx.output)
    tx.output.containers[id(value)] = (value, var, source)
    note_identity(tx, source, value)  # two names for one object would be two trackers
    return var


# --- dataclasses.Field: what `dataclasses.fields(o)` reads ------------------------------------
class FieldVariable(UserObjectVariable):
    """A `dataclasses.Field` (a value of a class's `__dataclass_fields__`): its attributes
    are slots, each read with its value guarded."""

    __slots__ = ()

    def var_getattr(self, tx, name):
        if name in dataclasses.Field.__slots__:
            return tx.wrap(getattr(self.value, name), self._attr_source(name))
        return super().var_getattr(tx, name)

    def consumer_snapshot(self, of) -> tuple:
        return ()  # an outside object the trace cannot change (generators.py)


def _wrap_field(tx, value, source):
    if source is not None:
        tx.output.guards.add(Guard("TYPE_MATCH", source, dataclasses.Field))
    return FieldVariable(value, source)


# --- dict.__setitem__(o, k, v) and the like, called through the class ------------------------
_UNBOUND: dict = {}  # dict's and OrderedDict's method descriptors → (owner, name)


def _unbound_call(owner, name):
    def handler(tx, args, kwargs):
        if not args or not isinstance(args[0], DictVariable) or not issubclass(args[0].python_type(), owner):
            return None  # the eager call's TypeError, or not a dict
        if isinstance(args[0], _DictObject):
            return args[0].base_call(tx, owner, name, list(args[1:]), kwargs)
        return args[0].call_method(tx, name, list(args[1:]), kwargs)  # a dict type's own model
    return handler


def unbound_handlers() -> dict:
    """The handlers of the C methods of the dict types modelled here, called unbound
    (`dict.__setitem__(self, k, v)` in a subclass's method): registry.py."""
    return {attr: _unbound_call(owner, name) for attr, (owner, name) in _UNBOUND.items()}


def _collect_unbound():
    for owner in _BASES:
        for name, attr in vars(owner).items():
            if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)):
                _UNBOUND[attr] = (owner, name)


def _is_unbound(value) -> bool:
    return type(value) in (types.MethodDescriptorType, types.WrapperDescriptorType) and value in _UNBOUND


_collect_unbound()
