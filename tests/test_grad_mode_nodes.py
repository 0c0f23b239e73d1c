"""A grad-mode region that sets the mode the trace already has records no node (as
torch.compile): `with torch.no_grad()` under no_grad, `set_grad_enabled(True)` with grad
on; a call of `torch._C._set_grad_enabled` itself is always one. The values, the grad mode inside and after, and `requires_grad` of the results stay
eager's; a region that changes the mode still records its nodes."""
import pytest
import torch
from helpers import CountingBackend, check

import minidynamo


def no_grad_region(a, b):
    x = a + 1
    with torch.no_grad():
        x = x + b
        inside = torch.is_grad_enabled()
    x = x + 2
    return x, inside, x.requires_grad


def enable_grad_region(a, b):
    x = a + 1
    with torch.set_grad_enabled(True):
        if torch.is_grad_enabled():
            x = x + b
    return x + 2, x.requires_grad


def region_with_break(a, b):
    with torch.no_grad():
        x = a * 2
        print("grad inside:", torch.is_grad_enabled())
        x = x + b
    return x, torch.is_grad_enabled(), x.requires_grad


def raw_calls(a):
    prev = torch.is_grad_enabled()
    torch._C._set_grad_enabled(prev)
    y = a * 2
    torch._C._set_grad_enabled(prev)
    return y, y.requires_grad


def _grad_nodes(fn, *args):
    gms = []

    def backend(gm, example_inputs):
        gms.append(gm)
        return gm.forward

    minidynamo.optimize(backend=backend)(fn)(*args)
    return sum(n.target is torch._C._set_grad_enabled for gm in gms for n in gm.graph.nodes)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("fn, nodes_when_off, nodes_when_on", [
    (no_grad_region, 0, 2), (enable_grad_region, 2, 0)], ids=lambda v: getattr(v, "__name__", str(v)))
def test_only_mode_changes_are_nodes(fn, nodes_when_off, nodes_when_on, grad):
    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    with torch.set_grad_enabled(grad):
        check(fn, (a, b), kind="graph")
        assert _grad_nodes(fn, a, b) == (nodes_when_on if grad else nodes_when_off)
        assert torch.is_grad_enabled() is grad


@pytest.mark.parametrize("grad", [False, True])
def test_a_break_inside_keeps_the_modes(grad):
    with torch.set_grad_enabled(grad):
        check(region_with_break, (torch.randn(3, requires_grad=True), torch.randn(3)), kind="break",
              reason="side_effect", graphs=2)
        assert torch.is_grad_enabled() is grad


def test_op_count_under_no_grad():
    backend = CountingBackend()
    with torch.no_grad():
        minidynamo.optimize(backend=backend)(no_grad_region)(torch.randn(2), torch.randn(2))
    assert backend.calls == 1


@pytest.mark.parametrize("grad", [False, True])
def test_raw_set_grad_enabled_calls_are_nodes(grad):
    a = torch.randn(3, requires_grad=True)
    with torch.set_grad_enabled(grad):
        check(raw_calls, (a,), kind="graph")
        assert _grad_nodes(raw_calls, a) == 2
