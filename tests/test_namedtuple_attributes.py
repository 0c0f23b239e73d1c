"""Attributes set on an instance of a namedtuple subclass passed in (the subclass gives it
a __dict__): later reads see them, the entry sets them on the real instance after the
graph, the returned instance is the one passed in. A plain namedtuple (no __dict__) raises
eager's AttributeError; a class changed to take the write is not served a stale graph."""
import typing

import torch
from helpers import check

import minidynamo


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class PairWithDict(Pair):
    pass


def set_and_return(tup):
    tup.c = torch.tensor(3.0)
    return tup


def set_then_read(tup, x):
    tup.d = x * 2
    tup.d = tup.d + 1
    return tup.d + tup.a, tup.b


def read_existing(tup, x):
    return x + tup.e


def pair(cls=PairWithDict):
    return cls(a=torch.tensor([1.0]), b=torch.tensor(2.0))


def test_set_and_return_the_instance_passed_in():
    info = check(set_and_return, (pair(),), kind="graph")
    assert info.graphs == 1
    tup = pair()
    out = minidynamo.optimize(backend="eager", fullgraph=True)(set_and_return)(tup)
    assert out is tup and torch.equal(tup.c, torch.tensor(3.0)) and vars(tup).keys() == {"c"}


def test_set_then_read():
    check(set_then_read, (pair(), torch.ones(1)), (pair(), torch.zeros(1)), kind="graph")
    tup = pair()
    minidynamo.optimize(backend="eager")(set_then_read)(tup, torch.ones(1))
    assert torch.equal(tup.d, torch.full((1,), 3.0))


def test_an_attribute_present_before_the_call():
    tup = pair()
    tup.e = 4
    check(read_existing, (tup, torch.ones(1)), kind="graph")


def test_a_plain_namedtuple_raises_as_eager():
    opt = minidynamo.optimize(backend="eager")(set_and_return)
    try:
        set_and_return(pair(Pair))
    except AttributeError as e:
        expected = str(e)
    try:
        opt(pair(Pair))
    except AttributeError as e:
        assert str(e) == expected
    else:
        raise AssertionError("no AttributeError")


def test_a_class_changed_to_take_the_write_is_not_stale():
    class Local(Pair):
        pass

    seen = []
    opt = minidynamo.optimize(backend="eager")(set_and_return)
    opt(pair(Local))
    Local.c = property(lambda self: 0, lambda self, v: seen.append(v))
    tup = opt(pair(Local))
    assert len(seen) == 1 and "c" not in vars(tup)


def set_one_read_other(x, t1, t2):
    t1.c = 5
    return x + 1, hasattr(t2, "c")


def test_the_same_instance_under_two_names_is_not_stale():
    opt = minidynamo.optimize(backend="eager")(set_one_read_other)
    assert opt(torch.ones(1), pair(), pair())[1] is False
    t = pair()
    got = opt(torch.ones(1), t, t)
    u = pair()
    assert got[1] is set_one_read_other(torch.ones(1), u, u)[1] is True
