"""Dataclasses hashed by value (frozen=True, unsafe_hash=True: the `__hash__`/`__eq__`
dataclass generated) as dict keys and set members, made in the trace or passed in:
differential against eager (results, exceptions, the dicts after the call), graph counts,
and the guards (another key, a patched __hash__, recompiles)."""
import collections
import dataclasses
import enum
import typing

import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


@dataclasses.dataclass(frozen=True)
class K:
    a: int
    b: str = "x"


@dataclasses.dataclass(frozen=True)
class J:  # the same fields as K: the same hashes, yet never equal to a K
    a: int
    b: str = "x"


@dataclasses.dataclass(unsafe_hash=True)
class U:
    a: int
    note: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: K
    pair: tuple = (1, 2)


@dataclasses.dataclass
class Unhashable:  # eq=True, not frozen: dataclass sets __hash__ to None
    a: int


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass(frozen=True)
class Tagged:
    color: Color
    n: float = 0.5


@dataclasses.dataclass(frozen=True)
class Holding:
    t: torch.Tensor


@dataclasses.dataclass(frozen=True)
class OwnHash:
    a: int

    def __hash__(self):
        return hash(self.a)


class Plain:
    def __init__(self, a):
        self.a = a

    def __hash__(self):
        return hash(self.a)

    def __eq__(self, other):
        return isinstance(other, Plain) and other.a == self.a


class NT(typing.NamedTuple):
    a: int
    b: str = "x"


PT = collections.namedtuple("PT", "a b")


def _x():
    return torch.randn(3)


# --- made in the trace --------------------------------------------------------------------
def test_dict_and_set_of_frozen_dataclasses():
    def fn(x):
        d = {K(1): 2, K(2): 3}
        s = {K(1), K(1, "y")}
        return x * d[K(1)] + len(s)

    check(fn, (_x(),), kind="graph", graphs=1)


def test_lookup_in_and_get_by_an_equal_object():
    def fn(x):
        d = {K(1): 2.0, K(2, "z"): 3.0}
        found = K(2, "z") in d, K(2) in d, d.get(K(3), -1.0), d[K(2, "z")]
        return x * found[3] + found[2], found[:2]

    check(fn, (_x(),), kind="graph", graphs=1)


def test_equal_key_keeps_the_first_object_and_the_last_value():
    def fn(x):
        first = K(1)
        d = {first: 1}
        d[K(1)] = 5
        key = next(iter(d))
        return x * d[key], key is first, len(d), list(d.values())

    check(fn, (_x(),), kind="graph", graphs=1)


def test_set_dedup_iteration_and_add():
    def fn(x):
        s = {K(3), K(1), K(3), K(2, "y")}
        s.add(K(1))
        s.add(K(4))
        order = [k.a for k in s]
        return x + len(s), order, K(2, "y") in s, K(2) in s

    check(fn, (_x(),), kind="graph", graphs=1)


def test_set_and_dict_returned_are_rebuilt():
    def fn(x):
        s = {K(i % 3) for i in range(5)}
        d = {K(i, "k"): i for i in range(3)}
        return x + 1, s, d

    info = check(fn, (_x(),), kind="graph", graphs=1)
    s, d = info.opt(_x())[1:]
    assert type(next(iter(s))) is K and K(2) in s and d[K(1, "k")] == 1


def test_dict_comprehension_keyed_by_dataclass():
    def fn(x, n: int):
        d = {K(i): x * i for i in range(n)}
        return d[K(n - 1)] + d[K(0)], len(d)

    check(fn, (_x(), 4), kind="graph", graphs=1)


def test_mixed_with_ints_tuples_and_other_classes():
    def fn(x):
        d = {K(1): "k", 1: "one", (1, "x"): "tuple", J(1): "j"}
        d[1] = "int again"
        s = {K(1), (1, "x"), J(1), 1}
        return x + len(d) + len(s), d[K(1)], d[1], d[(1, "x")], d[J(1)], list(d.values())

    check(fn, (_x(),), kind="graph", graphs=1)


def test_missing_key_raises_keyerror_as_eager():
    def fn(x):
        d = {K(1): 2}
        return x * d[K(2)]

    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend)
    same_outcome(fn, opt, _x())
    assert opt.cache_entries()[0].reason.category == "exceptions"  # the trace found the KeyError


def test_unsafe_hash_compare_false_field_and_nested_keys():
    def fn(x):
        d = {U(1, "first"): 1, Outer(K(2)): 2, Outer(K(2), (3,)): 3}
        d[U(1, "other note")] = 10  # note is not compared: the same key
        return x * d[U(1)] + d[Outer(K(2), (1, 2))], len(d)

    check(fn, (_x(),), kind="graph", graphs=1)


def test_enum_and_float_fields():
    def fn(x):
        d = {Tagged(Color.RED): 1, Tagged(Color.BLUE, 1.5): 2, Tagged(Color.RED, 0.5): 3}
        return x * d[Tagged(Color.RED)], len(d)

    check(fn, (_x(),), kind="graph", graphs=1)


