"""`super()` in a trace: `super(cls, obj)` and zero-argument `super()` over an object made in
the trace, one passed in, or an exception made in the trace; attribute lookup on
`type(obj)`'s MRO after `cls`, with the builtin bases' own methods modeled where they are
called this way (`object.__init__`, `Module.__getattr__`, `BaseException.__init__`, a dict
base's methods)."""
from __future__ import annotations


import torch

from ..exc import builtin_raises, unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource, ObjectSource
from .attribute_protocols import GenericGetattribute, PlainSetattr, own_getattribute
from .base import VariableTracker
from .constant import ConstantVariable
from .exceptions import ExceptionVariable, exception_init
from .functions import bound_member
from .objects import ClassVariable, UserObjectVariable
from .stores import ModuleTablesSource
from .user_objects import InstanceAttributes, _class_var, _guard_attr, is_python_class


class SuperVariable(VariableTracker):
    """`super(cls, obj)`: attribute lookup on type(obj)'s MRO after `cls`."""

    __slots__ = ("cls", "obj")

    def __init__(self, cls, obj):
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super

    def describe(self):
        return f"super({self.cls.__qualname__}, {self.obj.describe()})"

    def var_getattr(self, tx, name):
        obj_type = self.obj.python_type()
        mro = obj_type.__mro__
        if self.cls not in mro:
            unsupported("exceptions", "TypeError: super(type, obj): obj must be an instance or subtype of type")
        for klass in mro[mro.index(self.cls) + 1:]:
            if name not in vars(klass):
                continue
            attr = vars(klass)[name]
            modelled = self.obj.base_attr(tx, klass, name) if isinstance(self.obj, InstanceAttributes) else None
            if modelled is not None:
                return modelled
            if attr is object.__init__:
                return _ObjectInit(self.obj)
            if isinstance(self.obj, ExceptionVariable) and name == "__init__":
                return exception_init(self.obj, klass)  # a builtin exception class's own
            if name == "__getattribute__" and own_getattribute(klass) is None:
                return GenericGetattribute(self.obj)  # the generic lookup, past the class's own hook
            if attr is object.__setattr__ and isinstance(self.obj, (InstanceAttributes, UserObjectVariable)):
                return PlainSetattr(self.obj)
            if klass is not object and not is_python_class(klass) and isinstance(self.obj, InstanceAttributes):
                return self.obj.builtin_attr(tx, name, klass)  # dict's own, on a dict subclass's object
            if klass is not object:
                _guard_attr(tx, klass, name, attr)
            if attr is torch.nn.Module.__getattr__ and isinstance(self.obj, UserObjectVariable) \
                    and self.obj.is_module() and self.obj.source is not None:
                return _ModuleGetattr(self.obj)  # from a module class's own __getattr__
            bound = bound_member(tx, attr, self.obj, _class_var(obj_type))
            if bound is not None:
                return bound
            if not hasattr(type(attr), "__get__"):
                return tx.wrap(attr, AttrSource(ObjectSource(klass, klass.__qualname__), name))
            unsupported("construct", f"super().{name}: {type(attr).__name__} of {klass.__qualname__} is not traced")
        unsupported("exceptions", f"AttributeError: 'super' object has no attribute {name!r}", raised=AttributeError)

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)


class _ModuleGetattr(VariableTracker):
    """nn.Module.__getattr__ bound to a module passed in (`super().__getattr__(name)` in its
    class's own hook): the parameter, buffer or submodule of that name, else the
    AttributeError it raises (catchable in the trace). The tables are guarded to keep
    (or keep lacking) the name."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1 or not isinstance(args[0].as_python_constant()
                                                       if args[0].is_python_constant() else None, str):
            unsupported("construct", "nn.Module.__getattr__ called with other than one constant name")
        name, module = args[0].as_python_constant(), self.obj.value
        for table in ("_parameters", "_buffers", "_modules"):
            d = module.__dict__.get(table)
            if d is not None and name in d:
                return tx.wrap(d[name], ItemSource(AttrSource(self.obj.source, table), name))
        tx.output.guards.add(Guard("EQUALS_MATCH", ModuleTablesSource(self.obj.source, name), False))
        msg = f"'{type(module).__name__}' object has no attribute '{name}'"
        builtin_raises(AttributeError, [ConstantVariable(msg)], f"AttributeError: {msg}")


class _ObjectInit(VariableTracker):
    """object.__init__ bound through super(): does nothing; takes no arguments."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported("exceptions", "TypeError: object.__init__() takes exactly one argument")
        return ConstantVariable(None)


def call_super(tx, args, kwargs):
    """super(cls, obj), or zero-argument super() from the `__class__` cell and first
    argument of the frame being traced (the one making the call)."""
    if kwargs:
        return None
    if len(args) == 2:
        cls, obj = args
        if not cls.is_python_constant() or not isinstance(cls.as_python_constant(), type):
            return None
        if isinstance(obj, (ClassVariable,)) or not isinstance(obj, (InstanceAttributes, UserObjectVariable,
                                                                      ExceptionVariable)):
            return None
        return SuperVariable(cls.as_python_constant(), obj)
    if args:
        return None
    code = tx.code
    cell = tx.cells.get("__class__") if "__class__" in code.co_freevars else None
    if cell is None or code.co_argcount == 0:
        return None
    first = code.co_varnames[0]
    obj = tx.f_locals.get(first)
    if obj is None:  # the first argument is a cell of its own: read through it
        holder = tx.cells.get(first)
        obj = holder.load(tx) if holder is not None else None
    if not isinstance(obj, (InstanceAttributes, UserObjectVariable, ExceptionVariable)):
        return None
    cls = cell.load(tx)
    if not cls.is_python_constant():
        return None
    return SuperVariable(cls.as_python_constant(), obj)
