"""Plain Python objects, classes and modules reached from the frame.

Reading an attribute wraps it with an `AttrSource` (so it is guarded and, for tensors,
read at call time); methods are inlined with `self` bound; `obj.__class__` is the class,
guarded. Writing a plain attribute of an object from outside is a side effect the entry
makes after the graph (`UserObjectVariable.store_attr`, side_effects.py); a write that
runs code of the class's (a property, a slot) declines the trace. A class's own
`__getattribute__` / `__setattr__` in Python is inlined (attribute_protocols.py).
"""
from __future__ import annotations

import collections
import enum
import inspect
import logging
import types
from dataclasses import dataclass

import torch

from ..exc import exception_made, Raised, Unsupported, unsupported
from ..sources import AttrSource, InDictSource, ItemSource, ObjectSource, Source
from .attribute_protocols import (GenericAttrSource, InstanceDictView,
                                  call_getattribute, call_setattr, dict_source, guard_generic_miss, guard_not_in_dict,
                                  instance_dict, overrides_instance_dict, own_getattribute, own_setattr,
                                  plain_writeback)
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable
from .functions import bound_member, function_var, UserMethodVariable
from .contexts import make_context_manager
from ..guards import Guard
from .module_calls import call_module
from .module_buffers import check_buffer_table_read, replaces_buffer, stores_buffer_back
from .stores import ModuleTablesSource, record_store
from .enums import wrap_member
from .global_stores import store_global, stored_global
from .made_classes import made_tracker
from .loggers import LOGGER_LEVELS, LoggedOnceVariable, LoggerCallVariable, logs_once


class ModuleVariable(ObjectConstantVariable):
    """A Python module other than torch (math, a user helpers module...)."""

    rebuild = ObjectConstantVariable.rebuild_as_itself

    def python_type(self):
        return types.ModuleType

    def describe(self):
        return f"module {self.value.__name__!r}"

    def var_getattr(self, tx, name):
        stored = stored_global(tx.output, vars(self.value), name)  # assigned by the trace
        if stored is not None:
            return stored
        try:
            value = getattr(self.value, name)
        except AttributeError:
            unsupported("exceptions", f"AttributeError: module {self.value.__name__!r} has no attribute {name!r}",
                        raised=AttributeError)
        return tx.wrap(value, AttrSource(self.source, name) if self.source else None)

    def store_attr(self, tx, name, value):
        """`helpers.STATE = v`: a global of that module, as `global STATE` there stores it
        (a module whose class has its own `__setattr__` declines)."""
        if type(self.value) is not types.ModuleType:
            unsupported("side_effect", f"setting attribute {name!r} on {self.describe()} (a module class "
                                       "of its own)")
        store_global(tx, name, value, vars(self.value))


# (predicate(cls), factory(tx, cls, args, kwargs) -> tracker or None) pairs: how calling a
# class inside the trace makes its object (collections, itertools, user classes...). The
# modules holding them register at import (variables/builder.py imports them).
def construct(tx, cls, args, kwargs):
    """The tracker of `cls(*args, **kwargs)` made in the trace, or None if no model has it
    (the models: registry.CONSTRUCTORS, in order)."""
    for predicate, factory in tx.registry.CONSTRUCTORS:
        if predicate(cls):
            made = factory(tx, cls, args, kwargs)
            if made is not None:
                return made
    return None


# Data descriptors that only read the object's own storage (C code, no code of the user's).
def _python_descriptor(static, method: str) -> bool:
    """Whether the class attribute's type defines `method` (`__get__`, `__set__`) in Python."""
    return isinstance(inspect.getattr_static(type(static), method, None), types.FunctionType)


def _class_dict_source(tx, cls, name: str):
    """Where the guards read a class attribute without running its `__get__`: the dict
    entry of the class that defines it (the instance's class is pinned by TYPE_MATCH), the
    classes before it in the MRO guarded to keep lacking the name."""
    for klass in cls.__mro__:
        klass_dict = AttrSource(ObjectSource(klass, klass.__qualname__), "__dict__")
        if name in vars(klass):
            return ItemSource(klass_dict, name)
        tx.output.guards.add(Guard("EQUALS_MATCH", InDictSource(klass_dict, name), False))


