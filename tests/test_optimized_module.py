"""`minidynamo.optimize(module)`: an OptimizedModule whose call runs the module's call
optimized, with the original's parameters, state_dict, train/eval and attributes."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from helpers import CountingBackend


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.scale = 2.0

    def forward(self, x, shift=0.0):
        return self.drop(self.lin(x)).relu() * self.scale + shift


def _pair():
    torch.manual_seed(0)
    net = Net()
    return net, minidynamo.optimize(net, backend=CountingBackend())


def test_call_forward_and_backward_match_the_module():
    net, opt = _pair()
    net.eval()
    x = torch.randn(5, 4)
    torch.testing.assert_close(opt(x, shift=1.0), net(x, shift=1.0))
    opt(x).sum().backward()
    expected = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net(x).sum().backward()
    for p, g in zip(net.parameters(), expected):
        torch.testing.assert_close(p.grad, g)
    assert [e.kind for e in opt.cache_entries()] == ["graph", "graph"]  # shift=1.0, then its default


def test_state_parameters_and_attributes_are_the_originals():
    net, opt = _pair()
    assert isinstance(opt, minidynamo.OptimizedModule) and isinstance(opt, torch.nn.Module)
    assert opt._orig_mod is net and opt.lin is net.lin and opt.scale == 2.0
    assert list(opt.state_dict()) == list(net.state_dict())
    assert [id(p) for p in opt.parameters()] == [id(p) for p in net.parameters()]
    opt.load_state_dict({k: torch.zeros_like(v) for k, v in net.state_dict().items()})
    assert float(net.lin.weight.abs().sum()) == 0.0
    opt.train(False)
    assert not net.training


def test_train_and_eval_switch_recompiles():
    net, opt = _pair()
    x = torch.randn(5, 4)
    opt.eval()
    torch.testing.assert_close(opt(x), net(x))
    opt.train()
    torch.manual_seed(1)
    got = opt(x)
    torch.manual_seed(1)
    torch.testing.assert_close(got, net(x))
    assert len(opt.cache_entries()) == 2


def test_hooks_are_honoured():
    net, opt = _pair()
    net.eval()
    x = torch.randn(5, 4)
    before = opt(x)
    handle = net.register_forward_hook(lambda m, args, out: out + 100)
    torch.testing.assert_close(opt(x), before + 100)
    handle.remove()
    torch.testing.assert_close(opt(x), before)


def test_optimize_twice_and_explain_take_the_original():
    net, opt = _pair()
    again = minidynamo.optimize(opt)
    assert again._orig_mod is net
    net.eval()
    report = minidynamo.explain(opt)(torch.randn(5, 4))
    assert report.graph_count == 1
    assert minidynamo.explain(net)(torch.randn(5, 4)).graph_count == 1


def test_decorator_factory_form():
    net = Net().eval()
    opt = minidynamo.optimize(backend="eager", fullgraph=True)(net)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), net(x))


@pytest.mark.parametrize("bad", [torch.nn.Linear])
def test_a_module_class_is_still_an_error(bad):
    with pytest.raises(TypeError, match="class Linear"):
        minidynamo.optimize(bad)
