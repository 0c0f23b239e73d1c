"""Calling a module passed in: `module(*args)` is `Module.__call__`, which runs its
forward (and, where there are any, its hooks)."""
from __future__ import annotations


def call_module(tx, module, args, kwargs):
    """`module(*args, **kwargs)` for a UserObjectVariable of an nn.Module whose class keeps
    Module.__call__: its forward, declining where it has hooks (guarded that none is added)."""
    from .objects import _guard_no_hooks
    _guard_no_hooks(tx, module.value, module.source)
    return module.call_method(tx, "forward", args, kwargs)
