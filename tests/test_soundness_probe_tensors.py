"""Tensor semantics the fakes do not model on their own: what eager raises or writes that a
fake run of the same op would not."""
import io
import contextlib

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check, check_fallback


def test_inplace_on_expand_caught():
    # add_ on an expand raises in eager (overlapping elements); fakes do not check, so the
    # graph raised outside the try.
    def f(x):
        y = x.expand(3, 4)
        try:
            y.add_(1)
        except RuntimeError:
            return x * 5
        return y

    check_fallback(f, torch.randn(3, 1), reason="torch_op")


def test_zero_on_expand_still_eager_semantics():
    # zero_ and fill_ on an expand are allowed eagerly: the decline keeps that too.
    def f(x):
        y = x.clone()
        y.expand(3, 4).zero_()
        return y, x + 1

    with contextlib.redirect_stderr(io.StringIO()):
        check(f, torch.randn(3, 1), kind="break")


def test_partial_overlap_copy_caught():
    # x[1:].copy_(x[:-1]) raises in eager (the source and the written tensor partly share
    # memory); the fakes ran it, and the graph raised outside the handler, after the
    # list append eager had done.
    def f(x, log):
        log.append(1)
        try:
            x[1:].copy_(x[:-1])
        except RuntimeError:
            return x * 5
        return x

    check_fallback(f, (torch.randn(3, 3), []), reason="torch_op")


def test_partial_overlap_forms():
    def out_form(x):
        try:
            torch.add(x[:-1], 1, out=x[1:])
        except RuntimeError:
            return x * 2
        return x

    def transposed(x):
        try:
            x += x.t()
        except RuntimeError:
            return x * 3
        return x

    def setitem(x):
        try:
            x[[0, 1]] = x[1:]
        except RuntimeError:
            return x * 4
        return x

    for fn in (out_form, transposed, setitem):
        check_fallback(fn, torch.randn(3, 3), reason="torch_op")


def test_overlaps_eager_allows_still_traced():
    # Full overlap, disjoint views, a broadcast source (setitem expands it) and
    # non-dense views are not refused by eager, nor declined.
    def f(x):
        x.add_(x)
        x[1] = x[0]
        x[:] = x[0]
        x[:, 1:].copy_(x[:, :-1])
        x.add_(x[:, :1])
        torch._foreach_add_([x[0], x[1]], [x[1], x[2]])
        return x * 1

    check(f, torch.randn(3, 3), kind="graph")


def test_partial_overlap_symbolic_sizes():
    # With symbolic sizes the offsets are expressions: a write that may overlap in part
    # is declined (not guarded); a broadcast source is not refused by eager.
    def f(x, log):
        log.append(1)
        try:
            x[1:].add_(x[:-1])
        except RuntimeError:
            return x * 5
        return x

    def g(x):
        x[:] = x[0]
        x[1] = x[0]
        return x * 2

    opt_f = minidynamo.optimize(f, dynamic=True)
    opt_g = minidynamo.optimize(g, dynamic=True, backend=CountingBackend())
    for n in (3, 5):
        a, b = torch.randn(n, 3), []
        a2, b2 = a.clone(), []
        torch.testing.assert_close(opt_f(a2, b2), f(a, b))
        assert b2 == b and torch.equal(a2, a)
        c = torch.randn(n, 3)
        torch.testing.assert_close(opt_g(c.clone()), g(c.clone()))
    assert [e.kind for e in opt_g.cache_entries()] == ["graph"]


def test_callable_backend_on_symbolic_graph_serves_every_size():
    # A callable backend built on torch's AOTAutograd compiled a symbolic graph over the
    # real inputs of one size: every later size ran that size's artifact (x[:k] kept the
    # first k). It compiles under the trace's fake mode now, as under torch.compile.
    from torch._dynamo.backends.registry import lookup_backend
    aot = lookup_backend("aot_eager")
    seen = []

    def backend(gm, example_inputs):
        seen.append([type(v).__name__ for v in example_inputs])
        return aot(gm, example_inputs)

    def f(x, k):
        if x.size(0) % 2:
            return x.sum()
        return x[:k] * k + x[: x.size(0) // 2].sum()

    opt = minidynamo.optimize(f, backend=backend, dynamic=True)
    for n, k in ((6, 2), (8, 3), (10, 5), (4, 2), (7, 3), (9, 2)):
        x = torch.arange(float(n))
        torch.testing.assert_close(opt(x, k), f(x, k))
    assert ["Tensor", "SymInt"] in seen  # the int argument as traced: symbolic


def test_write_into_saved_value_runs_uncompiled_on_aot():
    # exp saves its result; writing it in place breaks only the backward. Eager's forward
    # succeeds; AOTAutograd traced the backward at compile time and the call raised.
    def f(x):
        y = x.exp()
        z = y * 1
        y.add_(1)
        return z

    x = torch.randn(3, requires_grad=True)
    opt = minidynamo.optimize(f, backend="aot_eager")
    torch.testing.assert_close(opt(x), f(x))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(x).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        opt(x).sum().backward()
