"""Each NumPy call is checked against NumPy itself before it is recorded.

torch._numpy follows NumPy closely but not everywhere (`int / int` in the default torch
dtype, fft always in 64 bits, `sign(nan)` is 0, `median` of a vector is 1-d, `astype` to
the same dtype shares memory, kernels missing for some dtypes), so:

1. NumPy runs the call on *stand-ins*: small fresh arrays of the same dtypes and ranks
   (each dimension clipped to 4), filled with awkward values (zeros, negatives, nan, inf).
   Its result says what eager NumPy returns — dtypes, scalar or array, tuple or list, and
   whether it is a view of an argument — and these answers do not depend on the values or
   sizes (NumPy >= 2 has no value-based casting). Where NumPy raises on the stand-ins the
   call declines (eager may raise).
2. The node runs on real tensors holding the same stand-ins (again with the rest of the
   awkward values; a ufunc also on every pair of them, integer extremes included): shapes,
   dtypes and values must agree with NumPy's (floats within a few ulps of their precision).
   A dtype difference may be corrected (NumPy's dtype passed as `dtype=`, integer
   arguments cast to it first, an fft's result rounded to it), anything else declines.
3. The node runs once on the fake tensors (a dry run): dtypes and ranks must agree again.
4. Memory: a result NumPy makes new is copied where torch._numpy's would share memory
   with an argument; a result NumPy returns as a view must be one.

Calls whose size arguments stand-ins cannot satisfy (reshape, transpose, ...) are pure
layout changes: their result has the argument's dtype and no values to check.

The check runs NumPy and torch on a few dozen fresh numbers: pure, and cheap next to a
trace.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..exc import attribute_error, unsupported
from .numpy_calls import (
    TORCH_OF, Arguments, NumpyNode, Slot, Spec, accepts_dtype, fill, quiet, tnp_constant,
)
from .lists import ListVariable, TupleVariable
from .numpy_interop import NumpyNdarrayVariable


# --- stand-ins and what NumPy returns for them -----------------------------------------------
_SPECIAL_FLOATS = [1.5, -2.5, 0.0, 3.0, float("nan"), -0.0, float("inf"), 0.5, -1.0, float("-inf"), 2.0, -7.0,
                   5.85, -3.14159, 123.456, 0.001]
_SPECIAL_COMPLEX = [1.5 + 0.5j, complex(float("-inf"), -1.0), -2.5 + 1j, complex("inf+0j"), 0j,
                    complex(-1.0, float("inf")), 3 - 2j, complex("nan+0j"), -1j, complex(float("nan"), 2.5),
                    0.5 + 0.5j, complex(2.0, float("nan"))]


def _special_values(dt: np.dtype, extremes: bool = False) -> np.ndarray:
    """Awkward values of a dtype; the integer extremes only with `extremes` (elementwise
    checks: overflow, INT_MIN // -1), as a float mean of them is only rounding noise."""
    if dt.kind == "b":
        return np.array([True, False])
    if dt.kind in "iu":
        values = [3, 0, 1, 7, 2, 5] if dt.kind == "u" else [3, -2, 0, 1, 7, -1, 2, -5]
        if extremes:
            info = np.iinfo(dt)
            values += [int(info.max)] if dt.kind == "u" else [int(info.max), int(info.min)]
        return np.array(values, dtype=dt)
    if dt.kind == "c":
        return np.array(_SPECIAL_COMPLEX, dtype=dt)
    return np.array(_SPECIAL_FLOATS, dtype=dt)


def standins(call: Arguments, kind: str, shift: int = 0) -> list:
    """Fresh arrays (NumPy scalars for scalars) of each argument's dtype and rank, each
    dimension clipped to 4; argument i's values start 3i places further along the list of
    awkward values (and `shift` more), so two arguments do not pair the same values."""
    out = []
    for i, array in enumerate(call.arrays):
        dt = array.np_dtype
        if kind == "special":
            values = np.roll(_special_values(dt), -3 * i - shift)
        else:
            values = np.ones(1, dtype=dt)
        shape = tuple(min(int(n), 4) for n in array.tensor.fake.shape)
        if array.scalar:
            out.append(values[0])
            continue
        data = np.resize(values, shape)
        if kind == "eye" and len(shape) >= 2 and shape[-1] == shape[-2]:
            data = np.broadcast_to(np.eye(shape[-1], dtype=dt) * 2, shape).copy()
        out.append(data)
    return out


@dataclass
class Result:
    """One array NumPy returns: dtype, whether a NumPy scalar, rank, and the arguments
    (slot indices) whose memory it shares."""

    dtype: np.dtype
    scalar: bool
    ndim: int
    views: frozenset = frozenset()


@dataclass
class Expected:
    results: list  # Result per array returned
    container: type | None  # tuple or list of them, or None: one array
    values: object = None  # NumPy's own output on the stand-ins (to check values against)


def numpy_on(call_numpy, template, inputs):
    """(NumPy's output for the template filled with copies of `inputs`, or the exception it
    raises; the copies, which an in-place call changed)."""
    used = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in inputs]
    args, kwargs = fill(template, lambda s: used[s.index])
    try:
        return quiet(call_numpy, *args, **kwargs), used
    except Exception as e:  # noqa: BLE001 - returned for the caller to judge
        return e, used


