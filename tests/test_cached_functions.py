"""functools.lru_cache / cache wrappers, as libraries use them for device and settings
probes: traced through when their body can be; else the call breaks and runs natively (the
wrapper decides there, as in eager: its body runs once per key, an exception each time);
a function marked constant (torch.compiler.assume_constant_result) answers at trace time."""
import functools
import io
import os
import contextlib

import torch
from helpers import CountingBackend, check

import minidynamo


@functools.lru_cache(maxsize=None)
def block_size(n):
    size = 1
    while size < n:
        size *= 2
    return size, 4 if size < 2048 else 8


@functools.cache
def dtype_table():
    return {torch.float32: 0, torch.float16: 1}


def uses_pure_probes(x):
    block, warps = block_size(x.shape[-1])
    return x * block + warps + dtype_table()[x.dtype]


def test_a_pure_cached_body_is_traced_through():
    block_size.cache_clear()
    check(uses_pure_probes, torch.ones(3, 5), kind="graph")
    assert block_size.cache_info().currsize == 1  # only eager's own calls filled it


calls = []


@functools.lru_cache(maxsize=None)
def probe(name):
    calls.append(name)
    print("probing", name)
    return len(name)


def uses_impure_probe(x):
    return x * probe("device")


def test_an_untraceable_cached_body_runs_once_per_key_overall():
    """The body prints: the call breaks and runs natively, the cache deciding hit or miss
    as in eager; the body ran once over two calls."""
    probe.cache_clear()
    calls.clear()
    opt = minidynamo.optimize(uses_impure_probe)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        first = opt(torch.ones(2))
        second = opt(torch.ones(2))
    torch.testing.assert_close(first, uses_impure_probe(torch.ones(2)))
    torch.testing.assert_close(second, first)
    assert calls == ["device"] and out.getvalue() == "probing device\n"
    assert opt.cache_entries()[0].kind == "break"


@functools.lru_cache(maxsize=None)
def checked_size(n):
    print("checking", n)
    if n > 3:
        raise ValueError(f"{n} is too big")
    return n


def test_an_untraceable_cached_body_that_raises_runs_on_every_call():
    """An exception is not cached: eager runs the body (and its print) on each call, and
    once per call, whether the exception is caught in the function or leaves it."""
    def caught(x, n):
        try:
            return x + checked_size(n)
        except ValueError as e:
            return x - 1, str(e)

    def uncaught(x, n):
        return x * checked_size(n)

    for fn in (caught, uncaught):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        for n in (5, 5, 2, 2):
            outputs = []
            for run in (fn, opt):
                checked_size.cache_clear()  # each run finds the cache as the other did
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    try:
                        result = run(torch.ones(2), n)
                    except ValueError as e:
                        result = f"raised {e}"
                outputs.append((buf.getvalue(), str(result)))
            assert outputs[1] == outputs[0], (fn.__name__, n, outputs)


@torch.compiler.assume_constant_result
def installed():
    return os.getpid() > 0  # a C call, not traced: the answer is taken


@functools.lru_cache
@torch.compiler.assume_constant_result
def cached_installed():
    return os.getpid() > 0


def test_a_function_marked_constant_answers_at_trace_time():
    """torch.compiler.assume_constant_result (transformers marks its install probes so,
    under their lru_cache): called at trace time, its answer a constant, one graph."""
    def fn(x):
        return x + 1 if installed() and cached_installed() else x - 1

    check(fn, torch.ones(2), kind="graph")


def uses_probe_on_a_tensor(x):
    return probe(x)


def test_a_cached_function_of_a_tensor_breaks():
    # The call is declined where it is made: the graph breaks there and the call runs natively.
    check(uses_probe_on_a_tensor, torch.ones(2), kind="break", reason="call")


SCALE = torch.full((2,), 3.0)


@functools.lru_cache(maxsize=None)
def scaled_probe(n):
    import time  # noqa: F401 - a C call below makes the body untraceable
    base = SCALE * n  # reads a global tensor before the trace declines
    return int(time.time() > 0) + n + 0 * int(base.shape[0])


def uses_probe_reading_a_tensor(x):
    return x * scaled_probe(2)


def test_an_untraceable_body_that_read_a_tensor_leaves_no_stale_input():
    """The body read a global tensor before it declined: the call breaks there and the
    graph keeps no input or node of the attempt."""
    scaled_probe.cache_clear()
    check(uses_probe_reading_a_tensor, torch.ones(2), kind="break")


CALLS = []


@functools.lru_cache(maxsize=None)
def logged_double(n):
    CALLS.append(n)  # runs only when the cache misses
    return n * 2


class Counter:
    def __init__(self):
        self.n = 0


COUNTER = Counter()


@functools.cache
def counted(n):
    COUNTER.n += 1
    return n + COUNTER.n


def test_a_cached_body_that_changes_outside_state_is_not_repeated_per_call():
    """The graph would run the body's writes on every call; eager runs them on a miss only:
    the call of such a cached function breaks (runs for real), the rest is traced."""
    def f(x):
        return x * logged_double(3) + logged_double(3), x * counted(2)

    opt = minidynamo.optimize(f, backend=CountingBackend())
    x = torch.randn(3)
    for _ in range(3):
        CALLS.clear()
        logged_double.cache_clear()
        counted.cache_clear()
        COUNTER.n = 0
        expected = f(x)
        eager_state = (list(CALLS), COUNTER.n, logged_double.cache_info().currsize)
        CALLS.clear()
        logged_double.cache_clear()
        counted.cache_clear()
        COUNTER.n = 0
        got = opt(x)
        assert (list(CALLS), COUNTER.n, logged_double.cache_info().currsize) == eager_state
        torch.testing.assert_close(got, expected)
