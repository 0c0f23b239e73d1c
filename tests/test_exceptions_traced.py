"""PYTEST_DONT_REWRITE: the traced asserts must raise plain AssertionErrors.

Exceptions raised inside traced code and caught there (3.11+): raise in the frame or in an
inlined callee, except clauses in order, `as e` (cleared after the handler), else, finally
on both paths, nested try, bare re-raise, `raise ... from ...`, StopIteration from next().
Differential against eager (results, exceptions and their messages, side effects once),
and one graph where torch.compile keeps one, on 3.10 too (its block stack is modeled)."""
import contextlib

import pytest
import torch

import minidynamo
from helpers import PY, CountingBackend, assert_uses, check, same_outcome

# Where the exception is caught in the trace: one graph (3.11+'s exception table, 3.10's
# block stack).
CAUGHT = "graph"


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


class ShapeError(ValueError):
    pass


class OtherError(Exception):
    pass


class WithInit(Exception):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def raise_shape(x, n):
    if x.shape[0] > n:
        raise ShapeError(f"too many rows: {x.shape[0]} > {n}", n)
    return x + 1


def deeper(x, n):
    return raise_shape(x, n) * 2


# --- caught in the same frame ----------------------------------------------------------
def test_raise_caught_in_same_frame():
    def f(x, log):
        y = x * 2
        try:
            if x.shape[0] > 2:
                raise ValueError("big", x.shape[0])
            log.append("not raised")
        except ValueError as e:
            log.append(str(e))
            log.append(repr(e))
            log.append(e.args[1])
            y = y - 1
        return y + 1

    assert_uses(f, "RAISE_VARARGS")
    info = check(f, (t(), []), (t(), []), kind=CAUGHT)
    if CAUGHT == "graph":
        assert info.graphs == 1


def test_raise_class_without_call():
    def f(x):
        try:
            raise KeyError
        except KeyError as e:
            return x + len(e.args)

    check(f, t(), kind=CAUGHT)


def test_except_clause_order_and_tuple():
    def f(x, which, log):
        try:
            if which == 0:
                raise ShapeError("shape")
            if which == 1:
                raise KeyError("key")
            raise OtherError("other")
        except KeyError as e:
            log.append(("key", str(e)))
        except (OtherError, ValueError) as e:
            log.append(("tuple", type(e).__name__, isinstance(e, ValueError), str(e)))
        except Exception:
            log.append("never")
        return x + 1

    for which in range(3):
        check(f, (t(), which, []), kind=CAUGHT)


def test_else_and_finally_normal_and_exceptional():
    def f(x, fail, log):
        try:
            y = x + 1
            if fail:
                raise RuntimeError("fail")
            log.append("body")
        except RuntimeError:
            log.append("handler")
            y = y * 3
        else:
            log.append("else")
            y = y * 5
        finally:
            log.append("finally")
        return y

    check(f, (t(), True, []), kind=CAUGHT)
    check(f, (t(), False, []), kind="graph")


def test_finally_runs_once_when_exception_propagates_to_outer_try():
    def f(x, log):
        try:
            try:
                log.append("inner")
                raise OtherError("x")
            finally:
                log.append("finally")
                x = x + 1
        except OtherError:
            log.append("outer")
        return x

    check(f, (t(), []), kind=CAUGHT)


def test_nested_try_no_match_goes_outward():
    def f(x, log):
        try:
            try:
                raise ShapeError("s")
            except KeyError:
                log.append("wrong")
            log.append("after inner")
        except ValueError as e:
            log.append(type(e).__name__)
            x = x * 2
        return x

    check(f, (t(), []), kind=CAUGHT)


def test_as_name_is_cleared_after_handler():
    def f(x):
        e = 5  # noqa: F841 - rebound by the handler, then cleared
        try:
            raise ValueError("v")
        except ValueError as e:  # noqa: F841,F811
            pass
        return x + ("e" in locals() and 0)

    def g(x):
        try:
            raise ValueError("v")
        except ValueError as e:  # noqa: F841
            pass
        return x + e  # noqa: F821 - UnboundLocalError, as eager

    assert_uses(g, "DELETE_FAST")
    check(g, t(), kind="eager")


def test_return_inside_try_with_finally():
    def f(x, log):
        try:
            return x + 1
        finally:
            log.append("finally")

    def g(x, log):
        try:
            raise ValueError("v")
        finally:
            log.append("finally")
            return x * 2  # noqa: B012 - swallows the exception, as eager

    check(f, (t(), []), kind="graph")
    check(g, (t(), []), kind=CAUGHT)


def test_exception_in_loop_with_continue_and_break():
    def f(x, log):
        for i in range(5):
            try:
                if i % 2:
                    raise IndexError(i)
                x = x + i
            except IndexError as e:
                log.append(e.args[0])
                if i == 3:
                    break
                continue
            finally:
                log.append(("fin", i))
        return x

    check(f, (t(), []), kind=CAUGHT)


