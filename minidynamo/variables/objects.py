"""Plain Python objects, classes and modules reached from the frame.

Reading an attribute wraps it with an `AttrSource` (so it is guarded and, for tensors,
read at call time); methods are inlined with `self` bound; writing an attribute of an
object that outlives the call declines the trace.
"""
from __future__ import annotations

import inspect
import logging
import types
from dataclasses import dataclass

import torch

from ..exc import unsupported
from ..sources import AttrSource, Source
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable, UserMethodVariable


class ModuleVariable(ObjectConstantVariable):
    """A Python module other than torch (math, a user helpers module...)."""

    def python_type(self):
        return types.ModuleType

    def describe(self):
        return f"module {self.value.__name__!r}"

    def var_getattr(self, tx, name):
        from .builder import wrap
        try:
            value = getattr(self.value, name)
        except AttributeError:
            unsupported("exceptions", f"AttributeError: module {self.value.__name__!r} has no attribute {name!r}")
        return wrap(tx, value, AttrSource(self.source, name) if self.source else None)


# (predicate(cls), factory(tx, cls, args, kwargs) -> tracker or None) pairs: how calling a
# class inside the trace makes its object (collections, itertools, user classes...). The
# modules holding them register at import (variables/builder.py imports them).
_constructors: list = []


def register_constructor(predicate, factory, first: bool = False) -> None:
    """first=True: tried before those registered so far (a model of specific classes
    ahead of a generic one, whatever the import order)."""
    if first:
        _constructors.insert(0, (predicate, factory))
    else:
        _constructors.append((predicate, factory))


def construct(tx, cls, args, kwargs):
    """The tracker of `cls(*args, **kwargs)` made in the trace, or None if no model has it."""
    for predicate, factory in _constructors:
        if predicate(cls):
            made = factory(tx, cls, args, kwargs)
            if made is not None:
                return made
    return None


class ClassVariable(ObjectConstantVariable):
    """A class used as a value (isinstance checks, `type(x) is T`, class attributes)."""

    def describe(self):
        return f"class {self.value.__qualname__!r}"

    def var_getattr(self, tx, name):
        from .autograd import FunctionApplyVariable, is_function_class
        from .builder import wrap
        if name == "apply" and is_function_class(self.value):
            return FunctionApplyVariable(self.value, AttrSource(self.source, name) if self.source else None,
                                         self.source)
        try:
            static = inspect.getattr_static(self.value, name)
        except AttributeError:
            unsupported("exceptions", f"AttributeError: type object {self.value.__name__!r} has no attribute {name!r}")
        if isinstance(static, staticmethod):
            return wrap(tx, static.__func__, None)
        if isinstance(static, classmethod):
            return UserMethodVariable(wrap(tx, static.__func__, None), self)
        return wrap(tx, getattr(self.value, name), AttrSource(self.source, name) if self.source else None)

    def call_function(self, tx, args, kwargs):
        from .contexts import make_context_manager
        cm = make_context_manager(tx, self.value, args, kwargs)
        if cm is not None:
            return cm
        if issubclass(self.value, BaseException):  # only ever made to be raised
            unsupported("exceptions", f"raising {self.value.__qualname__} (the eager run raises it)")
        made = construct(tx, self.value, args, kwargs)
        if made is not None:
            return made
        unsupported("call", f"creating a {self.value.__qualname__} object while tracing "
                            "(build it outside the optimized function and pass it in)")


