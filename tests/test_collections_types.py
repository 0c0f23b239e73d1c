"""collections types made inside the optimized function or passed in (OrderedDict,
defaultdict, deque, the dict types' fromkeys, namedtuple and typing.NamedTuple classes),
differential against eager."""
import collections
import copy
import sys
import typing
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple

import pytest
import torch

import minidynamo
from helpers import Args, CountingBackend, check, same


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


# --- OrderedDict --------------------------------------------------------------------------
def test_ordereddict_made_inside_and_returned():
    def f(x, y):
        empty = OrderedDict()
        pairs = OrderedDict([("b", x), ("a", y)])
        kw = collections.OrderedDict(p=x * 2, q=3)
        both = OrderedDict({"z": y}, w=x)
        empty["k"] = x + 1
        pairs["c"] = y - 1
        return empty, pairs, kw, both, list(pairs), list(pairs.values())[0] + 1

    check(f, (t(), t()), kind="graph", graphs=1)


def test_ordereddict_move_to_end_and_popitem():
    def f(x, y):
        d = OrderedDict(a=x, b=y, c=x + y)
        d.move_to_end("a")
        d.move_to_end("c", last=False)
        first = d.popitem(last=False)
        last = d.popitem()
        d["n"] = first[1] * 2
        d.move_to_end("n", False)
        order = [k for k in d]
        backwards = list(reversed(d))
        return d, first, last, order, backwards, list(d.items())

    check(f, (t(), t()), kind="graph", graphs=1)


def test_ordereddict_equality_is_order_sensitive():
    def f(x, y):
        a = OrderedDict(a=x, b=y)
        b = OrderedDict(b=y, a=x)
        plain = {"b": y, "a": x}
        same_order = OrderedDict(a=x, b=y)
        return (a == b, a != b, a == plain, plain == b, a == same_order, dict(a) == dict(b),
                OrderedDict(a=1, b=2) == OrderedDict(b=2, a=1), x + 1)

    check(f, (t(), t()), kind="graph", graphs=1)


def test_ordereddict_copy_views_and_type():
    def f(x):
        d = OrderedDict(a=x, b=2)
        c = d.copy()
        c["d"] = x * 3
        return (c, d, type(c) is OrderedDict, isinstance(d, dict), type(d.keys()).__name__,
                "a" in d.keys(), len(d), d.get("b"), d.pop("b"), d.setdefault("e", x), d)

    check(f, t(), kind="graph", graphs=1)


def test_ordereddict_passed_in_is_read_and_written_back():
    def f(d, x):
        total = x
        for k, v in d.items():
            total = total + v
        d.move_to_end("a")
        d["new"] = total
        d.popitem(last=False)
        return total, list(d)

    check(f, (OrderedDict(a=t(), b=t(), c=t()), t()), kind="graph", graphs=1)


def test_ordereddict_passed_in_guards_key_order():
    def f(d):
        return [v * 2 for v in d.values()], list(d)

    a, b = t(), t()
    info = check(f, OrderedDict(a=a, b=b), OrderedDict(b=b, a=a), kind="graph", graphs=2, same_entry=False)
    assert len(info.entries) == 2


def test_ordereddict_passed_twice_is_one_object():
    def f(d, e, x):
        d["k"] = x
        return e["k"] + 1, d is e

    od = OrderedDict(a=1)
    check(f, Args(od, od, t()), kind="graph", graphs=1)


def test_ordereddict_errors_raise_like_eager():
    def missing(x):
        d = OrderedDict(a=x)
        d.move_to_end("zz")
        return d

    def empty(x):
        return OrderedDict().popitem(), x

    for fn in (missing, empty):
        check(fn, t(), kind="break", reason="exceptions")


def test_ordereddict_changed_while_iterating_raises_like_eager():
    def f(x):
        d = OrderedDict(a=x, b=x)
        for k in d:
            d.move_to_end("a")
        return d

    check(f, t(), kind="eager", reason="exceptions")


# --- defaultdict --------------------------------------------------------------------------
def make_zero():
    return torch.zeros(3)


