"""The fast tier of an entry's guards (guard_snapshot.py): once the guards have passed for a
model, what they read of its module tree is checked as flat vectors; every change that
would fail a guard must fail the snapshot too, so the entry goes back to its guards (and
traces again where they fail). Each test changes the model between calls and compares
with eager."""
from __future__ import annotations

import collections
import gc

import pytest
import torch

import minidynamo
import minidynamo.guards
from minidynamo.guard_snapshot import Snapshots
from helpers import CountingBackend


@pytest.fixture(autouse=True)
def every_region(monkeypatch):
    """Small test models get the fast tier too (real models pass the threshold)."""
    monkeypatch.setattr(minidynamo.guards, "_MIN_REGION", 1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.act = torch.nn.ReLU()
        self.scale = 0.5
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x):
        return self.act(self.norm(self.lin(x))) * self.scale + self.shift


class Model(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(n))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def snapshots(opt) -> list:
    return [v for e in opt.cache_entries() for v in e.ns.values.values() if isinstance(v, Snapshots)]


def optimized(model):
    backend = CountingBackend()
    return minidynamo.optimize(model, backend=backend), backend


def check(opt, model, x):
    with torch.no_grad():
        expected = model(x)
        for _ in range(2):  # the guards' call (takes the snapshot), then the snapshot's
            torch.testing.assert_close(opt(x), expected, rtol=0, atol=0)


def fast(opt, root) -> bool:
    """Whether the entry's snapshot of `root` holds now."""
    return any(s.fresh(root) is not None for s in snapshots(opt))


def test_the_fast_tier_is_used_and_checks_the_whole_tree():
    torch.manual_seed(0)
    model, x = Model(), torch.randn(2, 4)
    opt, backend = optimized(model)
    check(opt, model, x)
    assert fast(opt, model)
    snap = next(iter(snapshots(opt)[0].by_root.values()))
    assert len(snap.mods) == 1 + 3 * 4 + 1  # blocks, 3 x (block, lin, norm, act), head (the root apart)
    assert backend.calls == 1


@pytest.mark.parametrize("change", [
    "replace_parameter", "set_data_other_shape", "requires_grad", "forward_hook", "shadow_in_dict",
    "plain_attribute", "replace_submodule", "class_changed", "class_method_patched", "hook_dict_replaced",
    "modulelist_item", "buffer_replaced", "delete_attribute", "hook_written_into_dict", "pre_hook",
    "modules_reordered", "empty_table_filled_from_a_dict",
])
def test_a_change_fails_the_snapshot(change):
    torch.manual_seed(0)
    model, x = Model(), torch.randn(2, 4)
    opt, _ = optimized(model)
    check(opt, model, x)
    assert fast(opt, model)
    block = model.blocks[1]
    if change == "replace_parameter":
        block.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
    elif change == "set_data_other_shape":
        model.head.weight.data = torch.randn(2, 4).t().contiguous().t()  # same shape, other strides
    elif change == "requires_grad":
        block.norm.weight.requires_grad_(False)
    elif change == "forward_hook":
        block.act.register_forward_hook(lambda m, i, o: o * 10)
    elif change == "shadow_in_dict":
        block.lin.__dict__["weight"] = torch.nn.Parameter(torch.randn(4, 4))
    elif change == "plain_attribute":
        block.scale = 3.0
    elif change == "replace_submodule":
        block.act = torch.nn.Tanh()
    elif change == "class_changed":
        class Relu6(torch.nn.ReLU):
            def forward(self, x):
                return x.clamp(0, 0.1)
        block.act.__class__ = Relu6
    elif change == "class_method_patched":
        original = torch.nn.ReLU.forward
        torch.nn.ReLU.forward = lambda self, x: x.sigmoid()
    elif change == "hook_dict_replaced":
        block.act._forward_hooks = collections.OrderedDict({0: lambda m, i, o: o + 1})
    elif change == "modulelist_item":
        model.blocks[2] = Block()
    elif change == "buffer_replaced":
        block.shift = torch.full((4,), 7.0)
    elif change == "delete_attribute":
        del block.scale
    elif change == "hook_written_into_dict":  # no handle: only the dict's content says so
        block.norm._forward_hooks[12345] = lambda m, i, o: o - 1
    elif change == "pre_hook":
        block.lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    elif change == "modules_reordered":  # the same keys and modules, iterated in another order
        table = model.blocks._modules
        items = list(table.items())
        table.clear()
        table.update(reversed(items))
    elif change == "empty_table_filled_from_a_dict":  # 3.12+: no watcher hears it (CLONED)
        assert not block._parameters
        block._parameters.update({"shift": torch.nn.Parameter(torch.full((4,), 5.0))})
    try:
        if change != "class_method_patched":  # a class's attribute: checked beside the snapshot
            assert not fast(opt, model)
        if change == "delete_attribute":
            with pytest.raises(AttributeError):
                model(x)
            with pytest.raises(AttributeError):
                opt(x)
        else:
            check(opt, model, x)
    finally:
        if change == "class_method_patched":
            torch.nn.ReLU.forward = original


