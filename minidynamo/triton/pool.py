"""Memory a launch program reuses across calls instead of allocating: the outputs it
returns (`empty_like` results only kernels write) and its scratch buffer.

A *slot* is one set of our own tensors. A call takes a slot nobody else holds and gets
`detach()` aliases of its outputs (new tensor objects on the slot's memory) plus the
scratch buffer. Whether a caller still holds an output — the alias, a view, a tensor
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


class OutputPool:
    """`take(stream)` → (output aliases..., scratch buffer or None), or None: allocate."""

    def __init__(self, make, capturing):
        self._make = make  # () -> (tuple of output tensors, scratch buffer or None)
        self._capturing = capturing  # () -> True while the current stream is capturing
        self._slots: list = []  # [outputs, scratch, stream, HeldCheck]
        self._lock = threading.Lock()  # choosing a free slot and aliasing it is one step
        self.reused = self.allocated = 0

    def take(self, stream):
        if self._capturing():
            return None  # a capture must own its memory: the graph's pool
        with self._lock:
            for slot in self._slots:
                if slot[2] == stream and slot[3].is_free():
                    self.reused += 1
                    return (*[t.detach() for t in slot[0]], slot[1])
            if len(self._slots) >= MAX_SLOTS:
                return None
            outputs, scratch = self._make()
            check = held.HeldCheck(outputs)
            check.calibrate()  # now: nobody but us has seen these tensors
            self._slots.append([outputs, scratch, stream, check])
            self.allocated += 1
            return (*[t.detach() for t in outputs], scratch)

    def describe(self) -> str:
        return f"{len(self._slots)} slot(s), reused {self.reused} time(s)"


def capturing_check(device: torch.device):
    """What tells a capture is under way on `device`'s current stream."""
    if device.type == "cuda":
        return torch._C._cuda_isCurrentStreamCapturing
    return lambda: False
