"""A generator made by `for y in gen(...)` and left early by the loop (`break`, `return`):
the loop's stack slot was its only reference, so CPython frees it there and closing it
runs its `finally` and with exits at once, before the code after the loop. The trace
closes it at the same instruction. Differential against eager, side effects in order."""
import torch

from helpers import check


def t():
    return torch.randn(4)


def counted(x, log, n=5):
    try:
        for i in range(n):
            log.append(("yield", i))
            yield x + i
    finally:
        log.append("finally")
        x.add_(100)  # a tensor written by the cleanup: the order shows in the result


class Exit:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0] is None))
        return False


def in_with(x, log):
    with Exit(log):
        yield x
        yield x * 2


def cleanup_raises(x, log):
    try:
        yield x
    finally:
        raise ValueError("from finally")


def test_break_closes_the_generator_at_once():
    def f(x, log):
        out = x.clone()
        for y in counted(x, log):
            out = out + y
            if len(log) == 2:
                break
        log.append("after loop")
        return out * x

    check(f, (t(), []), kind="graph", graphs=1)


def test_return_inside_the_loop_closes_it_before_returning():
    def f(x, log):
        for y in counted(x, log):
            return y + x
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_nested_loops_and_a_with_exit():
    def f(x, log):
        out = x
        for i in range(2):
            for y in in_with(x, log):
                out = out + y
                break
            log.append(("outer", i))
        return out

    check(f, (t(), []), kind="graph", graphs=1)


def test_generator_exhausted_by_the_loop():
    def f(x, log):
        out = x
        for y in counted(x, log, 2):
            out = out + y
        log.append("after")
        return out

    check(f, (t(), []), kind="graph", graphs=1)


def test_a_generator_held_by_a_name_stays_open():
    def f(x, log):
        g = counted(x, log)
        for y in g:
            break
        log.append("after loop")
        g.close()
        return x + 1

    check(f, (t(), []), kind="graph", graphs=1)


def test_a_generator_held_by_a_name_left_suspended_runs_eagerly():
    def f(x, log):
        g = counted(x, log)
        for y in g:
            break
        log.append("after loop")
        return x + 1

    check(f, (t(), []), kind="eager")


def test_a_cleanup_that_raises_runs_eagerly():
    def f(x, log):
        for y in cleanup_raises(x, log):
            break
        return x + 1

    check(f, (t(), []), kind="eager")
