"""torch.distributed values read in a trace, so functional collectives trace as graph ops.

`torch.distributed._functional_collectives` (`all_reduce`, `all_gather_tensor`,
`reduce_scatter_tensor`, `wait_tensor`, ...) is Python over the `_c10d_functional`
operators: the only thing a trace cannot read in it is the process group, a C object whose
`group_name` is a pybind property. A group passed in (or reached through
`dist.group.WORLD`) is pinned by identity; its name, size and rank are then constants of
the trace, and the collective is one `torch.ops._c10d_functional.*` node run on fakes at
trace time (its meta kernel: nothing is sent) and for real when the graph runs. Under a
trace `_maybe_wrap_tensor` follows the compiling branch (`torch.compiler.is_compiling()`
is True), so each collective is followed by its `wait_tensor` node, as under torch.compile.
"""
from __future__ import annotations

from ..exc import unsupported
from .base import RealValueVariable
from .constant import ConstantVariable

try:
    import torch.distributed as dist
    ProcessGroup = dist.ProcessGroup if dist.is_available() else None
except ImportError:  # a build without distributed
    ProcessGroup = None

# Facts of a group that cannot change while it lives: constants of the trace under the
# group's identity guard.
_ATTRIBUTES = ("group_name", "group_desc")
_QUERIES = ("size", "rank", "name")


class ProcessGroupVariable(RealValueVariable):
    """A `ProcessGroup` passed in or read from a global (guarded by identity)."""

    __slots__ = ()

    def describe(self):
        return f"process group {self.value.group_name!r}"

    def var_getattr(self, tx, name):
        if name in _ATTRIBUTES:
            return ConstantVariable(getattr(self.value, name))
        if name in _QUERIES:
            return self.method_getattr(tx, name)
        unsupported("construct", f"attribute {name!r} of a ProcessGroup is not traced "
                                 "(group_name, group_desc, size(), rank() and name() are)")

    def call_method(self, tx, name, args, kwargs):
        if name in _QUERIES and not args and not kwargs:
            return ConstantVariable(getattr(self.value, name)())
        unsupported("call", f"ProcessGroup.{name}() is not traced: collectives on a group run "
                            "eagerly (use torch.distributed._functional_collectives in traced code)")


def is_process_group(value) -> bool:
    return ProcessGroup is not None and isinstance(value, ProcessGroup)


def _wrap_process_group(tx, value, source):
    return ProcessGroupVariable(value, source)
