"""The launch program: a graph's code with each Triton launch calling its compiled kernel's
C entry directly, built once every launcher of the graph has resolved (after the first call).

What a call then costs, beyond the graph's own torch ops:

* one check of the global state the launchers depend on (current device, launch hooks,
  debug flag, autotuner choices, globals the kernels read); on any change the entry runs
  the plain graph, whose launchers re-check everything themselves;
* one ``data_ptr()`` per tensor value the launches take, one alignment test for values
  that are not fresh allocations (a view of an input may lose Triton's 16-byte alignment:
  that launch then goes through its launcher, which picks or builds a matching variant);
* no tensor at all for scratch values — ``torch.empty_like`` results used only as launch
  arguments (not returned, not used by torch ops): they are slices of one uint8 buffer
  allocated per call, laid out by lifetime so values that are not live at the same time
  share memory. Their contents are as undefined as ``empty_like``'s, and the buffer is
  freed when the call returns, like the tensors it replaces.

Device and dtype of every tensor are pinned by the entry's guards (inputs) and by the
trace (values made inside), so they are not re-checked here.
"""
from __future__ import annotations

import re

import torch

from .. import codegen
from ..graph import aliased_values, written_values
from .capture import launch_record

SCRATCH_ALIGN = 256  # bytes: more than any alignment Triton specialises on
DEVICE_TYPES = ("cuda",)  # where values are allocated from metadata (tests add "cpu")
_NAME = re.compile(r"(?<![.\w])([A-Za-z_]\w*)")


def scratch_view(buf, offset: int, nbytes: int, dtype, shape):
    """A scratch value as a tensor, for a launch that leaves the direct path."""
    return buf[offset:offset + nbytes].view(dtype).view(shape)


class _Launch:
    def __init__(self, node, record):
        self.record = record
        self.launcher = self.record.launcher()
        self.args = [node.kwargs["kwargs"][n] for n in self.record.dynamic_names]
        variants = self.launcher._variants
        self.ns = variants[0][1] if variants else None

    def why_not(self) -> str | None:
        if self.ns is None:
            return f"{self.record.name}: {self.launcher.describe()}"
        if self.ns["SCALARS"] or self.ns["GRID"] is None:
            return f"{self.record.name}: scalar arguments change per call"
        return None


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


def fresh_allocations(nodes) -> set:
    """Values that start a new allocation (the trace saw the result share no argument's
    storage, at offset 0), so aligned by the allocator, and that no torch op writes later
    (set_ could move them)."""
    fresh = set()
    for n in nodes:
        if n.op not in ("call_function", "call_method") or launch_record(n) is not None:
            continue
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and aliased_values(n) == [] and val.storage_offset() == 0:
            fresh.add(n)
        written = written_values(n)
        fresh.difference_update(n.all_input_nodes if written is None else written)
    return fresh


def _scratch_candidates(nodes, launches, outputs) -> dict:
    """node -> (first index, last index, bytes) for contiguous empty_like values that only
    launches use (or empty_like, for their metadata)."""
    index = {n: i for i, n in enumerate(nodes)}
    found = {}
    for n in nodes:
        val = _empty_like(n)
        if val is None or n in outputs or not n.users or not val.is_contiguous():
            continue
        if all(u in launches or _empty_like(u) is not None for u in n.users):
            data_users = [index[u] for u in n.users if u in launches]
            if data_users:
                found[n] = (index[n], max(data_users), val.numel() * val.element_size())
    return found


