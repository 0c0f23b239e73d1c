"""Constructs of torch's `@make_test` function tests that are traced where torch.compile
traces them: NumPy strides, `.imag` of a real array, `np.*_like` of a tensor, NumPy
scalars beside tensors, `np.random` calls, `collections.namedtuple` called inside,
`Tensor.untyped_storage().size()`. Differential: eager vs optimized (results, their
types, flags and memory, exceptions, graph counts)."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

np = pytest.importorskip("numpy")
if int(np.__version__.split(".")[0]) < 2:
    pytest.skip("NumPy < 2: value-based casting, not traced", allow_module_level=True)

import minidynamo  # noqa: E402
from tests.helpers import CountingBackend  # noqa: E402
from tests.test_numpy_interop import np_check, t  # noqa: E402


def _both(fn, *args):
    """(eager result, optimized result, backend) on copies of `args`."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    return fn(*copy.deepcopy(args)), opt(*copy.deepcopy(args)), backend, opt


# --- ndarray.strides -----------------------------------------------------------------------
def test_ndarray_strides():
    def f(x):
        a = x.numpy()
        return a.strides, a.T.strides, a[:, ::2].strides, a.itemsize, a.sum(0).strides
    for x in (t(3, 4), t(3, 4, dtype=torch.float64), t(2, 5, dtype=torch.int16)):
        np_check(f, x)


def test_ndarray_strides_of_a_transposed_input():
    def f(x):
        return x.numpy().strides
    np_check(f, t(3, 4).T)
    # another layout recompiles (the input's strides are guarded)
    opt, backend = np_check(f, t(3, 4))
    got = opt(t(4, 3).T)
    assert got == t(4, 3).T.numpy().strides and backend.calls == 2


def test_numpy_scalar_strides():
    def f(x):
        return np.sum(x.numpy()).strides
    np_check(f, t(3))


# --- .imag of a real array ---------------------------------------------------------------
def test_imag_of_real_array_is_read_only_zeros():
    def f(x):
        a = x.numpy()
        return a.T, a.imag, a.real, a.T.imag
    np_check(f, t(3, 4), t(2, 3, dtype=torch.float64), same_entry=False)
    eager, got, _, _ = _both(f, t(3, 4))
    for e, o in zip(eager, got):
        assert e.flags.writeable == o.flags.writeable
        assert e.strides == o.strides
    assert not got[1].flags.writeable and not got[3].flags.writeable


def test_views_of_imag_are_read_only():
    def f(x):
        im = x.numpy().imag
        return im[0], im.T, im.reshape(-1), im + 1
    np_check(f, t(3, 4))
    eager, got, _, _ = _both(f, t(3, 4))
    assert [e.flags.writeable for e in eager] == [o.flags.writeable for o in got]


def test_writing_imag_of_real_array_raises():
    def setitem(x):
        im = x.numpy().imag
        im[0] = 1.0
        return im

    def inplace(x):
        im = x.numpy().imag
        im += 1
        return im

    def view_setitem(x):
        im = x.numpy().imag.T
        im[0, 0] = 2.0
        return im
    # a store breaks at its instruction (NumPy raises there); an in-place operator runs eagerly
    for fn, kind in ((setitem, "break"), (inplace, "eager"), (view_setitem, "break")):
        np_check(fn, t(3, 4), kind=kind, fullgraph=False)


def test_imag_of_complex_array_stays_a_writable_view():
    def f(x):
        im = x.numpy().imag
        im[0] = 5.0
        return im, x
    np_check(f, torch.complex(t(3), t(3, start=1)))


def test_from_numpy_of_imag_warns_like_eager():
    def f(x):
        return torch.from_numpy(x.numpy().imag) + 1
    np_check(f, t(3, 4))
    # torch warns once per process: the entry makes the same warning (a no-op once made)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        opt(t(3, 4))
    probe = np.zeros(1)
    probe.flags.writeable = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.from_numpy(probe)
    assert not caught  # already warned in this process


# --- np.*_like of a tensor -------------------------------------------------------------------
def test_like_functions_of_a_tensor():
    def ones(x):
        return np.ones_like(x, dtype=np.float64)

    def zeros(x):
        return np.zeros_like(x)

    def full(x):
        dt = np.dtype("float")
        return np.full_like(x, 2.4, dtype=dt), np.full_like(x, 7), np.full_like(x, fill_value=3, dtype=None)

    def keyword(x):
        return np.ones_like(a=x, dtype=int)
    for fn in (ones, zeros, full, keyword):
        for x in (t(3, 4), t(2, 2, dtype=torch.int32), torch.tensor(2.0), t(4, 3).T):
            np_check(fn, x)
        eager, got, _, _ = _both(fn, t(4, 3).T)
        for e, o in zip(eager if isinstance(eager, tuple) else [eager], got if isinstance(got, tuple) else [got]):
            assert e.strides == o.strides  # C order, whatever the tensor's layout


def test_like_function_of_a_tensor_requiring_grad_raises():
    def f(x):
        return np.ones_like(x)
    np_check(f, torch.ones(3, requires_grad=True), kind="break", fullgraph=False)


def test_like_function_of_a_tensor_with_other_arguments_breaks():
    def f(x):
        return np.ones_like(x, order="F")
    np_check(f, t(3, 4), kind="break", graphs=0, fullgraph=False)


# --- NumPy scalars beside tensors --------------------------------------------------------------
def test_tensor_and_numpy_scalar_constant():
    def f(a):
        min_dim = np.finfo(np.float32).min
        return a + min_dim, min_dim * a, a > np.float32(0), np.int64(3) - a, a / np.float64(4)
    np_check(f, t(3, 4), t(2, dtype=torch.float16), t(3, dtype=torch.int32), same_entry=False)


