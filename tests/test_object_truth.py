"""bool() of objects passed in: CPython asks the class's `__bool__`, then its `__len__`,
else the object is true. `if self.downsample:` on an optional submodule (transformers'
MobileViT) is decided in the trace, not a break; a class that gains `__bool__` or
`__len__` after the trace recompiles. Each case compares with eager."""
from __future__ import annotations

import torch

import minidynamo
from helpers import CountingBackend


class Block(torch.nn.Module):
    def __init__(self, down: bool):
        super().__init__()
        self.down = torch.nn.Linear(4, 4) if down else None
        self.empty = torch.nn.Sequential()
        self.acts = torch.nn.ModuleList([torch.nn.ReLU()])

    def forward(self, x):
        if self.down:  # a Linear (no __bool__/__len__): true; None: false
            x = self.down(x)
        if self.empty:  # an empty Sequential: __len__ is 0
            x = x * 100
        if self.acts:
            x = self.acts[0](x)
        return x + 1


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class Flag:
    def __init__(self, b):
        self.b = b

    def __bool__(self):
        return self.b


def test_optional_submodule_is_one_graph():
    x = torch.randn(2, 4)
    for down in (True, False):
        model, backend = Block(down), CountingBackend()
        opt = minidynamo.optimize(model, backend=backend)
        torch.testing.assert_close(opt(x), model(x), rtol=0, atol=0)
        assert backend.calls == 1


def f(x, sized, flag):
    if sized:
        x = x + 1
    if flag:
        x = x * 2
    return x


def test_len_and_bool_of_objects_passed_in():
    x = torch.randn(3)
    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for sized, flag in [(0, True), (3, False), (3, True), (0, False), (0, True)]:
        torch.testing.assert_close(opt(x, Sized(sized), Flag(flag)), f(x, Sized(sized), Flag(flag)), rtol=0, atol=0)
    report = minidynamo.explain(f)(x, Sized(1), Flag(True))
    assert report.graph_count == 1 and not report.break_reasons, report


def test_class_that_gains_len_recompiles():
    class Plain:
        pass

    def g(x, p):
        return x + 1 if p else x - 1

    x, p = torch.randn(3), Plain()
    backend = CountingBackend()
    opt = minidynamo.optimize(g, backend=backend)
    torch.testing.assert_close(opt(x, p), g(x, p), rtol=0, atol=0)
    Plain.__len__ = lambda self: 0  # now false
    torch.testing.assert_close(opt(x, p), g(x, p), rtol=0, atol=0)
    assert backend.calls == 2
    assert "__len__" in opt.guard_failures()[-1].reason


def test_bool_raising_is_eager_error():
    class Bad:
        def __bool__(self):
            raise ValueError("no truth here")

    def h(x, b):
        return x + 1 if b else x

    opt = minidynamo.optimize(h, backend=CountingBackend())
    for fn in (h, opt):
        try:
            fn(torch.randn(2), Bad())
        except ValueError as e:
            assert str(e) == "no truth here"
        else:
            raise AssertionError("bool() should raise")
