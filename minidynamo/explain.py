"""explain(fn)(*args, **kwargs): what a call would compile, its guards, and why it
would fall back — traced on the side, without touching the function's real cache and
without running anything (tensor work runs on fake tensors, no backend is called unless
one is given)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from .dynamic import DynamicPolicy
from .api import OptimizedFunction, OptimizedModule, _not_optimizable, _where, as_function
from .codegen import code_signature, entry_name
from .convert import BreakEntry, CallToCompile, compile_call
from .exc import HINTS, BackendError
from .user_names import plain
from .backends import lookup_backend, backend_name
from .callees import chain_caches
from .config import config


@dataclass
class BreakReason:
    """Why the call runs eagerly: the category (a key of exc.CATEGORIES), what was
    declined, where in the user's code (`file:line: source line`), and what to change."""
    category: str
    detail: str
    where: str | None
    hint: str
    no_break: str | None = None  # for a whole-call fallback: why the graph could not break there
    graph_break: bool = False  # a graph break (else the reason a call runs eagerly as a whole)
    # Where inside torch or the standard library: the user's line whose call led there.
    reached_from: str | None = None

    @classmethod
    def of(cls, r, graph_break: bool = False) -> "BreakReason":
        """The BreakReason of an Unsupported (an entry's break or fallback reason)."""
        return cls(r.category, r.detail, r.where, r.hint, r.no_break, graph_break, r.reached_from)

    @property
    def reason(self) -> str:
        """torch's field name: the reason in one line."""
        return f"[{self.category}] {self.detail}"

    @property
    def filename(self) -> str | None:
        m = _WHERE.match(self.where or "")
        return m.group(1) if m else None

    @property
    def lineno(self) -> int | None:
        m = _WHERE.match(self.where or "")
        return int(m.group(2)) if m else None

    def __str__(self):
        at = f"\n    at {self.where}" if self.where else ""
        if self.reached_from:
            at += f"\n    called from {self.reached_from}"
        return f"[{self.category}] {self.detail}{at}\n    hint: {self.hint}"


_WHERE = re.compile(r"^(.*?):(\d+)(?::|$)")


@dataclass
class GuardInfo:
    """One guard: the value it is about (`x`, `global 'SCALE'`), its kind, the Python
    expression it compiles to, and what it requires in words."""
    source: str
    kind: str
    code: str
    description: str

    def __str__(self):
        return f"{self.source}: {self.code}"


@dataclass
class LaunchInfo:
    """One captured Triton launch: the kernel, its grid (one per config when autotuned)
    and what the mutation analysis found: `writes` lists the tensor parameters the kernel
    writes, or is None when the analysis said "unknown" (then `unknown_reason` says why
    and every tensor argument is treated as written)."""
    kernel: str
    grid: object
    writes: list | None
    unknown_reason: str | None
    kernel_object: object = field(default=None, repr=False)

    @property
    def mutation(self) -> str:
        if self.writes is None:
            return f"unknown ({self.unknown_reason})" if self.unknown_reason else "unknown"
        return ", ".join(self.writes) or "nothing"

    def __str__(self):
        grid = self.grid if isinstance(self.grid, tuple) else f"per config {self.grid}"
        return f"{self.kernel}[{grid}] writes: {self.mutation}"