def expected_of(out, inputs, what: str) -> Expected:
    """Expected from NumPy's output `out` on `inputs` (an exception: eager raises)."""
    if isinstance(out, Exception):
        unsupported("exceptions", f"{what} raised {type(out).__name__}: {out}", raised=attribute_error(out))
    many = type(out) in (tuple, list)
    items = list(out) if many else [out]
    if not items or not all(isinstance(r, (np.ndarray, np.generic)) for r in items):
        kind = "data_dependent" if type(out) in (bool, int, float) else "call"
        unsupported(kind, f"{what} returns a {type(out).__name__}, not arrays: not traced")
    results = []
    for r in items:
        if r.dtype not in TORCH_OF:
            unsupported("call", f"{what} gives dtype {r.dtype}, which is not traced")
        views = frozenset(i for i, a in enumerate(inputs)
                          if isinstance(r, np.ndarray) and isinstance(a, np.ndarray) and np.shares_memory(r, a))
        results.append(Result(r.dtype, isinstance(r, np.generic), np.ndim(r), views))
    return Expected(results, type(out) if many else None, out)


# --- checking torch._numpy against NumPy ----------------------------------------------------------
_TOLERANCE = {"e": 4e-3, "f": 2e-5, "d": 1e-9, "F": 2e-5, "D": 1e-9}


def _agree(want, got) -> str | None:
    """Why torch._numpy's result (`got`, a tensor) differs from NumPy's (`want`), or None."""
    if not isinstance(got, torch.Tensor):
        return f"a {type(got).__name__} instead of an array"
    want = np.asarray(want)
    if got.dtype != TORCH_OF.get(want.dtype):
        return f"dtype {got.dtype} instead of {want.dtype}"
    if tuple(got.shape) != want.shape:
        return f"shape {tuple(got.shape)} instead of {want.shape}"
    have = got.numpy()
    if want.dtype.kind == "c":  # a complex NaN is NaN whichever part holds it
        want, have = canonical_nan(want), canonical_nan(have)
    tol = _TOLERANCE.get(want.dtype.char)
    if tol is None:
        same = np.array_equal(have, want)
    else:  # complex: part by part (an infinite part makes the difference of the whole nan)
        parts = [(have.real, want.real), (have.imag, want.imag)] if want.dtype.kind == "c" else [(have, want)]
        same = all(np.allclose(h, w, rtol=tol, atol=tol, equal_nan=True) for h, w in parts)
    if not same:
        return f"values {have.ravel()[:8].tolist()} instead of {want.ravel()[:8].tolist()}"
    return None


def canonical_nan(a: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), complex("nan+nanj"), a).astype(a.dtype)


def check_values(node: NumpyNode, expected: Expected, inputs: list, what: str):
    """Run the node on real tensors holding the stand-ins: None if its results match
    NumPy's, else why not (a sentence)."""
    tensors = [torch.from_numpy(np.array(a, copy=True)) for a in inputs]
    try:
        out = quiet(node, *tensors)
    except Exception as e:  # noqa: BLE001 - a kernel torch._numpy lacks, an error NumPy does not raise
        return f"raises {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    got = list(out) if type(out) is tuple else [out]
    want = list(expected.values) if type(expected.values) in (tuple, list) else [expected.values]
    if len(got) != len(want):
        return f"{len(got)} results instead of {len(want)}"
    for g, w in zip(got, want):
        why = _agree(w, g)
        if why is not None:
            return why
    return None


