"""Constructs that run eagerly: the entry kind is "eager", the results are eager's,
side effects happen exactly once per call, the fallback is cached under its guards, and
fullgraph=True refuses with the category and the user's file:line."""
import json  # noqa: F401 - loaded, so the traced `import json` runs no code
import time
import zlib

import pytest
import torch

import minidynamo
from helpers import CountingBackend, assert_uses, by_version, check, check_fallback

COUNTER = 0
LOG = []


class Boom(Exception):
    pass


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


def test_data_dependent_branch():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y
        return -y

    check_fallback(f, torch.ones(3), torch.full((3,), -1.0), reason="data_dependent")


def test_item_and_tolist():
    def f(x):
        return x.max().item() * 2, x.tolist()

    check_fallback(f, t(), reason="data_dependent")


def test_print_happens_once():
    def f(x):
        y = x + 1
        print("shape", tuple(y.shape))
        return y

    check_fallback(f, t(), reason="side_effect")  # stdout compared: exactly one line per call


def test_print_in_inlined_helper():
    def helper(v):
        print("helper")
        return v * 2

    def f(x):
        return helper(x) + 1

    check_fallback(f, t(), reason="side_effect")


def test_global_write_happens_once():
    def f(x):
        global COUNTER
        COUNTER += 1
        return x + COUNTER

    assert_uses(f, "STORE_GLOBAL")
    before = COUNTER
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    for i in range(1, 4):
        torch.testing.assert_close(opt(x), x + before + i)
    assert COUNTER == before + 3
    kinds = [e.kind for e in opt.cache_entries()]
    assert kinds and set(kinds) == {"eager"}
    with pytest.raises(minidynamo.Unsupported, match="side_effect"):
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)(x)
    assert COUNTER == before + 3  # the refused trace ran nothing


def test_outside_list_append_happens_once():
    def f(x):
        LOG.append(x.shape[0])
        return x * 2

    LOG.clear()
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    for _ in range(3):
        opt(t())
    assert LOG == [4, 4, 4]
    assert [e.kind for e in opt.cache_entries()] == ["eager"]
    assert opt.cache_entries()[0].reason.category == "side_effect"


def test_outside_object_attribute_write():
    class State:
        n = 0

    def f(s, x):
        s.n = s.n + 1
        return x + 1

    check_fallback(f, (State(), t()), reason="side_effect")


def test_generator_function_call():
    def gen(x):
        for i in range(3):
            yield x * i

    def f(x):
        return list(gen(x))

    check_fallback(f, t(), reason="generator")


def test_try_except():
    def f(x):
        try:
            y = x + 1
        except RuntimeError:
            y = x
        return y

    assert_uses(f, by_version(py310=("SETUP_FINALLY",), py311=("PUSH_EXC_INFO",)))
    check_fallback(f, t(), reason="exceptions")


def test_try_except_catching_real_error():
    def f(x, y):
        try:
            return x + y
        except RuntimeError as e:
            return str(e)[:20]

    check_fallback(f, (t(4, 3), t(5, 3)), reason="exceptions")


def test_try_finally():
    def f(x):
        out = []
        try:
            out.append(x * 2)
        finally:
            out.append(1)
        return out

    check_fallback(f, t(), reason="exceptions")


class _OwnManager:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_with_statement():
    """A context manager other than those traced (grad mode, autocast, nullcontext:
    tests/test_context_managers.py) runs the call eagerly."""
    def f(x):
        with _OwnManager():
            return x * 2

    assert_uses(f, by_version(py310=("SETUP_WITH",), py311=("BEFORE_WITH",)))
    check_fallback(f, t().requires_grad_(), reason="call")  # creating the context manager


def test_c_extension_calls():
    def f(x):
        return x * (time.time() > 0)

    def g(x):
        return x + zlib.crc32(b"abc") % 7

    check_fallback(f, t(), reason="call")
    check_fallback(g, t(), reason="call")


def test_raise_reaches_caller_unchanged():
    def f(x):
        if x.shape[0] == 4:
            raise Boom(f"bad size {x.shape[0]}")
        return x

    assert_uses(f, "RAISE_VARARGS")
    check_fallback(f, t(), reason="exceptions")  # compares type and message
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with pytest.raises(Boom, match="bad size 4"):
        opt(t())
    with pytest.raises(Boom, match="bad size 4"):
        opt(t())
    assert len(opt.cache_entries()) == 1


def test_raise_in_inlined_helper():
    def check_shape(x):
        if x.dim() != 3:
            raise ValueError(f"expected 3 dims, got {x.dim()}")

    def f(x):
        check_shape(x)
        return x + 1

    check_fallback(f, t(), reason="exceptions")


def test_torch_op_error_same_message():
    def f(x, y):
        return torch.cat([x, y], dim=1)

    check_fallback(f, (t(4, 3), t(2, 3)), reason="torch_op")


def test_fallback_is_cached_under_guards():
    traced = []

    def f(x):
        traced.append(1)  # an outside list: runs only in eager calls
        return x + 1

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    for _ in range(4):
        opt(t())
    assert len(opt.cache_entries()) == 1
    assert opt.cache_entries()[0].hit_count == 4
    assert len(traced) == 4
    opt(t(2))  # the guards of the fallback are those gathered before the refusal
    assert len(traced) == 5


def test_fullgraph_message_has_file_and_line():
    def f(x):
        return x.item()

    opt = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)
    with pytest.raises(minidynamo.Unsupported) as e:
        opt(t(1))
    assert e.value.category == "data_dependent"
    assert f"{__file__}:{f.__code__.co_firstlineno + 1}" in str(e.value)
    assert "x.item()" in str(e.value)


def test_unsupported_class_creation_inside():
    def f(x):
        class Local:
            pass
        return x + 1

    check_fallback(f, t(), reason="construct")


def test_import_inside_function():
    def f(x):
        import json  # noqa: F401,F811 - already loaded: no code runs
        return x + 1

    def g(x):
        import this_module_does_not_exist  # noqa: F401
        return x

    check_fallback(g, t(), reason="side_effect")
    check(f, t(), kind="graph")


def test_unbound_local():
    def f(x):
        if x.shape[0] == 4:
            del x
        return x
    check(f, t(), kind="eager")



def test_str_join_of_list_comp():
    def f(x):
        return ",".join(str(d) for d in x.shape), x + 1
    check(f, t(), kind="eager")

