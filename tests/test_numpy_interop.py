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
from tests.helpers import CountingBackend, check, entry_tree  # noqa: E402

_TOL = {np.dtype("float16"): 2e-3, np.dtype("float32"): 2e-5, np.dtype("complex64"): 2e-5,
        np.dtype("float64"): 1e-10, np.dtype("complex128"): 1e-10}


def _memory(v):
    """The buffer an argument or a result lives in (arrays and tensors alike)."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, torch.Tensor) and v.device.type == "cpu":
        v = v.detach()
        return (v.view(torch.int16) if v.dtype is torch.bfloat16 else v).numpy()
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


def test_torch_functions_on_numpy_scalars_and_declined_forms():
    def f(x):
        s = np.sum(x.numpy())
        return torch.tensor(s), torch.as_tensor(s), torch.tensor(s, dtype=torch.float64)
    np_check(f, t(3))

    def g(x):
        return torch.as_tensor(x.numpy(), dtype=torch.float32)  # may share memory: declined
    np_check(g, t(3), kind="break", fullgraph=False)

    def h(x):
        return torch.from_numpy(np.sum(x.numpy()))  # eager: TypeError
    np_check(h, t(3), kind="break", fullgraph=False)


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
                np.array([1, 2, 3]), np.array([1.5, 2]), a + np.arange(3), np.arange(stop=4),
                np.arange(2, 11, 3), np.arange(10, 0, -2.5), np.arange(3, dtype=np.float32))
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


# --- folded constants ----------------------------------------------------------------------------
def test_iinfo_finfo_dtype_are_folded_constants():
    def f(x):
        return (x + np.iinfo(np.int16).max, x * float(np.finfo(np.float32).eps), np.finfo(np.float64).tiny,
                np.dtype("float32"), np.dtype(np.int64).itemsize, np.iinfo("int8").min,
                np.promote_types(np.int32, np.float32), np.float32(2.5) * 2, np.result_type(np.int8, 1.0))
    _, backend = np_check(f, t(3))
    assert backend.calls == 1 and len(ops(backend)) == 2  # the two tensor ops only


def test_constants_only_calls_fold_to_numpy_scalars():
    def f(x):
        return x * 2, np.sqrt(2.0), np.sum([1, 2, 3]), np.float32(1.5) + np.float32(2)
    _, backend = np_check(f, t(2))
    assert ops(backend) == [getattr(__import__("operator"), "mul").__name__]


def test_numpy_scalar_argument_is_guarded_by_value():
    def f(x, s):
        return torch.from_numpy(x.numpy() * s)
    opt, _ = np_check(f, (t(3), np.float32(2.0)), (t(3), np.float32(2.0)))
    opt(t(3), np.float32(3.0))  # another value: another entry
    assert len(opt.cache_entries()) == 2
    opt(t(3), np.float64(3.0))
    assert len(opt.cache_entries()) == 3


def test_nan_numpy_scalar_argument_declines():
    def f(x, s):
        return torch.from_numpy(x.numpy() * s)
    np_check(f, (t(3), np.float32("nan")), kind="eager")


# --- arrays passed in ------------------------------------------------------------------------------
def test_ndarray_argument_is_a_guarded_input():
    def f(a, b):
        return a * 2 + b, torch.from_numpy(a).sum()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    opt, backend = np_check(f, (a, np.float32(1.0)), (a + 5, np.float32(1.0)))
    assert [e.kind for e in opt.cache_entries()] == ["graph"]
    opt(np.arange(6, dtype=np.float64).reshape(2, 3), np.float32(1.0))  # another dtype: recompiles
    opt(np.arange(4, dtype=np.float32), np.float32(1.0))  # another shape: recompiles
    assert len(opt.cache_entries()) == 3
    text = opt.cache_entries()[0].guard_text()
    assert "from_numpy" in text and "writeable" in text


def test_ndarray_argument_returned_is_the_same_object():
    def f(a, x):
        return a, x + 1
    opt, _ = np_check(f, (np.ones(3), t(3)))
    a = np.ones(3)
    assert opt(a, t(3))[0] is a


def test_ndarray_argument_written_in_place():
    def f(a):
        a += 1
        a[0] = 10
        return a.sum()
    np_check(f, np.arange(4.0))


def test_same_array_twice_is_one_array():
    def f(a, b):
        a += 1
        return b * 2
    a = np.arange(3.0)
    opt, _ = np_check(f, (a, a), same_entry=False)
    b = np.arange(3.0)
    np.testing.assert_array_equal(opt(b, b.copy()), (np.arange(3.0)) * 2)  # distinct: another entry
    assert len(opt.cache_entries()) == 2


def test_read_only_and_reversed_arrays_run_eagerly():
    # Not through np_check: a deep copy is writeable and contiguous.
    def f(a):
        return a + 1
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    np.testing.assert_array_equal(opt(ro), ro + 1)
    reversed_ = np.arange(6.0)[::-1]  # negative strides: torch.from_numpy refuses them
    np.testing.assert_array_equal(opt(reversed_), reversed_ + 1)
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == ["eager", "eager"]
    assert "read-only" in str(entries[0].reason) and "negative" in str(entries[1].reason)
    np.testing.assert_array_equal(opt(np.arange(3.0)), np.arange(3.0) + 1)  # a plain array: traced
    assert entries[-1].kind == "eager" and opt.cache_entries()[-1].kind == "graph"


def test_ndarray_subclass_is_not_an_array_input():
    def f(a):
        return a + 1
    np_check(f, np.ma.masked_array([1.0, 2.0]), kind="eager")


# --- writing arrays --------------------------------------------------------------------------------
def test_inplace_operators_write_the_tensor():
    def f(x):
        a = x.numpy()
        a += 1
        a *= 2
        b = a[0]
        b -= 3  # a view: writes x too
        return x, a
    np_check(f, t(2, 3))


def test_item_assignment_writes_the_tensor():
    def f(x):
        a = x.numpy()
        a[0] = 7
        a[1, 1:] = np.arange(2)
        a[:, 0] = a[:, 2]
        return x
    np_check(f, t(2, 3))


def test_overlapping_writes_read_the_value_first():
    def f(x):
        a = x.numpy()
        a[1:] = a[:-1]
        a += a.T
        a[0] -= a[:, 0]
        return x
    np_check(f, t(3, 3))


def test_numpy_scalar_does_not_see_later_writes():
    def f(x):
        a = x.numpy()
        s = a[0, 0]
        m = a.max()
        a[0, 0] = 100
        return s, m, a
    np_check(f, t(2, 2))


def test_copy_results_do_not_share_memory():
    def f(x):
        a = x.numpy()
        b = a.astype(np.float32)  # NumPy copies even to the same dtype
        c = np.array(a)
        b += 1
        c[0] = 5
        return a, b, c
    np_check(f, t(3))


def test_inplace_with_a_cast_numpy_refuses_raises_as_eager():
    def f(x):
        a = x.numpy()
        a += 1.5  # int64 += float: UFuncTypeError
        return a
    opt, _ = np_check(f, t(3, dtype=torch.int64), kind="eager")
    assert opt.cache_entries()[0].reason.category == "exceptions"


def test_int_overflow_of_python_scalar_raises_as_eager():
    def f(x):
        return x.numpy() + 300
    opt, _ = np_check(f, t(3, dtype=torch.uint8), kind="eager")
    assert "OverflowError" in str(opt.cache_entries()[0].reason)


# --- what declines, and how ----------------------------------------------------------------------
def _reason(opt):
    e = opt.cache_entries()[0]
    return e.break_reason or e.reason


def test_numpy_random_runs_natively_with_numpys_numbers():
    def f(x):
        np.random.seed(0)
        noise = np.random.rand(3)
        return torch.from_numpy(x.numpy() + noise)
    opt, _ = np_check(f, t(3), kind="break", graphs=None, fullgraph=False)
    assert _reason(opt).category == "side_effect" and "random state" in str(_reason(opt))
    np.random.seed(0)
    expected = t(3).numpy() + np.random.rand(3)
    torch.testing.assert_close(opt(t(3)), torch.from_numpy(expected))


def test_unmodelled_numpy_function_breaks():
    def f(x):
        a = x.numpy() * 2
        w = np.lib.stride_tricks.sliding_window_view(a, 2)
        return torch.from_numpy(w.sum(axis=1))
    opt, _ = np_check(f, t(4), kind="break", fullgraph=False)
    assert _reason(opt).category == "call" and "no model" in str(_reason(opt))


def test_numpy_function_on_a_tensor_breaks():
    def f(x):
        return np.sum(x) + 1
    opt, _ = np_check(f, t(4), kind="break", fullgraph=False)
    assert "torch.Tensor argument" in str(_reason(opt))


def test_array_and_tensor_in_one_operator_declines():
    def f(x):
        return x + x.numpy()
    opt, _ = np_check(f, t(3), kind="eager")
    assert "torch tensor" in str(_reason(opt))


def test_reading_array_data_breaks():
    def f(x):
        s = np.sum(x.numpy())
        if s > 0:
            return x + 1
        return x - 1
    np_check(f, t(3), t(3, start=-5), kind="break", graphs=None, fullgraph=False, same_entry=False)

    def g(x):
        return x * float(np.max(x.numpy()))
    np_check(g, t(3), kind="break", fullgraph=False)

    def h(x):
        return x.numpy().tolist()
    np_check(h, t(3), kind="break", fullgraph=False)


def test_torch_numpy_differences_decline():
    # torch._numpy's sign(nan) is 0 (NumPy: nan): caught on the stand-ins' awkward values.
    def f(x):
        return np.sign(x.numpy())
    opt, _ = np_check(f, t(3), kind="break", fullgraph=False)
    assert "differs from NumPy" in str(_reason(opt))

    # Integer floor division by an array: NumPy gives 0 for a zero divisor, torch raises.
    def g(x, y):
        return x.numpy() // y.numpy()
    np_check(g, (t(3, dtype=torch.int64), t(3, dtype=torch.int64, start=5)), kind="eager")

    # A negative integer power: NumPy raises for some values.
    def h(x, y):
        return x.numpy() ** y.numpy()
    opt, _ = np_check(h, (t(3, dtype=torch.int64), t(3, dtype=torch.int64, start=5)), kind="eager")
    assert _reason(opt).category == "data_dependent"


def test_reversed_view_declines():
    # NumPy's a[::-1] is a view, torch._numpy's a copy: not traced.
    def f(x):
        return np.flip(x.numpy())
    opt, _ = np_check(f, t(3), kind="break", fullgraph=False)
    assert "view" in str(_reason(opt))


def test_out_and_where_keywords_decline():
    def f(x):
        a = x.numpy()
        np.add(a, 1, out=a)
        return x
    np_check(f, t(3), kind="break", fullgraph=False)


def test_data_dependent_shapes_decline():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(a[a > 0])
    np_check(f, t(4), kind="eager")


# --- arrays across graph breaks ------------------------------------------------------------------------
def test_array_crosses_a_graph_break():
    def f(x):
        a = x.numpy() * 2
        print("between")
        return torch.from_numpy(a + 1), a
    opt, backend = np_check(f, t(3), kind="break", graphs=2, fullgraph=False)
    kinds = [e.kind for e in entry_tree(opt, backend)]
    assert kinds == ["break", "graph"]


def test_view_of_the_input_crosses_a_graph_break():
    def f(x):
        a = x.numpy()
        print("between")
        a += 1  # still a view of x in the resume function
        return x
    np_check(f, t(3), kind="break", fullgraph=False)


# --- the class of a tensor ----------------------------------------------------------------------------
def test_tensor_class_attribute():
    def f(x):
        return (x * 2, x.__class__ is torch.Tensor, x.__class__.__name__, type(x).__name__,
                (x + 1).__class__, isinstance(x, x.__class__))
    check(f, t(3), kind="graph")


def test_parameter_class():
    def f(p):
        return p * 2, p.__class__.__name__, p.__class__ is torch.nn.Parameter, (p * 2).__class__.__name__
    check(f, torch.nn.Parameter(t(3)), kind="graph")


def test_tensor_class_is_guarded():
    def f(x):
        return x * 2, x.__class__.__name__
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    assert opt(t(3))[1] == "Tensor"
    assert opt(torch.nn.Parameter(t(3)))[1] == "Parameter"  # another type: another entry
    assert len(opt.cache_entries()) == 2


def test_tensor_subclass_class_runs_eagerly():
    class Sub(torch.Tensor):
        pass

    def f(x):
        return x.__class__.__name__, x.__class__ is Sub
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    assert opt(t(3).as_subclass(Sub)) == ("Sub", True)  # a subclass input: not traced
    assert [e.kind for e in opt.cache_entries()] == ["eager"]
    assert opt(t(3)) == ("Tensor", False)
