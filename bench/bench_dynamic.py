"""Dynamic shapes on CPU: a small MLP fed 34 sequence lengths (7…40), as an inference
server or a packed training batch sees them, through minidynamo and through
``torch.compile(backend="eager")`` in the same run.

* **sweep**: one pass over the 34 lengths on a fresh cache: total seconds (tracing
  included, after one unmeasured sweep of each peer pays the process's one-time imports)
  and the graphs each made (a counting backend);
* **per call**: µs per call of the static entry (a size seen once, guards pinning it) and
  of the dynamic entry (symbolic sizes: the graph computes `x.size(0)` and the guards check
  a range), each on a warm cache; minimum over interleaved rounds.

* **inductor sweep**: the same 34 lengths through ``backend="inductor"`` for both
  (minidynamo's default policy against ``torch.compile(dynamic=None)``): total seconds
  including inductor's compiles, and the graphs compiled (AOTAutograd's count; inductor
  compiles through it). Each peer runs in its own process with an empty inductor cache
  directory (no FX-graph or C++ cache hit from the other peer or an earlier run), after an
  unmeasured compile of another function pays the one-time imports.

    python -m pytest bench/bench_dynamic.py --benchmark-only
    python bench/bench_dynamic.py --table
    python bench/bench_dynamic.py --inductor
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402

LENGTHS = list(range(7, 41))
DIM, HIDDEN = 32, 64


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(DIM, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, DIM)
        self.norm = torch.nn.LayerNorm(DIM)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _model():
    torch.manual_seed(0)
    return MLP().eval()


class _Count:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def _minidynamo(model, backend, dynamic=None):
    return minidynamo.optimize(model, backend=backend, dynamic=dynamic)


def _dynamo(model, backend, dynamic=None):
    torch._dynamo.reset()
    return torch.compile(model, backend=backend, dynamic=dynamic)


PEERS = {"minidynamo": _minidynamo, "torch.compile": _dynamo}


def sweep(peer: str) -> tuple[float, int, bool]:
    """(seconds for the 34 lengths on a fresh cache, graphs made, every result right)."""
    model = _model()
    count = _Count()
    minidynamo.reset()
    fn = PEERS[peer](model, count)
    inputs = [torch.randn(4, n, DIM) for n in LENGTHS]
    right = True
    with torch.no_grad():
        start = time.perf_counter()
        outs = [fn(x) for x in inputs]
        took = time.perf_counter() - start
        for x, out in zip(inputs, outs):
            right = right and torch.equal(out, model(x))
    return took, count.graphs, right


def _warm(peer: str, dynamic: bool):
    """A warm callable hitting a static entry (dynamic=False) or the dynamic one."""
    model = _model()
    fn = PEERS[peer](model, "eager", dynamic=None if dynamic else False)
    x = torch.randn(4, 9, DIM)
    with torch.no_grad():
        if dynamic:  # a second length makes the entry symbolic (automatic policy)
            fn(torch.randn(4, 8, DIM))
        fn(x)
        fn(x)
    return fn, x


def per_call_us(rounds: int = 7, calls: int = 2000) -> dict:
    fns = {(p, d): _warm(p, d) for p in PEERS for d in (False, True)}
    best = {k: float("inf") for k in fns}
    with torch.no_grad():
        for _ in range(rounds):
            for key, (fn, x) in fns.items():
                start = time.perf_counter()
                for _ in range(calls):
                    fn(x)
                best[key] = min(best[key], (time.perf_counter() - start) / calls * 1e6)
    return best


@pytest.mark.parametrize("peer", list(PEERS))
def test_sweep(benchmark, peer):
    took, graphs, right = benchmark.pedantic(sweep, args=(peer,), rounds=1, iterations=1)
    assert right
    benchmark.extra_info.update(graphs=graphs)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("peer", list(PEERS))
def test_per_call(benchmark, peer, dynamic):
    fn, x = _warm(peer, dynamic)
    with torch.no_grad():
        benchmark(fn, x)


def _aot_graphs() -> int:
    from torch._dynamo.utils import counters
    return counters["aot_autograd"]["total"]


def inductor_sweep(peer: str) -> dict:
    """In this process: the 34 lengths through `peer` with backend="inductor" on a fresh
    cache; seconds, graphs compiled, every result close to eager's."""
    warm = PEERS[peer](torch.nn.Tanh(), "inductor")  # imports and the C++ toolchain, unmeasured
    with torch.no_grad():
        warm(torch.randn(3, 5))
        model = _model()
        minidynamo.reset()
        fn = PEERS[peer](model, "inductor")
        inputs = [torch.randn(4, n, DIM) for n in LENGTHS]
        before = _aot_graphs()
        start = time.perf_counter()
        outs = [fn(x) for x in inputs]
        took = time.perf_counter() - start
        graphs = _aot_graphs() - before
        right = all(torch.allclose(out, model(x), rtol=1e-4, atol=1e-5) for x, out in zip(inputs, outs))
        again = float("inf")
        for _ in range(5):  # every length again, served by the entries made above: the best of 5
            start = time.perf_counter()
            for x in inputs:
                fn(x)
            again = min(again, time.perf_counter() - start)
    return {"seconds": took, "graphs": graphs, "right": right, "again_seconds": again,
            "graphs_after_again": _aot_graphs() - before}


