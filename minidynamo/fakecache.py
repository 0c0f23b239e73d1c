"""Cheaper fake tensors for the trace (graph.py calls in here).

A fake op through FakeTensorMode costs 100-300 µs on a small CPU even when the mode's
own dispatch cache hits (0.5-2 ms when it misses, as every new shape does on a first
call), and `FakeTensorMode.from_tensor` costs ~150 µs per input. Three shortcuts, each
taken only where its result is exactly what the slow path gives:

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

import sys

import torch
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

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
        # Each element with its type: [2, 3] == [2.0, 3.0] == [2+0j, 3+0j] as keys, but
        # eager raises for floats where ints go (new_zeros) or complex where reals go.
        return (t, tuple((type(x), x) for x in a))
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


# --- aten ops straight to their meta kernels ---------------------------------------------
# FakeTensorMode.dispatch spends 0.1-1 ms of Python per aten op (its cache key, or on a
# miss the checks of `_dispatch_impl`) before it runs the op's meta kernel and wraps the
# result (`wrap_meta_outputs_with_default_device_logic`). For an op whose every check
# leads to that last step, `direct` takes it at once: the same kernel, the same wrapping
# (torch's own method), so the same result; the dispatch cache only replays that result.
# Which ops: decided once per op from torch's own tables (`_route`, each test in the
# order `_dispatch_impl` makes it); per call, only plain fakes of this mode without
# constants (constant propagation), symbolic sizes (the fast impls, the decompositions)
# or real-tensor propagation qualify. tests/test_fake_direct.py compares both paths.

SLOW = object()  # direct's answer where the op must take FakeTensorMode's own path
_routes: dict = {}  # OpOverload -> whether its dispatch ends at the meta kernel


def _route(mode, func) -> bool:
    """Whether FakeTensorMode._dispatch_impl, given only plain fakes with no constants and no
    symbolic sizes, runs `func`'s meta kernel and wraps the result (its final branch),
    having taken none of the earlier ones."""
    from torch._decomp import decomposition_table, meta_table
    from torch._subclasses import fake_tensor as ft
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten":
        return False
    if (func in getattr(ft, "_DISPATCH_META_HANDLERS", {}) or func in getattr(ft, "_DISPATCH_HANDLE_DIRECTLY", ())
            or func is torch.ops.aten.lift_fresh.default or func is torch.ops.aten.lift_fresh_copy.default
            or func is torch.ops.aten.to_dense.default):
        return False
    if func not in meta_table and not ft.FakeTensorMode.cpp_meta_supports_symint(mode, func):
        if func in decomposition_table and ft.torch_decomp_decompositions(func):
            return False  # a Python decomposition
        if func._can_decompose():
            return False  # CompositeImplicitAutograd: decomposed
    if "prims::" in func._schema.name:
        return False
    if torch._library.simple_registry.singleton.find(func.name()).fake_impl.kernel:  # a registered fake rule
        return False
    if any(check(func) for check, _ in fake_impls.op_implementations_checks):
        return False  # constructors, device moves, ops with their own fake rules
    return fake_impls.has_meta(func)


def direct(mode, func, args, kwargs):
    """`func(*args, **kwargs)` on fakes as FakeTensorMode runs it, or SLOW."""
    route = _routes.get(func)
    if route is None or _tables_changed():
        route = _routes[func] = _route(mode, func)
    if mode.propagate_real_tensors or _custom_profiles():
        return SLOW
    if not route:
        shortcut = _SHORTCUTS.get(func)
        return SLOW if shortcut is None else shortcut(mode, func, args, kwargs)
    return _run_meta(mode, func, args, kwargs)


def _run_meta(mode, func, args, kwargs):
    """Run `func`'s meta kernel on plain fakes and wrap the result as FakeTensorMode does."""
    flat: list = []
    if not _plain_leaves(args, mode, flat) or not _plain_leaves(kwargs.values(), mode, flat):
        return SLOW
    if not any(type(a) is FakeTensor for a in flat):
        return SLOW
    try:
        with in_kernel_invocation_manager(mode):
            r = func(*args, **kwargs)
    except NotImplementedError:  # FakeTensorMode tries a fallback kernel: its path
        return SLOW
    return mode.wrap_meta_outputs_with_default_device_logic(r, func, flat, device=kwargs.get("device"))


# --- ops FakeTensorMode runs in Python whose result is known in a narrow case ------------
# Each shortcut takes only arguments where the result provably equals FakeTensorMode's
# (tests/test_fake_direct.py compares them over many shapes, strides and dtypes).


def _contiguous_strides(size) -> tuple:
    """torch's make_contiguous_strides_for: size-1 dims take the stride of the dim after."""
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _plain(t, mode) -> bool:
    return (type(t) is FakeTensor and t.fake_mode is mode and t.constant is None
            and not t._has_symbolic_sizes_strides and t.layout is torch.strided
            and not t.is_conj() and not t.is_neg())


