"""Tuples made in the trace are one object each after the graph, as in eager: two names
of one tuple live at a graph break stay one object (`t is u`), a tuple returned twice is
returned as one object, and an attribute set on an object of a namedtuple subclass
without `__slots__` (which has a `__dict__`) is on the object returned."""
import typing

import torch

import minidynamo
from helpers import CountingBackend, check


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class PairWithDict(Pair):  # no __slots__: its objects take attributes
    pass


def aliased_across_a_break(x):
    t = (x, x + 1)
    u = t
    print("break")
    return t is u, u[1]


def test_two_names_of_one_tuple_stay_one_object_across_a_break():
    check(aliased_across_a_break, torch.ones(2), kind="break")


def returned_twice(x):
    t = (x + 1, 2)
    return t, t


def test_tuple_returned_twice_is_one_object():
    opt = minidynamo.optimize(returned_twice, backend=CountingBackend())
    for _ in range(2):
        r = opt(torch.ones(2))
        assert r[0] is r[1] and torch.equal(r[0][0], torch.ones(2) + 1)


def attribute_on_a_namedtuple_subclass(x):
    tup = PairWithDict(a=x, b=x + 1)
    tup.c = x * 3
    return tup


def attribute_after_a_break(x):
    t = PairWithDict(a=x, b=x + 1)
    u = t
    print("break")
    u.c = 3
    return t


def test_attribute_set_on_a_namedtuple_subclass_is_kept():
    for fn in (attribute_on_a_namedtuple_subclass, attribute_after_a_break):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        for _ in range(2):
            expected, got = fn(torch.ones(2)), opt(torch.ones(2))
            assert type(got) is PairWithDict and all(torch.equal(a, b) for a, b in zip(got, expected))
            assert vars(got).keys() == vars(expected).keys()
            assert torch.equal(torch.as_tensor(got.c), torch.as_tensor(expected.c))
