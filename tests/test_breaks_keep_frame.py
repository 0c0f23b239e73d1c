"""Graph breaks that keep the rest of the frame: a call of a C function the trace does not
model (`time.time()`, `os.getpid()`, `zlib.crc32`, a C counter) breaks at the call, the
call runs natively once, and the resume function starts after it with the result on its
stack; an operator or comparison the trace declines breaks there too. Differential: eager
vs optimized (results, exceptions, printed output, outside state, side effects once),
with graph counts from a counting backend."""
from __future__ import annotations

import heapq
import itertools
import os
import time
import zlib

import pytest
import torch

import minidynamo
from helpers import CountingBackend, assert_uses, entry_tree
from test_graph_breaks import State, differ, t

COUNTER = itertools.count()
TICK = COUNTER.__next__
SEEN: list = []


def counter_state():
    """The C counter's position (read without advancing it) and what the calls recorded."""
    return State(SEEN.clear, lambda: (repr(COUNTER), list(SEEN)))


# --- a C function between two blocks of tensor work ---------------------------------
def test_time_between_tensor_work_two_graphs():
    def f(x):
        y = x.sin() + 1
        started = time.time()
        z = y.cos() * 2
        return z, started > 0

    assert_uses(f, ("CALL", "CALL_FUNCTION", "CALL_METHOD"))
    info = differ(f, t(), graphs=2, top="break")
    assert info.categories[0] == "call"  # the break is the C call itself, not the attribute read
    assert "time" in str(info.breaks[0].break_reason)


def test_time_result_is_not_specialized_on():
    # A clock reading differs on every call: the resume function must not guard on it.
    def f(x):
        y = x.sin() + 1
        started = time.time()
        z = y.cos() * 2
        return z, started > 0

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    x = t()
    sizes = []
    for _ in range(5):
        z, ok = opt(x)
        assert ok is True
        torch.testing.assert_close(z, f(x)[0])
        sizes.append(len(entry_tree(opt, backend)))
    assert backend.calls == 2, backend.calls  # the two blocks of tensor work, traced once
    assert len(set(sizes)) == 1, sizes  # no entry added after the first call
    kinds = [e.kind for e in entry_tree(opt, backend)]
    assert "eager" not in kinds, kinds


def test_getpid_result_used_after():
    def f(x):
        y = x * 2
        pid = os.getpid()
        return y.relu() + (pid > 0)

    differ(f, t(), graphs=2, top="break")


def test_crc32_with_arguments():
    def f(x, data):
        y = x + 1
        c = zlib.crc32(data) % 7
        return y * c

    differ(f, (t(), b"abc"), graphs=2, top="break")


def test_c_function_in_an_expression():
    def f(x):
        return x.sin() * (zlib.crc32(b"xyz") % 5) + x.cos()

    differ(f, t(), graphs=2, top="break")


def test_two_c_calls_three_graphs():
    def f(x):
        a = x.sin()
        p = os.getpid()
        b = a.cos()
        c = zlib.crc32(b"q")
        return b * 2 + (p > 0) + c % 3

    differ(f, t(), graphs=3, top="break")


# --- side effects exactly once -------------------------------------------------------
def test_c_counter_advances_once_per_call():
    def f(x):
        y = x.sin() + 1
        n = TICK()
        SEEN.append(n)
        return y.cos() * 2

    # The counter's position differs between the eager and the optimized runs: compare
    # how far each call advances it.
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    x = t()
    for _ in range(3):
        before = next(COUNTER)
        torch.testing.assert_close(opt(x), f.__wrapped__(x) if hasattr(f, "__wrapped__") else (x.sin() + 1).cos() * 2)
        after = next(COUNTER)
        assert after - before == 2, (before, after)  # exactly one TICK() in between
        assert SEEN[-1] == before + 1
    assert backend.calls >= 2


def test_heappush_on_a_list_passed_in_once():
    def f(x, h):
        y = x.sin() + 1
        heapq.heappush(h, 3)
        return y.cos() * len(h)

    differ(f, (t(), [5, 1, 8]), graphs=2, top="break")


def test_print_between_blocks():
    def f(x):
        y = x.sin() + 1
        print("between", y.shape)
        return y.cos()

    differ(f, t(), graphs=2, top="break")


def test_append_of_c_result_to_list_passed_in():
    def f(x, out):
        y = x * 3
        out.append(zlib.crc32(b"k") % 11)
        return y - 1

    differ(f, (t(), [1]), graphs=2, top="break")


def test_c_call_raises_natively():
    def f(x, data):
        y = x + 1
        zlib.crc32(data)  # TypeError on a str, raised by the native call
        return y

    differ(f, (t(), "not bytes"), graphs=1, top="break")


def test_c_call_inside_a_called_function():
    def helper(y):
        return y * (os.getpid() > 0)

    def f(x):
        a = x.sin()
        return helper(a).cos()

    differ(f, t(), top="break")


def test_comparison_break_keeps_the_rest():
    # A comparison of the untraced result breaks at COMPARE_OP: the tensor work after
    # it is a graph of its own.
    def f(x):
        y = x.sin()
        now = time.time()
        late = now < 0
        return y.cos() + 1, late

    assert_uses(f, "COMPARE_OP")
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(3):
        z, late = opt(t())
        torch.testing.assert_close(z, t().sin().cos() + 1)
        assert late is False
    assert backend.calls == 2


def test_binary_op_on_untraced_result_breaks_there():
    def f(x):
        y = x.sin()
        later = time.time() + 1.0
        return y.cos(), later > 0

    assert_uses(f, ("BINARY_OP", "BINARY_ADD"))
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(3):
        z, ok = opt(t())
        assert ok is True
    assert backend.calls == 2


def test_fullgraph_still_refuses():
    def f(x):
        y = x.sin()
        time.time()
        return y

    with pytest.raises(minidynamo.Unsupported) as e:
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)(t())
    assert e.value.category == "call"