def _view(mode, func, args, kwargs):
    """`view` of a tensor whose strides are exactly contiguous, numel > 0: FakeTensorMode's
    rule (torch._refs._reshape_view_helper: as_strided, split_dim, collapse_view, squeeze,
    unsqueeze, each keeping a contiguous layout contiguous) gives the contiguous strides of
    the new shape over the same storage at the same offset."""
    if kwargs or len(args) != 2 or not _plain(args[0], mode) or _size_oblivious():
        return SLOW
    a, shape = args
    if type(shape) not in (list, tuple) or any(type(n) is not int for n in shape):
        return SLOW
    size, numel = tuple(a.shape), a.numel()
    if numel == 0 or a.stride() != _contiguous_strides(size):
        return SLOW
    known = 1
    for n in shape:
        known *= 1 if n == -1 else n
    holes = shape.count(-1)
    if holes > 1 or any(n < -1 for n in shape) or known <= 0 or numel % known:
        return SLOW
    new = tuple(numel // known if n == -1 else n for n in shape)
    if holes == 0 and known != numel:
        return SLOW
    return _run_meta(mode, _AS_STRIDED, (a, new, _contiguous_strides(new), a.storage_offset()), {})


_ADDMM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _addmm(mode, func, args, kwargs):
    """`addmm(bias, m1, m2)` (beta = alpha = 1) of one floating dtype with a 1-d bias or a
    contiguous (m, n) one: FakeTensorMode's Python decomposition (`mm(m1, m2) + bias`, the
    contiguous product first, so the sum takes its layout) and the meta kernel both give a
    fresh contiguous (m, n) tensor."""
    if kwargs or len(args) != 3:
        return SLOW
    bias, m1, m2 = args
    if not (_plain(bias, mode) and _plain(m1, mode) and _plain(m2, mode)):
        return SLOW
    dtype, device = m1.dtype, m1.device
    if (dtype not in _ADDMM_DTYPES or bias.dtype is not dtype or m2.dtype is not dtype
            or bias.device != device or m2.device != device or m1.dim() != 2 or m2.dim() != 2
            or m1.shape[1] != m2.shape[0]):
        return SLOW
    mn = (m1.shape[0], m2.shape[1])
    if not (bias.dim() == 1 and bias.shape[0] == mn[1]
            or bias.dim() == 2 and tuple(bias.shape) == mn and bias.stride() == _contiguous_strides(mn)):
        return SLOW
    return _run_meta(mode, func, args, kwargs)


def _size_oblivious() -> bool:
    config = sys.modules.get("torch.fx.experimental._config")
    return config is None or bool(getattr(config, "backed_size_oblivious", True))


_SHORTCUTS = {torch.ops.aten.view.default: _view, torch.ops.aten.addmm.default: _addmm}
_AS_STRIDED = torch.ops.aten.as_strided.default

_sizes: list = [None]


def _tables_changed() -> bool:
    """Whether torch's fake rules were registered or removed since the routes were decided
    (torch.export registers some while it runs): then every route is decided again."""
    sizes = (len(fake_impls.op_implementations_checks), len(fake_impls.op_implementations_dict))
    if sizes == _sizes[0]:
        return False
    _routes.clear()
    _sizes[0] = sizes
    return True


def _custom_profiles() -> bool:
    """Whether torch._dynamo's op profiles (fake kernels made from profiles) are set: then
    FakeTensorMode may answer from them before the meta kernel."""
    config = sys.modules.get("torch._dynamo.config")
    return config is not None and getattr(config, "_custom_ops_profile", None) is not None


def _plain_leaves(values, mode, flat: list) -> bool:
    """Collect the leaves of aten arguments (as pytree flattens them) into `flat`; False
    where one is a tensor other than a plain fake of `mode`, or a symbolic number."""
    for a in values:
        t = type(a)
        if t is list or t is tuple:
            if not _plain_leaves(a, mode, flat):
                return False
            continue
        if isinstance(a, torch.Tensor):
            if (t is not FakeTensor or a.fake_mode is not mode or a.constant is not None
                    or a._has_symbolic_sizes_strides):
                return False
        elif isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool, dict)):
            return False
        flat.append(a)
    return True



# --- memoized results of FakeTensorMode's own path ---------------------------------------
# The ops `direct` leaves to FakeTensorMode (Python decompositions and fake rules: `view`,
# `addmm`, `slice`, `to`, `native_layer_norm`...) cost 0.2-1 ms each, repeats included
# (the mode's dispatch cache bypasses many of them, and its hits rebuild outputs slowly).
# For an op that writes nothing, the metadata of its one tensor result is a function of the
# metadata of its arguments and of the global state below (sizes, strides, offsets,
# dtypes, devices, flags, scalars, which arguments share a storage): `memo_key` holds all
# of it, `learn` records the first run's result, and `replay` rebuilds it: the argument
# itself, a view of the first argument's storage (as_strided, as torch's view rules make
# them) or a fresh tensor over an allocation of exactly its size. Anything else (a tuple,
# a view of another argument, a constant, a symbolic size) is not kept.

_memo: dict = {}  # key -> _SAME, _View or _Fresh: how to make the result again


