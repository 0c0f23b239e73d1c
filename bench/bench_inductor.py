"""A user Triton kernel between torch ops, through inductor: minidynamo with
backend="inductor" against torch.compile (inductor), GPU, one run.

    rms_norm(x) -> scale kernel (user Triton) -> gelu

Reports first-call time (trace + compile + run) and per-call host time (the time to
issue a call, averaged over batches of calls, best batch), with results checked against
eager. Each path runs in a fresh process with inductor's caches off, so no path profits
from another's imports, compiled kernels or cached graphs.

    python bench/bench_inductor.py            # table (one process per path)
    python bench/bench_inductor.py --only "minidynamo inductor"
"""
from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


PATHS = ("eager", "torch.compile inductor", "minidynamo inductor", "minidynamo eager")


def block(x, w):
    h = torch.nn.functional.rms_norm(x, (x.shape[-1],), w)
    out = torch.empty_like(h)
    n = h.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](h, out, n, 2.0, BLOCK=1024)
    return torch.nn.functional.gelu(out)


def _first_call(make, x, w):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn = make()
    out = fn(x, w)
    torch.cuda.synchronize()
    return fn, out, (time.perf_counter() - t0) * 1e3


def _per_call_us(fn, x, w, n=2000):
    for _ in range(50):
        fn(x, w)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x, w)
        host = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        best = min(best, host)
    return best


def main():
    if "--only" not in sys.argv:
        import subprocess
        env = dict(os.environ, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
              f"Python {sys.version.split()[0]}; x (8, 512) float32, a fresh process per path, caches off")
        print("| path | first call ms | host µs/call |")
        print("|---|---:|---:|")
        import tempfile
        for name in PATHS:
            env["TRITON_CACHE_DIR"] = tempfile.mkdtemp()  # every path compiles its kernels itself
            out = subprocess.run([sys.executable, __file__, "--only", name], env=env, capture_output=True,
                                 text=True, check=True).stdout
            print(out.strip().splitlines()[-1])
        return
    only = sys.argv[sys.argv.index("--only") + 1]
    x = torch.randn(8, 512, device="cuda")
    w = torch.randn(512, device="cuda")
    expected = block(x, w)
    rows = []
    makers = {
        "eager": lambda: block,
        "minidynamo inductor": lambda: minidynamo.optimize(block, backend="inductor"),
        "torch.compile inductor": lambda: torch.compile(block, backend="inductor"),
        "minidynamo eager": lambda: minidynamo.optimize(block),
    }
    fn, out, first = _first_call(makers[only], x, w)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    rows.append((only, first, _per_call_us(fn, x, w)))
    for name, first, us in rows:
        print(f"| {name} | {first:.1f} | {us:.1f} |")


if __name__ == "__main__":
    main()
