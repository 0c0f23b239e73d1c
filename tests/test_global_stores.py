"""Globals assigned by traced code (`global n; n += 1`, `STASH = x * 2`, `helpers.STATE =
v`): later reads in the trace see the value, the entry writes it into the module after the
graph, before a break's native instruction; a value read before the store stays the old
one. Differential against eager on fresh module state."""
import types

import pytest
import torch

import minidynamo
from helpers import CountingBackend

COUNT = 0
STASH = None
helpers_module = types.ModuleType("helpers_module")
helpers_module.STATE = 1


@pytest.fixture(autouse=True)
def fresh_globals():
    global COUNT, STASH
    COUNT, STASH = 0, None
    helpers_module.STATE = 1
    yield


def _state():
    return COUNT, STASH, helpers_module.STATE


def _differential(f, *args, calls=2):
    """Eager then optimized from the same module state: results and the state after each
    call equal; the optimized function's backend."""
    global COUNT, STASH
    expected = []
    for _ in range(calls):
        expected.append((f(*args), _state()))
    COUNT, STASH, helpers_module.STATE = 0, None, 1
    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for want in expected:
        got = (opt(*args), _state())
        torch.testing.assert_close(got, want, equal_nan=True)
    return opt, backend


def counts(x):
    global COUNT
    before = COUNT
    COUNT = COUNT + 1
    return x + COUNT, before


def test_a_counter_global():
    opt, backend = _differential(counts, torch.ones(3), calls=3)
    assert backend.calls == 3  # its value is read: each new value is a new entry, as torch.compile


def stash(x):
    global STASH
    STASH = x * 2
    return STASH + 1


def test_a_tensor_stashed_in_a_global_is_one_graph():
    opt, backend = _differential(stash, torch.ones(3), calls=3)
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]
    assert STASH is not None


def through_the_module(x):
    old = helpers_module.STATE
    helpers_module.STATE = old + 10
    return x * helpers_module.STATE, old


def test_a_modules_attribute_set_through_the_module():
    _differential(through_the_module, torch.ones(2), calls=2)


def _bump():
    global COUNT
    COUNT += 5
    return COUNT


def calls_a_helper_then_breaks(x):
    y = x * _bump()
    print("count", COUNT)  # a graph break: the native print sees the new value
    return y + COUNT


def test_a_helpers_store_is_written_before_a_break(capsys):
    opt, _ = _differential(calls_a_helper_then_breaks, torch.ones(2), calls=2)
    out = capsys.readouterr().out
    assert out.count("count 5") == 2 and out.count("count 10") == 2


def deletes(x):
    global STASH
    STASH = x * 3
    y = STASH + 1
    del STASH
    return y


def test_a_global_assigned_then_deleted():
    global STASH
    expected = deletes(torch.ones(2))
    assert "STASH" not in globals()
    STASH = None
    opt = minidynamo.optimize(deletes)
    torch.testing.assert_close(opt(torch.ones(2)), expected)
    assert "STASH" not in globals() and [e.kind for e in opt.cache_entries()] == ["graph"]


def deletes_one_it_did_not_assign(x):
    global STASH
    del STASH
    return x + 1


def test_del_of_a_global_the_trace_did_not_assign_breaks():
    opt = minidynamo.optimize(deletes_one_it_did_not_assign)
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2) + 1)
    assert "STASH" not in globals()  # deleted once, natively
    assert [e.kind for e in opt.cache_entries()] == ["eager"]