def layout(intervals: dict) -> tuple[dict, int]:
    """(node -> byte offset, total bytes): values whose lifetimes do not overlap share
    memory (best fit over freed blocks, else the end of the buffer)."""
    offsets, live, free, top = {}, [], [], 0
    for node, (start, end, size) in sorted(intervals.items(), key=lambda kv: kv[1][0]):
        size = max(SCRATCH_ALIGN, -(-size // SCRATCH_ALIGN) * SCRATCH_ALIGN)
        for blk in [b for b in live if b[0] < start]:
            live.remove(blk)
            free.append((blk[1], blk[2]))
        fits = [b for b in free if b[1] >= size]
        if fits:
            off, have = min(fits, key=lambda b: b[1])
            free.remove((off, have))
            if have > size:
                free.append((off + size, have - size))
        else:
            off, top = top, top + size
        live.append((end, off, size))
        offsets[node] = off
    return offsets, top


class ProgramBuilder:
    """Renders the program's lines into the entry's namespace."""

    def __init__(self, graph, ns, var_name):
        self.ns = ns
        self.var_name = var_name
        self.nodes = list(graph.nodes)
        out = next(n for n in self.nodes if n.op == "output")
        self.outputs = set(out.all_input_nodes)
        self.launches = {n: _Launch(n, r) for n in self.nodes if (r := launch_record(n)) is not None}
        self.p = ns.prefix
        self.pointers: dict = {}  # value -> local holding its data_ptr()
        self._locals = 0
        self.fresh = fresh_allocations(self.nodes)

    def why_not(self) -> str | None:
        if not self.launches:
            return "no Triton launches"
        for launch in self.launches.values():
            why = launch.why_not()
            if why:
                return why
        if len({launch.ns["DEV"] for launch in self.launches.values()}) != 1:
            return "launches on more than one device"
        return None

    def _rename(self, code: str, vns: dict) -> str:
        """A variant's code, its names rebound in the entry's namespace."""
        def repl(m):
            name = m.group(1)
            if name in vns and name != "__builtins__":
                v = vns[name]
                if v is None or type(v) in (bool, int):
                    return repr(v)
                return self.ns.bind(v, name.lower())
            return name
        return _NAME.sub(repl, code)

    def head(self) -> list[str]:
        """The lines that start the program (stream, scratch buffer); `self.conds` is the
        check of global launch state that must hold for the program to run."""
        conds: list[str] = []
        for launch in self.launches.values():
            for c in launch.ns["GLOBAL_CONDS"]:
                c = self._rename(c, launch.ns)
                if c not in conds:
                    conds.append(c)
        first = next(iter(self.launches.values())).ns
        self.st, self.sbuf, self.sb = self.local("st"), self.local("sbuf"), self.local("sb")
        self.conds = " or ".join(conds) or "False"
        lines = [f"{self.st} = {self._rename('STREAM(DEV)', first)}"]
        intervals = _scratch_candidates(self.nodes, self.launches, self.outputs)
        self.scratch, total = layout(intervals)
        self.scratch_bytes = total
        if self.scratch:
            dev = next(iter(self.scratch)).meta["val"].device
            lines.append(f"{self.sbuf} = {self.ns.bind(torch.empty, 'empty')}(({total},), "
                         f"dtype={self.ns.bind(torch.uint8, 'uint8')}, device={self.ns.bind(dev, 'dev')})")
            lines.append(f"{self.sb} = {self.sbuf}.data_ptr()")
        return lines

    def render(self, node, names):
        if node in self.scratch:
            return [], None
        val = _empty_like(node)
        if val is not None:
            name = names.get(node) or self.var_name(node)
            like = node.args[0]
            if like not in self.scratch and not node.kwargs:
                # Same metadata as the fake result (the guards pin the real argument's, or it
                # is a value made here), and parsing one argument costs less than the rest.
                return [f"{name} = {self.ns.bind(torch.empty_like, 'empty_like')}({names[like]})"], name
            return [f"{name} = {self.ns.bind(torch.empty_strided, 'empty_strided')}("
                    f"{tuple(val.shape)!r}, {val.stride()!r}, dtype={self.ns.bind(val.dtype, 'dtype')}, "
                    f"device={self.ns.bind(val.device, 'dev')})"], name
        launch = self.launches.get(node)
        if launch is None:
            if node.op in ("call_function", "call_method") and written_values(node) != []:
                self.pointers.clear()  # resize_/set_, through any alias, move storage
            return None
        return self._launch_lines(launch, names), None

    def _pointer(self, value, names, lines) -> str:
        if value in self.scratch:
            off = self.scratch[value]
            return f"{self.sb} + {off}" if off else self.sb
        var = self.pointers.get(value)
        if var is None:
            var = self.pointers[value] = self.local("p")
            lines.append(f"{var} = {names[value]}.data_ptr()")
        return var

    def local(self, hint: str) -> str:
        """A fresh local variable name of the program."""
        while True:
            self._locals += 1
            name = f"{self.p}{hint}{self._locals}"
            if name not in self.ns.values:
                self.ns.reserve(name)
                return name

    def _launch_lines(self, launch: _Launch, names) -> list[str]:
        vns, lines, checks = launch.ns, [], []
        ptrs = {}
        for i, aligned in vns["TENSORS"]:
            value = launch.args[i]
            ptrs[i] = self._pointer(value, names, lines)
            if value in self.scratch or (value in self.fresh and aligned):
                continue
            checks.append(f"{ptrs[i]} & 15" if aligned else f"not {ptrs[i]} & 15")
        args = []
        for p in vns["POS"]:
            if p.startswith("p"):
                args.append(ptrs[int(p[1:])])
            else:  # a value fixed at resolution (constants, constexprs, config values)
                args.append(codegen.literal(vns[p], self.ns))
        template = vns["CALL"](vns["GRID"], "_ST_", [f"_A{k}_" for k in range(len(args))])
        call = self._rename(template, vns).replace("_ST_", self.st)
        for k, a in enumerate(args):
            call = call.replace(f"_A{k}_", a)
        if not checks:
            return lines + [call]
        tensors = []
        for value in launch.args:
            if value in self.scratch:
                val = value.meta["val"]
                tensors.append(f"{self.ns.bind(scratch_view, 'scratch_view')}({self.sbuf}, "
                               f"{self.scratch[value]}, {val.numel() * val.element_size()}, "
                               f"{self.ns.bind(val.dtype, 'dtype')}, {tuple(val.shape)!r})")
            else:
                tensors.append(names[value])
        slow = f"{self.ns.bind(launch.launcher, 'launch_' + launch.record.name)}({', '.join(tensors)})"
        return lines + [f"if {' or '.join(checks)}:", f"    {slow}", "else:", f"    {call}"]


def program_lines(graph, ns, input_exprs: dict, var_name):
    """(lines, builder) of the program's body up to (not including) its return, or
    (None, reason). The program may run only when `builder.conds` is false."""
    builder = ProgramBuilder(graph, ns, var_name)
    why = builder.why_not()
    if why:
        return None, why
    lines = builder.head()
    body = codegen.graph_lines(graph, ns, input_exprs, var_name, render=builder.render)
    if body is None:
        return None, "the graph has a node without a plain-Python form"
    return lines + body, builder