def test_a_hook_dict_replaced_by_an_empty_one_and_then_filled():
    """The hook dicts checked are those the modules hold now: one replaced by an empty dict
    serves as before, and a hook put in the new one is seen."""
    torch.manual_seed(0)
    model, x = Model(), torch.randn(2, 4)
    opt, _ = optimized(model)
    check(opt, model, x)
    act = model.blocks[0].act
    act._forward_hooks = collections.OrderedDict()
    check(opt, model, x)
    assert fast(opt, model)
    act._forward_hooks[7] = lambda m, i, o: o + 3
    assert not fast(opt, model)
    check(opt, model, x)
    assert any("hooks" in str(f) for f in opt.guard_failures())


def test_an_equal_value_set_again_takes_a_new_snapshot_without_tracing():
    model, x = Model(), torch.randn(2, 4)
    opt, backend = optimized(model)
    check(opt, model, x)
    model.blocks[0].scale = float("0.5") + 0.0  # equal, another object
    assert not fast(opt, model)
    check(opt, model, x)
    assert fast(opt, model) and backend.calls == 1


def test_parameters_updated_in_place_stay_on_the_fast_tier():
    torch.manual_seed(0)
    model, x = Model(), torch.randn(2, 4)
    opt, backend = optimized(model)
    check(opt, model, x)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25)
    assert fast(opt, model)
    check(opt, model, x)
    assert backend.calls == 1


def test_train_and_eval_alternate_between_two_entries():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.0))
    reference = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.0))
    reference.load_state_dict(model.state_dict())
    opt, backend = optimized(model)
    x = torch.randn(5, 4)
    for mode in ("train", "eval", "train", "eval"):
        getattr(model, mode)()
        getattr(reference, mode)()
        torch.testing.assert_close(opt(x), reference(x))
        torch.testing.assert_close(opt(x), reference(x))
    for a, b in zip(model.buffers(), reference.buffers()):
        torch.testing.assert_close(a, b)
    assert backend.calls == 2


def test_one_entry_keeps_a_snapshot_per_layer():
    torch.manual_seed(0)
    blocks = [Block() for _ in range(3)]
    backend = CountingBackend()

    @minidynamo.optimize(backend=backend)
    def run(block, x):
        return block(x)

    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            for b in blocks:
                torch.testing.assert_close(run(b, x), b(x), rtol=0, atol=0)
    assert backend.calls == 1
    (snaps,) = snapshots(run)
    assert len(snaps.by_root) == 3
    assert all(snaps.fresh(b) is not None for b in blocks)
    blocks[1].scale = 2.0
    assert snaps.fresh(blocks[1]) is None and snaps.fresh(blocks[0]) is not None
    with torch.no_grad():
        torch.testing.assert_close(run(blocks[1], x), blocks[1](x), rtol=0, atol=0)


def test_a_snapshot_goes_with_its_root():
    @minidynamo.optimize
    def run(block, x):
        return block(x)

    block = Block()
    with torch.no_grad():
        run(block, torch.randn(2, 4))
        run(block, torch.randn(2, 4))
    (snaps,) = snapshots(run)
    assert len(snaps.by_root) == 1
    del block
    gc.collect()
    assert len(snaps.by_root) == 0


