"""The cyclic garbage collector is off for the whole build of an entry (trace, guards,
entry code) and on while the backend compiles; its state is restored after."""
from __future__ import annotations

import gc

import torch

import minidynamo
from minidynamo import guards
from helpers import CountingBackend


def test_collector_off_from_trace_to_entry_on_in_backend(monkeypatch):
    seen = {}
    plan = guards.GuardSet.plan_hoisting

    def watched(self, *a, **kw):  # guard planning, after the trace, before the entry's code
        seen.setdefault("planning", gc.isenabled())
        return plan(self, *a, **kw)

    monkeypatch.setattr(guards.GuardSet, "plan_hoisting", watched)
    inner = CountingBackend()

    def backend(gm, example_inputs):
        seen["backend"] = gc.isenabled()
        return inner(gm, example_inputs)

    def f(x):
        return torch.relu(x) + 1

    x = torch.randn(3)
    assert gc.isenabled()
    out = minidynamo.optimize(f, backend=backend)(x)
    assert torch.equal(out, f(x))
    assert seen == {"planning": False, "backend": True}
    assert gc.isenabled() and inner.calls == 1


def test_collector_left_off_when_it_was_off():
    def backend(gm, example_inputs):
        assert not gc.isenabled()
        return gm.forward

    gc.disable()
    try:
        out = minidynamo.optimize(lambda x: x * 2, backend=backend)(torch.ones(2))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert torch.equal(out, torch.full((2,), 2.0))
