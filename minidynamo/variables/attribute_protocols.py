"""A class's own attribute protocol on objects passed in: a `__getattribute__` or
`__setattr__` written in Python (transformers' PretrainedConfig maps names through its
`attribute_map`) is inlined where CPython calls it, and the generic lookup and store it
falls back to (`super().__getattribute__(k)`, `object.__setattr__(self, k, v)`) are the
models of object's (`UserObjectVariable.generic_getattr` / `set_plain`, objects.py).

Guards on such an object read past the class's hooks, as the trace did: an attribute is
`object.__getattribute__(obj, name)`, the class is `type(obj)`, a key's absence from the
instance dictionary is asked of that dictionary itself. A C `__getattribute__` or
`__setattr__` of another kind than object's declines.
"""
from __future__ import annotations

import ctypes
import dis
import types
from dataclasses import dataclass

from ..exc import Unsupported, unsupported
from ..guards import Guard
from ..sources import AttrSource, InDictSource, ItemSource, ObjectSource, Source
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import function_var

# Instance attribute access as object's: SimpleNamespace has slot wrappers of its own for it.
GENERIC_SETATTR = (object.__setattr__, vars(types.SimpleNamespace).get("__setattr__"))
GENERIC_GETATTRIBUTE = (object.__getattribute__, vars(types.SimpleNamespace).get("__getattribute__"))
_object_getattribute = object.__getattribute__

# Many C types (tuple, int, deque...) carry slot wrappers of their own that are object's
# generic lookup and store; others (module, type, threading.local) are not. Which C
# function a wrapper calls is the type's tp_getattro / tp_setattro slot, read from the type
# object (fields 16 and 17 after its PyVarObject header, CPython 3.10-3.14).
_WORD = ctypes.sizeof(ctypes.c_void_p)
_SLOT = {"__getattribute__": (object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t) + 15 * _WORD,
                              ctypes.cast(ctypes.pythonapi.PyObject_GenericGetAttr, ctypes.c_void_p).value),
         "__setattr__": (object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t) + 16 * _WORD,
                         ctypes.cast(ctypes.pythonapi.PyObject_GenericSetAttr, ctypes.c_void_p).value)}


def _generic_slot(hook, name: str) -> bool:
    """Whether `hook`, a C type's slot wrapper for `name`, is the generic lookup / store."""
    owner = getattr(hook, "__objclass__", None)
    if type(hook) is not types.WrapperDescriptorType or not isinstance(owner, type) or \
            vars(owner).get(name) is not hook:
        return False
    offset, generic = _SLOT[name]
    return ctypes.c_void_p.from_address(id(owner) + offset).value == generic


def class_attribute(cls, name):
    """`name` as `cls` gives it to its instances: from the first class of its MRO that holds
    it, or None (inspect.getattr_static of a class would also search its metaclass:
    `type.__name__`)."""
    return next((vars(klass)[name] for klass in cls.__mro__ if name in vars(klass)), None)


def overrides_instance_dict(static) -> bool:
    """Whether a class attribute wins over the instance dictionary on a read: a data
    descriptor (`__set__` or `__delete__`) that has a `__get__` (one without is passed
    over for the dictionary's value, as CPython's lookup does)."""
    t = type(static)
    return hasattr(t, "__get__") and (hasattr(t, "__set__") or hasattr(t, "__delete__"))


def instance_dict(obj):
    """The object's `__dict__` as object's descriptor gives it (past the class's hooks), or None."""
    try:
        return _object_getattribute(obj, "__dict__")
    except AttributeError:
        return None


def own_getattribute(cls):
    """The class's `__getattribute__` where it is not object's generic one, else None."""
    hook = class_attribute(cls, "__getattribute__")
    return None if hook in GENERIC_GETATTRIBUTE or _generic_slot(hook, "__getattribute__") else hook


def own_setattr(cls):
    """The class's `__setattr__` where it is not object's generic one, else None."""
    hook = class_attribute(cls, "__setattr__")
    return None if hook in GENERIC_SETATTR or _generic_slot(hook, "__setattr__") else hook


# --- sources past the class's hooks ------------------------------------------------------
@dataclass(frozen=True)
class GenericAttrSource(AttrSource):
    """`object.__getattribute__(obj, attr)`: what the generic lookup finds, whatever the
    class's own `__getattribute__` would answer (an AttrSource: writes replace it alike)."""

    def expr(self, ns):
        return f"{ns.bind(_object_getattribute, 'object_getattribute')}({self.base.expr(ns)}, {self.attr!r})"

    def name(self, naming=None):
        return f"object.__getattribute__({self.base.name(naming)}, {self.attr!r})"


