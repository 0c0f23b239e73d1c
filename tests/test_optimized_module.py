"""`minidynamo.optimize(module)`: an OptimizedModule whose call runs the module's call
optimized, with the original's parameters, state_dict, train/eval and attributes."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

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

# --- attribute writes and deletes reach the original module (as torch.compile's) ---
class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        out = self.lin(x) * self.scale
        if getattr(self, "shift", None) is not None:
            out = out + self.shift
        return out


@pytest.mark.parametrize("wrap", ["minidynamo", "torch.compile"])
def test_writes_and_deletes_reach_the_original_module(wrap):
    torch._dynamo.reset()
    mod = Scaled()
    opt = minidynamo.optimize(mod) if wrap == "minidynamo" else torch.compile(mod, backend="eager")
    x = torch.randn(2, 3)
    torch.testing.assert_close(opt(x), mod(x))
    opt.scale = 3.0
    assert mod.scale == 3.0 and opt.scale == 3.0 and "scale" not in type(opt).__dict__
    torch.testing.assert_close(opt(x), mod.lin(x) * 3.0)
    opt.shift = torch.ones(3)
    torch.testing.assert_close(opt(x), mod.lin(x) * 3.0 + 1)
    del opt.shift
    assert not hasattr(mod, "shift") and not hasattr(opt, "shift")
    torch.testing.assert_close(opt(x), mod.lin(x) * 3.0)
    opt.lin = torch.nn.Linear(3, 3)  # a submodule swapped through the wrapper
    assert mod.lin is opt.lin
    torch.testing.assert_close(opt(x), mod.lin(x) * 3.0)
    with pytest.raises(AttributeError):
        del opt.missing


def test_training_mode_is_the_original_modules():
    mod = Scaled()
    opt = minidynamo.optimize(mod)
    assert opt.training and mod.training
    opt.eval()
    assert not mod.training and not opt.training and not mod.lin.training
    opt.training = True
    assert mod.training and opt.training
    mod.train(False)
    assert not opt.training


def test_the_wrappers_own_attributes_stay_on_the_wrapper():
    mod = Scaled()
    opt = minidynamo.optimize(mod)
    assert opt._orig_mod is mod and "_optimized" in opt.__dict__
    assert not hasattr(mod, "_optimized") and not hasattr(mod, "_super_module_initialized")
    assert list(opt.state_dict()) == list(mod.state_dict())


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # the type and message, as eager gives them
        return ("raise", type(e), str(e))


@pytest.mark.parametrize("make", [
    lambda: torch.nn.ModuleList(),
    lambda: torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()]),
    lambda: torch.nn.Sequential(),
    lambda: torch.nn.Sequential(torch.nn.ReLU()),
    lambda: torch.nn.ModuleDict({"a": torch.nn.ReLU()}),
    lambda: torch.nn.Linear(2, 2),
])
def test_truth_length_items_and_iteration_are_the_originals(make):
    """Dunders are looked up on the class, past __getattr__: the wrapper answers them as
    its module does (an empty container is false; a Linear is true and has no len)."""
    mod = make()
    opt = minidynamo.optimize(mod)
    probes = [bool, len, lambda m: [type(c) for c in m], lambda m: type(m[0]), lambda m: type(m["a"]),
              lambda m: "a" in m, lambda m: sorted(dir(m)) == sorted(dir(mod))]
    for probe in probes:
        assert _outcome(lambda: probe(opt)) == _outcome(lambda: probe(mod))


def test_item_writes_reach_the_original_container():
    mod = torch.nn.ModuleList([torch.nn.ReLU()])
    opt = minidynamo.optimize(mod)
    opt[0] = torch.nn.Tanh()
    assert type(mod[0]) is torch.nn.Tanh
    del opt[0]
    assert len(mod) == 0 and not opt
