"""`t.untyped_storage()` of a tensor passed in: its size (`size()`, `nbytes()`, `len()`)
is a constant under a guard on the real storage's size (FSDP's `_same_storage_size`
compares it). The storage's data, address and changes are not traced; a tensor the graph
computes has no storage yet (its backend allocates it): declined there."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..exc import unsupported
from ..guards import Guard
from ..sources import Source
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import BoundMethodVariable


@dataclass(frozen=True)
class StorageBytesSource(Source):
    """The size in bytes of a tensor's storage, `t.untyped_storage().nbytes()` (or of a
    storage passed in, `s.nbytes()`)."""

    base: Source
    of_tensor: bool = True

    def expr(self, ns):
        return f"{self.base.ref(ns)}{'.untyped_storage()' if self.of_tensor else ''}.nbytes()"

    def name(self, naming=None):
        return f"{self.base.name(naming)}{'.untyped_storage()' if self.of_tensor else ''}.nbytes()"

    @property
    def depth(self):
        return self.base.depth + 1


class UntypedStorageVariable(VariableTracker):
    """The storage of an input tensor (`tensor`: its TensorVariable, with a source), or a
    storage passed in (`value`, with its source: a resume function gets one at a break)."""

    __slots__ = ("tensor", "value")

    def __init__(self, tensor, value=None, source=None):
        super().__init__(source)
        self.tensor = tensor
        self.value = value

    def python_type(self):
        return torch.UntypedStorage

    def describe(self):
        return f"the storage of {self.tensor.describe()}" if self.tensor is not None else "a storage"

    def rebuild_new(self, rb) -> str:  # each call of untyped_storage() makes a new object
        return f"{rb.expr(self.tensor)}.untyped_storage()"

    def _nbytes(self, tx) -> ConstantVariable:
        if self.tensor is None:
            nbytes = self.value.nbytes()
            tx.output.guards.add(Guard("EQUALS_MATCH", StorageBytesSource(self.source, of_tensor=False), nbytes))
            return ConstantVariable(nbytes)
        nbytes = tx.output.example_of(self.tensor).untyped_storage().nbytes()
        tx.output.guards.add(Guard("EQUALS_MATCH", StorageBytesSource(self.tensor.source), nbytes))
        return ConstantVariable(nbytes)

    def call_method(self, tx, name, args, kwargs):
        if name in ("size", "nbytes", "__len__") and not args and not kwargs:
            return self._nbytes(tx)
        unsupported("data_dependent", f"UntypedStorage.{name}() of {self.describe()} is not traced",
                    hint="only the storage's size (size(), nbytes()) is traced")

    def var_getattr(self, tx, name):
        if not callable(getattr(torch.UntypedStorage, name, None)):
            unsupported("data_dependent", f"UntypedStorage.{name} of {self.describe()} is not traced")
        return BoundMethodVariable(self, name)


def storage_of(tx, tensor, args, kwargs):
    """`tensor.untyped_storage()`."""
    if args or kwargs:
        unsupported("exceptions", "TypeError: untyped_storage() takes no arguments")
    if tensor.source is None or tx.output.example_of(tensor) is None:
        unsupported("data_dependent", f"Tensor.untyped_storage() of {tensor.describe()}, which the graph computes "
                                      "(its storage is the backend's)")
    return UntypedStorageVariable(tensor)


def _wrap_storage(tx, value, source):
    """A storage passed in: guarded by type (its size where read), never by identity
    (`untyped_storage()` makes a new object on every call)."""
    if source is not None:
        tx.output.guards.add(Guard("TYPE_MATCH", source, torch.UntypedStorage))
    return UntypedStorageVariable(None, value, source)