_SLOT_READS = (types.MemberDescriptorType, type(collections.namedtuple("_Field", "a").a))


class ClassVariable(ObjectConstantVariable):
    """A class used as a value (isinstance checks, `type(x) is T`, class attributes)."""

    def rebuild(self, rb) -> str:
        made = made_tracker(self.value)
        if made is not None and made is not self:  # a class the trace made: made again per call
            return rb.expr(made)
        return self.rebuild_as_itself(rb)

    def describe(self):
        return f"class {self.value.__qualname__!r}"

    def var_getattr(self, tx, name):
        from .autograd import FunctionApplyVariable, is_function_class  # a cycle: autograd builds on this module
        if name == "apply" and is_function_class(self.value):
            return FunctionApplyVariable(self.value, AttrSource(self.source, name) if self.source else None,
                                         self.source)
        if name == "__dict__" and type(self.value) is type:  # a mappingproxy (mapping_proxies.py)
            base = self.source if self.source is not None else ObjectSource(self.value, self.value.__qualname__)
            return tx.wrap(self.value.__dict__, AttrSource(base, "__dict__"))
        try:
            static = inspect.getattr_static(self.value, name)
        except AttributeError:
            unsupported("exceptions", f"AttributeError: type object {self.value.__name__!r} has no attribute {name!r}",
                        raised=AttributeError)
        if isinstance(static, staticmethod):
            return tx.wrap(static.__func__, None)
        if isinstance(static, classmethod):
            return UserMethodVariable(tx.wrap(static.__func__, None), self)
        return tx.wrap(getattr(self.value, name), AttrSource(self.source, name) if self.source else None)

    def iter_items(self, tx):
        cls = self.value
        if isinstance(cls, enum.EnumMeta) and type(cls).__iter__ is enum.EnumMeta.__iter__:
            # its members in definition order (aliases left out), fixed with the class
            return [wrap_member(tx, m) for m in cls]
        return super().iter_items(tx)

    def call_function(self, tx, args, kwargs):
        cm = make_context_manager(tx, self.value, args, kwargs)
        if cm is not None:
            return cm
        if issubclass(self.value, BaseException):  # only ever made to be raised
            exception_made(tx, self.value)
        made = construct(tx, self.value, args, kwargs)
        if made is not None:
            return made
        unsupported("call", f"creating a {self.value.__qualname__} object while tracing "
                            "(build it outside the optimized function and pass it in)")