def test_defaultdict_factories():
    def f(x):
        lists = defaultdict(list)
        lists["a"].append(x)
        lists["a"].append(x * 2)
        lists["b"].append(x + 1)
        counts = defaultdict(int)
        for k in ("u", "v", "u"):
            counts[k] += 1
        sets = defaultdict(set)
        sets["s"].add(3)
        dicts = defaultdict(dict)
        dicts["d"]["e"] = x
        lam = defaultdict(lambda: 7)
        user = defaultdict(make_zero)
        return lists, counts, sets, dicts, lam["m"], lam, user["z"] + x[0], user

    check(f, t(3), kind="graph", graphs=1)


def test_defaultdict_returned_keeps_its_factory():
    def f(x):
        d = defaultdict(list, {"a": [x]}, b=[x * 2])
        lam = defaultdict(lambda: x.new_zeros(()))  # a factory closing over nothing local... but x
        return d, d.default_factory, lam.default_factory is not None

    def g(x):
        d = defaultdict(make_zero)
        d["q"] += x
        return d, d.default_factory

    check(f, t(3), kind="graph", graphs=1)
    check(g, t(3), kind="graph", graphs=1)
    opt = minidynamo.optimize(backend=CountingBackend())(g)
    d, factory = opt(t(3))
    assert type(d) is defaultdict and d.default_factory is make_zero and factory is make_zero
    same(d["new"], torch.zeros(3))


def test_defaultdict_returned_with_a_lambda_factory():
    def f(x):
        d = defaultdict(lambda: [])
        d["a"].append(x + 1)
        return d

    check(f, t(), kind="graph", graphs=1)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    first, second = opt(t()), opt(t())
    assert first.default_factory() == [] and first.default_factory is not second.default_factory


def test_defaultdict_reads_that_do_not_call_the_factory():
    calls = []

    def factory():
        calls.append(1)
        return 0

    def f(x):
        d = defaultdict(factory)
        d["a"] = x + 1
        return d.get("b"), "b" in d, d.pop("c", 5), d.setdefault("e", 4), len(d), d

    check(f, t(), kind="graph", graphs=1)
    assert not calls


def test_defaultdict_without_factory_raises_like_eager():
    def f(x):
        d = defaultdict(None, a=x)
        return d["a"] + d["b"]

    check(f, t(), kind="eager", reason="exceptions")


def test_defaultdict_factory_must_be_callable():
    def f(x):
        return defaultdict(3), x

    check(f, t(), kind="break", reason="exceptions")


def test_defaultdict_copy_fromkeys_and_missing():
    def f(x):
        d = defaultdict(list)
        d["a"].append(x)
        c = d.copy()
        c["b"].append(x + 1)
        k = d.fromkeys(["p", "q"], x)
        direct = d.__missing__("m")
        return d, c, c.default_factory, k, k.default_factory, direct

    check(f, t(), kind="graph", graphs=1)


def test_defaultdict_passed_in_missing_key_is_written_back():
    def f(d, x):
        d["seen"].append(x)  # a new key: the factory's list, stored in the caller's dict
        d["old"].append(x * 2)
        return len(d["old"]), sorted(d)

    check(f, (defaultdict(list, old=[t()]), t()), kind="graph", graphs=1)


def test_defaultdict_passed_in_factory_is_guarded():
    def f(d):
        return d["missing"]

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    assert opt(defaultdict(int)) == 0
    assert opt(defaultdict(list)) == []
    assert opt(defaultdict(lambda: "s")) == "s"
    assert len(opt.cache_entries()) == 3 and all(e.kind in ("graph", "constant") for e in opt.cache_entries())


# --- fromkeys --------------------------------------------------------------------------------
def test_fromkeys_of_the_dict_types():
    def f(x):
        a = dict.fromkeys(["a", "b"], x)
        b = OrderedDict.fromkeys("xy")
        c = defaultdict.fromkeys(range(3), 0)
        shared = dict.fromkeys("pq", [])  # one list object under every key
        shared["p"].append(x)
        return a, b, c, c.default_factory, shared, shared["p"] is shared["q"], {}.fromkeys([1]), x + 1

    check(f, t(), kind="graph", graphs=1)


def test_fromkeys_bound_at_import():
    fk = OrderedDict.fromkeys

    def f(x):
        return fk(["a"], x * 2)

    check(f, t(), kind="graph", graphs=1)


def test_fromkeys_errors_raise_like_eager():
    def f(x):
        return dict.fromkeys([[1]], x)

    check(f, t(), kind="break", reason="exceptions")


