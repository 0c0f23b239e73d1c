"""A HuggingFace Llama patched with liger-kernel, one training step, under minidynamo and
torch.compile (GPU).

    python bench/llama_liger.py                          # H200/H100: bf16, 4 layers, hidden 1024
    python bench/llama_liger.py --no-liger --device cpu --dtype float32 --layers 2 --hidden 64

A step is forward (with labels, so the loss is computed by the model) and backward; the
parameters' gradients are set to None before each step (no optimizer: its step is the same
eager code for every tool and would only dilute the difference). For each tool, on a fresh
copy of the same weights and the same batch:

  eager            the model as it is;
  minidynamo       `minidynamo.optimize(model)` (eager backend: graphs run op by op, Triton
                   nodes through minidynamo's launcher);
  minidynamo-cg    `minidynamo.optimize(model, mode="cudagraphs")`: each graph's forward and
                   backward recorded as CUDA graphs and replayed (minidynamo/cudagraph_training.py);
  tc-eager         `torch.compile(model, backend="eager")`;
  tc-inductor      `torch.compile(model)`;
  tc-ro            `torch.compile(model, mode="reduce-overhead")` (Inductor + CUDA graph trees).

Reported per tool: the first call (tracing included), the median step over `--steps`
steps, its ratio to eager, the loss and the largest gradient difference from eager's first
step and from eager's on the last step (CUDA graphs replay from the third call of a
graph on: the last step is a replayed one), and for the compilers the graphs made, the graph breaks, and the Triton launches inside
the graphs (liger's kernels: in autograd.Function bodies, forward and backward).
`--json FILE` keeps everything.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.fx as fx

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_BENCH))
sys.path.insert(0, _BENCH)

TOOLS = ("eager", "minidynamo", "minidynamo-cg", "tc-eager", "tc-inductor", "tc-ro")


def build(args):
    from transformers import LlamaConfig, LlamaForCausalLM
    if not args.no_liger:
        from liger_kernel.transformers import apply_liger_kernel_to_llama
        apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True,
                                    cross_entropy=False, fused_linear_cross_entropy=True)
    config = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=max(args.hidden // 64, 1),
                         num_key_value_heads=max(args.hidden // 256, 1), vocab_size=args.vocab,
                         max_position_embeddings=max(args.seq, 128), attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device=args.device, dtype=getattr(torch, args.dtype))
    model.train()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(args.device)
    return model, {"input_ids": ids, "labels": ids.clone()}


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step(runner, model, batch):
    for p in model.parameters():
        p.grad = None
    loss = runner(**batch).loss
    loss.backward()
    return loss


def runner_for(tool, model):
    if tool.startswith("minidynamo"):
        import minidynamo
        minidynamo.reset()
        return minidynamo.optimize(model, mode="cudagraphs" if tool == "minidynamo-cg" else None)
    if tool.startswith("tc-"):
        import torch._dynamo
        torch._dynamo.reset()
        return torch.compile(model, backend="eager" if tool == "tc-eager" else "inductor")
    return model


# --- what was captured ---------------------------------------------------------------------

def _name(target) -> str:
    return getattr(target, "__name__", None) or str(target)


def is_launch(node) -> bool:
    name = _name(node.target)
    return node.op == "call_function" and (
        name.startswith("launch_")
        or name in ("triton_kernel_wrapper_mutation", "triton_kernel_wrapper_functional"))


def launches_in(gm) -> int:
    """Launch nodes in a graph and in every graph nested in it (autograd.Function bodies)."""
    return sum(is_launch(n) for _, m in gm.named_modules() if isinstance(m, fx.GraphModule)
               for n in m.graph.nodes)


def minidynamo_facts() -> dict:
    from minidynamo import api
    graphs = breaks = launches = ops = 0
    reasons = []
    for cache in list(api._all_caches):
        for e in cache.entries:
            if e.break_reason is not None:
                breaks += 1
                reasons.append(str(e.break_reason)[:300])
            if e.gm is not None:
                graphs += 1
                launches += launches_in(e.gm)
                ops += sum(n.op.startswith("call_") for n in e.gm.graph.nodes)
    try:
        from minidynamo import frame_hook
        plain = frame_hook.report()
    except Exception:  # noqa: BLE001 - the report is informative only
        plain = None
    return {"graphs": graphs, "breaks": breaks, "launches": launches, "ops": ops,
            "break_reasons": reasons, "plain_frames": str(plain)[:2000] if plain else None,
            "cudagraphs": cudagraph_facts()}


def cudagraph_facts() -> list:
    """Per graph under mode="cudagraphs": calls, replays, plain runs and why."""
    from minidynamo import api
    from minidynamo.cudagraphs import CudaGraphRunner
    facts = []
    for cache in list(api._all_caches):
        for e in cache.entries:
            r = getattr(e, "compiled", None)
            if isinstance(r, CudaGraphRunner):
                facts.append({"training": r.training, "calls": r.calls, "replays": r.replays,
                              "held_fallbacks": r.held_fallbacks, "fallback": r.fallback_reason,
                              "staged": list(r.staged), "recordings": len(r.recordings)
                              + len(r.copy_recordings)})
    return facts


def profile_steps(runner, model, batch, args) -> str:
    """Where the host time of 10 steps goes (cProfile: top functions by own time and by
    cumulative time)."""
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    sync(args.device)
    prof.enable()
    for _ in range(10):
        step(runner, model, batch)
    sync(args.device)
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(45)
    return text.getvalue()


class _TorchCompileCounter:
    """torch.compile's graphs, seen through a backend that wraps the real one."""

    def __init__(self, inner):
        self.inner, self.graphs = inner, []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.inner == "eager":
            return gm.forward
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)


