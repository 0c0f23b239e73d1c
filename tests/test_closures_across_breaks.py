"""Closures across graph breaks: a frame whose inner functions (or `nonlocal` counters)
close over its cells hands the cells themselves to its resume function, so writes before
and after the break, in the trace, in the native instruction or in a closure that
escapes, are all writes of one variable, as in eager. Differential: eager vs optimized
(results, exceptions, printed output, outside state, side effects once), with graph
counts from a counting backend."""
from __future__ import annotations

import sys

import pytest

import minidynamo

from helpers import assert_uses
from test_graph_breaks import LOG, differ, log_state, t


@minidynamo.disable
def call_natively(fn, *args):
    """Runs `fn` outside the trace (a graph break): the cells it writes are the real ones."""
    LOG.append("native")
    return fn(*args)


# --- the frame's own counter ------------------------------------------------------------
def test_nonlocal_counter_across_print():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
        inc()
        y = x.sin()
        print("hi")
        inc()
        return y * n

    assert_uses(f, ("STORE_DEREF", "LOAD_DEREF"))
    info = differ(f, t(), graphs=2, breaks=1, top="break")
    assert "eager" not in [e.kind for e in info.entries]


def test_native_call_writes_the_cell_resume_reads_it():
    def f(x):
        n = 1

        def inc(k):
            nonlocal n
            n += k
            return n
        y = x * n
        call_natively(inc, 10)  # the real cell: 11
        return y + n, inc(1)

    differ(f, t(), graphs=2, breaks=1, top="break", state=log_state())


def test_trace_write_is_seen_by_native_call():
    def f(x):
        n = 1

        def get():
            return n
        n = 5  # after the closure exists: the native call must see 5
        y = x.cos()
        got = call_natively(get)
        n = got + 1  # in the resume trace, written back at its return
        return y * got, get()

    differ(f, t(), graphs=2, breaks=1, top="break", state=log_state())


def test_closure_escapes_returned():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
            return n
        inc()
        print("between")
        inc()
        return x + 1, inc

    backend_runs = []
    for run in (f, minidynamo.optimize(backend="eager")(f)):
        y, inc = run(t())
        backend_runs.append((inc(), inc()))  # the caller's calls go on counting from 2
    assert backend_runs[0] == backend_runs[1] == (3, 4)
    differ(f, t(), graphs=1, breaks=1)  # nothing to compile before the print


def test_two_closures_share_the_cell_across_two_breaks():
    def f(x):
        total = 0

        def add(v):
            nonlocal total
            total += v

        def get():
            return total
        add(1)
        print("one", get())
        add(2)
        y = x * get()
        print("two", get())
        add(3)
        return y, get(), total

    differ(f, t(), graphs=1, breaks=2, top="break")  # tensor work between the prints only


def test_argument_cell():
    def f(x, k):
        def scale(v):
            return v * k
        print("k", k)
        k = k + 1
        return scale(x)

    differ(f, (t(), 2), (t(), 3), graphs=2, top="break")


def test_recursive_inner_function():
    def f(x, n):
        def fact(m):
            return 1 if m <= 1 else m * fact(m - 1)
        print("before")
        return x * fact(n)

    differ(f, (t(), 4), graphs=1, top="break")


def test_old_contents_kept_when_reassigned_after_break():
    def f(x):
        items = [1]

        def get():
            return items
        print("break")
        old = items
        items = [2]
        return x + 1, old, get(), old is get()

    differ(f, t(), graphs=1, top="break")


def test_break_on_tensor_condition_with_counter():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
        inc()
        if x.sum() > 0:
            inc()
            y = x + n
        else:
            y = x - n
        inc()
        return y, n

    differ(f, t(), -t(), graphs=3, top="break")


def test_loop_with_break_counts():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
        for i in range(3):
            inc()
            print("step", i)
            x = x + n
        return x, n

    differ(f, t(), top="break")


def test_unbound_cell_after_break_raises_like_eager():
    def f(x):
        def get():
            return later
        print("break")
        if x.shape[0] > 100:
            later = 1
        return get()

    differ(f, t(), graphs=0)


def test_escaping_closure_without_break():
    def f(x):
        n = 2

        def scale(v):
            return v * n
        n = 3
        return x + 1, scale

    opt = minidynamo.optimize(backend="eager")(f)
    y, scale = opt(t())
    assert scale(2) == 6 and scale.__closure__[0].cell_contents == 3
    differ(f, t(), graphs=1)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="inlined comprehensions are 3.12+")
def test_comprehension_cell_declines_by_reference():
    # A comprehension's variable that a lambda closes over is a cell the comprehension
    # saves and restores by slot: such a frame passes its cells by value (as before).
    def f(x):
        fs = [lambda: i for i in range(2)]
        print("break")
        return x + fs[1]()

    differ(f, t(), calls=1)  # the lambdas are pinned by identity: a new trace per call


def test_resume_function_running_natively_reads_the_passed_cell():
    # The resume function itself runs eagerly here (a map object is not traced): its code
    # reads `scale` through the passed cell, from the resume point on.
    def f(x):
        scale = x.sum()
        m = map(lambda v: v * scale, [x, x + 1])
        minidynamo.graph_break()
        return list(m)

    differ(f, t(), graphs=1, top="break")


def test_comprehension_made_again_after_the_break_keeps_a_cell_per_item():
    # The comprehension runs again in the resume function (the break is inside the loop):
    # each of its lambdas must close over a cell of its own, as in eager, while `g` closes
    # over the frame's `k`.
    def f(x):
        k = x.sum()
        g = lambda v: v * k  # noqa: E731
        out = []
        for _ in range(2):
            fs = [lambda: i for i in range(3)]
            print("b")
            out.append(g(x) + fs[0]() + fs[2]())
        return out

    differ(f, t(), calls=1)  # the comprehension's lambdas are pinned by identity: a new trace per call
