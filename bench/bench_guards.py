"""Per-call cost of guards on whole models (CPU, one thread): torchvision and timm CNNs
and a 12-layer transformer captured in one graph, where the graph itself is the same
op-by-op work for every compiler, so what a call costs over eager is the entry's guards
and dispatch.

minidynamo (eager backend) against ``torch.compile(model, backend="eager")`` and plain
eager, in the same run, at a small input (1x3x32x32; 16 tokens) where Python overhead
shows. Beside them, each entry's guards: how many (all of them; the fast tier's checks
per call), and the time to check them alone (minidynamo: the entry's guard block as its
own function; torch.compile: its guard manager's `check` on the same frame):

    python -m pytest bench/bench_guards.py --benchmark-only     # pytest-benchmark groups
    python bench/bench_guards.py --table                        # markdown table only

Needs torchvision (timm for timm_resnet18, transformers for the BERT; models missing are
skipped). ms/call is the
minimum over interleaved rounds of warm calls; overhead = ms/call minus plain eager's.
"""
from __future__ import annotations

import inspect
import os
import sys
import time

import pytest
import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minidynamo  # noqa: E402
from minidynamo import codegen  # noqa: E402


def _image():
    return torch.randn(1, 3, 32, 32)


def _torchvision(name):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(num_classes=10), _image()
    return build


def _timm(name):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, num_classes=10), _image()
    return build


def _bert():
    """A 12-layer BERT encoder, small hidden size, random weights, 16 tokens."""
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=12, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128)
    return BertModel(config), torch.randint(0, 1000, (1, 16))


def _vit():
    """torchvision's VisionTransformer, 4 layers, 32x32 images in 8x8 patches."""
    from torchvision.models import VisionTransformer
    torch.manual_seed(0)
    return VisionTransformer(image_size=32, patch_size=8, num_layers=4, num_heads=2, hidden_dim=64,
                             mlp_dim=128, num_classes=10), _image()


def _timm_kw(name, **kw):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, num_classes=10, **kw), _image()
    return build


def _gpt2():
    """GPT-2, 6 layers, hidden 64, 16 tokens."""
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=1000, n_positions=128, n_embd=64, n_layer=6, n_head=2)
    return GPT2Model(config), torch.randint(0, 1000, (1, 16))


def _llama():
    """Llama, 4 layers, hidden 64, grouped-query attention, 16 tokens."""
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return LlamaModel(config), torch.randint(0, 1000, (1, 16))


# Models beyond the table's (`--extra`): other architectures, for a wider look.
EXTRA = {
    "tv_vgg11": _torchvision("vgg11"),
    "tv_efficientnet_b0": _torchvision("efficientnet_b0"),
    "tv_shufflenet_v2_x0_5": _torchvision("shufflenet_v2_x0_5"),
    "tv_squeezenet1_1": _torchvision("squeezenet1_1"),
    "tv_mnasnet0_5": _torchvision("mnasnet0_5"),
    "tv_regnet_y_400mf": _torchvision("regnet_y_400mf"),
    "tv_vit_4_layers": _vit,
    "timm_efficientnet_b0": _timm("efficientnet_b0"),
    "timm_convnext_atto": _timm("convnext_atto"),
    "timm_vit_tiny": _timm_kw("vit_tiny_patch16_224", img_size=32, patch_size=8),
    "hf_gpt2_6_layers": _gpt2,
    "hf_llama_4_layers": _llama,
}

MODELS = {
    "tv_mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "tv_resnet18": _torchvision("resnet18"),
    "tv_densenet121": _torchvision("densenet121"),
    "timm_resnet18": _timm("resnet18"),
    "hf_bert_12_layers": _bert,
}
PEERS = ("eager", "minidynamo", "torch.compile")


def build(name):
    try:
        model, x = MODELS[name]()
    except ImportError as e:
        pytest.skip(f"{name}: {e}")
    return model.eval(), x


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


def checks_per_call(opt) -> int:
    """The checks the entry's fast tier runs in Python per call (those a snapshot of the
    module tree does not imply); all guards where it has no fast tier."""
    entry, = opt.cache_entries()
    lines = _guard_lines(entry)
    fast = next((i for i, line in enumerate(lines) if ".fresh(" in line), None)
    if fast is None:
        return len(entry.guards)
    branch = lines[fast + 2:next(i for i in range(fast, len(lines)) if lines[i].strip() == "else:")]  # after the values are bound
    return sum(1 for line in branch if line.strip().startswith("(") or " = ((" in line)


def _guard_lines(entry) -> list[str]:
    """The entry function's guard block: its lines after the signature, up to the check
    of its result."""
    lines = entry.source_text.splitlines()[1:]
    ok = entry.ns.prefix + "ok"
    return lines[:lines.index(f"    if not {ok}:")] + [f"    return {ok}"]


