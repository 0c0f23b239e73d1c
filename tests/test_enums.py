"""Enum members looked up in the trace: `Color(2)` (a value), `Color['RED']` (a name), both
the member itself (held by identity); calls that may do more than look up (a value no
member has: `_missing_`, Flag's composed members) break where eager would run them."""
import enum

import pytest
import torch

from helpers import check


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Mode(str, enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class Perm(enum.Flag):
    R = 4
    W = 2


class Lenient(enum.Enum):
    A = 1

    @classmethod
    def _missing_(cls, value):
        print("missing", value)
        return cls.A


def by_value(x, v):
    c = Color(v)
    return x * c.value, c is Color.GREEN, c.name, Mode("eval") is Mode.EVAL


def by_name(x, name):
    return x + Color[name].value, Color[name] is Color.RED, Mode["TRAIN"].value


@pytest.mark.parametrize("v", [1, 2])
def test_member_by_value(v):
    check(by_value, (torch.ones(2), v), kind="graph")


@pytest.mark.parametrize("name", ["RED", "GREEN"])
def test_member_by_name(name):
    check(by_name, (torch.ones(2), name), kind="graph")


def test_a_value_no_member_has_raises_as_eager():
    def f(x):
        return x * Color(3).value

    check(f, torch.ones(2), kind="break", reason="call")


def test_missing_hook_and_composed_flags_run_as_eager():
    def f(x):
        return x + Lenient(9).value, Perm(6) == (Perm.R | Perm.W)

    check(f, torch.ones(2), kind="break")
