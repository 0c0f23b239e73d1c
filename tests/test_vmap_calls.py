"""`torch.vmap(fn, in_dims, out_dims)(*args)` in traced code (variables/vmap_calls.py): fn
traced once into a body on per-example values, one node calling torch.vmap on it; and
torch's generic associative_scan, which vmaps its combine function. Differential: eager
and optimized results, gradients, graph counts (torch.compile's too) and declines."""
import pytest
import torch
from helpers import CountingBackend, check

import minidynamo

try:
    from torch._higher_order_ops.associative_scan import associative_scan
except ImportError:  # an older torch
    associative_scan = None


def _t(*shape):
    return torch.randn(*shape or (4, 3))


def plain(x, y):
    return torch.vmap(lambda a, b: a * b + a.sum())(x, y)


def dims_and_structure(x, y):
    def f(pair, scale, z):
        a, b = pair
        return {"s": a * scale + b[0], "t": (a - z,)}
    return torch.func.vmap(f, in_dims=((1, 0), None, 0), out_dims={"s": 1, "t": (0,)})((x.t(), y), 2.0, y)


def closure(x, y):
    w = y[0] * 2
    return torch.vmap(lambda a: (a @ w) + w.mean() * a)(x)


def empty_batch(x, y):
    return torch.vmap(lambda a, b: a * b)(x[:0], y[:0])


def sizes_in_body(x, y):
    return torch.vmap(lambda a: a.new_ones(a.shape) * a.shape[0] + a.shape.numel())(x)


@pytest.mark.parametrize("fn", [plain, dims_and_structure, closure, empty_batch, sizes_in_body],
                         ids=lambda f: f.__name__)
def test_vmap_traced(fn):
    check(fn, (_t(), _t()), (_t(), _t()), kind="graph")


def test_vmap_gradients():
    def f(x, y):
        return torch.vmap(lambda a, b: (a * b).sin())(x, y).sum()

    x, y = _t().requires_grad_(), _t()
    x2 = x.detach().clone().requires_grad_()
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    f(x, y).backward()
    opt(x2, y).backward()
    assert torch.allclose(x.grad, x2.grad) and backend.calls == 1


def test_vmap_changing_outside_declines():
    seen = []

    def f(x, y):
        return torch.vmap(lambda a: seen.append(a) or a * 2)(x)

    info = check(f, (_t(), _t()), kind="break", reason="side_effect", fullgraph_check=False)
    assert "vmap" in info.entries[0].break_reason.detail


def test_vmap_returning_its_argument_declines():
    def f(x, y):
        return torch.vmap(lambda a: a)(x) + 1

    check(f, (_t(), _t()), kind="break", reason="construct")


def _combine(left, right):
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def scan(a, b):
    return associative_scan(_combine, (a, b), dim=2, combine_mode="generic")


@pytest.mark.skipif(associative_scan is None, reason="torch without associative_scan")
@pytest.mark.parametrize("length", [1, 5, 8])
def test_associative_scan_generic(length):
    info = check(scan, (_t(2, 3, length, 4), _t(2, 3, length, 4)), kind="graph")
    torch._dynamo.reset()
    try:
        assert torch._dynamo.explain(scan)(_t(2, 3, length, 4), _t(2, 3, length, 4)).graph_count \
            == info.backend.calls == 1
    finally:
        torch._dynamo.reset()


def test_size_numel():
    def f(x, y):
        return x * x.shape.numel() + y.size().numel()

    check(f, (_t(), _t(2, 5)), kind="graph")
