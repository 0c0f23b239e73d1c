"""NumPy code on tensors, traced through torch._numpy: differential tests.

Each function runs eagerly and optimized (twice: the second call hits the cache) on
copies of the same arguments; results must agree in type (ndarray, NumPy scalar, tensor),
dtype, shape, values, and in which arguments' memory they share; arguments must be left
in the same state. What is captured is asserted too (entry kind, graph count).
"""
from __future__ import annotations

import copy

import pytest
import torch

np = pytest.importorskip("numpy")
if int(np.__version__.split(".")[0]) < 2:
    pytest.skip("NumPy < 2: value-based casting, not traced", allow_module_level=True)

import minidynamo  # noqa: E402
from tests.helpers import CountingBackend  # noqa: E402

_TOL = {np.dtype("float16"): 2e-3, np.dtype("float32"): 2e-5, np.dtype("complex64"): 2e-5,
        np.dtype("float64"): 1e-10, np.dtype("complex128"): 1e-10}


def _memory(v):
    """The buffer an argument or a result lives in (arrays and tensors alike)."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, torch.Tensor) and v.device.type == "cpu":
        return v.detach().view(torch.uint8).numpy() if v.element_size() else None
    return None


def _flat_arrays(root, path=()):
    if isinstance(root, (list, tuple)):
        for i, x in enumerate(root):
            yield from _flat_arrays(x, path + (i,))
    elif isinstance(root, dict):
        for k, x in root.items():
            yield from _flat_arrays(x, path + (k,))
    elif _memory(root) is not None:
        yield path, root


def _shares_with(value, args):
    """Paths of the arguments whose memory `value` shares."""
    mem = _memory(value)
    if mem is None or mem.size == 0:
        return set()
    return {p for p, a in _flat_arrays(args) if np.shares_memory(mem, _memory(a))}


def _compare(e, o, eager_args, opt_args, where="result"):
    assert type(e) is type(o), f"{where}: type {type(e).__name__} (eager) != {type(o).__name__} (optimized)"
    if isinstance(e, (list, tuple)):
        assert len(e) == len(o), f"{where}: length {len(e)} != {len(o)}"
        for i, (a, b) in enumerate(zip(e, o)):
            _compare(a, b, eager_args, opt_args, f"{where}[{i}]")
        return
    if isinstance(e, dict):
        assert list(e) == list(o), where
        for k in e:
            _compare(e[k], o[k], eager_args, opt_args, f"{where}[{k!r}]")
        return
    if isinstance(e, (np.ndarray, np.generic)):
        assert e.dtype == o.dtype, f"{where}: dtype {e.dtype} (eager) != {o.dtype} (optimized)"
        assert np.shape(e) == np.shape(o), f"{where}: shape {np.shape(e)} != {np.shape(o)}"
        tol = _TOL.get(e.dtype)
        if e.dtype.kind == "c":  # a complex NaN is NaN whichever part holds it
            e, o = (np.where(np.isnan(v), complex("nan+nanj"), v).astype(v.dtype) for v in (e, o))
        if tol is None:
            np.testing.assert_array_equal(o, e, err_msg=where)
        else:
            np.testing.assert_allclose(o, e, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
    elif isinstance(e, torch.Tensor):
        assert (e.dtype, e.shape) == (o.dtype, o.shape), f"{where}: {e.dtype} {e.shape} != {o.dtype} {o.shape}"
        torch.testing.assert_close(o, e, equal_nan=True)
    elif isinstance(e, float) and e != e:
        assert o != o, where
    else:
        assert e == o, f"{where}: {e!r} (eager) != {o!r} (optimized)"
    shared_e, shared_o = _shares_with(e, eager_args), _shares_with(o, opt_args)
    assert shared_e == shared_o, f"{where}: shares memory with arguments {shared_e} (eager), {shared_o} (optimized)"


def np_check(fn, *arg_sets, kind="graph", graphs=None, same_entry=True, fullgraph=None):
    """Eager vs optimized on copies of each argument tuple (NumPy-aware comparison).
    kind: the entry kind every entry of the function must have; graphs: backend calls
    (default: one per entry for "graph"); fullgraph (default: kind == "graph") also runs
    the first argument set under fullgraph=True, which must trace it whole."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    for n, args in enumerate(arg_sets):
        args = args if isinstance(args, tuple) else (args,)
        eager_args = copy.deepcopy(args)
        try:
            expected, eager_exc = fn(*eager_args), None
        except Exception as e:  # noqa: BLE001 - compared below
            expected, eager_exc = None, e
        for attempt in ("first call", "second call"):
            before = len(opt.cache_entries())
            opt_args = copy.deepcopy(args)
            try:
                got, exc = opt(*opt_args), None
            except Exception as e:  # noqa: BLE001
                got, exc = None, e
            what = f"{fn.__name__}, argument set {n}, {attempt}"
            assert type(exc) is type(eager_exc), f"{what}: raised {exc!r}, eager {eager_exc!r}"
            if exc is not None:
                assert str(exc) == str(eager_exc), what
            else:
                _compare(expected, got, eager_args, opt_args, what)
            _compare(list(eager_args), list(opt_args), eager_args, opt_args, f"{what}: arguments after")
            if attempt == "second call":
                assert len(opt.cache_entries()) == before, f"{what}: traced again"
    entries = opt.cache_entries()
    reasons = [str(e.reason or e.break_reason) for e in entries]
    assert all(e.kind == kind for e in entries), f"kinds {[e.kind for e in entries]}, expected {kind}: {reasons}"
    if same_entry:
        assert len(entries) == 1, [e.describe() for e in entries]
    if graphs is None and kind == "graph":
        graphs = len(entries)
    if graphs is not None:
        assert backend.calls == graphs, f"{backend.calls} graphs, expected {graphs}"
    if fullgraph if fullgraph is not None else kind == "graph":
        first = arg_sets[0] if isinstance(arg_sets[0], tuple) else (arg_sets[0],)
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(fn)(*copy.deepcopy(first))
    return opt, backend


