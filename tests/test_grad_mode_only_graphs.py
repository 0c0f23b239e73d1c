"""A graph whose only calls change grad mode is not handed to the backend: the entry
leaves grad mode where the graph would (torch.compile makes no graph of it either). Graph
counts with a counting backend, and eager's results, gradients and grad mode after the
call."""
import torch

import minidynamo
from helpers import CountingBackend, check, entry_tree


def nested_grad_mode_graph_break(x):
    before = torch.is_grad_enabled()
    with torch.set_grad_enabled(False):
        minidynamo.graph_break()
        with torch.set_grad_enabled(True):
            x = torch.mul(x, 5)
            minidynamo.graph_break()
            x = torch.sqrt(x)
            assert torch.is_grad_enabled()
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled() == before
    return x, torch.is_grad_enabled()


def test_nested_grad_mode_regions_with_breaks():
    x = torch.rand(3, 4, requires_grad=True)
    check(nested_grad_mode_graph_break, x, kind="break", graphs=2)


def gn(z):
    with torch.no_grad():
        minidynamo.graph_break()
        return torch.sin(z)


def inlined_no_grad_with_break(x, y, z):
    a = torch.mm(x, y)
    z = gn(z)
    return a, z, torch.is_grad_enabled()


def test_break_inside_no_grad_of_a_callee():
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    info = check(inlined_no_grad_with_break, (x, y, torch.randn(4)), kind="break", graphs=2)
    a, z, _ = info.opt(x, y, torch.randn(4))
    a.sum().backward()  # the graph of mm keeps its autograd history
    assert x.grad is not None and not z.requires_grad


def set_grad_as_statement(x):
    torch.set_grad_enabled(False)
    return x.shape[0] + 1


def test_grad_mode_statement_alone_is_no_graph_and_sticks():
    backend = CountingBackend()
    opt = minidynamo.optimize(set_grad_as_statement, backend=backend)
    try:
        for _ in range(2):
            torch.set_grad_enabled(True)
            assert opt(torch.ones(3)) == 4
            assert not torch.is_grad_enabled()  # as eager leaves it
    finally:
        torch.set_grad_enabled(True)
    assert backend.calls == 0
    assert [e.kind for e in entry_tree(opt, backend)] == ["constant"]


def grad_regions_around_work(x):
    with torch.no_grad():
        y = x * 2
    with torch.enable_grad():
        z = x * 3
    return y, z


def test_grad_mode_changes_around_ops_stay_in_the_graph():
    check(grad_regions_around_work, torch.randn(3, requires_grad=True), kind="graph", graphs=1)
    with torch.no_grad():
        check(grad_regions_around_work, torch.randn(3, requires_grad=True), kind="graph", graphs=1)