class UserObjectVariable(VariableTracker):
    """An instance of a user class (nn.Module included) passed in or reached from the frame."""

    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def describe(self):
        return f"{type(self.value).__qualname__} object"

    def _attr_source(self, name):
        return AttrSource(self.source, name) if self.source is not None else None

    def var_getattr(self, tx, name):
        from .builder import wrap
        obj = self.value
        cls = type(obj)
        if isinstance(obj, torch.nn.Module):
            for table in ("_parameters", "_buffers", "_modules"):
                d = obj.__dict__.get(table)
                if d is not None and name in d:
                    return wrap(tx, d[name], self._attr_source(name))
        inst_dict = getattr(obj, "__dict__", None)
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            static = None
        is_data_descriptor = static is not None and hasattr(type(static), "__set__")
        if inst_dict is not None and name in inst_dict and not is_data_descriptor:
            return wrap(tx, inst_dict[name], self._attr_source(name))
        if static is not None and self.source is not None:
            self._guard_class_attr(tx, name, static, shadowable=inst_dict is not None and not is_data_descriptor)
        if isinstance(obj, logging.Logger) and name in _LOGGER_LEVELS and self.source is not None:
            disabled_call = self._logger_method(tx, name)
            if disabled_call is not None:
                return disabled_call
        if static is None:
            from .torch import SETTINGS_TYPES, TorchSettingsVariable
            if cls in SETTINGS_TYPES and self.source is not None:  # `from torch.backends.cuda import matmul`
                return TorchSettingsVariable(obj, self.source).var_getattr(tx, name)
            if hasattr(cls, "__getattr__") and not isinstance(obj, torch.nn.Module):
                unsupported("construct", f"{cls.__qualname__}.__getattr__ is not traced")
            if self.source is not None:  # hasattr/getattr with a default go on: pin the absence
                from ..guards import Guard  # (instance, class, a module's parameters/buffers/submodules)
                plain_module = getattr(cls, "__getattr__", None) is torch.nn.Module.__getattr__
                tx.output.guards.add(Guard("HASATTR", self.source, False, {"attr": name, "module": plain_module}))
            unsupported("exceptions", f"AttributeError: {cls.__qualname__!r} object has no attribute {name!r}")
        if isinstance(static, staticmethod):
            return UserFunctionVariable(static.__func__)
        if isinstance(static, classmethod):
            return UserMethodVariable(UserFunctionVariable(static.__func__), ClassVariable(cls))
        if isinstance(static, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(static), self)
        if isinstance(static, property):
            if static.fget is None:
                unsupported("exceptions", f"AttributeError: property {name!r} has no getter")
            return UserFunctionVariable(static.fget).call_function(tx, [self], {})
        if hasattr(type(static), "__get__"):
            unsupported("construct", f"descriptor {name!r} of {cls.__qualname__} is not traced")
        return wrap(tx, static, self._attr_source(name))

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
        from ..guards import Guard
        guards = tx.output.guards
        on_class = AttrSource(AttrSource(self.source, "__class__"), name)
        if isinstance(static, (types.FunctionType, property)):
            guards.add(Guard("ID_MATCH", on_class, static))
        elif isinstance(static, staticmethod):
            guards.add(Guard("ID_MATCH", on_class, static.__func__))
        elif isinstance(static, classmethod):
            guards.add(Guard("ID_MATCH", AttrSource(on_class, "__func__"), static.__func__))
        else:
            return  # a plain class attribute is read through the instance's own source
        if shadowable:
            guards.add(Guard("NOT_IN_DICT", self.source, None, {"attr": name}))

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def iter_items(self, tx):
        from .nn_modules import container_items, passed_container_class
        cls = passed_container_class(self.value) if self.source is not None else None
        if cls is not None:  # nn.Sequential / ModuleList / ModuleDict: their `_modules`, guarded
            return container_items(tx, self, cls)
        return super().iter_items(tx)

    def getitem(self, tx, key):
        """`obj[key]`: the item protocol of torch's module containers is modelled (Sequential
        indexes through itertools.islice, slices make a new container); other objects
        call their `__getitem__`."""
        from .nn_modules import container_getitem, passed_container_class
        cls = passed_container_class(self.value) if self.source is not None else None
        if cls is not None:
            return container_getitem(tx, self, cls, key)
        return self.call_method(tx, "__getitem__", [key], {})

    def call_function(self, tx, args, kwargs):
        obj = self.value
        if isinstance(obj, torch.nn.Module):
            if inspect.getattr_static(type(obj), "__call__") is not torch.nn.Module.__call__:
                return self.call_method(tx, "__call__", args, kwargs)  # the class's own __call__
            _guard_no_hooks(tx, obj, self.source)
            return self.call_method(tx, "forward", args, kwargs)
        if inspect.getattr_static(type(obj), "__call__", None) is not None:
            return self.call_method(tx, "__call__", args, kwargs)
        unsupported("exceptions", f"TypeError: {type(obj).__qualname__!r} object is not callable")