def checked_node(label, target, call: Arguments, spec: Spec, expected: Expected, inputs, probe_template,
                 what: str) -> NumpyNode:
    """The node for the call, once its results on the stand-ins match NumPy's, as it is or
    with one correction (NumPy's dtype asked for, integer arguments cast to it first, an
    fft's result rounded to it); declines otherwise."""
    scalar_source = bool(call.arrays) and isinstance(call.args[0], Slot) and call.arrays[0].scalar
    copy = not any(r.views for r in expected.results) and (spec.memory != "either" or scalar_source)
    node = NumpyNode(label, target, (call.args, call.kwargs), copy)
    candidates = [node]
    if len(expected.results) == 1:
        want = expected.results[0].dtype
        if "dtype" not in call.kwargs and accepts_dtype(target):
            candidates.append(node.variant(dtype=want.name))
        if want.kind in "fc" and any(a.np_dtype.kind in "biu" for a in call.arrays):
            candidates.append(node.variant(input_cast=TORCH_OF[want]))
        if spec.fix == "cast":
            candidates.append(node.variant(cast=[TORCH_OF[want]]))  # more precision, rounded to NumPy's
    first_why = None
    for candidate in candidates:
        why = check_values(candidate.variant(template=tnp_constant(probe_template)), expected, inputs, what)
        if why is None:
            return candidate
        first_why = first_why or why
    unsupported("call", f"torch._numpy's {what} differs from NumPy's on sample values ({first_why}): not traced")


