"""Host cost per call of one small Triton launch (1,024 float32 elements, so the
host side dominates): plain ``add_kernel[(1,)]``, plain lambda-grid launch, the
minidynamo launcher, and ``torch.add(x, y, out=o)`` as the dispatch floor.
GPU only.

    python -m pytest bench/bench_launcher.py -s      # pytest-benchmark + table
    python bench/bench_launcher.py                   # table only
"""
import statistics
import sys
import time

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("launcher benchmark needs a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from minidynamo.triton.launcher import make_launcher  # noqa: E402

N = 1024
ROUNDS, CALLS = 7, 2000


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def make_variants():
    """name -> zero-argument callable doing one launch; all warmed up and checked."""
    x, y, o = (torch.randn(N, device="cuda") for _ in range(3))

    def grid(meta):
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    lau = make_launcher(add_kernel, grid, {"n": N, "BLOCK": 1024}, ("x_ptr", "y_ptr", "out_ptr"))
    variants = {
        "plain add_kernel[(1,)]": lambda: add_kernel[(1,)](x, y, o, N, BLOCK=1024),
        "plain add_kernel[lambda]": lambda: add_kernel[grid](x, y, o, N, BLOCK=1024),
        "minidynamo launcher": lambda: lau(x, y, o),
        "torch.add(out=) floor": lambda: torch.add(x, y, out=o),
    }
    for f in variants.values():
        o.zero_()
        f()
        f()
        torch.cuda.synchronize()
        torch.testing.assert_close(o, x + y)
    assert lau.fast_path, lau.describe()
    return variants, lau


def time_variants(variants, rounds=ROUNDS, calls=CALLS):
    """Median µs/call over `rounds` rounds of `calls` calls, variants interleaved per
    round so machine noise hits them alike."""
    samples = {k: [] for k in variants}
    for _ in range(rounds):
        for name, f in variants.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t1 = time.perf_counter()
            samples[name].append((t1 - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return {k: statistics.median(v) for k, v in samples.items()}


def table(us):
    base, floor = us["plain add_kernel[(1,)]"], us["torch.add(out=) floor"]
    lines = [f"{'variant':28s} {'us/call':>8s} {'vs plain[(1,)]':>15s} {'vs torch.add':>13s}"]
    for name, v in us.items():
        lines.append(f"{name:28s} {v:8.2f} {v / base:15.2f} {v / floor:13.2f}")
    return "\n".join(lines)


def header():
    return (f"{torch.cuda.get_device_name()}, Python {sys.version.split()[0]}, torch {torch.__version__}, "
            f"triton {triton.__version__}; {N} float32, median of {ROUNDS} x {CALLS} calls")


@pytest.fixture(scope="module")
def variants():
    return make_variants()[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["plain add_kernel[(1,)]", "plain add_kernel[lambda]",
                                  "minidynamo launcher", "torch.add(out=) floor"])
def test_launch_overhead(benchmark, variants, name):
    f = variants[name]

    def many():
        for _ in range(100):
            f()
    benchmark.pedantic(many, rounds=50, warmup_rounds=2)  # one round = 100 launches


@pytest.mark.gpu
def test_summary_table(variants):
    us = time_variants(variants)
    print("\n" + header() + "\n" + table(us))
    assert us["minidynamo launcher"] < us["plain add_kernel[(1,)]"]


if __name__ == "__main__":
    v, launcher = make_variants()
    print(header())
    print(launcher.describe())
    print(table(time_variants(v)))
