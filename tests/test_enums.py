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


SCALES = {Color.RED: 2.0, Color.GREEN: 3.0}


def test_members_as_dict_keys_and_the_class_iterated():
    """A plain Enum's members hash by name and compare by identity: dict keys held as the
    members themselves (a global table, a dict passed in, one made inside); iterating the
    class gives its members in definition order."""
    def f(x, v, table):
        c = Color(v)
        made = {m: i for i, m in enumerate(Color)}
        return x * SCALES[c] + table.get(c, 0) + made[c], [m.name for m in Color], c in table

    check(f, (torch.ones(2), 1, {Color.RED: 5}), (torch.ones(2), 2, {Color.RED: 5}), kind="graph",
          same_entry=False)


def test_mixin_members_as_dict_keys_by_value():
    """A `str` mixin's member equals its value (`Mode.TRAIN == "train"`): a key by value, found
    by the string too, as in eager."""
    def f(x, table):
        return x + table[Mode.TRAIN] + table["eval"] + table["train"]

    check(f, (torch.ones(2), {Mode.TRAIN: 1, "eval": 2}), kind="graph")
