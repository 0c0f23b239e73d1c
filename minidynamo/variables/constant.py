"""ConstantVariable: an immutable Python value known at trace time (folded, guarded)."""
from __future__ import annotations

import types

import torch

from ..exc import attribute_error, builtin_raises, unsupported
from .base import BoundMethodVariable, ObjectConstantVariable

# Types whose values are immutable and whose methods are pure: safe to fold.
CONSTANT_TYPES = (
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
    range, slice, torch.dtype, torch.device, torch.layout, torch.memory_format,
    # A GPU's properties (torch.cuda.get_device_properties): read-only, fixed per process.
    *filter(None, [getattr(torch._C, "_CudaDeviceProperties", None)]),
)
_FOLDABLE_METHOD_TYPES = (int, float, bool, complex, str, bytes, range, slice, torch.dtype,
                          torch.device)


def _is_triton_dtype(v) -> bool:
    """A `triton.language` dtype (tl.float32, ...): immutable, compared by name."""
    t = type(v)
    return t.__name__ in ("dtype", "pointer_type") and t.__module__.startswith("triton.language")


# The exact types above that hold no other values (a slice, tuple or frozenset holds items):
# most values asked about are of one of these, answered by one set lookup.
_PLAIN_CONSTANT_TYPES = frozenset(t for t in CONSTANT_TYPES if t is not slice)


def is_constant_value(v) -> bool:
    if type(v) in _PLAIN_CONSTANT_TYPES:
        return True
    if _is_triton_dtype(v):
        return True
    if issubclass(type(v), CONSTANT_TYPES):  # (isinstance would believe a __class__ property)
        if isinstance(v, slice):
            return all(is_constant_value(x) for x in (v.start, v.stop, v.step))
        return True
    if type(v) in (tuple, frozenset):
        return all(is_constant_value(x) for x in v)
    return False


class ConstantVariable(ObjectConstantVariable):
    """An immutable value: foldable, and usable as an fx argument as it is."""

    __slots__ = ()

    def as_fx_arg(self):
        return self.value

    def as_fake(self):
        return self.value

    def describe(self):
        r = repr(self.value)
        return f"constant {r if len(r) < 40 else r[:37] + '...'}"

    def rebuild(self, rb) -> str:  # written out, whatever its source
        value = self.value
        if type(value) in (int, str, bool, bytes) or value is None:
            return repr(value)
        return rb.ns.bind(value, "c")

    def truthy(self, tx):
        return bool(self.value)

    def call_function(self, tx, args, kwargs):
        if type(self.value) is types.FunctionType:  # a dict key / set member: the function itself
            return tx.wrap(self.value, None).call_function(tx, args, kwargs)
        return super().call_function(tx, args, kwargs)

    def var_getattr(self, tx, name):
        if type(self.value) is types.FunctionType:  # its attributes guarded as the function's
            return tx.wrap(self.value, None).var_getattr(tx, name)
        if name == "__class__":  # as type(value): a constant from outside has its type guarded
            return tx.wrap(type(self.value), None)
        attr = self.real_attr(name)
        if callable(attr):
            return BoundMethodVariable(self, name)
        if is_constant_value(attr):
            return ConstantVariable(attr)
        unsupported("construct", f"attribute {name!r} of {self.describe()}")

    def call_method(self, tx, name, args, kwargs):
        if not isinstance(self.value, _FOLDABLE_METHOD_TYPES):
            unsupported("call", f"method {name!r} of {self.describe()}")
        if not all(a.is_python_constant() for a in args) or not all(
                v.is_python_constant() for v in kwargs.values()):
            unsupported("call", f"{type(self.value).__name__}.{name} with non-constant arguments")
        pargs = [a.as_python_constant() for a in args]
        pkwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        return fold(tx, getattr(self.value, name), pargs, pkwargs, f"{type(self.value).__name__}.{name}")

    def iter_items(self, tx):
        v = self.value
        if isinstance(v, (range, str, bytes)) or type(v) in (tuple, frozenset):
            return [ConstantVariable(x) for x in v]
        return super().iter_items(tx)

    def __repr__(self):
        return f"ConstantVariable({self.value!r})"


# Builtin exceptions with no state beyond their args (not AttributeError or NameError, which
# carry .name/.obj, nor OSError, UnicodeError, ImportError, SyntaxError with fields of their own).
_ARGS_ONLY_EXCEPTIONS = frozenset((ValueError, TypeError, ZeroDivisionError, OverflowError, IndexError, KeyError,
                                   ArithmeticError, LookupError, RuntimeError, NotImplementedError))


def fold(tx, fn, args, kwargs, what: str):
    """Call a pure function on constants; a raised exception declines the trace."""
    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # the eager run will raise it for real
        detail = f"{what} raised {type(e).__name__}: {e}"
        if type(e) in _ARGS_ONLY_EXCEPTIONS and all(is_constant_value(a) for a in e.args):
            # Its class and args are all of it: raised in the trace, where a handler may catch it.
            builtin_raises(type(e), [ConstantVariable(a) for a in e.args], detail)
        unsupported("exceptions", detail, raised=attribute_error(e))
    return tx.wrap_constant_result(result, what)
