"""torch functions, modules and classes: calls become graph nodes run on fake tensors."""
from __future__ import annotations

import types

import torch

from ..exc import unsupported
from .base import ObjectConstantVariable
from .constant import ConstantVariable, fold, is_constant_value
from .tensor import TensorVariable

# Pure functions of metadata that may be folded even with no tensor argument.
_PURE_NO_TENSOR = {
    torch.promote_types, torch.result_type, torch.can_cast, torch.finfo, torch.iinfo,
    torch.get_default_dtype, torch.is_tensor, torch.is_floating_point, torch.is_complex,
    torch.Size,
}
# Calls that change global state or talk to the outside world.
_SIDE_EFFECTS = {torch.manual_seed, torch.set_default_dtype, torch.set_grad_enabled,
                 torch.set_printoptions, torch.save, torch.load}


def is_torch_object(value) -> bool:
    mod = getattr(value, "__module__", None) or ""
    if isinstance(value, types.ModuleType):
        return value.__name__ == "torch" or value.__name__.startswith("torch.")
    return mod == "torch" or mod.startswith("torch.") or mod.startswith("torch._C")


def _has_tensor(values) -> bool:
    from .dicts import DictVariable
    from .lists import BaseListVariable
    for v in values:
        if isinstance(v, TensorVariable):
            return True
        if isinstance(v, BaseListVariable) and _has_tensor(v.items):
            return True
        if isinstance(v, DictVariable) and _has_tensor(v.items.values()):
            return True
    return False


class TorchVariable(ObjectConstantVariable):
    """A torch module, function or class used by the traced code."""

    def describe(self):
        name = getattr(self.value, "__qualname__", None) or getattr(self.value, "__name__", repr(self.value))
        mod = getattr(self.value, "__module__", None)
        return f"torch object {mod + '.' if mod else ''}{name}"

    def var_getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            unsupported("exceptions", f"AttributeError: {e}")
        if is_constant_value(attr):
            return ConstantVariable(attr)
        if callable(attr) or isinstance(attr, types.ModuleType):
            return TorchVariable(attr)
        from .builder import wrap
        return wrap(tx, attr, None)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        name = getattr(fn, "__name__", repr(fn))
        if fn in _SIDE_EFFECTS:
            unsupported("side_effect", f"torch.{name}() changes global state")
        if fn is torch.Size or (not _has_tensor(args) and not _has_tensor(kwargs.values())
                                and fn in _PURE_NO_TENSOR):
            if all(a.is_python_constant() for a in args) and all(
                    v.is_python_constant() for v in kwargs.values()):
                return fold(tx, fn, [a.as_python_constant() for a in args],
                            {k: v.as_python_constant() for k, v in kwargs.items()}, f"torch.{name}")
        if isinstance(fn, type) and not issubclass(fn, torch.Tensor):
            unsupported("call", f"creating a {fn.__qualname__} object while tracing")
        if name.startswith("_") and not name.startswith("__"):
            pass  # private torch functions are allowed but shown with their own name
        tensor_in = _has_tensor(args) or _has_tensor(kwargs.values())
        return tx.output.call("call_function", fn, list(args), dict(kwargs),
                              what=f"torch.{name}", fold_metadata=tensor_in)
