"""What a cache hit costs in guards: a value several guards read through the same path
(`model.blocks[2].attn`, each step a Module.__getattr__ call) is fetched once per call,
not once per guard, and the guards still fail where they should."""
from __future__ import annotations

import torch

import minidynamo
from helpers import CountingBackend


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(4, 4)
        self.k = torch.nn.Linear(4, 4)
        self.scale = 0.5
        self.causal = True

    def forward(self, x):
        y = self.q(x) * self.k(x) * self.scale
        return y.tril() if self.causal else y


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        return x + self.attn(self.norm(x))


class Model(torch.nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def _getattr_calls(fn, *args) -> int:
    """Module.__getattr__ calls one call of `fn` makes."""
    calls = [0]
    original = torch.nn.Module.__getattr__

    def counting(self, name):
        calls[0] += 1
        return original(self, name)

    torch.nn.Module.__getattr__ = counting
    try:
        fn(*args)
    finally:
        torch.nn.Module.__getattr__ = original
    return calls[0]


def test_a_shared_path_is_fetched_once_per_call():
    model, x = Model(), torch.randn(4, 4)
    backend = CountingBackend()
    opt = minidynamo.optimize(model, backend=backend)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), model(x))
        entry, = [e for e in opt.cache_entries()]
        guards = len(entry.guards)
        hit = _getattr_calls(opt, x)
        eager = _getattr_calls(model, x)
    assert backend.calls == 1
    # Each Module.__getattr__ step of the guards' paths once: no more than eager's own
    # forward makes (which reads each submodule and parameter once), far fewer than guards.
    assert hit <= eager, (hit, eager)
    assert hit < guards / 2, (hit, guards)


def test_guards_through_a_hoisted_path_still_fail():
    model, x = Model(), torch.randn(4, 4)
    backend = CountingBackend()
    opt = minidynamo.optimize(model, backend=backend)
    with torch.no_grad():
        opt(x)
        model.blocks[2].attn.scale = 2.0  # read through model.blocks[2].attn, shared by many guards
        torch.testing.assert_close(opt(x), model(x))
        assert backend.calls == 2
        model.blocks[3].attn.causal = False
        torch.testing.assert_close(opt(x), model(x))
        assert backend.calls == 3
        model.blocks[1] = Block()  # a new module where the path led: its parameters are used
        torch.testing.assert_close(opt(x), model(x))
        model.blocks[1].attn.scale = 5.0
        torch.testing.assert_close(opt(x), model(x))
        assert backend.calls == 4
        model.blocks[1] = torch.nn.Identity()  # another class there: recompiles
        torch.testing.assert_close(opt(x), model(x))
        assert backend.calls == 5


def test_failure_is_explained_by_the_guard_not_the_local():
    model, x = Model(2), torch.randn(4, 4)
    opt = minidynamo.optimize(model, backend=CountingBackend())
    with torch.no_grad():
        opt(x)
        model.blocks[1].attn.scale = 3.0
        opt(x)
    failures = opt.guard_failures()
    assert failures and "scale" in str(failures[-1]) and "_md_p" not in str(failures[-1])
