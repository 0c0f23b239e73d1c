"""The real objects standing for the exits of with regions a graph break splits: what the
entry puts in the resume function's stack slots (regions.py). Plain Python objects, made
at run time; the trackers that model them in a resume trace are in contexts.py and
regions.py."""
from __future__ import annotations

import torch


class GradModeExit:
    """The `__exit__` of a grad-mode region a graph break splits. Stateless: it sets the
    mode from before the region, at the region's end in the resume function (normal or by
    an exception); the mode inside is set by the entry after the graph."""

    __slots__ = ("prev",)

    def __init__(self, prev: bool):
        self.prev = prev

    def __call__(self, *exc_info):
        torch._C._set_grad_enabled(self.prev)
        return False

    def __repr__(self):
        return f"<leave grad-mode region: back to {self.prev}>"


class EnteredManager:
    """The exit of a region a graph break splits, for managers whose state cannot be
    rebuilt from constants: a real manager entered after the graph (which left it), as
    eager's was; calling it leaves that manager, exception info included (its answer
    suppresses or not, as eager's)."""

    __slots__ = ("manager",)

    def __init__(self, manager):
        self.manager = manager

    def __call__(self, exc_type, exc, tb):
        return self.manager.__exit__(exc_type, exc, tb)

    def __repr__(self):
        return f"<leave {type(self.manager).__qualname__} entered at a graph break>"


class WithCarrier:
    """Python 3.10: a with block's exit handed to a resume function, whose prologue enters
    it with the block's own SETUP_WITH (resume.WITH_EXIT): entering does nothing, and the
    `__exit__` it finds is the exit, so the block is back on the block stack."""

    __slots__ = ("exit",)

    def __init__(self, exit):
        self.exit = exit

    def __enter__(self):
        return None

    __exit__ = property(lambda self: self.exit)  # looked up on the type, bound to the exit


def enter_real(manager) -> EnteredManager:
    manager.__enter__()
    return EnteredManager(manager)


def null_exit(*exc_info):
    """The `__exit__` of a `contextlib.nullcontext()` region a graph break splits."""
    return False
