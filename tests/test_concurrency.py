"""Threads and memory: one optimized function called from several threads with different
shapes gives correct results and a consistent cache (no duplicate entries, no lost
entries); an optimized function, its cache entries, graphs and the tensors they reference
are freed when the user drops them, and no global table grows with use."""
from __future__ import annotations

import gc
import os
import sys
import threading
import warnings
import weakref

import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import DEVICE, triton

import minidynamo
import minidynamo.api as api


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    yield
    sys.setswitchinterval(old)


def body(x, y):
    z = x * 2
    for i in range(3):
        z = z + y.sum(0) * i
    return z.relu(), x.shape


def run_threads(target, n_threads):
    errors = []
    barrier = threading.Barrier(n_threads)

    def wrapped(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_threads_with_different_shapes_get_correct_results(fast_switching):
    opt = minidynamo.optimize(dynamic=False)(body)  # one static entry per shape
    rows = (2, 3, 5, 7)

    def work(i):
        n = rows[i]
        for _ in range(40):
            x, y = torch.randn(n, 4), torch.randn(5, 4)
            got = opt(x, y)
            expected = body(x, y)
            torch.testing.assert_close(got[0], expected[0])
            assert got[1] == expected[1]
    run_threads(work, len(rows))
    entries = opt.cache_entries()
    # one entry per shape: no duplicates from racing misses, none lost
    assert len(entries) == len(rows), [e.guard_text() for e in entries]
    assert sorted(e.kind for e in entries) == ["graph"] * len(rows)
    assert sum(e.hit_count for e in entries) >= len(rows) * 40


def test_threads_racing_on_the_first_call_trace_once(fast_switching):
    backend_calls = []

    def counting(gm, example_inputs):
        backend_calls.append(gm)
        return gm.forward
    opt = minidynamo.optimize(backend=counting)(body)
    x, y = torch.randn(3, 4), torch.randn(5, 4)
    expected = body(x, y)

    def work(i):
        for _ in range(20):
            got = opt(x, y)
            torch.testing.assert_close(got[0], expected[0])
    run_threads(work, 8)
    assert len(opt.cache_entries()) == 1
    assert len(backend_calls) == 1


def test_threads_with_fallbacks_run_the_function_once_per_call(fast_switching):
    calls = []
    lock = threading.Lock()

    def f(x):
        with lock:  # `with` makes the trace decline: every call runs eagerly, once
            calls.append(x.shape[0])
        return x + 1
    opt = minidynamo.optimize()(f)

    def work(i):
        for _ in range(25):
            torch.testing.assert_close(opt(torch.ones(i + 1)), torch.full((i + 1,), 2.0))
    run_threads(work, 4)
    assert len(calls) == 100
    assert sorted(set(calls)) == [1, 2, 3, 4]
    assert all(e.kind == "eager" for e in opt.cache_entries())


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                    reason="Triton's CPU interpreter is not thread-safe: eager launches from threads fail too")
def test_threads_with_triton_launches(fast_switching):
    def f(a, b):
        out = torch.empty_like(a)
        K.add_kernel[(triton.cdiv(a.numel(), 16),)](a, b, out, a.numel(), BLOCK=16)
        return out * 2
    opt = minidynamo.optimize()(f)
    sizes = (17, 40, 64)

    def work(i):
        n = sizes[i]
        for _ in range(4):
            a, b = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
            torch.testing.assert_close(opt(a, b), (a + b) * 2)
    run_threads(work, len(sizes))
    assert len(opt.cache_entries()) == len(sizes)


def test_reset_while_other_threads_call(fast_switching):
    opt = minidynamo.optimize()(body)
    stop = threading.Event()

    def resetter():
        while not stop.is_set():
            opt.reset()
            minidynamo.reset()

    t = threading.Thread(target=resetter)
    t.start()
    try:
        def work(i):
            for _ in range(30):
                x, y = torch.randn(i + 2, 4), torch.randn(5, 4)
                torch.testing.assert_close(opt(x, y)[0], body(x, y)[0])
        run_threads(work, 3)
    finally:
        stop.set()
        t.join()


