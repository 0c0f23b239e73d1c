"""@contextlib.contextmanager generators traced as regions, their teardown included: a
`try`/`finally` (or `except`/`else`) around the yield runs its normal way out when the
with block ends (by its end, a return, a break). Compared with eager on every Python: the
generator bytecode differs by version (exception tables from 3.11, 3.12's generator
wrapper, 3.10's SETUP_FINALLY blocks)."""
import contextlib
import sys

import pytest
import torch
from helpers import assert_uses, check


@contextlib.contextmanager
def grad_off_restored():
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    try:
        yield 3
    finally:
        torch.set_grad_enabled(prev)


@contextlib.contextmanager
def with_inside_try():
    try:
        with torch.no_grad():
            yield 2
    finally:
        pass


@contextlib.contextmanager
def logged(log):
    try:
        log.append("enter")
        yield len(log)
    except RuntimeError:
        log.append("error")
        raise
    else:
        log.append("ok")
    finally:
        log.append("exit")


@contextlib.contextmanager
def counted(box):
    box["n"] = 0
    try:
        yield box
    finally:
        box["n"] += 1


@contextlib.contextmanager
def scaled(x, factor):
    state = {"scale": factor}
    try:
        yield state
    finally:
        state["scale"] = 0  # teardown writes what the body saw: after the block, not before


@contextlib.contextmanager
def autocast_bf16():
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    finally:
        torch.set_grad_enabled(torch.is_grad_enabled())


def block_end(x):
    with grad_off_restored() as s:
        y = x * s
    return y, x * 2, y.requires_grad, torch.is_grad_enabled()


def with_statement_in_the_generator(x):
    with with_inside_try() as s:
        y = x * s
    return y, torch.is_grad_enabled()


def except_else_finally(x):
    log = []
    with logged(log) as n:
        y = x + n
        log.append("body")
    return y, log


def return_inside(x):
    with grad_off_restored():
        return x * 2, torch.is_grad_enabled()


def break_inside(x):
    for i in range(3):
        with grad_off_restored():
            x = x * 2
            if i == 1:
                break
    return x, torch.is_grad_enabled()


def continue_inside(x):
    out = []
    for i in range(3):
        with grad_off_restored():
            if i == 1:
                continue
            out.append(x * i)
    return out, torch.is_grad_enabled()


def two_in_one_with(x):
    with grad_off_restored(), with_inside_try() as s:
        y = x * s
    return y, torch.is_grad_enabled()


def nested(x):
    with grad_off_restored():
        with counted({}) as box:
            y = x + box["n"]
        z = x * 2
    return y, z, box, torch.is_grad_enabled()


def teardown_after_the_body(x):
    with scaled(x, 4.0) as state:
        y = x * state["scale"]
    return y, state


def teardown_leaves_autocast(x, w):
    with autocast_bf16():
        y = x @ w
    return y, y.dtype, (x @ w).dtype, torch.is_autocast_enabled("cpu")


def decorated_inner_function(x):
    @grad_off_restored()
    def inner(y):
        return y * 2, torch.is_grad_enabled()

    a, inside = inner(x)
    b, _ = inner(x + 1)  # each call a fresh generator, as contextlib recreates it
    return a, b, inside, a.requires_grad, torch.is_grad_enabled()


CASES = [block_end, with_statement_in_the_generator, except_else_finally, return_inside, break_inside,
         continue_inside, two_in_one_with, nested, teardown_after_the_body, teardown_leaves_autocast,
         decorated_inner_function]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_traced_like_eager(fn):
    args = (torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)) if fn is teardown_leaves_autocast \
        else (torch.randn(3, requires_grad=True),)
    check(fn, args, kind="graph")


def test_the_generators_use_try_finally():
    for gen in (grad_off_restored, with_inside_try, logged, counted):
        # 3.10 sets up the finally block; 3.11+ has an exception table and a re-raise path
        assert_uses(gen.__wrapped__, ("SETUP_FINALLY", "PUSH_EXC_INFO"))


@contextlib.contextmanager
def yields_twice():
    try:
        yield
        yield
    finally:
        pass


@contextlib.contextmanager
def never_yields():
    try:
        if False:
            yield
    finally:
        pass


@contextlib.contextmanager
def prints_in_finally():
    try:
        yield
    finally:
        print("cleanup")


def generator_yields_twice(x):
    with yields_twice():
        return x + 1


def generator_never_yields(x):
    with never_yields():
        return x + 1


def raising_body(x):
    log = []
    try:
        with logged(log):
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    return x + 1, log


def teardown_prints(x):
    with prints_in_finally():
        return x + 1


def test_a_raising_body_is_thrown_into_the_generator():
    # The exception is thrown in at the yield: the generator's except clause logs and
    # re-raises it, its finally runs, the try around the with catches it.
    check(raising_body, torch.ones(2), kind="graph")


@pytest.mark.parametrize("fn", [generator_yields_twice, generator_never_yields, teardown_prints],
                         ids=lambda f: f.__name__)
def test_what_runs_eagerly(fn):
    # A generator that does not yield exactly once (contextlib raises RuntimeError), a
    # teardown that prints: what declines
    # runs natively at a graph break, inside the real manager (a generator resumed at its
    # yield: tests/test_break_in_context.py); 3.10 and a generator that never yields (the
    # with statement itself raises): eager, whole.
    breaks = sys.version_info >= (3, 11) and fn is not generator_never_yields
    check(fn, torch.ones(2), kind="break" if breaks else "eager")
