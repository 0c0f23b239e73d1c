"""operator.itemgetter / attrgetter / methodcaller made in the trace or passed in: the
subscripts, attribute reads and method calls they stand for are traced (sort keys, map
over layers), CPython's argument errors raised as its own. Differential against eager."""
import operator

import pytest
import torch

from helpers import CountingBackend, check
import minidynamo


def test_itemgetter_as_a_sort_key():
    def f(x):
        rows = [(x * 2, 3), (x, 1), (x + 1, 2)]
        rows.sort(key=operator.itemgetter(1))
        return rows[0][0] + rows[2][0], sorted(rows, key=operator.itemgetter(1))[1][1]

    check(f, (torch.randn(3),), kind="graph")


def test_itemgetter_of_several_keys_and_of_dicts():
    def f(x):
        pick = operator.itemgetter(0, 2)
        a, b = pick([x, x * 2, x * 3])
        named = operator.itemgetter("w")
        return a + b + named({"w": x.sin()}), pick("abc")

    check(f, (torch.randn(3),), kind="graph")


def test_attrgetter_dotted_and_several():
    lin = torch.nn.Linear(3, 2)

    def f(x, m):
        weight, bias = operator.attrgetter("weight", "bias")(m)
        shape = operator.attrgetter("weight.shape")(m)
        return x @ weight.t() + bias, shape

    check(f, (torch.randn(4, 3), lin), kind="graph")


def test_attrgetter_over_modules_in_map():
    layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])

    def f(x):
        return x * sum(w.sum() for w in map(operator.attrgetter("weight"), layers))

    check(f, (torch.randn(3),), kind="graph")


def test_methodcaller_with_arguments_and_keywords():
    def f(x):
        total = operator.methodcaller("sum", 0)(x)
        clamped = operator.methodcaller("clamp", min=0.0)(x)
        return total, clamped, operator.methodcaller("upper")("abc")

    check(f, (torch.randn(4, 3),), kind="graph")


GETTERS = {"key": operator.itemgetter(1), "attr": operator.attrgetter("mT"),
           "call": operator.methodcaller("mul", 3)}


def test_getters_reached_from_the_frame():
    def f(x):
        return GETTERS["key"]([x, x * 2]) + GETTERS["attr"](x) + GETTERS["call"](x)

    info = check(f, (torch.randn(3, 3),), kind="graph")
    GETTERS["key"] = operator.itemgetter(0)  # another getter: traced again
    GETTERS["call"] = operator.methodcaller("add", other=2)
    try:
        torch.testing.assert_close(info.opt(torch.ones(3, 3)), f(torch.ones(3, 3)))
    finally:
        GETTERS["key"], GETTERS["call"] = operator.itemgetter(1), operator.methodcaller("mul", 3)
    assert len(info.opt.cache_entries()) == 2


def test_a_getter_that_escapes_is_made_again():
    def f(x):
        return x + 1, operator.itemgetter(1, 0), operator.methodcaller("view", -1, out=None)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for _ in range(2):
        got, expected = opt(torch.ones(2)), f(torch.ones(2))
        torch.testing.assert_close(got[0], expected[0])
        assert type(got[1]) is operator.itemgetter and got[1]((5, 6)) == (6, 5)
        assert repr(got[2]) == repr(expected[2])
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]


@pytest.mark.parametrize("make", [
    lambda: operator.itemgetter(),
    lambda: operator.attrgetter(1),
    lambda: operator.methodcaller(),
    lambda: operator.itemgetter(0, k=1),
])
def test_argument_errors_raised_as_cpython(make):
    def f(x):
        try:
            make()
        except TypeError as e:
            return x + 1, str(e)
        return x, ""

    check(f, (torch.randn(3),), kind="graph")


def test_a_getter_called_wrongly_raises_as_cpython():
    def f(x):
        try:
            operator.itemgetter(0)(x, x)
        except TypeError as e:
            return x + 1, str(e)
        return x, ""

    check(f, (torch.randn(3),), kind="graph")
