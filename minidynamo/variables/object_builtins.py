"""The builtins that act on objects the trace models: `setattr(obj, k, v)`,
`delattr(obj, k)` and `vars(obj)` on objects made in the trace, and `object.__setattr__` /
`object.__getattribute__` called with an object (frozen dataclasses' `__init__`, a class's
own `__setattr__` storing past itself): each as the object's tracker does it."""
from __future__ import annotations

from .attribute_protocols import GenericGetattribute, PlainSetattr
from .constant import ConstantVariable
from .objects import UserObjectVariable
from .user_objects import InstanceAttributes


def object_setattr(tx, args, kwargs):
    """`object.__setattr__(obj, name, value)` (frozen dataclasses' __init__, a class's own
    __setattr__ storing past itself)."""
    if len(args) == 3 and not kwargs and (isinstance(args[0], InstanceAttributes) or
                                          isinstance(args[0], UserObjectVariable) and not args[0].is_module()):
        return PlainSetattr(args[0]).call_function(tx, args[1:], {})
    return None


def object_getattribute(tx, args, kwargs):
    """`object.__getattribute__(obj, name)`: the generic lookup, past the class's own hook."""
    if len(args) == 2 and not kwargs and isinstance(args[0], (InstanceAttributes, UserObjectVariable)):
        return GenericGetattribute(args[0]).call_function(tx, args[1:], {})
    return None


def _setattr(tx, args, kwargs):
    """`setattr(obj, name, value)`: as `obj.name = value` is (STORE_ATTR: the tracker's
    store_attr, where it has one)."""
    store = getattr(args[0], "store_attr", None) if args else None
    if len(args) == 3 and not kwargs and store is not None and args[1].is_python_constant() \
            and type(args[1].as_python_constant()) is str:
        store(tx, args[1].as_python_constant(), args[2])
        return ConstantVariable(None)
    return None


def _vars(tx, args, kwargs):
    """`vars(obj)`: its `__dict__`, read as `obj.__dict__` is (no argument: the frame's locals, declined)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], InstanceAttributes):
        return args[0].var_getattr(tx, "__dict__")
    return None


def _delattr(tx, args, kwargs):
    """`delattr(obj, name)`: as `del obj.name` is (DELETE_ATTR: the tracker's delete_attr,
    where it has one)."""
    delete = getattr(args[0], "delete_attr", None) if args else None
    if len(args) == 2 and not kwargs and delete is not None and args[1].is_python_constant() \
            and isinstance(args[1].as_python_constant(), str):
        delete(tx, args[1].as_python_constant())
        return ConstantVariable(None)
    return None
