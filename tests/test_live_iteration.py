"""enumerate, zip and reversed read their source as CPython's iterators do: item by item,
so a dict changed during the loop raises (the call runs eagerly and raises the same), and
a list changed during the loop is seen changed."""
import pytest
import torch
from helpers import check


def _dict_enumerate(x):
    d = {1: x, 2: x}
    for i, k in enumerate(d):
        d[k + 10] = x * i
    return d


def _dict_zip(x):
    d = {1: x, 2: x}
    for k, y in zip(d, [x, x]):
        d[k + 10] = y
    return d


def _dict_reversed(x):
    d = {1: x, 2: x}
    for k in reversed(d):
        d[k + 10] = x
    return d


def _view_reversed(x):
    d = {1: x, 2: x}
    for k, v in reversed(d.items()):
        del d[k]
    return d


@pytest.mark.parametrize("fn", [_dict_enumerate, _dict_zip, _dict_reversed, _view_reversed],
                         ids=lambda f: f.__name__)
def test_a_dict_changed_while_iterated_raises_as_eager(fn):
    check(fn, torch.ones(2), kind="eager", reason="exceptions")


def _list_enumerate_shrinks(x):
    items = [x, x + 1, x + 2]
    out = []
    for i, v in enumerate(items):
        if i == 0:
            items.pop()
        out.append(v * i)
    return out


def _list_zip_grows(x):
    items = [x, x + 1]
    out = []
    for v, k in zip(items, range(4)):
        if k < 2:
            items.append(v * 10)
        out.append(v + k)
    return out


def _list_reversed_shrinks(x):
    items = [x, x + 1, x + 2, x + 3]
    out = []
    for v in reversed(items):
        items.pop(0)
        out.append(v)
    return out, items


def _zip_stops_after_taking_from_the_first(x):
    first = iter([x, x + 1, x + 2])
    pairs = list(zip(first, [1]))
    return pairs, list(first)


def _all_at_once(x):
    return list(zip([x, x], (1, 2, 3))), list(enumerate([x], 5)), list(reversed({1: 2, 3: 4}.items()))


@pytest.mark.parametrize("fn", [_list_enumerate_shrinks, _list_zip_grows, _list_reversed_shrinks,
                                _zip_stops_after_taking_from_the_first],
                         ids=lambda f: f.__name__)
def test_a_list_changed_while_iterated_is_seen_changed(fn):
    check(fn, torch.ones(2), kind="graph")


def test_read_at_once():
    check(_all_at_once, torch.ones(2), kind="constant")


def test_zip_pulls_again_after_it_stopped():
    # CPython's zip is not exhausted for good: a second list() takes one more item of `a`
    def f(x):
        a = iter([x, x + 1, x + 2])
        z = zip(a, iter([]))
        list(z)
        list(z)
        return list(a)

    check(f, torch.randn(2), kind="graph")


def test_exhausted_list_iterator_ignores_later_appends():
    def f(x):
        lst = [x]
        it = iter(lst)
        list(it)
        lst.append(x + 1)
        return list(it), x * 2

    check(f, torch.randn(2), kind="graph")
