"""`t.item()` kept in the graph under config.capture_scalar_outputs (or torch.compile's
setting of that name): arithmetic with the value is traced, a decision on it breaks there
and the rest goes on natively. Differential against eager; off by default (a break)."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


@pytest.fixture
def captured(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "capture_scalar_outputs", True)


def scale_by(x, s):
    k = s.item()
    return x * k + k, k


def test_item_in_arithmetic_is_one_graph(captured):
    check(scale_by, (torch.randn(3), torch.tensor(2.5)), (torch.randn(3), torch.tensor(-1.0)), kind="graph")
    check(scale_by, (torch.randn(3), torch.tensor(3)), kind="graph")
    check(scale_by, (torch.randn(3), torch.tensor([True])), kind="graph")


def test_off_by_default_it_breaks():
    check(scale_by, (torch.randn(3), torch.tensor(2.5)), kind="break", reason="data_dependent")


def test_torch_compiles_setting_is_read():
    import torch._dynamo.config as torch_config
    with torch_config.patch(capture_scalar_outputs=True):  # torch's own way: restored exactly
        check(scale_by, (torch.randn(3), torch.tensor(2.5)), kind="graph")


def test_a_branch_on_the_value_breaks_there(captured):
    def f(x, s, log):
        k = s.item()
        y = x * k
        if k > 0:
            log.append("positive")
            return y + 1
        return y - 1

    check(f, (torch.randn(3), torch.tensor(2.0), []), (torch.randn(3), torch.tensor(-2.0), []),
          kind="break", reason="data_dependent", same_entry=False)


def test_a_size_from_the_value_breaks(captured):
    def f(x, n):
        return torch.zeros(n.item()) + x.sum()

    check(f, (torch.randn(3), torch.tensor(4)), kind="break", reason="data_dependent")


def test_range_and_printing_break(captured):
    def f(x, n):
        total = x
        for _ in range(n.item()):
            total = total * 2
        return total

    def g(x, n):
        print("n is", n.item())
        return x + 1

    check(f, (torch.randn(3), torch.tensor(3)), kind="break", reason="data_dependent")
    check(g, (torch.randn(3), torch.tensor(3)), kind="break")


def test_several_elements_raise_as_eager(captured):
    def f(x):
        try:
            return x.item()
        except RuntimeError as e:
            return str(e)

    check(f, (torch.randn(3),), kind="eager")


def test_under_aot_eager(captured):
    backend = CountingBackend()

    def f(x, s):
        return (x * s.item()).sum()

    opt = minidynamo.optimize(f, backend="aot_eager")
    x = torch.randn(3, requires_grad=True)
    for s in (torch.tensor(2.0), torch.tensor(3.0)):
        got, expected = opt(x, s), f(x, s)
        torch.testing.assert_close(got, expected)
        (g1,) = torch.autograd.grad(got, x)
        (g2,) = torch.autograd.grad(expected, x)
        torch.testing.assert_close(g1, g2)
    assert len(opt.cache_entries()) == 1 and backend.calls == 0
