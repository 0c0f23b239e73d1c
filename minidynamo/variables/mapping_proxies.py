"""A class's `__dict__` (a mappingproxy) read in the trace: `"x" in C.__dict__`,
`C.__dict__["x"]`, `.get`, `.keys()`, iteration. Read-only, as CPython's: a write raises
TypeError. One key read is that key's presence guarded; whatever reads every key guards
them all, in order (a class's attributes change by assignment to the class)."""
from __future__ import annotations

import types

from ..exc import Unsupported, builtin_raises, unsupported
from ..guards import Guard
from ..sources import ItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable


class MappingProxyVariable(DictVariable):
    __slots__ = ()

    def describe(self):
        return "mappingproxy"

    def check_mutable(self, what, tx):
        verb = "deletion" if "deletion" in what else "assignment"
        builtin_raises(TypeError, [ConstantVariable(f"'mappingproxy' object does not support item {verb}")],
                       f"TypeError: 'mappingproxy' object does not support item {verb}")

    def is_python_constant(self):
        return False

    def copy(self):
        return DictVariable(self.items)  # mappingproxy.copy() copies the dict it shows


class _EntryOf(VariableTracker):
    """A value of a class's `__dict__` the trace does not model (a slot descriptor, a
    weakref getter): read back from its place if it escapes, declined if used."""

    __slots__ = ("what",)

    def __init__(self, source, what):
        super().__init__(source)
        self.what = what

    def describe(self):
        return self.what


def wrap_proxy(tx, value, source):
    if source is None:
        unsupported("construct", "a mappingproxy reached without a source is not traced")
    tx.output.guards.add(Guard("TYPE_MATCH", source, types.MappingProxyType))

    def entries():
        keys = tuple(value)
        tx.output.guards.add(Guard("DICT_KEYS", source, keys, {"type": types.MappingProxyType}))
        out = {}
        for k in keys:
            try:
                out[k] = tx.wrap(value[k], ItemSource(source, k))
            except Unsupported:  # what cannot be modelled stays opaque until used
                out[k] = _EntryOf(ItemSource(source, k), f"{type(value[k]).__name__} {k!r} of a class's __dict__")
        return out
    return MappingProxyVariable({}, source, dict_type=types.MappingProxyType, lazy=entries, size=len(value),
                                real=value)
