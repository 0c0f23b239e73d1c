"""Generator functions and generator expressions consumed inside the optimized function:
their bodies are traced lazily, one step per item pulled, so work, side effects and
in-place ops interleave with the consumer's as in CPython. Each function is compared with
eager (results, printed output, the lists passed in) and its capture is asserted."""
import contextlib
import io

import torch

import minidynamo
from helpers import CountingBackend, assert_uses, check


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


# --- generator expressions ------------------------------------------------------------

def test_sum_of_a_genexpr():
    def f(xs):
        return sum(y * 2 for y in xs)

    assert_uses(f, ("RETURN_GENERATOR", "GEN_START"), "YIELD_VALUE")
    check(f, [t(), t(seed=1), t(seed=2)], kind="graph", graphs=1)


def test_genexpr_with_a_condition_and_a_closure():
    def f(x, scale):
        return sum(x * i * scale for i in range(6) if i % 2)

    check(f, (t(), 3.0), kind="graph", graphs=1)


def test_tuple_and_list_of_a_genexpr():
    def f(x):
        parts = tuple(torch.relu(x + k) for k in range(3))
        rows = list(p.sum(0) for p in parts)
        return torch.cat(parts), torch.stack(rows)

    check(f, t(), kind="graph", graphs=1)


def test_genexpr_over_a_tensor_and_a_dict():
    def f(x, d):
        a = sum(row * 2 for row in x)
        b = sum(v * float(len(k)) for k, v in d.items())
        c = tuple(k for k in d if k != "skip")
        return a, b, c

    check(f, (t(), {"ab": t(2, seed=3), "skip": t(2, seed=4)}), kind="graph", graphs=1)


def test_nested_genexprs_and_two_for_clauses():
    def f(xs, ws):
        inner = sum(sum(x * w for w in ws) for x in xs)
        pairs = tuple(x + w for x in xs for w in ws if w.shape == x.shape)
        return inner, pairs

    check(f, ([t(), t(seed=1)], [t(seed=2), t(seed=3)]), kind="graph", graphs=1)


def test_genexpr_over_shapes_is_constant():
    def f(x):
        return tuple(d * 2 for d in x.shape), sum(d for d in x.shape if d > 3)

    check(f, t(4, 3), kind="constant")


def test_genexpr_sees_a_rebound_closure_variable_when_pulled():
    # The genexpr reads `k` when each item is made: after the consumer rebinds it.
    def f(x):
        k = 1
        g = (x * k for _ in range(3))
        a = next(g)
        k = 5
        b = next(g)
        return a, b

    check(f, t(), kind="graph", graphs=1)


def test_genexpr_iterable_is_read_at_creation():
    # The first iterable is iterated when the genexpr is made; the list changed later is
    # still the same list object (appends are seen).
    def f(x):
        xs = [x, x + 1]
        g = (v * 2 for v in xs)
        xs.append(x + 2)
        xs = [x]  # rebinding the name does not change what g walks
        return tuple(g)

    check(f, t(), kind="graph", graphs=1)


# --- generator functions --------------------------------------------------------------

def scaled(xs, n, *, offset=0.0):
    for x in xs:
        yield x * n + offset


def first_two(xs):
    for i, x in enumerate(xs):
        if i == 2:
            return
        yield x


def counted(n):
    total = 0
    for i in range(n):
        total += i
        yield i
    return total


def test_generator_function_with_arguments():
    def f(x, y):
        out = x
        for v in scaled([x, y], 3, offset=1.0):
            out = out + v
        return out, list(scaled((y,), 2))

    check(f, (t(), t(seed=1)), kind="graph", graphs=1)


def test_return_ends_the_generator():
    def f(x):
        return tuple(first_two([x, x + 1, x + 2, x + 3]))

    check(f, t(), kind="graph", graphs=1)


def test_generator_closure_over_the_frame():
    def f(x):
        bias = x.sum(0)

        def rows(n):
            for i in range(n):
                yield x[i] + bias

        return torch.stack(list(rows(x.shape[0])))

    check(f, t(), kind="graph", graphs=1)


def test_yield_from_a_generator_a_list_and_its_value():
    def outer(x):
        yield from [x, x * 2]
        total = yield from counted(3)
        yield x + total
        yield from (x - i for i in range(2))

    def f(x):
        return tuple(v if isinstance(v, torch.Tensor) else x * v for v in outer(x))

    assert_uses(outer, ("YIELD_FROM", "SEND"))
    check(f, t(), kind="graph", graphs=1)


