"""Torch function modes entered in traced code (`with MyMode():`): the mode's
`__torch_function__` inlined for every torch-level call in the block, compared with
eager (results, what the handler logs, graph counts as torch.compile's)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import minidynamo
from helpers import CountingBackend, check, check_fallback


def _name(func):
    return func.__name__


class Swap(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.add:
            func = torch.mul
        return func(*args, **kwargs)


class Log(TorchFunctionMode):
    def __init__(self, log, tag="log"):
        super().__init__()
        self.log = log
        self.tag = tag

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append((self.tag, _name(func), len(args)))
        return func(*args, **(kwargs or {}))


class Twice(Log):
    """A subclass whose handler goes on through its parent's."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append("twice")
        return super().__torch_function__(func, types, args, kwargs)


class Sizes(TorchFunctionMode):
    """Answers some calls itself: a constant, another function's result."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.size:
            return (7,)
        if func is torch.Tensor.sin:
            return torch.cos(args[0]) * 10
        return func(*args, **(kwargs or {}))


def test_a_mode_changes_the_function():
    def f(x):
        with Swap():
            y = torch.add(x, 2)
        return y + 1
    info = check(f, torch.randn(3), kind="graph", graphs=1)
    assert torch.mul in info.backend.ops()


def test_every_torch_level_call_reaches_the_handler():
    def f(x, log):
        with Log(log):
            a = torch.add(x, 1)
            b = x.sin() + a
            c = F.relu(b) * 2
            d = -c
            e = 1 - d
            n = x.dim()
            s = x.shape
            i = e[0]
        return e + n + s[0] + i
    check(f, (torch.randn(3), []), kind="graph", graphs=1)


def test_nested_modes_inner_first_handler_calls_go_outside():
    def f(x, log):
        with Log(log, "outer"):
            with Log(log, "inner"):
                y = torch.add(x, 1)
            z = y.cos()
        return z
    check(f, (torch.randn(3), []), kind="graph", graphs=1)


def test_super_torch_function_and_a_mode_passed_in():
    def f(x, mode):
        with mode:
            y = x * 3
        return y.sum()
    check(f, (torch.randn(3), Twice([])), kind="graph", graphs=1)


def test_handler_returns_its_own_values():
    def f(x):
        with Sizes():
            n = x.size()[0]
            y = x.sin() + n
        return y
    check(f, torch.randn(3), kind="graph", graphs=1)


def _enter_in_callee(x, log):
    with Log(log):
        return x.exp()


def test_mode_entered_in_a_called_function():
    def f(x, log):
        return _enter_in_callee(x, log) + x.exp()
    check(f, (torch.randn(3), []), kind="graph", graphs=1)


def test_a_graph_break_inside_the_block_runs_the_call_eagerly():
    def f(x, log):
        with Log(log):
            y = torch.add(x, 1)
            print("inside")
            y = y * 2
        return y + 1
    # The handler's own frames, run by the eager call, are optimized on their own: the
    # graphs of its two `func(*args)` calls.
    info = check_fallback(f, (torch.randn(3), []), graphs=2)
    assert "torch function mode" in info.entries[0].reason.no_break


def test_a_mode_around_the_call_runs_it_eagerly_then_traces_without_it():
    def f(x):
        n = x.size()[0]
        return torch.add(x, n) + x.sin()
    be = CountingBackend()
    opt = minidynamo.optimize(f, backend=be)
    x = torch.randn(3)
    for _ in range(2):
        with Sizes():
            expected = f(x)
            assert torch.equal(opt(x), expected)
    assert [e.kind for e in opt.cache_entries()] == ["eager"] and be.calls == 0
    assert "active around the optimized call" in opt.cache_entries()[0].reason.detail
    assert torch.equal(opt(x), f(x))
    assert [e.kind for e in opt.cache_entries()] == ["eager", "graph"] and be.calls == 1


class Aten(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_entered_inside_runs_the_call_eagerly():
    def f(x, log):
        with Aten(log):
            y = x + 1
        return y
    # The eager run's result and the mode's log are eager's. How many graphs the frame hook
    # makes meanwhile depends on torch: 2.10 offers the mode's own handler frames to it.
    x = torch.randn(3)
    expected_log, got_log = [], []
    expected = f(x, expected_log)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    for _ in range(2):
        got_log.clear()
        torch.testing.assert_close(opt(x, got_log), expected, rtol=0, atol=0)
        assert got_log == expected_log
    entry, = opt.cache_entries()
    assert entry.kind == "eager" and entry.reason.category == "call"
    assert "TorchDispatchMode" in entry.reason.detail
    with pytest.raises(minidynamo.Unsupported) as e:
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)(x, [])
    assert e.value.category == "call"


def test_len_of_a_tensor_under_a_mode_runs_the_call_eagerly():
    def f(x, log):
        with Log(log):
            n = len(x)
        return x + n
    check_fallback(f, (torch.randn(3), []), reason="call")
