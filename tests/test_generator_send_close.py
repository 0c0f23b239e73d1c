"""`send` and `close` on generators made in the traced function, compared with eager
(results, raised exceptions, printed output, the arguments' state: side effects once)."""
import contextlib

import pytest
import torch
from helpers import check


def send_values(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total = total + v

    g = acc()
    next(g)
    a = g.send(x)
    b = g.send(x * 2)
    return a, b


def send_none_starts(x):
    def gen():
        v = yield 1
        yield v

    g = gen()
    first = g.send(None)
    return first, g.send(x + 1)


def send_until_stop(x):
    def gen():
        a = yield 1
        return a * 2

    g = gen()
    next(g)
    try:
        g.send(3)
    except StopIteration as e:
        return x * e.value
    return x


def send_non_none_to_new(x):
    def gen():
        yield 1

    g = gen()
    g.send(x)
    return x


def send_then_next_in_step(x):
    def gen():
        v = yield x
        yield v * 2
        yield v * 3

    g = gen()
    first = next(g)
    second = g.send(x + 1)
    rest = list(g)
    return first, second, rest


def close_runs_finally_once(x, log):
    def gen():
        try:
            yield x + 1
            yield x + 2
        finally:
            log.append("finally")

    g = gen()
    a = next(g)
    g.close()
    g.close()
    return a, log


def close_outside_try(x, log):
    def gen():
        log.append("start")
        yield x
        log.append("never")

    g = gen()
    a = next(g)
    g.close()
    return a * 2, list(g)


def close_unstarted(x, log):
    def gen():
        log.append("never")
        yield x

    g = gen()
    g.close()
    return x + 1, list(g)


def close_caught_then_returns(x, log):
    def gen():
        try:
            yield x
        except GeneratorExit:
            log.append("caught")
            return 5

    g = gen()
    next(g)
    r = g.close()
    return x * 2, r


def close_caught_then_yields(x, log):
    def gen():
        try:
            yield x
        except GeneratorExit:
            log.append("caught")
        yield x * 2

    g = gen()
    next(g)
    try:
        g.close()
    except RuntimeError as e:
        log.append(str(e))
    return x + 1, log


def close_nested_handlers(x, log):
    def gen():
        try:
            try:
                yield x
            except ValueError:
                log.append("wrong handler")
        finally:
            log.append("outer finally")

    g = gen()
    next(g)
    g.close()
    return x - 1, log


def close_inside_with(x):
    def gen():
        with torch.no_grad():
            yield x * 2

    g = gen()
    a = next(g)
    g.close()
    return a, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [send_values, send_none_starts, send_then_next_in_step],
                         ids=lambda f: f.__name__)
def test_send_traced(fn):
    info = check(fn, (torch.randn(3),), kind="graph")
    assert info.graphs == 1


def test_send_until_stop_iteration():
    # StopIteration's value caught by the caller (3.10's block stack is modelled too).
    check(send_until_stop, (torch.randn(3),), kind="graph")


def test_send_non_none_to_a_new_generator_raises_as_eager():
    # The generator never started: the break at the call makes it again, and eager raises.
    check(send_non_none_to_new, (torch.randn(2),), kind="break", reason="exceptions")


@pytest.mark.parametrize("fn", [close_outside_try, close_unstarted], ids=lambda f: f.__name__)
def test_close_without_cleanup(fn):
    check(fn, (torch.randn(3), []), kind="graph")


@pytest.mark.parametrize("fn", [close_runs_finally_once, close_caught_then_returns, close_caught_then_yields,
                                close_nested_handlers], ids=lambda f: f.__name__)
def test_close_runs_the_handlers(fn):
    # 3.10: through the block stack the translator keeps.
    check(fn, (torch.randn(3), []), kind="graph")


def test_close_inside_a_with_block_over_grad_mode():
    x = torch.randn(3, requires_grad=True)
    # GeneratorExit leaves the body through no_grad's exit, which restores grad mode.
    check(close_inside_with, (x,), kind="graph")


def close_inside_a_contextmanager(x):
    @contextlib.contextmanager
    def cm():
        yield

    def gen():
        with cm():
            yield x * 2

    g = gen()
    a = next(g)
    g.close()
    return a


def test_close_inside_a_contextmanager_block_declines():
    # The started generator would be live at the break: the call runs eagerly.
    check(close_inside_a_contextmanager, (torch.randn(3),), kind="eager", reason="generator")