def walk(tree):
    if isinstance(tree, (list, tuple)):
        for sub in tree:
            yield from walk(sub)
    else:
        yield tree


def test_recursive_generator():
    def f(x):
        return sum(walk([x, (x * 2, [x * 3]), [[x * 4]]]))

    check(f, t(), kind="graph", graphs=1)


def test_next_and_next_with_default():
    def f(x):
        it = scaled([x, x + 1], 2)
        a = next(it)
        b = next(it)
        c = next(it, None)
        d = next(it, x)  # exhausted stays exhausted
        return a, b, c, d

    check(f, t(), kind="graph", graphs=1)


def test_partly_consumed_then_abandoned():
    # The rest of the body never runs: its appends never happen.
    def gen(log, x):
        for i in range(5):
            log.append(i)
            yield x * i

    def f(x, log):
        g = gen(log, x)
        a = next(g)
        b = next(g)
        return a + b

    check(f, (t(), []), kind="graph", graphs=1)


def test_consumed_in_two_places():
    def f(x):
        g = scaled([x, x + 1, x + 2, x + 3], 2)
        first = next(g)
        rest = list(g)
        return first, rest, list(g)

    check(f, t(), kind="graph", graphs=1)


def test_zip_and_enumerate_pull_lazily():
    def gen(log, xs):
        for x in xs:
            log.append(len(log))
            yield x

    def f(xs, log):
        out = []
        for i, (a, b) in enumerate(zip(gen(log, xs), [1, 2])):  # zip stops after two pulls
            log.append(-i)
            out.append(a * b)
        return out

    check(f, ([t(), t(seed=1), t(seed=2)], []), kind="graph", graphs=1)


def test_infinite_generator_consumed_partly():
    def naturals():
        i = 0
        while True:
            yield i
            i += 1

    def f(xs):
        out = [x * i for i, x in zip(naturals(), xs)]
        for i in naturals():
            if i == 3:
                break
        return out, i

    check(f, [t(), t(seed=1), t(seed=2)], kind="graph", graphs=1)


def test_generator_method_of_a_module():
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = (torch.nn.Linear(3, 3) for _ in range(3))

        def active(self, skip):
            for i, layer in enumerate((self.a, self.b, self.c)):
                if i != skip:
                    yield layer

        def forward(self, x):
            for layer in self.active(1):
                x = torch.tanh(layer(x))
            return x

    torch.manual_seed(0)
    m = Stack()
    check(lambda x: m(x), t(), kind="graph", graphs=1)


def test_generator_with_try_finally_consumed_to_the_end():
    def gen(xs):
        try:
            for x in xs:
                yield x + 1
        finally:
            pass

    def f(x):
        return sum(gen([x, x * 2]))

    check(f, t(), kind="graph", graphs=1)


def test_with_block_around_yields_consumed_to_the_end():
    # Grad mode is off while the generator is suspended inside its with block: the
    # consumer's work between pulls runs without grad too, as in CPython.
    def gen(x):
        with torch.no_grad():
            yield x * 2
            yield x * 3

    def f(x):
        outs = [v + x for v in gen(x)]
        return outs, [o.requires_grad for o in outs], (x * 4).requires_grad

    check(f, t().requires_grad_(), kind="graph", graphs=1)


def test_builtins_over_generators():
    def f(x, log):
        def noisy(n):
            for i in range(n):
                log.append(i)
                yield i

        d = dict((k, x * i) for i, k in enumerate("abc"))
        hit = any(i > 1 for i in noisy(5))  # stops pulling at 2: the appends show where
        top = max(len(s) for s in ["a", "abc", "ab"])
        numbered = [i * v for i, v in enumerate((x * k for k in range(3)), 1)]
        columns = list(zip(*([x * i, x + i] for i in range(3))))
        return d, hit, top, numbered, columns

    check(f, (t(), []), kind="graph", graphs=1)


def test_generators_inside_generators_and_star_arguments():
    def f(x):
        def partial_sums(n):
            for i in range(n):
                yield sum(x * j for j in range(i + 1))

        def spread(*args, **kwargs):
            yield from args
            yield from kwargs.values()

        return list(partial_sums(3)), list(spread(x, x + 1, z=x * 2))

    check(f, t(), kind="graph", graphs=1)


def test_yield_expression_receives_none():
    def f(x):
        def echo():
            got = yield x
            yield x if got is None else x * 0

        return tuple(echo())

    check(f, t(), kind="constant")


