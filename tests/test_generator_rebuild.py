"""A generator started in the trace and returned: made again after the graph, suspended at
the same yield with the same locals (variables/generator_rebuild.py). Eager vs optimized:
the items left, send/throw/close on it, its type and names, graph counts."""
import inspect

import pytest
import torch

import minidynamo
from helpers import CountingBackend


def _opt(fn, fullgraph=True):
    cnt = CountingBackend()
    return minidynamo.optimize(fn, backend=cnt, fullgraph=fullgraph), cnt


def whoo(t):
    yield t + 1
    yield t + 2
    yield t + 3


def test_returned_after_next_gives_the_rest():
    def fn(t):
        gen = whoo(t)
        next(gen)
        return gen
    opt, cnt = _opt(fn)
    t = torch.tensor([1.0])
    for _ in range(2):
        g, eg = opt(t), fn(t)
        assert type(g) is type(eg) and g.__name__ == eg.__name__ and g.__qualname__ == eg.__qualname__
        assert inspect.getgeneratorstate(g) == inspect.GEN_SUSPENDED
        for a, b in zip(list(g), list(eg), strict=True):
            torch.testing.assert_close(a, b)
    assert cnt.calls == 1 and len(opt.cache_entries()) == 1


def test_returned_at_its_last_yield_stops_next():
    def one(t):
        yield t + 1

    def fn(t):
        gen = one(t)
        next(gen)
        return gen
    opt, _ = _opt(fn)
    g = opt(torch.ones(1))
    with pytest.raises(StopIteration):
        next(g)


def test_send_reaches_the_paused_yield_with_its_locals():
    def acc(t):
        total = t * 2
        while True:
            got = yield total
            total = total + got

    def fn(t):
        gen = acc(t)
        first = next(gen)
        return first, gen
    opt, _ = _opt(fn)
    t = torch.ones(2)
    first, g = opt(t)
    efirst, eg = fn(t)
    torch.testing.assert_close(first, efirst)
    torch.testing.assert_close(g.send(torch.full((2,), 3.0)), eg.send(torch.full((2,), 3.0)))
    torch.testing.assert_close(g.send(torch.ones(2)), eg.send(torch.ones(2)))


def test_returned_inside_yield_from():
    def subgen(t):
        yield t + 1
        yield t + 2

    def main_gen(t):
        yield from subgen(t)
        yield t + 3

    def fn(t):
        gen = main_gen(t)
        next(gen)
        return gen
    opt, cnt = _opt(fn)
    t = torch.randn(2)
    for a, b in zip(list(opt(t)), list(fn(t)), strict=True):
        torch.testing.assert_close(a, b)
    assert cnt.calls == 1


def test_yield_from_without_fullgraph_same_result():
    def subgen(t):
        yield t + 1
        yield t + 2

    def main_gen(t):
        yield from subgen(t)
        yield t + 3

    def fn(t):
        gen = main_gen(t)
        next(gen)
        return gen
    opt, _ = _opt(fn, fullgraph=False)
    t = torch.randn(2)
    for a, b in zip(list(opt(t)), list(fn(t)), strict=True):
        torch.testing.assert_close(a, b)


def test_generator_defined_inside_over_a_local():
    def fn(t):
        scale = t.sum()

        def inner(n):
            for i in range(n):
                yield t * i + scale
        gen = inner(3)
        next(gen)
        return gen
    opt, _ = _opt(fn)
    t = torch.randn(2)
    for a, b in zip(list(opt(t)), list(fn(t)), strict=True):
        torch.testing.assert_close(a, b)


def test_body_with_a_cell_of_its_own():
    def counting(t):
        n = 0

        def bump():
            nonlocal n
            n += 1
            return n
        while True:
            yield t * bump()

    def fn(t):
        gen = counting(t)
        next(gen)
        return gen
    opt, _ = _opt(fn)
    t = torch.ones(2)
    g, eg = opt(t), fn(t)
    for _ in range(3):
        torch.testing.assert_close(next(g), next(eg))


def test_close_and_throw_on_the_returned_generator():
    def fn(t):
        gen = whoo(t)
        next(gen)
        return gen
    opt, _ = _opt(fn)
    g = opt(torch.ones(1))
    with pytest.raises(KeyError):
        g.throw(KeyError("k"))
    with pytest.raises(StopIteration):
        next(g)
    g = opt(torch.ones(1))
    assert g.close() is None
    assert inspect.getgeneratorstate(g) == inspect.GEN_CLOSED


def test_suspended_inside_try_runs_eagerly():
    log = []

    def guarded(t):
        try:
            yield t + 1
            yield t + 2
        finally:
            log.append("closed")

    def fn(t):
        gen = guarded(t)
        next(gen)
        return gen
    opt, _ = _opt(fn, fullgraph=False)
    g = opt(torch.ones(1))
    assert log == []
    torch.testing.assert_close(next(g), torch.full((1,), 3.0))
    g.close()
    assert log == ["closed"]


def test_live_at_a_graph_break_still_runs_the_frame_eagerly():
    def fn(t):
        gen = whoo(t)
        a = next(gen)
        minidynamo.graph_break()
        return a + next(gen)
    opt, cnt = _opt(fn, fullgraph=False)
    t = torch.ones(1)
    torch.testing.assert_close(opt(t), fn(t))
    assert cnt.calls == 0


def _call_around_yield(t):  # a call's callable (and NULL slot) on the stack at the yield
    out = torch.add(t, (yield t * 2))
    yield out


def _loop_over_a_list(t):  # the loop's iterator on the stack
    d = {"a": t}
    for k in ["a", "b"]:
        x = yield d.get(k, t) + 1
        d[k] = x
    yield d


def _list_built_across_yields(t):  # a list display half built on the stack
    yield [t, (yield t), (yield t + 1)]


@pytest.mark.parametrize("body", [_call_around_yield, _loop_over_a_list, _list_built_across_yields],
                         ids=lambda f: f.__name__)
def test_stack_at_the_yield_is_made_again(body):
    def fn(t):
        g = body(t)
        next(g)
        return g
    opt, cnt = _opt(fn)
    t = torch.ones(2)
    g, eg = opt(t), fn(t)
    for v in (t * 5, t * 7):
        got = expected = "stop"
        try:
            got = g.send(v)
        except StopIteration:
            pass
        try:
            expected = eg.send(v)
        except StopIteration:
            pass
        assert str(got) == str(expected)
    assert opt.cache_entries()[0].kind in ("graph", "constant")  # traced whole (no tensor op: constant)


def test_send_and_throw_through_yield_from_after_the_trace():
    def inner(t):
        total = t
        while True:
            total = total + (yield total)

    def outer(t):
        yield from inner(t)

    def fn(t):
        g = outer(t)
        next(g)
        g.send(t)
        return g
    opt, _ = _opt(fn)
    t = torch.ones(1)
    g, eg = opt(t), fn(t)
    torch.testing.assert_close(g.send(t * 3), eg.send(t * 3))
    with pytest.raises(KeyError):
        g.throw(KeyError)
    with pytest.raises(StopIteration):
        next(g)
