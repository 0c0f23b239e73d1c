"""Python constructs whose modelling once gave results that differed from CPython's: each
test runs the function eagerly and optimized and compares what comes out."""
import copy

import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


# --- set iteration order ------------------------------------------------------------
# CPython iterates a set in its hash table's order, which depends on how it was made.

def test_set_literal_of_strings_iterates_as_cpython():
    def f(x):
        s = {"weight", "bias", "running_mean", "running_var", "num_batches", "alpha", "beta"}
        s.add("eta")
        s.discard("bias")
        return x + 1, list(s), str(s)
    check(f, torch.randn(3), kind="graph")


def test_set_operators_iterate_as_cpython():
    def f(x):
        a = {1, 9, 17, 25}
        b = {33, 41}
        u = a | b
        d = {k: 0 for k in [33, 1, 65, 9, 17, 97]}
        return (x * 2, list(u), list(a - {9}), list(a.union(b)), list(set([17, 1, 9])), list(set(d)),
                list(copy.deepcopy(set(d))), list(set(d).copy()), list(set(d).intersection([97, 33, 1])))
    check(f, torch.randn(3), kind="graph")


def test_set_inplace_operators_change_the_set_itself():
    def f(x):
        s = {1, 2}
        t = s
        s |= {9, 17}
        s -= {2}
        s &= {1, 9, 17, 33}
        s ^= {40}
        return x + 1, t, s is t, list(t)
    check(f, torch.randn(3), kind="graph")


def test_set_passed_in_is_guarded_on_its_order():
    def f(x, s):
        return x + 1, list(s)
    letters = "abcdefghij"
    forward, backward = set(), set()
    for c in letters:
        forward.add(c)
    for c in reversed(letters):
        backward.add(c)
    assert forward == backward
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = torch.randn(3)
    ints_a, ints_b = {1, 9}, set()
    for v in (9, 1):
        ints_b.add(v)
    assert list(ints_a) != list(ints_b)
    for s in (forward, backward, ints_a, ints_b, forward):
        same_outcome(f, opt, x, s)


def test_set_made_from_a_passed_in_set_is_not_iterated_in_the_trace():
    def f(x, s):
        return x + 1, list(s | {"z"}), sorted(s)
    s = set("abcdefgh")
    check(f, (torch.randn(3), s), kind="eager", reason="construct")


def test_set_handed_back_iterates_as_cpython():
    def f(x):
        s = {"alpha", "beta", "gamma", "delta", "eps", "zeta"}
        s.add("eta")
        return x + 1, s, frozenset(s)
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = torch.randn(3)
    for _ in range(2):
        got, want = opt(x), f(x)
        assert list(got[1]) == list(want[1]) and list(got[2]) == list(want[2])


# --- ints beyond int64 ----------------------------------------------------------------
# The shape environment folds an operation on known values whose result passes int64 to
# int_oo (a bound): such a result is computed on the Python values instead.

def test_int_argument_beyond_int64_changing_between_calls():
    def f(x, n):
        return x + (n % 7), float(n), n ** 2 % 97, n.bit_length()
    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for n in [7, -(2 ** 64), 2 ** 70, 9, 2 ** 63, -(2 ** 63)]:
        same_outcome(f, opt, torch.randn(3), n)
    assert backend.calls >= 2


def test_int_argument_beyond_int64_under_dynamic_true():
    def f(x, n):
        return x * 2, n * n, float(n) + 1
    opt = minidynamo.optimize(f, backend=CountingBackend(), dynamic=True)
    for n in [2 ** 70, -(2 ** 64), 5]:
        same_outcome(f, opt, torch.randn(3), n)


def test_power_of_a_specialised_int_past_int64_is_computed_in_python():
    # float(n) pins n to its value; the environment folds 2**40 ** 2 to its int_oo bound.
    def f(x, n):
        return x + 1, float(n), n ** 2, (n * n) ** 2, -(n ** 3)
    opt = minidynamo.optimize(f, backend=CountingBackend())
    for n in [7, 2 ** 40, -(2 ** 62), 3]:
        same_outcome(f, opt, torch.randn(3), n)


# --- builtins shadowed by a global ----------------------------------------------------
# A builtin read by name is guarded on no global of that name: one defined after tracing
# (`len = ...` at module level, or by the traced function itself) recompiles.

def test_builtin_shadowed_by_a_global_defined_later_recompiles():
    g = {}
    exec("def f(x):\n    return x * len([1, 2]) + abs(-3)\n", g)
    f = g["f"]
    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = torch.randn(3)
    same_outcome(f, opt, x)
    g["len"] = lambda s: 10
    same_outcome(f, opt, x)
    g["abs"] = lambda v: 100
    same_outcome(f, opt, x)
    del g["len"], g["abs"]
    same_outcome(f, opt, x)
    assert backend.calls == 3


def test_builtin_shadowed_by_the_traced_function_itself():
    g = {}
    exec("def f(x):\n    global len\n    r = x * len([1, 2])\n    len = lambda s: 10\n    return r\n", g)
    f = g["f"]
    opt = minidynamo.optimize(f, backend=CountingBackend())
    g_eager = {}
    exec("def f(x):\n    global len\n    r = x * len([1, 2])\n    len = lambda s: 10\n    return r\n", g_eager)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(opt(x), g_eager["f"](x))
