"""Where the trace's attribute stores on objects from outside go: recorded on the output
for the entry to write after the graph, and the module tables that decide what
Module.__setattr__ does with a write (guard sources)."""
from __future__ import annotations

from dataclasses import dataclass

from ..sources import Source


def record_store(output, var) -> None:
    """`var` (an object from outside) has an attribute set by the trace: the entry writes
    it after the graph, with the outside lists and dicts the trace changed, in the order
    first changed (side_effects.py)."""
    # NOTE: while a backward or a checkpointed body is traced, function_effects.outside_unchanged
    # puts a watch on the output: the store is refused, or kept to be checked (body_stores.py).
    watch = vars(output).get("store_watch")
    if watch is not None:
        watch.object_store(output, var)
    if id(var) not in output.mutated:
        output.mutated[id(var)] = (var, f"setting attributes of {var.source.name()}")


@dataclass(frozen=True)
class ModuleTablesSource(Source):
    """Whether `name` is in one of a module's tables (parameters, buffers, submodules):
    where it is, Module.__setattr__ registers a write instead of setting it."""

    base: Source
    attr: str

    def expr(self, ns):
        b = self.base.expr(ns)
        return "(" + " or ".join(f"{self.attr!r} in {b}.{t}" for t in ("_parameters", "_buffers", "_modules")) + ")"

    def name(self, naming=None):
        return f"{self.attr!r} in the tables of {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


@dataclass(frozen=True)
class BufferSlotSource(Source):
    """Whether `attr` names a buffer of the module and none of its parameters or
    submodules: where it does, Module.__setattr__ registers a tensor stored there as that
    buffer."""

    base: Source
    attr: str

    def expr(self, ns):
        b = self.base.expr(ns)
        return (f"({self.attr!r} in {b}._buffers and {self.attr!r} not in {b}._parameters "
                f"and {self.attr!r} not in {b}._modules)")

    def name(self, naming=None):
        return f"{self.attr!r} as a buffer of {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1
