"""minidynamo on flash-linear-attention (`fla-core`): forward and backward against eager (GPU).

Each case calls one fla op at a small size: a public op (most of fla's chunked attention
entry points are `torch.compiler.disable`d, so they run eagerly under any tracer), the
`autograd.Function` behind it called directly (what a tracer sees once past that
wrapper), or one of fla's nn.Modules (norms, short convolution, cross-entropy). The
measurement is bench/liger_capture.py's (`run_case`: eager twice, minidynamo twice on
fresh copies with the cache hit checked, torch.compile(backend="eager") and
torch._dynamo.explain); this script adds `minidynamo.explain` of the same call (graphs,
graph breaks and their reasons) and fla's own switches:

  FLA_DISABLE_BACKEND_DISPATCH=1  fla's kernel helpers (chunk_fwd_h, layer_norm_fwd, ...)
                                  are wrapped by a backend dispatcher that is itself
                                  `torch.compiler.disable`d; with this set, fla imports
                                  them unwrapped. Read at import: one mode per process.
  --full-autotune                 by default every Triton autotuner takes its first config
                                  without benchmarking (one compile per kernel instead of
                                  8-30): what is captured does not depend on the config
                                  (the graph holds one grid per config), and both sides
                                  run the same config, so results still compare.

    python bench/fla_capture.py                        # table + summary; JSON to $OUT/fla.json
    FLA_DISABLE_BACKEND_DISPATCH=1 python bench/fla_capture.py --json $OUT/fla_nodispatch.json
    python bench/fla_capture.py --compare $OUT/fla.json $OUT/fla_nodispatch.json

Statuses are liger_capture's: captured / captured_breaks / partial / fallback / error /
wrong / invalid. Importable: `CASES`, `load_fla()`, `run_fla_case(case, dynamo=True)`;
importing needs neither a GPU nor fla.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
import warnings

import torch
import torch.nn.functional as F

_BENCH = os.path.dirname(os.path.abspath(__file__))
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

import liger_capture as lc  # noqa: E402 - the measurement machinery

import minidynamo  # noqa: E402

BF16, FP32 = torch.bfloat16, torch.float32
DISPATCH = "off" if os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") == "1" else "on"

# fla's modules, bound by load_fla(): the cases read them as module globals.
simple_gla = gla = fused_recurrent = retention = delta_rule = gated_delta_rule = None
linear_attn = layernorm = fused_norm_gate = l2norm = activations = None
FLA_MODULES = None  # fla.modules
FLA_ERROR = None


def load_fla() -> str | None:
    """Import fla (once); None when it is there, else why not."""
    global simple_gla, gla, fused_recurrent, retention, delta_rule, gated_delta_rule
    global linear_attn, layernorm, fused_norm_gate, l2norm, activations, FLA_MODULES, FLA_ERROR
    if FLA_MODULES is None and FLA_ERROR is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import fla.modules
                import fla.modules.activations.ops as activations_ops
                import fla.modules.norm.fused_norm_gate as fused_norm_gate_mod
                import fla.modules.norm.l2norm as l2norm_mod
                import fla.modules.norm.layernorm as layernorm_mod
                import fla.ops.delta_rule.chunk as delta_rule_mod
                import fla.ops.gated_delta_rule.chunk as gated_delta_rule_mod
                import fla.ops.gla.chunk as gla_mod
                import fla.ops.gla.fused_recurrent as fused_recurrent_mod
                import fla.ops.linear_attn.chunk as linear_attn_mod
                import fla.ops.retention.chunk as retention_mod
                import fla.ops.simple_gla.chunk as simple_gla_mod
        except Exception as e:  # noqa: BLE001 - any import failure means: no fla here
            FLA_ERROR = f"{type(e).__name__}: {e}"
            return FLA_ERROR
        simple_gla, gla, fused_recurrent = simple_gla_mod, gla_mod, fused_recurrent_mod
        retention, delta_rule, gated_delta_rule = retention_mod, delta_rule_mod, gated_delta_rule_mod
        linear_attn, layernorm, fused_norm_gate = linear_attn_mod, layernorm_mod, fused_norm_gate_mod
        l2norm, activations, FLA_MODULES = l2norm_mod, activations_ops, fla.modules
    return FLA_ERROR


def first_config_autotune():
    """Every Triton autotuner takes its first config without benchmarking: with equal
    timings the tuner keeps the first, and a config never benchmarked is never compiled."""
    from triton.runtime import autotuner

    def bench(kernel_call, quantiles=None, **_):
        return [1.0, 1.0, 1.0] if quantiles else 1.0

    # a data descriptor wins over an instance attribute, and ignores one __init__ may set
    autotuner.Autotuner.do_bench = property(lambda self: bench, lambda self, value: None)


# --- cases ------------------------------------------------------------------------------
CASES: list[lc.Case] = []
B, T, H, K, V = 2, 128, 2, 64, 64  # two chunks of 64 per sequence
SCALE = K ** -0.5


def add(name, fn, build, expect="fallback", note=""):
    """A case; `fn` (a lambda calling one op) is renamed after it. `expect` as in
    liger_capture (capture / partial / fallback / xfail), or a pair (with fla's backend
    dispatch on, with it off) where the two modes differ."""
    if isinstance(expect, tuple):
        expect = expect[0] if DISPATCH == "on" else expect[1]
    assert expect in lc.EXPECTATIONS, expect
    assert name.isidentifier() and all(c.name != name for c in CASES), name
    fn.__name__ = fn.__qualname__ = name
    CASES.append(lc.Case(name, fn, build, expect, note, liger=False))


def leaf(t, grad=True):
    return t.detach().requires_grad_(grad)


def qkv(g, grad=True):
    return tuple(g.randn(B, T, H, d, dtype=BF16, grad=grad) for d in (K, K, V))


def log_gate(g, *shape, grad=True):
    """A forget gate in log space (fp32, as fla's tests make them)."""
    return leaf(F.logsigmoid(g.randn(*shape, grad=False)), grad)


def delta_inputs(g, grad=True):
    """Unit-norm queries and keys (the delta rule's recurrence is stable with them),
    values and a sigmoid beta."""
    q, k = (leaf(F.normalize(g.randn(B, T, H, K, grad=False), dim=-1).to(BF16), grad) for _ in range(2))
    return q, k, g.randn(B, T, H, V, dtype=BF16, grad=grad), leaf(g.randn(B, T, H, grad=False).sigmoid().to(BF16), grad)


DISABLED = "the public op is torch.compiler.disable'd: it runs eagerly under any tracer"
# fla raises in the backward of gated chunk ops (chunk_bwd_dqkwg with g) on Hopper with
# Triton >= 3.4, < 3.7.1 (fla #640): those cases run the forward only (no input requires grad).
FWD_ONLY = "forward only (fla refuses the gated backward on Hopper with Triton < 3.7.1)"
# With fla's backend dispatch on, every kernel helper is torch.compiler.disable'd, and
# the break it makes falls inside @input_guard's `with torch.cuda.device(i)`: the
# Function runs eagerly. With it off, chunk kernels under @triton.heuristics over fla's
# own Autotuner subclass make minidynamo raise an internal error.
AUTOTUNER_SUBCLASS = "xfail off: Heuristics over fla's CachedAutotuner: internal error in analyze_mutations"

# Chunked linear attention: the public ops, and their autograd.Functions called directly.
add("simple_gla", lambda q, k, v, g: simple_gla.chunk_simple_gla(q, k, v, g),
    lambda g: qkv(g, False) + (log_gate(g, B, T, H, grad=False),), note=f"{DISABLED}; {FWD_ONLY}")
add("simple_gla_fn",
    lambda q, k, v, gamma: simple_gla.ChunkSimpleGLAFunction.apply(q, k, v, None, gamma, SCALE, None, False,
                                                                   False, None, None),
    lambda g: qkv(g) + (leaf(-torch.rand(H, device=lc.DEVICE) - 0.05, False),), expect=("fallback", "xfail"),
    note=f"ChunkSimpleGLAFunction.apply, head-wise constant decay g_gamma (ungated); {AUTOTUNER_SUBCLASS}")
add("simple_gla_gated_fn",
    lambda q, k, v, g: simple_gla.ChunkSimpleGLAFunction.apply(q, k, v, g, None, SCALE, None, False, False,
                                                               None, None),
    lambda g: qkv(g, False) + (log_gate(g, B, T, H, grad=False),), expect=("fallback", "xfail"),
    note=f"ChunkSimpleGLAFunction.apply with g; {FWD_ONLY}; {AUTOTUNER_SUBCLASS}")
add("retention", lambda q, k, v: retention.chunk_retention(q, k, v), qkv, note=DISABLED)
add("linear_attn", lambda q, k, v: linear_attn.chunk_linear_attn(q, k, v, normalize=True), qkv, note=DISABLED)
add("gla", lambda q, k, v, g: gla.chunk_gla(q, k, v, g), lambda g: qkv(g) + (log_gate(g, B, T, H, K),),
    note=DISABLED)
add("gla_fn",
    lambda q, k, v, g: gla.ChunkGLAFunction.apply(q, k, v, g, SCALE, None, False, False, None, None),
    lambda g: qkv(g) + (log_gate(g, B, T, H, K),), expect=("fallback", "xfail"),
    note=f"ChunkGLAFunction.apply; {AUTOTUNER_SUBCLASS}")
add("fused_recurrent_gla", lambda q, k, v, g: fused_recurrent.fused_recurrent_gla(q, k, v, gk=g),
    lambda g: qkv(g) + (log_gate(g, B, T, H, K),), expect="capture",
    note="not disabled, no @input_guard: a plain function over FusedRecurrentFunction")
add("delta_rule", lambda q, k, v, b: delta_rule.chunk_delta_rule(q, k, v, b), delta_inputs, note=DISABLED)
add("delta_rule_fn",
    lambda q, k, v, b: delta_rule.ChunkDeltaRuleFunction.apply(q, k, v, b, SCALE, None, False, False, None,
                                                                None, 64),
    delta_inputs, expect=("fallback", "xfail"), note=f"ChunkDeltaRuleFunction.apply; {AUTOTUNER_SUBCLASS}")
add("gated_delta_rule", lambda q, k, v, gate, b: gated_delta_rule.chunk_gated_delta_rule(q, k, v, gate, b),
    lambda g: delta_inputs(g, False)[:3] + (log_gate(g, B, T, H, grad=False), delta_inputs(g, False)[3]),
    note=f"{DISABLED} (and dispatched); {FWD_ONLY}")
add("gated_delta_rule_fn",
    lambda q, k, v, gate, b: gated_delta_rule.ChunkGatedDeltaRuleFunction.apply(
        q, k, v, gate, b, SCALE, None, False, False, None, None, None, False, False, None, None, False, False,
        None, 64),
    lambda g: delta_inputs(g, False)[:3] + (log_gate(g, B, T, H, grad=False), delta_inputs(g, False)[3]),
    expect=("fallback", "xfail"), note=f"ChunkGatedDeltaRuleFunction.apply; {FWD_ONLY}; {AUTOTUNER_SUBCLASS}")

# Modules and functional ops: not disabled, but their kernel helpers are dispatched (so,
# with the dispatch on, torch.compiler.disable'd inside @input_guard's device context).
D = 256
ON_OFF = ("fallback", "capture")


def x3(g, dtype=BF16, last=D):
    return g.randn(4, 64, last, dtype=dtype)


def rms(g, dtype=BF16):
    return g.module(FLA_MODULES.RMSNorm(D, eps=1e-6), dtype)


add("rms_norm", lambda m, x: m(x), lambda g: (rms(g), x3(g)), expect=ON_OFF, note="fla.modules.RMSNorm")
add("rms_norm_fp32", lambda m, x: m(x), lambda g: (rms(g, FP32), x3(g, FP32)), expect=ON_OFF)
add("rms_norm_prenorm", lambda m, x, r: m(x, residual=r, prenorm=True), lambda g: (rms(g), x3(g), x3(g)),
    expect=ON_OFF, note="residual in, (normalized, residual sum) out")
add("layer_norm", lambda m, x: m(x),
    lambda g: (g.module(FLA_MODULES.LayerNorm(D, eps=1e-6), BF16), x3(g)), expect=ON_OFF,
    note="fla.modules.LayerNorm")
add("rms_norm_gated", lambda m, x, o: m(x, o),
    lambda g: (g.module(FLA_MODULES.FusedRMSNormGated(D, eps=1e-6), BF16), x3(g), x3(g)), expect=ON_OFF,
    note="fla.modules.FusedRMSNormGated (swish gate)")
add("l2norm", lambda x: l2norm.l2norm(x), lambda g: (x3(g),),
    note="fla.modules.l2norm.l2norm; off: its kernels' CachedAutotuner is not taken for a kernel")
add("swiglu", lambda x, y: activations.swiglu(x, y), lambda g: (x3(g, last=512), x3(g, last=512)),
    expect=ON_OFF, note="fla.modules.activations.swiglu (SwiGLUFunction.apply)")
add("short_conv", lambda m, x: m(x),
    lambda g: (g.module(FLA_MODULES.ShortConvolution(D, 4, activation="silu", backend="triton"), BF16), x3(g)),
    note="fla.modules.ShortConvolution (triton backend): einops, a generic annotation on a grid function")
add("cross_entropy", lambda m, logits, target: m(logits, target),
    lambda g: (FLA_MODULES.FusedCrossEntropyLoss(), g.randn(256, 4096), g.targets(256, 4096)),
    expect=ON_OFF, note="fla.modules.FusedCrossEntropyLoss")


# --- one case ---------------------------------------------------------------------------
def explain_facts(case) -> dict:
    """minidynamo.explain of one call on fresh inputs: graphs, breaks and their reasons.
    A call that breaks runs for real (as torch._dynamo.explain does)."""
    out = {"kind": None, "graph_count": None, "graph_break_count": None, "reasons": [], "launches": 0}
    try:
        args, kwargs = case.make_inputs()
        e = minidynamo.explain(case.fn)(*args, **kwargs)
        out.update(kind=e.kind, graph_count=e.graph_count, graph_break_count=e.graph_break_count,
                   launches=len(e.launches), raised=e.raised,
                   reasons=[(f"{'break' if r.graph_break else 'eager'} [{r.category}] {r.detail}"
                             + (f" ({r.where})" if r.where else "")
                             + (f"; no break: {r.no_break}" if r.no_break else ""))[:500]
                            for r in e.break_reasons])
    except Exception as e:  # noqa: BLE001 - recorded, never fatal
        out["error"] = lc._short(e, 600)
    return out


def run_fla_case(case, dynamo: bool = True) -> dict:
    """liger_capture.run_case (eager, minidynamo, torch.compile) plus minidynamo.explain."""
    error = load_fla()
    if error is not None:
        return {"name": case.name, "status": "invalid", "detail": f"fla is not importable: {error}"}
    res = lc.run_case(case, dynamo=dynamo)
    if res["status"] != "invalid":
        lc._reset()
        res["explain"] = explain_facts(case)
        lc._reset()
    res["dispatch"] = DISPATCH
    return res


# --- the report -------------------------------------------------------------------------
def _dynamo_cell(r) -> str:
    d = r.get("dynamo") or {}
    if not d:
        return "-"
    if d.get("skipped"):
        return "skipped"
    cell = f"{d['graph_count']}/{d['graph_break_count']}" if d.get("graph_count") is not None else "explain failed"
    return cell + ("" if d.get("run") in (None, "ok") else " " + lc._cut(d["run"], 14))


def _explain_cell(r) -> str:
    e = r.get("explain") or {}
    if e.get("error"):
        return "error"
    if e.get("graph_count") is None:
        return "-"
    return f"{e['graph_count']}/{e['graph_break_count']}"


def _reason(r) -> str:
    if r["status"] in ("error", "wrong", "invalid"):
        return r.get("detail") or ""
    reasons = (r.get("explain") or {}).get("reasons") or []
    if r["status"] == "fallback" and r.get("reason_detail"):
        return f"[{r.get('reason_category')}] {r['reason_detail']}"
    return r.get("reason") or (reasons[0] if reasons else "")


HEADER = (f"{'case':<22} {'status':<15} {'entry':<8} {'fn':>2} {'fwdL':>4} {'bwdL':>4} {'md g/b':<7} "
          f"{'dyn g/b':<10} {'s':>5}  reason")


def format_row(r: dict) -> str:
    return (f"{r['name']:<22} {r['status'] or '?':<15} {str(r.get('entry_kind')):<8} {r.get('fn_nodes', 0):>2} "
            f"{r.get('fwd_launches', 0):>4} {r.get('bwd_launches', 0):>4} {_explain_cell(r):<7} "
            f"{_dynamo_cell(r):<10} {r.get('time_s', 0):>5.1f}  {lc._cut(_reason(r), 110)}")


def dynamo_single_graph(results) -> int:
    return sum((r.get("dynamo") or {}).get("graph_count") == 1
               and (r.get("dynamo") or {}).get("graph_break_count") == 0 for r in results)


def compare_table(paths: list) -> str:
    """One line per case: each JSON file's status (and torch.compile graphs/breaks)."""
    runs = []
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        runs.append((data.get("dispatch", os.path.basename(p)), {r["name"]: r for r in data["results"]}))
    names = list(runs[0][1])
    lines = [f"{'case':<22} " + " ".join(f"{'dispatch ' + m:<28}" for m, _ in runs)]
    for n in names:
        cells = []
        for _, rs in runs:
            r = rs.get(n)
            cells.append(f"{'-':<28}" if r is None else f"{r['status'] + ' md ' + _explain_cell(r) + ' dyn ' + _dynamo_cell(r):<28}")
        lines.append(f"{n:<22} " + " ".join(cells))
    for m, rs in runs:
        res = list(rs.values())
        cap = sum(r["status"] == "captured" for r in res)
        brk = sum(r["status"] == "captured_breaks" for r in res)
        lines.append(f"dispatch {m}: minidynamo captured {cap} (+{brk} around breaks) of {len(res)}; "
                     f"torch.compile single graph {dynamo_single_graph(res)} of {len(res)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=os.path.join(os.environ["OUT"], "fla.json") if os.environ.get("OUT") else None,
                   help="where to write all results as JSON (default: $OUT/fla.json when OUT is set)")
    p.add_argument("--cases", default=None, help="regular expression: run only the cases it matches")
    p.add_argument("--no-dynamo", action="store_true", help="skip the torch.compile comparison")
    p.add_argument("--full-autotune", action="store_true", help="let Triton's autotuners benchmark every config")
    p.add_argument("--dynamo-budget", type=float, default=300.0,
                   help="seconds after which the torch.compile comparison is skipped (default 300)")
    p.add_argument("--compare", nargs="+", metavar="JSON", help="print a side-by-side table of result files")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    opts = p.parse_args(argv)
    if opts.compare:
        print(compare_table(opts.compare))
        return 0
    cases = [c for c in CASES if opts.cases is None or re.search(opts.cases, c.name)]
    if opts.list:
        for c in cases:
            print(f"{c.name:<22} expect={c.expect:<8} {c.note}")
        return 0
    if load_fla() is not None:
        print(f"fla is not importable: {FLA_ERROR}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU", file=sys.stderr)
        return 2
    lc.DEVICE = "cuda"
    if not opts.full_autotune:
        first_config_autotune()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    print(f"fla backend dispatch {DISPATCH}; autotune {'full' if opts.full_autotune else 'first config'}")
    print(HEADER, flush=True)
    start = time.perf_counter()
    results = []
    for case in cases:
        dynamo = not opts.no_dynamo and time.perf_counter() - start < opts.dynamo_budget
        r = run_fla_case(case, dynamo=dynamo)
        if not opts.no_dynamo and not dynamo:
            r["dynamo"] = {"skipped": f"past --dynamo-budget {opts.dynamo_budget:.0f} s"}
        results.append(r)
        print(format_row(r), flush=True)
        if opts.json:  # written after every case: a run cut short still leaves its results
            _write(opts.json, results, time.perf_counter() - start)
    line = lc.summary(results) + f"; torch.compile single graph {dynamo_single_graph(results)} of {len(results)}"
    print(line)
    for r in results:
        why = lc.expectation_failure(r)
        if why is not None:
            print(f"  unmet: {r['name']} (expect={r['expect']}): {lc._cut(why, 150)}")
    print(f"total {time.perf_counter() - start:.1f} s")
    if opts.json:
        _write(opts.json, results, time.perf_counter() - start, line)
    return 0


def _write(path, results, total, line=None):
    env = lc._environment()
    try:
        from importlib.metadata import version
        env["fla_core"] = version("fla-core")
    except Exception:  # noqa: BLE001
        env["fla_core"] = None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"environment": env, "dispatch": DISPATCH, "summary": line, "total_s": round(total, 1),
                   "results": results}, f, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
