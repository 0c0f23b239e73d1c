"""Dynamic shapes on CPU: a small MLP fed 34 sequence lengths (7…40), as an inference
server or a packed training batch sees them, through minidynamo and through
``torch.compile(backend="eager")`` in the same run.

* **sweep**: one pass over the 34 lengths on a fresh cache: total seconds (tracing
  included, after one unmeasured sweep of each peer pays the process's one-time imports)
  and the graphs each made (a counting backend);
* **per call**: µs per call of the static entry (a size seen once, guards pinning it) and
  of the dynamic entry (symbolic sizes: the graph computes `x.size(0)` and the guards check
  a range), each on a warm cache; minimum over interleaved rounds.

    python -m pytest bench/bench_dynamic.py --benchmark-only
    python bench/bench_dynamic.py --table
"""
from __future__ import annotations

import os
import sys
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
    print(table())
