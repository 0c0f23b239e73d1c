"""Iterating over a constant that is not iterable (an int, None, a float) raises eager's
TypeError: a generator expression over it, a for loop (caught or not), unpacking it.
Compared with eager; under fullgraph=True the refusal names the TypeError."""
import pytest
import torch
from helpers import check, check_fallback

import minidynamo


def genexpr_over(x, s):
    return x + 1, list(x for x in s)


def loop_caught(x, s):
    try:
        for i in s:
            x = x + i
    except TypeError as e:
        return x - 1, str(e)
    return x


def unpack(x, s):
    a, b = s
    return x + a + b


@pytest.mark.parametrize("fn", [genexpr_over, loop_caught, unpack], ids=lambda f: f.__name__)
@pytest.mark.parametrize("s", [3, None, 2.5], ids=repr)
def test_not_iterable_raises_as_eager(fn, s):
    check_fallback(fn, (torch.ones(2), s), reason="exceptions")


def test_iterable_constants_still_trace():
    check(genexpr_over, (torch.ones(2), (1, 2)), kind="graph")
    check(genexpr_over, (torch.ones(2), "ab"), kind="graph")


def test_fullgraph_names_the_type_error():
    def f(s):
        return (x for x in s)

    with pytest.raises(minidynamo.Unsupported, match="'int' object is not iterable"):
        minidynamo.optimize(backend="eager", fullgraph=True)(f)(1)