def guard_function(opt):
    """The entry's guards alone, as a function of the call's arguments: both tiers, as
    the entry runs them."""
    entry, = opt.cache_entries()
    fn, _ = codegen.build_function("guards", entry.params, _guard_lines(entry), entry.ns, "<guards>")
    return fn


def compile_guard_function(model, x):
    """torch.compile's guards of the model's forward frame, checked alone."""
    entries = torch._dynamo.eval_frame._debug_get_cache_entry_list(type(model).forward.__code__)
    if len(entries) != 1:
        return None
    forward = type(model).forward
    bound = inspect.signature(forward, follow_wrapped=False).bind(model, x)
    bound.apply_defaults()
    frame = dict(bound.arguments)  # the frame's locals, its closure cells' contents among them
    frame.update(zip(forward.__code__.co_freevars, (c.cell_contents for c in forward.__closure__ or ())))
    manager = entries[0].guard_manager
    return lambda: manager.check(frame)


# The clock calls are timed by: wall time, or with `--cpu-time` the process's CPU time (one
# thread: the same where the cores are free; on shared cores it leaves out the time other
# processes held the core, the larger part of the noise).
clock = time.perf_counter


def time_min(fn, rounds, calls) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - t0) / calls * 1e3)
    return best


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


def table(rounds: int = 7, calls: int = 50, names=None, stream: bool = False) -> str:
    torch.set_num_threads(1)
    lines = ["| model | eager ms | minidynamo ms (over eager) | torch.compile ms (over eager) | guards "
             "(checks per call) | guard check ms | torch.compile's guard check ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    if stream:
        print("\n".join(lines), flush=True)
    for name in names or MODELS:
        try:
            line = row(name, rounds, calls)
        except ImportError:
            continue
        except Exception as e:  # a model the run could not measure: say why, go on
            line = f"| {name} | failed: {type(e).__name__}: {str(e)[:120]} |"
        if line is not None:
            lines.append(line)
            if stream:
                print(line, flush=True)
    return "\n".join(lines)


def row(name: str, rounds: int, calls: int) -> str:
    model, x = {**MODELS, **EXTRA}[name]()
    model.eval()
    fns = {peer: runner(peer, model) for peer in PEERS}
    best = dict.fromkeys(PEERS, float("inf"))
    with torch.no_grad():
        for fn in fns.values():
            fn(x)
            fn(x)
        md = fns["minidynamo"]
        one_entry = len(md.cache_entries()) == 1
        md_guards = guard_function(md) if one_entry else None
        tc_guards = compile_guard_function(model, x)
        if md_guards is not None:
            assert md_guards(x) is True
        if tc_guards is not None and tc_guards() is not True:  # not its frame: not measured
            tc_guards = None
        checks = {"minidynamo": md_guards and (lambda: md_guards(x)), "torch.compile": tc_guards}
        check_ms = dict.fromkeys(checks, float("inf"))
        for _ in range(rounds):  # interleaved: the machine's noise hits every peer alike
            for peer, fn in fns.items():
                t0 = clock()
                for _ in range(calls):
                    fn(x)
                best[peer] = min(best[peer], (clock() - t0) / calls * 1e3)
            for peer, check in checks.items():
                if check is not None:
                    check_ms[peer] = min(check_ms[peer], time_min(check, 1, calls))
    guards = f"{guards_of(md):,} ({checks_per_call(md)})" if one_entry else f"{len(md.cache_entries())} entries"
    return (f"| {name} | {best['eager']:.2f} | "
            f"{best['minidynamo']:.2f} ({best['minidynamo'] - best['eager']:+.2f}) | "
            f"{best['torch.compile']:.2f} ({best['torch.compile'] - best['eager']:+.2f}) | "
            f"{guards} | " + (f"{check_ms['minidynamo']:.3f} | " if md_guards else "n/a | ")
            + (f"{check_ms['torch.compile']:.3f} |" if tc_guards else "n/a |"))


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="Per-call overhead of guards on whole models.")
    parser.add_argument("--table", action="store_true", help="print the markdown table (the default)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--calls", type=int, default=50, help="calls per round (default 50)")
    parser.add_argument("--extra", action="store_true", help="the other models too (EXTRA)")
    parser.add_argument("--models", nargs="*", help="only these models (names of MODELS or EXTRA)")
    parser.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time, not wall time")
    args = parser.parse_args()
    if args.cpu_time:
        clock = time.process_time
    chosen = args.models or list(MODELS) + (list(EXTRA) if args.extra else [])
    table(args.rounds, args.calls, chosen, stream=True)
