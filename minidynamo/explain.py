"""explain(fn)(*args, **kwargs): what a call would compile, its guards, and why it
would fall back — traced on the side, without touching the function's real cache and
without running anything."""
from __future__ import annotations

from dataclasses import dataclass, field

from .api import OptimizedFunction
from .convert import compile_call

# What to change, per fallback category.
HINTS = {
    "data_dependent": "branch on shapes/dtypes instead of tensor values, or keep the "
                      "data-dependent part outside the optimized function",
    "side_effect": "move I/O and writes to globals or outside objects out of the optimized function",
    "opcode": "rewrite the construct with a simpler one (see docs/supported.md)",
    "call": "pass the result in as an argument, or call a Python or torch function instead",
    "exceptions": "the eager run raises or handles this; keep try/with/raise outside the optimized function",
    "generator": "build a list instead of using a generator",
    "torch_op": "check the op's arguments: it fails (or cannot run) on these shapes and dtypes",
    "triton": "see docs/triton.md for the launch forms that are captured",
    "construct": "see docs/supported.md for the constructs that are traced",
    "backend": "check the backend",
}


@dataclass
class BreakReason:
    category: str
    detail: str
    where: str | None
    hint: str

    def __str__(self):
        at = f"\n    at {self.where}" if self.where else ""
        return f"[{self.category}] {self.detail}{at}\n    hint: {self.hint}"


@dataclass
class ExplainOutput:
    graph_count: int
    graphs: list
    guards: list  # the Python expressions the guard function checks
    guard_sources: list  # the source each guard is about
    break_reasons: list
    ops_per_graph: list
    compile_time_ms: float
    entry_source: str
    triton_launches: list = field(default_factory=list)

    def __str__(self):
        lines = [f"graphs: {self.graph_count}, ops per graph: {self.ops_per_graph}, "
                 f"compile time: {self.compile_time_ms:.1f} ms"]
        for i, gm in enumerate(self.graphs):
            lines.append(f"--- graph {i} ---")
            lines.append(gm.code.strip())
        lines.append(f"--- guards ({len(self.guards)}) ---")
        lines.extend(f"  {g}" for g in self.guards)
        if self.triton_launches:
            lines.append("--- Triton launches ---")
            lines.extend(f"  {t}" for t in self.triton_launches)
        if self.break_reasons:
            lines.append("--- runs eagerly because ---")
            lines.extend(f"  {b}" for b in self.break_reasons)
        return "\n".join(lines)


def explain(fn, backend="eager"):
    """explain(fn)(*args, **kwargs) → ExplainOutput for that call."""
    if isinstance(fn, OptimizedFunction):
        backend = fn._cache.backend
        fn = fn._fn

    def run(*args, **kwargs):
        graphs = []

        def capture(gm, example_inputs):
            graphs.append(gm)
            from .backends import lookup_backend
            return lookup_backend(backend)(gm, example_inputs)

        entry = compile_call(fn, args, kwargs, capture, name=fn.__name__)
        reasons = []
        if entry.reason is not None:
            r = entry.reason
            reasons.append(BreakReason(r.category, r.detail, r.where, HINTS.get(r.category, "")))
        ops = [sum(1 for n in gm.graph.nodes if n.op.startswith("call")) for gm in graphs]
        launches = [str(k) for k in getattr(entry.gm, "_minidynamo_kernels", [])] if entry.gm else []
        return ExplainOutput(len(graphs), graphs, list(entry.guard_exprs),
                             [g.source.name() for g in entry.guards], reasons, ops,
                             entry.compile_time_ms, entry.source_text, launches)
    return run
