"""Modules and hooks for the differential fuzzer (tests/fuzzgen.py, tests/test_fuzz.py).

Every module keeps its input's shape (a Linear runs over a trailing unit dimension), so a
generated function can call one on any of its tensors. The eager and the optimized run
each get their own deep copy of the same module and the same hooks; each side's hooks
record their calls in that side's log, and the logs must match call for call.
"""
from __future__ import annotations

import copy

import torch
from torch import nn


class Lin1(nn.Module):
    """nn.Linear(1, width) over a new trailing dimension, averaged back: any shape in, the
    same shape out."""

    def __init__(self, width=3):
        super().__init__()
        self.lin = nn.Linear(1, width)

    def forward(self, u):
        return self.lin(u.unsqueeze(-1)).mean(-1)


class Custom(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Lin1()
        self.act = nn.Tanh()
        self.scale = nn.Parameter(torch.tensor(0.5))
        self.register_buffer("shift", torch.ones(1))

    def forward(self, u):
        return self.act(self.body(u)) * self.scale + self.shift


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Custom()
        self.act = nn.ReLU()
        self.head = Lin1(2)

    def forward(self, u, k=0.5):
        return self.head(self.act(self.body(u))) + u * k


def _seq():
    # minidynamo declines iterating a Sequential (its forward): these calls run eagerly
    return nn.Sequential(Lin1(), nn.ReLU(), Lin1(2))


MODULE_KINDS = {"seq": _seq, "custom": Custom, "nested": Nested}


def submodule_expr(kind: str) -> str:
    """Source text for the module's first child, as a generated function reaches it."""
    return "m[0]" if kind == "seq" else "m.body"


def make_module(kind: str, instance: int) -> nn.Module:
    """The module a call passes as `m`: the same parameters for the same (kind, instance)."""
    with torch.random.fork_rng():
        torch.manual_seed(100 + instance)
        return MODULE_KINDS[kind]()


# --- hooks ---------------------------------------------------------------------------------
# A hook is named "kind:target:effect": kind fwd (forward hook), pre (forward pre-hook),
# gfwd / gpre (the process-wide ones, on every module); target self or sub (the first
# child; ignored for process-wide hooks); effect count (records the call, changes nothing)
# or modify (records the call and changes the input or output).
HOOKS = [f"{kind}:{target}:{effect}" for kind in ("fwd", "pre") for target in ("self", "sub")
         for effect in ("count", "modify")] + \
    [f"{kind}:any:{effect}" for kind in ("gfwd", "gpre") for effect in ("count", "modify")]


def _forward_hook(name, record, modify):
    def hook(module, args, out):
        record((name, type(module).__name__))
        if modify and isinstance(out, torch.Tensor):
            return out * 0.5 + 1
        return None
    return hook


def _pre_hook(name, record, modify):
    def hook(module, args):
        record((name, type(module).__name__))
        if modify and args and isinstance(args[0], torch.Tensor):
            return (args[0] * 2,) + tuple(args[1:])
        return None
    return hook


class GlobalHooks:
    """The process-wide hooks, registered once for both runs: they record into whichever
    side's log is current (`log`), so the eager and the optimized call see the same hooks."""

    def __init__(self):
        self.handles: dict = {}
        self.log: list = []

    def _record(self, item):
        self.log.append(item)

    def apply(self, wanted):
        wanted = [h for h in wanted if h.startswith("g")]
        for name in list(self.handles):
            if name not in wanted:
                self.handles.pop(name).remove()
        for name in wanted:
            if name not in self.handles:
                kind, _, effect = name.split(":")
                module_api = torch.nn.modules.module
                if kind == "gfwd":
                    self.handles[name] = module_api.register_module_forward_hook(
                        _forward_hook(name, self._record, effect == "modify"))
                else:
                    self.handles[name] = module_api.register_module_forward_pre_hook(
                        _pre_hook(name, self._record, effect == "modify"))

    def remove_all(self):
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()


class Side:
    """One side's modules (deep copies, by instance number) and its per-module hooks."""

    def __init__(self, kind):
        self.kind = kind
        self.modules: dict = {}
        self.handles: dict = {}
        self.log: list = []

    def module(self, instance: int) -> nn.Module:
        if instance not in self.modules:
            self.modules[instance] = copy.deepcopy(make_module(self.kind, instance))
        return self.modules[instance]

    def apply(self, instance: int, wanted):
        """Hooks of `wanted` (module ones) are on module `instance`; all others are removed."""
        want = {(instance, h) for h in wanted if not h.startswith("g")}
        for key in list(self.handles):
            if key not in want:
                self.handles.pop(key).remove()
        for key in sorted(want):
            if key in self.handles:
                continue
            kind, target, effect = key[1].split(":")
            m = self.module(instance)
            if target == "sub":
                m = next(iter(m.children()))
            if kind == "fwd":
                self.handles[key] = m.register_forward_hook(_forward_hook(key[1], self.log.append, effect == "modify"))
            else:
                self.handles[key] = m.register_forward_pre_hook(_pre_hook(key[1], self.log.append, effect == "modify"))

    def remove_all(self):
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()
