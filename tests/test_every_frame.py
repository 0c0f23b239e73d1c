"""Every frame optimized (minidynamo/frame_hook.py): code that runs eagerly under an
optimized call — a whole-frame fallback, the native instruction of a graph break, a resume
function past the cache limit, torch.nn's containers — still has the Python functions it
calls optimized, each a frame of its own, as torch.compile's frame hook does. Each test
compares results, exceptions, printed output and side effects with eager's, and counts
what was captured."""
from __future__ import annotations

import contextlib
import io
import threading

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo import frame_hook
from minidynamo.callees import optimized_callees
from minidynamo.config import config
from helpers import CountingBackend, check

pytestmark = pytest.mark.skipif(not frame_hook.available(),
                                reason="torch's frame-evaluation hook is not usable with this torch")

LOG: list = []


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


def block(x):
    return torch.tanh(x) * 2 + x.sin()


def hook_now():
    from torch._C._dynamo.eval_frame import get_eval_frame_callback
    return get_eval_frame_callback()


def optimized_named(backend, name):
    return [o for o in optimized_callees(backend) if o.__name__ == name]


def run(opt, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = opt(*args)
    return result, out.getvalue()


# --- what runs eagerly: its callees are optimized -----------------------------------------
def test_a_fallen_back_frame_has_its_callees_optimized():
    def f(x):
        try:  # a print inside try cannot break: the frame runs eagerly as a whole
            print("in try")
            return block(x) + 1
        finally:
            LOG.append("finally")

    LOG.clear()
    info = check(f, t(), t(5, 2, seed=1), kind="eager", graphs=2, same_entry=False)
    assert LOG == ["finally"] * 6  # eager once per set, optimized twice per set
    [opt_block] = optimized_named(info.backend, "block")
    assert [e.kind for e in opt_block.cache_entries()] == ["graph", "graph"]
    assert hook_now() is None


def test_the_native_call_of_a_break_is_optimized_frame_by_frame():
    def shout(x):
        print("shout", tuple(x.shape))
        return block(x)  # in shout's own frame: shout breaks, block is captured

    def g(x):
        return shout(x) * 3

    def f(x):
        y = x + 1
        print("f")  # the frame's own break: the native print
        return g(y)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for _ in range(2):
        got, printed = run(opt, t())
        want, eager_printed = run(f, t())
        torch.testing.assert_close(got, want)
        assert printed == eager_printed
    ops = sorted(len(gm.graph.nodes) for gm in backend.graphs)
    assert backend.calls >= 2 and ops, ops  # x + 1, then block's work and the * 3


def test_resume_function_past_the_limit_still_optimizes_its_callees(monkeypatch):
    monkeypatch.setattr(config, "cache_size_limit", 2)

    def f(x):
        for i in range(5):
            print("step", i)  # a break in the loop: one resume entry per position
            x = block(x)
        return x

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    with pytest.warns(RuntimeWarning, match="cache_size_limit"):
        got, printed = run(opt, t())
    want, eager_printed = run(f, t())
    torch.testing.assert_close(got, want)
    assert printed == eager_printed
    # Past the limit the resume function runs eagerly: `block`, which it calls, is
    # optimized on its own.
    [opt_block] = optimized_named(backend, "block")
    assert [e.kind for e in opt_block.cache_entries()] == ["graph"]
    assert opt_block.cache_entries()[0].hits[0] >= 1


def test_sequential_with_a_break_inside_keeps_the_rest_in_graphs():
    class Shout(nn.Module):
        def forward(self, x):
            print("shape", tuple(x.shape))
            return x * 2

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), Shout(), nn.Linear(3, 3))
    backend = CountingBackend()
    opt = minidynamo.optimize(model, backend=backend)
    x = t()
    with torch.no_grad():
        for _ in range(2):
            got, printed = run(opt, x)
            want, eager_printed = run(model, x)
            torch.testing.assert_close(got, want)
            assert printed == eager_printed
    targets = [n.target for gm in backend.graphs for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(torch._C._nn.linear) == 2 and torch.tanh in targets, targets


# --- the shape of the frames: parameters, cells, closures -----------------------------------
def inner(x, /, y, *rest, k=2, **kw):
    g = lambda: x * 3  # noqa: E731 - x is a cell variable
    return g() + y * k + sum(rest) + kw.get("z", 0)


def make_closure(scale):
    def closure(x):
        return block(x) * scale
    return closure


class Base(nn.Module):
    def forward(self, x):
        return x * 2


class Derived(Base):
    def forward(self, x):
        return super().forward(x) + 1  # `__class__` is a free variable


def test_parameters_and_cells_reach_the_optimized_frame():
    def f(x):
        try:
            print("eager frame")
            return inner(x, x + 1, 1.0, 2.0, k=3, z=4.0), inner(x, y=x)
        finally:
            pass

    # the two calls differ in their extra arguments: two entries, each traced once
    info = check(f, t(), kind="eager", graphs=2)
    assert len(optimized_named(info.backend, "inner")) == 1


def test_a_closure_runs_plainly_and_what_it_calls_is_optimized():
    closures = [make_closure(2.0), make_closure(-1.0)]

    def f(x):
        try:
            print("eager")
            return [c(x) for c in closures] + [(lambda v: v * x.sum())(x)]
        finally:
            pass

    info = check(f, t(), kind="eager", graphs=1)  # block: one graph, for both closures
    assert optimized_named(info.backend, "closure") == []
    report = {r.code: r for r in frame_hook.report()}
    assert report[closures[0].__code__].plain == "a closure"


def test_a_method_calling_super_is_optimized():
    m = Derived()

    def f(x):
        try:
            print("eager")
            return m(x)
        finally:
            pass

    check(f, t(), kind="eager", graphs=1)


def power(x, n):
    return x if n == 1 else power(x, n - 1) * x


def test_recursion_from_an_eager_frame():
    def f(x):
        try:
            print("eager")
            return power(x, 3)
        finally:
            pass

    check(f, t(), kind="eager", graphs=1)


# --- exceptions, side effects, the hook's scope ----------------------------------------------
class Boom(Exception):
    pass


def raises_inside(x):
    y = x * 2
    if y.shape[0] == 4:
        raise Boom(f"bad rows {y.shape[0]}")
    return y


def test_an_exception_in_an_optimized_callee_is_eagers_and_the_hook_is_off_after():
    def f(x):
        try:
            print("eager")
            return raises_inside(x)
        finally:
            LOG.append("after")

    LOG.clear()
    # raises_inside: one entry per shape (the branch on the size): a break at the raise
    # with `x * 2` before it, and a graph
    check(f, t(), t(3, 3), kind="eager", graphs=2, same_entry=False)
    assert hook_now() is None


def counted(x):
    LOG.append(tuple(x.shape))
    print("counted", tuple(x.shape))
    return x.cos()


def test_side_effects_of_optimized_callees_happen_once():
    def f(x):
        try:
            print("eager")
            return counted(x) + counted(x + 1)
        finally:
            pass

    LOG.clear()
    check(f, t(), kind="eager", graphs=1)  # counted breaks at its print: x.cos() after it
    assert LOG == [(4, 3)] * 6


def shape_key(x):
    return tuple(x.shape) + (x.dim(),)


def test_a_frame_without_tensor_work_runs_plainly_after_its_first_call():
    def f(x):
        try:
            print("eager")
            return shape_key(x), block(x)
        finally:
            pass

    info = check(f, t(), kind="eager", graphs=1)
    report = {r.code: r for r in frame_hook.report()}
    assert report[shape_key.__code__].plain == "no tensor work"
    assert report[block.__code__].plain is None
    # the plain runs go straight to the function: no more entries, no more traces
    assert len(optimized_named(info.backend, "shape_key")[0].cache_entries()) == 1


def test_a_disabled_function_keeps_its_whole_subtree_plain():
    @minidynamo.disable
    def hidden(x):
        return block(x)

    def f(x):
        try:
            print("eager")
            return hidden(x)
        finally:
            pass

    info = check(f, t(), kind="eager", graphs=0)
    assert optimized_named(info.backend, "block") == []


def squares(n):
    for i in range(n):
        yield i * i


def test_generators_called_from_an_eager_frame_run_plainly():
    def f(x):
        try:
            print("eager")
            return [x * s for s in squares(3)]
        finally:
            pass

    check(f, t(), kind="eager", graphs=0)


class Doubler(nn.Module):
    def forward(self, x):
        return x * 2 + 1


def test_a_module_called_from_an_eager_frame_runs_its_forward_optimized_with_its_hooks():
    m = Doubler()
    m.register_forward_hook(lambda mod, args, out: LOG.append("hook") or out + 1)

    def f(x):
        try:
            print("eager")
            return m(x)
        finally:
            pass

    LOG.clear()
    check(f, t(), kind="eager", graphs=2)  # the forward, and the hook's `out + 1`
    assert LOG == ["hook"] * 3


@torch._dynamo.disable
def _runs_eagerly(x):
    LOG.append("disabled")


class _Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return torch.relu(self.inner(x)) * 2


def test_a_module_whose_hook_breaks_keeps_its_forward_in_a_graph():
    # (FSDP2's and other libraries' pre-forward hooks are disabled functions): the module
    # call runs natively at the break, and its forward is still optimized as a frame of its
    # own, as under torch.compile.
    m = _Blocks()
    m.register_forward_pre_hook(lambda mod, args: _runs_eagerly(args[0]))
    backend = CountingBackend()
    opt = minidynamo.optimize(m, backend=backend)
    LOG.clear()
    for _ in range(2):
        torch.testing.assert_close(opt(t()), m(t()))
    assert LOG == ["disabled"] * 4
    assert backend.calls == 1  # the forward's graph, traced once


def test_the_hook_is_per_thread_and_not_left_behind():
    def f(x):
        try:
            print("eager")
            return block(x)
        finally:
            pass

    opt = minidynamo.optimize(f, backend=CountingBackend())
    seen = []

    def other():
        seen.append(hook_now())
    with contextlib.redirect_stdout(io.StringIO()):
        thread = threading.Thread(target=other)
        opt(t())
        thread.start()
        thread.join()
    assert seen == [None] and hook_now() is None


def test_plain_calls_outside_an_optimized_call_are_not_intercepted():
    backend = CountingBackend()

    def f(x):
        try:
            print("eager")
            return block(x)
        finally:
            pass

    with contextlib.redirect_stdout(io.StringIO()):
        minidynamo.optimize(f, backend=backend)(t())
    [opt_block] = optimized_named(backend, "block")
    hits = opt_block.cache_entries()[0].hits[0]
    block(t())  # the plain function, called outside: runs as written
    assert opt_block.cache_entries()[0].hits[0] == hits


def helper_that_falls_back(x):
    try:  # cannot break: this frame runs eagerly, then plainly from its second call on
        print("helper")
        return block(x)
    finally:
        pass


def test_a_frame_run_plainly_still_has_its_callees_optimized():
    def f(x):
        try:
            print("eager")
            return helper_that_falls_back(x)
        finally:
            pass

    info = check(f, t(), kind="eager", graphs=1)
    report = {r.code: r for r in frame_hook.report()}
    assert report[helper_that_falls_back.__code__].plain.startswith("runs eagerly: [side_effect] print()")
    [opt_block] = optimized_named(info.backend, "block")
    assert opt_block.cache_entries()[0].hits[0] == 2  # both optimized calls of f


_TORCH_COMPILE_AFTER_THE_HOOK = """
import contextlib, io, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
import torch, torch._dynamo, minidynamo

def block(x):
    return torch.tanh(x) * 2 + x.sin()

def f(x):
    try:
        print("eager")
        return block(x)
    finally:
        pass

with contextlib.redirect_stdout(io.StringIO()):
    minidynamo.optimize(f)(torch.randn(4, 3))  # block's code gets a trampoline
graphs = []

def backend(gm, example_inputs):
    graphs.append(list(example_inputs))
    return gm.forward

compiled = torch.compile(block, backend=backend)
for shape in ((4, 3), (2, 2)):
    x = torch.randn(*shape)
    torch.testing.assert_close(compiled(x), block(x))
dynamic = [any(isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and
               any(isinstance(d, torch.SymInt) for d in v.shape) for v in inputs) for inputs in graphs]
print(dynamic)
"""


def test_torch_compile_of_a_function_the_hook_optimized_is_unaffected():
    # In a process of its own: torch.compile's first compile patches torch for good
    # (it turns distributions' argument validation off, wraps torch.jit.trace).
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _TORCH_COMPILE_AFTER_THE_HOOK], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # As without minidynamo: a static first graph, then a dynamic one for the new shape.
    # Our entry is not one of torch.compile's: counted as its recompile, the first graph
    # would have been dynamic already (and reading it as its own crashed).
    assert done.stdout.strip().splitlines()[-1] == "[False, True]", done.stdout