# Logger methods whose whole effect, below the logger's level, is asking isEnabledFor
# (`logging.debug()` and the other module functions are not: they may configure the root
# logger first). None: the level is the call's first argument (`logger.log`).
_LOGGER_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
                  "log": None}


@dataclass(frozen=True)
class EnabledForSource(Source):
    """`logger.isEnabledFor(level)`, asked again by the entry."""

    base: Source
    level: int

    def expr(self, ns):
        return f"{self.base.expr(ns)}.isEnabledFor({self.level!r})"

    def name(self):
        return f"{self.base.name()}.isEnabledFor({self.level!r})"

    @property
    def depth(self):
        return self.base.depth + 3  # after the guards on the class's methods


class LoggerCallVariable(UserMethodVariable):
    """`logger.debug(...)` (info, warning, error, exception, critical, log): below the
    logger's effective level the call does nothing, exactly (logging's own methods check
    isEnabledFor first and return), so it is a no-op guarded on isEnabledFor being False;
    at or above it, the record would be emitted: inlined, which declines as before."""

    __slots__ = ("name",)

    def __init__(self, logger, name):
        super().__init__(UserFunctionVariable(getattr(logging.Logger, name)), logger)
        self.name = name

    def call_function(self, tx, args, kwargs):
        logger = self.obj
        try:  # the arguments must bind (a missing msg raises even below the level)
            inspect.signature(self.func.fn).bind(logger.value, *args, **kwargs)
        except TypeError:
            return super().call_function(tx, args, kwargs)
        level = _LOGGER_LEVELS[self.name]
        if level is None:
            if not args or not args[0].is_python_constant() or type(args[0].as_python_constant()) is not int:
                return super().call_function(tx, args, kwargs)
            level = args[0].as_python_constant()
        if logger.value.isEnabledFor(level):  # reads the level (and fills logging's cache)
            return super().call_function(tx, args, kwargs)
        from ..guards import Guard
        tx.output.guards.add(Guard("EQUALS_MATCH", EnabledForSource(logger.source, level), False))
        return ConstantVariable(None)


# What Module.__call__ consults before it calls forward: the module's own hooks and the
# process-wide ones (torch.nn.modules.module.register_module_forward_hook, ...).
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")


def hooks_present(module) -> list:
    """The hook dicts, the module's own and the process-wide ones, that are not empty."""
    module_py = torch.nn.modules.module
    return [a for a in _MODULE_HOOKS if getattr(module, a, None)] + \
        [a for a in _GLOBAL_HOOKS if getattr(module_py, a, None)]


def _guard_no_hooks(tx, module, source):
    """Calling a module is calling its forward only while it has no hooks: decline if it
    has some, else guard that none is added (hooks are not traced)."""
    from ..guards import Guard
    from ..sources import ObjectSource
    module_py = torch.nn.modules.module
    own = [a for a in _MODULE_HOOKS if hasattr(module, a)]
    shared = [a for a in _GLOBAL_HOOKS if hasattr(module_py, a)]
    present = hooks_present(module)
    if present:
        unsupported("call", f"{type(module).__qualname__} has hooks ({', '.join(present)}), which are not traced")
    if source is None:
        unsupported("call", f"calling a {type(module).__qualname__} that is not reachable from the "
                            "function's inputs (its hooks could not be checked on later calls)")
    tx.output.guards.add(Guard("NO_HOOKS", source, None, {"attrs": tuple(own)}))
    tx.output.guards.add(Guard("NO_HOOKS", ObjectSource(module_py, "torch.nn.modules.module"), None,
                               {"attrs": tuple(shared)}))
