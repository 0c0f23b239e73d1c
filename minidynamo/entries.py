"""A cache entry: one compiled form of a function under its guards (graph, graph break,
constant or eager fallback), and what explain, logs and the report read off it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.fx as fx

from . import codegen
from .exc import Unsupported
from .sources import Namespace

@dataclass(eq=False, repr=False)
class CacheEntry:
    """One compiled form of a function under its guards; its kind is its class:
    GraphEntry, BreakEntry (the graph up to a declined instruction, which runs natively,
    then a resume function), ConstantEntry (no tensor work: no graph), EagerEntry (a
    fallback: the call runs eagerly)."""

    kind: ClassVar[str] = ""  # the kind's name, as explain, logs and the report show it
    title: ClassVar[str] = ""  # how describe() heads it
    run: object  # the generated entry function
    guards: list
    guard_exprs: list
    source_text: str
    params: str
    ns: Namespace
    _gm: fx.GraphModule | None = None
    compiled: object = None  # what the backend returned (None: graph inlined in `run`)
    reason: Unsupported | None = None
    compile_time_ms: float = 0.0
    hits: list = field(default_factory=lambda: [0])
    # The same function as `run` except that a failing guard goes on to the cache's miss
    # path instead of returning MISS: the optimized function's __call__ while this is
    # its only entry (None: not available).
    fast_call: object = None
    created: float = field(default_factory=time.time)
    _finder: object = None
    graph: fx.Graph | None = None  # for the GraphModule built on first use of `gm`
    kernels: object = None  # the graph's Triton side table (KernelTable)
    submodules: dict = field(default_factory=dict)  # bodies the graph's nodes hold, by attribute
    graph_name: str = ""
    # Builds the launch program after the first call (then dropped); what came of it.
    _upgrade: object = None
    program_note: str = ""
    # A graph break: the decline the graph broke at, and the resume functions it calls.
    break_reason: Unsupported | None = None
    resumes: tuple = ()
    symbolic: bool = False  # traced with symbolic sizes (dynamic.py)
    # Where compile_time_ms went: phase name -> ms (the compile report shows it).
    phases: dict = field(default_factory=dict)

    @property
    def plain_reason(self) -> str | None:
        """Why calls of this entry run the function plainly (no graph), or None."""
        return None

    def after_first_call(self) -> bool:
        """Once the first call has resolved the graph's Triton launchers: rebuild the entry
        around its launch program (triton/program.py), or note why not. True when `run`
        and `fast_call` changed (the caller re-installs them)."""
        upgrade, self._upgrade = self._upgrade, None
        if upgrade is None:
            return False
        self.program_note, new = upgrade()
        if new is None:
            return False
        self.run, self.source_text, self.fast_call = new
        return True

    @property
    def gm(self) -> fx.GraphModule | None:
        """The captured graph as a GraphModule. With the eager backend the graph's code
        runs inlined in the entry function, so this is only built when asked for."""
        if self._gm is None and self.graph is not None:
            self._gm = fx.GraphModule(holder(self.submodules), self.graph, class_name=self.graph_name)
            self._gm._minidynamo_kernels = self.kernels
        return self._gm

    @property
    def hit_count(self) -> int:
        return self.hits[0]

    def first_mismatch(self, args, kwargs, naming=None):
        """(guard, explanation, expected, actual) for the first guard these arguments
        fail, or None; sources named with `naming` (user_names.Naming), as Source.name."""
        if self._finder is None:
            # A guard fails if its Python expression or the entry's own (C) check does.
            exprs = []
            for g, e in zip(self.guards, self.guard_exprs):
                c = g.check_code(self.ns)
                exprs.append(e if c == e else f"({e}) and {c}")
            self._finder = codegen.failure_finder("_md_why", self.params, exprs, self.ns)
        i = self._finder(*args, **kwargs)
        if i < 0:
            return None
        guard = self.guards[i]
        reader = codegen.source_reader("_md_read", self.params, [guard.source.expr(self.ns)], self.ns)
        actual = reader(*args, **kwargs)[0]
        if isinstance(actual, Exception):
            why = f"{type(actual).__name__}: {actual}"
            return (guard, f"{guard.source.name(naming)} could not be read ({why})",
                    guard.describe(naming), f"unreadable ({why})")
        return (guard, *guard.mismatch(actual, naming))

    def guard_text(self) -> str:
        """The guards' Python expressions, one a line (the entry checks tensors with torch's
        C tensor check where available: the same conditions, plus dispatch keys)."""
        return "\n".join(self.guard_exprs) if self.guard_exprs else "(no guards)"

    @property
    def graph_code(self) -> str | None:
        """The captured graph's Python code (None for an eager or constant entry)."""
        gm = self.gm
        return gm.code.strip() if gm is not None else None

    def describe(self, guards: str = "words") -> str:
        """A few readable lines: kind, hits, compile time, guards, then the graph's code
        or why the entry runs eagerly. `guards="code"` lists the guard expressions."""
        lines = [f"{self.title} entry: {self.hit_count} hits, "
                 f"compiled in {self.compile_time_ms:.1f} ms, {len(self.guards)} guards"]
        if guards == "code":
            lines += [f"  {e}" for e in self.guard_exprs]
        else:
            lines += [f"  {g.source.name()}: {g.describe()}" for g in self.guards]
        if self.reason is not None:
            lines.append(f"runs eagerly: {self.reason}")
        code = self.graph_code
        if code is not None:
            lines.append(code)
        if self.program_note:
            lines.append(f"launch program: {self.program_note}")
        if self.break_reason is not None:
            lines.append(f"breaks at: {self.break_reason}")
            lines.append("  then runs that instruction natively and continues in "
                         + " or ".join(f"{r.__name__} ({len(r.cache_entries())} entries)" for r in self.resumes))
        return "\n".join(lines)

    def __str__(self):
        return self.describe()

    def __repr__(self):
        return (f"<CacheEntry {self.kind} {self.graph_name.removesuffix('_graph') or '?'}: "
                f"{len(self.guards)} guards, {self.hit_count} hits>")


class GraphEntry(CacheEntry):
    kind = "graph"
    title = "graph"


class BreakEntry(CacheEntry):
    kind = "break"
    title = "graph break"


class ConstantEntry(CacheEntry):
    kind = "constant"
    title = "constant (no tensor work)"

    @property
    def plain_reason(self) -> str | None:
        return "no tensor work"


class EagerEntry(CacheEntry):
    kind = "eager"
    title = "eager fallback"

    @property
    def plain_reason(self) -> str | None:
        return f"runs eagerly: {self.reason}"

def holder(submodules: dict) -> torch.nn.Module:
    """The root a GraphModule is made from: the bodies its get_attr nodes read."""
    root = torch.nn.Module()
    for name, module in submodules.items():
        root.add_module(name, module)
    return root
