"""Greedy decoding with a HuggingFace Llama's static KV cache, one token per call at batch 1,
under minidynamo and torch.compile (GPU): ms per token, in one run.

    python bench/decode.py                          # GPU: bf16, 4 layers, hidden 1024
    python bench/decode.py --device cpu --dtype float32 --layers 2 --hidden 64 --vocab 128 \\
        --max-len 64 --new-tokens 8 --tools eager minidynamo md-cudagraphs

The model is `LlamaForCausalLM` with random weights (nothing is downloaded), SDPA
attention, and a `StaticCache` of `--max-len` positions. A generation is a prefill of the
prompt (eager, the same for every tool) and `--new-tokens - 1` decode steps, each a forward
of the last token through the tool: `model(input_ids=tok, cache=cache, cache_position=pos)`
and the argmax of its logits. Tokens stay on the device during the loop (no host sync per
token, so the host may run ahead of the GPU as far as the tool lets it); the clock stops
after a final synchronize. Tools:

  eager            the model as it is;
  minidynamo       `minidynamo.optimize(model)`;
  md-cudagraphs    `minidynamo.optimize(model, mode="cudagraphs")`;
  md-inductor-cudagraphs  the same with `backend="inductor"` (Inductor's fused kernels,
                   minidynamo's capture and CUDA graphs);
  tc-reduce-overhead  `torch.compile(model, mode="reduce-overhead")`;
  tc-inductor      `torch.compile(model)`.

Each tool gets its own cache, reset in place between generations (its tensors keep their
addresses, as a serving loop's would). The first generation (tracing, compiling, CUDA-graph
recording) is timed apart; then `--reps` generations, of which the median ms/token is
reported, and the tokens of every generation are compared with eager's. `--sync` adds a
host read of each token (what `generate()` does for its stopping check) as a second
measurement. `--json FILE` keeps everything.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time
import traceback

import torch

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_BENCH))

TOOLS = ("eager", "minidynamo", "md-cudagraphs", "md-inductor-cudagraphs", "tc-reduce-overhead", "tc-inductor")


def build(args):
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache
    config = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=max(args.hidden // 64, 1),
                         num_key_value_heads=max(args.hidden // 256, 1), vocab_size=args.vocab,
                         max_position_embeddings=max(args.max_len, 128), attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device=args.device, dtype=getattr(torch, args.dtype)).eval()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, args.vocab, (1, args.prompt), generator=g).to(args.device)
    # transformers 5.2x calls the cache argument `cache` (`past_key_values` is deprecated).
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def new_cache():
        return StaticCache(config=config, max_cache_len=args.max_len)
    return model, prompt, cache_arg, new_cache


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def runner_for(tool, model):
    if tool == "eager":
        return model
    if tool.startswith("md-") or tool == "minidynamo":
        import minidynamo
        minidynamo.reset()
        return minidynamo.optimize(model, mode="cudagraphs" if tool.endswith("cudagraphs") else None,
                                   backend="inductor" if "inductor" in tool else "eager")
    import torch._dynamo
    torch._dynamo.reset()
    if tool == "tc-reduce-overhead":
        return torch.compile(model, mode="reduce-overhead")
    return torch.compile(model)


def generate(model, step, prompt, cache, cache_arg, new_tokens, host_sync):
    """Prefill (eager), then decode steps through `step`: (tokens, seconds of the decode
    steps, seconds the host took to issue them: less when the GPU is the bound)."""
    device = prompt.device
    n = prompt.shape[1]
    cache.reset()
    with torch.no_grad():
        logits = model(input_ids=prompt, cache_position=torch.arange(n, device=device),
                       use_cache=True, **{cache_arg: cache}).logits
        tok = logits[:, -1:].argmax(-1)
        toks = [tok]
        positions = [torch.tensor([p], device=device) for p in range(n, n + new_tokens - 1)]
        sync(str(device))
        t0 = time.perf_counter()
        for pos in positions:
            if host_sync:
                tok.item()
            logits = step(input_ids=tok, cache_position=pos, use_cache=True, **{cache_arg: cache}).logits
            tok = logits[:, -1:].argmax(-1)
            toks.append(tok)
        host = time.perf_counter() - t0
        sync(str(device))
        seconds = time.perf_counter() - t0
    return torch.cat(toks, 1)[0].tolist(), seconds, host


def describe_minidynamo(opt) -> dict:
    entries = opt.cache_entries()
    out = {"entries": [e.kind for e in entries], "guard_failures": len(opt.guard_failures())}
    runner = entries[0].compiled if entries else None
    if runner is not None and hasattr(runner, "replays"):
        out.update(replays=runner.replays, fallback_reason=runner.fallback_reason,
                   held_fallbacks=runner.held_fallbacks, staged=len(runner.staged),
                   recordings=len(runner.recordings), staged_recordings=len(runner.copy_recordings))
    if entries:
        out["guards"] = len(entries[0].guards)
    return out


def describe_torch_compile() -> dict:
    from torch._dynamo.utils import counters
    return {"unique_graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": sum(counters["graph_break"].values())}


def measure(tool, model, prompt, cache_arg, new_cache, args, want):
    steps = args.new_tokens - 1
    step = runner_for(tool, model)
    cache = new_cache()
    t0 = time.perf_counter()
    tokens, _, _ = generate(model, step, prompt, cache, cache_arg, args.new_tokens, False)
    first = time.perf_counter() - t0
    row = {"tool": tool, "first_generation_s": first, "tokens_equal": want is None or tokens == want}
    for host_sync in ([False, True] if args.sync else [False]):
        times, hosts = [], []
        for _ in range(args.reps):
            toks, sec, host = generate(model, step, prompt, cache, cache_arg, args.new_tokens, host_sync)
            row["tokens_equal"] = row["tokens_equal"] and (want is None or toks == want)
            times.append(sec * 1000 / steps)
            hosts.append(host * 1000 / steps)
        key = "sync_" if host_sync else ""
        row[key + "ms_per_token"] = statistics.median(times)
        row[key + "ms_per_token_min"] = min(times)
        if not host_sync:
            row["host_ms_per_token"] = statistics.median(hosts)
    row["tokens/s"] = 1000 / row["ms_per_token"]
    if tool == "minidynamo" or tool.startswith("md-"):
        row.update(describe_minidynamo(step))
    elif tool.startswith("tc-"):
        row.update(describe_torch_compile())
    return row, tokens


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sync", action="store_true", help="also measure with a host read of each token")
    p.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    p.add_argument("--json")
    args = p.parse_args(argv)

    model, prompt, cache_arg, new_cache = build(args)
    want, _, _ = generate(model, model, prompt, new_cache(), cache_arg, args.new_tokens, False)
    rows = []
    for tool in args.tools:
        try:
            row, _ = measure(tool, model, prompt, cache_arg, new_cache, args, want)
        except Exception as e:  # one tool failing must not lose the others' numbers
            traceback.print_exc()
            row = {"tool": tool, "error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    eager = next((r for r in rows if r["tool"] == "eager" and "ms_per_token" in r), None)
    ro = next((r for r in rows if r["tool"] == "tc-reduce-overhead" and "ms_per_token" in r), None)
    print()
    sync_col = " | sync ms/token" if args.sync else ""
    print(f"| tool | first generation s | ms/token | host ms/token | tokens/s | × eager tokens/s "
          f"| vs reduce-overhead{sync_col} | tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.sync else "") + "---|")
    for r in rows:
        if "ms_per_token" not in r:
            print(f"| {r['tool']} | {r['error']} |")
            continue
        speed = f"{eager['ms_per_token'] / r['ms_per_token']:.2f}" if eager else ""
        vs = f"{ro['ms_per_token'] / r['ms_per_token']:.2f}" if ro else ""
        extra = f" | {r['sync_ms_per_token']:.3f}" if args.sync else ""
        same = "identical" if r["tokens_equal"] else "DIFFER"
        print(f"| {r['tool']} | {r['first_generation_s']:.2f} | {r['ms_per_token']:.3f} | {r['host_ms_per_token']:.3f} | "
              f"{r['tokens/s']:.0f} | {speed} | {vs}{extra} | {same} |")
    meta = {"torch": torch.__version__, "python": sys.version.split()[0], "args": vars(args)}
    try:
        import transformers
        meta["transformers"] = transformers.__version__
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    if args.device.startswith("cuda"):
        meta["device"] = torch.cuda.get_device_name()
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