def dry_run(tx, node: NumpyNode, call: Arguments, expected: Expected | None, what: str) -> list:
    """torch._numpy's results on the fakes, recording nothing; checked against Expected."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    try:
        with tx.output.fake_mode:
            out = node(*[a.tensor.fake for a in call.arrays])
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        unsupported("data_dependent", f"{what} depends on array data ({type(e).__name__})")
    except Exception as e:  # noqa: BLE001 - a shape error NumPy raises too
        unsupported("exceptions", f"{what} raised {type(e).__name__}: {e} (in torch._numpy)",
                    raised=attribute_error(e))
    results = list(out) if type(out) is tuple else [out]
    for r in results:
        if not isinstance(r, torch.Tensor):
            unsupported("call", f"torch._numpy's {what} returns a {type(r).__name__}: not traced")
        if r.device.type != "cpu":
            unsupported("call", f"torch._numpy's {what} makes an array on {r.device} (the default "
                                "device): NumPy arrays live on the CPU")
    if expected is not None:
        if len(results) != len(expected.results):
            unsupported("call", f"torch._numpy's {what} returns {len(results)} arrays, NumPy "
                                f"{len(expected.results)}: not traced")
        for r, e in zip(results, expected.results):
            if r.dtype != TORCH_OF[e.dtype] or r.dim() != e.ndim:
                unsupported("call", f"torch._numpy's {what} gives a {r.dim()}-d {r.dtype} array, NumPy "
                                    f"a {e.ndim}-d {e.dtype} one: not traced")
    return results


def record(tx, node: NumpyNode, call: Arguments, expected: Expected, spec: Spec, what: str):
    """The graph node, its results wrapped as arrays (NumPy scalars where NumPy gives them)."""
    dry_run(tx, node, call, expected, what)
    result = tx.output.call("call_function", node, [a.tensor for a in call.arrays], {}, what=what)
    items = list(result.items) if expected.container is not None else [result]
    out = []
    for item, e in zip(items, expected.results):
        if e.views and spec.memory != "either" and not _is_view(item):
            unsupported("call", f"{what} returns a view in NumPy, new memory in torch._numpy: not traced")
        # A view of a read-only array is read-only too (NumPy's rule).
        readonly = any(call.arrays[i].readonly for i in e.views) and (spec.memory != "either" or _is_view(item))
        out.append(NumpyNdarrayVariable(item, scalar=e.scalar, readonly=readonly))
    if expected.container is None:
        return out[0]
    return ListVariable(out) if expected.container is list else TupleVariable(out)


def _is_view(item) -> bool:
    node = item.node
    return node.op == "placeholder" or bool(node.meta.get("aliases"))


def run_call(tx, label: str, target, call_numpy, call: Arguments, spec: Spec, what: str,
             probe_template=None):
    """A NumPy call on traced arrays (or constants making an array): checked, recorded."""
    if spec.layout and call.arrays and isinstance(call.args[0], Slot) and not call.arrays[0].scalar:
        first = call.arrays[0]
        expected = Expected([Result(first.np_dtype, False, -1, frozenset({0}))], None)
        node = NumpyNode(label, target, (call.args, call.kwargs), copy=False)
        results = dry_run(tx, node, call, None, what)
        if len(results) != 1 or results[0].dtype != first.tensor.fake.dtype:
            unsupported("call", f"torch._numpy's {what} changes the dtype: not traced")
        expected.results[0].ndim = results[0].dim()
        return record(tx, node, call, expected, spec, what)
    node, expected = check_call(label, target, call_numpy, call, spec, what, probe_template)
    return record(tx, node, call, expected, spec, what)


def check_call(label: str, target, call_numpy, call: Arguments, spec: Spec, what: str, probe_template=None):
    """(node, Expected) for a call whose torch._numpy version matches NumPy on the
    stand-ins; declines otherwise. `probe_template`: the call as the stand-ins make it
    (a factory's size made small), by default the call itself."""
    probe_template = probe_template or (call.args, call.kwargs)
    inputs = standins(call, spec.standin)
    out, used = numpy_on(call_numpy, probe_template, inputs)
    if isinstance(out, Exception) and spec.standin == "special":
        # Raising on awkward values only (a negative integer power, ...) depends on the data.
        plain, _ = numpy_on(call_numpy, probe_template, standins(call, "ones"))
        if not isinstance(plain, Exception):
            unsupported("data_dependent", f"{what} raises {type(out).__name__} for some values "
                                          f"({out}), which torch._numpy does not: not traced")
    expected = expected_of(out, used, what)
    node = checked_node(label, target, call, spec, expected, inputs, probe_template, what)
    probe = node.variant(template=tnp_constant(probe_template))
    if spec.standin == "special" and call.arrays:
        _check_shifted(probe, call_numpy, call, probe_template, what)
    if spec.elementwise:
        _check_pairs(probe, call_numpy, call, probe_template, what)
    return node, expected


def _check_shifted(node: NumpyNode, call_numpy, call: Arguments, template, what: str):
    """The call again on stand-ins holding the rest of the awkward values (a stand-in of n
    elements holds n of them)."""
    first = standins(call, "special")[0]
    size = max(np.size(first), 1)
    count = len(_special_values(call.arrays[0].np_dtype))
    for shift in range(size, count, size):
        inputs = standins(call, "special", shift)
        want, _ = numpy_on(call_numpy, template, inputs)
        if isinstance(want, Exception):
            unsupported("data_dependent", f"{what} raises {type(want).__name__} for some values ({want}), "
                                          "which torch._numpy does not: not traced")
        why = check_values(node, Expected([], None, want), inputs, what)
        if why is not None:
            unsupported("call", f"torch._numpy's {what} differs from NumPy's on sample values ({why}): "
                                "not traced")


def _check_pairs(node: NumpyNode, call_numpy, call: Arguments, template, what: str):
    """An elementwise call on every pair of awkward values (1-d: ranks do not matter to
    values). NumPy raising for some of them depends on the data: declined."""
    specials = [_special_values(a.np_dtype, extremes=True) for a in call.arrays]
    if len(specials) == 2:
        a, b = specials
        specials = [np.repeat(a, len(b)), np.tile(b, len(a))]
    elif len(specials) > 2:
        return
    want, _ = numpy_on(call_numpy, template, specials)
    if isinstance(want, Exception):
        unsupported("data_dependent", f"{what} raises {type(want).__name__} for some values ({want}), "
                                      "which torch._numpy does not: not traced")
    why = check_values(node, Expected([], None, want), specials, what)
    if why is not None:
        unsupported("call", f"torch._numpy's {what} differs from NumPy's on sample values ({why}): not traced")
