"""Guards: the assumptions a trace made, compiled into one check function per cache entry.

Each guard is a Python boolean expression over a `Source`; what each kind means (its code,
cost, explanation, key) is its class in guard_kinds.py. A trace's `GuardSet` orders them,
cheapest first, and renders them (`check_expressions`, with the values several guards read
fetched once: `plan_hoisting`) for convert.py, which joins them into the one `and` chain at
the top of the entry function (the user's own signature, so arguments bind exactly as in
the original call); `expressions()` is the readable form `explain()` shows and a failure is
explained against.
"""
from __future__ import annotations

import copy
import re
from operator import itemgetter

import torch

from .config import config
from .dynamic import is_symbolic, static_or_none
from .guard_snapshot import Plan, Snapshots
from .guard_kinds import Guard, chain
from .sources import (LocalSource, Namespace, ObjectSource, ReadBeforeWrites, Source, TensorsSource,
                      TermsSource)

__all__ = ["Guard", "GuardSet", "c_tensor_check", "shape_guard", "tensor_guard"]


def tensor_guard(source: Source, t: torch.Tensor, fake=None) -> Guard:
    """TENSOR_MATCH of input `t`; with a `fake` of symbolic dimensions, those sizes and
    the strides that depend on them are left to the shape environment's guards."""
    shape, stride, symbols = tuple(t.shape), tuple(t.stride()), {}
    if fake is not None:
        shape, stride = static_or_none(fake.shape), static_or_none(fake.stride())
        symbols = {d: str(s) for d, s in enumerate(fake.shape) if is_symbolic(s)}
    meta = dict(type=type(t), dtype=t.dtype, device=t.device, shape=shape, stride=stride,
                requires_grad=t.requires_grad, c_check=c_tensor_check(t, shape, stride), symbols=symbols,
                inference=t.is_inference())
    return Guard("TENSOR_MATCH", source, None, meta)


def shape_guard(text, inputs: list, terms: list, why: str = "") -> Guard:
    """One guard of the shape environment: `text`, a ShapeExpr over the sources `inputs`
    (dynamic.render); `terms`, the sizes it reads (shape_guards.Term: what a failure shows)."""
    return Guard("SHAPE_ENV", TermsSource(tuple(terms), tuple(inputs)), text, {"inputs": inputs, "why": why})


def c_tensor_check(t: torch.Tensor, shape=None, stride=None):
    """torch's C check of one tensor (`TensorGuards(t).check`, what torch.compile's guards
    were built on; kept as one bound method so every `check_code` binds the same name):
    type, dtype, device, sizes, strides, requires_grad — and the dispatch keys as the
    calling thread sees them, so an inference_mode call or a conj/neg view fails it too.
    A third of the Python expression's cost. None where unavailable or switched off
    (`config.c_tensor_guards`): the Python expression checks instead."""
    if not config.c_tensor_guards or not _c_checks_work():
        return None
    try:
        return _TensorGuards(t, dynamic_dims_sizes=[list(t.shape if shape is None else shape)],
                             dynamic_dims_strides=[list(t.stride() if stride is None else stride)]).check
    except Exception:  # a layout without strides, or a tensor the check does not take
        return None


_TensorGuards = None
_c_checks_ok: bool | None = None


def _c_checks_work() -> bool:
    """The internal API exists and answers as the Python expression does (checked once)."""
    global _c_checks_ok, _TensorGuards
    if _c_checks_ok is None:
        _c_checks_ok = False
        try:
            from torch._C._dynamo.guards import TensorGuards
            x = torch.zeros(2, 3)
            g = TensorGuards(x, dynamic_dims_sizes=[[2, 3]], dynamic_dims_strides=[[3, 1]])
            others = [torch.zeros(3, 2), torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2).t(),
                      torch.zeros(2, 3, requires_grad=True), torch.nn.Parameter(torch.zeros(2, 3)), 2, None]
            if g.check(x) is True and g.check(torch.ones(2, 3)) is True and \
                    not any(g.check(o) for o in others):
                _TensorGuards, _c_checks_ok = TensorGuards, True
        except Exception:
            pass
    return _c_checks_ok


