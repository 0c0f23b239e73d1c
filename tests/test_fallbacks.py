"""Constructs the trace declines. Where the declined instruction is a call, a conditional
jump or a store of the optimized function's own frame, the graph breaks there (entry kind
"break"): the graph before it runs, the instruction runs natively, a resume function
carries on. Elsewhere (inside a `with` block or a `try`, an opcode that is not a call, jump
or store, a frame with cell variables) the whole call runs eagerly (kind "eager"). Either
way the results are eager's, side effects happen exactly once per call, the entry is
cached under its guards, and fullgraph=True (which never breaks) refuses with the category
and the user's file:line."""
import json  # noqa: F401 - loaded, so the traced `import json` runs no code
import threading
import time
import zlib

import pytest
import torch

import minidynamo
from helpers import CountingBackend, assert_uses, by_version, check, check_fallback, entry_tree

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

    # One entry breaks at the branch (its graph computes y and the condition); each side
    # is a resume function of its own: `return y` (no tensor work) and `return -y`.
    info = check(f, torch.ones(3), torch.full((3,), -1.0), kind="break", reason="data_dependent", graphs=2)
    assert sorted(e.kind for e in info.tree) == ["break", "constant", "graph"]
    assert len(info.entries[0].resumes) == 2


def test_item_and_tolist():
    def f(x):
        return x.max().item() * 2, x.tolist()

    info = check(f, t(), kind="break", reason="data_dependent")
    # .item() breaks, then .tolist() in the resume function.
    assert [str(e.break_reason.detail) for e in info.tree if e.kind == "break"] == [
        "Tensor.item() reads a tensor value into Python", "Tensor.tolist() reads tensor values into Python"]


def test_print_happens_once():
    def f(x):
        y = x + 1
        print("shape", tuple(y.shape))
        return y

    check(f, t(), kind="break", reason="side_effect")  # stdout compared: exactly one line per call


def test_print_in_inlined_helper():
    def helper(v):
        print("helper")
        return v * 2

    def f(x):
        return helper(x) + 1

    # The call to helper breaks f; helper runs optimized on its own and breaks at its print.
    info = check(f, t(), kind="break", reason="side_effect", graphs=2)
    assert [e.kind for e in info.tree].count("break") == 2


def test_whole_call_fallback_prints_once():
    def f(x):
        y = x + 1
        try:
            print("shape", tuple(y.shape))  # inside a try: the frame cannot break
        finally:
            pass
        return y * 2

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
    assert kinds == ["graph"] * 3  # the store written after the graph, once per call; its value read: guarded
    strict = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)
    torch.testing.assert_close(strict(x), x + before + 4)
    assert COUNTER == before + 4


def test_outside_list_append_happens_once():
    def f(x):
        LOG.append(x.shape[0])
        return x * 2

    LOG.clear()
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    for _ in range(3):
        torch.testing.assert_close(opt(torch.ones(4, 3)), torch.full((4, 3), 2.0))
    assert LOG == [4, 4, 4]
    # The append is traced and replayed after the graph: no fallback, no break.
    kinds = [e.kind for e in opt.cache_entries()]
    assert kinds and set(kinds) == {"graph"}, kinds


def test_outside_object_attribute_write():
    class State:
        n = 0

    def f(s, x):
        s.n = s.n + 1
        return x + 1

    check(f, (State(), t()), kind="graph")  # written back after the graph


def test_generator_function_call():
    def gen(x):
        for i in range(3):
            yield x * i

    def f(x):
        g = gen(x)
        running = g.gi_running  # a frame attribute of a generator declines (generators, send()
        return sum(g) + running  # and close() are traced: test_generators.py, test_generator_send_close.py)

    info = check(f, t(), kind="break", reason="generator")
    # The resume function gets the generator object and runs eagerly.
    assert [e.kind for e in info.tree] == ["break", "eager"]
    assert info.tree[1].reason.category == "generator"


def test_try_except():
    def f(x):
        try:
            y = x + 1
        except RuntimeError:
            y = x
        return y

    assert_uses(f, by_version(py310=("SETUP_FINALLY",), py311=("PUSH_EXC_INFO",)))
    check(f, t(), kind="graph")  # the body does not raise: the handler is never reached


def test_try_except_catching_real_error():
    def f(x, y):
        try:
            return x + y
        except RuntimeError as e:
            return str(e)[:20]

    # A decline inside a try body runs the whole call eagerly (no break inside a try):
    # the handler catches eager's error.
    check_fallback(f, (t(4, 3), t(5, 3)), reason="torch_op")
    check(f, (t(4, 3), t(4, 3)), kind="graph")


def test_try_finally():
    def f(x):
        out = []
        try:
            out.append(x * 2)
        finally:
            out.append(1)
        return out

    check(f, t(), kind="graph")


def test_decline_inside_a_try_body_runs_the_whole_call_eagerly():
    def f(x):
        y = x + 1
        try:
            print("inside")
        finally:
            y = y * 2
        return y

    check_fallback(f, t(), reason="side_effect")


