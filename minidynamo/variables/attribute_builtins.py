"""The attribute-reading builtins in a trace: `getattr` (with a default) and `hasattr`
with a constant name, as the attribute reads they stand for (`setattr`, `delattr`: the
writes, object_builtins.py). Each returns None where it is not modelled (builtins.py then
declines the call). C attribute descriptors handed in (`torch.Tensor.shape`), whose
`__get__` is that read."""
from __future__ import annotations

import types

import torch

from ..exc import Unsupported, unsupported
from .attribute_protocols import class_attribute
from .base import RealValueVariable
from .constant import ConstantVariable


def getattr_call(tx, args, kwargs):
    if len(args) not in (2, 3) or not args[1].is_python_constant():
        return None
    name = args[1].as_python_constant()
    if len(args) == 3:
        try:
            return args[0].var_getattr(tx, name)
        except Unsupported as e:
            if e.raises(AttributeError):
                return args[2]
            raise
    return args[0].var_getattr(tx, name)


def hasattr_call(tx, args, kwargs):
    if len(args) != 2 or not args[1].is_python_constant():
        return None
    asked = getattr(args[0], "has_attr", None)  # answered and guarded without reading the value
    answer = asked(tx, args[1].as_python_constant()) if asked is not None else None
    if answer is not None:
        return ConstantVariable(answer)
    try:
        args[0].var_getattr(tx, args[1].as_python_constant())
        return ConstantVariable(True)
    except Unsupported as e:
        if e.raises(AttributeError):
            return ConstantVariable(False)
        raise


# C descriptors of a class's attributes (`torch.Tensor.shape`, a `__slots__` member)
C_DESCRIPTOR_TYPES = (types.GetSetDescriptorType, types.MemberDescriptorType)


class CDescriptorVariable(RealValueVariable):
    """A getset or member descriptor handed in (guarded by identity): `d.__get__(obj)` is
    `obj.name` where the object's class finds this very descriptor under that name (and
    looks attributes up as object does, or is a tensor); None as the object gives the
    descriptor itself. Anything else declines."""

    __slots__ = ()
    rebuild = RealValueVariable.rebuild_as_itself

    def describe(self):
        return f"the {type(self.value).__name__} {self.value.__objclass__.__qualname__}.{self.value.__name__}"

    def var_getattr(self, tx, name):
        if name == "__get__":
            return self.method_getattr(tx, name)
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.value, name))
        unsupported("construct", f"attribute {name!r} of {self.describe()}")

    def call_method(self, tx, name, args, kwargs):
        if name != "__get__" or kwargs or not 1 <= len(args) <= 2:
            unsupported("construct", f"{name!r} of {self.describe()}")
        obj = args[0]
        if obj.is_python_constant() and obj.as_python_constant() is None:
            return self
        attr, cls = self.value.__name__, obj.python_type()
        if not issubclass(cls, self.value.__objclass__):
            unsupported("exceptions", f"TypeError: descriptor {attr!r} for {self.value.__objclass__.__name__!r} "
                                      f"objects doesn't apply to a {cls.__name__!r} object", raised=TypeError)
        generic = class_attribute(cls, "__getattribute__") in (object.__getattribute__, torch.Tensor.__getattribute__)
        if class_attribute(cls, attr) is not self.value or not generic:
            unsupported("construct", f"{self.describe()}.__get__ on a {cls.__qualname__} object, whose class "
                                     "answers that name otherwise")
        return obj.var_getattr(tx, attr)
