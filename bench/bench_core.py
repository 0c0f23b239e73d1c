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
import statistics
import sys
import time

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402

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
def time_warm(fns: dict, args, rounds=15, min_time=0.02):
    """Min µs/call per peer over interleaved rounds."""
    calls = {}
    for name, f in fns.items():  # calibrate: about `min_time` seconds per round
        t0 = time.perf_counter()
        for _ in range(50):
            f(*args)
        per = (time.perf_counter() - t0) / 50
        calls[name] = max(50, int(min_time / per))
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            n = calls[name]
            t0 = time.perf_counter()
            for _ in range(n):
                f(*args)
            samples[name].append((time.perf_counter() - t0) / n * 1e6)
    return {k: min(v) for k, v in samples.items()}


def time_cold(peer, fn, args, rounds=5):
    """Median ms of one first call (trace + compile + run) after a reset."""
    warm(peer, fn, args)
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f = cold(peer, fn)
        f(*args)
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


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
        us = time_warm({p: warm(p, fn, args) for p in PEERS}, args)
        first = {p: time_cold(p, fn, args) for p in ("dynamo", "minidynamo")}
        rows.append((name, us, first))
    return rows


def table(rows) -> str:
    lines = [
        "| workload | eager µs | Dynamo µs | minidynamo µs | Dynamo overhead µs "
        "| minidynamo overhead µs | overhead ratio | Dynamo first call ms "
        "| minidynamo first call ms | first-call ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, us, first in rows:
        do, mo = us["dynamo"] - us["eager"], us["minidynamo"] - us["eager"]
        ratio = mo / do if do > 0 else float("nan")
        lines.append(
            f"| {name} | {us['eager']:.1f} | {us['dynamo']:.1f} | {us['minidynamo']:.1f} "
            f"| {do:.1f} | {mo:.1f} | {ratio:.2f} | {first['dynamo']:.1f} "
            f"| {first['minidynamo']:.2f} | {first['minidynamo'] / first['dynamo']:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--table" not in sys.argv:
        sys.exit("usage: python bench/bench_core.py --table [workload ...]   "
                 "(or: python -m pytest bench/bench_core.py --benchmark-only)")
    print(header())
    print()
    print(table(measure(chosen or None)))