def test_handled_exception_restores_the_outer_one():
    def f(x, log):
        try:
            try:
                raise KeyError("outer")
            except KeyError:
                try:
                    raise ValueError("inner")
                except ValueError as e:
                    log.append(str(e))
                raise  # the KeyError again: the inner handler restored it
        except KeyError as e:
            log.append(("outer", str(e)))
        return x + 1

    def g(x, log):
        try:
            try:
                raise KeyError("k")
            except KeyError as e:
                log.append(str(e))
                raise ValueError("in handler")  # leaves the handler through its `as` cleanup
        except ValueError as e:
            log.append((str(e), type(e.__context__).__name__))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)
    check(g, (t(), []), kind=CAUGHT)


# --- raised in a callee ------------------------------------------------------------------
def test_raise_in_callee_caught_in_caller():
    def f(x, log):
        try:
            y = deeper(x, 2)
        except ShapeError as e:
            log.append((str(e), e.args[1], isinstance(e, ValueError)))
            y = x - 1
        return y

    info = check(f, (t(5, 2), []), kind=CAUGHT)
    if CAUGHT == "graph":
        assert info.graphs == 1
    check(f, (t(1, 2), []), kind="graph")


def test_callee_catches_its_own_and_caller_sees_result():
    def inner(x, log):
        try:
            return raise_shape(x, 0)
        except ShapeError:
            log.append("inner caught")
            return x * 10

    def f(x, log):
        try:
            return inner(x, log) + 1
        except ShapeError:
            log.append("outer caught")
            return x

    check(f, (t(), []), kind=CAUGHT)


def test_reraise_in_handler_caught_outside():
    def helper(x, log):
        try:
            raise_shape(x, 0)
        except ValueError:
            log.append("helper")
            raise

    def f(x, log):
        try:
            helper(x, log)
        except ShapeError as e:
            log.append(("caller", str(e)))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


def test_raise_from_and_context():
    def f(x, log):
        try:
            try:
                raise KeyError("k")
            except KeyError as inner:
                raise ValueError("wrapped") from inner
        except ValueError as e:
            log.append((type(e.__cause__).__name__, e.__suppress_context__, str(e.__cause__)))
        try:
            try:
                raise KeyError("k")
            except KeyError:
                raise OtherError("during")
        except OtherError as e:
            log.append((type(e.__context__).__name__, e.__cause__ is None, e.__suppress_context__))
        try:
            raise ValueError("no cause") from None
        except ValueError as e:
            log.append((e.__cause__ is None, e.__suppress_context__))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


def test_exception_with_tensor_arg():
    def f(x):
        try:
            raise ValueError(x * 2)
        except ValueError as e:
            return e.args[0] + 1

    check(f, t(), kind=CAUGHT)


def test_stop_iteration_from_next():
    def f(x, items, log):
        it = iter(items)
        total = x
        while True:
            try:
                total = total + next(it)
            except StopIteration as e:
                log.append(("done", e.value))
                break
        return total

    check(f, (t(), [1, 2, 3], []), kind=CAUGHT)


# --- not caught in the trace: the eager run raises it, effects once --------------------------
def test_uncaught_raise_escapes_like_eager():
    def f(x, log):
        log.append("before")
        try:
            raise_shape(x, 0)
        except KeyError:
            log.append("wrong")
        finally:
            log.append("finally")
        return x

    check(f, (t(), []), kind="eager")


def test_uncaught_raise_in_root_keeps_break_before():
    def f(x, log):
        y = x + 1  # noqa: F841 - tensor work before the raise
        log.append("before")
        raise ValueError("out")

    check(f, (t(), []), kind="break", reason="exceptions", fullgraph_check=False)


def test_exception_through_grad_mode_with_blocks():
    def f(x, log, d):
        try:
            with torch.no_grad():
                y = x + 1
                with torch.enable_grad():
                    z = x * 2
                    d["missing"]
        except KeyError as e:
            log.append(("caught", str(e), torch.is_grad_enabled()))
            w = x * 3
        return y, z, w, torch.is_grad_enabled()

    # The managers' exits restore grad mode and let the exception through: one graph.
    x = torch.randn(3, requires_grad=True)
    info = check(f, (x, [], {}), kind=CAUGHT)
    assert info.graphs == 1


def test_exception_through_nullcontext_and_autocast():
    def f(x):
        try:
            with contextlib.nullcontext():
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    y = x @ x
                    raise ValueError("in autocast")
        except ValueError:
            return y.dtype, torch.is_autocast_enabled("cpu"), x @ x

    check(f, t(3, 3), kind=CAUGHT)