def memo_key(mode, func, args, kwargs):
    """The memo key of one aten op dispatched to FakeTensorMode, or None."""
    if (not isinstance(func, torch._ops.OpOverload) or func.namespace not in ("aten", "prims")
            or mode.propagate_real_tensors or _custom_profiles()
            or torch.is_inference_mode_enabled() or not _memo_safe(func)):
        return None
    storages: list = []
    parts: list = []
    if not _memo_parts(args, mode, storages, parts) or not _memo_parts(kwargs.values(), mode, storages, parts):
        return None
    if kwargs:
        parts.append(tuple(kwargs))
    if not storages:
        return None
    return (func, torch.is_grad_enabled(), torch.get_default_dtype(), torch._C._get_cudnn_enabled(),
            torch._C._get_mkldnn_enabled(), tuple(parts))


_SAFE: dict = {}


def _memo_safe(func) -> bool:
    """Whether `func`'s schema writes nothing and its result is not random or data-sized."""
    safe = _SAFE.get(func)
    if safe is None:
        tags = func.tags
        safe = _SAFE[func] = not (
            any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)
            or torch.Tag.inplace_view in tags or torch.Tag.nondeterministic_seeded in tags
            or torch.Tag.dynamic_output_shape in tags or torch.Tag.data_dependent_output in tags
            or len(func._schema.returns) != 1)
    return safe


def _memo_parts(values, mode, storages: list, parts: list) -> bool:
    for a in values:
        t = type(a)
        if t is FakeTensor:
            if (a.fake_mode is not mode or a.constant is not None or a._has_symbolic_sizes_strides
                    or a.layout is not torch.strided or a.is_conj() or a.is_neg()):
                return False
            s = a.untyped_storage()._cdata
            group = storages.index(s) if s in storages else len(storages)
            storages.append(s)
            parts.append((a.dtype, a.device, tuple(a.shape), a.stride(), a.storage_offset(),
                          a.requires_grad, group))
        elif t is float or t is complex:
            parts.append((t, repr(a)))  # -0.0 and 0.0 are equal keys otherwise
        elif t in _ATOMS or a is None:
            parts.append((t, a))
        elif t is list or t is tuple:
            parts.append((t, len(a)))
            if not _memo_parts(a, mode, storages, parts):
                return False
        else:  # another tensor, a symbolic number, a dict...
            return False
    return True


class _Same:
    """The op returns its first argument itself (an in-place op)."""

    __slots__ = ()

    def replay(self, mode, args):
        return args[0]


_SAME = _Same()


class _View:
    """The op returns a view of its first argument: same dtype and device."""

    __slots__ = ("size", "stride", "offset")

    def __init__(self, size, stride, offset):
        self.size, self.stride, self.offset = size, stride, offset

    def replay(self, mode, args):
        return _run_meta(mode, _AS_STRIDED, (args[0], self.size, self.stride, self.offset), {})


class _Fresh:
    """The op returns a new dense tensor of its own storage."""

    __slots__ = ("size", "stride", "dtype", "device")

    def __init__(self, size, stride, dtype, device):
        self.size, self.stride, self.dtype, self.device = size, stride, dtype, device

    def replay(self, mode, args):
        return FakeTensor(mode, torch.empty_strided(self.size, self.stride, dtype=self.dtype, device=_META),
                          self.device)


def replay(mode, key, args):
    """The memoized result of the op `key` was made for, on these arguments, or SLOW."""
    entry = _memo.get(key)
    if entry is None:
        return SLOW
    return entry.replay(mode, args)


def learn(key, args, kwargs, result) -> None:
    """Record the result FakeTensorMode made for the op of `key` (see replay)."""
    if len(_memo) >= _MAX_ENTRIES:
        _memo.clear()
    first = args[0] if args else None
    if result is first and type(first) is FakeTensor:
        _memo[key] = _SAME
        return
    # Not kept either: a result with autograd history or view tracking (an op reached above
    # autograd made it through a decomposition; as_strided below autograd would not).
    if (type(result) is not FakeTensor or result.constant is not None or result.requires_grad
            or result._is_view() or result._has_symbolic_sizes_strides
            or result.layout is not torch.strided or result.is_conj() or result.is_neg()):
        return
    size, stride, offset = tuple(result.shape), result.stride(), result.storage_offset()
    s = result.untyped_storage()._cdata
    if type(first) is FakeTensor and first.untyped_storage()._cdata == s:
        if first.dtype != result.dtype or first.device != result.device:
            return
        _memo[key] = _View(size, stride, offset)
    else:
        if any(e.untyped_storage()._cdata == s for e in _tensors((args, tuple(kwargs.values())))) or offset != 0:
            return
        span = 0 if 0 in size else 1 + sum((n - 1) * st for n, st in zip(size, stride))
        if span * result.element_size() != result.untyped_storage().nbytes():
            return
        _memo[key] = _Fresh(size, stride, result.dtype, result.device)


def _tensors(values):
    for a in values:
        if type(a) is list or type(a) is tuple:
            yield from _tensors(a)
        elif isinstance(a, torch.Tensor):
            yield a
