"""Per-call cost of guards on whole models (CPU, one thread): torchvision and timm CNNs
captured in one graph, where the graph itself is the same op-by-op work for every
compiler, so what a call costs over eager is the entry's guards and dispatch.

minidynamo (eager backend) against ``torch.compile(model, backend="eager")`` and plain
eager, in the same run, at a small input (1x3x32x32) where Python overhead shows:

    python -m pytest bench/bench_guards.py --benchmark-only     # pytest-benchmark groups
    python bench/bench_guards.py --table                        # markdown table only

Needs torchvision (and timm for timm_resnet18; models missing are skipped). ms/call is the
minimum over interleaved rounds of warm calls; overhead = ms/call minus plain eager's.
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


def _torchvision(name):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(num_classes=10)
    return build


def _timm(name):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, num_classes=10)
    return build


MODELS = {
    "tv_mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "tv_resnet18": _torchvision("resnet18"),
    "tv_densenet121": _torchvision("densenet121"),
    "timm_resnet18": _timm("resnet18"),
}
PEERS = ("eager", "minidynamo", "torch.compile")


def build(name):
    try:
        model = MODELS[name]().eval()
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    return model, torch.randn(1, 3, 32, 32)


def runner(peer, model):
    if peer == "minidynamo":
        minidynamo.reset()
        return minidynamo.optimize(model)
    if peer == "torch.compile":
        torch._dynamo.reset()
        return torch.compile(model, backend="eager")
    return model


def guards_of(opt) -> int:
    """Guards of the model's one entry (minidynamo)."""
    return sum(len(e.guards) for e in opt.cache_entries())


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("name", list(MODELS))
def test_model_call(benchmark, name, peer):
    torch.set_num_threads(1)
    model, x = build(name)
    fn = runner(peer, model)
    with torch.no_grad():
        fn(x)
        fn(x)
        benchmark.group = name
        benchmark(fn, x)


def table(rounds: int = 5, calls: int = 50) -> str:
    torch.set_num_threads(1)
    lines = ["| model | guards | eager ms | minidynamo ms (over eager) | torch.compile ms (over eager) |",
             "|---|---:|---:|---:|---:|"]
    for name in MODELS:
        try:
            model = MODELS[name]().eval()
        except ImportError:
            continue
        x = torch.randn(1, 3, 32, 32)
        fns = {peer: runner(peer, model) for peer in PEERS}
        best = dict.fromkeys(PEERS, float("inf"))
        with torch.no_grad():
            for fn in fns.values():
                fn(x)
                fn(x)
            for _ in range(rounds):
                for peer, fn in fns.items():
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        fn(x)
                    best[peer] = min(best[peer], (time.perf_counter() - t0) / calls * 1e3)
        md = fns["minidynamo"]
        lines.append(f"| {name} | {guards_of(md)} | {best['eager']:.2f} | "
                     f"{best['minidynamo']:.2f} ({best['minidynamo'] - best['eager']:+.2f}) | "
                     f"{best['torch.compile']:.2f} ({best['torch.compile'] - best['eager']:+.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