def generic_finds(obj, name: str) -> bool:
    """Whether object.__getattribute__ would find `name` on `obj`: on its class's MRO or
    in its instance dictionary (no descriptor is run)."""
    if any(name in vars(klass) for klass in type(obj).__mro__):
        return True
    found = instance_dict(obj)
    return found is not None and name in found


@dataclass(frozen=True)
class GenericFindsSource(Source):
    """`generic_finds(obj, attr)`, asked again by the entry."""

    base: Source
    attr: str

    def expr(self, ns):
        return f"{ns.bind(generic_finds, 'generic_finds')}({self.base.expr(ns)}, {self.attr!r})"

    def name(self, naming=None):
        return f"whether object.__getattribute__ finds {self.attr!r} on {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


def dict_source(obj_source) -> Source:
    """The instance dictionary of the object at `obj_source`, past its class's hooks."""
    return GenericAttrSource(obj_source, "__dict__")


def guard_not_in_dict(tx, obj_source, name, generic: bool) -> None:
    """That the object has no instance attribute `name` (a class attribute it would shadow,
    a key `__dict__.get` did not find)."""
    if generic:
        tx.output.guards.add(Guard("NOT_IN_DICT", obj_source, None, {"attr": name}))
    else:
        tx.output.guards.add(Guard("EQUALS_MATCH", InDictSource(dict_source(obj_source), name), False))


def guard_generic_miss(tx, obj_source, name) -> None:
    """That object.__getattribute__ still finds no `name` (hasattr() went on without it)."""
    tx.output.guards.add(Guard("EQUALS_MATCH", GenericFindsSource(obj_source, name), False))


# --- the hooks, inlined -------------------------------------------------------------------
def _may_catch(code) -> bool:
    """Whether `code` has a try block: its handlers are never run by a trace, so an
    AttributeError leaving the inlined hook is not known to be the one CPython raises."""
    table = getattr(code, "co_exceptiontable", None)  # 3.11+
    if table is not None:
        return bool(table)
    return any(i.opname == "SETUP_FINALLY" for i in dis.get_instructions(code))


def call_getattribute(tx, obj, name: str, hook):
    """`obj.name` where the class's own `__getattribute__` answers: the hook inlined, its
    identity pinned. An AttributeError it may have caught itself declines."""
    hook = _python_hook_checked(tx, obj, "__getattribute__", hook)
    try:
        return function_var(hook).call_function(tx, [obj, ConstantVariable(name)], {})
    except Unsupported as e:
        if e.raises(AttributeError) and _may_catch(hook.__code__):
            unsupported("construct", f"{obj.python_type().__qualname__}.__getattribute__ may catch the "
                                     f"AttributeError for {name!r} (its try blocks are not traced)")
        raise


def call_setattr(tx, obj, name: str, value, hook) -> None:
    """`obj.name = value` where the class's own `__setattr__` decides: inlined, pinned."""
    hook = _python_hook_checked(tx, obj, "__setattr__", hook)
    tx.call_directly(function_var(hook), [obj, ConstantVariable(name), value], {})  # raises as CPython's


def _python_hook_checked(tx, obj, kind, hook):
    cls = obj.python_type()
    if not isinstance(hook, types.FunctionType):
        unsupported("construct", f"{cls.__qualname__}.{kind} is {hook!r}, which is not traced")
    if obj.is_module():
        unsupported("construct", f"{cls.__qualname__}.{kind} of a torch module is not traced")
    # The class may be patched: pinned as its methods are.
    if getattr(obj, "guard_class_function", None) is not None and obj.source is not None:
        obj.guard_class_function(tx, kind, hook)
    else:  # made in the trace: read through its class
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(ObjectSource(cls, cls.__qualname__), kind), hook))
    return hook


def plain_writeback(obj, rb, target: str, temp: str) -> tuple[str, str]:
    """(the values, the statements setting them): the attributes the trace set on `obj`,
    through object.__setattr__ as the trace's stores were (the class's own __setattr__,
    already traced, is not run again)."""
    names = list(obj.stored)
    content = "(" + "".join(f"{rb.expr(obj.stored[n])}, " for n in names) + ")"
    setattr_ = rb.ns.bind(object.__setattr__, "object_setattr")
    raw = getattr(obj, "raw_stores", ())
    getattr_ = rb.ns.bind(_object_getattribute, "object_getattribute") if raw else None
    apply = "; ".join(f"{getattr_}({target}, '__dict__')[{n!r}] = {temp}[{i}]" if n in raw
                      else f"{setattr_}({target}, {n!r}, {temp}[{i}])" for i, n in enumerate(names))
    return content, apply or "pass"