def t(*shape, dtype=torch.float32, start=0):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float64) * 0.75 - n / 3 + start).to(dtype).reshape(shape)


def op_names(backend, i=-1):
    return [getattr(n.target, "__name__", n.target) for n in backend.graphs[i].graph.nodes
            if n.op in ("call_function", "call_method")]


def ops(backend, i=-1):
    """Names of the graph's call targets (NumPy nodes are named numpy_<function>)."""
    return op_names(backend, i)


# --- tensor → array → tensor ---------------------------------------------------------------
def test_numpy_then_from_numpy_is_one_graph():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(np.ones_like(a) * 2 + a)
    _, backend = np_check(f, t(2, 3), t(2, 3, start=5))
    assert "numpy_ones_like" in ops(backend) and "numpy_add" in ops(backend)


def test_returned_array_is_a_view_of_the_input():
    def f(x):
        return x.numpy(), (x * 2).numpy()
    np_check(f, t(3))


def test_from_numpy_shares_memory_and_as_tensor():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(a), torch.as_tensor(a), torch.tensor(a), torch.tensor(a, dtype=torch.float64)
    np_check(f, t(2, 2))


def test_from_numpy_then_inplace_writes_the_input():
    def f(x):
        t_ = torch.from_numpy(x.numpy())
        t_.add_(1)
        return x
    np_check(f, t(4))


def test_numpy_of_a_tensor_that_requires_grad_raises_as_eager():
    def f(x):
        return torch.from_numpy(x.numpy() + 1)
    x = t(3).requires_grad_()
    opt, _ = np_check(f, x, kind="break", fullgraph=False)
    assert "requires grad" in str(opt.cache_entries()[0].break_reason)


def test_numpy_of_bfloat16_declines():
    def f(x):
        return x.numpy()
    opt, _ = np_check(f, t(3, dtype=torch.bfloat16), kind="break", fullgraph=False)
    assert opt.cache_entries()[0].break_reason.category == "call"


def test_numpy_with_force_declines():
    def f(x):
        return x.numpy(force=True)
    np_check(f, t(3), kind="break", fullgraph=False)


