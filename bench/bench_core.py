"""Core speed on CPU: first call (trace + compile) and per-call overhead over plain eager,
minidynamo against ``torch.compile(fn, backend="eager")`` measured in the same run.

Workloads on 8-element float32 tensors, so Python overhead dominates:
``(x + y) * 2``, a 20-op elementwise chain, ``x1 + x2 + ...`` with 1/4/16/64 tensor
arguments (1 argument: ``x1 + x1``), and a tuple + lambda closure +
``functools.partial(torch.add, alpha=2)`` workload.

    python -m pytest bench/bench_core.py --benchmark-only    # pytest-benchmark groups
    python bench/bench_core.py --table                       # markdown table only

"cold" = reset, then one call (trace + compile + run); "warm" = a cache hit.
The table's µs/call is the minimum over interleaved rounds (peers alternate within each
round, so machine noise hits them alike); overhead = µs/call minus plain eager's.
"""
from __future__ import annotations

import functools
import os
import sys

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402
import overhead  # noqa: E402

N = 8


# --- workloads ------------------------------------------------------------------------
def add_mul(x, y):
    return (x + y) * 2


def chain20(x, y):
    a = x + y
    a = a * 2
    a = a - y
    a = a / 3
    a = torch.relu(a)
    a = a + x
    a = a * y
    a = a - 1
    a = torch.sigmoid(a)
    a = a * 3
    a = a + y
    a = a * x
    a = a - 2
    a = torch.tanh(a)
    a = a + 1
    a = a * 2
    a = a - x
    a = a / 2
    a = torch.relu(a)
    a = a + y
    return a


_add2 = functools.partial(torch.add, alpha=2)


def tuple_lambda_partial(x, y):
    pair = (x, y)
    scale = 3.0
    act = lambda t: torch.relu(t) * scale  # noqa: E731
    a, b = pair
    return _add2(act(a), b), len(pair)


def _sum_of_args(n: int):
    """`def args{n}(x1, ..., xn): return x1 + ... + xn` (n == 1: `x1 + x1`)."""
    names = [f"x{i}" for i in range(1, n + 1)]
    body = " + ".join(names) if n > 1 else "x1 + x1"
    scope: dict = {}
    exec(f"def args{n}({', '.join(names)}):\n    return {body}\n", scope)
    return scope[f"args{n}"]


def _tensors(k):
    g = torch.Generator().manual_seed(k)
    return tuple(torch.randn(N, generator=g) for _ in range(k))


WORKLOADS = {
    "(x+y)*2": (add_mul, _tensors(2)),
    "20-op chain": (chain20, _tensors(2)),
    "tuple+lambda+partial": (tuple_lambda_partial, _tensors(2)),
    **{f"{n} tensor args": (_sum_of_args(n), _tensors(n)) for n in (1, 4, 16, 64)},
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
    return minidynamo.optimize(fn)


def warm(peer, fn, args):
    f = cold(peer, fn)
    f(*args)
    f(*args)
    return f


def _check_same(workload):
    fn, args = WORKLOADS[workload]
    want = fn(*args)
    for peer in ("dynamo", "minidynamo"):
        got = warm(peer, fn, args)(*args)
        torch.testing.assert_close(got, want)


# --- pytest-benchmark -------------------------------------------------------------------
@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_warm(benchmark, workload, peer):
    benchmark.group = f"warm {workload}"
    fn, args = WORKLOADS[workload]
    if peer == "eager":
        _check_same(workload)
    f = warm(peer, fn, args)
    benchmark(f, *args)


@pytest.mark.parametrize("peer", ("dynamo", "minidynamo"))
@pytest.mark.parametrize("workload", ["(x+y)*2", "20-op chain", "tuple+lambda+partial",
                                      "64 tensor args"])
def test_cold(benchmark, workload, peer):
    benchmark.group = f"cold {workload}"
    fn, args = WORKLOADS[workload]
    warm(peer, fn, args)  # imports and one-time setup out of the measurement

    def first_call():
        cold(peer, fn)(*args)
    benchmark.pedantic(first_call, rounds=5, iterations=1)


# --- table mode -------------------------------------------------------------------------
def header() -> str:
    try:
        import triton
        tv = triton.__version__
    except ImportError:
        tv = "not installed"
    return (f"CPU ({os.cpu_count()} cores), Python {sys.version.split()[0]}, torch {torch.__version__}, "
            f"triton {tv}; {N}-element float32 tensors")


def measure(workloads=None):
    rows = []
    for name in workloads or WORKLOADS:
        fn, args = WORKLOADS[name]
        _check_same(name)
        us = overhead.time_warm({p: warm(p, fn, args) for p in PEERS}, args)
        first = {p: overhead.time_cold(lambda p=p: cold(p, fn), args) for p in ("dynamo", "minidynamo")}
        rows.append((name, us, first))
    return rows


if __name__ == "__main__":
    torch.set_num_threads(1)
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--table" not in sys.argv:
        sys.exit("usage: python bench/bench_core.py --table [workload ...]   "
                 "(or: python -m pytest bench/bench_core.py --benchmark-only)")
    print(header())
    print()
    print(overhead.table(measure(chosen or None)))
