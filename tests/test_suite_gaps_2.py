"""More constructs from torch's own Dynamo tests that torch.compile traces whole: a partial's
attributes, a class's `__dict__`, sets from outside changed in place, read-only set methods,
`**` of a user mapping, the operator module on tensors, and `dynamic=False` reaching the
callees an eager run offers."""
import collections.abc
import contextlib
import functools
import operator

import pytest

import torch

import minidynamo
from helpers import Args, CountingBackend, check

T = torch.randn(4)


# --- functools.partial attributes -------------------------------------------------------
P = functools.partial(lambda x, y: x.sin() + y.cos(), y=T)


def test_partial_has_no_name():
    def fn(x):
        if hasattr(P, "__name__"):
            return x + 1
        return P(x) + len(P.args) + len(P.keywords), getattr(P, "__name__", "none"), P.func is not None

    check(fn, torch.randn(4), kind="graph")


def test_partial_name_is_an_attribute_error():
    def fn(x):
        return x + 1, P.__name__

    check(fn, torch.randn(4), kind="break")


def test_partial_dict_entries_are_read_and_guarded():
    p = functools.partial(torch.add, alpha=2)
    p.tag = 3

    def fn(x):
        return p(x, x) * getattr(p, "tag", 0) + hasattr(p, "other"), p.__dict__["tag"], p.__module__

    info = check(fn, torch.randn(4), kind="graph")
    p.other = 1  # the absence of `other` was guarded
    opt = info.opt
    got = opt(torch.ones(4))
    assert got[0].tolist() == fn(torch.ones(4))[0].tolist() == [10.0] * 4
    p.tag = 5
    assert opt(torch.ones(4))[1] == 5


def test_partial_made_in_the_trace():
    def fn(x):
        q = functools.partial(torch.mul, x)
        return q(2), hasattr(q, "__qualname__"), getattr(q, "__name__", "none"), q.args[0] is x

    check(fn, torch.randn(4), kind="graph")


# --- a class's __dict__ -------------------------------------------------------------------
class A:
    x = 1

    def m(self):
        return 2


def test_class_dict_reads():
    a = A()

    def fn(x):
        d = type(a).__dict__
        return (x + ("x" in d) + d["x"] + d.get("y", 5) + len(d), [k for k in d.keys() if not k.startswith("__")],
                "m" in A.__dict__, A.__dict__.get("m") is A.m)

    info = check(fn, torch.randn(4), kind="graph")
    A.y = 10  # the keys were guarded
    try:
        assert info.opt(torch.zeros(4))[0].tolist() == fn(torch.zeros(4))[0].tolist()
    finally:
        del A.y


def test_class_dict_one_key_guarded():
    class B:
        x = 1

    def fn(x):
        return x + ("z" in B.__dict__)

    info = check(fn, torch.randn(4), kind="graph")
    B.z = 1
    assert info.opt(torch.zeros(4)).tolist() == [1.0] * 4


def test_class_dict_is_read_only():
    def fn(x):
        y = x + 1
        try:
            A.__dict__["x"] = 2
        except TypeError as e:
            return y, str(e)
        return y

    check(fn, torch.randn(4), kind="graph")
    assert A.x == 1


# --- sets from outside changed in place ---------------------------------------------------
S = {1, 2}


def test_global_set_changed_in_place():
    def fn(x):
        S.add(3)
        S.discard(1)
        S.update({7})
        S.update([8, 9])
        S.difference_update({9})
        S.update(k * 10 for k in (1, 2))
        return x + len(S)

    global S
    for _ in range(2):
        S = {1, 2}
        before = S
        check(fn, torch.randn(4), kind="graph", same_entry=False)
        assert S is before
        S = {1, 2}
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        opt(torch.randn(4))
        expected = {1, 2}
        expected.add(3), expected.discard(1), expected.update({7}), expected.update([8, 9])
        expected.difference_update({9})
        expected.update(k * 10 for k in (1, 2))
        assert list(S) == list(expected)


def _closure():
    seen = {"a"}

    def fn(x, s):
        seen.add("b")
        s.add(len(seen))
        s.discard(0)
        if 2 in s:
            s.remove(2)
        return x + len(s)
    return fn, seen