# --- functions, by family -------------------------------------------------------------------------
FUNCTIONS = {
    "ones_like": lambda a: np.ones_like(a),
    "zeros_like_dtype": lambda a: np.zeros_like(a, dtype=np.int16),
    "full_like": lambda a: np.full_like(a, 7),
    "sum": lambda a: np.sum(a),
    "sum_axis": lambda a: np.sum(a, axis=1),
    "sum_keepdims": lambda a: np.sum(a, axis=0, keepdims=True),
    "mean": lambda a: np.mean(a),
    "mean_axis": lambda a: np.mean(a, axis=0),
    "max_axis": lambda a: np.max(a, axis=1),
    "min": lambda a: np.min(a),
    "argmax": lambda a: np.argmax(a, axis=1),
    "std": lambda a: np.std(a, axis=0),
    "cumsum": lambda a: np.cumsum(a, axis=1),
    "prod": lambda a: np.prod(a, axis=0),
    "any_all": lambda a: (np.any(a > 1), np.all(a > -10, axis=0)),
    "meshgrid": lambda a: np.meshgrid(a[0], a[1]),
    "meshgrid_ij": lambda a: np.meshgrid(a[0], a[1], indexing="ij"),
    "linalg_norm": lambda a: np.linalg.norm(a),
    "linalg_norm_axis": lambda a: np.linalg.norm(a, axis=1),
    "where": lambda a: np.where(a > 0, a, 0),
    "where_arrays": lambda a: np.where(a > 1, a, -a),
    "concatenate": lambda a: np.concatenate([a, a * 2]),
    "concatenate_axis": lambda a: np.concatenate([a, a], axis=1),
    "stack": lambda a: np.stack([a, a + 1], axis=-1),
    "clip": lambda a: np.clip(a, -1, 2),
    "sqrt_abs": lambda a: np.sqrt(np.abs(a)),
    "exp": lambda a: np.exp(a / 4),
    "dot": lambda a: np.dot(a, a.T),
    "matmul": lambda a: a @ a.T,
    "outer": lambda a: np.outer(a[0], a[1]),
    "transpose_fn": lambda a: np.transpose(a) + 0,
    "reshape_fn": lambda a: np.reshape(a, (-1,)),
    "expand_dims": lambda a: np.expand_dims(a, 0),
    "round": lambda a: np.round(a * 1.37, 1),
    "tril": lambda a: np.tril(a),
    "copy": lambda a: np.copy(a),
    "array_copy": lambda a: np.array(a),
    "asarray_same_object": lambda a: np.asarray(a) is a,
    "sort": lambda a: np.sort(a, axis=0),
    "diff": lambda a: np.diff(a),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_numpy_function(name, dtype):
    fn = FUNCTIONS[name]

    def f(x):
        return fn(x.numpy())
    f.__name__ = f"f_{name}"
    np_check(f, t(2, 3, dtype=dtype), t(2, 3, dtype=dtype, start=4))


FLOAT_FUNCTIONS = {
    "linalg_inv": lambda a: np.linalg.inv(a @ a.T + np.eye(2)),
    "linalg_det": lambda a: np.linalg.det(a @ a.T + np.eye(2)),
    "linalg_solve": lambda a: np.linalg.solve(a @ a.T + 3 * np.eye(2), a[:, 0]),
    "fft": lambda a: np.fft.fft(a),
    "fft_axis": lambda a: np.fft.fft(a, axis=0),
    "rfft": lambda a: np.fft.rfft(a),
    "ifft_real": lambda a: np.fft.ifft(a).real,
    "fftshift": lambda a: np.fft.fftshift(a),
    "tanh": lambda a: np.tanh(a),
    "log1p_abs": lambda a: np.log1p(np.abs(a)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(FLOAT_FUNCTIONS))
def test_numpy_float_function(name, dtype):
    fn = FLOAT_FUNCTIONS[name]

    def f(x):
        return fn(x.numpy())
    f.__name__ = f"f_{name}"
    np_check(f, t(2, 3, dtype=dtype), t(2, 3, dtype=dtype, start=2))


def test_factories_make_numpy_default_dtypes():
    def f(x):
        a = x.numpy()
        return (np.arange(5), np.arange(0, 1, 0.25), np.ones(3), np.zeros((2, 3), dtype=np.int32),
                np.full((2,), 3), np.full((2,), 3.0), np.linspace(0, 1, 5), np.eye(3), np.identity(2),
                np.array([1, 2, 3]), np.array([1.5, 2]), a + np.arange(3))
    _, backend = np_check(f, t(2, 3))
    assert "numpy_arange" in ops(backend) and "numpy_linspace" in ops(backend)


# --- methods and attributes ------------------------------------------------------------------------
METHODS = {
    "reshape": lambda a: a.reshape(3, 2),
    "reshape_tuple": lambda a: a.reshape((3, 2)),
    "reshape_minus_one": lambda a: a.reshape(-1),
    "transpose": lambda a: a.transpose(),
    "transpose_axes": lambda a: a.transpose(1, 0),
    "T": lambda a: a.T,
    "astype_int": lambda a: a.astype(np.int32),
    "astype_same": lambda a: a.astype(a.dtype),
    "astype_str": lambda a: a.astype("float64"),
    "astype_python_type": lambda a: a.astype(float),
    "sum": lambda a: a.sum(),
    "sum_axis": lambda a: a.sum(axis=0),
    "mean": lambda a: a.mean(axis=1),
    "max": lambda a: a.max(),
    "min_axis": lambda a: a.min(axis=0),
    "argmax": lambda a: a.argmax(),
    "cumsum": lambda a: a.cumsum(),
    "copy": lambda a: a.copy(),
    "flatten": lambda a: a.flatten(),
    "ravel": lambda a: a.ravel(),
    "ravel_of_transpose": lambda a: a.T.ravel(),
    "squeeze": lambda a: a[None].squeeze(0),
    "swapaxes": lambda a: a.swapaxes(0, 1),
    "clip": lambda a: a.clip(0, 2),
    "attributes": lambda a: (a.shape, a.ndim, a.size, a.dtype, a.itemsize, a.nbytes, len(a)),
    "dtype_compare": lambda a: (a.dtype == np.float32, a.dtype.kind, a.dtype.name, str(a.dtype)),
    "isinstance": lambda a: (isinstance(a, np.ndarray), type(a).__name__, type(a.sum()).__name__),
    "iterate_rows": lambda a: [row.sum() for row in a],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("name", sorted(METHODS))
def test_ndarray_method(name, dtype):
    fn = METHODS[name]

    def f(x):
        return x + 1, fn(x.numpy())
    f.__name__ = f"f_{name}"
    np_check(f, t(2, 3, dtype=dtype), t(2, 3, dtype=dtype, start=3))


INDEXING = {
    "row": lambda a: a[0],
    "element_is_scalar": lambda a: a[1, 2],
    "negative": lambda a: a[-1, -2],
    "slice": lambda a: a[:, 1:],
    "step": lambda a: a[:, ::2],
    "none_ellipsis": lambda a: a[None, ..., 0],
    "fancy_list": lambda a: a[[0, 1, 0]],
    "fancy_array": lambda a: a[:, np.arange(2)],
}


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_ndarray_indexing(name):
    fn = INDEXING[name]

    def f(x):
        return fn(x.numpy())
    f.__name__ = f"f_{name}"
    np_check(f, t(2, 3))


# --- operators -------------------------------------------------------------------------------------
OPERATORS = {
    "add": lambda a, b: a + b, "sub_scalar": lambda a, b: a - 2, "rsub": lambda a, b: 2 - a,
    "mul_float": lambda a, b: a * 2.5, "rmul": lambda a, b: 3 * a, "truediv": lambda a, b: a / 4,
    "floordiv_scalar": lambda a, b: a // 3, "mod_scalar": lambda a, b: a % 3, "pow2": lambda a, b: a ** 2,
    "matmul": lambda a, b: a @ b.T, "neg": lambda a, b: -a,
    "lt": lambda a, b: a < b, "le_scalar": lambda a, b: a <= 1, "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != 2, "ge": lambda a, b: a >= b, "gt_reflected": lambda a, b: 1 > a,
    "chain": lambda a, b: (a + b) * (a - b) / (np.abs(b) + 1),
}


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float32), (torch.int32, torch.int64),
                                    (torch.float32, torch.float64), (torch.int64, torch.float32)])
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator(name, dtypes):
    op = OPERATORS[name]

    def f(x, y):
        return op(x.numpy(), y.numpy())
    f.__name__ = f"f_{name}"
    np_check(f, (t(2, 3, dtype=dtypes[0]), t(2, 3, dtype=dtypes[1], start=1)))


