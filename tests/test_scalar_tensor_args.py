"""Ops given a 0-d tensor where they take a number (addcmul's value, _foreach_lerp_'s
weight, _foreach_pow's base): traced as ops that keep it a tensor, with eager's results
(bit for bit where the same kernel runs), its in-place writes and return values; other
dtypes or a weight that requires grad are declined and run as eager."""
import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


def test_addcmul_with_a_tensor_value():
    def f(x, y, z, s):
        return x.addcmul_(y, z, value=s)

    info = check(f, (torch.ones(2, 2), torch.ones(2, 2) + 1, torch.rand(2, 2), torch.tensor(0.3)),
                 kind="graph", graphs=1)
    assert info.backend.calls == 1


def test_addcmul_same_bits_as_eager_and_broadcasting():
    def f(x, y, z, s):
        out = torch.addcmul(x, y, z, value=s)
        return out, x.addcmul(y, z, value=s), x.addcmul_(y, z, value=s)

    x, y, z = torch.randn(64, 8), torch.randn(8), torch.randn(64, 1)
    opt = minidynamo.optimize(f, backend=CountingBackend(), fullgraph=True)
    x2 = x.clone()
    got, expected = opt(x2, y, z, torch.tensor(0.7)), f(x.clone(), y, z, torch.tensor(0.7))
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    assert got[2] is x2


def test_foreach_lerp_with_a_tensor_weight():
    def f(x, y, s):
        return torch._foreach_lerp_(x, y, s)

    for w in (0.25, 0.5, 0.9):
        check(f, ([torch.ones(2, 2) * 4.26, torch.randn(3)], [torch.ones(2, 2), torch.randn(3)], torch.tensor(w)),
              kind="graph", graphs=1)
    xs = [torch.randn(100), torch.randn(7, 3)]
    ys = [torch.randn(100), torch.randn(7, 3)]
    eager_xs = [t.clone() for t in xs]
    opt = minidynamo.optimize(f, backend=CountingBackend(), fullgraph=True)
    assert opt(xs, ys, torch.tensor(0.3)) is xs  # the list given, as eager returns it
    f(eager_xs, ys, torch.tensor(0.3))
    assert all(torch.equal(a, b) for a, b in zip(xs, eager_xs))


def test_foreach_pow_with_a_tensor_base():
    def f(x, y):
        return torch._foreach_pow(x, y)

    check(f, (torch.tensor(0.80), [torch.tensor(3.4), torch.tensor(7.8), torch.rand(5)]), kind="graph", graphs=1)


def test_other_dtypes_and_grad_are_declined_with_eager_results():
    def pow_(x, y):
        return torch._foreach_pow(x, y)

    def lerp_(x, y, s):
        return torch._foreach_lerp_(x, y, s)

    def addcmul_(x, y, z, s):
        return x.addcmul_(y, z, value=s)

    cases = [
        (pow_, (torch.tensor(2.0, dtype=torch.float64), [torch.tensor(3.4), torch.tensor(7.8)])),
        (lerp_, ([torch.ones(3)], [torch.zeros(3)], torch.tensor(0.5, dtype=torch.float64))),
        (lerp_, ([torch.ones(3)], [torch.zeros(3)], torch.tensor(0.5, requires_grad=True))),
        (addcmul_, (torch.ones(3), torch.ones(3), torch.ones(3), torch.tensor(2))),
        (addcmul_, (torch.ones(3), torch.ones(3), torch.ones(2), torch.tensor(0.5))),  # eager's error
    ]
    for fn, args in cases:
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        same_outcome(fn, opt, *[a.clone() if isinstance(a, torch.Tensor) else [t.clone() for t in a] for a in args])
