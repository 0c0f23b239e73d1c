"""`torch.inference_mode()` traced as a region of the graph, like grad-mode regions:
compared with eager for values, requires_grad, is_inference and the modes read inside,
on every Python (the `with` bytecode differs by version)."""
import contextlib
import re

import pytest
import torch
from helpers import CountingBackend, assert_uses, by_version, check

import minidynamo


def region(x):
    with torch.inference_mode():
        y = x * 2
        inside = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
    z = y + x  # an inference tensor used outside: a normal result
    return y, z, inside, y.is_inference(), y.requires_grad, z.is_inference(), z.requires_grad, \
        torch.is_inference_mode_enabled(), torch.is_grad_enabled()


def views_inside(x):
    # Eager's views of a tensor that requires grad keep requires_grad under inference
    # mode (leaves, not inference tensors); a copy is an inference tensor.
    with torch.inference_mode():
        views = (x.view(-1), x.reshape(-1), x.flatten(), x.view_as(x), x.t(), x[0], x.reshape_as(x))
        copy = x.t().reshape(-1)
        detached = x.detach()
        ones = torch.ones(2)
    return [(v, v.requires_grad, v.is_inference()) for v in views], \
        copy, copy.requires_grad, copy.is_inference(), detached.requires_grad, ones.is_inference()


def mode_false(x):
    with torch.inference_mode(False):
        y = x * 2
    return y, y.requires_grad, y.is_inference(), torch.is_grad_enabled()


def mode_false_inside(x):
    with torch.inference_mode():
        with torch.inference_mode(mode=False):  # grad mode on again inside
            a = x * 2
            inner = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        b = x * 3
    return a, b, inner, a.requires_grad, a.is_inference(), b.is_inference()


def under_no_grad(x):
    with torch.no_grad():
        with torch.inference_mode(False):  # inference_mode(False) turns grad mode on
            a = x * 2
        b = x * 3
    return a, b, a.requires_grad, b.requires_grad


def return_inside(x):
    with torch.inference_mode():
        return x.sin(), torch.is_inference_mode_enabled()


def in_place_on_an_input_inside(x):
    with torch.inference_mode():
        x.mul_(2)  # a normal tensor changed inside: allowed, and seen after
    return x + 1


def grad_enabled_inside(x):
    with torch.inference_mode():
        with torch.enable_grad():  # inference mode stays on: no autograd recording
            y = x * 2
            inside = torch.is_grad_enabled()
    return y, y.requires_grad, inside


@torch.inference_mode()
def _inference_helper(x):
    return x * 5


@torch.inference_mode
def _inference_helper_no_call(x):
    return x - 1


def module_level_decorated(x):
    a, b = _inference_helper(x), _inference_helper_no_call(x)
    return a, b, a.is_inference(), b.is_inference(), torch.is_inference_mode_enabled()


def inner_decorated(x):
    @torch.inference_mode()
    def inner(y):
        return y * 3, torch.is_inference_mode_enabled()

    r, inside = inner(x)
    return r, inside, r.is_inference(), torch.is_inference_mode_enabled()


def inner_decorated_no_grad(x):
    @torch.no_grad()
    def inner(y):
        return y * 3

    r = inner(x)
    return r, r.requires_grad, torch.is_grad_enabled()


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _apply_double(x):
    with torch.inference_mode():
        y = _Double.apply(x)
    return y, y.requires_grad, y.is_inference()


def nested_with_other_regions(x):
    with torch.no_grad(), torch.inference_mode(), contextlib.nullcontext():
        y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.inference_mode():
        z = x @ x.t()
    return y, z, z.dtype, z.is_inference()


CASES = [region, views_inside, mode_false, mode_false_inside, under_no_grad, return_inside,
         in_place_on_an_input_inside, grad_enabled_inside, module_level_decorated, inner_decorated,
         inner_decorated_no_grad, _apply_double, nested_with_other_regions]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_traced_like_eager(fn):
    if fn in (region, views_inside, mode_false, return_inside):
        assert_uses(fn, by_version(py310=("SETUP_WITH",), py311=("BEFORE_WITH",), py314=("LOAD_SPECIAL",)),
                    nested=False)
    grad = fn is not in_place_on_an_input_inside  # an in-place change of a leaf needs no grad
    check(fn, torch.randn(3, 2, requires_grad=grad), kind="graph")


def test_the_graph_carries_the_region():
    out = minidynamo.explain(region)(torch.randn(2, requires_grad=True))
    code = out.graphs[0].code
    assert "_enter_inference_mode(True)" in code and "_exit_inference_mode" in code, code
    out = minidynamo.explain(_apply_double)(torch.randn(2, requires_grad=True))
    code = out.graphs[0].code
    assert "_enter_inference_mode" in code and "autograd_function_apply" in code, code


def test_gradients_through_the_graph_around_the_region():
    def fn(x, w):
        with torch.inference_mode():
            scale = (x * 2).sum()
        return (w * scale.clone()).sum(), x * w

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    x, w = torch.randn(3), torch.randn(3)
    results = []
    for f in (fn, opt, opt):
        w_leaf = w.clone().requires_grad_()
        loss, prod = f(x.clone(), w_leaf)
        (loss + prod.sum()).backward()
        results.append((loss.detach(), prod.detach(), w_leaf.grad))
    torch.testing.assert_close(results[1], results[0])
    torch.testing.assert_close(results[2], results[0])
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]


def used_in_autograd_outside(x, w):
    with torch.inference_mode():
        y = x * 2
    return y * w  # eager: RuntimeError, inference tensors cannot be saved for backward


def test_inference_tensor_saved_for_backward_raises_as_eager():
    check(used_in_autograd_outside, (torch.randn(3), torch.randn(3, requires_grad=True)), kind="eager",
          reason="torch_op")


def test_entry_state_is_guarded():
    # Traced outside inference mode, called inside it: the entry's state check fails and
    # the call traces again under the caller's mode.
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(mode_false)
    x = torch.randn(3, requires_grad=True)
    outside = opt(x)
    with torch.inference_mode():
        inside, expected = opt(x), mode_false(x)
    assert [type(v) for v in inside] == [type(v) for v in expected]
    assert inside[1:] == expected[1:] and inside[1:] != outside[1:], (inside, outside)
    assert len(opt.cache_entries()) == 2 and backend.calls == 2


def stops_inside(x):
    with torch.inference_mode():
        print("inside")
        return x * 2


def test_a_stopped_trace_leaves_no_state():
    # The print breaks the graph inside the region; the trace that stopped inside left
    # inference mode and grad mode as they were.
    before = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
    check(stops_inside, torch.ones(2), kind="break", reason="side_effect")
    assert (torch.is_inference_mode_enabled(), torch.is_grad_enabled()) == before


def test_mode_other_than_a_bool_is_not_traced():
    def fn(x):
        with torch.inference_mode(1):  # not a bool: torch takes it as a function to decorate
            return x + 1
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    with pytest.raises(Exception) as eager:
        fn(torch.ones(2))
    for _ in range(2):
        with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
            opt(torch.ones(2))
    assert "graph" not in [e.kind for e in opt.cache_entries()]