def test_bitwise_operators_on_integers():
    def f(x, y):
        a, b = x.numpy(), y.numpy()
        return a & b, a | 1, a ^ b, ~a, a << 2, a >> 1
    np_check(f, (t(6, dtype=torch.int32), t(6, dtype=torch.int64, start=3)))


# --- NumPy's dtypes, not torch's -----------------------------------------------------------------------
def test_dtype_semantics_follow_numpy():
    def f(x, i):
        a, n = x.numpy(), i.numpy()
        return (n / 2,                       # int / int: float64 (torch: the default float32)
                n / n.clip(1, None),
                np.mean(n),                  # float64
                np.sum(n.astype(np.int32)),  # int64 accumulation
                np.cumsum(n.astype(np.int32)),
                a * 2.0,                     # a Python float is weak: float32
                a + np.float64(2.0),         # a NumPy scalar is not: float64
                n.astype(np.int32) + 1,      # int32
                np.fft.fft(a),               # complex64 for float32 (NumPy 2)
                np.sqrt(n.astype(np.int8)),  # float16
                np.ones(3) + a)              # float64
    _, backend = np_check(f, (t(2, 3), t(2, 3, dtype=torch.int64)))
    assert backend.calls == 1


def test_numpy_scalars_are_numpy_scalars():
    def f(x):
        a = x.numpy()
        s = np.sum(a)
        return s, s * 2 + 1, s > 0.5, np.max(a) - np.min(a), a.mean() * a, type(s) is np.float32
    np_check(f, t(2, 3))


def test_zero_d_arrays_stay_arrays():
    def f(x):
        a = x.numpy()
        return np.asarray(a[0, 0]), a.reshape(-1)[:1].reshape(()), np.sum(a, keepdims=True)
    np_check(f, t(2, 2))