class UserObjectVariable(VariableTracker):
    """An instance of a user class (nn.Module included) passed in or reached from the frame.
    Attributes the trace sets on it are in `stored` (name → tracker, in the order first
    set): later reads see them, and the entry sets them on the object after the graph."""

    __slots__ = ("value", "stored", "raw_stores")

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value
        self.stored: dict = {}
        self.raw_stores: set = set()  # names of `stored` written as `obj.__dict__[name] = v`

    def python_type(self):
        return type(self.value)

    def describe(self):
        return f"{type(self.value).__qualname__} object"

    def is_module(self) -> bool:
        return isinstance(self.value, torch.nn.Module)

    def _generic_class(self) -> bool:
        """Whether the class looks attributes up as object does (guards may then read
        `obj.name`; else they read past its own __getattribute__)."""
        return own_getattribute(type(self.value)) is None

    def _attr_source(self, name):
        if self.source is None:
            return None
        return AttrSource(self.source, name) if self._generic_class() else GenericAttrSource(self.source, name)

    def var_getattr(self, tx, name):
        hook = own_getattribute(type(self.value))
        if hook is not None:  # the class's own __getattribute__ answers (attribute_protocols.py)
            return call_getattribute(tx, self, name, hook)
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """object.__getattribute__ (Module's tables and __getattr__ for modules): data
        descriptors of the class, the instance dictionary, then the class."""
        obj = self.value
        cls = type(obj)
        if name in self.stored:  # set by the trace: a plain instance attribute (see set_plain)
            return self.stored[name]
        if name == "_buffers" and self.stored and self.is_module():
            check_buffer_table_read(self)
        if name == "__class__" and inspect.getattr_static(cls, name) is _OBJECT_CLASS:
            return tx.wrap(cls, self._attr_source(name))  # guarded by identity, as `type(obj)` is
        inst_dict = instance_dict(obj)
        static = on_class(cls, name)
        if isinstance(obj, torch.nn.Module) and static is _ABSENT and not (inst_dict and name in inst_dict) \
                and inspect.getattr_static(cls, "__getattr__") is torch.nn.Module.__getattr__:
            # Module.__getattr__, which object's lookup reaches only past the instance
            # dictionary and the class (a class attribute shadows a submodule of its name;
            # a class's own __getattr__ answers instead: _getattr_hook)
            for table in ("_parameters", "_buffers", "_modules"):
                d = obj.__dict__.get(table)
                if d is not None and name in d:
                    return tx.wrap(d[name], self._attr_source(name))
        is_data_descriptor = static is not _ABSENT and overrides_instance_dict(static)
        if name == "__dict__" and isinstance(inst_dict, dict) and type(static) is types.GetSetDescriptorType \
                and self.source is not None and not self.is_module():
            return InstanceDictView(self)  # read key by key (`vars(obj).get(k)`)
        if inst_dict is not None and name in inst_dict and not is_data_descriptor:
            return tx.wrap(inst_dict[name], self._attr_source(name))
        if static is not _ABSENT and self.source is not None:
            self._guard_class_attr(tx, name, static, shadowable=inst_dict is not None and not is_data_descriptor)
        if isinstance(obj, logging.Logger) and name in LOGGER_LEVELS and self.source is not None:
            disabled_call = self._logger_method(tx, name)
            if disabled_call is not None:
                return disabled_call
        if static is _ABSENT:
            from .torch import SETTINGS_TYPES, TorchSettingsVariable  # a cycle: torch builds on this module
            if cls in SETTINGS_TYPES and self.source is not None:  # `from torch.backends.cuda import matmul`
                return TorchSettingsVariable(obj, self.source).var_getattr(tx, name)
            if hasattr(cls, "__getattr__") and (not isinstance(obj, torch.nn.Module) or inspect.getattr_static(
                    cls, "__getattr__") is not torch.nn.Module.__getattr__):
                return self._getattr_hook(tx, name)
            if self.source is not None and not self._generic_class():
                guard_generic_miss(tx, self.source, name)  # (hasattr() would run the class's hook)
            elif self.source is not None:  # hasattr/getattr with a default go on: pin the absence
                plain_module = getattr(cls, "__getattr__", None) is torch.nn.Module.__getattr__ \
                    and not hasattr(cls, name)  # (that guard asks the class, whose metaclass may answer)
                tx.output.guards.add(Guard("HASATTR", self.source, False, {"attr": name, "module": plain_module}))
            unsupported("exceptions", f"AttributeError: {cls.__qualname__!r} object has no attribute {name!r}",
                        raised=AttributeError)
        if isinstance(static, property):
            if static.fget is None:
                unsupported("exceptions", f"AttributeError: property {name!r} has no getter", raised=AttributeError)
            if not isinstance(static.fget, types.FunctionType):  # a C getter (pybind11's properties)
                unsupported("construct", f"property {name!r} of {cls.__qualname__} is computed by C code "
                                         f"({type(static.fget).__name__}), which is not traced",
                            hint="read it before the optimized call and pass the value in")
        bound = bound_member(tx, static, self, ClassVariable(cls))
        if bound is not None:
            return bound
        if hasattr(type(static), "__get__"):
            if isinstance(obj, logging.Logger) and logs_once(static) and self.source is not None:
                self.guard_class_function(tx, name, static)
                guard_not_in_dict(tx, self.source, name, self._generic_class())
                return LoggedOnceVariable(static, self)
            if static in _CTX_READS and self.source is not None:  # a backward's ctx, passed in
                return tx.wrap(getattr(obj, name), self._attr_source(name))
            if type(static) in _SLOT_READS and self.source is not None and hasattr(obj, name):
                # a `__slots__` member or a namedtuple field: the value it gives now, read
                # through the object by the guards too
                return tx.wrap(getattr(obj, name), self._attr_source(name))
            if self.source is not None and _python_descriptor(static, "__get__"):
                # a descriptor class of the user's: its __get__(obj, type(obj)) inlined (one
                # without __set__ is shadowed by an instance attribute of its name: pinned absent)
                if not is_data_descriptor and inst_dict is not None:
                    guard_not_in_dict(tx, self.source, name, self._generic_class())
                descriptor = tx.wrap(static, _class_dict_source(tx, cls, name))
                owner = tx.wrap(cls, self._class_source())
                return descriptor.var_getattr(tx, "__get__").call_function(tx, [self, owner], {})
            unsupported("construct", f"descriptor {name!r} of {cls.__qualname__} is not traced")
        return tx.wrap(static, self._attr_source(name))

    def _getattr_hook(self, tx, name):
        """The class's own `__getattr__` (a Python function), inlined where object's lookup
        finds no `name`: the hook and the miss pinned. An AttributeError leaving it stands
        for CPython's only where the trace raised it exactly (a catchable exc.Raised: every
        handler on its way was traced), else no frame could tell it was not caught."""
        cls = type(self.value)
        hook = inspect.getattr_static(cls, "__getattr__")
        if not isinstance(hook, types.FunctionType) or self.source is None:
            unsupported("construct", f"{cls.__qualname__}.__getattr__ is not traced")
        self.guard_class_function(tx, "__getattr__", hook)
        guard_generic_miss(tx, self.source, name)
        try:
            return function_var(hook).call_function(tx, [self, ConstantVariable(name)], {})
        except Unsupported as e:
            if e.raises(AttributeError) and not (isinstance(e, Raised) and e.catchable):
                unsupported("construct", f"{cls.__qualname__}.__getattr__({name!r}) declined an AttributeError "
                                         "that a handler of its own might catch")
            raise

    # --- attribute writes -----------------------------------------------------------
    def store_attr(self, tx, name, value):
        """`obj.name = value`: the class's own `__setattr__` in Python is inlined (its
        `object.__setattr__` is `set_plain`); object's (or, on a module,
        Module.__setattr__ putting a value that is no tensor or module under a name none of
        its tables holds) is `set_plain`, the class's `__setattr__` pinned."""
        cls = type(self.value)
        hook = own_setattr(cls)
        if hook is not None and not self.is_module() and self.source is not None:
            call_setattr(tx, self, name, value, hook)
            return
        static = on_class(cls, name)
        if static is not _ABSENT and hook is None and not self.is_module() and self.source is not None and (
                _python_descriptor(static, "__set__") or isinstance(static, property)
                and isinstance(static.fset, types.FunctionType)):
            # a data descriptor takes the write: its Python __set__ (a property's setter) inlined
            tx.output.guards.add(Guard("ID_MATCH", AttrSource(self._class_source(), "__setattr__"),
                                       inspect.getattr_static(cls, "__setattr__")))
            self._guard_class_attr(tx, name, static, shadowable=False)
            if isinstance(static, property):
                function_var(static.fset).call_function(tx, [self, value], {})
                return
            descriptor = tx.wrap(static, _class_dict_source(tx, cls, name))
            descriptor.var_getattr(tx, "__set__").call_function(tx, [self, value], {})
            return
        if self.is_module() and self.source is not None and (
                stores_buffer_back(tx, self, name, value) or replaces_buffer(tx, self, name, value)):
            return  # `self.count += 1` (the buffer changed in place), or a new tensor as the buffer
        why = self._why_not_stored(name, value)
        if why is not None:
            unsupported("side_effect", f"setting attribute {name!r} on {self.describe()}, which outlives "
                                       f"the call: {why}")
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(self._class_source(), "__setattr__"),
                                   inspect.getattr_static(cls, "__setattr__")))
        self.set_plain(tx, name, value)

    def set_plain(self, tx, name, value):
        """object.__setattr__ putting `value` into the instance dictionary: the trace keeps
        it in `stored` and the entry sets it after the graph, in order with the other writes
        (side_effects.py). Guarded: the object's class (TYPE_MATCH, from the builder) and
        that `name` on the class stays what it was (absent, or the same plain value or
        function: never a data descriptor that would take the write)."""
        why = self._why_not_plain(name, value)
        if why is not None:
            unsupported("side_effect", f"setting attribute {name!r} on {self.describe()}, which outlives "
                                       f"the call: {why}")
        read = tx.output.wrapped.get(ItemSource(dict_source(self.source), name))
        if read is not None and not isinstance(read[1], ConstantVariable):
            unsupported("side_effect", f"setting attribute {name!r} on {self.describe()} after reading it "
                                       "through its __dict__ (that read is rebuilt after the write)")
        guards, cls = tx.output.guards, type(self.value)
        class_source = self._class_source()
        if on_class(cls, name) is _ABSENT:
            guards.add(Guard("HASATTR", class_source, False, {"attr": name}))
        else:
            guards.add(Guard("ID_MATCH", AttrSource(class_source, name), getattr(cls, name)))
        if isinstance(self.value, torch.nn.Module):
            guards.add(Guard("EQUALS_MATCH", ModuleTablesSource(self.source, name), False))
        record_store(tx.output, self)
        self.stored[name] = value

    def set_in_dict(self, tx, name, value):
        """`obj.__dict__[name] = value`: the instance dictionary written past the class's
        descriptors (set_plain's rules otherwise); written back the same way. A name whose
        class attribute reads past the dictionary (a data descriptor with a `__get__`)
        declines: `stored` answers reads first."""
        static = on_class(type(self.value), name)
        why = None
        if self.source is None or not isinstance(instance_dict(self.value), dict) or self.is_module():
            why = "only the __dict__ of a plain object passed in is written"
        elif static is not _ABSENT and overrides_instance_dict(static):
            why = f"{name!r} is a {type(static).__name__} of its class, which reads past the dictionary"
        if why is not None:
            unsupported("side_effect", f"item assignment on the __dict__ of {self.describe()}: {why}")
        read = tx.output.wrapped.get(ItemSource(dict_source(self.source), name))
        if read is not None and not isinstance(read[1], ConstantVariable):
            unsupported("side_effect", f"writing {name!r} into the __dict__ of {self.describe()} after reading "
                                       "it there (that read is rebuilt after the write)")
        guards, class_source = tx.output.guards, self._class_source()
        if static is _ABSENT:
            guards.add(Guard("HASATTR", class_source, False, {"attr": name}))
        else:
            guards.add(Guard("ID_MATCH", AttrSource(class_source, name), getattr(type(self.value), name)))
        record_store(tx.output, self)
        self.stored[name] = value
        self.raw_stores.add(name)

    @property
    def writeback(self):
        """How side_effects.py writes the attributes the trace set: None, `obj.name = v`;
        where the class's own __setattr__ (traced already) would run again, through
        object.__setattr__ (`attribute_protocols.plain_writeback`)."""
        if self.is_module() or own_setattr(type(self.value)) is None and not self.raw_stores:
            return None
        return lambda rb, target, temp: plain_writeback(self, rb, target, temp)

    def _why_not_stored(self, name, value) -> str | None:
        """Why `obj.name = value` through the class's `__setattr__` is not modelled (None:
        it is)."""
        cls = type(self.value)
        setter = inspect.getattr_static(cls, "__setattr__")
        if self.is_module() and setter is not torch.nn.Module.__setattr__ or \
                not self.is_module() and own_setattr(cls) is not None:
            return f"{cls.__qualname__}.__setattr__ is not traced"
        return self._why_not_plain(name, value)

    def _why_not_plain(self, name, value) -> str | None:
        """Why object.__setattr__(obj, name, value) is not modelled (None: it is)."""
        obj, cls = self.value, type(self.value)
        if self.source is None:
            return "it is not reachable from the function's inputs"
        if not isinstance(instance_dict(obj), dict):
            return "it has no instance dictionary"
        module = self.is_module()
        hook = own_getattribute(cls)
        if hook is not None and not isinstance(hook, types.FunctionType):
            return f"{cls.__qualname__}.__getattribute__ is not traced"
        static = on_class(cls, name)
        if name in _METACLASS_DATA or static is _ABSENT and hasattr(cls, name):
            return f"{name!r} is an attribute of its class's metaclass (not modelled)"
        if static is not _ABSENT and (hasattr(type(static), "__set__") or hasattr(type(static), "__delete__")):
            return f"{name!r} is a {type(static).__name__} of its class, which takes the write"
        if static is not _ABSENT and hasattr(type(static), "__get__") and not isinstance(
                static, (types.FunctionType, staticmethod)):
            return f"it would shadow the {type(static).__name__} {name!r} of its class"
        if module:
            tables = [obj.__dict__.get(t) for t in ("_parameters", "_buffers", "_modules")]
            if any(t is None for t in tables):
                return "the module is not initialised (Module.__init__ has not run)"
            if any(name in t for t in tables):
                return f"{name!r} is a parameter, buffer or submodule of the module"
            if _is_tensor_or_module(value):
                return "Module.__setattr__ registers tensors, parameters and modules (not traced)"
        return None

    def isinstance_of(self, cls):
        """isinstance() asks `obj.__class__` too where `type(obj)` is not a subclass: a
        property there is not run for that (None: the type answers)."""
        if inspect.getattr_static(type(self.value), "__class__") is not _OBJECT_CLASS and not (
                isinstance(cls, type) and issubclass(type(self.value), cls)):
            unsupported("construct", f"isinstance() of a {type(self.value).__qualname__}, whose class "
                                     "overrides __class__")
        return None

    def _class_source(self):
        """Where guards read the object's class: `obj.__class__`, or `type(obj)` where its
        class overrides `__class__` (a proxy's property answers another class) or has a
        `__getattribute__` of its own."""
        if inspect.getattr_static(type(self.value), "__class__") is _OBJECT_CLASS and self._generic_class():
            return AttrSource(self.source, "__class__")
        return TypeOfSource(self.source)

    def guard_class_function(self, tx, name, fn):
        """That the class's `name` (a dunder CPython looks up on the type) stays `fn`."""
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(self._class_source(), name), fn))

    def _logger_method(self, tx, name):
        """`logger.debug` and its kind on a logging.Logger whose class keeps logging's own
        methods: a call below the logger's level does nothing (see LoggerCallVariable)."""
        cls = type(self.value)
        needed = (name, "isEnabledFor") + (("error",) if name == "exception" else ())
        if any(inspect.getattr_static(cls, n, None) is not getattr(logging.Logger, n) for n in needed):
            return None
        for n in needed:
            self._guard_class_attr(tx, n, getattr(logging.Logger, n), shadowable=True)
        return LoggerCallVariable(self, name)

    def _guard_class_attr(self, tx, name, static, shadowable):
        """What the class gives for `name` is inlined: pin it (the class may be patched),
        and that no instance attribute shadows it."""
        guards = tx.output.guards
        cls = type(self.value)
        if name in _METACLASS_DATA and isinstance(static, (types.FunctionType, property, staticmethod, classmethod)):
            # `cls.__class__` (and the like) is answered by type's own descriptor: pin the
            # class's dict entry instead (the class itself is pinned by TYPE_MATCH)
            klass = next(k for k in cls.__mro__ if name in vars(k))
            in_dict = ItemSource(AttrSource(ObjectSource(klass, klass.__qualname__), "__dict__"), name)
            guards.add(Guard("ID_MATCH", in_dict, static))
        elif isinstance(static, (types.FunctionType, property)):
            guards.add(Guard("ID_MATCH", AttrSource(self._class_source(), name), static))
        elif isinstance(static, staticmethod):
            guards.add(Guard("ID_MATCH", AttrSource(self._class_source(), name), static.__func__))
        elif isinstance(static, classmethod):
            guards.add(Guard("ID_MATCH", AttrSource(AttrSource(self._class_source(), name), "__func__"),
                             static.__func__))
        else:
            return  # a plain class attribute is read through the instance's own source
        if shadowable:
            guard_not_in_dict(tx, self.source, name, self._generic_class())

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _item_protocol(self, tx):
        """(registry.ITEM_PROTOCOLS' entry, the container class) of a passed-in object whose
        items are modelled (torch's module containers), else (None, None)."""
        if self.source is not None:
            for protocol in tx.registry.ITEM_PROTOCOLS:
                cls = protocol.container_class(self.value)
                if cls is not None:
                    return protocol, cls
        return None, None

    def iter_items(self, tx):
        protocol, cls = self._item_protocol(tx)
        if cls is not None:  # nn.Sequential / ModuleList / ModuleDict: their `_modules`, guarded
            return protocol.items(tx, self, cls)
        return super().iter_items(tx)

    def getitem(self, tx, key):
        """`obj[key]`: the item protocol of torch's module containers is modelled (Sequential
        indexes through itertools.islice, slices make a new container); other objects
        call their `__getitem__`."""
        protocol, cls = self._item_protocol(tx)
        if cls is not None:
            return protocol.getitem(tx, self, cls, key)
        method = self.var_getattr(tx, "__getitem__")
        if isinstance(method, UserMethodVariable):
            # a try of this frame may catch what it raises (a Mapping's get() catching the
            # KeyError of its own __getitem__)
            return tx.call_directly(method, [key], {})
        return method.call_function(tx, [key], {})

    def call_function(self, tx, args, kwargs):
        obj = self.value
        if isinstance(obj, torch.nn.Module):
            if inspect.getattr_static(type(obj), "__call__") is not torch.nn.Module.__call__:
                return self.call_method(tx, "__call__", args, kwargs)  # the class's own __call__
            return call_module(tx, self, args, kwargs)
        if inspect.getattr_static(type(obj), "__call__", None) is not None:
            return self.call_method(tx, "__call__", args, kwargs)
        unsupported("exceptions", f"TypeError: {type(obj).__qualname__!r} object is not callable")

    def truthy(self, tx):
        """bool(obj), as CPython decides it from the class: its `__bool__`, else its
        `__len__` (inlined, pinned on the class), else True (`if self.downsample:` on a
        module); a class that gains either later fails the guards."""
        cls = type(self.value)
        for name in ("__bool__", "__len__"):
            static = on_class(cls, name)
            if static is _ABSENT:
                continue
            if not isinstance(static, types.FunctionType):
                unsupported("construct", f"bool() of a {cls.__qualname__} asks its {name} "
                                         f"({type(static).__name__}), which is not traced")
            if self.source is not None:
                self._guard_class_attr(tx, name, static, shadowable=False)
            result = UserMethodVariable(function_var(static), self).call_function(tx, [], {})
            if name == "__bool__":
                return result.truthy(tx)
            return result.as_python_constant() != 0
        if self.source is not None:
            for name in ("__bool__", "__len__"):
                tx.output.guards.add(Guard("HASATTR", self._class_source(), False, {"attr": name}))
        return True


