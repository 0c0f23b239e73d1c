"""A C method called through its class, `torch.Tensor.add(x, 1)` or `str.upper(s)`: the
method of its first argument, when that argument's class reaches the very same descriptor
(`inspect.getattr_static`), so calling it by name does what the descriptor does."""
from __future__ import annotations

import builtins
import inspect
import types

import torch

from ..exc import Unsupported

_DESCRIPTOR_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)


def is_unbound_method(fn) -> bool:
    """A method descriptor of a builtin type or of torch's tensor base."""
    owner = getattr(fn, "__objclass__", None)
    return type(fn) in _DESCRIPTOR_TYPES and isinstance(owner, type) and (
        owner.__module__ == "builtins" and getattr(builtins, owner.__name__, None) is owner
        or owner is torch._C.TensorBase)


def call_unbound_method(tx, fn, args: list, kwargs: dict):
    """`fn(obj, *rest, **kwargs)` as `obj.name(*rest, **kwargs)`, or None where it is not
    that (no argument, another class's object, a class overriding the method)."""
    if not args or not is_unbound_method(fn):
        return None
    try:
        cls = args[0].python_type()
    except Unsupported:
        return None
    if not isinstance(cls, type) or not issubclass(cls, fn.__objclass__) \
            or inspect.getattr_static(cls, fn.__name__, None) is not fn:
        return None
    return args[0].call_method(tx, fn.__name__, list(args[1:]), dict(kwargs))
