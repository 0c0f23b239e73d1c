"""C functions that consume an iterable, in CPython's order.

Some pull one item, act on it (append it, count it, add it), then pull the next: code that
makes an item (a generator body, map's or filter's function) sees the consumer's work so
far. Others read the whole iterable first (PySequence_Fast, PySequence_List, a new tuple)
and then act. The tracer must do each as CPython's C code does, on containers made in the
trace and on containers passed in (whose final state is written back).

| consumer                                   | CPython                                   |
|--------------------------------------------|-------------------------------------------|
| deque.extend / extendleft / `+=`           | item by item, trimmed to maxlen each time; |
|                                            | the deque itself is copied first           |
| list.extend / `+=` on a list               | item by item (a list or tuple: copied)     |
| dict.update / dict(...) / OrderedDict /    | item by item (PyDict_MergeFromSeq2)        |
|   defaultdict update                       |                                           |
| Counter(...) / update / subtract           | item by item (_count_elements, a loop)     |
| set.update / difference_update             | item by item                               |
| set.intersection_update / symmetric_...    | a set of the whole iterable first          |
| sum / min / max / any / all / reduce       | item by item (key, add, test between)      |
| zip / map / filter / enumerate / itertools | lazy: one item per next()                  |
| zip(strict=True)                           | lazy, lengths checked as they run out (the ValueError raised in the trace) |
| sorted / tuple / list / str.join / f(*g) / | the whole iterable first                   |
|   `l[a:b] = g` / unpacking / product       |                                           |
"""
import functools
import itertools
from collections import Counter, OrderedDict, defaultdict, deque

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check, same


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (3,)), generator=g)


# --- deque.extend / extendleft: one item at a time --------------------------------------

def test_deque_extendleft_generator_reads_the_front():
    # The repro: each item is made after the previous one went in at the left.
    def f(x):
        d = deque([1])
        d.extendleft(d[0] + z for z in range(3))
        return x + 1, list(d)

    check(f, t(), kind="graph")


def test_deque_extend_generator_reads_the_back_and_the_length():
    def f(x):
        d = deque([1])
        d.extend(d[-1] * 2 + len(d) for _ in range(3))
        return x + 1, list(d)

    check(f, t(), kind="graph")


def test_deque_extend_with_maxlen_trims_before_the_next_item():
    def f(x):
        d = deque([1, 2], maxlen=3)
        d.extend(d[0] * 10 + z for z in range(4))
        e = deque([1, 2], maxlen=2)
        e.extendleft(e[-1] + z for z in range(3))
        return x + 1, list(d), list(e)

    check(f, t(), kind="graph")


def test_deque_extend_of_tensors_made_from_the_deque():
    def f(x):
        d = deque([x], maxlen=3)
        d.extendleft(d[0] * 2 for _ in range(4))
        d.extend(d[-1] + 1 for _ in range(2))
        return list(d)

    check(f, t(), kind="graph")


def test_deque_extend_map_and_chain():
    def f(x):
        d = deque([1])
        d.extend(map(lambda z: d[-1] + z, range(3)))
        d.extend(itertools.chain((d[-1] + 1 for _ in range(2)), (len(d) for _ in range(2))))
        d.extend(itertools.islice((len(d) for _ in itertools.count()), 3))
        return x + 1, list(d)

    check(f, t(), kind="graph")


def test_deque_passed_in_is_extended_item_by_item():
    def f(x, d):
        d.extendleft(d[0] + z for z in range(3))
        d.extend(d[-1] * 2 for _ in range(2))
        return x + 1

    check(f, (t(), deque([1])), (t(), deque([5, 6])), kind="graph", same_entry=False, graphs=2)


def test_deque_passed_in_with_maxlen():
    def f(x, d):
        d.extend(d[0] * 10 + z for z in range(3))
        return x + 1

    check(f, (t(), deque([1, 2], maxlen=3)), kind="graph")


def test_deque_extend_by_itself_copies_first():
    def f(x):
        d = deque([1, 2])
        d.extend(d)
        d.extendleft(d)
        return x + 1, list(d)

    check(f, t(), kind="graph")


def test_deque_extend_by_an_iterator_over_itself_raises():
    # CPython's deque iterator sees the first append: "deque mutated during iteration".
    def f(x):
        d = deque([1, 2])
        d.extend(iter(d))
        return x + 1, list(d)

    check(f, t(), kind="break", reason="exceptions")


