"""Each call runs the user's code exactly once, whatever path it takes through the cache:
a guard miss that traces again and then raises the user's own exception must not be
answered by a second miss (which would run the function, and its side effects, again)."""
import contextlib
import io

import pytest
import torch
from helpers import CountingBackend

import minidynamo

calls = []


def _appends_then_maybe_raises(x, bad):
    calls.append(1)
    print("called")
    if bad:
        raise ValueError("bad input")
    return x + 1


def _run(opt, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            opt(*args)
        except ValueError as e:
            assert str(e) == "bad input"
    return out.getvalue()


@pytest.mark.parametrize("entries_before", [1, 2, 3])
def test_a_recompiling_call_that_raises_runs_once(entries_before):
    """One entry: its fast call goes to the miss path itself; more: the dispatcher does."""
    calls.clear()
    opt = minidynamo.optimize(backend=CountingBackend())(_appends_then_maybe_raises)
    for n in range(entries_before):
        assert _run(opt, torch.ones(n + 1), False) == "called\n"
    assert len(calls) == entries_before
    assert _run(opt, torch.ones(2), True) == "called\n"
    assert len(calls) == entries_before + 1
    assert _run(opt, torch.ones(2), True) == "called\n"  # the eager entry, hit
    assert len(calls) == entries_before + 2


def test_a_graph_entry_whose_graph_raises_runs_once():
    seen = []

    def f(x, idx):
        return torch.index_select(x, 0, idx) * 2
    backend = CountingBackend()

    def counting(gm, example_inputs):
        compiled = backend(gm, example_inputs)

        def run(*args):
            seen.append(1)
            return compiled(*args)
        return run
    opt = minidynamo.optimize(backend=counting)(f)
    x = torch.ones(4, 2)
    opt(x, torch.tensor([0, 1]))
    seen.clear()
    with pytest.raises((IndexError, RuntimeError)):
        opt(x, torch.tensor([0, 9]))  # guards pass; the graph itself raises
    assert seen == [1]


def test_saved_tensor_hooks_around_the_call_see_the_graphs_tensors_only():
    """The trace's fake ops save fake tensors: the user's pack hook must not see them (it
    runs for the tensors the graph saves, once per call, as in eager)."""
    packed = []

    def pack(t):
        packed.append((tuple(t.shape), type(t).__name__))
        return t

    def f(x, w):
        return (x @ w).relu().sum()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    opt = minidynamo.optimize(f)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        for run in (f, opt, opt):
            packed.clear()
            run(x, w).backward()
            if run is f:
                expected = list(packed)
            else:
                assert packed == expected