class GuardSet:
    """The guards of one trace; deduplicated by their kinds' `key()` (kind and source, and
    what else tells two guards of the kind apart)."""

    def __init__(self):
        self._guards: dict = {}
        self._plan: dict | None = None  # source -> local, once planned (plan_hoisting)
        self._snapshot: Plan | None = None  # the fast tier's region, where planned

    def add(self, guard: Guard) -> None:
        key = guard.key()
        if key not in self._guards:
            self._guards[key] = guard

    def __iter__(self):
        return iter(self.ordered())

    def __len__(self):
        return len(self._guards)

    def ordered(self) -> list[Guard]:
        # Stable: a container's structural guard keeps its place before guards on its items.
        return sorted(self._guards.values(), key=lambda g: (g.cost, g.source.depth))

    def expressions(self, ns: Namespace) -> list[str]:
        """Python expressions, one per guard: shown to users, and what a failure is explained by."""
        return [g.code(ns) for g in self.ordered()]

    def plan_hoisting(self, ns: Namespace, also=(), snapshot: bool = False) -> dict:
        """Name the values to fetch once per call (see check_expressions): those several
        guards read, or a guard and one of `also` (the graph's inputs, a model's parameters
        reached through the same modules), each given a local here. The entry's body may
        read them (`ns.hoisted`) once the guards have passed. With `snapshot`, also plan
        the fast tier (guard_snapshot.py): every source of its region gets a local, which
        either tier assigns."""
        ordered = self.ordered()
        guard_reads = [g.reads() for g in ordered]
        counts: dict = {}
        for reads in guard_reads + [chain(s) for s in also]:
            for s in set(reads):
                counts[s] = counts.get(s, 0) + 1
        self._snapshot = None
        region: dict = {}
        if snapshot and config.snapshot_guards:
            plan = Plan(ordered, list(also))
            if plan.roots and len(plan) >= _MIN_REGION:
                self._snapshot, region = plan, plan.steps
        self._plan = {}
        for reads in guard_reads:  # named in the order the guards first read them
            for s in reads:
                if (counts[s] > 1 or s in region) and s not in self._plan and not isinstance(s, _PLAIN_SOURCES):
                    self._plan[s] = ns.local("p")
        for s in region:  # read by the graph's inputs only
            if s not in self._plan and not isinstance(s, _PLAIN_SOURCES):
                self._plan[s] = ns.local("p")
        return dict(self._plan)

    def check_expressions(self, ns: Namespace) -> list[str]:
        """What the entry function runs, in order: one check per guard (C checks for tensors
        where available), and before the first guard reading a value that several guards
        read (`model.layers[0]`, reached through Module.__getattr__ at each step), an
        assignment of it to a local, `(_md_p3 := ...) is _md_p3`, which later checks read:
        each shared prefix is fetched once per call, where it first was."""
        if self._plan is None:
            self.plan_hoisting(ns)
        return self._render(self.ordered(), ns, {})

    def _render(self, guards, ns: Namespace, assigned: dict) -> list[str]:
        """Checks of `guards` with the planned locals assigned where first read, and at
        the end those no guard read (the graph's inputs); `assigned`: locals already set."""
        plan = self._plan
        out: list[str] = []
        seen: set = set()  # the same check of the same expression (a class's method, per instance)
        ns.hoisted = assigned = dict(assigned)
        try:
            for g in guards:
                for prefix in g.reads():
                    name = plan.get(prefix)
                    if name is not None and prefix not in assigned:
                        out.append(f"({name} := {prefix.ref(ns)}) is {name}")
                        assigned[prefix] = name
                code = g.check_code(ns)
                if code not in seen:
                    seen.add(code)
                    out.append(code)
            for prefix, name in plan.items():
                if prefix not in assigned:
                    out.append(f"({name} := {prefix.ref(ns)}) is {name}")
                    assigned[prefix] = name
        finally:
            ns.hoisted = {}
        return out

    def fast_tier(self, ns: Namespace) -> FastTier | None:
        """The entry's first tier where a snapshot was planned (plan_hoisting): the roots
        to look its snapshot up by, the locals to bind from it, and the guards it does not
        imply, rendered over those locals."""
        plan = self._snapshot
        if plan is None:
            return None
        hooks, absent, tensors, residual, same, keyed = [], [], [], [], [], []
        for g in self.ordered():
            step = plan.steps.get(g.source)
            role = g.snapshot_role(g.source in plan.modules) if step is not None and step[0] != "class attr" else None
            if role == "hooks":
                hooks.append((g.source, tuple(g.meta["attrs"])))
            elif role in ("absent", "absent from tables"):
                absent.append((g.source, g.meta["attr"], role == "absent from tables"))
                if role == "absent from tables":  # and from the class, checked once per class
                    cls = plan.types[g.source]
                    residual.append(Guard("HASATTR", ObjectSource(cls, f"class {cls.__qualname__}"), False,
                                          {"attr": g.meta["attr"]}))
            elif role == "tensor":
                tensors.append(g)
            elif role == "keys":  # held by version tags, else read back (guard_snapshot.py)
                keyed.append((g.source, tuple(g.expected)))
            elif role == "alias" and g.meta["other"] in plan.steps:
                if g.expected:  # both fixed by the snapshot, as one object: checks of one are of both
                    same.append((g.source, g.meta["other"]))
            elif role is None or role in ("alias", "keys"):
                residual.append(g)
        snaps = Snapshots(plan, hooks, absent, [g.source for g in tensors],
                          [(g.meta["shape"], g.meta["stride"]) for g in tensors], keyed)
        # The roots are fetched into their locals first (a root that is a parameter's
        # name is one already); the snapshot gives the rest.
        roots = [self._plan.get(r) or r.expr(ns) for r in plan.roots]
        fetch = [f"{self._plan[r]} = {r.expr(ns)}" for r in plan.roots if r in self._plan]
        values = [self._plan.get(s) or s.expr(ns) for s in plan.sources]
        targets = [self._plan[s] for s in plan.sources if plan.steps[s][0] != "root"]
        region = {s: self._plan[s] for s in plan.sources if s in self._plan}
        for s in plan.sources:  # `m.__class__` is the class the snapshot checked: one check per class
            cls = plan.class_of(s)
            if cls is not None:
                region[s] = ns.bind(cls, "type")
            elif plan.steps[s][0] == "class attr":  # and `m.flag` read from it
                region[s] = f"{ns.bind(plan.types[s.base], 'type')}.{s.attr}"
        # One object reached by several paths (every layer's `config`) is read through the
        # first: the checks of what it holds are the same text, made once.
        first = {}
        for a, b in same:
            a, b = sorted((first.get(a, a), first.get(b, b)), key=plan.index.__getitem__)
            for s, rep in list(first.items()):
                if rep == b:
                    first[s] = a
            first[b] = a
        for s, rep in first.items():
            if rep in region:
                region[s] = region[rep]
        return FastTier(ns.bind(snaps, "snapshots"), snaps, fetch, roots, values, targets,
                        self._render(residual, ns, region), list(self._plan.values()))


