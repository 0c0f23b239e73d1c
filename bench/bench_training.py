"""Training step of a transformer MLP block built from liger-kernel's ops (GPU): forward +
backward per step for plain eager, minidynamo, torch.compile(backend="eager") and
torch.compile (inductor), measured in one run.

The block, in bf16, every weight (and the input x) a leaf that requires grad:

    h = liger_rms_norm(x, w_norm, eps); gate = h @ w_gate.T; up = h @ w_up.T
    out = x + liger_swiglu(gate, up) @ w_down.T

  mlp       loss = (out * g).sum(), g a fixed random float32 tensor;
  mlp_flce  loss = liger_fused_linear_cross_entropy(out, w_head, targets); its forward calls
            .item(), so minidynamo runs that whole function eagerly (the note says so).

A step sets every leaf's .grad to None, computes the loss and calls loss.backward(). Each
peer optimizes the loss function (forward + loss) and backward runs outside it, as with
torch.compile in training loops: a function that calls .backward() itself runs eagerly
under minidynamo, which the row `minidynamo whole step` (optimize(train_step)) shows.

Each peer is warmed up (its first step, trace and compile included, is the "first step ms"
column; eager's includes the Triton compile of liger's kernels), checked once against eager
(loss and every grad, error relative to the largest magnitude of eager's value, bf16
tolerance TOL; a mismatch is printed in the note and makes the exit status 1), then timed:
rounds of `n` steps between torch.cuda.synchronize calls, the peers interleaved within each
round, median over rounds.

    python bench/bench_training.py --table           # table (~5 min on an H200)
    python -m pytest bench/bench_training.py --benchmark-only -m gpu

Needs CUDA and liger_kernel (importable, e.g. on PYTHONPATH); importing this file needs
neither. `--device cpu --sizes tiny` runs the harness without a GPU, given liger ops that
run on the CPU (Triton's interpreter).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import math
import os
import statistics
import sys
import time
import types

import pytest
import torch

_BENCH = os.path.dirname(os.path.abspath(__file__))
if _BENCH not in sys.path:  # liger_capture, beside this file
    sys.path.insert(0, _BENCH)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import minidynamo  # noqa: E402

LF = None  # liger_kernel.transformers.functional, once load_liger() succeeded
LIGER_ERROR = None
DEVICE = "cuda"
BF16, FP32 = torch.bfloat16, torch.float32
EPS = 1e-6
TOL = 2e-2  # max |got - eager| / max |eager|, per tensor: a few bf16 ulps of the largest value

SIZES = {
    "small": dict(tokens=64, hidden=256, inter=512, vocab=2048),  # host-bound
    "large": dict(tokens=4096, hidden=1024, inter=2816, vocab=32000),
    "tiny": dict(tokens=8, hidden=32, inter=64, vocab=128),  # CPU smoke run only
}
VARIANTS = ("mlp", "mlp_flce")
PEERS = ("eager", "minidynamo", "minidynamo whole step", "compile eager", "compile inductor")
ROUNDS = {"small": 15, "large": 9, "tiny": 3}
BATCH_S = 0.02  # seconds of steps per timed batch (n is chosen from eager's step time)
WARMUP = 3


def load_liger() -> str | None:
    """Import liger (once, through liger_capture's loader); None when it is there, else why not."""
    global LF, LIGER_ERROR
    import liger_capture
    LIGER_ERROR = liger_capture.load_liger()
    LF = liger_capture.LF
    return LIGER_ERROR


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


# --- the model ---------------------------------------------------------------------------
def mlp_block(x, w_norm, w_gate, w_up, w_down):
    h = LF.liger_rms_norm(x, w_norm, EPS)
    return x + LF.liger_swiglu(h @ w_gate.T, h @ w_up.T) @ w_down.T


def mlp_loss(x, w_norm, w_gate, w_up, w_down, g):
    return (mlp_block(x, w_norm, w_gate, w_up, w_down) * g).sum()


def mlp_flce_loss(x, w_norm, w_gate, w_up, w_down, w_head, targets):
    out = mlp_block(x, w_norm, w_gate, w_up, w_down)
    return LF.liger_fused_linear_cross_entropy(out, w_head, targets)


def train_step(loss_fn, leaves, consts):
    for t in leaves:
        t.grad = None
    loss = loss_fn(*leaves, *consts)
    loss.backward()
    return loss


@dataclasses.dataclass
class Problem:
    variant: str
    size: str
    fn: object  # loss_fn(*leaves, *consts)
    leaves: tuple  # tensors that require grad
    names: tuple  # of the leaves
    consts: tuple


def make_problem(variant: str, size: str, seed: int = 0) -> Problem:
    d = SIZES[size]
    t, h, i, v = d["tokens"], d["hidden"], d["inter"], d["vocab"]
    gen = torch.Generator(device=DEVICE).manual_seed(seed)

    def randn(*shape, scale=1.0, shift=0.0, dtype=BF16, grad=True):
        r = torch.randn(shape, generator=gen, device=DEVICE, dtype=FP32) * scale + shift
        return r.to(dtype).requires_grad_(grad)

    leaves = [randn(t, h), randn(h, scale=0.1, shift=1.0), randn(i, h, scale=h ** -0.5),
              randn(i, h, scale=h ** -0.5), randn(h, i, scale=i ** -0.5)]
    names = ["x", "w_norm", "w_gate", "w_up", "w_down"]
    if variant == "mlp":
        fn, consts = mlp_loss, (randn(t, h, dtype=FP32, grad=False),)
    elif variant == "mlp_flce":
        leaves.append(randn(v, h, scale=h ** -0.5))
        names.append("w_head")
        fn, consts = mlp_flce_loss, (torch.randint(0, v, (t,), generator=gen, device=DEVICE),)
    else:
        raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    return Problem(variant, size, fn, tuple(leaves), tuple(names), consts)


# --- peers -------------------------------------------------------------------------------
@dataclasses.dataclass
class Peer:
    name: str
    step: object = None  # zero-argument callable: one training step
    first_ms: float = math.nan
    note: str = ""
    error: str | None = None  # the peer could not run: no timing


def own_code(fn):
    """`fn` with a code object of its own: torch.compile keeps its cache (and recompile
    limit) on the code object, so that each peer and size starts from an empty one."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def dynamo_counts() -> tuple[int, int]:
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def minidynamo_note(opt) -> str:
    """The first cache entry's kind (graph / eager / constant), its Function nodes, and why
    it runs eagerly."""
    entries = opt.cache_entries()
    if not entries:
        return "no cache entry"
    e = entries[0]
    note = f"{e.kind} entry" + (f" (of {len(entries)})" if len(entries) > 1 else "")
    if e.kind == "graph" and e.gm is not None:
        fns = [n for n in e.gm.graph.nodes if n.op == "call_function"
               and "autograd_function" in getattr(n.target, "__name__", str(n.target))]
        eager_bwd = sum(isinstance(n.meta.get("eager_backward"), str) for n in fns)
        note += f", {len(fns)} Function nodes" + (f" ({eager_bwd} eager backwards)" if eager_bwd else "")
    if e.kind == "eager":
        note += ": whole call eager"
    if e.reason is not None:
        detail = getattr(e.reason, "detail", str(e.reason))
        note += f": [{getattr(e.reason, 'category', '?')}] {detail[:90]}"
    return note


def build_peer(name: str, prob: Problem) -> Peer:
    """The peer's step, warmed up (the first step timed); never raises."""
    peer = Peer(name)
    args = (prob.leaves, prob.consts)
    opt, counts = None, None
    try:
        if name == "eager":
            step = functools.partial(train_step, prob.fn, *args)
        elif name == "minidynamo":
            opt = minidynamo.optimize(prob.fn)
            step = functools.partial(train_step, opt, *args)
        elif name == "minidynamo whole step":
            opt = minidynamo.optimize(train_step)
            step = functools.partial(opt, prob.fn, *args)
        elif name in ("compile eager", "compile inductor"):
            counts = dynamo_counts()
            backend = "eager" if name == "compile eager" else "inductor"
            step = functools.partial(train_step, torch.compile(own_code(prob.fn), backend=backend,
                                                               dynamic=False), *args)
        else:
            raise ValueError(f"unknown peer {name!r}: one of {', '.join(PEERS)}")
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        peer.first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(WARMUP - 1):
            step()
        sync()
    except Exception as e:  # noqa: BLE001 - reported in the table
        peer.error = f"error: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        return peer
    peer.step = step
    if opt is not None:
        peer.note = minidynamo_note(opt)
    if counts is not None:
        graphs, breaks = dynamo_counts()
        peer.note = f"{graphs - counts[0]} graphs, {breaks - counts[1]} graph breaks"
    return peer


# --- correctness -------------------------------------------------------------------------
def snapshot(step, prob: Problem) -> list:
    """The loss and every leaf's grad after one step, as float32 copies."""
    loss = step()
    sync()
    grads = [None if t.grad is None else t.grad.detach().float().clone() for t in prob.leaves]
    return [loss.detach().float().clone(), *grads]


def compare(got: list, ref: list, prob: Problem) -> tuple[float, str]:
    """(worst error relative to the largest magnitude of eager's tensor, which tensor)."""
    worst, where = 0.0, ""
    for name, g, r in zip(("loss",) + tuple(n + ".grad" for n in prob.names), got, ref):
        if g is None or r is None:
            if (g is None) != (r is None):
                return math.inf, f"{name} {'missing' if g is None else 'unexpected'}"
            continue
        if g.shape != r.shape:
            return math.inf, f"{name} shape {tuple(g.shape)} != {tuple(r.shape)}"
        if not torch.isfinite(r).all():
            return math.inf, f"{name}: eager's is not finite"
        if not torch.isfinite(g).all():
            return math.inf, f"{name} not finite"
        err = ((g - r).abs().max() / r.abs().max().clamp_min(1e-12)).item()
        if err > worst:
            worst, where = err, name
    return worst, where


def check_note(err: float, where: str) -> str:
    if err == 0:
        return "bitwise"
    if err <= TOL:
        return f"err {err:.1e} ({where})"
    return f"MISMATCH: {where} err {err:.2e} > tol {TOL}"


# --- timing ------------------------------------------------------------------------------
def time_steps(steps: dict, rounds: int, n: int) -> dict:
    """Median µs per step of each step function: `rounds` batches of `n` steps, the peers
    interleaved within each round so that drift of the machine hits them all alike."""
    samples = {k: [] for k in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            sync()
            samples[name].append((time.perf_counter() - t0) / n * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def steps_per_batch(step) -> int:
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    sync()
    per_step = (time.perf_counter() - t0) / 5
    return max(3, min(500, round(BATCH_S / per_step)))


def run_case(variant: str, size: str, peers, deadline: float) -> list[dict]:
    """One row per peer: µs/step, first step ms, note, mismatch."""
    prob = make_problem(variant, size)
    built, rows = {}, []
    for name in peers:
        if name.startswith("compile") and time.perf_counter() > deadline:
            built[name] = Peer(name, error="skipped: past the --budget")
        else:
            built[name] = build_peer(name, prob)
    eager = built.get("eager") or build_peer("eager", prob)
    if eager.error:
        raise RuntimeError(f"{variant} {size}: eager itself failed: {eager.error}")
    ref = snapshot(eager.step, prob)
    rerun, _ = compare(snapshot(eager.step, prob), ref, prob)
    mismatch = {}
    for name, p in built.items():
        if p.error:
            continue
        if name == "eager":
            check = "reference" + ("" if rerun == 0 else f" (rerun differs: err {rerun:.1e})")
        else:
            err, where = compare(snapshot(p.step, prob), ref, prob)
            check = check_note(err, where)
            mismatch[name] = err > TOL
        p.note = f"{check}; {p.note}" if p.note else check
    timed = {k: p.step for k, p in built.items() if not p.error}
    timed.setdefault("eager", eager.step)
    us = time_steps(timed, ROUNDS[size], steps_per_batch(eager.step))
    for name, p in built.items():
        rows.append({"variant": variant, "size": size, "peer": name, "us": us.get(name, math.nan),
                     "vs_eager": us.get(name, math.nan) / us["eager"], "first_ms": p.first_ms,
                     "note": p.error or p.note, "mismatch": mismatch.get(name, False)})
    del built, eager, timed, ref, prob
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return rows


# --- report ------------------------------------------------------------------------------
def header() -> str:
    import triton
    try:
        import importlib.metadata
        liger = importlib.metadata.version("liger_kernel")
    except Exception:  # noqa: BLE001 - a wheel unpacked without its metadata
        liger = "?"
    where = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    return (f"machine: {where}; torch {torch.__version__}, triton {triton.__version__}, "
            f"liger-kernel {liger}, minidynamo {getattr(minidynamo, '__version__', '?')}, "
            f"Python {sys.version.split()[0]}")


def format_rows(rows: list[dict]) -> str:
    lines = ["| variant | size | peer | µs/step | vs eager | first step ms | note |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['size']} | {r['peer']} | {r['us']:.1f} | "
                     f"{r['vs_eager']:.2f} | {r['first_ms']:.0f} | {r['note']} |")
    return "\n".join(lines)


def overhead_table(rows: list[dict], size: str = "small") -> str:
    """Step time over eager's at the host-bound size: minidynamo's and torch.compile
    (eager backend)'s, and their ratio."""
    us = {(r["variant"], r["peer"]): r["us"] for r in rows if r["size"] == size}
    lines = [f"host overhead at size {size} (µs/step minus eager's):", "",
             "| variant | minidynamo | compile eager | ratio minidynamo / compile eager |",
             "|---|---:|---:|---:|"]
    for variant in VARIANTS:
        if (variant, "eager") not in us:
            continue
        md = us.get((variant, "minidynamo"), math.nan) - us[(variant, "eager")]
        ce = us.get((variant, "compile eager"), math.nan) - us[(variant, "eager")]
        ratio = md / ce if ce else math.nan
        lines.append(f"| {variant} | {md:+.1f} | {ce:+.1f} | {ratio:.2f} |")
    return "\n".join(lines)


def table(argv=None) -> int:
    global DEVICE
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", action="store_true", help="print the table (the default)")
    p.add_argument("--sizes", default="small,large")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--budget", type=float, default=180.0,
                   help="seconds after which torch.compile peers are no longer built (default "
                        "180: inductor's compile of the large size is the slow part)")
    p.add_argument("--device", default="cuda")
    opts = p.parse_args(argv)
    DEVICE = opts.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    why = load_liger()
    if why:
        print(f"needs liger_kernel: {why}", file=sys.stderr)
        return 2
    peers = [s.strip() for s in opts.peers.split(",") if s.strip()]
    if "eager" not in peers:
        peers.insert(0, "eager")
    deadline = time.perf_counter() + opts.budget
    print(header(), flush=True)
    rows = []
    for size in opts.sizes.split(","):
        for variant in opts.variants.split(","):
            t0 = time.perf_counter()
            rows += run_case(variant, size, peers, deadline)
            print(f"  ({variant} {size}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    print(format_rows(rows))
    if any(r["size"] == "small" for r in rows):
        print()
        print(overhead_table(rows))
    bad = [f"{r['variant']} {r['size']} {r['peer']}" for r in rows if r["mismatch"]]
    if bad:
        print(f"\nMISMATCH against eager: {'; '.join(bad)}")
    return 1 if bad else 0


# --- pytest-benchmark ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def liger():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    why = load_liger()
    if why:
        pytest.skip(f"needs liger_kernel: {why}")


@pytest.mark.gpu
@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_training_step(liger, benchmark, variant, size, peer):
    prob = make_problem(variant, size)
    ref = snapshot(build_peer("eager", prob).step, prob)
    p = build_peer(peer, prob)
    assert p.error is None, p.error
    err, where = compare(snapshot(p.step, prob), ref, prob)
    assert err <= TOL, f"{peer} differs from eager: {where} err {err:.2e}"
    benchmark.group = f"{variant} {size}"
    benchmark.extra_info["note"] = p.note

    def run():
        p.step()
        sync()
    benchmark(run)


if __name__ == "__main__":
    sys.exit(table())