def measure(tool, base, batch, args, reference):
    model = copy.deepcopy(base)
    counter = None
    if tool.startswith("tc-"):
        import torch._dynamo
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        counter = _TorchCompileCounter("eager" if tool == "tc-eager" else "inductor")
        runner = torch.compile(model, backend=counter) if tool != "tc-ro" else \
            torch.compile(model, mode="reduce-overhead")
    else:
        runner = runner_for(tool, model)
    out = {"tool": tool}
    sync(args.device)
    t0 = time.perf_counter()
    loss = step(runner, model, batch)
    sync(args.device)
    out["first_s"] = time.perf_counter() - t0
    first = (loss.detach().float().item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()
                                            if p.grad is not None})
    for _ in range(args.warmup):  # CUDA graphs: warm-up runs, then the recording
        step(runner, model, batch)
    times = []
    for _ in range(args.steps):
        sync(args.device)
        t0 = time.perf_counter()
        step(runner, model, batch)
        sync(args.device)
        times.append(time.perf_counter() - t0)
    out["step_ms"] = statistics.median(times) * 1e3
    out["steps_ms"] = [round(t * 1e3, 2) for t in times]
    out["step_ms_min"] = min(times) * 1e3
    out["loss"] = first[0]
    loss = step(runner, model, batch)  # the same batch and weights: eager's first step again
    last = (loss.detach().float().item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()
                                           if p.grad is not None})
    if reference is not None:
        out.update(compare(first, reference, args))
        out.update({k + "_last": v for k, v in compare(last, reference, args).items()})
    if tool.startswith("minidynamo"):
        out.update(minidynamo_facts())
        if args.profile:
            out["profile"] = profile_steps(runner, model, batch, args)
    elif counter is not None:
        from torch._dynamo.utils import counters
        out["graphs"] = len(counter.graphs)
        out["breaks"] = sum(counters["graph_break"].values())
        out["launches"] = sum(launches_in(g) for g in counter.graphs)
        out["ops"] = sum(sum(n.op.startswith("call_") for n in g.graph.nodes) for g in counter.graphs)
    return out, first


def compare(got, reference, args) -> dict:
    """Loss and gradients of one step against eager's."""
    ref_loss, ref_grads = reference
    out = {"loss_diff": abs(got[0] - ref_loss)}
    missing = sorted(set(ref_grads) ^ set(got[1]))
    diffs = {n: (got[1][n].float() - g.float()).abs().max().item()
             for n, g in ref_grads.items() if n in got[1]}
    worst = max(diffs, key=diffs.get) if diffs else None
    out["grad_max_diff"] = diffs[worst] if worst else None
    out["grad_worst"] = worst
    out["grads_missing"] = missing
    scale = max((g.float().abs().max().item() for g in ref_grads.values()), default=1.0)
    out["equal"] = (not missing and out["loss_diff"] <= args.tol * max(abs(ref_loss), 1)
                    and all(d <= args.tol * max(scale, 1e-6) for d in diffs.values()))
    out["bitwise"] = (not missing and out["loss_diff"] == 0 and all(d == 0 for d in diffs.values()))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    p.add_argument("--tol", type=float, default=2e-2, help="relative to the largest eager gradient")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--no-liger", action="store_true")
    p.add_argument("--json")
    p.add_argument("--profile", action="store_true", help="cProfile 10 minidynamo steps (in --json)")
    args = p.parse_args(argv)
    base, batch = build(args)
    results, reference = [], None
    machine = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"# Llama {args.layers} layers, hidden {args.hidden}, {args.dtype}, batch {args.batch}x{args.seq}, "
          f"liger {'off' if args.no_liger else 'on'}, {machine}, torch {torch.__version__}", flush=True)
    for tool in args.tools.split(","):
        try:
            res, first = measure(tool, base, batch, args, reference)
        except Exception as e:  # noqa: BLE001 - a crash is a result
            res = {"tool": tool, "crash": f"{type(e).__name__}: {e}"[:1000], "traceback": traceback.format_exc()[-3000:]}
            first = None
        if tool == "eager":
            reference = first
        results.append(res)
        print(json.dumps({k: v for k, v in res.items() if k not in (
            "traceback", "plain_frames", "profile", "break_reasons", "steps_ms")}), flush=True)
        if "traceback" in res:
            print(res["traceback"], flush=True)
    eager_ms = next((r.get("step_ms") for r in results if r["tool"] == "eager"), None)
    print(f"\n{'tool':12} {'first s':>8} {'step ms':>8} {'x eager':>8} {'graphs':>6} {'breaks':>6} "
          f"{'launches':>8} {'equal':>6} {'bitwise':>7} {'last eq':>7} {'last bw':>7}")
    for r in results:
        if "crash" in r:
            print(f"{r['tool']:12} crash: {r['crash'][:150]}")
            continue
        ratio = r["step_ms"] / eager_ms if eager_ms else float("nan")
        print(f"{r['tool']:12} {r['first_s']:8.2f} {r['step_ms']:8.2f} {ratio:8.2f} {r.get('graphs', '-'):>6} "
              f"{r.get('breaks', '-'):>6} {r.get('launches', '-'):>8} {str(r.get('equal', '-')):>6} "
              f"{str(r.get('bitwise', '-')):>7} {str(r.get('equal_last', '-')):>7} "
              f"{str(r.get('bitwise_last', '-')):>7}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": machine, "torch": torch.__version__,
                       "results": results}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