def on_class(cls, name: str):
    """What an instance of `cls` finds for `name` on its class (the MRO's dicts; unlike
    inspect.getattr_static(cls, ...), not the metaclass's: `obj.__name__` is not
    `cls.__name__`), or _ABSENT. A class attribute may be None."""
    for klass in cls.__mro__:
        d = vars(klass)
        if name in d:
            return d[name]
    return _ABSENT


# What a backward reads off its autograd.Function's ctx (a C object): tuples, of bools
# (guarded by value) and of the saved tensors (inputs of the graph), read like any other.
_CTX_READS = tuple(vars(torch._C._FunctionBase)[n] for n in ("needs_input_grad", "saved_tensors")
                   if n in vars(torch._C._FunctionBase))
_OBJECT_CLASS = vars(object)["__class__"]  # what `obj.__class__` is unless a class overrides it
_ABSENT = object()  # no attribute of that name on the class
# Names whose `cls.name` the metaclass answers (type's and object's data descriptors).
_METACLASS_DATA = frozenset(k for klass in type.__mro__ for k, v in vars(klass).items() if hasattr(type(v), "__set__"))


def _is_tensor_or_module(v) -> bool:
    """A value Module.__setattr__ would register rather than set (or that may be one)."""
    try:
        t = v.python_type()
    except Unsupported:
        return True
    return issubclass(t, (torch.Tensor, torch.nn.Module))


@dataclass(frozen=True)
class TypeOfSource(Source):
    """`type(obj)`."""

    base: Source

    def expr(self, ns):
        return f"{ns.bind(type, 'type')}({self.base.expr(ns)})"

    def name(self, naming=None):
        return f"type({self.base.name(naming)})"

    @property
    def depth(self):
        return self.base.depth + 1
