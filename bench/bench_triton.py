"""Per-call cost of functions that launch Triton kernels (GPU): plain eager, minidynamo,
torch.compile (eager backend and inductor), measured in one run.

    python bench/bench_triton.py --table          # markdown table, µs per call
    python -m pytest bench/bench_triton.py --benchmark-only
"""
import statistics
import sys
import time

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import minidynamo  # noqa: E402

N = 1024


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def user_fn(a, b):
    o = torch.empty_like(a)
    n = o.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, o, n, BLOCK=1024)
    return o


def chain_fn(a, b):
    x = a
    for _ in range(10):
        o = torch.empty_like(x)
        n = o.numel()
        add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, b, o, n, BLOCK=1024)
        x = o
    return x


def raw_cuda_graph(fn, a, b):
    """The floor: fn recorded once by hand, replayed with no checks and no copies."""
    fn(a, b)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(a, b)
    return lambda *_: g.replay()


def variants(fn):
    out = {"eager": fn, "minidynamo": minidynamo.optimize(fn),
           "minidynamo cudagraphs": minidynamo.optimize(mode="cudagraphs")(fn)}
    torch._dynamo.reset()
    out["compile eager"] = torch.compile(fn, backend="eager")
    out["compile inductor"] = torch.compile(fn)
    return out


def call_samples_us(fs: dict, args, rounds=9, n=2000) -> dict:
    """name -> µs per call in each round: rounds of `n` calls, the functions interleaved
    within each round so that drift of the machine hits them all alike."""
    for f in fs.values():
        for _ in range(50):
            f(*args)
    torch.cuda.synchronize()
    samples = {k: [] for k in fs}
    for _ in range(rounds):
        for name, f in fs.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                f(*args)
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - t0) / n * 1e6)
    return samples


def per_call_us(fs: dict, args, rounds=9, n=2000) -> dict:
    """Median µs per call of each function over interleaved rounds (call_samples_us)."""
    return {k: statistics.median(v) for k, v in call_samples_us(fs, args, rounds, n).items()}


def first_call_ms(make, args):
    f = make()
    t0 = time.perf_counter()
    f(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def table():
    a = torch.randn(N, device="cuda")
    b = torch.randn(N, device="cuda")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"Python {sys.version.split()[0]}")
    print("| workload | variant | µs/call | vs eager | first call ms |")
    print("|---|---|---:|---:|---:|")
    for name, fn in (("user_fn", user_fn), ("chain_fn (10 launches)", chain_fn)):
        fn(a, b)  # compile the kernel once for everyone
        vs = variants(fn)
        ref = fn(a, b)
        for f in vs.values():
            torch.testing.assert_close(f(a, b), ref)
        vs["raw CUDAGraph replay"] = raw_cuda_graph(fn, a, b)
        us = per_call_us(vs, (a, b))
        first = {"minidynamo": first_call_ms(lambda: minidynamo.optimize(fn), (a, b))}
        torch._dynamo.reset()
        first["compile eager"] = first_call_ms(lambda: torch.compile(fn, backend="eager"), (a, b))
        for vname, t in us.items():
            print(f"| {name} | {vname} | {t:.1f} | {t / us['eager']:.2f} | "
                  f"{first.get(vname, float('nan')):.1f} |")


@pytest.mark.parametrize("variant", ["eager", "minidynamo", "minidynamo cudagraphs", "compile eager",
                                     "compile inductor", "raw CUDAGraph replay"])
@pytest.mark.parametrize("fn", [user_fn, chain_fn], ids=["user_fn", "chain10"])
def test_triton_call(benchmark, fn, variant):
    a = torch.randn(N, device="cuda")
    b = torch.randn(N, device="cuda")
    fn(a, b)
    f = raw_cuda_graph(fn, a, b) if variant == "raw CUDAGraph replay" else variants(fn)[variant]
    f(a, b)

    def run():
        f(a, b)
        torch.cuda.synchronize()
    benchmark(run)


if __name__ == "__main__":
    table()
