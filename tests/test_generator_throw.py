"""`throw` on generators made in the traced function (and what it shares with send and
close: exceptions leaving a body, `yield from` forwarding), compared with eager: results,
raised exceptions, printed output, the arguments' state (side effects once), graph counts."""
import contextlib

import pytest

import torch
from helpers import PY, check


# --- caught in the body -------------------------------------------------------------------

def caught_then_next_item(x, log):
    def gen():
        try:
            yield x + 1
        except ValueError as e:
            log.append(str(e))
            yield x * 2
        yield x * 3

    g = gen()
    a = next(g)
    b = g.throw(ValueError("bad"))
    return a, b, list(g)


def class_thrown(x, log):
    def gen():
        while True:
            try:
                yield x.sum()
            except KeyError as e:
                log.append(repr(e))
                x.add_(1)

    g = gen()
    next(g)
    g.throw(KeyError)
    out = g.throw(KeyError)
    g.close()
    return out, x


def caught_then_returns(x):
    def gen():
        try:
            yield x
        except ValueError:
            return x * 5

    g = gen()
    next(g)
    try:
        g.throw(ValueError)
    except StopIteration as e:
        return e.value, next(g, "finished")
    return None


def caught_then_returns_none(x):
    def gen():
        try:
            yield x
        except ValueError:
            return

    g = gen()
    next(g)
    try:
        g.throw(ValueError)
    except StopIteration as e:
        return x + 1, e.args, e.value
    return x


def handler_raises_another(x, log):
    def gen():
        try:
            yield x
        except ValueError:
            log.append("handler")
            raise KeyError("other")

    g = gen()
    next(g)
    try:
        g.throw(ValueError("first"))
    except KeyError as e:
        return x - 1, str(e), type(e.__context__).__name__, str(e.__context__)
    return x


def nested_handlers(x, log):
    def gen():
        try:
            try:
                yield x
            except KeyError:
                log.append("inner, wrong type")
            finally:
                log.append("inner finally")
        except ValueError:
            log.append("outer")
            yield x + 10
        finally:
            log.append("outer finally")

    g = gen()
    next(g)
    item = g.throw(ValueError)
    return item, list(g), log


def thrown_into_a_handler(x):
    def gen():
        try:
            raise KeyError("k")
        except KeyError:
            yield x

    g = gen()
    next(g)
    try:
        g.throw(ValueError("v"))
    except ValueError as e:
        return x + 1, str(e.__context__), e.__context__ is None
    return x


def throw_twice(x):
    def gen():
        n = 0
        while n < 3:
            try:
                yield n
            except ValueError:
                n -= 1
            n += 1

    g = gen()
    out = [next(g), g.throw(ValueError), g.throw(ValueError)]
    return x * len(out), out, list(g)


def body_raises_and_catches_its_own(x):
    def gen():
        for i in range(3):
            try:
                if i == 1:
                    raise ValueError(i)
                yield x + i
            except ValueError as e:
                yield x * e.args[0]

    return list(gen())


def rethrow_a_caught_exception(x):
    def gen():
        while True:
            try:
                yield 1
            except KeyError as e:
                yield len(e.args)

    g = gen()
    next(g)
    try:
        raise KeyError("a", "b")
    except KeyError as e:
        r = g.throw(e)
    next(g)
    g.close()
    return x + r


def generator_expression(x):
    g = (i * x for i in range(3))
    a = next(g)
    try:
        g.throw(ValueError("v"))
    except ValueError as e:
        return a + len(str(e)), list(g)
    return None


def thrown_while_in_its_handler(x):
    def gen():
        try:
            yield 1
        except ValueError:
            try:
                yield 2
            except KeyError as e:
                yield type(e.__context__).__name__, 3

    g = gen()
    next(g)
    g.throw(ValueError)
    r = g.throw(KeyError)
    g.close()
    return x + r[1], r[0]


# --- not caught: to the caller --------------------------------------------------------------

def uncaught_to_caller(x, log):
    def gen():
        try:
            yield x
            yield x + 1
        finally:
            log.append("finally")

    g = gen()
    next(g)
    try:
        g.throw(ValueError("out"))
    except ValueError as e:
        log.append("caller " + str(e))
    return x * 2, list(g), next(g, "finished"), log


