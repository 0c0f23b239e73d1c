"""1 == 1.0 == True, and so (1,) == (True,), {1} == {1.0}, {1: x} == {True: x}: a guard that
compares a container of constants by equality alone passes a call whose items are of other
types, where what the trace read of them (their repr, their type, true division) differs.
Each case: a value, then one equal to it but of other item types, then the first again —
every call eager's result, the second a recompile naming what changed."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend, same_outcome


def _run(fn, *values):
    opt = minidynamo.optimize(fn, backend=CountingBackend())
    x = torch.ones(2)
    for v in values:
        same_outcome(fn, opt, x, v)
    return opt


def reads_items(x, s):
    return x + len(s), sorted(repr(k) for k in s)


@pytest.mark.parametrize("first,then", [({1, "a"}, {True, "a"}), ({2.0}, {2}),
                                        (frozenset({0}), frozenset({False}))])
def test_sets_passed_in(first, then):
    opt = _run(reads_items, first, then, first)
    assert len(opt.cache_entries()) == 2


def test_dict_keys_passed_in():
    opt = _run(reads_items, {1: "a"}, {1.0: "a"}, {1: "a"})
    assert len(opt.cache_entries()) == 2
    assert "keys changed" in str(opt.guard_failures()[0])


def test_defaults_of_a_function_made_per_call():
    def apply(x, fn):
        return fn(x)

    def make(default):
        return lambda t, k=default: (t * 2, repr(k), type(k).__name__)

    opt = minidynamo.optimize(apply, backend=CountingBackend())
    x = torch.ones(2)
    for default in (1, True, 1.0, 1):
        same_outcome(apply, opt, x, make(default))
    assert len(opt.cache_entries()) == 3


def test_strings_keep_plain_equality():
    """Containers of strings only: no per-item type check (a str equals only a str)."""
    opt = _run(reads_items, {"a", "b"}, {"a", "b"})
    assert len(opt.cache_entries()) == 1
    assert "typed_key" not in opt.cache_entries()[0].source_text


def test_tuple_keys_holding_numbers():
    """The keys' types at every depth: (1, 'a') and (True, 'a') are equal keys of one type."""
    opt = _run(reads_items, {(1, "a"): 0}, {(True, "a"): 0}, {(1, "a"): 0})
    assert len(opt.cache_entries()) == 2