def test_tensor_and_numpy_scalar_inplace():
    def f(a):
        a += np.float32(2.5)
        b = np.int32(2)
        b *= a
        return a, b
    np_check(f, t(3, 4))


def test_torch_function_given_a_numpy_scalar():
    def f(a):
        return torch.add(a, np.float64(0.5)), torch.full((2,), np.float32(1.5)), torch.clamp(a, min=np.int64(0))
    np_check(f, t(3, 4), t(2, dtype=torch.float64), same_entry=False)


# --- collections.namedtuple(...) called inside ------------------------------------------------
import collections  # noqa: E402


def _same_namedtuple(e, o):
    """An instance (or class) of a class made by the call: alike, by what it says of itself."""
    ecls, ocls = (e, o) if isinstance(e, type) else (type(e), type(o))
    assert ecls is not ocls
    for attr in ("__name__", "__qualname__", "__module__", "_fields", "_field_defaults", "__doc__"):
        assert getattr(ecls, attr) == getattr(ocls, attr), attr
    assert [c.__name__ for c in ecls.__mro__] == [c.__name__ for c in ocls.__mro__]
    if not isinstance(e, type):
        assert len(e) == len(o)
        for a, b in zip(e, o):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(b, a)
            else:
                assert a == b


def _run_namedtuple(fn, *args, graphs=1, kind="graph"):
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    results = []
    for _ in range(2):
        eager, got = fn(*args), opt(*args)
        for e, o in zip(eager, got) if isinstance(eager, list) else [(eager, got)]:
            _same_namedtuple(e, o)
        results.append(got)
    entries = opt.cache_entries()
    assert len(entries) == 1 and entries[0].kind == kind, [e.describe() for e in entries]
    assert backend.calls == graphs
    return results


def test_namedtuple_made_inside():
    def f(a, b):
        mytuple = collections.namedtuple("mytuple", ["x", "y", "xy"])
        tmp = mytuple(a, b, a + b)
        return mytuple(tmp.x, tmp[1], tmp.xy + b)
    first, second = _run_namedtuple(f, t(3), t(3, start=1))
    assert type(first) is not type(second)  # a new class per call, as in eager
    assert type(first).__module__ == __name__


def test_namedtuple_made_inside_with_defaults_and_methods():
    def f(a, b):
        mytuple = collections.namedtuple("mytuple", "x y xy", defaults=(None, 1, None))
        tmp = mytuple(a, xy=b)
        r = tmp._replace(y=2)
        return [mytuple(tmp.x, tmp[1], tmp.xy + b), r, mytuple, r._asdict()["y"] + 1 == 3 and type(r) is mytuple]
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(2):
        eager, got = f(t(3), t(3)), opt(t(3), t(3))
        for e, o in zip(eager[:3], got[:3]):
            _same_namedtuple(e, o)
        assert type(got[0]) is got[2] and type(got[1]) is got[2]  # one class per call
        assert eager[3] is got[3] is True
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]


def test_namedtuple_made_inside_with_module_and_rename():
    def f(a):
        p = collections.namedtuple("P", ["x", "def", "x"], rename=True, module="somewhere")
        return p(a, 1, 2)
    _run_namedtuple(f, t(3), graphs=0, kind="constant")


def test_namedtuple_made_inside_live_at_a_break():
    def f(a):
        P = collections.namedtuple("P", "x y")
        p = P(a, a + 1)
        print("between")
        q = P(p.y, 2)
        return p, q, type(p) is type(q)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(2):
        eager, got = f(t(3)), opt(t(3))
        _same_namedtuple(eager[0], got[0])
        _same_namedtuple(eager[1], got[1])
        assert type(got[0]) is type(got[1]) and got[2] is True


def test_namedtuple_made_inside_bad_field_raises():
    def f(a):
        return collections.namedtuple("P", ["x", "1y"])(a, a)
    with pytest.raises(ValueError) as eager:
        f(t(3))
    with pytest.raises(ValueError) as got:
        minidynamo.optimize(backend=CountingBackend())(f)(t(3))
    assert str(got.value) == str(eager.value)


# --- Tensor.untyped_storage().size() ---------------------------------------------------------
from tests.helpers import check  # noqa: E402


def _same_storage_size(a, n):
    return a.untyped_storage().size() // a.element_size() == n


def test_storage_size_of_an_input():
    def f(x, y):
        x = x + 1 if _same_storage_size(x, 12) else x - 1
        y = y * 2 if len(y.untyped_storage()) == y.untyped_storage().nbytes() == 48 else y
        return x, y
    check(f, (t(3, 4), t(12)), kind="graph")
    big = t(40)
    check(f, (big[:12].view(3, 4), big[:12]), kind="graph")


def test_storage_size_is_guarded():
    def f(x):
        return x + 1 if x.untyped_storage().size() == 48 else x - 1
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    torch.testing.assert_close(opt(t(12)), t(12) + 1)
    torch.testing.assert_close(opt(t(24)[:12]), t(24)[:12] - 1)  # same shape, a larger storage
    assert backend.calls == 2 and len(opt.cache_entries()) == 2


def test_storage_of_a_computed_tensor_or_its_data_breaks():
    def computed(x):
        return (x + 1).untyped_storage().size()

    def data(x):
        return x.untyped_storage().is_pinned(), x + 1
    check(computed, t(3), kind="break", reason="data_dependent")
    check(data, t(3), kind="break", reason="data_dependent")
