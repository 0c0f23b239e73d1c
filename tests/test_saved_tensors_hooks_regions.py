"""`torch.autograd.graph.disable_saved_tensors_hooks(message)` regions in the traced
function (the `with` form and the decorator form, nested, inside a region entered before
the call): the graph enters and leaves the region as eager does (the state it found given
back), a graph break inside runs its native part inside the region, and registered
saved-tensor hooks make it raise eager's RuntimeError. Compared with eager (values,
printed output, the state after the call)."""
import pytest
import torch
from helpers import check

import minidynamo

get_message = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message
off = torch.autograd.graph.disable_saved_tensors_hooks


def with_region(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("not supported"):
        y = x * 2
    return y + 1


def decorated_nested(x):
    @torch.autograd.graph.disable_saved_tensors_hooks("outer")
    def f(a, b):
        @torch.autograd.graph.disable_saved_tensors_hooks("inner")
        def g(a, b):
            return a + b

        return g(a, b) + a

    return f(x, x * 3)


def break_inside(x):
    with off("in the region"):
        y = x * 2
        print("inside:", get_message())
        y = y + 1
    return y


@pytest.mark.parametrize("fn", [with_region, decorated_nested], ids=lambda f: f.__name__)
def test_regions_trace_in_one_graph(fn):
    info = check(fn, (torch.randn(3),), (torch.randn(3, requires_grad=True),), kind="graph", same_entry=False)
    assert info.graphs >= 1
    assert get_message() is None


def test_inside_a_region_entered_before_the_call():
    opt = minidynamo.optimize(backend="eager", fullgraph=True)(decorated_nested)
    x = torch.randn(2)
    with off("before"):
        assert torch.equal(opt(x), decorated_nested(x))
        assert get_message() == "before"
    assert get_message() is None


def test_a_break_inside_runs_its_native_part_in_the_region():
    check(break_inside, (torch.randn(3),), kind="break", reason="call", graphs=2)
    assert get_message() is None


def test_registered_hooks_raise_as_eager():
    opt = minidynamo.optimize(backend="eager")(with_region)
    x = torch.randn(2)
    opt(x)  # traced without hooks: the graph itself raises below
    for fn in (with_region, opt, minidynamo.optimize(backend="eager")(with_region)):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            with pytest.raises(RuntimeError, match="not supported"):
                fn(x)
        assert get_message() is None
