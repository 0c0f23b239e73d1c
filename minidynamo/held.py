"""Whether anyone but us still refers to a tensor's memory: the check that lets
CUDA-graph replays reuse outputs a caller has dropped.

We keep our own tensors and hand out `detach()` aliases (new TensorImpls on the same
storage). Every strong reference to the storage — an alias, a view of it, a tensor autograd
saved for backward, `.data`, a storage object — raises the storage's use count
(`torch._C._storage_Use_Count`), and a caller holding the storage object itself raises that
object's Python reference count. Both are compared with their values measured when only
our own tensors existed (`calibrate`).
"""
from __future__ import annotations

import sys

import torch

# Strong references to a StorageImpl; takes the integer `untyped_storage()._cdata`.
# Private torch API, so feature-detected: without it nothing is reused.
use_count = getattr(torch._C, "_storage_Use_Count", None)
py_refs = sys.getrefcount


class HeldCheck:
    """Per distinct storage of `tensors`: [cdata, storage object, use count, Python refs]."""

    __slots__ = ("checks",)

    def __init__(self, tensors):
        checks: list = []
        for t in (tensors if use_count is not None else ()):  # no count: nothing to check
            s = t.untyped_storage()  # kept: a caller holding this object shows in its refcount
            if all(s is not c[1] for c in checks):  # tensors may share a storage
                checks.append([s._cdata, s, 0, 0])
        self.checks = checks

    def calibrate(self) -> None:
        """Record the counts as they are now, when nobody else refers to the memory."""
        # Same expressions as `is_free`, so the counts include exactly the same references.
        for c in self.checks:
            c[2] = use_count(c[0])
            c[3] = py_refs(c[1])

    def is_free(self) -> bool:
        """True when nobody but us refers to any of the tensors' memory."""
        for c in self.checks:
            if use_count(c[0]) != c[2] or py_refs(c[1]) != c[3]:
                return False
        return True
