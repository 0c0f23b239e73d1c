"""torch.nn.Parameter (its subclasses, torch.nn.Buffer) made inside the optimized function:
the trace knows the object's type and flags, the call returns the real type, and gradients
reach the Parameter as in eager (a new leaf over data's storage, detached from data)."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


def t(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (3,)), generator=g).requires_grad_(grad)


class MyParam(torch.nn.Parameter):
    """A subclass that adds nothing to how it is made."""


class InitParam(torch.nn.Parameter):
    def __init__(self, data, requires_grad=True):
        self.tag = "made"


def test_the_repro_type_and_isinstance():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        return p, isinstance(p, torch.nn.Parameter), type(p).__name__, type(p) is torch.nn.Parameter

    check(f, t(), t(grad=True), kind="graph", same_entry=False, graphs=2)


def test_flags_requires_grad_default_and_false():
    def f(x):
        p = torch.nn.Parameter(x + 1)
        q = torch.nn.Parameter(x * 3, requires_grad=False)
        r = torch.nn.Parameter(x - 1, False)
        return (p, q, r, p.requires_grad, q.requires_grad, r.requires_grad, p.is_leaf, q.is_leaf,
                p.grad is None, p.grad_fn is None, isinstance(q, torch.Tensor))

    check(f, t(grad=True), kind="graph")


def test_used_in_ops_and_returned():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        q = torch.nn.Parameter(x + 1, requires_grad=False)
        y = p * 3 + q
        return y, p, q, q * 2, y.requires_grad, (q * 2).requires_grad, type(q) is torch.nn.Parameter

    check(f, t(grad=True), kind="graph")


def test_only_ops_on_it():
    def f(x):
        w = torch.nn.Parameter(torch.ones(3, 3))
        return torch.relu(x @ w), (w * 2).sum(), isinstance(w, torch.nn.Parameter)

    check(f, t(2, 3), kind="graph")


def _grads(fn, backend):
    x = t(grad=True)
    out = fn(x)
    (out[0].sum() * 2).backward()
    return out, x.grad


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_gradients_reach_the_parameter_not_the_data(backend):
    def f(x):
        p = torch.nn.Parameter(x * 2)
        return p * x, p

    opt = minidynamo.optimize(f) if backend is None else minidynamo.optimize(f, backend=backend)
    (e_y, e_p), e_xg = _grads(f, None)
    for _ in range(2):
        (o_y, o_p), o_xg = _grads(opt, backend)
        assert type(o_p) is torch.nn.Parameter and o_p.is_leaf and o_p.requires_grad
        torch.testing.assert_close(o_p.grad, e_p.grad)
        torch.testing.assert_close(o_xg, e_xg)  # through `p * x` only: p is detached from x
        assert o_y.grad_fn is not None


def test_data_is_a_plain_alias():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        d = p.data
        d.mul_(3)  # writes p too
        return p, d, type(d).__name__, d.requires_grad, p.data + 1, type(p).__name__

    check(f, t(grad=True), kind="graph")


def test_parameter_of_an_input_shares_its_storage():
    def f(x):
        p = torch.nn.Parameter(x)
        with torch.no_grad():
            p.mul_(2)  # eager writes x through it
        return p, type(p).__name__

    check(f, t(), kind="graph")


def test_parameter_without_data():
    def f(x):
        p = torch.nn.Parameter()
        return x + 1, p, p.shape, p.requires_grad, type(p).__name__

    check(f, t(), kind="graph")


def test_subclass_made_inside():
    def f(x):
        p = MyParam(x * 2)
        return p, isinstance(p, torch.nn.Parameter), isinstance(p, MyParam), type(p).__name__, p * 2

    check(f, t(grad=True), kind="graph")


def test_subclass_with_its_own_init_runs_eagerly():
    def f(x):
        p = InitParam(x * 2)
        return p, p.tag

    check(f, t(), kind="break", reason="call")


def test_integer_parameter_requiring_grad_raises_as_in_eager():
    def f(x):
        y = x + 1
        return torch.nn.Parameter(y.long())

    check(f, t(), kind="break", reason="exceptions")


def test_integer_parameter_without_grad():
    def f(x):
        p = torch.nn.Parameter(x.long(), requires_grad=False)
        return p, p + 1, isinstance(p, torch.nn.Parameter)

    check(f, t(), kind="graph")


def test_parameter_live_across_a_graph_break():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        kind = type(p).__name__
        print("break")
        return p * 3, p, kind

    check(f, t(grad=True), kind="break")


def test_parameter_made_in_a_helper():
    def make(x):
        return torch.nn.Parameter(x.sin())

    def f(x):
        ps = [make(x), make(x + 1)]
        return ps, [isinstance(p, torch.nn.Parameter) for p in ps], sum(p * 2 for p in ps)

    check(f, t(grad=True), kind="graph")


@pytest.mark.skipif(not hasattr(torch.nn, "Buffer"), reason="torch.nn.Buffer is torch 2.5+")
def test_buffer_made_inside():
    def f(x):
        b = torch.nn.Buffer(x * 2, persistent=False)
        c = torch.nn.Buffer(x.detach())
        return (b, c, c * 2, isinstance(b, torch.nn.Buffer), isinstance(x, torch.nn.Buffer),
                isinstance(c * 2, torch.nn.Buffer), b.persistent, c.persistent, type(b).__name__,
                b.requires_grad, c.requires_grad)

    check(f, t(grad=True), t(), kind="graph", same_entry=False, graphs=2)


@pytest.mark.skipif(not hasattr(torch.nn, "Buffer"), reason="torch.nn.Buffer is torch 2.5+")
def test_buffer_requiring_grad_used_in_ops():
    def f(x):
        b = torch.nn.Buffer(x * 2)
        return b * x, b, b.is_leaf

    check(f, t(grad=True), kind="graph")


def test_counting_backend_sees_one_graph():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        return p * 3, p, isinstance(p, torch.nn.Parameter)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    out = opt(t(grad=True))
    assert backend.calls == 1 and type(out[1]) is torch.nn.Parameter and out[2] is True


def test_requires_grad_flipped_and_one_object_returned_twice():
    def f(x):
        p = torch.nn.Parameter(x * 2)
        q = p.requires_grad_(False)
        r = torch.nn.Parameter(x + 1, requires_grad=False).requires_grad_()
        return p, p, [p], q is p, p.requires_grad, p * 3, r, r.requires_grad, type(r).__name__

    check(f, t(grad=True), kind="graph")


def test_requires_grad_on_an_integer_parameter_raises_as_in_eager():
    def f(x):
        p = torch.nn.Parameter(x.long(), requires_grad=False)
        p.requires_grad_()
        return p

    check(f, t(), kind="break", reason="exceptions")
