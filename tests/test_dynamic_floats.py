"""Float arguments under automatic dynamic shapes, as torch.compile's (its floats are not
specialised either): a float that changes between calls is traced as a symbolic float
from then on, so new values reuse the entry; what the trace decides with it (a branch,
`int(a)`, formatting it) is a guard; infinities, NaN and zeros stay constants. Differential
against eager."""
import math

import pytest
import torch

import minidynamo
from helpers import CountingBackend


def _run(f, values, dynamic=None):
    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend, dynamic=dynamic)
    for a in values:
        x = torch.randn(3)
        expected, got = f(x, a), opt(x, a)
        for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                        got if isinstance(got, tuple) else (got,)):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e, equal_nan=True)
            else:
                assert type(g) is type(e) and repr(g) == repr(e), (a, g, e)
    return opt, backend


def scaled(x, a):
    return x * a + math.sqrt(2.0), a * 2, a


def test_a_changing_float_is_traced_once_more_then_reused():
    opt, backend = _run(scaled, [1.5, 2.5, 3.5, -7.25, 1e-3, 2.5])
    assert backend.calls == 2 and len(opt.cache_entries()) == 2


def branches(x, a):
    if a > 2.0:
        return x * a
    return x - a


def test_a_branch_on_the_float_is_a_guard():
    opt, backend = _run(branches, [1.5, 2.5, 3.5, 0.5, 9.0, 1.0])
    assert backend.calls == 3  # the constant first, then one per side


def specialises(x, a):
    return x * int(a), f"{a:.2f}", round(a, 1)


def test_what_needs_the_value_specialises_it():
    _run(specialises, [1.5, 2.5, 3.25, 2.5])


@pytest.mark.parametrize("odd", [float("inf"), float("-inf"), float("nan"), -0.0, 0.0])
def test_infinities_nan_and_zeros_stay_exact(odd):
    def f(x, a):
        return x + a, str(a), math.copysign(1.0, a) if a == a else 0.0

    _run(f, [1.5, 2.5, odd, odd, 3.5, odd])


def test_dynamic_false_specialises_every_value():
    opt, backend = _run(scaled, [1.5, 2.5, 3.5], dynamic=False)
    assert backend.calls == 3


def test_a_symbolic_float_reaches_torch_backends():
    def f(x, a):
        return (x * a).sin()

    opt = minidynamo.optimize(f, backend="aot_eager")
    for a in (1.5, 2.5, 3.5):
        x = torch.randn(3)
        torch.testing.assert_close(opt(x, a), f(x, a))
    assert len(opt.cache_entries()) == 2