def make_dispatching_module(func):
    """A module whose forward takes *args but advertises `func`'s parameters through
    `__signature__` (as kernel hubs make their function modules)."""
    import inspect

    class Func(nn.Module):
        def forward(self, *args, **kwargs):
            if len(LOG) > 1000:
                print("never")
            return func(*args, **kwargs) * 2

    Func.forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         *inspect.signature(func).parameters.values()])
    return Func()


def rotate(q, k, scale=1.0):
    return q * scale + k


def test_a_forward_with_an_advertised_signature_binds_as_its_code_does():
    m = make_dispatching_module(rotate)

    def f(q, k):
        return m(q, k, scale=3.0) + m(q, k)

    check(f, (t(), t(seed=1)), kind="graph")  # bound to q, k, `args` was unbound in the trace
    check(type(m).forward, (m, t(), t(seed=1)), kind="graph")  # the optimized frame itself


ACTIVE_BY_ID: dict = {}


class Dispatching(nn.Module):
    def forward(self, x):
        replacement = ACTIVE_BY_ID.get(id(self))  # a kernel hub's registry, keyed by id
        return replacement(x) if replacement is not None else x * 2


MODULE_A, MODULE_B = Dispatching(), Dispatching()


def test_id_of_a_module_is_a_constant_pinned_by_identity():
    ACTIVE_BY_ID.clear()
    ACTIVE_BY_ID[id(MODULE_B)] = torch.cos

    def fa(x):
        return MODULE_A(x) + 1

    def fb(x):
        return MODULE_B(x) + 1

    info = check(fa, t(), kind="graph")
    check(fb, t(), kind="graph")  # the registry's entry for B: cos
    assert any(g.kind == "ID_MATCH" and "MODULE_A" in g.source.name() for g in info.entries[0].guards)
    ACTIVE_BY_ID.clear()
