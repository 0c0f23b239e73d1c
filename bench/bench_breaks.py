"""Graph breaks on CPU: per-call time and first call (trace + compile) of functions that
break, minidynamo against ``torch.compile(fn, backend="eager")`` and plain eager, measured
in the same run.

Workloads on 8-element float32 tensors, so Python overhead dominates: blocks of five small
tensor ops separated by a ``print`` (a graph break for both compilers; stdout goes to a
writer that drops everything while timing):

- ``1 break``: block, ``print``, block (10 ops);
- ``3 breaks``: four blocks with a ``print`` between each two (20 ops);
- ``no break``: the 10 ops of ``1 break`` without the ``print``, for reference.

    python -m pytest bench/bench_breaks.py --benchmark-only    # pytest-benchmark groups
    python bench/bench_breaks.py --table                       # markdown table only

"cold" = reset (``minidynamo.reset()``, ``torch._dynamo.reset()``), then one call (trace +
compile of the function and of what runs after each break + run); "warm" = cache hits.
The table's µs/call is the minimum over interleaved rounds (peers alternate within each
round, so machine noise hits them alike); overhead = µs/call minus plain eager's.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402
import overhead  # noqa: E402

N = 8


class NullWriter(io.TextIOBase):
    """stdout while timing: accepts and drops everything."""

    def write(self, s):
        return len(s)

    def writable(self):
        return True


def quiet():
    return contextlib.redirect_stdout(NullWriter())


# --- workloads ------------------------------------------------------------------------
def no_break(x, y):
    a = x + y
    a = a * 2
    a = torch.relu(a)
    a = a - y
    a = a / 3
    b = a * x
    b = b + 1
    b = torch.sigmoid(b)
    b = b * y
    b = b - a
    return b


def one_break(x, y):
    a = x + y
    a = a * 2
    a = torch.relu(a)
    a = a - y
    a = a / 3
    print("rows", a.shape[0])
    b = a * x
    b = b + 1
    b = torch.sigmoid(b)
    b = b * y
    b = b - a
    return b


def three_breaks(x, y):
    a = x + y
    a = a * 2
    a = torch.relu(a)
    a = a - y
    a = a / 3
    print("rows", a.shape[0])
    b = a * x
    b = b + 1
    b = torch.sigmoid(b)
    b = b * y
    b = b - a
    print("dim", b.dim())
    c = b + x
    c = c * 0.5
    c = torch.tanh(c)
    c = c - y
    c = c * b
    print("size", c.numel())
    d = c + a
    d = d * 3
    d = torch.relu(d)
    d = d - x
    d = d / 2
    return d


def _tensors():
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, generator=g), torch.randn(N, generator=g)


WORKLOADS = {
    "no break (10 ops)": (no_break, 0),
    "1 break (10 ops)": (one_break, 1),
    "3 breaks (20 ops)": (three_breaks, 3),
}
PEERS = ("eager", "dynamo", "minidynamo")


# --- peers ------------------------------------------------------------------------------
def cold(peer, fn):
    """A fresh compiled callable (nothing cached) for `fn`."""
    if peer == "eager":
        return fn
    if peer == "dynamo":
        torch._dynamo.reset()
        return torch.compile(fn, backend="eager")
    minidynamo.reset()
    return minidynamo.optimize(fn)


def warm(peer, fn, args):
    f = cold(peer, fn)
    with quiet():
        f(*args)
        f(*args)
    return f


def _graphs(opt) -> tuple[int, int]:
    """(break entries, graph entries) of an optimized function and the resume functions
    its breaks continue in."""
    seen, todo, kinds = set(), [opt], []
    while todo:
        f = todo.pop()
        if id(f) not in seen:
            seen.add(id(f))
            for e in f.cache_entries():
                kinds.append(e.kind)
                todo.extend(e.resumes)
    return kinds.count("break"), kinds.count("graph")


def check_same(workload):
    """Same result and same output as eager for both compilers, and minidynamo breaks
    where the function prints (rather than running it all eagerly)."""
    fn, breaks = WORKLOADS[workload]
    args = _tensors()
    want_out = io.StringIO()
    with contextlib.redirect_stdout(want_out):
        want = fn(*args)
    for peer in ("dynamo", "minidynamo"):
        f = warm(peer, fn, args)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            got = f(*args)
        torch.testing.assert_close(got, want)
        assert out.getvalue() == want_out.getvalue(), (peer, out.getvalue(), want_out.getvalue())
        if peer == "minidynamo":
            assert _graphs(f) == (breaks, 1), f"{workload}: (break entries, graph entries) {_graphs(f)}"


# --- pytest-benchmark -------------------------------------------------------------------
@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_warm(benchmark, workload, peer):
    benchmark.group = f"warm {workload}"
    fn, _ = WORKLOADS[workload]
    args = _tensors()
    if peer == "eager":
        check_same(workload)
    f = warm(peer, fn, args)
    with quiet():
        benchmark(f, *args)


@pytest.mark.parametrize("peer", ("dynamo", "minidynamo"))
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_cold(benchmark, workload, peer):
    benchmark.group = f"cold {workload}"
    fn, _ = WORKLOADS[workload]
    args = _tensors()
    warm(peer, fn, args)  # imports and one-time setup out of the measurement

    def first_call():
        cold(peer, fn)(*args)
    with quiet():
        benchmark.pedantic(first_call, rounds=5, iterations=1)


# --- table mode -------------------------------------------------------------------------
def header() -> str:
    return (f"CPU ({os.cpu_count()} cores), Python {sys.version.split()[0]}, torch {torch.__version__}; "
            f"{N}-element float32 tensors, stdout dropped while timing")


def measure(workloads=None):
    rows = []
    for name in workloads or WORKLOADS:
        fn, _ = WORKLOADS[name]
        args = _tensors()
        check_same(name)
        us = overhead.time_warm({p: warm(p, fn, args) for p in PEERS}, args, quiet=quiet)
        first = {p: overhead.time_cold(lambda p=p: cold(p, fn), args, quiet=quiet) for p in ("dynamo", "minidynamo")}
        rows.append((name, us, first))
    return rows


if __name__ == "__main__":
    torch.set_num_threads(1)
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--table" not in sys.argv:
        sys.exit("usage: python bench/bench_breaks.py --table [workload ...]   "
                 "(or: python -m pytest bench/bench_breaks.py --benchmark-only)")
    print(header())
    print()
    print(overhead.table(measure(chosen or None)))