@dataclass
class ExplainOutput:
    graph_count: int
    graphs: list  # fx.GraphModules
    guards: list  # GuardInfo, in the order the entry checks them
    guard_sources: list  # the source name of each guard
    # BreakReason: each graph break (in call order), and a whole-call fallback's reason
    break_reasons: list
    ops_per_graph: list
    compile_time_ms: float
    entry_source: str  # the generated entry function, as it would run
    triton_launches: list = field(default_factory=list)  # str of each launch
    launches: list = field(default_factory=list)  # LaunchInfo
    kind: str = "graph"  # "graph", "eager" (fallback) or "constant" (no tensor work)
    name: str = ""
    where: str = ""
    graph_break_count: int = 0
    # What ran after a break: one line per resume function entry ("resume_in_f_at_7: graph")
    resumed: list = field(default_factory=list)
    raised: str | None = None  # the exception the real run of a call that breaks raised

    @property
    def out_guards(self) -> list:
        """torch's field name for `guards`."""
        return self.guards

    @property
    def op_count(self) -> int:
        return sum(self.ops_per_graph)

    def __str__(self):
        ops = sum(self.ops_per_graph)
        graphs = f"{self.graph_count} graph{'s' if self.graph_count != 1 else ''}"
        what = {"eager": "runs eagerly", "constant": "no tensor work (no graph)"}.get(
            self.kind, f"{graphs}, {ops} ops")
        if self.graph_break_count:
            what += f", {self.graph_break_count} graph break{'s' if self.graph_break_count != 1 else ''}"
        n = len(self.guards)
        lines = [f"{self.name} ({self.where}): {what}, {n} guard{'s' if n != 1 else ''}, "
                 f"traced in {self.compile_time_ms:.1f} ms"]
        for i, gm in enumerate(self.graphs):
            lines.append(f"graph {i} ({self.ops_per_graph[i]} ops):")
            lines.extend("    " + line for line in gm.code.strip().splitlines() if line.strip())
        if self.guards:
            lines.append("guards:")
            width = min(max(len(g.source) for g in self.guards), 28)
            lines.extend(f"    {g.source:<{width}}  {g.description}" for g in self.guards)
        if self.launches:
            lines.append("Triton launches:")
            lines.extend(f"    {launch}" for launch in self.launches)
        for b in self.break_reasons:
            lines.append(f"{'graph break' if b.graph_break else 'runs eagerly'}: [{b.category}] {b.detail}")
            if b.where:
                lines.append(f"    at {b.where}")
            if b.reached_from:
                lines.append(f"    called from {b.reached_from}")
            lines.append(f"    hint: {b.hint}")
            if b.no_break:
                lines.append(f"    no graph break there: {b.no_break}")
        if self.resumed:
            lines.append("after the breaks:")
            lines.extend(f"    {r}" for r in self.resumed)
        if self.raised:
            lines.append(f"the call raised (as it does eagerly): {self.raised}")
        return "\n".join(lines)


def explain(fn, backend=None):
    """explain(fn)(*args, **kwargs) → ExplainOutput for that call.

    `fn` is a plain function or an OptimizedFunction (its real cache is left alone).
    Nothing runs: the trace uses fake tensors and, unless `backend` is given, no backend
    is called; with `backend`, a backend that fails shows as a `backend` break reason."""
    if isinstance(fn, OptimizedModule):
        fn = fn._optimized
    if isinstance(fn, torch.nn.Module):
        fn = OptimizedModule(fn)._optimized  # explains its call as optimize(module) runs it
    cache = None
    if isinstance(fn, OptimizedFunction):
        fn, cache = fn._fn, fn._cache
    why = _not_optimizable(fn)
    if why is not None:  # named as explain's, not optimize's
        raise TypeError(why.replace("minidynamo.optimize", "minidynamo.explain", 1))
    fn = as_function(fn)
    name = entry_name(fn)
    where = _where(fn)
    # Messages name the function as the user wrote it (a module: its forward, `self`, ...).
    naming = cache.naming if cache is not None else plain(name, where)

    def run(*args, **kwargs):
        try:
            code_signature(fn).bind(*args, **kwargs)
        except TypeError:
            # CPython binds the arguments before the body runs: the call raises the very
            # TypeError an eager call raises, and runs nothing.
            fn(*args, **kwargs)
            raise
        if cache is not None and _past_limit(cache, args, kwargs):
            detail = (f"{name} has {len(cache.entries)} cache entries (config.cache_size_limit) and "
                      "this call passes none of their guards: it runs eagerly")
            return _output(naming, [], [], [BreakReason("cache_limit", detail, None, HINTS["cache_limit"])],
                           0.0, "", [], "eager")
        graphs = []
        capture = _capturing(graphs, backend)
        reasons = []
        try:
            entry = compile_call(CallToCompile(
                fn, args, kwargs, capture, name, resumes=_no_resume,
                dynamic=cache.dynamic.copy() if cache is not None else DynamicPolicy()))
        except BackendError as e:
            gm = graphs[-1] if graphs else None
            reasons.append(BreakReason("backend", str(e), None, HINTS["backend"]))
            return _output(naming, graphs, [], reasons, 0.0, "", _launches(gm), "eager")
        if isinstance(entry, BreakEntry):
            return _explain_breaks(fn, naming, args, kwargs, backend)
        if entry.reason is not None:
            reasons.append(BreakReason.of(entry.reason))
        return _output(naming, graphs, _guard_infos(entry, naming), reasons,
                       entry.compile_time_ms, entry.source_text, _launches(entry.gm), entry.kind)
    return run


