"""Iterating over objects of user classes: a Python `__iter__` inlined (returning a
generator or an iterator), and collections.abc.Sequence's mixin `__iter__` (self[i] until
`__getitem__` raises IndexError), each compared with eager; where the end of the
sequence could be caught by something else, the trace declines as before."""
from __future__ import annotations

import collections.abc

import torch

import minidynamo
from helpers import CountingBackend, check


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


class Layers(collections.abc.Sequence):
    """transformers' per-layer config view, in small: a Sequence made in the forward."""

    def __init__(self, scales):
        self.scales = scales

    def __len__(self):
        return len(self.scales)

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        if i < 0 or i >= len(self):
            raise IndexError("layer index out of range")
        return self.scales[i]


class BareRaise(Layers):
    def __getitem__(self, i):
        if i >= len(self.scales):
            raise IndexError
        return self.scales[i] * 2


class CaughtInside(Layers):
    def __getitem__(self, i):  # the IndexError is its own business: iteration goes on past it
        try:
            if i >= len(self.scales):
                raise IndexError("caught")
        except IndexError:
            if i > len(self.scales) + 1:
                raise
            return -1.0
        return self.scales[i]


class Longer(Layers):
    def __len__(self):  # a __len__ that disagrees: iteration follows __getitem__, not __len__
        return 1


class Bag:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


class Counted:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield i * 10


def test_sequence_made_in_the_trace_is_iterated():
    def f(x):
        total = x
        for s in Layers([1.0, 2.0, 3.0]):
            total = total * s
        return total, list(Layers([4, 5]))

    check(f, (t(),), kind="graph")


def test_sequence_passed_in_is_iterated():
    def f(x, layers):
        return [x * s for s in layers]

    check(f, (t(), Layers([2.0, 3.0])), kind="graph")


def test_bare_raise_of_the_class_ends_the_sequence():
    def f(x):
        return sum(BareRaise([1.0, 2.0])) * x

    check(f, (t(),), kind="graph")


def test_getitem_past_len_decides_as_in_eager():
    def f(x):
        return [x + s for s in Longer([1.0, 2.0, 3.0])]

    check(f, (t(),), kind="graph")


def test_an_index_error_caught_inside_getitem_is_not_the_end():
    def f(x):
        return [x + s for s in CaughtInside([1.0, 2.0])]

    # eager: 1, 2, then -1, -1 (caught inside), and the third past the end escapes: 4 items.
    # The trace catches the first two (test_exceptions_traced.py), on every Python.
    check(f, (t(),), kind="graph")


def test_python_iter_returning_an_iterator():
    def f(x):
        return [x * v for v in Bag([1.0, 2.0])], list(Bag((3, 4)))

    check(f, (t(),), kind="graph")


def test_python_iter_that_is_a_generator():
    def f(x, c):
        return [x + v for v in c], sum(Counted(3))

    check(f, (t(), Counted(2)), kind="graph")


def test_patched_iter_recompiles():
    class Swappable:
        def __init__(self):
            self.items = [1.0, 2.0]

        def __iter__(self):
            return iter(self.items)

    obj, x = Swappable(), t()

    def f(x, o):
        return [x * v for v in o]

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for got, want in zip(opt(x, obj), f(x, obj)):
        torch.testing.assert_close(got, want)
    Swappable.__iter__ = lambda self: iter([5.0])
    got, want = opt(x, obj), f(x, obj)
    assert len(got) == len(want) == 1
    torch.testing.assert_close(got[0], want[0])
    assert backend.calls == 2


class Cache:
    def __init__(self, n):
        self.layers = [i * 1.0 for i in range(n)]
        self.seen = 0


def test_generator_consumed_whole_yielding_objects_made_in_the_trace():
    # transformers' ModelOutput.to_tuple(): tuple(self[k] for k in self.keys()), with a
    # DynamicCache made in the forward among the values
    def f(x):
        d = {"logits": x * 2, "cache": Cache(2)}
        out = tuple(d[k] for k in d)
        return out[0] + out[1].layers[1], out[1]

    check(f, (t(),), kind="graph")


def test_generator_changing_an_object_it_yielded_still_declines():
    def f(x):
        caches = [Cache(1), Cache(2)]

        def gen():
            for c in caches:
                yield c
                c.seen += 1  # after the consumer took it: tuple() reads the final state

        out = tuple(gen())
        return x + out[0].seen + out[1].seen

    # Declined at tuple(gen()): the frame breaks there (`caches` is a cell passed by reference)
    # and the call runs natively, as eager.
    check(f, (t(),), kind="break", reason="generator")