def test_unsafe_hash_key_written_after_hashing_declines():
    def fn(x):
        k = U(1)
        d = {k: 1}
        k.a = 2
        return x + (U(1) in d), (U(2) in d)

    info = check(fn, (_x(),), kind="eager", reason="construct")
    assert "changed after it was hashed" in str(info.entries[0].reason)


# --- passed in ----------------------------------------------------------------------------
def test_passed_in_object_as_key():
    def fn(x, k):
        d = {K(1): 2.0, K(2): 3.0}
        return x * d.get(k, 0.5)

    info = check(fn, (_x(), K(1)), (_x(), K(1)), kind="graph", graphs=1)
    assert info.opt(torch.ones(1), K(2)).item() == 3.0  # another field value: recompiled
    assert info.opt(torch.ones(1), K(2, "q")).item() == 0.5
    assert info.graphs == 3


def test_passed_in_dict_keyed_by_frozen_dataclasses():
    def fn(x, table):
        return x * table[K(1)] + table.get(K(9), 0), len(table)

    opt, backend = minidynamo.optimize(fn, backend=(b := CountingBackend())), b
    t1 = {K(1): 2.0, K(2, "y"): 3.0}
    same_outcome(fn, opt, torch.ones(2), t1)
    same_outcome(fn, opt, torch.ones(2), {K(1): 2.0, K(2, "y"): 3.0})  # equal keys: the entry serves
    assert backend.calls == 1
    same_outcome(fn, opt, torch.ones(2), {K(1): 2.0, K(9): 3.0})  # another key: recompiles
    assert backend.calls == 2
    same_outcome(fn, opt, torch.ones(2), {K(2): 2.0, K(9): 3.0})  # K(1) missing: KeyError as eager
    same_outcome(fn, opt, torch.ones(2), {J(1): 2.0, K(9): 3.0})  # a J is no K


def test_passed_in_dict_written_with_an_equal_key():
    def fn(x, table):
        table[K(1)] = table[K(1)] + 1
        table[K(5)] = 0
        return x + table[K(1)]

    t_eager, t_opt = {K(1): 1, K(2): 2}, {K(1): 1, K(2): 2}
    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend)
    torch.testing.assert_close(opt(torch.ones(1), t_opt), fn(torch.ones(1), t_eager))
    assert list(t_opt.items()) == list(t_eager.items())
    assert all(type(k) is K for k in t_opt)
    assert backend.calls == 1


def test_passed_in_key_fields_guarded_by_type():
    def fn(x, table):
        return [(k.a, v) for k, v in table.items()], x + table[K(1)]

    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend)
    for table in ({K(1): 2}, {K(1): 2}, {K(True): 2}, {K(1.0, "x"): 2}):  # all equal keys, other fields
        got, expected = opt(torch.ones(1), table), fn(torch.ones(1), table)
        assert got[0] == expected[0] and [type(a) for a, _ in got[0]] == [type(a) for a, _ in expected[0]]
    assert backend.calls == 3


def test_patched_hash_recompiles():
    @dataclasses.dataclass(frozen=True)
    class P:
        a: int

    def fn(x):
        return x * len({P(1), P(1)})

    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend)
    same_outcome(fn, opt, torch.ones(1))
    original = P.__hash__
    P.__hash__ = lambda self: id(self)
    try:  # the user's own __hash__ now: eager's answer (two members), never the stale graph
        same_outcome(fn, opt, torch.ones(1))
    finally:
        P.__hash__ = original
    assert backend.calls == 1


# --- declined, or already modelled -----------------------------------------------------------
def test_unhashable_dataclass_raises_typeerror_as_eager():
    def fn(x):
        return x + len({Unhashable(1): 1})

    opt = minidynamo.optimize(fn, backend=CountingBackend())
    e = same_outcome(fn, opt, _x())
    assert isinstance(e, TypeError)


def test_tensor_field_declines():
    def fn(x):
        return x + len({Holding(x): 1})

    opt = minidynamo.optimize(fn, backend=CountingBackend())
    same_outcome(fn, opt, _x())
    assert "its field 't' is" in str(opt.cache_entries()[0].reason)


def test_user_hash_still_declines_cleanly():
    def own(x):
        return x + len({OwnHash(1), OwnHash(1)})

    def plain(x):
        return x + len({Plain(1), Plain(1)})

    for fn in (own, plain):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        same_outcome(fn, opt, _x())
        assert "defines its own __hash__ or __eq__" in str(opt.cache_entries()[0].reason)


def test_namedtuple_keys_unchanged():
    def fn(x):
        d = {NT(1): 1, PT(1, "x"): 2, (1, "x"): 3}
        return x + d[NT(1, "x")], len(d)

    check(fn, (_x(),), kind="graph", graphs=1)
