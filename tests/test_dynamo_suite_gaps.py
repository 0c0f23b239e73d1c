"""Gaps found running torch's own Dynamo tests: eager vs optimized, graph counts."""
import torch
import torch._dynamo

import minidynamo


class Counter:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def _run(fn, *args):
    minidynamo.reset()
    cnt = Counter()
    got = minidynamo.optimize(fn, backend=cnt)(*args)
    return got, cnt.graphs


def test_torch_graph_break_splits_the_graph():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    x = torch.randn(4)
    got, graphs = _run(fn, x)
    torch.testing.assert_close(got, fn(x))
    assert graphs == 2


def test_torch_graph_break_in_an_inlined_callee_under_no_grad():
    def gn(z):
        with torch.no_grad():
            torch._dynamo.graph_break()
            return torch.sin(z)

    def fn(x, z):
        a = x * 2
        return a, gn(z)

    x, z = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    (a, s), graphs = _run(fn, x, z)
    ea, es = fn(x, z)
    torch.testing.assert_close(a, ea)
    torch.testing.assert_close(s, es)
    assert a.requires_grad and not s.requires_grad
    assert graphs >= 2


def test_torch_graph_break_in_a_function_forward_breaks():
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x + x
            torch._dynamo.graph_break()
            return y + x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.randn(5, requires_grad=True)
    got, graphs = _run(lambda t: F.apply(t), x)
    torch.testing.assert_close(got, F.apply(x))
    assert graphs == 2


def test_torch_allow_in_graph_function_traces_through_its_graph_break():
    @torch._dynamo.allow_in_graph
    class G(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            torch._dynamo.graph_break()
            ctx.n = x.size(0)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.n

    def fn(x):
        return G.apply(x)

    x = torch.rand(2, 3, requires_grad=True)
    minidynamo.reset()
    cnt = Counter()
    got = minidynamo.optimize(fn, backend=cnt, fullgraph=True)(x)
    torch.testing.assert_close(got, G.apply(x))
    assert cnt.graphs == 1
    got.sum().backward()
    y = x.detach().clone().requires_grad_()
    G.apply(y).sum().backward()
    torch.testing.assert_close(x.grad, y.grad)