# --- memory ---------------------------------------------------------------------------------

def _collect():
    gc.collect()


def test_dropping_the_optimized_function_frees_everything():
    def make():
        w = torch.randn(3)  # reachable only through the closure and the graph's inputs

        def f(x):
            return x * w + 1
        return f, weakref.ref(w)
    f, wW = make()
    opt = minidynamo.optimize()(f)
    opt(torch.ones(3))
    opt(torch.ones(4, 3))
    refs = {"opt": weakref.ref(opt), "fn": weakref.ref(f), "W": wW,
            "entry": weakref.ref(opt.cache_entries()[0]), "cache": weakref.ref(opt._cache)}
    assert refs["cache"]() in api._all_caches
    del opt, f
    _collect()
    alive = [k for k, r in refs.items() if r() is not None]
    assert not alive, f"still alive after the user dropped them: {alive}"


def test_graph_module_and_kernel_side_table_are_freed():
    def f(a, b):
        out = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, out, a.numel(), BLOCK=16)
        return out + a
    opt = minidynamo.optimize("functional_eager")(f)
    a = torch.ones(50, device=DEVICE)
    opt(a, a)
    opt(a, a)
    entry = opt.cache_entries()[0]
    gm = entry.gm
    assert gm is not None
    refs = [weakref.ref(entry), weakref.ref(gm), weakref.ref(gm._minidynamo_kernels), weakref.ref(a)]
    del opt, entry, gm, a
    _collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_arguments_are_not_kept_alive_by_the_cache():
    def f(x, y):
        return x * y + 1

    def g(x, o):
        return o.apply(x)

    class Obj:
        def apply(self, x):
            return x - 1
    opt_f, opt_g = minidynamo.optimize()(f), minidynamo.optimize()(g)
    x, y, o = torch.ones(8), torch.ones(8), Obj()
    opt_f(x, y)
    opt_g(x, o)
    refs = [weakref.ref(v) for v in (x, y, o)]
    del x, y, o
    _collect()
    assert [r() for r in refs] == [None, None, None]
    assert len(opt_f.cache_entries()) == 1 and len(opt_g.cache_entries()) == 1


def test_reset_releases_entries():
    opt = minidynamo.optimize()(body)
    opt(torch.ones(2, 4), torch.ones(5, 4))
    ref = weakref.ref(opt.cache_entries()[0])
    minidynamo.reset()
    _collect()
    assert ref() is None
    assert opt.cache_entries() == []


def test_all_caches_is_weak_and_does_not_grow():
    assert isinstance(api._all_caches, weakref.WeakSet)
    _collect()
    before = len(api._all_caches)
    for i in range(20):
        def f(x, k=i):
            return x + k
        opt = minidynamo.optimize()(f)
        opt(torch.ones(2))
    del opt, f
    _collect()
    assert len(api._all_caches) <= before + 1


def test_repeated_calls_do_not_grow_memory_tables():
    """Cache hits allocate nothing that is kept: entries, failures and the optimized
    function's own state stay the same size over many calls."""
    opt = minidynamo.optimize()(body)
    x, y = torch.ones(3, 4), torch.ones(5, 4)
    opt(x, y)
    size = (len(opt.cache_entries()), len(opt.guard_failures()))
    _collect()
    objects_before = len(gc.get_objects())
    for _ in range(1000):
        opt(x, y)
    _collect()
    assert (len(opt.cache_entries()), len(opt.guard_failures())) == size
    assert len(gc.get_objects()) - objects_before < 200


def test_recompiles_past_the_limit_keep_the_entry_count_fixed():
    opt = minidynamo.optimize(dynamic=False)(body)  # a new entry per size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, 30):
            x, y = torch.ones(n, 4), torch.ones(5, 4)
            torch.testing.assert_close(opt(x, y)[0], body(x, y)[0])
    assert len(opt.cache_entries()) == minidynamo.config.cache_size_limit
