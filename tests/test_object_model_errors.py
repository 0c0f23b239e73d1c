"""Exceptions the object model raises, caught by a try of the traced code: `del o.missing`
(AttributeError), a field set on a frozen dataclass (FrozenInstanceError from its
`__setattr__`), a Python function called with arguments that do not bind (TypeError with
CPython's message). Differential against eager; one graph, as torch.compile keeps."""
import dataclasses

import pytest
import torch

from helpers import check


def t():
    return torch.randn(4)


class Plain:
    pass


class WithProperty:
    @property
    def p(self):
        return 1


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: float = 2.0


def test_deleting_a_missing_attribute():
    def f(x, log):
        o = Plain()
        o.here = 1
        del o.here
        try:
            del o.here
        except AttributeError as e:
            log.append((type(e).__name__, str(e), e.args, e.name, e.obj))
            x = x + 1
        return x

    check(f, (t(), []), kind="graph", graphs=1)


def test_deleting_a_property_without_deleter_runs_eagerly():
    def f(x, log):
        o = WithProperty()
        try:
            del o.p
        except AttributeError as e:
            log.append(str(e))
        return x + 1

    check(f, (t(), []), kind="eager")


def test_setting_a_field_of_a_frozen_dataclass():
    def f(x, log):
        p = Frozen(1)
        try:
            p.a = 5
        except dataclasses.FrozenInstanceError as e:
            log.append((type(e).__name__, str(e), isinstance(e, AttributeError)))
            x = x * p.a
        try:
            p.c = 5
        except AttributeError as e:
            log.append(str(e))
            x = x + p.b
        return x, p.a

    check(f, (t(), []), kind="graph", graphs=1)


def test_frozen_dataclass_passed_in():
    def f(x, p, log):
        try:
            p.b = 1.5
        except AttributeError as e:
            log.append(str(e))
        return x + p.b

    check(f, (t(), Frozen(3), []), kind="graph", graphs=1)


def two(a, b):
    return a + b


def kwonly(a, *, c, d=1):
    return a + c + d


def defaults(a, b=1, /, c=2):
    return a + b + c


class Calc:
    def add(self, a, b):
        return a + b


CALLS = {
    "missing_one": lambda x: two(x),
    "missing_two": lambda x: two(),
    "too_many": lambda x: two(x, 1, 2),
    "unexpected_keyword": lambda x: two(x, c=1),
    "multiple_values": lambda x: two(x, a=1),
    "missing_keyword_only": lambda x: kwonly(x),
    "positional_only_by_keyword": lambda x: defaults(x, b=2),
    "too_many_with_defaults": lambda x: defaults(x, 1, 2, 3),
    "method": lambda x: Calc().add(x),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_that_does_not_bind_is_caught(name):
    call = CALLS[name]

    def f(x, log):
        try:
            call(x)
        except TypeError as e:
            log.append(str(e))
            x = x - 1
        return x * 2

    check(f, (t(), []), kind="graph", graphs=1)


def test_a_call_that_does_not_bind_leaves_the_function():
    def f(x):
        return two(x + 1)

    # A break at the call: it runs natively and raises eager's error.
    check(f, (t(),), kind="break", reason="exceptions")