def test_with_block_exit_of_a_contextmanager_sees_exception():
    @contextlib.contextmanager
    def cm():
        yield

    def f(x, log):
        try:
            with cm():
                y = x + 1
                raise ValueError("in with")
        except ValueError:
            log.append("caught")
            y = x
        return y, torch.is_grad_enabled()

    # The generator's exit gets the exception at its yield and lets it out: the try
    # around the block catches it, in the trace.
    check(f, (t(), []), kind="graph")


def test_exception_leaving_the_function_through_no_grad():
    def f(x, log):
        with torch.no_grad():
            y = x * 2
            log.append(torch.is_grad_enabled())
            if y.shape[0] == 4:
                raise ValueError("out of no_grad")
        return y

    opt = minidynamo.optimize(f, backend=CountingBackend())
    for _ in range(2):
        log_e, log_o = [], []
        with pytest.raises(ValueError, match="out of no_grad"):
            f(t(), log_e)
        with pytest.raises(ValueError, match="out of no_grad"):
            opt(t(), log_o)
        assert log_e == log_o and torch.is_grad_enabled()


def test_raised_through_builtin_model_declines():
    def bad(v):
        if v == 2:
            raise ValueError("two")
        return v

    def f(x, log):
        out = []
        try:
            out.extend(map(bad, [1, 2, 3]))
        except ValueError:
            log.append(list(out))
        return x + len(out)

    check(f, (t(), []), kind="eager")


def test_returning_the_exception_object_declines():
    def f(x):
        try:
            raise ValueError("v")
        except ValueError as e:
            return x + 1, e

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    r, e = opt(x)
    assert type(e) is ValueError and str(e) == "v"
    torch.testing.assert_close(r, x + 1)


def test_user_exception_whose_init_calls_super_init():
    """`super().__init__(msg)` from a Python __init__ sets BaseException's args: the text,
    args and the attributes the __init__ set read in the handler, one graph."""
    def f(x, log):
        try:
            raise WithInit("m", 3)
        except WithInit as e:
            log.append((str(e), repr(e), e.args, e.code))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


class TwoArgs(KeyError):
    def __init__(self, a, b):
        super().__init__(a, b)


def test_super_init_of_an_exception_as_eager():
    """super().__init__(a, b) of a KeyError subclass: BaseException's args, as eager."""
    def f(x, log):
        try:
            raise TwoArgs("k", 2)
        except KeyError as e:
            log.append((type(e).__name__, e.args, str(e), repr(e)))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


def test_bare_raise_outside_handler_declines():
    def f(x):
        raise

    check(f, t(), kind="eager")


def test_raise_in_generator_caught_around_its_loop():
    def gen(n):
        yield 1
        raise ValueError("gen")

    def f(x, log):
        try:
            for v in gen(2):
                x = x + v
        except ValueError as e:
            log.append(str(e))
        return x

    check(f, (t(), []), kind="graph")


def test_generator_finished_by_its_exception_and_pep479():
    def gen(x):
        yield x
        raise KeyError("k")

    def stops(x):
        yield x
        raise StopIteration  # PEP 479: a RuntimeError at the loop

    def f(x, log):
        it = gen(x)
        try:
            for v in it:
                x = x + v
        except KeyError as e:
            log.append(repr(e))
        log.append(next(it, "finished"))  # a generator an exception left is done
        try:
            for v in stops(x):
                x = x * 2
        except RuntimeError as e:
            log.append((str(e), type(e.__cause__).__name__))
        return x

    check(f, (t(), []), kind="graph")


def test_raise_in_generator_leaving_the_frame():
    def gen(n):
        yield n
        raise ValueError("out")

    def f(x, log):
        for v in gen(2):
            log.append(v)
            x = x * v
        return x

    check(f, (t(), []), kind="eager")


def test_failing_assert_and_torch_check_stay_eager():
    def f(x):
        assert x.shape[0] == 99, "rows"
        return x

    def g(x):
        torch._check(x.shape[0] == 99, lambda: "rows")
        return x

    check(f, t(), kind="eager")
    with pytest.raises(RuntimeError):
        minidynamo.optimize(backend=CountingBackend())(g)(t())


def test_fstring_of_exception():
    def f(x, log):
        try:
            raise_shape(x, 0)
        except ShapeError as e:
            log.append(f"caught: {e} / {e!r} / {e.args[0]:>40}")
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


def test_no_graph_break_inside_a_handler_entered_in_the_trace():
    def f(x, log):
        y = x + 1
        try:
            raise ValueError("v")
        except ValueError:
            print("handled")  # a decline inside the handler: the whole call runs eagerly
            y = y * 2
        return y

    def g(x, log):
        try:
            raise ValueError("v")
        except ValueError:
            print("handling")
            raise  # the eager run re-raises the ValueError, not a RuntimeError

    check(f, (t(), []), kind="eager")
    check(g, (t(), []), kind="eager")


