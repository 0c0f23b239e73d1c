"""One model/task of bench/models.py, measured in this process: eager and a compiler
(minidynamo or torch.compile), each on a fresh deepcopy of one model built under one seed.
bench/models.py runs each compiler in a process of its own (minidynamo's frame hook and
torch.compile's both use torch's frame-evaluation callback), each with its own eager run.

A *step* is one call: inference (eval(), no_grad) returns the output's tensors; training
(train(), dropout at 0) clears the grads, calls the model, computes the spec's loss and
runs backward, and returns the loss and every parameter's gradient. Each tool makes the
first call (timed: trace + compile + run) and WARM more (their median is the per-call
time), every call after `torch.manual_seed(SEED)`; results of the first and the last call
and the buffers at the end (BatchNorm's running statistics) are compared with eager's.

Each compiler gets a counting backend that keeps the graphs it is given and runs them
as they are. Its graph breaks and eager fallbacks come from its own records
(bench/models_reasons.py).
"""
from __future__ import annotations

import copy
import dataclasses
import statistics
import sys
import time
import traceback
import warnings

import torch

from models_reasons import DynamoRecords, MinidynamoRecords, Records, dynamo_break_count, short_path

RECORDS = {"minidynamo": MinidynamoRecords, "torch.compile": DynamoRecords}

SEED = 0
WARM = 5
RTOL, ATOL = 1e-4, 1e-5
TOOLS = ("eager", "minidynamo", "torch.compile")


@dataclasses.dataclass
class ToolResult:
    tool: str
    graphs: int = 0  # graphs made during the first call
    ops: int = 0  # call_function/call_method/call_module nodes in those graphs
    graphs_total: int = 0  # graphs made by all the calls (recompiles included)
    recompiles: list = dataclasses.field(default_factory=list)  # why, one line each
    breaks: int = 0  # graph breaks (first call)
    fallbacks: int = 0  # frames run eagerly as a whole (first call)
    reasons: list = dataclasses.field(default_factory=list)  # Reason, as dicts
    first_s: float | None = None
    per_call_ms: float | None = None
    correct: bool | None = None  # None: not compared (crash, or eager failed)
    mismatch: str | None = None  # what differed from eager
    crash: str | None = None  # "Type: message" of an exception the tool raised
    crash_where: str | None = None  # the innermost frames of that exception
    crash_traceback: str | None = None  # all of it


# --- counting backends ------------------------------------------------------------------

class CountingBackend:
    """A backend(gm, example_inputs) that keeps each graph and runs it as it is."""

    def __init__(self):
        self.graphs = []
        self.__name__ = "counting_backend"

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    @staticmethod
    def ops(gm) -> int:
        """Calls in the graph; an autograd.Function applied as one node (minidynamo keeps
        it whole, with its forward and backward as bodies) counts as its forward body's
        calls, as torch.compile, which inlines the forward where no grad is needed, counts."""
        total = 0
        for n in gm.graph.nodes:
            if n.op not in ("call_function", "call_method", "call_module"):
                continue
            body = _forward_body(gm, n)
            total += CountingBackend.ops(body) if body is not None else 1
        return total


def _forward_body(gm, node):
    """The forward body of an autograd.Function node (its first get_attr argument), else None."""
    if "autograd_function" not in (getattr(node.target, "__name__", None) or str(node.target)):
        return None
    for a in node.args:
        if isinstance(a, torch.fx.Node) and a.op == "get_attr":
            body = getattr(gm, a.target, None)
            return body if isinstance(body, torch.fx.GraphModule) else None
    return None


# --- steps --------------------------------------------------------------------------------

def tensors_of(value) -> list:
    """The tensors in a model's output, in a fixed order (ModelOutput, tuples, dicts)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return []


def step(model, spec, task, inputs):
    """One call; the result to compare: the output's tensors, or (loss, grads by name)."""
    torch.manual_seed(SEED)
    if task == "infer":
        with torch.no_grad():
            return [t.detach() for t in tensors_of(model(**inputs))]
    for p in model.parameters():
        p.grad = None
    loss = spec.loss(model(**inputs), inputs)
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


def _param_names(model, task) -> list:
    return ["output"] if task == "infer" else ["loss"] + [n for n, _ in model.named_parameters()]


def compare(got: list, want: list, names: list) -> str | None:
    """None when every tensor is allclose, else what differs first (and how many differ)."""
    if len(got) != len(want):
        return f"{len(got)} tensors, eager has {len(want)}"
    bad = []
    for i, (g, w) in enumerate(zip(got, want)):
        name = names[i] if i < len(names) else f"{names[0]}[{i}]"
        if (g is None) != (w is None):
            bad.append(f"{name}: grad {'missing' if g is None else 'present'} (eager: {'present' if g is None else 'missing'})")
        elif g is not None and (g.shape != w.shape or g.dtype != w.dtype):
            bad.append(f"{name}: {tuple(g.shape)} {g.dtype} vs eager {tuple(w.shape)} {w.dtype}")
        elif g is not None and not torch.allclose(g.float(), w.float(), rtol=RTOL, atol=ATOL, equal_nan=True):
            err = (g.float() - w.float()).abs().max().item()
            bad.append(f"{name}: max abs error {err:.3g}")
    if not bad:
        return None
    return bad[0] + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")


def buffers_of(model) -> list:
    return [b.detach().clone() for _, b in model.named_buffers()]


