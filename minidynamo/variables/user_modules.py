"""Objects of user `nn.Module` subclasses made inside the trace (transformers' `ACT2FN[name]`
makes a new `GELUActivation()` in the forward that calls it).

The object is a tracker, as a plain user object is (user_objects.py): the subclass's
`__init__` is inlined with it as `self`; `nn.Module.__init__` (reached through `super()`,
called by name, or the class's only `__init__`) is modelled, not traced: it sets
`training = True` and empty tables. `Module.__setattr__` is modelled on the tracker: a
module value goes into its submodules, a value under a submodule's name must be a module
or None, anything else is a plain attribute; `Module.__getattr__` finds submodules after
the instance dictionary and the class. The module has no parameters and no buffers: a
`Parameter` or buffer assigned or registered declines, naming why (making one would
allocate and, for most, randomly initialise it). Module's internal tables (`_parameters`,
`_modules`, the hook dicts, `__dict__`) are not handed out: a method of Module's that
reads them declines there, so none runs on a wrong picture of the module.

Calling it is `Module._call_impl` over a fresh module (no hooks of its own; the
process-wide ones traced: module_calls.py), its forward inlined. If it escapes (returned,
stored outside, live at a graph break) it is made after the graph as torch.compile's
`nn_module_new` does: `object.__new__(cls)`, the attributes set before `Module.__init__`,
`Module.__init__(obj)`, then the other attributes and submodules, in order. Nothing of it
exists outside the trace before that.
"""
from __future__ import annotations

import torch

from ..exc import Unsupported, unsupported
from ..guards import Guard
from .attribute_protocols import class_attribute, own_getattribute
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable
from .module_calls import call_new_module
from .nn_modules import _REGISTRATION_HOOKS, _guard_no_global_hooks
from .user_objects import (ClassDefinesSource, NewObjectVariable, _guard_attr, defining_class, init_object,
                           is_python_class, metaclass_problem)

nn = torch.nn
_Module = nn.Module
# What Module.__init__ puts in the instance dictionary besides `training`: the tables a
# module made in the trace keeps as its own model (submodules) or has empty.
_TABLES = frozenset(k for k in _Module().__dict__ if k != "training")
# Module's own protocol: modelled here, not traced (they read the tables).
_MODELLED = ("__setattr__", "__getattr__", "__delattr__")
_BUFFER = getattr(nn, "Buffer", None)


def is_user_module_class(cls) -> bool:
    """A subclass of nn.Module defined outside torch (torch.nn's own: nn_modules.py)."""
    return isinstance(cls, type) and issubclass(cls, _Module) and cls is not _Module \
        and not cls.__module__.startswith("torch.")


def why_not_modelled(cls) -> str | None:
    """Why objects of the module class `cls` are not made in the trace (None: they are)."""
    meta = metaclass_problem(type(cls))
    if meta is not None:
        return meta
    for klass in cls.__mro__[1:-1]:
        if not is_python_class(klass):
            return f"its base {klass.__qualname__} is a builtin type"
    for klass in cls.__mro__[:-1]:
        for name in ("__new__", "__slots__", "__del__"):
            if name in vars(klass):
                return f"{klass.__qualname__} defines {name}"
    if own_getattribute(cls) is not None:
        return f"{cls.__qualname__} defines __getattribute__"
    for name in _MODELLED + ("__dict__",):
        owner = defining_class(cls, name)
        if owner is not _Module and owner is not object:
            return f"{owner.__qualname__} defines {name} (Module's is what is modelled)"
    if getattr(cls, "call_super_init", False):
        return "its call_super_init is set (Module.__init__ then calls the next class's __init__)"
    return None


def _python_type(v):
    try:
        return v.python_type()
    except Unsupported:
        return None


