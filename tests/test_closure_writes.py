"""Writing a closure variable of an enclosing scope (`nonlocal z` in the optimized function,
or in a function or generator it inlines): the store is a side effect written to the cell
after the graph (before a break's native instruction); reads after it in the same trace see
the new value; a read before it is guarded by the cell's contents. Also exceptions leaving
a generator's body into `next()` called by the traced code, caught there."""
import contextlib
import io

import pytest
import torch

import minidynamo
from helpers import CountingBackend


def _opt(fn, fullgraph=True):
    cnt = CountingBackend()
    return minidynamo.optimize(fn, backend=cnt, fullgraph=fullgraph), cnt


def test_counter_in_the_optimized_function():
    def make():
        z = 0

        def fn(t):
            nonlocal z
            z += 1
            return t + z
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn)
    t = torch.ones(2)
    torch.testing.assert_close(opt(t), t + 1)
    assert get() == 1
    torch.testing.assert_close(opt(t), t + 2)  # z was read: guarded, a new trace
    assert get() == 2 and cnt.calls == 2


def test_store_without_read_is_not_guarded():
    def make():
        z = None

        def fn(t):
            nonlocal z
            z = t * 2
            return t + 1
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn)
    for i in range(3):
        t = torch.full((2,), float(i))
        torch.testing.assert_close(opt(t), t + 1)
        torch.testing.assert_close(get(), t * 2)
    assert cnt.calls == 1


def test_old_value_read_before_the_write_is_returned():
    def make():
        z = torch.ones(2)

        def fn(t):
            nonlocal z
            old = z
            z = z + t
            return old, z
        return fn, lambda: z
    fn, get = make()
    opt, _ = _opt(fn)
    t = torch.ones(2)
    before = get()
    old, new = opt(t)
    assert old is before and get() is new
    torch.testing.assert_close(new, before + t)


def test_read_after_write_sees_the_new_value():
    def make():
        z = 1

        def fn(t):
            nonlocal z
            z = 5
            return t * z
        return fn, lambda: z
    fn, get = make()
    opt, _ = _opt(fn)
    t = torch.ones(2)
    torch.testing.assert_close(opt(t), t * 5)
    assert get() == 5


def test_write_through_an_inlined_closure_seen_by_another():
    def make():
        z = 0

        def bump(n):
            nonlocal z
            z += n

        def read():
            return z

        def fn(t):
            bump(2)
            bump(3)
            return t + read()
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn)
    t = torch.zeros(2)
    torch.testing.assert_close(opt(t), t + 5)
    assert get() == 5 and cnt.calls == 1


def test_write_from_an_inlined_generator():
    def make():
        z = 0

        def gen(t):
            nonlocal z
            z = 1
            yield t.sin()
            z = 3
            yield t.cos()

        def fn(t):
            g = gen(t)
            i = next(g)
            g.close()
            return i
        return fn, lambda: z
    fn, get = make()
    opt, _ = _opt(fn)
    t = torch.randn(2)
    torch.testing.assert_close(opt(t), t.sin())
    assert get() == 1


def test_generator_finally_reads_the_value_the_frame_wrote():
    def make():
        log, z = [], 0

        def gen(t):
            try:
                log.append(1)
                yield t.sin()
                log.append(2)
            finally:
                log.append(z)

        def fn(t):
            nonlocal z
            g = gen(t)
            i = next(g)
            z = -123
            g.close()
            log.append(len(log))
            return i
        return fn, log, lambda: z
    fn, log, get = make()
    opt, _ = _opt(fn)
    t = torch.randn(2)
    torch.testing.assert_close(opt(t), t.sin())
    assert log == [1, -123, 2] and get() == -123


def test_close_return_value_by_version():
    def make():
        z = 0

        def gen(t):
            nonlocal z
            try:
                z += 1
                yield t.sin()
            except GeneratorExit:
                z += 10
                return t.tan()
            finally:
                z += 100

        def fn(t):
            g = gen(t)
            i = next(g)
            return i, g.close()
        return fn, lambda: z
    fn, get = make()
    t = torch.randn(2)
    ei, ey = fn(t)
    assert get() == 111
    opt, _ = _opt(fn)
    i, y = opt(t)
    assert get() == 222
    torch.testing.assert_close(i, ei)
    if ey is None:
        assert y is None
    else:
        torch.testing.assert_close(y, ey)


def test_write_before_a_break_is_seen_by_the_native_instruction():
    def make():
        z = 0

        @minidynamo.disable
        def show():  # runs natively at the break: reads the real cell
            print("z is", z)

        def fn(t):
            nonlocal z
            z = 7
            show()
            return t + z
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn, fullgraph=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        got = opt(torch.zeros(2))
    torch.testing.assert_close(got, torch.full((2,), 7.0))
    assert out.getvalue() == "z is 7\n" and get() == 7