# --- one tool -----------------------------------------------------------------------------

def _crash_text(e: BaseException) -> tuple[str, str]:
    msg = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {msg[0] if msg else ''}"[:500]
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    return text, " <- ".join(f"{short_path(f.filename)}:{f.lineno} {f.name}" for f in reversed(frames))


def run_tool(tool: str, base, spec, task: str, inputs: dict, reference):
    """Run `tool` on a fresh copy of `base`: first call, WARM calls, comparison with
    `reference` ((first result, buffers at the end) of eager; None: nothing to compare).
    Returns the ToolResult and this tool's (first result, buffers at the end)."""
    res = ToolResult(tool)
    model = copy.deepcopy(base)
    backend = CountingBackend()
    runner = make_runner(tool, model, backend)
    records = RECORDS.get(tool, Records)()
    names = _param_names(model, task)
    first = last = None
    with records, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t0 = time.perf_counter()
            first = step(runner, spec, task, inputs)
            res.first_s = time.perf_counter() - t0
            res.graphs = len(backend.graphs)
            res.ops = sum(CountingBackend.ops(g) for g in backend.graphs)
            if tool == "torch.compile":
                res.breaks = dynamo_break_count()
            records.call = "warm"
            times = []
            for _ in range(WARM):
                t0 = time.perf_counter()
                last = step(runner, spec, task, inputs)
                times.append(time.perf_counter() - t0)
            res.per_call_ms = statistics.median(times) * 1e3
        except Exception as e:  # noqa: BLE001 - a crash is a result: reported, never hidden
            res.crash, res.crash_where = _crash_text(e)
            res.crash_traceback = "".join(traceback.format_exception(e))
    res.graphs_total = len(backend.graphs)
    if res.first_s is None:  # the first call raised: its graphs so far
        res.graphs = res.graphs_total
        res.ops = sum(CountingBackend.ops(g) for g in backend.graphs)
    reasons = records.reasons
    res.recompiles = records.recompiles
    if tool == "minidynamo":
        res.breaks = sum(1 for r in reasons if r.kind == "break" and r.call == "first")
    elif tool == "torch.compile" and res.first_s is None:
        res.breaks = dynamo_break_count()
    res.fallbacks = sum(1 for r in reasons if r.kind == "eager" and r.call == "first")
    res.reasons = [dataclasses.asdict(r) for r in reasons]
    if res.crash is not None:
        return res, None
    mine = (first, buffers_of(model))
    if reference is not None:
        want_first, want_buffers = reference
        res.mismatch = (compare(first, want_first, names) or compare(last, want_first, names)
                        or compare(mine[1], want_buffers, ["buffers"]))
        res.correct = res.mismatch is None
    return res, mine


def make_runner(tool: str, model, backend):
    """The callable a tool runs: the model itself, or the model compiled (caches reset)."""
    if tool == "minidynamo":
        import minidynamo
        minidynamo.reset()
        return minidynamo.optimize(model, backend=backend)
    if tool == "torch.compile":
        import torch._dynamo
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        return torch.compile(model, backend=backend)
    return model


def warm_up(tool: str):
    """Trace one small function with `tool`, so it does not pay this process's one-time
    imports (fake tensors, torch._dynamo) in a model's first call."""
    def f(x):
        return torch.nn.functional.relu(x @ x.T).sum(0)
    make_runner(tool, f, CountingBackend())(torch.randn(4, 4))


def _subclasses(cls) -> list:
    out, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def model_class_names(model) -> dict:
    """Names in reasons that depend on the model, mapped to placeholders: the classes of
    its modules from its own library (`<Module>`) and, with transformers loaded, every
    ModelOutput (`<ModelOutput>`) and config class (`<Config>`) defined so far."""
    names = {}
    for m in model.modules():
        for c in type(m).__mro__:
            if c.__module__.startswith(("transformers.", "timm.", "torchvision.")):
                names.setdefault(c.__name__, "<Module>")
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        from transformers.utils import ModelOutput
        names.update((c.__name__, "<ModelOutput>") for c in _subclasses(ModelOutput))
        names.update((c.__name__, "<Config>") for c in _subclasses(transformers.PretrainedConfig))
    for keep in ("PreTrainedModel", "GenerationMixin", "ModelOutput", "PretrainedConfig", "PreTrainedConfig"):
        names.pop(keep, None)
    return names


def measure(spec, task: str, compilers=TOOLS[1:]) -> dict:
    """Eager and `compilers` on one model/task: {"model", "task", "tools": {tool:
    ToolResult dict}, "names": the model-specific class names (for the report)}."""
    torch.manual_seed(SEED)
    base = spec.build()
    base.train(task == "train")
    torch.manual_seed(SEED + 1)
    inputs = spec.inputs(task)
    out = {"model": spec.name, "family": spec.family, "source": spec.source, "task": task,
           "params": sum(p.numel() for p in base.parameters()), "tools": {}}
    eager, reference = run_tool("eager", base, spec, task, inputs, None)
    out["tools"]["eager"] = dataclasses.asdict(eager)
    if eager.crash is not None:
        reference = None
    for tool in compilers:
        res, _ = run_tool(tool, base, spec, task, inputs, reference)
        out["tools"][tool] = dataclasses.asdict(res)
        out["tools"][tool]["eager_per_call_ms"] = eager.per_call_ms  # this process's baseline
    out["names"] = model_class_names(base)
    return out