# --- deque --------------------------------------------------------------------------------
def plain(value):
    """Deques (whose == on tensors is ambiguous) as (items, maxlen), containers recursively."""
    if isinstance(value, deque):
        return ("deque", [plain(v) for v in value], value.maxlen)
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def check_deques(fn, *args, kind="graph", graphs=1, reason=None):
    """check() for functions whose arguments or results hold deques of tensors: eager and
    optimized on copies of `args`, results and arguments compared through `plain`."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)

    def run(f):
        a = copy.deepcopy(args)
        try:
            return plain(f(*a)), None, plain(a)
        except Exception as e:  # noqa: BLE001 - compared with the eager one
            return None, e, plain(a)

    expected, error, after = run(fn)
    for _ in range(2):
        got, got_error, got_after = run(opt)
        assert (type(got_error), str(got_error)) == (type(error), str(error)), (got_error, error)
        same(got, expected)
        same(got_after, after, "arguments after the call")
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == [kind], [(e.kind, e.reason, e.break_reason) for e in entries]
    if kind == "graph":
        assert backend.calls == graphs
    if reason is not None:
        assert (entries[0].reason or entries[0].break_reason).category == reason
    return entries[0]


def test_deque_methods():
    def f(x, y):
        d = deque([x])
        d.append(y)
        d.appendleft(x * 2)
        d.extend([y + 1, x + 1])
        d.extendleft([1, 2])
        d.rotate()
        d.rotate(-2)
        d.rotate(9)
        first = d.popleft()
        last = d.pop()
        head = d[0]
        found = d.index(head), head in d, d.index(d[2], 2, -1), d.index(d[3], -2)
        del d[0]
        d.insert(1, x - 1)
        d.insert(-100, y * 3)
        d.reverse()
        items = [v for v in d]
        backwards = list(reversed(d))
        c = d.copy()
        c.clear()
        return d, first, last, len(d), found, items, backwards, d[0], d[-1], c, bool(c), bool(d)

    check_deques(f, t(), t())


def test_deque_methods_on_constants():
    def f(x):
        e = deque([3, 1, 2, 1, 4])
        e.remove(1)
        return (e, e.count(1), e.index(2), 5 in e, 4 in e, e.index(1, 1, 4), list(e) == [3, 2, 1, 4],
                x + len(e), e.maxlen)

    check(f, t(), kind="graph", graphs=1)


def test_deque_maxlen_trims_either_end():
    def f(x):
        d = deque(range(5), maxlen=3)
        d.append(x)
        left = deque([x, x + 1], 2)
        left.appendleft(x * 2)
        left.extendleft([7, 8])
        zero = deque([x], maxlen=0)
        zero.append(x)
        ext = deque(maxlen=2)
        ext.extend([x, x + 1, x + 2])
        return d, left, zero, ext, d.maxlen, type(d) is deque

    check_deques(f, t())


def test_deque_of_constants_compares_whole():
    def f(x):
        d = deque([1, 2, 3], maxlen=4)
        d.extend(d)  # extending by itself reads it first
        e = deque()
        e.append("a")
        return d, e, x + len(d)

    check(f, t(), kind="graph", graphs=1)


def test_deque_errors_raise_like_eager():
    def pop_empty(x):
        return deque().pop(), x

    def popleft_empty(x):
        return deque().popleft(), x

    def index_missing(x):
        return deque([1, 2]).index(3), x

    def insert_full(x):
        d = deque([1], maxlen=1)
        d.insert(0, x)
        return d

    def bad_maxlen(x):
        return deque([x], maxlen=-1)

    def out_of_range(x):
        return deque([x])[1]

    for fn in (pop_empty, popleft_empty, index_missing, insert_full, bad_maxlen):
        check_deques(fn, t(), kind="break", reason="exceptions")
    check_deques(out_of_range, t(), kind="eager", reason="exceptions")


def test_deque_slices_are_refused_like_eager():
    def f(x):
        return deque([x])[0:1]

    check_deques(f, t(), kind="eager", reason="exceptions")


def test_deque_changed_while_iterating_raises_like_eager():
    def f(x):
        d = deque([x, x])
        for item in d:
            d.append(item)
        return d

    check_deques(f, t(), kind="eager", reason="exceptions")


def test_deque_passed_in_is_read():
    def f(d, x):
        total = x
        for v in d:
            total = total + v
        return total, len(d), d[0] * 2, d.maxlen, d.index(d[0]), d[0] in d, list(reversed(d))

    check_deques(f, deque([t(), t()], maxlen=5), t())


def test_deque_passed_in_guards_length_and_maxlen():
    def f(d):
        return d[0] + 1, d.maxlen

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    for d in (deque([x]), deque([x], maxlen=3), deque([x, x])):
        same(opt(d), f(d))
    assert len(opt.cache_entries()) == 3


def test_deque_passed_in_is_changed_in_place():
    def f(d, x):
        y = x * 2
        d.append(y)
        d.appendleft(x)  # maxlen 2: the tensor appended first is dropped
        d.rotate()
        return y + 1, len(d)

    check_deques(f, deque([t()], maxlen=2), t())
    check_deques(f, deque([t(), t(), t()]), t())

    def g(d):
        d.clear()
        return len(d)

    check_deques(g, deque([1, 2]), kind="constant")


def test_deque_passed_in_changed_keeps_its_identity():
    def f(d, x):
        d.extend([x, x + 1])
        return d

    d = deque([t()], maxlen=3)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    got = opt(d, x)
    assert got is d and d.maxlen == 3 and len(d) == 3
    same(d[2], x + 1)


def test_deque_passed_twice_is_one_object():
    def f(a, b, x):
        a.append(x)
        return len(b), b[-1] * 2

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    for pair in ((deque([t()]),) * 2, (deque([t()]), deque([t()]))):
        expected_args = copy.deepcopy(pair)  # keeps the aliasing
        expected = f(*expected_args, x)
        got = opt(*pair, x)
        same(plain(got), plain(expected))
        same(plain(pair), plain(expected_args))
    assert len(opt.cache_entries()) == 2  # one object or two: guarded


def test_deque_returned_across_a_graph_break():
    def f(x):
        d = deque([x], maxlen=2)
        d.append(x + 1)
        minidynamo.graph_break()
        return d, len(d)

    check_deques(f, t(), kind="break")


# --- namedtuple and typing.NamedTuple -------------------------------------------------------------
Point = namedtuple("Point", "x y")
WithDefaults = collections.namedtuple("WithDefaults", ["a", "b", "c"], defaults=[1, 2])


class Pair(typing.NamedTuple):
    left: torch.Tensor
    right: torch.Tensor
    scale: float = 2.0

    def combined(self):
        return (self.left + self.right) * self.scale


class Vector(namedtuple("VectorBase", "u v")):  # a subclass without __slots__ (instances have a __dict__)
    def norm2(self):
        return self.u * self.u + self.v * self.v

    @property
    def total(self):
        return self.u + self.v


class Weird(namedtuple("WeirdBase", "p q")):
    __slots__ = ()

    def __eq__(self, other):  # a dunder of its own: its instances are not treated as plain tuples
        return True

    __hash__ = tuple.__hash__


def test_namedtuple_made_inside():
    def f(x, y):
        p = Point(x, y=y)
        q = Point(*[y, x])
        w = WithDefaults(x)
        a, b = p
        return (p, q, w, p.x + q.y, p[1] * 2, a - b, w.b, w.c, len(w), p._fields,
                isinstance(p, tuple), type(p) is Point, p == (x, y), Point._fields)

    check(f, (t(), t()), kind="graph", graphs=1)


def test_namedtuple_methods():
    def f(x, y):
        p = Point(x, y)
        r = p._replace(y=x * 3)
        made = Point._make([y, x])
        made2 = p._make((x, x))
        as_dict = p._asdict()
        fields = WithDefaults._field_defaults
        return (r, made, made2, as_dict, type(as_dict) is dict, fields, p.index(x), Point(1, 1).count(1),
                Point.__name__, p.__class__ is Point)

    check(f, (t(), t()), kind="graph", graphs=1)


def test_namedtuple_passed_in():
    def f(p, pair):
        return p.x * p.y, p._replace(x=p.y), p._asdict(), pair.combined(), pair.scale, pair, p[0]

    check(f, (Point(t(), t()), Pair(t(), t(), 3.0)), kind="graph", graphs=1)


T = typing.TypeVar("T")
if sys.version_info >= (3, 11):
    class Boxed(typing.NamedTuple, typing.Generic[T]):  # generic NamedTuple: 3.11+
        item: T
        count: int = 1
else:
    Boxed = namedtuple("Boxed", "item count", defaults=[1])


def test_generic_typing_namedtuple():
    def f(x):
        b = Boxed(x)
        return b, b.item * b.count, b._replace(count=3), type(b) is Boxed

    check(f, t(), kind="graph", graphs=1)


def test_typing_namedtuple_made_inside():
    def f(x, y):
        pair = Pair(x, right=y)
        doubled = pair._replace(scale=4.0)
        return pair, doubled.combined(), pair._asdict(), Pair._make([y, x, 1.0]), pair.scale

    check(f, (t(), t()), kind="graph", graphs=1)


def test_namedtuple_subclass_methods_and_properties():
    def f(x, y, given):
        v = Vector(x, y)
        return v, v.norm2(), v.total, given.norm2(), given.total, v._replace(u=y), type(v._replace(u=y))

    check(f, (t(), t(), Vector(t(), t())), kind="graph", graphs=1)


def test_namedtuple_subclass_instance_attribute_passed_in():
    def f(v):
        return v.extra * v.u

    given = Vector(t(), t())
    given.extra = 3
    check(f, Args(given), kind="graph", graphs=1)


def test_namedtuple_constructor_errors_raise_like_eager():
    def missing(x):
        return Point(x)

    def unknown(x):
        return Point(x, x, z=1)

    def bad_replace(x):
        return Point(x, x)._replace(z=1)

    def bad_make(x):
        return Point._make([x])

    for fn in (missing, unknown, bad_replace, bad_make):
        check(fn, t(), kind="break", reason="exceptions")


def test_namedtuple_with_a_dunder_of_its_own_is_not_made():
    def f(x):
        return Weird(x, x) == 3

    check(f, t(), kind="break", reason="call")


def test_namedtuple_class_made_inside():
    # collections.namedtuple inside is traced (the class made again per call where it
    # escapes: tests/test_make_test_remaining.py); typing.NamedTuple's functional form runs
    # the whole call eagerly (a new class on every call, named after the calling frame).
    def f(x):
        P = collections.namedtuple("P", "a b")
        p = P(x, x + 1)
        return tuple(p), P.__name__, P.__module__, type(p) is P, p.b

    def g(x):
        P = typing.NamedTuple("P", [("a", torch.Tensor)])
        return tuple(P(x)), P.__module__

    check(f, t(), kind="graph")
    info = check(g, t(), kind="eager", reason="construct")
    assert "new class on every call" in info.entries[0].reason.detail


def test_namedtuple_types_are_guarded():
    Other = namedtuple("Point", "x y")

    def f(p):
        return p.x + 1, type(p).__name__

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    a, b = t(), t()
    same(opt(Point(a, b)), f(Point(a, b)))
    same(opt(Other(a, b)), f(Other(a, b)))
    assert len(opt.cache_entries()) == 2


def test_namedtuple_patched_method_is_guarded():
    Local = namedtuple("Local", "a b")

    def f(p):
        return p._replace(a=p.b)

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x, y = t(), t()
    same(opt(Local(x, y)), Local(y, y))
    original = Local._replace
    try:
        Local._replace = lambda self, **kw: "patched"
        assert opt(Local(x, y)) == "patched"
    finally:
        Local._replace = original


def test_namedtuple_constant_folds():
    def f(x):
        p = Point(1, 2)
        return x + p.x, p == Point(1, 2), hash(p) == hash((1, 2)), {p: 1}[Point(1, 2)], repr(p)

    check(f, t(), kind="graph", graphs=1)


@pytest.mark.parametrize("fields", ["a b", ["a", "b"], "a, b"])
def test_namedtuple_returned_rebuilt(fields):
    P = namedtuple("P", fields)

    def f(x):
        return P(x, x * 2), [P(1, 2)]

    check(f, t(), kind="graph", graphs=1)



# --- across graph breaks ------------------------------------------------------------------------
def test_collections_cross_a_graph_break():
    def f(x, y):
        od = OrderedDict(a=x, b=y)
        dd = defaultdict(list)
        dd["k"].append(x)
        p = Point(x, y)
        minidynamo.graph_break()
        od.move_to_end("a")  # the resume function changes what the break rebuilt
        dd["new"].append(y)
        return od, dd, dd.default_factory, p._replace(x=y), p.x + 1

    check(f, (t(), t()), kind="break", reason="graph_break")


def test_defaultdict_with_a_lambda_factory_crosses_a_graph_break():
    def f(x):
        d = defaultdict(lambda: 0)
        d["a"] += 1
        print("between")
        d["b"] += 2
        return d, x + d["a"]

    check(f, t(), kind="break", reason="side_effect")


def test_defaultdict_passed_twice_is_one_object():
    def f(a, b, x):
        a["new"].append(x * 2)
        return len(b["new"]), a is b

    d = defaultdict(list)
    check(f, Args(d, d, t()), kind="graph", graphs=1)


# --- Counter ----------------------------------------------------------------------------------
def test_counter_made_inside():
    def f(x):
        c = Counter("abracadabra")
        c.update(["a", "z"])
        c.update({"z": 2}, q=1)
        c.subtract("aa")
        c.subtract({"q": 3})
        c["new"] += 2
        del c["missing"]  # a Counter forgets a missing key quietly
        missing = c["nope"]
        return (c, missing, "nope" in c, c.most_common(2), sorted(c.elements()), c.total(), len(c),
                Counter(a=1) == Counter(a=1, b=0), Counter(a=1) == {"a": 1, "b": 0}, x * c["a"])

    check(f, t(), kind="graph", graphs=1)


def test_counter_of_tensors_and_equality():
    def f(x, y):
        c = Counter({"a": x})
        c.update({"a": y, "b": y})  # counts added: tensor nodes
        d = c.copy()
        return c, d, type(d), Counter() == Counter(a=0), c["zz"], x + 1

    check(f, (t(), t()), kind="graph", graphs=1)


def test_counter_passed_in_is_updated_in_place():
    def f(c, x):
        c.update(["a", "b", "a"])
        c["t"] = x + 1
        return c["a"], c["never"]

    check(f, (Counter(a=1, z=5), t()), kind="graph", graphs=1)


def test_counter_fromkeys_raises_like_eager():
    def f(x):
        return Counter.fromkeys("ab"), x

    check(f, t(), kind="break", reason="exceptions")


def test_namedtuple_made_inside_class_patched_after_the_trace():
    Local = namedtuple("Local", "a b")

    def f(x):
        p = Local(x, x + 1)
        return p.b, p._replace(a=2)

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    same(opt(x), f(x))
    original = Local.b
    try:
        Local.b = property(lambda self: "patched")
        assert opt(x)[0] == "patched" == f(x)[0]
    finally:
        Local.b = original
    same(opt(x), f(x))


class Shouting(tuple):
    def __getitem__(self, i):  # a tuple subclass with a dunder of its own is not a plain tuple
        return 42


def test_tuple_subclass_with_its_own_dunders_passed_in():
    def f(s, x):
        return s[0], x + 1

    check(f, (Shouting((t(), t())), t()), kind="graph", graphs=1)


def test_sys_version_info_is_a_constant():
    def f(x):
        newer = sys.version_info >= (3, 11)
        return (x + 1 if sys.version_info[:2] >= (3, 8) else x, newer, sys.version_info.major,
                repr(sys.version_info), sys.flags.optimize)

    check(f, t(), kind="graph", graphs=1)


def test_deque_item_assignment():
    import collections

    def f(x):
        d = collections.deque([x, x + 1, 3])
        d[1] = x * 5
        d[-1] = "last"
        return list(d)

    check(f, torch.randn(2), kind="graph")


def test_deque_passed_in_item_assignment_is_written_back():
    import collections

    def f(d, x):
        d[0] = "new"  # (a tensor in a deque argument: check() cannot compare deques of tensors)
        return x * 2

    check(f, (collections.deque([1, 2], maxlen=3), torch.randn(2)), kind="graph")


# --- type hints made in the trace ------------------------------------------------------------------

def test_a_union_of_generic_aliases_in_a_cast_is_traced():
    """`cast(Sequence[Tensor] | Sequence[int], v)` (torch.autograd's own style): the union is
    a constant made from constants, the cast returns its value."""
    from collections.abc import Sequence

    def f(x):
        hint = Sequence[torch.Tensor] | Sequence[int]
        v = typing.cast(hint, (x,))
        return v[0] + 1, typing.get_args(hint) == (Sequence[torch.Tensor], Sequence[int])

    check(f, (torch.randn(3),), kind="graph")
