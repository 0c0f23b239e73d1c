"""`match` statements traced (MATCH_SEQUENCE / MATCH_MAPPING / MATCH_KEYS / MATCH_CLASS /
GET_LEN, 3.10's COPY_DICT_WITHOUT_KEYS): each pattern kind taken and missed, against
eager — results, the case chosen, exceptions of bad patterns — one graph per case."""
import collections
import dataclasses

import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Box:  # no __match_args__: keyword patterns only
    def __init__(self, a):
        self.a = a


class ListMatchArgs:
    __match_args__ = ["a"]  # must be a tuple: matching raises TypeError
    a = 1


class Celsius(float):  # inherits float's "match the subject itself"
    pass


def sequences_and_mappings(x, v):
    match v:
        case [a, b]:
            return x + a + b
        case {"a": a, **rest}:
            return x * a, rest
        case (a, *rest):
            return x - a - len(rest)
        case str() as s:
            return x, s
        case _:
            return x * 0


def test_sequence_and_mapping_patterns():
    check(sequences_and_mappings, (torch.randn(4), [1, 2]), (torch.randn(4), {"a": 3}),
          (torch.randn(4), {"a": 3, "b": 4}), (torch.randn(4), (1, 2, 3)), (torch.randn(4), {"b": 1}),
          (torch.randn(4), collections.deque([5])), kind="graph", same_entry=False)


def test_string_is_not_a_sequence():
    check(sequences_and_mappings, (torch.randn(4), "ab"), kind="constant")


def classes(x, v):
    match v:
        case Point(0, y):
            return x + y
        case Point(x=px, y=py):
            return x * px + py
        case bool(b):
            return x + 1, "bool", b
        case int(n) if n > 2:
            return x * n
        case float(f):
            return x / f
        case Box(a=a):
            return x - a
        case _:
            return None


def test_class_patterns():
    check(classes, (torch.randn(4), Point(0, 5)), (torch.randn(4), Point(1, 2)), (torch.randn(4), True),
          (torch.randn(4), 3), (torch.randn(4), 2.5), (torch.randn(4), Celsius(4.0)), (torch.randn(4), Box(7)),
          kind="graph", same_entry=False)
    check(classes, (torch.randn(4), 1), kind="constant")  # int(n) with n <= 2 falls through


def test_tensors_matched_by_shape_of_the_container():
    def f(x, v):
        match v:
            case [t]:
                return x + t
            case [t, u]:
                return x * t + u

    check(f, (torch.randn(4), [torch.ones(4), torch.zeros(4)]), (torch.randn(4), (torch.ones(4),)),
          kind="graph", same_entry=False)


def test_dispatch_on_a_config_dict():
    def f(x, cfg):
        match cfg:
            case {"kind": "add", "val": v}:
                return x + v
            case {"kind": "mul", "val": v}:
                return x * v
            case {"kind": k}:
                return x - 1, k

    check(f, (torch.randn(4), {"kind": "add", "val": 2}), (torch.randn(4), {"kind": "mul", "val": 3}),
          (torch.randn(4), {"kind": "other"}), kind="graph", same_entry=False)


def test_a_changed_match_args_recompiles():
    class P:
        __match_args__ = ("a",)

        def __init__(self):
            self.a, self.b = 1, 10

    def f(x, p):
        match p:
            case P(v):
                return x + v

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = torch.randn(3)
    same_outcome(f, opt, x, P())
    P.__match_args__ = ("b",)
    same_outcome(f, opt, x, P())
    assert backend.calls == 2


def test_bad_class_patterns_raise_as_eager():
    def too_many(x, v):
        match v:
            case Point(a, b, c):
                return x + a + b + c

    def not_a_tuple(x, v):
        match v:
            case ListMatchArgs(a):
                return x + a

    for fn, v in ((too_many, Point(1, 2)), (not_a_tuple, ListMatchArgs())):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        same_outcome(fn, opt, torch.randn(2), v)