class FastTier:
    """What codegen.guard_block renders as the entry's first tier (see GuardSet.fast_tier).
    `pick`: where set, the name of an itemgetter that picks from the snapshot's values
    those the entry reads after it (`used_by`), bound to `targets`."""

    def __init__(self, name, snapshots, fetch, roots, values, targets, residual, hoisted):
        self.name, self.snapshots, self.fetch = name, snapshots, fetch
        self.roots, self.values, self.targets, self.residual = roots, values, targets, residual
        self.hoisted = hoisted  # every local the precise tier assigns
        self.pick = None
        self.carry = []  # the locals the precise tier hands back (used_by)
        self.precise = self.call = None  # its function's name, and the arguments it is called with

    def used_by(self, body: list[str], ns: Namespace) -> FastTier:
        """This tier binding only the values that its residual checks or `body` (the entry's
        code after the guards) read: a model's modules and tables are read by the snapshot
        alone, and a local per value bound on every call costs time for nothing. `carry`:
        those `body` reads, which the precise tier hands back."""
        new = copy.copy(self)
        words = set(_WORD.findall("\n".join(self.residual + body)))
        keep = [i for i, t in enumerate(self.targets) if t in words]
        if len(keep) < len(self.targets):
            new.pick = ns.bind(itemgetter(*keep), "pick") if keep else None  # one key: the item itself
            new.targets = [self.targets[i] for i in keep]
        fetched = {line.split(" = ", 1)[0] for line in self.fetch}
        body_words = set(_WORD.findall("\n".join(body)))
        new.carry = [n for n in self.hoisted if n in body_words and n not in fetched]
        return new


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Fewer sources than this: the precise guards alone (a snapshot would not pay for itself).
_MIN_REGION = 16
# Sources whose expression is a name already (or a tuple of others): nothing to hoist.
_PLAIN_SOURCES = (LocalSource, ObjectSource, ReadBeforeWrites, TensorsSource, TermsSource)
