"""The launch program: a graph's code with each Triton launch calling its compiled kernel's
C entry directly, built once every launcher of the graph has resolved (after the first call).
It is written from what the launchers resolved (`Launcher.variants`, resolved.py), by the
same renderers as the launchers' own variants (launch_code.py).

What a call then costs, beyond the graph's own torch ops:

* one check of the global state the launchers depend on (current device, launch hooks,
  debug flag, autotuner choices, globals the kernels read); on any change the entry runs
  the plain graph, whose launchers re-check everything themselves;
* one ``data_ptr()`` per tensor value the launches take, one alignment test for values
  that are not fresh allocations (a view of an input may lose Triton's 16-byte alignment:
  that launch then goes through its launcher, which picks or builds a matching variant);
* for a launch whose grid and sizes are values of the graph (a launcher with a per-call
  grid): the specialisation of its int arguments (==1, divisible by 16, width), its
  autotuner's key and its heuristics, else that launch goes through its launcher;
* no tensor at all for scratch values — ``torch.empty_like`` results used only as launch
  arguments (not returned, not used by torch ops): they are slices of one uint8 buffer
  allocated per call (scratch.py), sized per call when sizes are symbolic. Their
  contents are as undefined as ``empty_like``'s, and the buffer is freed when the call
  returns, like the tensors it replaces.

Device and dtype of every tensor are pinned by the entry's guards (inputs) and by the
trace (values made inside), so they are not re-checked here.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from ..memory_facts import aliased_values, written_values
from ..sources import identifier
from .capture import launch_record
from .launch_code import (alignment_condition, kernel_args, launch_call, per_call_conditions,
                          scalar_conditions, state_conditions, stream_expr)
from .resolved import SCALAR, TENSOR, HeuristicCheck
from .scratch import SCRATCH_ALIGN, SizeExprs, as_int, definitely_contiguous, layout, scratch_view, slot_layout
from .. import codegen

DEVICE_TYPES = ("cuda",)  # where values are allocated from metadata (tests add "cpu")


class _Launch:
    def __init__(self, node, record):
        self.node = node
        self.record = record
        self.launcher = record.launcher()
        kwargs = node.kwargs["kwargs"]
        self.args = [kwargs[n] for n in self.launcher.dynamic_names]
        variants = self.launcher.variants
        self.resolved = variants[0] if variants else None

    def why_not(self) -> str | None:
        if self.resolved is None:
            return f"{self.record.name}: {self.launcher.describe()}"
        if not self.resolved.grid_per_call and self.resolved.grid is None:
            return f"{self.record.name}: its grid is computed per call by a callable"
        return None

    def heuristic_tensors(self) -> set:
        """Tensor values a recomputed heuristic reads: they must exist as tensors."""
        out = set()
        for check in self.resolved.per_call_checks if self.resolved else ():
            if isinstance(check, HeuristicCheck):
                out.update(self.args[r.index] for _, r in check.inputs if r.is_dynamic)
        return out

    def grid_entries(self):
        """The grid of this call as graph values or ints: (x, y, z)."""
        grids = self.node.kwargs["grid"]
        return grids[self.resolved.config_index or 0]


def _empty_like(n):
    """The fake result of an `empty_like(x)` node (the program allocates it from this
    metadata, which the guards pin, without touching x), else None."""
    if n.op != "call_function" or n.target is not torch.empty_like or len(n.args) != 1 \
            or set(n.kwargs) - {"dtype"}:
        return None
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.device.type not in DEVICE_TYPES or val.requires_grad:
        return None
    return val


def _is_static(val) -> bool:
    return all(as_int(s) is not None for s in val.shape)


def fresh_allocations(nodes) -> set:
    """Values that start a new allocation (the trace saw the result share no argument's
    storage, at offset 0), so aligned by the allocator, and that no torch op writes later
    (set_ could move them)."""
    fresh = set()
    for n in nodes:
        if n.op not in ("call_function", "call_method") or launch_record(n) is not None:
            continue
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and aliased_values(n) == [] and as_int(val.storage_offset()) == 0:
            fresh.add(n)
        written = written_values(n)
        fresh.difference_update(n.all_input_nodes if written is None else written)
    return fresh


def _scratch_candidates(nodes, launches, outputs, sizes: SizeExprs) -> dict:
    """node -> (first index, last index, bytes) for contiguous empty_like values that only
    launches use (or empty_like, for their metadata); with symbolic sizes, those whose
    sizes are computed from the inputs."""
    index = {n: i for i, n in enumerate(nodes)}
    keep = set().union(*(launch.heuristic_tensors() for launch in launches.values()))
    found = {}
    for n in nodes:
        val = _empty_like(n)
        if val is None or n in outputs or n in keep or not n.users or not definitely_contiguous(val):
            continue
        if not _is_static(val):
            try:
                for s in (*val.shape, val.numel()):
                    sizes.render(s)
            except ValueError:
                continue
        if all(u in launches or _empty_like(u) is not None for u in n.users):
            data_users = [index[u] for u in n.users if u in launches]
            if data_users:
                found[n] = (index[n], max(data_users), val.numel() * val.element_size())
    return found


class ProgramBuilder:
    """Renders the program's lines into the entry's namespace."""

    def __init__(self, graph, ns, input_exprs: dict, var_name):
        self.ns = ns
        self.names = ns  # launch_code binds into the entry's own namespace
        self.var_name = var_name
        self.nodes = list(graph.nodes)
        out = next(n for n in self.nodes if n.op == "output")
        self.outputs = set(out.all_input_nodes)
        self.launches = {n: _Launch(n, r) for n in self.nodes if (r := launch_record(n)) is not None}
        self.p = ns.prefix
        self.pointers: dict = {}  # value -> local holding its data_ptr()
        self.spec_checks: dict = {}  # (value, ScalarSpec) -> local: true when it does not match
        self._locals = 0
        self.fresh = fresh_allocations(self.nodes)
        self._protos: dict = {}  # (shape, dtype, device) -> (empty_like's strides, broadcast tensor)
        self.sizes = SizeExprs(self.nodes, input_exprs)

    def why_not(self) -> str | None:
        if not self.launches:
            return "no Triton launches"
        for launch in self.launches.values():
            why = launch.why_not()
            if why:
                return why
        if len({launch.resolved.state.device for launch in self.launches.values()}) != 1:
            return "launches on more than one device"
        return None

    def local(self, hint: str) -> str:
        """A fresh local variable name of the program."""
        while True:
            self._locals += 1
            name = f"{self.p}{hint}{self._locals}"
            if name not in self.ns.values:
                self.ns.reserve(name)
                return name

    # -- head: global state, stream, scratch buffer ------------------------------------
    def head(self) -> list[str]:
        """The lines that start the program (stream, scratch buffer); `self.conds` is the
        check of global launch state that must hold for the program to run."""
        conds: list[str] = []
        for launch in self.launches.values():
            for c in state_conditions(launch.resolved.state, self.names, identifier(launch.record.name)):
                if c not in conds:
                    conds.append(c)
        self.conds = " or ".join(conds) or "False"
        first = next(iter(self.launches.values())).resolved
        self.st, self.sbuf, self.sb = self.local("st"), self.local("sbuf"), self.local("sb")
        lines = [f"{self.st} = {stream_expr(first.state, self.names)}"]
        intervals = _scratch_candidates(self.nodes, self.launches, self.outputs, self.sizes)
        self.scratch: dict = {}  # value -> its offset in the buffer (an expression)
        if not intervals:
            self.scratch_bytes = 0
            return lines
        total = None
        if all(isinstance(size, int) for _, _, size in intervals.values()):
            offsets, total = layout(intervals)
            self.scratch = {n: str(off) for n, off in offsets.items()}
            self.scratch_bytes = total
            total_expr = str(total)
        else:
            total_expr = self._symbolic_layout(intervals, lines)
            self.scratch_bytes = "a per-call number of"
        dev = next(iter(intervals)).meta["val"].device
        if isinstance(total, int) and self.scratch:
            lines.append(f"{self.sbuf} = {self._allocation((total,), (1,), torch.uint8, dev)}")
        else:
            lines.append(f"{self.sbuf} = {self.names.bind_as(torch.empty, 'empty')}(({total_expr},), "
                         f"dtype={self.names.bind_as(torch.uint8, 'uint8')}, device={self.names.bind(dev)})")
        lines.append(f"{self.sb} = {self.sbuf}.data_ptr()")
        return lines

    def _symbolic_layout(self, intervals: dict, lines: list) -> str:
        """Per-call sizes: each value's bytes rounded up to the alignment, slots as large as
        their largest value, slot offsets as running sums. Returns the total's expression."""
        slots, n_slots = slot_layout(intervals)
        members: list = [[] for _ in range(n_slots)]
        computed: dict = {}  # size expression -> the local holding it rounded (values of one size)
        for n, (_, _, size) in intervals.items():
            c = as_int(size)
            if c is not None:
                text = str(-(-c // SCRATCH_ALIGN) * SCRATCH_ALIGN)
            else:
                expr = self.sizes.render(size)
                text = computed.get(expr)
                if text is None:
                    text = computed[expr] = self.local("nbytes")
                    lines.append(f"{text} = ({expr} + {SCRATCH_ALIGN - 1}) & {-SCRATCH_ALIGN}")
            if text not in members[slots[n]]:
                members[slots[n]].append(text)
        offsets, end = ["0"], None
        for j, texts in enumerate(members):
            size = texts[0] if len(texts) == 1 else f"max({', '.join(texts)})"
            expr = size if j == 0 else f"{offsets[j]} + {size}"
            end = self.local("offset")
            lines.append(f"{end} = {expr}")
            offsets.append(end)
        self.scratch = {n: offsets[slots[n]] for n in intervals}
        return end

    # -- nodes --------------------------------------------------------------------------
    def render(self, node, names):
        if node in self.scratch:
            return [], None
        val = _empty_like(node)
        if val is not None:
            return self._empty_like_lines(node, val, names)
        launch = self.launches.get(node)
        if launch is None:
            if node.op in ("call_function", "call_method") and written_values(node) != []:
                self.pointers.clear()  # resize_/set_, through any alias, move storage
            return None
        return self._launch_lines(launch, names), None

    def _empty_like_lines(self, node, val, names):
        name = names.get(node) or self.var_name(node)
        like = node.args[0]
        bind = self.names.bind_as
        dtype = f"dtype={self.names.bind(val.dtype)}"
        if like not in self.scratch and not node.kwargs:
            # Same metadata as the fake result (the guards pin the real argument's, or it
            # is a value made here), and parsing one argument costs less than the rest.
            return [f"{name} = {bind(torch.empty_like, 'empty_like')}({names[like]})"], name
        if not _is_static(val):
            if like not in self.scratch:
                return [f"{name} = {bind(torch.empty_like, 'empty_like')}({names[like]}, {dtype})"], name
            # A scratch value is contiguous, and so is an empty_like of it.
            return [f"{name} = {bind(torch.empty, 'empty')}({self._shape(val)}, {dtype}, "
                    f"device={self.names.bind(val.device)})"], name
        return [f"{name} = {self._allocation(tuple(val.shape), val.stride(), val.dtype, val.device)}"], name

    def _allocation(self, shape: tuple, stride: tuple, dtype, device) -> str:
        """An uninitialised tensor of fixed sizes and strides: ``empty_like`` of a bound
        tensor of that shape whose one element is broadcast (expand) where that gives
        these strides (one argument to parse instead of empty_strided's four), else
        ``empty_strided``."""
        shape, stride = tuple(int(s) for s in shape), tuple(int(s) for s in stride)
        key = (shape, dtype, device)
        if key not in self._protos:
            try:  # the strides empty_like gives the broadcast shape, found on the meta device
                meta = torch.empty((), dtype=dtype, device="meta").expand(shape)
                self._protos[key] = (torch.empty_like(meta).stride(),
                                     torch.empty((), dtype=dtype, device=device).expand(shape))
            except (RuntimeError, TypeError, NotImplementedError):  # a dtype without a plain empty
                self._protos[key] = (None, None)
        strides, proto = self._protos[key]
        if strides == stride:
            return f"{self.names.bind_as(torch.empty_like, 'empty_like')}({self.names.bind_as(proto, 'shape_of')})"
        return (f"{self.names.bind_as(torch.empty_strided, 'empty_strided')}("
                f"{shape!r}, {stride!r}, dtype={self.names.bind(dtype)}, device={self.names.bind(device)})")

    def _shape(self, val) -> str:
        dims = [self.sizes.render(s) for s in val.shape]
        return "(" + "".join(d + ", " for d in dims) + ")"

    def _pointer(self, value, names, lines) -> str:
        if value in self.scratch:
            off = self.scratch[value]
            return f"{self.sb} + {off}" if off != "0" else self.sb
        var = self.pointers.get(value)
        if var is None:
            var = self.pointers[value] = self.local("p")
            lines.append(f"{var} = {names[value]}.data_ptr()")
        return var

    def _value(self, value, names) -> str:
        return names[value] if isinstance(value, fx.Node) else self.names.const(value, "c")

    def _launch_lines(self, launch: _Launch, names) -> list[str]:
        r, lines, checks = launch.resolved, [], []
        pointers = list(launch.args)   # kernel arguments: data pointers for tensors
        objects = list(launch.args)    # what heuristics and the launcher are given
        for p in r.params:
            if p.role == TENSOR:
                value = launch.args[p.value_index]
                pointers[p.value_index] = ptr = self._pointer(value, names, lines)
                objects[p.value_index] = None if value in self.scratch else names[value]
                if value in self.scratch or (value in self.fresh and p.aligned):
                    continue
                cond = alignment_condition(p, ptr)
                if cond:
                    checks.append(cond)
            elif p.role == SCALAR:
                value = launch.args[p.value_index]
                pointers[p.value_index] = objects[p.value_index] = e = self._value(value, names)
                checks.append(self._scalar_check(value, p.spec, e, lines))
        checks += per_call_conditions(r, objects, self.names, self.local)
        if r.grid_per_call:
            grid = [self._value(g, names) for g in launch.grid_entries()]
        else:
            grid = [str(g) for g in r.grid]
        call = launch_call(r, grid, self.st, kernel_args(r, pointers, self.names), self.names)
        if not checks:
            return lines + [call]
        args = [self._scratch_tensor(v) if v in self.scratch else o for v, o in zip(launch.args, objects)]
        if r.grid_per_call:
            args.insert(0, self._grid_arg(launch, names))
        slow = f"{self.names.bind_as(launch.launcher, 'launch_' + launch.record.name)}({', '.join(args)})"
        return lines + [f"if {' or '.join(checks)}:", f"    {slow}", "else:", f"    {call}"]

    def _scalar_check(self, value, spec, expr: str, lines: list) -> str:
        """A local that is true when `value` does not have specialisation `spec`: computed
        where it is first needed, read by every launch that takes the same value (a size
        that several launches take is checked once)."""
        key = (value, spec)
        local = self.spec_checks.get(key)
        if local is None:
            local = self.spec_checks[key] = self.local("not_" + identifier(str(expr)).strip("_")[:20])
            lines.append(f"{local} = {' or '.join(scalar_conditions(spec, expr))}")
        return local

    def _scratch_tensor(self, value) -> str:
        val = value.meta["val"]
        if _is_static(val):
            nbytes, shape = str(val.numel() * val.element_size()), repr(tuple(val.shape))
        else:
            nbytes, shape = self.sizes.render(val.numel() * val.element_size()), self._shape(val)
        off = self.scratch[value]
        return (f"{self.names.bind_as(scratch_view, 'scratch_view')}({self.sbuf}, {off}, {nbytes}, "
                f"{self.names.bind(val.dtype)}, {shape})")

    def _grid_arg(self, launch: _Launch, names) -> str:
        def one(g):
            return "(" + ", ".join(self._value(x, names) for x in g) + ")"
        grids = launch.node.kwargs["grid"]
        if launch.launcher.config_kwargs is None:
            return one(grids[0])
        return "(" + "".join(one(g) + ", " for g in grids) + ")"


def program_lines(graph, ns, input_exprs: dict, var_name):
    """(lines, builder) of the program's body up to (not including) its return, or
    (None, reason). The program may run only when `builder.conds` is false."""
    builder = ProgramBuilder(graph, ns, input_exprs, var_name)
    why = builder.why_not()
    if why:
        return None, why
    lines = builder.head()
    body = codegen.graph_lines(graph, ns, input_exprs, var_name, render=builder.render)
    if body is None:
        return None, "the graph has a node without a plain-Python form"
    return lines + body, builder
