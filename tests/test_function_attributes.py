"""Attributes of functions made inside the optimized function: `functools.wraps` in a
decorator defined there, marks set with `fn.attr = ...` or `setattr`, `__dict__`, a
`@contextmanager` made inside; and `setattr`/`delattr` builtins where the object models the
write. Compared with eager: results, the functions returned (name, qualname, doc, wrapped,
attributes), and graph counts."""
from __future__ import annotations

import contextlib
import functools

import torch

import minidynamo
from helpers import CountingBackend, check


def t():
    return torch.randn(4, generator=torch.Generator().manual_seed(0))


def _twice(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args) * 2
    return wrapper


def test_functools_wraps_in_a_decorator_made_inside():
    def f(x):
        def deco(fn):
            @functools.wraps(fn)
            def w(*a):
                return fn(*a) * 2
            return w

        @deco
        def inner(y):
            "the inner doc"
            return y + 1
        return inner(x), inner.__name__, inner.__doc__, inner.__wrapped__(x)

    check(f, t(), kind="graph")


def test_a_decorated_function_made_inside_escapes_with_its_attributes():
    def f(x):
        @_twice
        def inner(y):
            "doc"
            return y - 1
        inner.marked = x.shape[0]
        setattr(inner, "by_setattr", "yes")
        return inner

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(2):
        got, want = opt(t()), f(t())
        for attr in ("__name__", "__qualname__", "__doc__", "__module__", "marked", "by_setattr"):
            assert getattr(got, attr) == getattr(want, attr), attr
        assert got.__wrapped__.__name__ == want.__wrapped__.__name__
        assert vars(got).keys() == vars(want).keys()
        torch.testing.assert_close(got(t()), want(t()))
    assert backend.calls == 0  # no tensor work: a constant entry, no graph


def test_dict_and_delattr_of_a_function_made_inside():
    def f(x):
        def g():
            return 1
        g.__dict__.update({"a": 2})
        g.b = 3
        delattr(g, "b")
        return x * (g.a + g() + len(g.__dict__)), hasattr(g, "b")

    check(f, t(), kind="graph")


def test_a_contextmanager_made_inside_a_function_made_inside():
    def f(x):
        def factory():
            @contextlib.contextmanager
            def scaled():
                yield 3
            return scaled
        with factory()() as k:
            return x * k

    check(f, t(), kind="graph")


def test_setting_a_functions_code_still_breaks():
    def f(x):
        def g():
            return 1
        g.__code__ = (lambda: 2).__code__
        return x * g()

    check(f, t(), kind="eager", reason="side_effect")  # (the function made inside is live at the write)
