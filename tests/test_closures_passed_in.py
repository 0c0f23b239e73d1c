"""Closures passed in (an argument, an attribute, a list or dict item, a global): a nested
function with a closure is guarded by its code, globals, defaults and empty __dict__, and
the contents of its cells are read (and guarded) through it, so a program that makes a
fresh closure per call does not trace again. Writes through its cells go to this call's
cells; cells two closures share are one variable in the trace, the sharing guarded.
Differential: eager vs optimized on the same fresh closures (results, exceptions, printed
output, cell contents after), graph counts from a counting backend."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from helpers import CountingBackend


def _opt(fn):
    backend = CountingBackend()
    return minidynamo.optimize(fn, backend=backend), backend


def _close(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    else:
        assert a == b


def _calls(fn, make_args, n=6):
    """`fn` eager and optimized on the same freshly made arguments, `n` times; the backend."""
    opt, backend = _opt(fn)
    for i in range(n):
        _close(opt(*make_args(i)), fn(*make_args(i)))
    return opt, backend


def _contents(fn):
    return [c.cell_contents for c in fn.__closure__]


X = torch.arange(4.0)


def call_it(x, g):
    return g(x) * 2


# --- a fresh closure per call -------------------------------------------------------------
def test_fresh_closure_over_a_tensor_traces_once():
    def make(i):
        t = torch.full((4,), float(i))
        return lambda x: x + t
    _, backend = _calls(call_it, lambda i: (X, make(i)))
    assert backend.calls == 1


def test_closed_over_int_becomes_dynamic_as_torch_compile():
    # torch.compile's test_automatic_dynamic_on_closed_ints: two frames over ten calls
    def f(x):
        def g(y):
            return y + x
        return g

    def h(x, g):
        return g(x)
    opt, backend = _calls(h, lambda i: (torch.ones(5), f(i)), n=10)
    assert backend.calls == 2
    assert not opt.guard_failures()[-1:] or "cell_contents" in opt.guard_failures()[0].reason


def test_closed_over_float_is_guarded_by_value():
    def make(v):
        return lambda x: x * v
    opt, backend = _opt(call_it)
    for v in (2.0, 2.0, 3.0, 3.0):
        _close(opt(X, make(v)), call_it(X, make(v)))
    assert backend.calls == 2
    assert "cell_contents" in opt.guard_failures()[-1].reason


def test_fresh_closure_over_a_list_traces_once():
    def make(i):
        ts = [torch.full((4,), float(i)), torch.ones(4)]
        return lambda x: x + ts[0] - ts[1]
    _, backend = _calls(call_it, lambda i: (X, make(i)))
    assert backend.calls == 1


def test_fresh_closure_over_a_module_traces_once():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)

    def make():
        return lambda x: torch.relu(lin(x))
    with torch.no_grad():
        _, backend = _calls(call_it, lambda i: (X, make()))
    assert backend.calls == 1


def test_fresh_closure_over_another_closure_traces_once():
    def make(i):
        t = torch.full((4,), float(i))

        def inner(x):
            return x - t

        def outer(x):
            return inner(x) * t
        return outer
    _, backend = _calls(call_it, lambda i: (X, make(i)))
    assert backend.calls == 1


def test_closure_with_a_different_code_recompiles_naming_it():
    def make_add(t):
        return lambda x: x + t

    def make_mul(t):
        return lambda x: x * t
    opt, backend = _opt(call_it)
    t = torch.ones(4) * 3
    for make in (make_add, make_add, make_mul, make_mul):
        _close(opt(X, make(t)), call_it(X, make(t)))
    assert backend.calls == 2
    assert "__code__" in opt.guard_failures()[-1].reason


def test_closure_with_attributes_stays_pinned_by_identity():
    def make(i):
        t = torch.full((4,), float(i))

        def g(x):
            return x + t
        g.tag = "marked"
        return g
    _, backend = _calls(call_it, lambda i: (X, make(i)), n=3)
    assert backend.calls == 3


def test_unbound_cell_recompiles_and_raises_as_eager():
    def make(bind):
        if bind:
            y = torch.ones(4)

        def g(x):
            return x + y
        return g
    opt, backend = _opt(call_it)
    _close(opt(X, make(True)), call_it(X, make(True)))
    _close(opt(X, make(True)), call_it(X, make(True)))
    assert backend.calls == 1
    with pytest.raises(NameError):
        call_it(X, make(False))
    with pytest.raises(NameError):
        opt(X, make(False))
    assert "cell_contents" in opt.guard_failures()[-1].reason
    _close(opt(X, make(True)), call_it(X, make(True)))


# --- where the closure is reached from ------------------------------------------------------
def _maker(i):
    t = torch.full((4,), float(i))
    return lambda x: x - t


def test_closure_in_a_list_argument():
    def f(x, fns):
        return fns[0](x) + fns[1](x)
    _, backend = _calls(f, lambda i: (X, [_maker(i), _maker(i + 1)]))
    assert backend.calls == 1


def test_closure_in_a_dict_argument():
    def f(x, fns):
        return fns["a"](x) * 3
    _, backend = _calls(f, lambda i: (X, {"a": _maker(i)}))
    assert backend.calls == 1


class Holder:
    def __init__(self, fn):
        self.fn = fn


def test_closure_as_an_attribute():
    def f(x, obj):
        return obj.fn(x) + 1
    _, backend = _calls(f, lambda i: (X, Holder(_maker(i))))
    assert backend.calls == 1


GLOBAL_FN = None


def use_global(x):
    return GLOBAL_FN(x) * 2


def test_closure_in_a_global_reassigned_per_call():
    global GLOBAL_FN
    opt, backend = _opt(use_global)
    for i in range(5):
        GLOBAL_FN = _maker(i)
        _close(opt(X), use_global(X))
    assert backend.calls == 1


def test_same_or_different_closure_by_is():
    def f(x, a, b):
        return x + 1 if a is b else x - 1
    opt, backend = _opt(f)
    g1, g2 = _maker(1), _maker(1)  # one code, equal contents: only `is` tells them apart
    for args in ((g1, g1), (g1, g1), (g1, g2), (g2, g2)):
        _close(opt(X, *args), f(X, *args))
    assert backend.calls == 2


# --- writes through the cells -------------------------------------------------------------
def counter():
    n = 0

    def inc(x):
        nonlocal n
        n += 1
        return x * n
    return inc


def test_counter_closure_writes_this_calls_cell():
    def f(x, inc):
        return inc(x) + inc(x)
    opt, backend = _opt(f)
    for _ in range(4):
        e, o = counter(), counter()
        _close(opt(X, o), f(X, e))
        _close(opt(X, o), f(X, e))  # the same closure again: its own count goes on
        assert _contents(o) == _contents(e) == [4]
    assert backend.calls <= 2


def test_two_closures_sharing_a_cell():
    def pair():
        n = 0

        def inc():
            nonlocal n
            n += 1

        def get(x):
            return x * n
        return inc, get

    def f(x, inc, get):
        inc()
        inc()
        return get(x)
    opt, backend = _opt(f)
    for _ in range(3):
        (ei, eg), (oi, og) = pair(), pair()
        _close(opt(X, oi, og), f(X, ei, eg))
        assert _contents(oi) == _contents(ei) == [2]
    assert backend.calls == 1
    # two closures that no longer share their cell: traced again, each cell its own
    (ei, _), (_, eg) = pair(), pair()
    (oi, _), (_, og) = pair(), pair()
    _close(opt(X, oi, og), f(X, ei, eg))
    assert _contents(oi) == _contents(ei) == [2] and _contents(og) == _contents(eg) == [0]
    assert backend.calls == 2
    assert "the same object" in opt.guard_failures()[-1].reason


def test_written_cell_is_not_another_cell_read():
    def pair():
        n = 0

        def inc():
            nonlocal n
            n += 1

        def get(x):
            return x * n
        return inc, get

    def f(x, get, inc):
        y = get(x)
        inc()
        return y + get(x)
    opt, backend = _opt(f)
    (_, eg), (ei, _) = pair(), pair()
    (_, og), (oi, _) = pair(), pair()
    _close(opt(X, og, oi), f(X, eg, ei))
    (ei, eg), (oi, og) = pair(), pair()  # now one cell: the write is seen by the read after it
    _close(opt(X, og, oi), f(X, eg, ei))
    assert _contents(oi) == _contents(ei) == [1]
    assert backend.calls == 2


def test_closure_sharing_a_cell_with_the_optimized_function():
    def outer():
        n = 0

        def inc():
            nonlocal n
            n += 1

        def f(x, g):
            g()
            return x * n
        return f, inc

    ef, ei = outer()
    of, oi = outer()
    opt, backend = _opt(of)
    for _ in range(3):
        _close(opt(X, oi), ef(X, ei))
    assert _contents(oi) == _contents(ei) == [3]
    # a counter of another scope: its own cell is written, the function's is read
    e2, o2 = outer()[1], outer()[1]
    _close(opt(X, o2), ef(X, e2))
    assert _contents(o2) == _contents(e2) == [1] and _contents(oi) == _contents(ei) == [3]


# --- graph breaks, resume functions and functions made again ---------------------------------
def test_graph_break_after_the_closure_call(capsys):
    def f(x, g):
        y = g(x)
        print("between")
        return g(y)
    opt, backend = _calls(f, lambda i: (X, _maker(i)))
    assert backend.calls == 2  # the graph before the break and the resume function's
    assert capsys.readouterr().out.count("between") == 12


def test_counter_across_a_graph_break(capsys):
    def f(x, inc):
        y = inc(x)
        print("between")
        return inc(y)
    opt, backend = _opt(f)
    for _ in range(4):
        e, o = counter(), counter()
        _close(opt(X, o), f(X, e))
        assert _contents(o) == _contents(e) == [2]
    assert backend.calls == 2
    assert capsys.readouterr().out.count("between") == 8


def test_function_made_over_a_passed_cell_is_made_with_this_calls_cell():
    def make(i):
        t = torch.full((4,), float(i))

        def g():
            def inner(x):
                return x + t
            return inner
        return g

    def f(x, g):
        inner = g()
        return inner(x), inner
    opt, backend = _opt(f)
    for i in range(4):
        eg, og = make(i), make(i)
        (er, ei), (orr, oi) = f(X, eg), opt(X, og)
        _close(orr, er)
        assert oi.__closure__[0] is og.__closure__[0]
        _close(oi(X), ei(X))
    assert backend.calls == 1


def test_generator_of_a_passed_closure_made_again_with_this_calls_cells():
    def make(i):
        t = torch.full((4,), float(i))

        def gen(x):
            yield x + t
            yield x * t
        return gen

    def f(x, gen_fn):
        g = gen_fn(x)
        first = next(g)
        return first, g
    opt, backend = _opt(f)
    for i in range(4):
        (ea, eg), (oa, og) = f(X, make(i)), opt(X, make(i))
        _close(oa, ea)
        _close(list(og), list(eg))
    assert backend.calls == 1


def test_cell_shared_with_a_closure_pinned_by_identity():
    def pair():
        n = 0

        def inc():
            nonlocal n
            n += 1
        inc.tag = "pinned"  # an attribute: pinned by identity, its cells fixed

        def get(x):
            return x * n
        return inc, get

    def f(x, get, inc):
        y = get(x)  # the passed closure's cell first, then the same cell through `inc`
        inc()
        return y + get(x)
    oi, og = pair()
    ei, eg = pair()
    opt, backend = _opt(f)
    for _ in range(3):
        _close(opt(X, og, oi), f(X, eg, ei))
    assert _contents(oi) == _contents(ei) == [3]
    # a reader of another scope: it no longer shares the pinned closure's cell
    eg2, og2 = pair()[1], pair()[1]
    _close(opt(X, og2, oi), f(X, eg2, ei))
    assert _contents(oi) == _contents(ei) == [4] and _contents(og2) == _contents(eg2) == [0]


def test_closure_appending_to_the_list_it_closes_over():
    def make():
        seen = []

        def log(x):
            seen.append(x.sum())
            return x * len(seen)
        return log

    def f(x, log):
        return log(x) + log(x)
    opt, backend = _opt(f)
    for _ in range(3):
        e, o = make(), make()
        _close(opt(X, o), f(X, e))
        _close(_contents(o), _contents(e))
    assert backend.calls == 1