def test_write_then_break_then_write_again():
    def make():
        z = 0

        def fn(t):
            nonlocal z
            z += 1
            minidynamo.graph_break()
            z += 10
            return t + z
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn, fullgraph=False)
    torch.testing.assert_close(opt(torch.zeros(2)), torch.full((2,), 11.0))
    assert get() == 11


def test_uncaught_raise_after_the_write_runs_once():
    def make():
        z = 0

        def fn(t):
            nonlocal z
            z += 1
            if t.shape[0] == 2:
                raise ValueError("no")
            return t
        return fn, lambda: z
    fn, get = make()
    opt, _ = _opt(fn, fullgraph=False)
    with pytest.raises(ValueError):
        opt(torch.zeros(2))
    assert get() == 1


def test_guard_on_a_read_cell_sees_an_outside_change():
    def make():
        z = 2

        def fn(t):
            nonlocal z
            z = z * 2
            return t * z

        def set_(v):
            nonlocal z
            z = v
        return fn, set_, lambda: z
    fn, set_, get = make()
    opt, _ = _opt(fn)
    t = torch.ones(2)
    torch.testing.assert_close(opt(t), t * 4)
    set_(3)
    torch.testing.assert_close(opt(t), t * 6)
    assert get() == 6


def test_cell_list_mutated_and_replaced():
    def make():
        z = [1]

        def fn(t):
            nonlocal z
            old = z
            old.append(2)
            z = [len(old)]
            return t + len(old), old
        return fn, lambda: z
    fn, get = make()
    opt, _ = _opt(fn)
    first = get()
    got, old = opt(torch.zeros(2))
    assert old is first and first == [1, 2] and get() == [2]
    torch.testing.assert_close(got, torch.full((2,), 2.0))


# --- exceptions leaving a generator's body into next() --------------------------------
def test_stop_iteration_in_a_generator_body_is_a_runtime_error():
    def fn(t):
        def whoo():
            yield t + 1
            raise StopIteration("boom")
        g = whoo()
        next(g)
        try:
            next(g)
        except RuntimeError:
            return t + 1.0
        except StopIteration:
            return t + 2.0
        return t
    t = torch.randn(2)
    opt, cnt = _opt(fn)
    torch.testing.assert_close(opt(t), fn(t))
    assert cnt.calls == 1


def test_value_error_from_next_then_close():
    def whoo(t):
        raise ValueError("foo")
        yield t.cos()

    def fn(t):
        gen = whoo(t)
        try:
            next(gen)
        except ValueError:
            pass
        return t.sin(), gen.close()
    t = torch.randn(2)
    opt, cnt = _opt(fn)
    y, b = opt(t)
    torch.testing.assert_close(y, t.sin())
    assert b is None and cnt.calls == 1


def test_dunder_next_raises_into_the_frame():
    def whoo(t):
        yield t
        raise KeyError("k")

    def fn(t):
        g = whoo(t)
        a = g.__next__()
        try:
            g.__next__()
        except KeyError as e:
            return a + len(e.args)
        return a
    t = torch.randn(2)
    opt, _ = _opt(fn)
    torch.testing.assert_close(opt(t), fn(t))


def test_exhausted_generator_next_caught():
    def whoo(t):
        yield t

    def fn(t):
        g = whoo(t)
        a = next(g)
        try:
            next(g)
        except StopIteration:
            return a * 2
        return a
    t = torch.randn(2)
    opt, _ = _opt(fn)
    torch.testing.assert_close(opt(t), t * 2)


def test_uncaught_exception_from_next_runs_eagerly_once():
    log = []

    def whoo():
        log.append(1)
        yield 1
        raise ValueError("x")

    def fn(t):
        g = whoo()
        next(g)
        next(g)
        return t
    opt, _ = _opt(fn, fullgraph=False)
    with pytest.raises(ValueError):
        opt(torch.zeros(2))
    assert log == [1]


def test_generator_raising_after_a_closure_write():
    def make():
        z = 0

        def whoo():
            nonlocal z
            z = 1
            yield 1
            z = 2
            raise ValueError("x")

        def fn(t):
            g = whoo()
            next(g)
            try:
                next(g)
            except ValueError:
                return t + z
            return t
        return fn, lambda: z
    fn, get = make()
    opt, cnt = _opt(fn)
    torch.testing.assert_close(opt(torch.zeros(2)), torch.full((2,), 2.0))
    assert get() == 2 and cnt.calls == 1