def test_graph_break_after_the_handler_keeps_the_graph_before():
    def f(x, log):
        y = x + 1
        try:
            raise ValueError("v")
        except ValueError:
            y = y * 2
        print("after")
        return y - 1

    check(f, (t(), []), kind="break" if PY >= (3, 11) else "eager", fullgraph_check=PY >= (3, 11))


def test_bare_raise_in_callee_called_from_handler():
    def rethrow():
        raise

    def f(x, log):
        try:
            try:
                raise KeyError("k")
            except KeyError:
                rethrow()
        except KeyError as e:
            log.append(str(e))
        return x + 1

    check(f, (t(), []), kind=CAUGHT)


def test_side_effects_in_every_path_once():
    def callee(lst, n):
        lst.append(("callee", n))
        if n % 2:
            raise OtherError(n)
        return n

    def f(x, lst):
        total = 0
        for n in range(4):
            try:
                lst.append(("try", n))
                total += callee(lst, n)
                lst.append(("no raise", n))
            except OtherError as e:
                lst.append(("except", e.args))
            else:
                lst.append(("else", n))
            finally:
                lst.append(("finally", n))
        return x * total

    info = check(f, (t(), []), kind=CAUGHT)
    if CAUGHT == "graph":
        assert info.graphs == 1


def test_exception_escapes_a_callee_after_partial_work():
    def callee(x, lst):
        lst.append("callee")
        raise ValueError("out of the function")

    def f(x, lst):
        y = x + 1
        try:
            callee(x, lst)
        finally:
            lst.append("finally")
        return y

    check(f, (t(), []), kind="eager")


class WithArgs(Exception):
    def __init__(self, a, b=None):
        self.a = a
        self.b = b


def test_exception_class_with_a_python_init():
    # BaseException.__new__ keeps the positional args; the class's __init__ is inlined on
    # the object (its attribute writes read back in the handler): one graph.
    def f(x, log):
        z = 0
        try:
            raise WithArgs(2, b=x.shape[0])
        except ValueError:
            z = 1
        except WithArgs as e:
            log.append((e.a, e.b, e.args, type(e).__name__))
            z = 2
        return x + z

    info = check(f, (t(), []), kind=CAUGHT)
    assert info.graphs == 1


def test_exception_with_a_python_init_leaving_the_function():
    def f(x):
        y = x + 1
        if y.shape[0] == 4:
            raise WithArgs(1)
        return y

    opt = minidynamo.optimize(f, backend=CountingBackend())
    for _ in range(2):
        with pytest.raises(WithArgs) as info:
            opt(t())
        assert (info.value.a, info.value.b, info.value.args) == (1, None, (1,))


def test_raise_in_generator_through_next_with_a_default():
    def gen(x):
        yield x
        raise ValueError("late")

    def f(x, log):
        it = gen(x)
        first = next(it, None)
        try:
            next(it, None)
        except ValueError as e:
            log.append(str(e))
        return first * 2, next(it, "done")

    check(f, (t(), []), kind="graph")


class CodedError(ValueError):
    default_code = 7

    def __init__(self, msg, code=None):
        super().__init__(msg)
        self.code = code if code is not None else self.default_code

    def describe(self, prefix="E"):
        return f"{prefix}{self.code}:{self.args[0]}"

    @property
    def doubled(self):
        return self.code * 2

    @staticmethod
    def kind():
        return "coded"

    @classmethod
    def family(cls):
        return cls.__name__


def test_exception_classes_with_methods_of_their_own():
    def f(x, log):
        try:
            raise CodedError("bad", 3)
        except CodedError as e:
            log.append((e.describe(), e.describe(prefix="W"), e.doubled, e.kind(), e.family(), e.default_code))
            return x * e.code
    check(f, (t(), []), kind="graph")

    def g(x, log):
        try:
            raise CodedError("no code")
        except ValueError as e:
            log.append(e.describe())
            return x + e.doubled
    check(g, (t(), []), kind="graph")


def test_a_patched_exception_method_recompiles():
    def f(x):
        try:
            raise CodedError("m", 1)
        except CodedError as e:
            return x + len(e.describe())

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    same_outcome(f, opt, t())
    original = CodedError.describe
    CodedError.describe = lambda self, prefix="E": "a much longer description"
    try:
        same_outcome(f, opt, t())
    finally:
        CodedError.describe = original
    assert backend.calls == 2


def test_an_exception_class_with_its_own_str_stays_eager():
    class Shown(Exception):
        def __str__(self):
            return "shown"

    def f(x):
        try:
            raise Shown()
        except Shown as e:
            return x + len(str(e))
    check(f, t(), kind="eager")