def test_deque_iterator_live_at_a_break_is_the_deques():
    # Made again over the same deque after the graph (not a snapshot of its items).
    def f(x):
        d = deque([1, 2, 3])
        it = iter(d)
        first = next(it)
        y = x + first
        print("break")
        d.append(4)
        return y, list(it)

    check(f, t(), kind="break")


def test_dict_iterators_live_at_a_break_are_the_dicts():
    # Made again over the same dict after the graph: a key added after the break makes
    # CPython's iterator raise (a snapshot of the keys would go on).
    def f(x, d):
        it = iter(d)
        first = next(it)
        y = x + len(first)
        print("break")
        d["c"] = 3
        return y, list(it)

    check(f, (t(), {"a": 1, "b": 2}), kind="break")


def test_dict_view_iterators_live_at_a_break():
    def f(x):
        d = {"a": 1, "b": 2, "c": 3}
        vals, items = iter(d.values()), reversed(d.items())
        first, last = next(vals), next(items)
        y = x + first
        print("break")
        return y, list(vals), list(items), last, type(vals).__name__

    check(f, t(), kind="break")


def test_zip_and_enumerate_live_at_a_break_read_their_lists_after_it():
    # Made again as zip/enumerate over the lists' own iterators: what the lists hold after
    # the break is what they yield, as CPython's lazy zip and enumerate read it.
    def f(x):
        a, b = [1, 2, 3], [4, 5, 6]
        z, e = zip(a, b), enumerate(a, 5)
        first, e0 = next(z), next(e)
        y = x + 1
        print("break")
        a.append(7)
        b.append(8)
        a[1] = 20
        return y, list(z), list(e), first, e0, type(z).__name__, type(e).__name__

    check(f, t(), kind="break")


def test_loops_over_zip_and_enumerate_that_break_trace_their_resume_functions():
    # The resume function gets the real zip/enumerate object: wrapped (its iterators, the
    # count), not run eagerly.
    def f(x, xs):
        for i, v in enumerate(xs):
            x = x + v * i
            print("i", i)
        for u, w in zip(xs, xs[1:]):
            x = x + u * w
            print("z")
        return x

    info = check(f, (t(), [t(seed=k) for k in range(3)]), kind="break")
    assert "eager" not in [e.kind for e in info.tree], [(e.kind, e.reason) for e in info.tree]


def test_zip_and_enumerate_passed_in():
    def f(x, z, e):
        a, b = next(z)
        i, c = next(e)
        return x * a + b * i + c, list(z), list(e)

    def args():
        return t(), zip([1, 2, 3], (4, 5, 6)), enumerate([7, 8], 2)

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    expected = f(*args())
    for _ in range(2):  # the second call hits the cache
        same(opt(*args()), expected)
    assert [e.kind for e in opt.cache_entries()] == ["graph"] and backend.calls == 1


def test_deque_generator_with_a_side_effect_on_another_list():
    def f(x, log):
        d = deque([0])

        def gen():
            for i in range(3):
                log.append(len(d))
                yield d[-1] + i

        d.extend(gen())
        return x + 1, list(d)

    check(f, (t(), []), kind="graph")


def test_deque_generator_raising_midway_keeps_what_was_appended():
    # CPython has appended the first two items when the third pull raises.
    def f(x, d):
        def gen():
            yield d[-1] + 1
            yield d[-1] + 1
            raise KeyError("midway")

        y = x + 1
        d.extend(gen())
        return y

    # The raise declines: the frame breaks at the extend (gen closes over the cell d, passed to
    # the resume function by reference), which runs natively and raises as eager.
    check(f, (t(), deque([3])), kind="break", reason="exceptions")


# --- list.extend / += : one item at a time ---------------------------------------------

def test_list_extend_with_lazy_iterators_reading_the_list():
    def f(x):
        a = [1]
        a.extend(map(lambda z: a[-1] + z, range(3)))
        b = [1]
        b.extend(filter(None, (len(b) for _ in range(3))))
        c = ["a"]
        c.extend(enumerate(len(c) for _ in range(3)))
        d = [0]
        d.extend(itertools.chain(range(2), (len(d) for _ in range(2))))
        e = [1]
        e.extend(itertools.accumulate(e[-1] for _ in range(3)))
        g = [0]
        g.extend(zip((len(g) for _ in range(3)), "abc"))
        return x + 1, a, b, c, d, e, g

    check(f, t(), kind="graph")


