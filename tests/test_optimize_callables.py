"""optimize() of callables that are not Python functions, as torch.compile takes them: a
C function (`torch.add`), a method called through its class (`torch.Tensor.sin`), a bound
method (a module's `forward`, `model.forward = optimize(model.forward)`), a
functools.partial, an object with `__call__`. Each is called by a Python function the
trace inlines: one graph, guarded on the callable, differential against eager."""
import functools
import inspect

import pytest
import torch

import minidynamo
from helpers import CountingBackend, same_outcome


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k

    def shift(self, x, by=1):
        return x + by * self.k


def scaled(x, k, *, bias=0.0):
    return x * k + bias


def _optimized(target):
    backend = CountingBackend()
    return minidynamo.optimize(target, backend=backend), backend


@pytest.mark.parametrize("target, args", [
    (torch.add, (torch.randn(3), torch.randn(3))),
    (torch.Tensor.sin, (torch.randn(3),)),
    (torch.Tensor.add, (torch.randn(3), 2)),
    (torch.nn.functional.gelu, (torch.randn(3),)),
    (Scaler(3), (torch.randn(3),)),
    (Scaler(2).shift, (torch.randn(3),)),
    (functools.partial(scaled, k=2, bias=1.0), (torch.randn(3),)),
    (functools.partial(torch.mul, 3), (torch.randn(3),)),
])
def test_callables_trace_whole(target, args):
    opt, backend = _optimized(target)
    for _ in range(2):
        same_outcome(target, opt, *args)
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]


def test_a_bound_forward_replaced_by_its_optimized_self():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    eager = lambda x: torch.relu(model[0](x))  # noqa: E731
    backend = CountingBackend()
    model.forward = minidynamo.optimize(model.forward, backend=backend)
    x = torch.ones(2, 3)
    torch.testing.assert_close(model(x), eager(x))
    with torch.no_grad():
        model[0].bias.add_(1)  # the parameter is read at each call, not copied
    torch.testing.assert_close(model(x), eager(x))
    assert backend.calls == 1


def test_the_callables_state_is_guarded():
    obj = Scaler(2)
    opt, backend = _optimized(obj)
    x = torch.randn(3)
    same_outcome(obj, opt, x)
    obj.k = 5  # read by the trace: a new trace, the new value
    same_outcome(obj, opt, x)
    assert backend.calls == 2


def test_a_c_function_with_effects_runs_once():
    opt = minidynamo.optimize(print)
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        opt("hello", 3)
        opt("again")
    assert out.getvalue() == "hello 3\nagain\n"


def test_exceptions_and_names_are_the_callables():
    opt = minidynamo.optimize(torch.add)
    with pytest.raises(TypeError) as expected:
        torch.add(torch.ones(2), "x")
    with pytest.raises(TypeError) as got:
        opt(torch.ones(2), "x")
    assert str(got.value) == str(expected.value)
    assert opt.__name__ == "add" and opt.__wrapped__ is torch.add
    bound = minidynamo.optimize(Scaler(2).shift)
    assert str(inspect.signature(bound)) == "(x, by=1)"
    partial = minidynamo.optimize(functools.partial(scaled, k=2))
    torch.testing.assert_close(partial(torch.ones(2), bias=1.0), scaled(torch.ones(2), 2, bias=1.0))


def test_explain_takes_them_too():
    out = minidynamo.explain(Scaler(4))(torch.ones(2))
    assert out.graph_count == 1 and out.graph_break_count == 0


def test_what_is_not_callable_or_a_generator_method_still_refused():
    class Gen:
        def items(self, x):
            yield x

    with pytest.raises(TypeError, match="generator"):
        minidynamo.optimize(Gen().items)
    with pytest.raises(TypeError, match="needs a function or another callable, got int"):
        minidynamo.optimize()(3)