def test_closure_and_argument_sets_changed_in_place():
    fn, seen = _closure()
    check(fn, Args(torch.randn(4), {0, 5}), Args(torch.randn(4), {0, 1, 5}), kind="graph", same_entry=False)
    assert seen == {"a", "b"}
    s = {0, 5, 11}
    opt = minidynamo.optimize(fn, backend=CountingBackend())
    opt(torch.randn(4), s)
    e = {0, 5, 11}
    fn(torch.randn(4), e)
    assert list(s) == list(e)


def test_set_changed_then_graph_break():
    T2 = {1}

    def fn(x):
        T2.add(2)
        torch._dynamo.graph_break()
        T2.add(3)
        return x + len(T2)

    check(fn, torch.randn(4), kind="break", reason="graph_break", same_entry=False)


# --- read-only set methods -----------------------------------------------------------------
X = {1, 2}
Y = frozenset({3})


def test_read_only_set_methods_on_constant_sets():
    def fn(x):
        return (x + X.isdisjoint(Y) + X.issubset({1, 2, 3}) + X.issuperset([1]) + Y.isdisjoint((3,)),
                X.union(Y), X.intersection(Y), X.difference({1}), X.symmetric_difference(Y), Y.difference(X),
                X.copy(), len(Y.union([4])))

    check(fn, torch.randn(4), kind="graph")


def test_read_only_set_methods_on_sets_of_modules():
    def fn(x, a, b):
        s1, s2 = {a, b}, {a}
        return (x + s1.issuperset(s2) + s2.issubset(s1) + s2.isdisjoint({b}) + len(s1.union(s2))
                + len(s1 - s2) + len(s1.intersection(s2)) + (b in s1.difference(s2)), a in (s1 & s2))

    check(fn, Args(torch.randn(4), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)), kind="graph")


def test_set_made_from_an_outside_set_then_its_argument_changes():
    def fn(x):
        extra = [5]
        u = X.union(extra)
        extra.append(6)
        return x + 1, u, X.copy(), X.difference(Y)

    check(fn, torch.randn(4), kind="graph")


# --- the operator module on tensors and sizes ---------------------------------------------
def test_operator_unary_functions_on_tensors():
    def fn(x, i):
        return (operator.pos(x) + (+x) + operator.neg(x) + operator.abs(x) + operator.__pos__(x),
                operator.invert(i), operator.inv(i), operator.__abs__(i))

    check(fn, Args(torch.randn(4), torch.tensor([1, -2])), kind="graph")


def test_operator_functions_on_sizes():
    def fn(x, n):
        return x * operator.index(n) + operator.neg(n) + operator.pos(x.shape[0]) + operator.abs(-x.shape[0])

    check(fn, Args(torch.randn(4), 3), kind="graph")

    def plain(x, n):  # the same with the operators' own syntax: as many graphs
        return x * n + (-n) + (+x.shape[0]) + abs(-x.shape[0])

    counts = []
    for f in (fn, plain):
        cnt = CountingBackend()
        opt = minidynamo.optimize(f, backend=cnt, dynamic=True)
        for k in (4, 5, 6):
            x = torch.randn(k)
            torch.testing.assert_close(opt(x, 2 * k), f(x, 2 * k))
        counts.append(cnt.calls)
    assert counts[0] == counts[1]


# --- ** of a user mapping -----------------------------------------------------------------
class TD(collections.abc.MutableMapping):
    def __init__(self, d):
        self.d = d

    def __getitem__(self, k):
        return self.d[k]

    def __setitem__(self, k, v):
        self.d[k] = v

    def __delitem__(self, k):
        del self.d[k]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


class Logged(TD):
    def __init__(self, d):
        super().__init__(d)
        self.reads = []

    def keys(self):
        self.reads.append("keys")
        return list(self.d)

    def __getitem__(self, k):
        self.reads.append(k)
        return self.d[k]


def _gn(x, a=None, b=None):
    return x + a * b


