"""kernel[grid](...) → one launch node in the graph.

A launch becomes `triton_kernel_wrapper_mutation(kernel_idx=, grid=, kwargs={...})`: every
kernel argument by parameter name inside `kwargs` (tensors as graph values, the rest
inline), so a parameter literally named `kernel` or `grid` cannot clash. The kernel itself
lives in a side table owned by the graph (`KernelTable`), released with it.

Grids are evaluated at trace time (shapes are static and guarded): a tuple for a plain
kernel, one tuple per config for an autotuned one (the real autotuner still chooses the
config at run time; the grid for its choice is looked up, never recomputed).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from ..exc import unsupported
from .launcher import make_launcher

# Keyword arguments Triton's launcher takes for itself, not for the kernel.
SPECIAL_KWARGS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                  "launch_cooperative_grid", "launch_pdl", "debug")


@dataclass(eq=False)
class LaunchRecord:
    """One captured launch: what the graph's node index refers to."""

    kernel: object
    name: str
    grid: object  # a tuple, or a ConfigGrid for an autotuned kernel
    constant_kwargs: dict
    dynamic_names: tuple
    mutation: object = None  # MutationAnalysis
    _launcher: object = field(default=None, repr=False)
    # The node's grid holds graph values (sizes): the launcher takes it first in each call.
    grid_per_call: bool = False

    def launcher(self):
        if self._launcher is None:
            self._launcher = make_launcher(self.kernel, self.grid, self.constant_kwargs,
                                           self.dynamic_names, grid_per_call=self.grid_per_call)
            # fx names a call's target after these (the node shows the kernel's name).
            self._launcher.__name__ = self._launcher.__qualname__ = f"launch_{self.name}"
            self._launcher.__module__ = "minidynamo.triton"
        return self._launcher

    def launch(self, values: tuple, grid=None):
        if self.grid_per_call:
            self.launcher()(self.call_grid(grid), *values)
        else:
            self.launcher()(*values)

    def call_grid(self, grid):
        """The launcher's grid argument from the node's (a list of 3-tuples, one per config):
        one 3-tuple for a plain kernel, a tuple of them for an autotuned one."""
        if self.launcher().config_kwargs is None:
            return tuple(grid[0])
        return tuple(tuple(g) for g in grid)

    def written_tensors(self) -> list[str] | None:
        """Tensor parameters the kernel writes; None when the analysis could not decide."""
        if self.mutation is None or self.mutation.unknown:
            return None
        return [n for n in self.dynamic_names if self.mutation.is_written(n)]

    def __str__(self):
        grid = self.grid if isinstance(self.grid, tuple) else f"per config {self.grid}"
        if self.mutation is None:
            writes = "not analysed"
        elif self.mutation.unknown:
            writes = f"unknown ({self.mutation.reason}): every tensor argument treated as written"
        else:
            writes = ", ".join(self.written_tensors() or []) or "nothing"
        return f"{self.name}[{grid}] writes: {writes}"


class ConfigGrid:
    """The grid of an autotuned launch: one tuple per config, chosen by the config the
    autotuner picked (Triton passes its kwargs in `meta`)."""

    def __init__(self, keys: tuple, table: dict):
        self.keys = keys
        self.table = table

    def __call__(self, meta):
        key = tuple(meta.get(k) for k in self.keys)
        try:
            return self.table[key]
        except KeyError:
            raise RuntimeError(
                f"minidynamo: the autotuner chose a config {dict(zip(self.keys, key))} that was not "
                "among kernel.configs when the launch was traced") from None

    def __repr__(self):
        return "{" + ", ".join(f"{dict(zip(self.keys, k))}: {g}" for k, g in self.table.items()) + "}"


class KernelTable:
    """The per-graph side table; its `wrapper` is the fx node's target."""

    def __init__(self):
        self.records: list[LaunchRecord] = []
        self.wrapper = TritonKernelWrapperMutation(self)
        self.functional = TritonKernelWrapperFunctional(self)

    def add(self, record: LaunchRecord) -> int:
        self.records.append(record)
        return len(self.records) - 1

    def __iter__(self):
        return iter(self.records)

    def __len__(self):
        return len(self.records)

    def __bool__(self):
        return bool(self.records)