# --- object.__getattribute__ / object.__setattr__ bound to an object --------------------
class GenericGetattribute(VariableTracker):
    """`object.__getattribute__` bound to an object (through super(), or called with it):
    the generic lookup, past the class's own hook."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def describe(self):
        return f"object.__getattribute__ of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs or not args[0].is_python_constant() or \
                not isinstance(args[0].as_python_constant(), str):
            unsupported("construct", "object.__getattribute__ with these arguments")
        generic = getattr(self.obj, "generic_getattr", None)  # a passed-in object
        if generic is not None and self.obj.is_module():  # (its model answers Module.__getattr__ too)
            unsupported("construct", "object.__getattribute__ of a torch module is not traced")
        name = args[0].as_python_constant()
        return generic(tx, name) if generic is not None else self.obj.var_getattr(tx, name)


class PlainSetattr(GenericGetattribute):
    """`object.__setattr__` bound to an object (through super(), or called with it): its
    tracker's `set_plain` (a data descriptor's setter, else the instance dictionary)."""

    def describe(self):
        return f"object.__setattr__ of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        if len(args) != 2 or kwargs or not args[0].is_python_constant() or \
                not isinstance(args[0].as_python_constant(), str):
            unsupported("construct", "object.__setattr__ with these arguments")
        self.obj.set_plain(tx, args[0].as_python_constant(), args[1])
        return ConstantVariable(None)


# --- obj.__dict__ of an object passed in ------------------------------------------------
class InstanceDictView(VariableTracker):
    """`obj.__dict__` of an object passed in, read key by key: a key read is guarded
    through its own source (its value), a key found absent by a guard that it stays
    absent; the other keys are not guarded. Attributes the trace set are seen. Anything
    but reading (writes, iteration) declines."""

    __slots__ = ("owner",)

    def __init__(self, owner):
        super().__init__(dict_source(owner.source))
        self.owner = owner

    def python_type(self):
        return dict

    def describe(self):
        return f"the __dict__ of {self.owner.describe()}"

    def _lookup(self, tx, key, value=True):
        """The tracker under `key` (`value=False`: True), or None where the dictionary has
        none; guarded."""
        if not key.is_python_constant() or not isinstance(key.as_python_constant(), str):
            unsupported("construct", f"{self.describe()} read with {key.describe()}")
        name = key.as_python_constant()
        if name in self.owner.stored:
            return self.owner.stored[name]
        real = _object_getattribute(self.owner.value, "__dict__")
        if name in real and not value:
            tx.output.guards.add(Guard("EQUALS_MATCH", InDictSource(self.source, name), True))
            return ConstantVariable(True)
        if name in real:
            return tx.wrap(real[name], ItemSource(self.source, name))
        tx.output.guards.add(Guard("EQUALS_MATCH", InDictSource(self.source, name), False))
        return None

    def var_getattr(self, tx, name):
        if name in ("get", "__getitem__", "__contains__", "__setitem__"):
            return self.method_getattr(tx, name)
        unsupported("construct", f"{name!r} of {self.describe()} (only reads and writes by key are traced)")

    def call_method(self, tx, name, args, kwargs):
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            found = self._lookup(tx, args[0])
            return found if found is not None else (args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            found = self._lookup(tx, args[0])
            if found is None:
                unsupported("exceptions", f"KeyError: {args[0].as_python_constant()!r}")
            return found
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._lookup(tx, args[0], value=False) is not None)
        if name == "__setitem__" and len(args) == 2 and not kwargs:
            key = args[0]
            if not key.is_python_constant() or not isinstance(key.as_python_constant(), str):
                unsupported("side_effect", f"item assignment on {self.describe()} with {key.describe()}")
            self.owner.set_in_dict(tx, key.as_python_constant(), args[1])
            return ConstantVariable(None)
        unsupported("construct", f"{name!r} of {self.describe()} (only reads and writes by key are traced)")

    def setitem(self, tx, key, value):
        self.call_method(tx, "__setitem__", [key, value], {})

    def getitem(self, tx, key):
        return self.call_method(tx, "__getitem__", [key], {})

    def contains(self, tx, key):
        return self.call_method(tx, "__contains__", [key], {})