def _past_limit(cache, args, kwargs) -> bool:
    """The optimized function's cache is full and no entry takes these arguments (checked
    without running anything): the call would run eagerly."""
    entries = cache.entries
    return len(entries) >= config.cache_size_limit and all(
        e.first_mismatch(args, kwargs) is not None for e in entries)


def _capturing(graphs: list, backend):
    """A backend recording each graph it gets in `graphs`: with `backend`, that one
    compiles it (and, failing, is named as the user named it), else it runs as it is."""
    def capture(gm, example_inputs):
        graphs.append(gm)
        if backend is None:
            return gm.forward
        return lookup_backend(backend)(gm, example_inputs)

    capture._minidynamo_trusted = backend is None
    if backend is not None:
        capture.__qualname__ = capture.__name__ = backend_name(backend)
    return capture


def _guard_infos(entry, naming) -> list:
    return [GuardInfo(g.source.name(naming), g.kind, e, g.describe(naming))
            for g, e in zip(entry.guards, entry.guard_exprs)]


def _no_resume(target, nulls, live):
    """Stands for a resume function while explain traces on the side: never called."""
    def resume(*args):
        raise AssertionError("explain never runs its entries")
    resume.__name__ = "resume"
    resume.cache_entries = lambda: []
    return resume


def _explain_breaks(fn, naming, args, kwargs, backend) -> ExplainOutput:
    """A call that breaks: what comes after a break depends on real values, so the call
    runs for real (as torch._dynamo.explain runs it), through a private cache, and every
    entry it made is reported in call order."""
    graphs = []
    capture = _capturing(graphs, backend)
    opt = OptimizedFunction(fn, capture, naming=naming)
    name = opt._cache.name
    raised = None
    try:
        opt(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the user's own error: reported with what was compiled
        raised = f"{type(e).__name__}: {e}"
    root = opt._cache
    entries = [(name if cache is root else f"{cache.naming.resume} ({cache.name})", e)
               for cache in chain_caches(root, capture) for e in cache.entries]
    entries.sort(key=lambda pair: pair[1].created)
    reasons, resumed_lines, ms = [], [], 0.0
    breaks = 0
    for label, e in entries:
        ms += e.compile_time_ms
        r = e.break_reason or e.reason
        if r is not None:
            reasons.append(BreakReason.of(r, e.break_reason is not None))
        breaks += e.break_reason is not None
        if label != name:
            resumed_lines.append(f"{label}: {e.kind}" + (f" ({e.reason})" if e.reason else ""))
    first = root.entries[0]
    launches = [launch for gm in graphs for launch in _launches(gm)]
    out = _output(naming, graphs, _guard_infos(first, naming), reasons, ms,
                  first.source_text, launches, "break")
    out.graph_break_count = breaks
    out.resumed = resumed_lines
    out.raised = raised
    return out


def _output(naming, graphs, guards, reasons, ms, text, launches, kind) -> ExplainOutput:
    ops = [sum(1 for n in gm.graph.nodes if n.op.startswith("call")) for gm in graphs]
    return ExplainOutput(len(graphs), graphs, guards, [g.source for g in guards], reasons, ops, ms, text,
                         [str(launch) for launch in launches], launches, kind, naming.function, naming.where)


def _launches(gm) -> list:
    out = []
    for record in getattr(gm, "_minidynamo_kernels", None) or []:
        m = record.mutation
        writes = record.written_tensors()
        reason = getattr(m, "reason", None) if (m is None or m.unknown) else None
        out.append(LaunchInfo(record.name, record.grid, writes,
                              reason if m is not None else "not analysed", record.kernel))
    return out