def test_with_statement():
    """A context manager other than those traced (grad mode, autocast, nullcontext:
    tests/test_context_managers.py; classes with __enter__/__exit__ in Python:
    tests/test_user_objects.py) runs the call eagerly."""
    manager = threading.Lock()

    def f(x):
        with manager:
            return x * 2

    assert_uses(f, by_version(py310=("SETUP_WITH",), py311=("BEFORE_WITH",), py314=("LOAD_SPECIAL",)))
    check_fallback(f, t().requires_grad_(), reason="exceptions")


def test_with_statement_over_a_manager_made_inside():
    def f(x):
        with threading.Lock():
            return x * 2

    # Creating the lock is a call the trace declines: it breaks there, and the resume
    # function (the with statement over it) runs eagerly.
    info = check(f, t().requires_grad_(), kind="break", reason="call")
    assert [e.kind for e in info.tree] == ["break", "eager"]


def test_c_extension_calls():
    def f(x):
        return x * (time.time() > 0)

    def g(x):
        return x + zlib.crc32(b"abc") % 7

    check(f, t(), kind="break", reason="call")
    check(g, t(), kind="break", reason="call")


def test_raise_reaches_caller_unchanged():
    def f(x):
        if x.shape[0] == 4:
            raise Boom(f"bad size {x.shape[0]}")
        return x

    assert_uses(f, "RAISE_VARARGS")
    # Creating the exception breaks (the call runs natively); the raise itself, in the
    # resume function, runs eagerly there.
    check(f, t(), kind="break", reason="exceptions")  # compares type and message
    check(f, t(5, 3), kind="constant")  # no raise: nothing declined
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    with pytest.raises(Boom, match="bad size 4"):
        opt(t())
    with pytest.raises(Boom, match="bad size 4"):
        opt(t())
    assert len(opt.cache_entries()) == 1


def test_raise_of_a_ready_exception_falls_back():
    error = Boom("bad size")

    def f(x):
        if x.shape[0] == 4:
            raise error
        return x

    check_fallback(f, t(), reason="exceptions")


def test_raise_in_inlined_helper():
    def check_shape(x):
        if x.dim() != 3:
            raise ValueError(f"expected 3 dims, got {x.dim()}")

    def f(x):
        check_shape(x)
        return x + 1

    check(f, t(), kind="break", reason="exceptions")


def test_torch_op_error_same_message():
    def f(x, y):
        return torch.cat([x, y], dim=1)

    # The op fails while tracing: the graph breaks there and the op runs natively, raising
    # eager's error.
    check(f, (t(4, 3), t(2, 3)), kind="break", reason="torch_op")


def test_fallback_is_cached_under_guards():
    traced = []

    def f(x):
        y = x
        try:
            print("called")  # declined inside a try: the frame cannot break, the whole call runs eagerly
        finally:
            pass
        traced.append(1)  # an outside list, after the decline: runs in eager calls only
        return y + 1

    opt = minidynamo.optimize(backend=CountingBackend())(f)
    for _ in range(4):
        opt(t())
    assert [e.kind for e in opt.cache_entries()] == ["eager"]
    assert opt.cache_entries()[0].hit_count == 4
    assert len(traced) == 4
    opt(t(2))  # the guards of the fallback are those gathered before the refusal
    assert len(traced) == 5


def test_break_is_cached_under_guards(capsys):
    def f(x):
        y = x + 1
        print("called")
        return y * 2

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(4):
        torch.testing.assert_close(opt(torch.ones(4, 3)), torch.full((4, 3), 4.0))
    assert capsys.readouterr().out == "called\n" * 4
    (entry,) = opt.cache_entries()
    assert entry.kind == "break" and entry.hit_count == 4
    (resumed,) = [e for r in entry.resumes for e in r.cache_entries()]
    assert resumed.kind == "graph" and resumed.hit_count == 4
    assert backend.calls == 2  # the graph before the print, the one after it
    opt(t(2))  # new guards: a new break entry, and its resume function recompiles too
    assert capsys.readouterr().out == "called\n"
    assert sorted(e.kind for e in entry_tree(opt)) == ["break", "break", "graph", "graph"]


def test_fullgraph_message_has_file_and_line():
    def f(x):
        return x.item()

    opt = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)
    with pytest.raises(minidynamo.Unsupported) as e:
        opt(t(1))
    assert e.value.category == "data_dependent"
    assert f"{__file__}:{f.__code__.co_firstlineno + 1}" in str(e.value)
    assert "x.item()" in str(e.value)


def test_class_statement_inside():
    def f(x):
        class Local:
            pass
        return x + 1

    check(f, t(), kind="graph")  # (tests/test_class_statements.py)


def test_unsupported_class_statement_inside():
    def f(x):
        class Local:
            __slots__ = ()
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
    check(f, t(), kind="break", reason="call")

