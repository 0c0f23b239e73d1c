"""Cheaper fake tensors for the trace (graph.py calls in here).

A fake op through FakeTensorMode costs 100-300 µs on a small CPU even when the mode's
own dispatch cache hits, and `FakeTensorMode.from_tensor` costs ~150 µs per input.
Two shortcuts, each taken only where its result is exactly what the slow path gives:

* `input_fake`: a plain dense tensor (exact torch.Tensor, strided, not a view, offset 0,
  no autograd history, no conj/neg bit) becomes a FakeTensor over an `empty_strided`
  meta tensor of the same size, stride, dtype and device; anything else goes through
  `from_tensor`.
* `op_result` / `remember`: results of *pure* ops (elementwise arithmetic and math
  functions that always return a new tensor) are memoized by the metadata of their
  arguments: dtype, device, size, stride, storage offset of each tensor, type and value
  of each constant, plus the grad mode and default dtype. A hit builds the output fake
  directly. Tensors that require grad, are constants of the mode, or are not plain fakes
  never take the shortcut; in-place ops, views and anything not listed never do.
"""
from __future__ import annotations

import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor

_MAX_ENTRIES = 4096
_results: dict = {}

_PURE_FUNCTIONS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.abs,
    operator.and_, operator.or_, operator.xor, operator.invert,
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
}
_PURE_NAMES = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
    "neg", "abs", "relu", "sigmoid", "tanh", "exp", "exp2", "expm1", "log", "log2", "log10",
    "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "sqrt", "rsqrt",
    "reciprocal", "square", "sign", "floor", "ceil", "round", "trunc", "frac", "erf",
    "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "where", "lerp", "atan2",
    "logical_not", "logical_and", "logical_or", "eq", "ne", "lt", "le", "gt", "ge",
)
for _name in _PURE_NAMES:
    _fn = getattr(torch, _name, None)
    if _fn is not None:
        _PURE_FUNCTIONS.add(_fn)
for _name in ("relu", "gelu", "silu", "sigmoid", "tanh"):
    _fn = getattr(torch.nn.functional, _name, None)
    if _fn is not None:
        _PURE_FUNCTIONS.add(_fn)
_PURE_METHODS = frozenset(_PURE_NAMES) | {
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__neg__", "__pow__", "__rpow__", "__abs__",
}
_SCALARS = (int, float, bool, complex)
_META = torch.device("meta")


def _arg_key(a, mode):
    """Hashable metadata of one argument, or None: not eligible."""
    if isinstance(a, torch.Tensor):
        if (type(a) is not FakeTensor or a.fake_mode is not mode or a.requires_grad
                or a.constant is not None or a.layout is not torch.strided):
            return None
        return (a.dtype, a.device, tuple(a.shape), a.stride(), a.storage_offset())
    t = type(a)
    if t in _SCALARS or a is None:
        return (t, a)
    return None


def op_key(kind, target, args, kwargs, mode):
    """The memo key of one op on fake arguments, or None when it must run for real."""
    if kind == "call_method":
        if target not in _PURE_METHODS:
            return None
    else:
        try:
            if target not in _PURE_FUNCTIONS:
                return None
        except TypeError:  # unhashable target
            return None
    keys = []
    for a in args:
        k = _arg_key(a, mode)
        if k is None:
            return None
        keys.append(k)
    for name, a in kwargs.items():
        k = _arg_key(a, mode)
        if k is None or name == "out":
            return None
        keys.append((name, k))
    return (kind, target, torch.is_grad_enabled(), torch.get_default_dtype(), tuple(keys))


def op_result(key, mode):
    """A fresh fake output for a memoized op, or None."""
    meta = _results.get(key)
    if meta is None:
        return None
    size, stride, dtype, device = meta
    return FakeTensor(mode, torch.empty_strided(size, stride, dtype=dtype, device=_META), device)


def remember(key, result) -> None:
    """Memoize a result the slow path computed, if it is a plain new tensor."""
    if (type(result) is not FakeTensor or result.requires_grad or result.constant is not None
            or result.layout is not torch.strided or result.storage_offset() != 0):
        return
    if len(_results) >= _MAX_ENTRIES:
        _results.clear()
    _results[key] = (tuple(result.shape), result.stride(), result.dtype, result.device)


def input_fake(mode, t: torch.Tensor):
    """A fake for a real input tensor: direct for plain dense tensors, else from_tensor."""
    if (type(t) is torch.Tensor and t.layout is torch.strided and not t.requires_grad
            and t._base is None and t.storage_offset() == 0 and not t.is_conj()
            and not t.is_neg() and not t.is_inference() and not t.is_quantized
            and t.device.type != "meta"):
        size, stride = t.shape, t.stride()
        meta = torch.empty_strided(size, stride, dtype=t.dtype, device=_META)
        if meta.untyped_storage().nbytes() == t.untyped_storage().nbytes():
            return FakeTensor(mode, meta, t.device)
    return mode.from_tensor(t, static_shapes=True)
