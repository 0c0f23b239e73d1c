"""An exception leaving a with block whose exit is Python code: `contextlib.suppress`, a
user class's `__exit__` (a true answer suppresses it), a @contextlib.contextmanager
generator catching it at its yield. The exit runs in the trace with the exception, as
CPython calls it; differential against eager, one graph where torch.compile keeps one."""
import contextlib

import torch

from helpers import check


def t():
    return torch.randn(4)


class Swallow:
    """Suppresses ValueError, lets the others through; logs what it saw."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", None if et is None else et.__name__, str(ev), tb is None))
        return et is not None and issubclass(et, ValueError)


class Converts:
    def __exit__(self, et, ev, tb):
        if et is KeyError:
            raise LookupError("converted") from ev
        return False

    def __enter__(self):
        return None


class ReadsTraceback:
    def __enter__(self):
        return None

    def __exit__(self, et, ev, tb):
        return tb.tb_lineno > 0


def raiser(k):
    if k:
        raise ValueError("deep", k)
    return 3


def test_suppress_a_missing_key():
    def f(x, d):
        with contextlib.suppress(KeyError):
            x = x + d["missing"]
            d["reached"] = True
        return x * 2

    check(f, (t(), {"a": 1}), kind="graph", graphs=1)
    check(f, (t(), {"missing": 2}), kind="graph", graphs=1)


def test_suppress_an_index_error_of_a_callee():
    def get(lst, i):
        return lst[i]

    def f(x, lst):
        with contextlib.suppress(IndexError, KeyError):
            x = x * get(lst, 5)
        with contextlib.suppress(IndexError):
            x = x + get(lst, 0)
        return x

    check(f, (t(), [1, 2]), kind="graph", graphs=1)


def test_suppress_lets_other_exceptions_through():
    def f(x, log):
        try:
            with contextlib.suppress(KeyError):
                x = x + 1
                raise ValueError("through")
        except ValueError as e:
            log.append(str(e))
            x = x - 1
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_user_exit_suppresses_in_frame_and_callee():
    def f(x, k, log):
        with Swallow(log):
            if k == 1:
                raise ValueError("boom")
            x = x + raiser(k - 1)
        log.append("after")
        return x * 2

    for k in (0, 1, 2):
        check(f, (t(), k, []), kind="graph", graphs=1)


def test_user_exit_lets_it_through_to_a_try():
    def f(x, log):
        try:
            with Swallow(log):
                x = x + 1
                {}["k"]
        except KeyError as e:
            log.append(("caught", str(e)))
            x = x * 3
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_exit_raising_another_exception():
    def f(x, log):
        try:
            with Converts():
                x = x + 1
                {}["k"]
        except LookupError as e:
            log.append((type(e).__name__, str(e), type(e.__cause__).__name__))
            x = x * 3
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_nested_managers():
    def f(x, log):
        with Swallow(log):
            with contextlib.suppress(KeyError):
                x = x + 1
                raise ValueError("outer gets it")
            log.append("not reached")
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_reading_the_traceback_runs_eagerly():
    def f(x):
        with ReadsTraceback():
            raise ValueError("x")
        return x + 1

    check(f, (t(),), kind="eager")


@contextlib.contextmanager
def catching(log, kinds=KeyError):
    log.append("setup")
    try:
        yield len(log)
    except kinds as e:
        log.append(("caught", str(e)))
    finally:
        log.append("teardown")
    log.append("after")


@contextlib.contextmanager
def converting():
    try:
        yield
    except KeyError as e:
        raise TypeError(f"bad key {e}") from None


def test_contextmanager_catches_the_exception():
    def f(x, log):
        with catching(log) as n:
            x = x + n
            {}["k"]
        return x * 2

    check(f, (t(), []), kind="graph", graphs=1)


def test_contextmanager_not_catching_it():
    def f(x, log):
        try:
            with catching(log):
                x = x + 1
                raise ValueError("not a key")
        except ValueError as e:
            log.append(str(e))
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_contextmanager_raising_another():
    def f(x, log):
        try:
            with converting():
                x = x + 1
                {}["k"]
        except TypeError as e:
            log.append((str(e), e.__cause__ is None, e.__suppress_context__))
            x = x * 3
        return x

    check(f, (t(), []), kind="graph", graphs=1)
