"""Cheaper fake tensors for the trace (graph.py calls in here).

A fake op through FakeTensorMode costs 100-300 µs on a small CPU even when the mode's
own dispatch cache hits, and `FakeTensorMode.from_tensor` costs ~150 µs per input.
Two shortcuts, each taken only where its result is exactly what the slow path gives:

* `input_fake`: a plain dense tensor (exact torch.Tensor or Parameter, strided, not a
  view, offset 0, no autograd history, no .grad, no conj/neg bit) becomes a FakeTensor over
  an `empty_strided` meta tensor of the same size, stride, dtype and device, a leaf that
  requires grad (and `_is_param`) as `from_tensor` makes it; anything else, and anything
  under inference mode (the fake would be an inference tensor), goes through `from_tensor`.
* `op_result` / `remember`: results of ops that, run on fakes, wrote none of their arguments
  and returned one new tensor (graph.py records those facts from the run: version counters
  and storages) are memoized by the metadata of their arguments: dtype, device, size,
  stride, storage offset of each tensor, type and value of each constant, plus the grad
  mode, the default dtype and the cuDNN/oneDNN switches (a convolution's result layout
  follows the backend they select). A hit builds the output fake directly.

  Why the first run's facts hold for every later run with the same key: an op's writes, its
  result's aliasing and its result's metadata are functions of the argument metadata and
  of global state, and the key holds all of it that can matter. Left out, because the key
  cannot hold it: tensors that require grad while grad mode is on (the result has autograd
  history; with grad mode off no result requires grad, so the flag changes nothing), are
  constants of the mode, are conj/neg views or not plain fakes; ops under autocast (it
  changes result dtypes) or inference mode (results are inference tensors); ops with no
  tensor argument (factories take their device from the default device); arguments that
  are not scalars, strings, dtypes, devices or tuples of scalars.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor

_MAX_ENTRIES = 4096
_results: dict = {}

_SCALARS = (int, float, bool, complex)
_ATOMS = (int, float, bool, complex, str, torch.dtype, torch.device, torch.memory_format, torch.layout)
_META = torch.device("meta")


def _arg_key(a, mode, grad: bool):
    """Hashable metadata of one argument, or None: not eligible."""
    if isinstance(a, torch.Tensor):
        if (type(a) is not FakeTensor or a.fake_mode is not mode or (grad and a.requires_grad)
                or a.constant is not None or a.layout is not torch.strided
                or a.is_conj() or a.is_neg() or a._has_symbolic_sizes_strides):
            return None
        return (a.dtype, a.device, tuple(a.shape), a.stride(), a.storage_offset())
    t = type(a)
    if t in _ATOMS or a is None:
        return (t, a)
    if (t is tuple or t is list) and all(type(x) in _SCALARS for x in a):
        return (t, tuple(a))
    return None


def op_key(kind, target, args, kwargs, mode):
    """The memo key of one op on fake arguments, or None when it must run for real."""
    if torch._C._is_any_autocast_enabled() or torch.is_inference_mode_enabled():
        return None
    grad = torch.is_grad_enabled()
    keys = []
    tensors = False
    for a in args:
        k = _arg_key(a, mode, grad)
        if k is None:
            return None
        tensors = tensors or isinstance(a, torch.Tensor)
        keys.append(k)
    for name, a in kwargs.items():
        k = _arg_key(a, mode, grad)
        if k is None:
            return None
        tensors = tensors or isinstance(a, torch.Tensor)
        keys.append((name, k))
    if not tensors:
        return None
    # A convolution's result memory format follows the backend these flags select.
    return (kind, target, grad, torch.get_default_dtype(),
            torch._C._get_cudnn_enabled(), torch._C._get_mkldnn_enabled(), tuple(keys))


def op_result(key, mode):
    """A fresh fake output for a memoized op, or None."""
    try:
        meta = _results.get(key)
    except TypeError:  # an unhashable target
        return None
    if meta is None:
        return None
    size, stride, dtype, device = meta
    return FakeTensor(mode, torch.empty_strided(size, stride, dtype=dtype, device=_META), device)


def remember(key, result) -> None:
    """Memoize a result the slow path computed; the caller saw the op write nothing and
    return a new tensor. Only a plain one is kept."""
    if (type(result) is not FakeTensor or result.requires_grad or result.constant is not None
            or result.layout is not torch.strided or result.storage_offset() != 0
            or result.is_conj() or result.is_neg()):
        return
    size, stride = tuple(result.shape), result.stride()
    span = 0 if 0 in size else 1 + sum((n - 1) * st for n, st in zip(size, stride))
    if span * result.element_size() != result.untyped_storage().nbytes():
        return  # a result over a larger allocation: a hit would not rebuild it exactly
    try:
        hash(key)
    except TypeError:  # an unhashable target
        return
    if len(_results) >= _MAX_ENTRIES:
        _results.clear()
    _results[key] = (size, stride, result.dtype, result.device)


def input_fake(mode, t: torch.Tensor):
    """A fake for a real input tensor: direct for plain dense tensors, else from_tensor."""
    cls = type(t)
    if ((cls is torch.Tensor or cls is torch.nn.Parameter) and t.layout is torch.strided
            and t.grad_fn is None and t._base is None and t.storage_offset() == 0
            and not t.is_conj() and not t.is_neg() and not t.is_inference() and not t.is_quantized
            and t.device.type != "meta" and (not t.requires_grad or t.grad is None)
            and not getattr(t, "_is_buffer", False)
            and not torch.is_inference_mode_enabled()):  # a meta tensor made here would be one
        size, stride = t.shape, t.stride()
        meta = torch.empty_strided(size, stride, dtype=t.dtype, device=_META)
        if meta.untyped_storage().nbytes() == t.untyped_storage().nbytes():
            fake = FakeTensor(mode, meta, t.device)
            if t.requires_grad:
                fake.requires_grad_(True)
            if cls is torch.nn.Parameter:
                fake._is_param = True
            return fake
    return mode.from_tensor(t, static_shapes=True)