def test_list_iadd_with_map_reading_the_list():
    def f(x):
        a = [x]
        a += map(lambda _: a[-1] * 2, range(3))
        return a

    check(f, t(), kind="graph")


def test_list_passed_in_extended_by_map_reading_it():
    def f(x, a, b):
        a.extend(map(lambda z: len(a) + z, range(3)))
        b += map(lambda z: b[-1] + z, range(2))
        return x + 1

    check(f, (t(), [3], [4]), kind="graph")


def test_list_extend_generator_with_side_effects_elsewhere():
    def f(x):
        a, m = [1], [5, 6]
        a.extend(m.append(len(a)) or len(m) for _ in range(2))
        return x + 1, a, m

    check(f, t(), kind="graph")


def test_list_slice_assignment_reads_everything_first():
    # list_ass_slice: PySequence_Fast makes a list of the whole iterable, then replaces.
    def f(x):
        a = [1, 2, 3]
        a[1:2] = (len(a) + z for z in range(3))
        return x + 1, a

    check(f, t(), kind="graph")


def test_list_extend_generator_raising_midway():
    def f(x, a):
        def gen():
            yield len(a)
            yield len(a)
            raise KeyError("k")

        y = x + 1
        a.extend(gen())
        return y

    # As for the deque: a break at the extend, which runs natively and raises as eager.
    check(f, (t(), [5]), kind="break", reason="exceptions")


# --- dicts ------------------------------------------------------------------------------

def test_dict_update_with_map_reading_the_dict():
    def f(x):
        d = {0: 0}
        d.update(map(lambda k: (k, len(d)), range(1, 4)))
        o = OrderedDict(a=0)
        o.update(zip("bcd", map(lambda _: len(o), range(3))))
        return x + 1, d, o

    check(f, t(), kind="graph")


def test_defaultdict_and_ordered_dict_updates_from_generators():
    def f(x):
        d = defaultdict(list)
        d.update((str(k), [len(d)]) for k in range(3))
        o = OrderedDict(a=x)
        o.update((str(k), o[str(k - 1)] * 2 if k else o["a"]) for k in range(3))
        return dict(d), o

    check(f, t(), kind="graph")


def test_dict_passed_in_updated_by_a_generator_reading_it():
    def f(x, d, e):
        d.update((str(z), len(d) * x) for z in range(3))
        e.update(map(lambda z: (z, len(e)), range(3)))
        return x + 1

    check(f, (t(), {"a": 1}, {"b": 2}), kind="graph")


# --- Counter ------------------------------------------------------------------------------

def test_counter_update_and_subtract_count_each_before_the_next():
    def f(x):
        c = Counter(a=1)
        c.update("k" + str(len(c)) for _ in range(3))
        c.subtract("s" + str(len(c)) for _ in range(2))
        return x + 1, dict(c)

    check(f, t(), kind="graph")


def test_counter_passed_in_updated_by_map_reading_it():
    def f(x, c):
        c.update(map(lambda _: "k" + str(len(c)), range(3)))
        return x + 1

    check(f, (t(), Counter(a=2)), kind="graph")


# --- sets ----------------------------------------------------------------------------------

def test_set_update_and_difference_update_item_by_item():
    def f(x):
        s = {100}
        s.update(len(s) for _ in range(3))
        r = {0, 1, 2, 3, 4}
        r.difference_update(len(r) for _ in range(3))
        u = {7}
        u.update(map(lambda _: len(u), range(3)), (len(u) * 10 for _ in range(2)))
        return x + 1, sorted(s), sorted(r), sorted(u)

    check(f, t(), kind="graph")


def test_set_intersection_and_symmetric_difference_update_read_everything_first():
    def f(x):
        s = {0, 1, 2, 3, 4}
        s.symmetric_difference_update(len(s) for _ in range(3))
        r = {0, 1, 2, 3, 4, 5}
        r.intersection_update(len(r) - z for z in range(3))
        return x + 1, sorted(s), sorted(r)

    check(f, t(), kind="graph")


def test_set_update_by_itself():
    def f(x):
        s = {1, 2}
        s.update(s)
        r = {1, 2}
        r.difference_update(r)
        return x + 1, sorted(s), sorted(r)

    check(f, t(), kind="graph")