def uncaught_from_a_callee(x, log):
    def gen():
        yield x
        log.append("never")

    def poke(g):
        return g.throw(IndexError)

    g = gen()
    next(g)
    try:
        poke(g)
    except IndexError:
        log.append("caught")
    return x + 2, log


def stop_iteration_thrown(x):
    def gen():
        yield x
        yield x

    g = gen()
    next(g)
    try:
        g.throw(StopIteration(3))
    except RuntimeError as e:
        return x + 1, str(e), type(e.__cause__).__name__, e.__suppress_context__
    return None


def not_an_exception(x):
    def gen():
        yield x

    g = gen()
    next(g)
    try:
        g.throw(3)
    except TypeError as e:
        return x + 1, str(e), next(g, "finished")
    return x


# --- not started, finished ----------------------------------------------------------------

def not_started(x, log):
    def gen():
        log.append("never")
        yield x

    g = gen()
    try:
        g.throw(ValueError)
    except ValueError:
        log.append("caught")
    return x + 1, list(g), log


def not_started_stop_iteration(x):
    # 3.10/3.11: the RuntimeError of PEP 479; 3.12+: the StopIteration itself.
    def gen():
        yield x

    g = gen()
    try:
        g.throw(StopIteration)
    except RuntimeError:
        return "runtime error", x + 1
    except StopIteration:
        return "stop iteration", x + 1
    return None


def finished(x):
    def gen():
        yield x

    g = gen()
    list(g)
    try:
        g.throw(KeyError("k"))
    except KeyError as e:
        return x * 3, str(e)
    return x


# --- yield from -----------------------------------------------------------------------------

def yield_from_delegate_catches(x, log):
    def inner():
        try:
            yield x
        except ValueError:
            log.append("inner")
            yield x + 1
        return 7

    def outer():
        r = yield from inner()
        yield r

    g = outer()
    next(g)
    return g.throw(ValueError), next(g), list(g), log


def yield_from_delegate_returns(x):
    def inner():
        try:
            yield x
        except ValueError:
            return x * 4

    def outer():
        r = yield from inner()
        yield r + 1

    g = outer()
    next(g)
    return g.throw(ValueError), list(g)


def yield_from_outer_catches(x, log):
    def inner():
        try:
            yield x
        finally:
            log.append("inner finally")

    def outer():
        try:
            yield from inner()
        except KeyError:
            log.append("outer")
            yield x * 2

    g = outer()
    next(g)
    return g.throw(KeyError), list(g), log


def yield_from_three_deep(x):
    def leaf():
        try:
            yield 1
        except ValueError:
            yield 2

    def middle():
        yield from leaf()
        yield 3

    def top():
        yield from middle()
        yield 4

    g = top()
    next(g)
    return x + g.throw(ValueError), list(g)


def yield_from_a_list(x, log):
    def outer():
        try:
            yield from [x, x + 1]
        except ValueError:
            log.append("outer")
            yield x * 5

    g = outer()
    next(g)
    return g.throw(ValueError), list(g), log


def yield_from_a_list_stop_iteration(x):
    # 3.12+: CLEANUP_THROW ends the yield from with the StopIteration's value; 3.10/3.11:
    # the StopIteration leaves the body as PEP 479's RuntimeError.
    def outer():
        r = yield from [1, 2]
        yield r

    g = outer()
    next(g)
    try:
        return x + 1, g.throw(StopIteration(9))
    except RuntimeError as e:
        return x + 1, str(e)


def yield_from_generator_exit(x, log):
    def inner():
        try:
            yield x
        finally:
            log.append("inner closed")

    def outer():
        try:
            yield from inner()
        finally:
            log.append("outer finally")

    g = outer()
    next(g)
    try:
        g.throw(GeneratorExit)
    except GeneratorExit:
        log.append("caller")
    return x + 1, log


def close_through_yield_from(x, log):
    def inner():
        try:
            yield x
        finally:
            log.append("inner closed")

    def outer():
        yield from inner()
        log.append("never")

    g = outer()
    next(g)
    g.close()
    return x * 2, log, list(g)