class NewUserModuleVariable(NewObjectVariable):
    """A user nn.Module made by the trace: its instance attributes (`attrs`, `training`
    among them once Module.__init__ ran), its submodules (`children`, name -> tracker,
    in registration order), and which attributes it had when Module.__init__ first ran
    (`init_keys`, None before)."""

    __slots__ = ("children", "init_keys")

    def __init__(self, cls):
        super().__init__(cls)
        self.children: dict = {}
        self.init_keys = None

    def describe(self):
        return f"{self.cls.__qualname__} module made in the trace"

    def __repr__(self):
        return f"NewUserModuleVariable({self.cls.__qualname__}, {list(self.attrs)}, {list(self.children)})"

    def is_module(self) -> bool:
        return True

    # --- Module.__init__, reached through super() or by name ----------------------------
    def module_init(self, tx, args, kwargs):
        """`nn.Module.__init__(self, *args, **kwargs)`: the TypeErrors it raises for
        arguments, else `training = True` and empty tables (a second call empties them
        again)."""
        name = self.cls.__name__
        if kwargs:
            unsupported("exceptions", f"TypeError: {name}.__init__() got an unexpected keyword argument "
                                      f"'{next(iter(kwargs))}'")
        if args:
            unsupported("exceptions", f"TypeError: {name}.__init__() takes 1 positional argument but "
                                      f"{len(args) + 1} were given")
        _guard_attr(tx, self.cls, "call_super_init", False)
        self.instance_dict.check_mutable("Module.__init__", tx)
        if self.init_keys is None:
            self.init_keys = tuple(self.attrs)
        self.attrs["training"] = ConstantVariable(True)
        self.children = {}
        return ConstantVariable(None)

    def base_attr(self, tx, klass, name):
        """What `super().name` finds on `klass` (nn.Module) where it is modelled here."""
        if klass is not _Module:
            return None
        if name == "__init__":
            return _Bound(f"Module.__init__ of {self.describe()}", lambda a, k: self.module_init(tx, a, k))
        if name == "__setattr__":
            return _Bound("Module.__setattr__", lambda a, k: self._named_call(tx, a, k, 2, self.module_setattr))
        if name == "__delattr__":
            return _Bound("Module.__delattr__", lambda a, k: self._named_call(tx, a, k, 1, self.delete_attr))
        if name == "__getattr__":
            return _Bound("Module.__getattr__", lambda a, k: self._named_call(tx, a, k, 1, self.module_getattr))
        return None

    def _named_call(self, tx, args, kwargs, n, method):
        if len(args) != n or kwargs or not args[0].is_python_constant() or \
                not isinstance(args[0].as_python_constant(), str):
            unsupported("construct", f"Module.{method.__name__} with these arguments")
        result = method(tx, args[0].as_python_constant(), *args[1:])
        return ConstantVariable(None) if result is None else result

    # --- attributes: object's lookup, then Module.__getattr__ ---------------------------
    def generic_getattr(self, tx, name):
        self._check_public(name)
        if name not in self.attrs and defining_class(self.cls, name) is None:
            return self.module_getattr(tx, name)
        return super().generic_getattr(tx, name)

    def module_getattr(self, tx, name):
        """Module.__getattr__: a submodule by name, else AttributeError (the class must not
        gain the name later)."""
        if name in self.children:
            return self.children[name]
        tx.output.guards.add(Guard("EQUALS_MATCH", ClassDefinesSource(self.cls, name), False))
        unsupported("exceptions", f"AttributeError: '{self.cls.__name__}' object has no attribute '{name}'",
                    raised=AttributeError)

    def _check_public(self, name):
        if name == "__dict__" or name in _TABLES and self.init_keys is not None:
            unsupported("construct", f"{name!r} of a {self.describe()} (Module's internal tables of a module "
                                     "made in the trace are not traced)")

    # --- Module.__setattr__ / __delattr__ ----------------------------------------------
    def store_attr(self, tx, name, value):
        _guard_attr(tx, self.cls, "__setattr__", _Module.__setattr__)
        self.module_setattr(tx, name, value)

    def module_setattr(self, tx, name, value):
        t = _python_type(value)
        if t is None or issubclass(t, nn.Parameter) or _BUFFER is not None and issubclass(t, _BUFFER):
            unsupported("construct", f"setting {name!r} of a {self.describe()} to {value.describe()}: modules "
                                     "made in the trace hold no parameters or buffers",
                        hint="create the module outside the optimized function and pass it in")
        self._check_public(name)
        if issubclass(t, _Module):
            if self.init_keys is None:
                unsupported("exceptions", "AttributeError: cannot assign module before Module.__init__() call",
                            raised=AttributeError)
            _guard_no_global_hooks(tx, _REGISTRATION_HOOKS, f"registering a submodule of a {self.describe()}")
            self.instance_dict.check_mutable("Module.__setattr__", tx)
            self.attrs.pop(name, None)  # remove_from(self.__dict__, ...): the table's entry is found
            self.children[name] = value
            return
        if name in self.children:
            if not (value.is_python_constant() and value.as_python_constant() is None):
                unsupported("exceptions", f"TypeError: cannot assign '{t.__module__}.{t.__qualname__}' as child "
                                          f"module '{name}' (torch.nn.Module or None expected)")
            self.children[name] = value
            return
        self.set_plain(tx, name, value)

    def set_plain(self, tx, name, value):
        self._check_public(name)
        super().set_plain(tx, name, value)

    def delete_attr(self, tx, name):
        self._check_public(name)
        if name in self.children:
            del self.children[name]
            return
        super().delete_attr(tx, name)

    # --- calls -------------------------------------------------------------------------
    def call_function(self, tx, args, kwargs):
        call = class_attribute(self.cls, "__call__")
        _guard_attr(tx, self.cls, "__call__", call)
        if call is not _Module.__call__:
            return super().call_function(tx, args, kwargs)  # the class's own __call__
        return call_new_module(tx, self, args, kwargs, lambda a, k: self.call_method(tx, "forward", a, k))

    # --- made after the graph, if it escapes (rebuild.py) ------------------------------
    def rebuild_fill(self, rb, name) -> list:
        if self.init_keys is None:
            return self.fill_attrs(rb, name)
        out = []
        before = {k: v for k, v in self.attrs.items() if k in self.init_keys}
        if before:
            out.append(f"{name}.__dict__.update({{{', '.join(f'{k!r}: {rb.expr(v)}' for k, v in before.items())}}})")
        out.append(f"{rb.ns.bind(_Module.__init__, 'module_init')}({name})")
        out.extend(self.fill_attrs(rb, name))
        if self.children:
            body = ", ".join(f"{k!r}: {rb.expr(v)}" for k, v in self.children.items())
            out.append(f"{name}._modules.update({{{body}}})")
        return out


