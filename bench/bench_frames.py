"""Every frame optimized, on CPU: what torch's frame hook costs and gains when code runs
eagerly under an optimized call. minidynamo against ``torch.compile(fn, backend="eager")``
and plain eager, in the same run.

Workloads on 8-element float32 tensors, so Python overhead dominates:

- ``eager frame, 4 blocks``: a frame that cannot break (a ``print`` inside ``try``: both
  compilers run it eagerly) calling four functions of five tensor ops each; each callee is
  a frame of its own, captured by both;
- ``eager frame, 4 plain helpers``: the same frame calling four functions with no tensor
  work (shape arithmetic): the cost of a frame the hook offers and then runs plainly.

    python -m pytest bench/bench_frames.py --benchmark-only    # pytest-benchmark groups
    python bench/bench_frames.py --table                       # markdown table only

µs/call is the minimum over interleaved rounds of warm calls; overhead = µs/call minus
plain eager's.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import time

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402

N = 8


def quiet():
    return contextlib.redirect_stdout(io.StringIO())


def block(x, y):
    a = x + y
    a = a * 2
    a = torch.relu(a)
    a = a - y
    return a / 3


def rows(x, y):
    return (x.shape[0] + y.shape[0]) // 2


def four_blocks(x, y):
    try:
        print("eager frame")
        for _ in range(4):
            x = block(x, y)
        return x
    finally:
        pass


def four_helpers(x, y):
    try:
        print("eager frame")
        n = 0
        for _ in range(4):
            n += rows(x, y)
        return x * n
    finally:
        pass


WORKLOADS = {"eager frame, 4 blocks": four_blocks, "eager frame, 4 plain helpers": four_helpers}


def peers(fn):
    torch._dynamo.reset()
    return {"eager": fn, "minidynamo": minidynamo.optimize(fn), "torch.compile": torch.compile(fn, backend="eager")}


def args():
    return torch.randn(N), torch.randn(N)


@pytest.mark.parametrize("peer", ["eager", "minidynamo", "torch.compile"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_frames(benchmark, workload, peer):
    fn = peers(WORKLOADS[workload])[peer]
    x, y = args()
    with quiet():
        fn(x, y)
        fn(x, y)
        benchmark.group = workload
        benchmark(fn, x, y)


def table(rounds: int = 7, calls: int = 2000) -> str:
    lines = ["| workload | eager µs | minidynamo µs (overhead) | torch.compile µs (overhead) |",
             "|---|---|---|---|"]
    for name, fn in WORKLOADS.items():
        runners = peers(fn)
        x, y = args()
        best = {k: float("inf") for k in runners}
        with quiet():
            for f in runners.values():
                f(x, y)
                f(x, y)
            for _ in range(rounds):
                for k, f in runners.items():
                    start = time.perf_counter()
                    for _ in range(calls):
                        f(x, y)
                    best[k] = min(best[k], (time.perf_counter() - start) / calls * 1e6)
        e = best["eager"]
        lines.append(f"| {name} | {e:.1f} | {best['minidynamo']:.1f} ({best['minidynamo'] - e:+.1f}) | "
                     f"{best['torch.compile']:.1f} ({best['torch.compile'] - e:+.1f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(table())
