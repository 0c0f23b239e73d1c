"""A bug of minidynamo's is never a silent fallback: it raises InternalError naming the
user's function, file:line and the instruction; config.suppress_errors turns it into a
logged eager fallback."""
import warnings

import pytest
import torch
from helpers import CountingBackend, same

import minidynamo
from minidynamo.exc import InternalError
from minidynamo.interpreter import operators, translator


def f(x):
    y = x * 2
    return y + 1  # the line the broken handler is reached on


def _broken(*args, **kwargs):
    raise KeyError("a handler's bug")


@pytest.fixture
def broken_add(monkeypatch):
    """Break the tracer's binary `+` (the multiply keeps working)."""
    real = operators.binary_op

    def binary_op(tx, op, a, b, *rest, **kw):
        if op in ("add", "+"):
            _broken()
        return real(tx, op, a, b, *rest, **kw)
    for module in list(__import__("sys").modules.values()):
        if getattr(module, "__name__", "").startswith("minidynamo") and \
                getattr(module, "binary_op", None) is real:
            monkeypatch.setattr(module, "binary_op", binary_op)


def test_an_internal_error_is_raised_with_where_it_happened(broken_add):
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with pytest.raises(InternalError) as info:
        opt(torch.ones(2))
    msg = str(info.value)
    assert "while tracing f (at " in msg and "test_internal_errors.py:" in msg, msg
    assert "return y + 1" in msg and "instruction" in msg and "KeyError" in msg, msg
    assert isinstance(info.value.__cause__, KeyError)
    assert opt.cache_entries() == []  # nothing cached: the next call tries again
    with pytest.raises(InternalError):
        minidynamo.explain(f)(torch.ones(2))


def test_suppress_errors_runs_eagerly_and_says_why(broken_add):
    minidynamo.config.suppress_errors = True
    try:
        opt = minidynamo.optimize(backend=CountingBackend())(f)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            same(opt(torch.ones(2)), f(torch.ones(2)))
        assert any("minidynamo internal error while tracing f" in str(w.message) for w in caught)
        (entry,) = opt.cache_entries()
        assert entry.kind == "eager" and entry.reason.category == "internal"
        same(opt(torch.ones(2)), f(torch.ones(2)))
    finally:
        minidynamo.config.suppress_errors = False


def test_an_error_in_normalize_is_an_internal_error(monkeypatch):
    def normalize(code):
        raise ValueError("cannot read this bytecode")
    monkeypatch.setattr(translator, "normalize", normalize)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with pytest.raises(InternalError, match="while tracing f .*ValueError: cannot read this bytecode"):
        opt(torch.ones(2))


def test_an_error_around_a_fake_op_is_internal_but_the_ops_own_error_is_a_decline(monkeypatch):
    """What the op raises on fake tensors is the user's error (eager raises it too); an
    error in the bookkeeping around it is minidynamo's."""
    from minidynamo import graph

    def bad_shapes(x):
        return x @ torch.ones(5, 5)  # (2,) @ (5, 5): the op raises, eagerly too
    opt = minidynamo.optimize(backend=CountingBackend())(bad_shapes)
    with pytest.raises(RuntimeError):
        opt(torch.ones(2))
    assert opt.cache_entries()[0].reason.category == "torch_op"

    def memory_facts(*args):
        raise AttributeError("a bookkeeping bug")
    monkeypatch.setattr(graph, "memory_facts", memory_facts)
    monkeypatch.setattr(graph, "op_result", lambda key, mode: None)  # no memo: every op runs
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with pytest.raises(InternalError, match="AttributeError: a bookkeeping bug"):
        opt(torch.ones(2))


def test_suppress_errors_runs_a_failing_backend_eagerly():
    def failing(gm, example_inputs):
        raise RuntimeError("this backend cannot compile")

    def g(x):
        return x.sin() + 1

    opt = minidynamo.optimize(backend=failing)(g)
    with pytest.raises(minidynamo.BackendError, match="cannot compile"):
        opt(torch.ones(2))
    minidynamo.config.suppress_errors = True
    try:
        opt = minidynamo.optimize(backend=failing)(g)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            same(opt(torch.ones(2)), g(torch.ones(2)))
        assert any("cannot compile" in str(w.message) and "runs eagerly" in str(w.message) for w in caught)
        (entry,) = opt.cache_entries()
        assert entry.kind == "eager" and entry.reason.category == "backend"
        same(opt(torch.ones(2)), g(torch.ones(2)))
    finally:
        minidynamo.config.suppress_errors = False
