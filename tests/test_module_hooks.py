"""Module hooks are read on every call, as Module.__call__ reads them: adding one after
the first call recompiles (then the graph breaks at the module's call, which runs
natively with its hooks: hooks are not traced); removing it goes back to the graph."""
import pytest
import torch
from helpers import CountingBackend, same

import minidynamo


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.relu(self.inner(x))


def run(model, x):
    return model(x) * 2


def _register(kind, module, calls):
    if kind == "forward":
        return module.register_forward_hook(lambda m, i, o: (calls.append(1), o * 0)[1])
    if kind == "forward_pre":
        return module.register_forward_pre_hook(lambda m, i: (calls.append(1), (i[0] + 100,))[1])
    if kind == "global_forward":
        return torch.nn.modules.module.register_module_forward_hook(
            lambda m, i, o: (calls.append(1), o + 5)[1])
    if kind == "global_forward_pre":
        return torch.nn.modules.module.register_module_forward_pre_hook(
            lambda m, i: (calls.append(1), None)[1])
    if kind == "full_backward":
        return module.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    raise AssertionError(kind)


@pytest.mark.parametrize("on", ["outer", "inner"])
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "global_forward", "global_forward_pre",
                                  "full_backward"])
def test_a_hook_added_after_the_first_call_is_honoured(kind, on):
    torch.manual_seed(0)
    model, x = Block(), torch.randn(2, 3, requires_grad=True)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    same(opt(model, x), run(model, x))
    eager_calls, opt_calls = [], []
    target = model if on == "outer" else model.inner
    handle = _register(kind, target, eager_calls)
    try:
        want = run(model, x)
        want.sum().backward()
        handle.remove()
        handle = _register(kind, target, opt_calls)
        got = opt(model, x)
        got.sum().backward()
        same(got, want)
        assert len(opt_calls) == len(eager_calls) > 0
        failure = opt.guard_failures()[-1]
        assert "now has hooks" in failure.reason and failure.kind == "NO_HOOKS", failure
    finally:
        handle.remove()
    entries = len(opt.cache_entries())
    same(opt(model, x), run(model, x))  # hook removed: the first entry serves again
    assert len(opt.cache_entries()) == entries and opt.cache_entries()[0].hit_count == 3


def test_module_with_a_hook_at_first_call_breaks_and_says_so():
    model, x = Block(), torch.randn(2, 3)
    calls = []
    handle = model.register_forward_hook(lambda m, i, o: (calls.append(1), o - 1)[1])
    try:
        opt = minidynamo.optimize(backend=CountingBackend())(run)
        same(opt(model, x), run(model, x))
        assert len(calls) == 2
        same(opt(model, x), run(model, x))  # cache hit
        assert len(calls) == 4
        (entry,) = opt.cache_entries()
        assert entry.kind == "break" and entry.hit_count == 2
        assert entry.break_reason.category == "call"
        assert "has hooks (_forward_hooks)" in str(entry.break_reason)
    finally:
        handle.remove()


class Scaled(Block):
    """A module whose class overrides __call__: calling it is not calling forward."""

    def __call__(self, x):
        return Block.forward(self, x) * 10


def test_a_module_class_overriding_call_is_not_called_as_forward():
    model, x = Scaled(), torch.randn(2, 3)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    same(opt(model, x), run(model, x))