def test_generator_shared_by_the_frame_and_a_helper():
    def take(it, n):
        return [next(it) for _ in range(n)]

    def f(x):
        g = scaled([x, x + 1, x + 2, x + 3], 2)
        head = take(g, 2)
        tail = [v - 1 for v in g]
        return head, tail

    check(f, t(), kind="graph", graphs=1)


def test_getattr_of_a_generator():
    def f(x):
        g = (v for v in [x])
        return getattr(g, "missing", 3) * x, g.__name__, isinstance(g, type(g)), bool(g), \
            scaled([], 1).__qualname__

    check(f, t(), kind="graph", graphs=1)


def test_a_generator_pulling_itself_raises_as_in_eager():
    def f(x):
        def g():
            yield x
            yield next(it)  # ValueError: generator already executing

        it = g()
        return list(it)

    check(f, t(), kind="eager", reason="exceptions")


# --- interleaving: side effects and in-place ops -----------------------------------------

def test_side_effects_interleave_on_a_list_passed_in():
    def gen(log, x):
        for i in range(3):
            log.append(("gen", i))
            yield x + i
        log.append(("gen", "end"))

    def f(x, log):
        out = x
        for v in gen(log, x):
            log.append(("use", len(log)))
            out = out * v
        return out

    check(f, (t(), []), kind="graph", graphs=1)


def test_in_place_ops_interleave_between_generator_and_consumer():
    def gen(buf):
        for i in range(3):
            buf.add_(1)
            yield buf * 1
            buf.mul_(2)

    def f(x):
        buf = x.clone()
        seen = []
        for v in gen(buf):
            buf.sub_(0.5)  # the generator sees this when it resumes
            seen.append(v + buf)
        return seen, buf

    check(f, t(), kind="graph", graphs=1)


def test_in_place_op_on_an_input_inside_a_generator():
    def gen(x, n):
        for _ in range(n):
            x.mul_(2)
            yield x.sum()

    def f(x):
        first = [s for s in gen(x, 2)]
        return first, x + 1

    check(f, t(), kind="graph", graphs=1)


def test_consumers_that_write_as_they_pull():
    # list.extend, += and dict.update take one item, store it, then take the next: the
    # generator's body sees (and may change) the container half filled.
    def f(x, log):
        def logged(n):
            for i in range(n):
                log.append("gen")
                yield i

        log.extend(logged(2))  # a list passed in
        made = []
        made.extend(len(made) for _ in range(3))
        made += (len(made) * 10 for _ in range(2))
        d = {}
        d.update((k, len(d)) for k in "ab")
        return x * len(made), made, d

    check(f, (t(), []), kind="graph", graphs=1)


def test_print_outside_the_generator_after_it_finished():
    def f(x):
        total = sum(v * v for v in (x, x + 1))
        print("total", tuple(total.shape))
        return total * 2

    info = check(f, t(), kind="break", reason="side_effect")
    assert info.graphs == 2


def test_print_inside_a_genexpr_breaks_at_the_consumer():
    # The genexpr never started when the trace declines inside it: the graph before, then
    # sum() runs natively over the same genexpr made again.
    def f(x):
        y = x * 2
        s = sum(print("item", tuple(v.shape)) or v for v in (y, y + 1))
        return s + 1

    check(f, t(), kind="break", reason="side_effect")


# --- StopIteration and exceptions -------------------------------------------------------

def test_next_on_an_exhausted_generator_raises_as_in_eager():
    def f(x):
        g = (v for v in [x])
        next(g)
        return next(g)

    # No break at the call: g (started) would have to cross it.
    check(f, t(), kind="eager", reason="exceptions")


def test_stop_iteration_inside_a_generator_is_a_runtime_error():
    def gen(it):
        yield next(it)
        yield next(it)  # PEP 479: the StopIteration becomes RuntimeError

    def f(x):
        return list(gen(iter([x])))

    check(f, t(), kind="break", reason="exceptions")


# --- what declines ----------------------------------------------------------------------

def test_returning_a_started_generator_makes_it_again_at_its_yield():
    def f(x):
        g = scaled([x, x + 1], 2)
        next(g)
        return g

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    g, eg = opt(t()), f(t())
    assert type(g) is type(eg) and g.__qualname__ == eg.__qualname__
    rest, expected = list(g), list(eg)
    assert len(rest) == len(expected) == 1
    torch.testing.assert_close(rest[0], expected[0])
    (entry,) = opt.cache_entries()
    assert entry.kind == "graph"


