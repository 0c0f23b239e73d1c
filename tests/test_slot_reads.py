"""Objects passed in whose class reads an attribute through a C data descriptor of its
own storage: a `__slots__` member, a namedtuple field of a namedtuple class the trace
models as an object (one with a method of its own). Differential against eager: results,
a recompile where the slot's value changes, an unset slot's AttributeError, hasattr."""
import typing

import torch

import minidynamo
from helpers import CountingBackend, same_outcome


class Slotted:
    __slots__ = ("x", "y")

    def __init__(self, x):
        self.x = x


class PairWithGetitem(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor

    def __getitem__(self, index):  # a method of its own: modeled as an object
        return 0


def scaled(obj, t):
    return t * obj.x, hasattr(obj, "x")


def test_slot_member_read():
    for value in (2, torch.full((2,), 3.0)):
        backend = CountingBackend()
        opt = minidynamo.optimize(scaled, backend=backend, fullgraph=True)
        for _ in range(2):
            same_outcome(scaled, opt, Slotted(value), torch.ones(2))
        assert backend.calls == 1  # one graph, then the cache


def test_slot_value_change_recompiles():
    backend = CountingBackend()
    opt = minidynamo.optimize(scaled, backend=backend)
    s = Slotted(2)
    same_outcome(scaled, opt, s, torch.ones(2))
    s.x = 5
    same_outcome(scaled, opt, s, torch.ones(2))
    assert backend.calls == 2


def test_unset_slot_raises_eagers_attribute_error():
    def f(obj, t):
        return t + obj.y

    opt = minidynamo.optimize(f, backend=CountingBackend())
    assert isinstance(same_outcome(f, opt, Slotted(1), torch.ones(1)), AttributeError)

    def g(obj, t):
        return t + (1 if hasattr(obj, "y") else 2)

    same_outcome(g, minidynamo.optimize(g, backend=CountingBackend()), Slotted(1), torch.ones(1))


def test_namedtuple_fields_of_a_class_with_methods():
    def f(tup):
        return tup.a + 1, tup.b

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend, fullgraph=True)
    for _ in range(2):
        same_outcome(f, opt, PairWithGetitem(torch.ones(1), torch.zeros(1)))
    assert backend.calls == 1
