"""`obj[key]` on an object passed in calls its class's `__getitem__`; what that raises
reaches the caller unchanged, so a `try` of the traced code around the subscript catches
it in the trace (transformers' attention registry: `Mapping.get` catching the KeyError of
its own `__getitem__`). Each case against eager: result, exception, side effects, graphs."""
from __future__ import annotations

from collections.abc import Mapping

import pytest
import torch

import minidynamo
from helpers import CountingBackend


class Registry(Mapping):
    """A class-wide mapping with local overrides, as transformers' GeneralInterface."""
    _global = {"sdpa": 2.0}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global) + len(self._local)


REGISTRY = Registry()


class Noisy:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, key):
        self.log.append(key)  # an effect before the raise: once, as in eager
        if key < 0:
            raise IndexError(f"negative index {key}")
        return key * 10


def via_get(x, name):
    return x * REGISTRY.get(name, 3.0)


def caught_at_subscript(x, obj, key):
    try:
        v = obj[key]
    except IndexError as e:
        v = len(str(e))
    return x + v


def uncaught(x, obj, key):
    return x + obj[key]


def _both(fn, *args):
    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend)
    return fn(*args), opt(*args), backend


@pytest.mark.parametrize("name", ["sdpa", "eager"])
def test_mapping_get_catches_its_own_key_error(name):
    x = torch.randn(3)
    want, got, backend = _both(via_get, x, name)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert backend.calls == 1
    report = minidynamo.explain(via_get)(x, name)
    assert report.graph_count == 1 and not report.break_reasons, report


@pytest.mark.parametrize("key", [4, -2])
def test_raise_in_getitem_caught_around_the_subscript(key):
    x = torch.randn(3)
    eager_log, opt_log = [], []
    want = caught_at_subscript(x, Noisy(eager_log), key)
    backend = CountingBackend()
    got = minidynamo.optimize(caught_at_subscript, backend=backend)(x, Noisy(opt_log), key)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert opt_log == eager_log == [key]
    assert backend.calls == 1


def test_uncaught_raise_in_getitem_is_eager_error():
    x = torch.randn(3)
    eager_log, opt_log = [], []
    with pytest.raises(IndexError, match="negative index -1"):
        uncaught(x, Noisy(eager_log), -1)
    with pytest.raises(IndexError, match="negative index -1"):
        minidynamo.optimize(uncaught, backend=CountingBackend())(x, Noisy(opt_log), -1)
    assert opt_log == eager_log == [-1]
