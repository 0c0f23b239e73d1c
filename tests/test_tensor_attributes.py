"""Python attributes of tensors written inside the optimized function (`x.tag = 3`): read
back by the trace, set on the real tensors after the graph (inputs, tensors the graph made,
aliases of one input), in one graph, as eager sets them. Each test runs the function
eagerly and optimized on equal inputs and compares results and the attributes left."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


def _both(fn, *make_args, calls=2, graphs=1):
    """fn eagerly and optimized (`calls` times, fresh arguments each time): the results and
    the arguments' attributes afterwards, compared; the number of graphs compiled."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    for _ in range(calls):
        eager_args, opt_args = [m() for m in make_args], [m() for m in make_args]
        expected, got = fn(*eager_args), opt(*opt_args)
        _same(got, expected)
        for e, o in zip(eager_args, opt_args):
            assert vars(o) == vars(e) if not isinstance(e, torch.Tensor) else _attrs(o) == _attrs(e)
    assert backend.calls == graphs
    return opt


def _attrs(t):
    return {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in t.__dict__.items()}


def _same(got, expected):
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)
        assert _attrs(got) == _attrs(expected)
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    else:
        assert got == expected


def test_an_attribute_set_on_an_input_is_read_back_and_left_on_it():
    def f(x):
        x.scale = 3
        return x * x.scale

    _both(f, lambda: torch.ones(3))


def test_an_attribute_set_on_a_computed_tensor_travels_with_it():
    def f(x):
        y = x + 1
        y.origin = "f"
        y.twice = y * 2  # a tensor as the value
        return y, y.origin

    _both(f, lambda: torch.ones(3))


def test_hasattr_and_getattr_see_the_write():
    def f(x):
        before = hasattr(x, "tag")
        x.tag = "seen"
        return x + len(getattr(x, "tag", "")), before, hasattr(x, "tag")

    _both(f, lambda: torch.ones(3))


def test_an_in_place_result_is_the_same_tensor():
    def f(x):
        y = x.add_(1)
        y.mark = 5
        return x * x.mark

    _both(f, lambda: torch.ones(3))


def test_two_names_of_one_input_share_the_attribute():
    def f(a, b):
        a.tag = 2
        return b * b.tag

    one = torch.ones(3)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    torch.testing.assert_close(opt(one, one), torch.full((3,), 2.0))
    assert one.tag == 2
    with pytest.raises(AttributeError, match="tag"):  # two tensors: b has none, as in eager
        opt(torch.ones(3), torch.ones(3))


def test_an_attribute_existing_before_the_call_is_overwritten():
    def make():
        t = torch.ones(3)
        t.tag = 1
        return t

    def f(x):
        old = x.tag
        x.tag = old + 1
        return x * x.tag

    _both(f, make)


def test_a_write_before_a_graph_break_is_seen_natively():
    def f(x):
        x.tag = 4
        print("tag", x.tag)  # the native print reads the real attribute
        return x * x.tag

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    x = torch.ones(2)
    torch.testing.assert_close(opt(x), torch.full((2,), 4.0))
    assert x.tag == 4


def test_a_tensor_property_is_not_an_attribute_write():
    def f(x):
        x.data = x * 2  # Tensor.data: the class's descriptor, a graph break
        return x + 1

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x, plain = torch.ones(2), torch.ones(2)
    torch.testing.assert_close(opt(x), f(plain))
    torch.testing.assert_close(x, plain)


def test_is_leaf_of_inputs_and_computed_tensors():
    def f(x, w):
        y = x * 2
        with torch.no_grad():
            z = w * 2
        return y, [t.is_leaf for t in (x, w, y, z, w.detach())]

    leaf = torch.randn(3, requires_grad=True)
    check(f, (torch.randn(3), leaf), kind="graph")
    check(f, (torch.randn(3, requires_grad=True), torch.randn(3)), kind="graph")


def test_is_leaf_of_a_computed_input_recompiles():
    def f(x):
        return x * 2 if x.is_leaf else x - 1

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    leaf = torch.randn(3, requires_grad=True)
    computed = leaf * 3  # requires grad, not a leaf: the same tensor metadata
    for x in (leaf, computed, leaf):
        torch.testing.assert_close(opt(x), f(x))
    assert backend.calls == 2