class _Bound(VariableTracker):
    """A method of Module's, bound to a module made in the trace, that is modelled."""

    __slots__ = ("what", "fn")

    def __init__(self, what, fn):
        super().__init__(None)
        self.what = what
        self.fn = fn

    def describe(self):
        return self.what

    def call_function(self, tx, args, kwargs):
        return self.fn(args, kwargs)


class ModuleInitFunction(UserFunctionVariable):
    """`nn.Module.__init__` read as a function (`nn.Module.__init__(self)`): modelled on a
    module made in the trace, inlined on anything else as before."""

    def call_function(self, tx, args, kwargs):
        if args and isinstance(args[0], NewUserModuleVariable):
            return args[0].module_init(tx, args[1:], kwargs)
        return super().call_function(tx, args, kwargs)


def _construct(tx, cls, args, kwargs):
    why = why_not_modelled(cls)
    if why is not None:
        unsupported("call", f"creating a {cls.__qualname__} module while tracing: {why}",
                    hint="create the module outside the optimized function and pass it in")
    if getattr(cls, "__abstractmethods__", None):
        unsupported("exceptions", f"TypeError: can't instantiate abstract class {cls.__qualname__}")
    obj = NewUserModuleVariable(cls)
    init = class_attribute(cls, "__init__")
    if init is _Module.__init__:
        _guard_attr(tx, cls, "__init__", init)
        obj.module_init(tx, args, kwargs)
    else:
        init_object(tx, cls, obj, args, kwargs)
    return obj


def _wrap_module_init(tx, value, source):
    return ModuleInitFunction(value, source)