class TritonKernelWrapperMutation:
    """fx target: launch kernel `kernel_idx` of this graph's table; returns None."""

    __name__ = __qualname__ = "triton_kernel_wrapper_mutation"
    __module__ = "minidynamo.triton"

    def __init__(self, table: KernelTable):
        self.table = table

    def __call__(self, *, kernel_idx: int, grid, kwargs: dict):
        record = self.table.records[kernel_idx]
        record.launch(tuple(kwargs[n] for n in record.dynamic_names), grid)


class TritonKernelWrapperFunctional:
    """fx target: clone the tensors the kernel writes (strides preserved; one clone per
    distinct tensor, so aliasing between parameters survives), launch on the clones, and
    return {parameter name: clone} for the written ones."""

    __name__ = __qualname__ = "triton_kernel_wrapper_functional"
    __module__ = "minidynamo.triton"

    def __init__(self, table: KernelTable):
        self.table = table

    def __call__(self, *, kernel_idx: int, grid, kwargs: dict, tensors_to_clone: list):
        record = self.table.records[kernel_idx]
        clones: dict = {}
        by_id: dict = {}
        args = dict(kwargs)
        for name in tensors_to_clone:
            t = kwargs[name]
            clone = by_id.get(id(t))
            if clone is None:
                clone = by_id[id(t)] = clone_preserve_strides(t)
            args[name] = clones[name] = clone
        record.launch(tuple(args[n] for n in record.dynamic_names), grid)
        return clones


def clone_preserve_strides(t):
    import torch
    if t.is_contiguous() or t.numel() == 0:
        return t.clone(memory_format=torch.preserve_format) if t.numel() else t.clone()
    # Copy the whole region the view spans, then view it with the same strides.
    needed = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0)
    buf = torch.as_strided(t, (needed,), (1,)).clone()
    return torch.as_strided(buf, t.shape, t.stride())


def check_grid_value(grid, what: str) -> tuple:
    """A grid value → a 3-tuple of non-negative ints, as Triton normalizes it."""
    if isinstance(grid, list):
        grid = tuple(grid)
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
        unsupported("triton", f"{what}: a grid must be a tuple of 1 to 3 ints, got {grid!r}")
    for g in grid:
        if isinstance(g, bool) or not isinstance(g, int):
            unsupported("triton", f"{what}: grid entries must be ints, got {g!r}")
    return tuple(grid) + (1,) * (3 - len(grid))


def launch_record(node):
    """The LaunchRecord a launch node (`triton_kernel_wrapper_mutation`) runs, else None."""
    if node.op == "call_function" and isinstance(node.target, TritonKernelWrapperMutation):
        return node.target.table.records[node.kwargs["kernel_idx"]]
    return None


def _direct_args(record, node) -> tuple:
    """A launch node's arguments for a direct call of its launcher: the grid first where
    it is computed per call, then the values of the dynamic parameters."""
    kwargs = node.kwargs["kwargs"]
    values = tuple(kwargs[n] for n in record.dynamic_names)
    return (record.call_grid(node.kwargs["grid"]), *values) if record.grid_per_call else values


@contextlib.contextmanager
def direct_launch_nodes(graph):
    """Within the block, each launch node of `graph` calls its kernel's launcher with the
    tensor arguments positionally (what runs); afterwards the nodes are restored to the
    `triton_kernel_wrapper_mutation` form (what is shown)."""
    saved = []
    for node in graph.nodes:
        record = launch_record(node)
        if record is not None:
            saved.append((node, node.target, node.args, node.kwargs))
            node.target = record.launcher()
            node.args = _direct_args(record, node)
            node.kwargs = {}
    try:
        yield
    finally:
        for node, target, args, kwargs in saved:
            node.target, node.args, node.kwargs = target, args, kwargs


def direct_launches(gm):
    """For running (not for showing): a copy of `gm` whose launch nodes call each kernel's
    launcher with the tensor arguments positionally — no kwargs dict, no side-table lookup
    per call. The user-visible graph keeps the `triton_kernel_wrapper_mutation` form."""
    import torch.fx as fx
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    changed = False
    for node in graph.nodes:
        record = launch_record(node)
        if record is not None:
            node.target = record.launcher()
            node.args = _direct_args(record, node)
            node.kwargs = {}
            changed = True
    if not changed:
        return gm
    new = fx.GraphModule(gm, graph, class_name=type(gm).__name__)
    new._minidynamo_kernels = getattr(gm, "_minidynamo_kernels", None)
    return new