def test_a_mutable_attribute_is_checked_on_every_call():
    class Gated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.gates = [1.0, 2.0]

        def forward(self, x):
            for g in self.gates:
                x = self.lin(x) * g
            return x

    model, x = Gated(), torch.randn(2, 4)
    opt, _ = optimized(model)
    check(opt, model, x)
    model.gates.append(3.0)  # the list is the same object: its length guard runs each call
    assert fast(opt, model)
    check(opt, model, x)
    model.gates[0] = 5.0
    check(opt, model, x)


def test_switched_off_the_entry_has_no_fast_tier(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "snapshot_guards", False)
    model, x = Model(), torch.randn(2, 4)
    opt, _ = optimized(model)
    check(opt, model, x)
    assert snapshots(opt) == []


def test_a_module_with_its_own_getattr_is_read_by_its_guards():
    class Lazy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)
            self.factor = 2.0

        def __getattr__(self, name):
            if name == "alias":
                return self.inner
            return super().__getattr__(name)

        def forward(self, x):
            return self.alias(x) * self.factor

    model, x = torch.nn.Sequential(Lazy(), torch.nn.ReLU()), torch.randn(2, 4)
    opt, _ = optimized(model)
    check(opt, model, x)
    model[0].inner = torch.nn.Linear(4, 4)
    check(opt, model, x)
    model[0].factor = 5.0
    check(opt, model, x)


def test_a_model_changing_itself_every_call_stops_being_snapshotted():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.state = {"n": 1}

        def forward(self, x):
            # read, then a new dict written back each call: the snapshot fails next call
            self.state = {"n": self.state["n"]}
            return self.lin(x) * self.state["n"]

    model, x = Counting(), torch.randn(2, 4)
    opt, backend = optimized(model)
    reference = Counting()
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        for _ in range(20):
            torch.testing.assert_close(opt(x), reference(x), rtol=0, atol=0)
    assert model.state == reference.state == {"n": 1} and backend.calls == 1
    (snaps,) = snapshots(opt)
    assert max(snaps.takes.values()) == 8  # one per call until it gives up


class Layer(torch.nn.Module):
    """What transformer layers do per layer: a flag read from the class, an attribute
    asked for with hasattr() that the layer lacks, a config object shared by every layer."""
    checkpointing = False

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if self.checkpointing:
            y = y * 2
        if hasattr(self, "groups"):
            y = y + 1
        return y * self.config.scale


class Config:
    scale = 0.5


class Stack(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.config = Config()
        self.layers = torch.nn.ModuleList(Layer(self.config) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) if layer.config is self.config else x
        return x


def _residual_checks(opt) -> int:
    """Checks the fast tier runs in Python per call: its `and` chain's terms."""
    entry, = opt.cache_entries()
    lines = entry.source_text.splitlines()
    start = next(i for i, line in enumerate(lines) if ".fresh(" in line) + 2
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "else:")
    return sum(1 for line in lines[start:end] if line.strip().startswith("(") or " = ((" in line)


def test_checks_per_call_do_not_grow_with_the_layers():
    x, counts = torch.randn(2, 4), []
    for n in (2, 8):
        model = Stack(n)
        opt, backend = optimized(model)
        check(opt, model, x)
        assert fast(opt, model) and backend.calls == 1
        counts.append(_residual_checks(opt))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("change", ["class_flag", "instance_flag", "instance_attr", "buffer", "submodule",
                                    "class_attr", "config_replaced", "config_value"])
def test_per_layer_reads_from_the_class_still_fail(change):
    torch.manual_seed(0)
    model, x = Stack(3), torch.randn(2, 4)
    opt, backend = optimized(model)
    check(opt, model, x)
    layer = model.layers[1]
    if change == "class_flag":
        Layer.checkpointing = True
    elif change == "instance_flag":
        layer.checkpointing = True  # shadows the class's
    elif change == "instance_attr":
        layer.groups = 2
    elif change == "buffer":
        layer.register_buffer("groups", torch.ones(1))
    elif change == "submodule":
        layer.groups = torch.nn.Identity()
    elif change == "class_attr":
        Layer.groups = 2
    elif change == "config_replaced":
        layer.config = Config()  # no longer the shared one
    elif change == "config_value":
        Config.scale = 3.0
    try:
        check(opt, model, x)
        assert backend.calls == 2
    finally:
        Layer.checkpointing = False
        Config.scale = 0.5
        if hasattr(Layer, "groups"):
            del Layer.groups
