"""Iterators passed in (list, tuple and range iterators; zip and enumerate objects) that
the trace advances: the caller's iterator is left where eager leaves it (next(), a loop
stopped early, a loop drained, a loop with a graph break inside, the iterator returned
as itself), on every call. Differential against eager: results, and what is left in the
iterator after the call."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend


def take_one(x, it):
    n = next(it)
    return x + n


def loop_stopped_early(x, it):
    for v in it:
        x = x + v
        if v == 2:
            break
    return x


def drained(x, it):
    return x + sum(it)


def loop_with_a_break_inside(x, it):
    for v in it:
        x = x + v
        if v == 2:
            print("two")  # a graph break inside the loop
    return x


def returned_as_itself(x, it):
    next(it)
    return x, it


def pairs(x, z):
    for a, b in z:
        x = x + a
    return x


def one_pair(x, z):
    a, b = next(z)
    return x * a + b


ITERATORS = {
    "range": lambda: iter(range(1, 5)),
    "list": lambda: iter([1, 2, 3, 4]),
    "tuple": lambda: iter((1, 2, 3, 4)),
    "list_advanced": lambda: _advanced(iter([0, 1, 2, 3, 4])),
}


def _advanced(it):
    next(it)
    return it


def _same(fn, make, capsys):
    opt = minidynamo.optimize(fn, backend=CountingBackend())
    for _ in range(2):  # the second call runs the cached entry
        a, b = make(), make()
        expected = fn(torch.zeros(1), a)
        eager_out = capsys.readouterr().out
        got = opt(torch.zeros(1), b)
        assert capsys.readouterr().out == eager_out
        if fn is returned_as_itself:
            assert got[1] is b
            expected, got = expected[0], got[0]
        assert torch.equal(expected, got)
        assert list(b) == list(a)  # left at the same place


@pytest.mark.parametrize("kind", sorted(ITERATORS))
@pytest.mark.parametrize("fn", [take_one, loop_stopped_early, drained, loop_with_a_break_inside, returned_as_itself],
                         ids=lambda f: f.__name__)
def test_iterator_left_where_eager_leaves_it(fn, kind, capsys):
    _same(fn, ITERATORS[kind], capsys)


@pytest.mark.parametrize("make", [lambda: zip([1, 2, 3], (4, 5, 6)), lambda: enumerate([7, 8], 2),
                                  lambda: zip([1, 2, 3], iter([4, 5]))], ids=["zip", "enumerate", "zip_uneven"])
@pytest.mark.parametrize("fn", [one_pair, pairs], ids=lambda f: f.__name__)
def test_zip_and_enumerate_left_where_eager_leaves_them(fn, make, capsys):
    _same(fn, make, capsys)


def iterator_of_a_range_constant(x):
    it = range(3).__iter__()
    a = next(it)
    rest = range(2, 9, 3).__iter__()
    return x + next(it) + a, list(it), rest


def test_iterator_made_by_a_method_of_a_range_constant():
    backend = CountingBackend()
    opt = minidynamo.optimize(iterator_of_a_range_constant, backend=backend, fullgraph=True)
    for _ in range(2):
        expected, got = iterator_of_a_range_constant(torch.zeros(1)), opt(torch.zeros(1))
        assert torch.equal(expected[0], got[0]) and expected[1] == got[1]
        assert type(got[2]) is type(expected[2]) and list(got[2]) == list(expected[2])
    assert backend.calls == 1