def send_through_yield_from(x):
    def inner():
        v = yield 1
        w = yield v is None
        return w

    def outer():
        r = yield from inner()
        yield r

    g = outer()
    next(g)
    return x + g.send(5), g.send(x * 2)


def delegate_raises_into_outer(x, log):
    def inner():
        yield x
        raise KeyError("from inner")

    def outer():
        try:
            yield from inner()
        except KeyError as e:
            log.append(str(e))
            yield x - 1

    return list(outer()), log


# --- declines -------------------------------------------------------------------------------

def inside_a_with_block(x):
    def gen():
        with torch.no_grad():
            yield x * 2

    g = gen()
    next(g)
    try:
        g.throw(ValueError)
    except ValueError:
        pass
    return x + 1


def three_argument_form(x):
    def gen():
        yield x

    g = gen()
    next(g)
    try:
        g.throw(ValueError, ValueError("v"), None)
    except ValueError:
        pass
    return x + 1


def finally_yields_then_reraises_into_next(x):
    # The re-raise reaches next(): raised at that call, caught by the frame's try.
    def gen():
        try:
            yield 1
        finally:
            yield 2

    g = gen()
    next(g)
    a = g.throw(ValueError)
    try:
        next(g)
    except ValueError:
        return x + a
    return x


def leaves_the_function(x):
    def gen():
        yield x

    g = gen()
    next(g)
    g.throw(ValueError("escapes"))
    return x


GRAPH = [caught_then_next_item, class_thrown, handler_raises_another, nested_handlers, uncaught_to_caller,
         uncaught_from_a_callee, not_started, yield_from_delegate_catches, yield_from_outer_catches,
         yield_from_a_list, yield_from_generator_exit, close_through_yield_from, delegate_raises_into_outer]
GRAPH_NO_LOG = [caught_then_returns, caught_then_returns_none, thrown_into_a_handler, throw_twice,
                body_raises_and_catches_its_own, stop_iteration_thrown, not_an_exception,
                not_started_stop_iteration, finished, yield_from_delegate_returns, yield_from_three_deep,
                yield_from_a_list_stop_iteration, send_through_yield_from, rethrow_a_caught_exception,
                generator_expression, thrown_while_in_its_handler]


@pytest.mark.parametrize("fn", GRAPH, ids=lambda f: f.__name__)
def test_throw_traced_with_side_effects(fn):
    info = check(fn, (torch.randn(3), []), kind="graph")
    assert info.graphs == 1


@pytest.mark.parametrize("fn", GRAPH_NO_LOG, ids=lambda f: f.__name__)
def test_throw_traced(fn):
    info = check(fn, (torch.randn(3),), kind="graph")
    assert info.graphs == 1


def test_throw_into_a_with_block_over_grad_mode():
    # torch.no_grad's exit lets the exception through, grad mode restored (one graph)
    check(inside_a_with_block, (torch.randn(3, requires_grad=True),), kind="graph")


def inside_a_contextmanager_block(x):
    @contextlib.contextmanager
    def cm():
        yield

    def gen():
        with cm():
            yield x * 2

    g = gen()
    next(g)
    try:
        g.throw(ValueError)
    except ValueError:
        pass
    return x + 1


def test_throw_into_a_with_block_over_a_contextmanager():
    # The manager's exit throws it into its own generator, which lets it out.
    check(inside_a_contextmanager_block, (torch.randn(3),), kind="graph")


def test_three_argument_throw_declines():
    check(three_argument_form, (torch.randn(2),), kind="eager", reason="generator")


def test_exception_leaving_a_body_into_next_is_caught_by_the_frame():
    check(finally_yields_then_reraises_into_next, (torch.randn(2),), kind="graph")


def test_exception_leaving_the_function_is_raised_by_the_eager_run():
    check(leaves_the_function, (torch.randn(2),), kind="eager")


def test_python_version_matters_for_stop_iteration_into_a_new_generator():
    expected = "runtime error" if PY < (3, 12) else "stop iteration"
    assert not_started_stop_iteration(torch.ones(1))[0] == expected
