"""Memory a launch program reuses across calls instead of allocating: the outputs it
returns (`empty_like` results only kernels write) and its scratch buffer.

A *slot* is one set of our own tensors. A call takes a slot nobody else holds and gets
`detach()` aliases of its outputs (new tensor objects on the slot's memory) and of the
scratch buffer (held by the call while it runs). Whether a caller still holds an output — the alias, a view, a tensor
autograd saved, the storage — is read from reference counts (`held.HeldCheck`), so an
output is never overwritten while anyone can see it. `o = f(a, b)` in a loop holds the
last output while the next call runs: two slots alternate. When every slot is held (or
the call is on another stream than the slot's last use, or a CUDA graph is being
captured), the program allocates as the plain graph would.

Reuse follows the caching allocator's rule: memory is handed out again on the stream it
was last used on, once its tensors are gone; work queued on that stream runs in order.
Outputs above `MAX_BYTES` are not pooled: their allocation is cheap next to their kernels,
and two slots would hold that much memory for as long as the entry lives.
"""
from __future__ import annotations

import threading

import torch

from .. import held

MAX_SLOTS = 2
MAX_BYTES = 1 << 20  # per slot: outputs plus scratch


class _Slot:
    """Our own tensors (outputs, then the scratch buffer) on one stream, and per tensor
    [storage cdata, storage object, use count with one alias, Python refs of the storage]."""

    __slots__ = ("tensors", "stream", "checks")

    def __init__(self, tensors: tuple, stream):
        self.tensors = tensors
        self.stream = stream
        self.checks = [[t.untyped_storage()._cdata, t.untyped_storage(), 0, 0] for t in tensors]
        for c in self.checks:  # now nobody but us has seen these tensors
            c[2] = held.use_count(c[0]) + 1  # + the alias `claim` makes before it checks
            c[3] = held.py_refs(c[1])

    def claim(self):
        """Aliases of the slot's tensors if nobody else holds them, else None.

        The aliases are made first and count in the check: two threads claiming one slot
        both see the other's alias and both give up; no lock is needed."""
        aliases = [t.detach() for t in self.tensors]
        count, refs = held.use_count, held.py_refs
        for c in self.checks:  # indexed, as when measured: a local would add a reference
            if count(c[0]) != c[2] or refs(c[1]) != c[3]:
                return None
        return aliases


class OutputPool:
    """`take(stream)` → [output aliases..., scratch buffer alias], or None: allocate."""

    def __init__(self, make, capturing):
        self._make = make  # () -> tuple of tensors: the outputs, then the scratch buffer if any
        self._capturing = capturing  # () -> True while the current stream is capturing
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()  # for adding slots
        self.reused = self.allocated = 0

    def take(self, stream):
        if self._capturing():
            return None  # a capture must own its memory: the graph's pool
        for slot in self._slots:
            if slot.stream == stream:
                got = slot.claim()
                if got is not None:
                    self.reused += 1
                    return got
        if len(self._slots) >= MAX_SLOTS:
            return None
        with self._lock:
            if len(self._slots) >= MAX_SLOTS:
                return None
            slot = _Slot(self._make(), stream)
            got = slot.claim()  # before other threads can see the slot
            self._slots.append(slot)
            self.allocated += 1
            return got

    def describe(self) -> str:
        return f"{len(self._slots)} slot(s), reused {self.reused} time(s)"


def capturing_check(device: torch.device):
    """What tells a capture is under way on `device`'s current stream."""
    if device.type == "cuda":
        return torch._C._cuda_isCurrentStreamCapturing
    return lambda: False