def test_double_star_of_a_user_mapping_passed_in():
    def fn(x, t):
        return _gn(x, **t)

    check(fn, Args(torch.randn(4), TD({"a": torch.randn(4), "b": torch.randn(4)})), kind="graph")


def test_double_star_of_a_user_mapping_made_inside_reads_keys_then_items():
    def fn(x):
        t = Logged({"b": 2, "a": x})
        return _gn(x, **t), t.reads

    check(fn, torch.randn(4), kind="graph")


def test_double_star_of_a_user_mapping_with_a_repeated_keyword():
    def fn(x, t):
        try:
            return _gn(x, a=1, **t)
        except TypeError:
            return x

    check(fn, Args(torch.randn(4), TD({"a": 1, "b": 2})), kind="eager")


# --- functools.wraps on functions made in the trace -------------------------------------------
def test_contextmanager_made_with_wraps_in_the_trace():
    def fn(x):
        def mycm(func):
            @functools.wraps(func)
            def helper(*args, **kwds):
                return contextlib._GeneratorContextManager(func, args, kwds)
            return helper

        @mycm
        def gen(v):
            """doubles"""
            yield v * 2

        with gen(3) as k:
            y = x * k
        return y, gen.__name__, gen.__qualname__, gen.__doc__, gen.__wrapped__.__name__

    check(fn, torch.randn(4), kind="graph")


def test_wraps_of_a_contextmanager_helper_made_in_the_trace():
    def fn(x):
        @contextlib.contextmanager
        def cm(v):
            yield v

        @functools.wraps(cm)
        def w():
            return 1

        with cm(2) as v:
            return x * v, w.__name__, w.__qualname__, w.__wrapped__ is cm, w(), sorted(w.__dict__)

    check(fn, torch.randn(4), kind="graph")


def test_wrapper_made_in_the_trace_escapes_with_its_attributes():
    def fn(x):
        def deco(f):
            @functools.wraps(f)
            def inner(*a):
                return f(*a) + 1
            return inner

        @deco
        def h(y):
            """doc"""
            return y * 2

        return h(x), h, h.__doc__, h.__wrapped__

    info = check(fn, torch.randn(4), kind="graph")
    h = info.opt(torch.randn(4))[1]
    assert (h.__name__, h.__doc__, h.__wrapped__.__name__) == ("h", "doc", "h")
    torch.testing.assert_close(h(torch.ones(2)), torch.full((2,), 3.0))


# --- dynamic=False reaches the frames an eager run offers -----------------------------------
def _h(x, n):
    return x * n + 1


def _g(x, n):
    return _h(x, n) + n


def _f(x, n):
    return _g(x, n) * 2


def _symbolic_inputs(backend) -> list:
    return [e for inputs in backend.example_inputs for e in inputs
            if isinstance(e, torch.SymInt) or isinstance(e, torch.Tensor) and any(
                isinstance(s, torch.SymInt) for s in e.shape)]


@pytest.mark.parametrize("dynamic", [False, None])
def test_static_mode_reaches_callees_past_the_cache_limit(monkeypatch, dynamic):
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 2)
    minidynamo.reset()
    cnt = CountingBackend()
    opt = minidynamo.optimize(_f, backend=cnt, dynamic=dynamic)
    for n in range(10):
        x = torch.randn(3 + n)
        torch.testing.assert_close(opt(x, n), _f(x, n))
    if dynamic is False:
        # f, then g and h on their own, each up to its limit; every graph static
        assert cnt.calls == 6
        assert _symbolic_inputs(cnt) == []
    else:  # automatic: the second size of f makes it symbolic
        assert cnt.calls == 2
        assert _symbolic_inputs(cnt)


def test_static_mode_reaches_a_callee_at_a_break(monkeypatch):
    def fn(x, n):
        y = x + 1
        print("break")
        return _g(y, n)

    def outer(x, n):
        return fn(x, n)

    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 2)
    minidynamo.reset()
    cnt = CountingBackend()
    opt = minidynamo.optimize(outer, backend=cnt, dynamic=False)
    for n in range(6):
        x = torch.randn(3 + n)
        torch.testing.assert_close(opt(x, n), outer(x, n))
    assert _symbolic_inputs(cnt) == []
