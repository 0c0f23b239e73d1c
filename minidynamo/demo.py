"""A tour of minidynamo: `python -m minidynamo.demo`.

Traces a small function, shows its graph and guards, changes a shape to trigger a
recompile (and prints why), breaks a graph around a `print` (and shows both graphs), and times
eager vs minidynamo vs torch.compile(backend="eager") on this machine.
"""
from __future__ import annotations

import inspect
import os
import sys
import time

import torch

import minidynamo


def heading(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)))


@minidynamo.optimize
def f(x, y, scale=2.0):
    a, b = x + y, x * y
    act = lambda t: torch.relu(t) * scale  # noqa: E731
    return act(a) - b.sum(dim=0), (a.shape[0], "ok")


def chatty(x):
    y = torch.relu(x) * 2
    print("  (chatty prints while it runs)")
    return y.sum() + 1


def add_mul(x, y):
    return (x + y) * 2


def warm_up() -> None:
    """The first trace of a process imports torch's fake-tensor machinery (which pulls in
    torch._dynamo): a one-time cost, paid here so the numbers below are per trace."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    t0 = time.perf_counter()
    FakeTensorMode()
    print(f"one-time import of torch's fake tensors: {time.perf_counter() - t0:.2f} s")


def trace_section() -> None:
    heading("1. The function")
    print(inspect.getsource(f.__wrapped__).rstrip())
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    out, meta = f(x, y)
    torch.testing.assert_close(out, f.__wrapped__(x, y)[0])
    entry = f.cache_entries()[0]
    print(f"\nfirst call traced and compiled in {entry.compile_time_ms:.1f} ms; returned {meta}")

    heading("2. Its graph (torch.fx)")
    print(entry.gm.code.strip())

    heading("3. Its guards")
    for g in entry.guard_exprs:
        print(" ", g)
    f(x, y)
    print(f"\nsecond call, same shapes: guards pass, no trace (hits: {entry.hit_count})")


def recompile_section() -> None:
    heading("4. A shape change: guard failure, recompile")
    f(torch.randn(16, 4), torch.randn(16, 4))
    print("reason:", f.guard_failures()[-1].reason)
    print(f"cache entries now: {len(f.cache_entries())}")


def break_section() -> None:
    heading("5. A graph break: what cannot be traced runs natively between two graphs")
    print(inspect.getsource(chatty).rstrip())
    opt = minidynamo.optimize(chatty)
    opt(torch.ones(3))
    entry = opt.cache_entries()[0]
    print(f"\nentry kind: {entry.kind}")
    print(f"breaks at: {entry.break_reason}")
    print("graph before the break:")
    print(entry.gm.code.strip())
    resumed = entry.resumes[0]
    print(f"then the print runs natively, then {resumed.__name__}, traced in its turn:")
    print(resumed.cache_entries()[0].gm.code.strip())
    opt(torch.ones(3))
    print("second call: both entries' guards pass, no new trace; it prints once per call")


def triton_section() -> None:
    """A hand-written Triton kernel captured into the graph, and a recompile on a constexpr."""
    heading("6. Triton kernels")
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's CPU interpreter
    try:
        import triton
        import triton.language as tl
    except Exception as e:  # noqa: BLE001 - no Triton here: nothing to show
        print(f"skipped: Triton is not available ({type(e).__name__}: {e})")
        return

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    def add_then_scale(x, y, block):
        out = torch.empty_like(x)
        n = out.numel()
        add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=block)
        return out * 2

    device = "cuda" if torch.cuda.is_available() else "cpu"
    mode = "compiled kernels" if device == "cuda" else "Triton's interpreter (no GPU here)"
    print(f"kernels run through {mode}")
    opt = minidynamo.optimize(add_then_scale)
    x, y = torch.randn(1000, device=device), torch.randn(1000, device=device)
    ok = torch.allclose(opt(x, y, 128), (x + y) * 2)
    entry = opt.cache_entries()[0]
    print(f"result matches eager: {ok}; one graph, the launch is one node:")
    print(entry.gm.code.strip())
    for record in entry.gm._minidynamo_kernels:
        print("launch:", record)
    print("launch program (after the first call):", entry.program_note)
    opt(x, y, 256)  # BLOCK is a constexpr: a new value is a new specialisation
    print("recompiled on a constexpr change:", opt.guard_failures()[-1].reason)


def _time_us(fn, args, calls: int = 2000, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def speed_section() -> None:
    heading("7. Speed: (x + y) * 2 on 8-element tensors, this machine")
    import torch._dynamo
    args = (torch.randn(8), torch.randn(8))
    rows = []
    for name in ("eager", "minidynamo", "torch.compile eager"):
        t0 = time.perf_counter()
        if name == "eager":
            fn = add_mul
        elif name == "minidynamo":
            fn = minidynamo.optimize(add_mul)
        else:
            torch._dynamo.reset()
            fn = torch.compile(add_mul, backend="eager")
        fn(*args)
        first_ms = (time.perf_counter() - t0) * 1e3
        rows.append((name, first_ms, _time_us(fn, args)))
    eager_us = rows[0][2]
    print(f"| {'':20s} | first call ms | µs/call | overhead µs |")
    print(f"|{'-' * 22}|--------------:|--------:|------------:|")
    for name, first_ms, us in rows:
        first = "-" if name == "eager" else f"{first_ms:.1f}"
        over = "-" if name == "eager" else f"{us - eager_us:.1f}"
        print(f"| {name:20s} | {first:>13s} | {us:7.1f} | {over:>11s} |")
    print("(first call: trace + compile + run; the numbers of docs/benchmarks.md "
          "come from bench/bench_core.py)")


def main() -> None:
    torch.manual_seed(0)
    print(f"minidynamo demo: Python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs")
    warm_up()
    trace_section()
    recompile_section()
    break_section()
    triton_section()
    speed_section()


if __name__ == "__main__":
    main()
