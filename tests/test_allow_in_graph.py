"""minidynamo.allow_in_graph: a function recorded as one node of the graph, not traced into."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


@minidynamo.allow_in_graph
def fused_gate(x, w, scale: float = 1.0):
    # Python the trace would otherwise read through: here the node calls it as a whole
    parts = [x[..., i:i + 1] * w[i] for i in range(w.shape[0])]
    return torch.cat(parts, dim=-1).sigmoid() * scale, x.sum()


def test_one_node_for_the_function():
    def f(x, w):
        g, s = fused_gate(x * 2, w, scale=0.5)
        return g + 1, s

    info = check(f, (torch.randn(3, 4), torch.randn(4)), kind="graph", graphs=1)
    assert fused_gate in info.backend.ops(0)
    assert torch.cat not in info.backend.ops(0)


def test_gradients_flow_through_the_node():
    w = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 4)

    def f(x, w):
        return fused_gate(x, w)[0].sum()

    expected = torch.autograd.grad(f(x, w), w)[0]
    got = torch.autograd.grad(minidynamo.optimize(f)(x, w), w)[0]
    torch.testing.assert_close(got, expected)


def test_in_place_work_of_the_function_is_a_write_of_the_node():
    @minidynamo.allow_in_graph
    def bump(t):
        t.add_(1)
        return t * 2

    def f(x):
        y = bump(x)
        return x + y

    check(f, torch.randn(3), kind="graph")


def test_not_a_tensor_result_declines():
    @minidynamo.allow_in_graph
    def count(t):
        return 3

    def f(x):
        return x * count(x)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))
    assert [e.kind for e in opt.cache_entries()] != ["graph"]


def test_bad_target_is_a_clear_error():
    with pytest.raises(TypeError, match="allow_in_graph needs a callable"):
        minidynamo.allow_in_graph(3)