def inductor_sweep_in_fresh_process(peer: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--inductor-peer", peer], env=env,
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("peer", list(PEERS))
def test_inductor_sweep(benchmark, peer):
    result = benchmark.pedantic(inductor_sweep_in_fresh_process, args=(peer,), rounds=1, iterations=1)
    assert result["right"]
    benchmark.extra_info.update(result)


def inductor_table() -> str:
    runs = {p: inductor_sweep_in_fresh_process(p) for p in PEERS}
    m, d = runs["minidynamo"], runs["torch.compile"]
    return "\n".join([
        "| backend=\"inductor\", 34 lengths | minidynamo | torch.compile | ratio |", "|---|---|---|---|",
        f"| first sweep (compiles included), s | {m['seconds']:.2f} | {d['seconds']:.2f} | "
        f"{m['seconds'] / d['seconds']:.2f} |",
        f"| graphs compiled | {m['graphs']} | {d['graphs']} | |",
        f"| later sweep (no compile, best of 5), ms | {m['again_seconds'] * 1e3:.1f} | {d['again_seconds'] * 1e3:.1f} | "
        f"{m['again_seconds'] / d['again_seconds']:.2f} |",
        f"| graphs after the later sweeps | {m['graphs_after_again']} | {d['graphs_after_again']} | |",
        f"| all results close to eager | {m['right']} | {d['right']} | |"])


def table() -> str:
    torch.set_num_threads(1)  # per-call times of tiny ops: intra-op threads only add noise
    lines = ["| | minidynamo | torch.compile (eager) | ratio |", "|---|---|---|---|"]
    for p in PEERS:  # one-time costs (sympy, the shape environment's imports) paid by neither run
        sweep(p)
    sweeps = {p: sweep(p) for p in PEERS}
    m, d = sweeps["minidynamo"], sweeps["torch.compile"]
    lines.append(f"| 34 lengths, total s | {m[0]:.3f} | {d[0]:.3f} | {m[0] / d[0]:.2f} |")
    lines.append(f"| graphs | {m[1]} | {d[1]} | |")
    lines.append(f"| all results equal eager | {m[2]} | {d[2]} | |")
    us = per_call_us()
    for dyn, label in ((False, "static entry"), (True, "dynamic entry")):
        a, b = us[("minidynamo", dyn)], us[("torch.compile", dyn)]
        lines.append(f"| µs/call, {label} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    ratio = us[("minidynamo", True)] / us[("minidynamo", False)]
    lines.append(f"| minidynamo dynamic / static per call | {ratio:.2f} | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--inductor-peer" in sys.argv:
        print(json.dumps(inductor_sweep(sys.argv[sys.argv.index("--inductor-peer") + 1])))
    elif "--inductor" in sys.argv:
        print(inductor_table())
    else:
        print(table())
