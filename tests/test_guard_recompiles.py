"""Recompilation at model scale stays exact: the five changes a user makes to a model
between calls (a parameter replaced, a submodule added, a hook registered, `training`
switched, a plain attribute the forward reads set) each give eager's result, recompiling
with a reason that names what changed, on the plain guards and on the fast tier (a
snapshot of the module tree) alike. Each test compares with eager after the change.

A parameter is a graph input: one replaced by another of the same metadata is read by
the same entry (as torch.compile's); one of another shape, layout, dtype or
requires_grad recompiles."""
from __future__ import annotations

import pytest
import torch

import minidynamo
import minidynamo.guards
from helpers import CountingBackend


@pytest.fixture(params=["snapshot", "guards"], autouse=True)
def tier(request, monkeypatch):
    """The fast tier for every model (small ones too), or never."""
    monkeypatch.setattr(minidynamo.guards, "_MIN_REGION", 1 if request.param == "snapshot" else 10**9)
    return request.param


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x).relu())


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.fc = torch.nn.Linear(4, 2)
        self.scale = 0.5

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        if hasattr(self, "extra"):
            x = self.extra(x)
        y = self.fc(x) * self.scale
        return y + 1 if self.training else y


def _recompiles(change, reason: str | None):
    """Eval mode, two calls (the second on the cache or its snapshot), `change(model)`,
    a call that must trace again and name `reason` (None: must not), then one that must not."""
    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(2, 4)
    backend = CountingBackend()
    opt = minidynamo.optimize(model, backend=backend)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(opt(x), model(x), rtol=0, atol=0)
        assert backend.calls == 1
        change(model)
        torch.manual_seed(1)
        expected = model(x)
        torch.manual_seed(1)
        torch.testing.assert_close(opt(x), expected, rtol=0, atol=0)
        failure = None
        if reason is None:
            assert backend.calls == 1 and not opt.guard_failures()
            return None
        assert backend.calls == 2
        failure = opt.guard_failures()[-1]
        assert reason in failure.reason, failure.message()
        torch.manual_seed(2)
        expected = model(x)
        torch.manual_seed(2)
        torch.testing.assert_close(opt(x), expected, rtol=0, atol=0)
        assert backend.calls == 2
    return failure


def test_replacing_a_parameter_reads_the_new_one():
    def change(model):
        model.fc.weight = torch.nn.Parameter(torch.randn(2, 4))
    _recompiles(change, None)


@pytest.mark.parametrize("new", ["transposed", "shape", "requires_grad"])
def test_replacing_a_parameter_by_another_kind_recompiles(new):
    def change(model):
        if new == "transposed":
            model.fc.weight = torch.nn.Parameter(torch.randn(4, 2).t())
        elif new == "shape":
            model.fc.weight = torch.nn.Parameter(torch.randn(3, 4))
            model.fc.bias = torch.nn.Parameter(torch.randn(3))
        else:
            model.fc.weight = torch.nn.Parameter(torch.randn(2, 4), requires_grad=False)
    _recompiles(change, "fc.weight")


def test_adding_a_submodule_recompiles():
    def change(model):
        model.extra = torch.nn.Linear(4, 4)
    _recompiles(change, "extra")


def test_appending_to_a_module_list_recompiles():
    def change(model):
        model.blocks.append(Block().eval())
    _recompiles(change, "blocks")


def test_registering_a_hook_recompiles():
    def change(model):
        model.blocks[1].lin.register_forward_hook(lambda m, i, o: o * 3)
    _recompiles(change, "hooks")


def test_changing_training_recompiles():
    _recompiles(lambda model: model.train(), "training")


def test_changing_a_plain_attribute_recompiles():
    def change(model):
        model.scale = 2.0
    _recompiles(change, "scale")


def test_reordering_a_module_list_recompiles():
    """The same keys in another order (a key popped and put back): the forward runs the
    blocks in the new order. The snapshot holds a table's keys by its version tag."""
    def change(model):
        first = model.blocks._modules.pop("0")
        model.blocks._modules["0"] = first
    _recompiles(change, "blocks")


def test_replacing_a_block_by_one_of_its_kind_reads_the_new_one():
    """Same keys, same order, another module of the same class under one of them: its
    parameters are graph inputs, read from the new block by the same entry."""
    def change(model):
        model.blocks[1] = Block().eval()
    _recompiles(change, None)