# --- builtins that act between pulls ---------------------------------------------------------

class Acc:
    """A value whose + is logged: sum's adds interleave with the generator's pulls."""

    def __init__(self, v, log):
        self.v, self.log = v, log

    def __add__(self, other):
        self.log.append(self.v)
        return Acc(self.v + (other.v if isinstance(other, Acc) else other), self.log)

    __radd__ = __add__


def test_sum_adds_each_item_before_the_next_pull():
    def f(x):
        log = []

        def gen():
            for _ in range(3):
                yield Acc(len(log), log)

        return x + 1, sum(gen(), Acc(0, log)).v, list(log)

    check(f, t(), kind="graph")


def test_sum_of_tensors_changed_in_place_after_yielding():
    def f(x):
        def gen():
            y = x.clone()
            for _ in range(3):
                yield y * 1
                y.add_(1)
            yield y

        buf = x.clone()
        return sum(gen()), sum(buf.mul_(2) for _ in range(2))

    check(f, t(), kind="graph")


def test_sum_map_with_side_effects():
    def f(x):
        log = []
        return x + 1, sum(map(lambda v: log.append(v) or len(log), range(3))), log

    check(f, t(), kind="graph")


def test_zip_strict_is_lazy():
    def f(x):
        log, out = [], []
        for a, b in zip((len(log) for _ in range(3)), range(3), strict=True):
            log.append(a)
            out.append(a + b)
        return x + 1, out

    check(f, t(), kind="graph")


@pytest.mark.parametrize("n", [2, 4])
def test_zip_strict_different_lengths_raise_after_the_loop_ran(n):
    def f(x, log):
        for a, b in zip((len(log) for _ in range(3)), range(n), strict=True):
            log.append(a + b)
        return x + 1

    # The loop's FOR_ITER raises: the whole call runs eagerly (the log is written back).
    check(f, (t(), []), kind="eager", reason="exceptions")


@pytest.mark.parametrize("n", [2, 4])
def test_zip_strict_error_caught_in_the_function(n):
    """The ValueError of a strict zip whose arguments differ in length is raised in the trace,
    with CPython's message and after the same pulls: a handler of the function catches it."""
    def f(x, log):
        try:
            for a, b in zip((len(log) for _ in range(3)), range(n), strict=True):
                log.append(a + b)
        except ValueError as e:
            return x + len(log), str(e)
        return x - 1, None

    check(f, (t(), []), kind="graph")


def test_min_max_any_all_reduce_pull_lazily():
    def f(x):
        log = []

        def key(v):
            log.append(v)
            return -v

        def gen(n):
            for i in range(n):
                yield len(log) + i

        m = max(gen(3), key=key)
        k = min(gen(3), key=key)
        a = any(log.append("a") or i > 1 for i in range(5))
        b = all(log.append("b") or i < 1 for i in range(5))
        r = functools.reduce(lambda p, q: log.append(q) or p + q, gen(4))
        return x + 1, m, k, a, b, r, log

    check(f, t(), kind="graph")


# --- consumers that read the whole iterable first -------------------------------------------

def test_whole_iterable_first_consumers():
    def f(x):
        log = []

        def gen(n):
            for i in range(n):
                log.append(i)
                yield len(log)

        def key(v):
            log.append(-v)
            return v

        s = sorted(gen(3), key=key)
        tup = tuple(gen(2))
        a, *rest = gen(3)
        p = next(itertools.product(gen(2), "ab"))

        def h(*args):
            return args, len(log)

        called = h(*gen(2))
        return x + 1, s, tup, a, rest, p, called, log

    check(f, t(), kind="graph")


def test_new_containers_from_generators_with_side_effects():
    def f(x):
        log = []

        def gen(n):
            for i in range(n):
                log.append(i)
                yield i

        d = deque(gen(5), maxlen=2)
        c = Counter(str(i) for i in gen(3))
        dd = dict((str(i), len(log)) for i in gen(2))
        return x + 1, list(d), dict(c), dd, log

    check(f, t(), kind="graph")


def test_str_join_reads_everything_first():
    def f(x, log):
        return x + 1, ",".join(str(log.append(i) or len(log)) for i in range(3))

    # str.join declines: the frame breaks at it (log is a cell, passed by reference) and it
    # runs natively, reading the whole generator first as eager.
    check(f, (t(), []), kind="break", reason="call")