def test_returning_an_unstarted_generator_makes_it_again():
    def f(x):
        y = x + 1
        return (v * 2 for v in (x, y)), y

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(2):
        g, y = opt(t())
        eg, ey = f(t())
        assert type(g) is type(eg)
        for a, b in zip(g, eg, strict=True):
            torch.testing.assert_close(a, b)
    assert [e.kind for e in opt.cache_entries()] == ["graph"] and backend.calls == 1


def test_live_across_a_graph_break_declines():
    def f(x):
        g = scaled([x, x + 1], 2)
        a = next(g)
        print("between")
        return a + next(g)

    info = check(f, t(), kind="eager", reason="side_effect")
    assert "cannot be made again" in info.entries[0].reason.no_break


def test_abandoned_inside_try_finally_declines():
    def gen(log, x):
        try:
            yield x
            yield x * 2
        finally:
            log.append("closed")  # runs when CPython drops the generator

    def f(x, log):
        g = gen(log, x)
        return next(g) + 1

    info = check(f, (t(), []), kind="eager", reason="generator")
    assert "suspended inside a try or with block" in info.entries[0].reason.detail


def test_dropped_by_its_loop_inside_a_with_block():
    def gen(x):
        with torch.no_grad():
            yield x * 2
            yield x * 3

    def f(x):
        for v in gen(x):
            break  # CPython closes the generator here: grad mode comes back
        return v + x, (x * 2).requires_grad

    # The loop was its only holder: closed at the break in the trace too (test_generator_dropped_by_loop.py).
    check(f, t().requires_grad_(), kind="graph")


def test_abandoned_inside_a_user_with_block_declines():
    class Tracker:
        def __init__(self, log):
            self.log = log

        def __enter__(self):
            self.log.append("enter")
            return self

        def __exit__(self, *exc):
            self.log.append("exit")  # runs when CPython drops the generator
            return False

    def gen(log, x):
        with Tracker(log):
            yield x
            yield x * 2

    def f(x, log):
        return next(gen(log, x)) + 1

    info = check(f, (t(), []), kind="eager", reason="generator")
    assert "suspended inside a try or with block" in info.entries[0].reason.detail


def test_in_over_a_generator_stops_at_the_match():
    def f(x, log):
        def gen():
            for i in range(5):
                log.append(i)
                yield i

        g = gen()
        found = 2 in g
        return (x + 1 if found else x), next(g), 9 in g, next(g, None)

    check(f, (t(), []), kind="graph", graphs=1)


def test_in_over_an_iterator_stops_at_the_match():
    def f(x):
        it = iter([1, 2, 3])
        found = 2 in it
        return x * next(it, 10), found

    check(f, t(), kind="graph", graphs=1)


def test_sum_of_a_generator_changing_yielded_tensors():
    # CPython adds each item before the next in-place add_; sum pulls one item at a time too.
    def f(x):
        buf = x.clone()
        return sum(buf.add_(1) for _ in range(3))

    check(f, t(), kind="graph", graphs=1)


def test_sum_of_a_generator_changing_yielded_lists():
    def gen():
        acc = []
        for i in range(3):
            acc.append(i)
            yield acc

    def f(x):
        return x * len(sum(gen(), []))

    check(f, t(), kind="graph", graphs=1)


def test_grad_mode_changed_by_a_generator_sum_pulls():
    # sum() adds each item before it takes the next: the second add runs with grad off.
    def gen(x):
        yield x * 2
        torch.set_grad_enabled(False)
        yield x * 3
        torch.set_grad_enabled(True)

    def f(x):
        return sum(gen(x))

    check(f, t().requires_grad_(), kind="graph", graphs=1)


def test_coroutines_still_decline():
    async def co(x):
        return x

    def f(x):
        c = co(x)
        c.close()
        return x + 1

    (reason,) = minidynamo.explain(f)(t()).break_reasons[:1]
    assert reason.category == "generator" and "coroutine" in reason.detail, reason


def test_explain_shows_the_graph_of_a_generator():
    def f(xs):
        return torch.stack(tuple(torch.sin(v) for v in xs))

    out = minidynamo.explain(f)([t(), t(seed=1)])
    assert out.graph_count == 1 and out.graph_break_count == 0 and not out.break_reasons
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print(out)
    assert "sin" in buf.getvalue()
