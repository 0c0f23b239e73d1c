"""Host cost per call of launches whose grid and sizes come with each call (launchers made
with ``grid_per_call=True``, launch programs of graphs where sizes are graph values)
against the pinned ones (grid and sizes fixed), for a small add kernel (1,024 float32
elements, so the host side dominates). GPU only.

    python bench/bench_launcher_dynamic.py [--compare-with path/to/other/launcher.py]
"""
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import launch_graphs as G  # noqa: E402

from minidynamo.triton.launcher import make_launcher  # noqa: E402

N, BLOCK = 1024, 1024
ROUNDS, CALLS = 7, 2000
ADD = ("x_ptr", "y_ptr", "out_ptr", "n")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def variants(before=None):
    """name -> one call; `before`: another launcher module (an earlier version) to compare."""
    x, y, o = (torch.randn(N, device="cuda") for _ in range(3))
    g = (triton.cdiv(N, BLOCK), 1, 1)
    pinned = make_launcher(add_kernel, g, {"n": N, "BLOCK": BLOCK}, ADD[:3])
    per_call = make_launcher(add_kernel, None, {"BLOCK": BLOCK}, ADD, grid_per_call=True)
    out = {
        "add_kernel[grid](...)": lambda: add_kernel[g](x, y, o, N, BLOCK=BLOCK),
        "launcher, pinned": lambda: pinned(x, y, o),
        "launcher, grid per call": lambda: per_call(g, x, y, o, N),
    }
    if before is not None:
        old = before.make_launcher(add_kernel, g, {"n": N, "BLOCK": BLOCK}, ADD[:3])
        out["launcher, pinned (compared version)"] = lambda: old(x, y, o)
    programs = {}
    for launches in (1, 5):
        for dynamic in (False, True):
            graph, _ = G.chain_graph(add_kernel, launches=launches, dynamic=dynamic, size=N, device="cuda",
                                     block=BLOCK)
            plain = G.plain_function(graph)
            plain(x, y)
            plain(x, y)
            program, text = G.program_function(graph)
            programs[(launches, dynamic)] = text
            name = f"program, {launches} launch(es), {'grid per call' if dynamic else 'pinned'}"
            out[name] = (lambda p: lambda: p(x, y))(program)
    for name, f in out.items():
        f()
        torch.cuda.synchronize()
    assert pinned.fast_path and per_call.fast_path, (pinned.describe(), per_call.describe())
    return out, programs


def time_variants(fs, rounds=ROUNDS, calls=CALLS):
    samples = {k: [] for k in fs}
    for _ in range(rounds):
        for name, f in fs.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return {k: statistics.median(v) for k, v in samples.items()}


def main():
    before = None
    if len(sys.argv) > 2 and sys.argv[1] == "--compare-with":  # a launcher.py of another version
        import importlib.util
        spec = importlib.util.spec_from_file_location("launcher_compared", sys.argv[2])
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
    fs, programs = variants(before)
    print(f"{torch.cuda.get_device_name()}, Python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"triton {triton.__version__}; {N} float32, median of {ROUNDS} x {CALLS} calls")
    us = time_variants(fs)
    for name, v in us.items():
        print(f"{name:44s} {v:8.2f} us")
    for launches in (1, 5):
        p, d = (us[f"program, {launches} launch(es), {m}"] for m in ("pinned", "grid per call"))
        print(f"program with {launches} launch(es): grid per call / pinned = {d / p:.2f}")
    print(f"launcher: grid per call / pinned = {us['launcher, grid per call'] / us['launcher, pinned']:.2f}")
    print(programs[(5, True)])


if __name__ == "__main__":
    main()
