"""Bad input: things that are not optimizable, backends that misbehave, kernels that fail
at launch, arguments that raise. Each gets correct behaviour or a clear error that names
the problem: never a crash inside minidynamo (no AttributeError/KeyError from its
internals), never a user exception changed on its way out.

Decided behaviour, documented by these tests:
- `optimize` checks its target when it is applied: TypeError naming what it got.
- A backend that raises or returns a non-callable: `minidynamo.BackendError` naming the
  backend, raised from the original exception; nothing of the user's function ran.
- A backend whose callable computes wrong values: the user gets what the backend
  returns (minidynamo does not second-guess a backend). One that returns the wrong
  *structure* should be a BackendError: see tests/test_regressions.py.
- An exception raised while the compiled graph runs reaches the user unchanged.
"""
from __future__ import annotations

import asyncio

import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import DEVICE, tl, triton

import minidynamo
from helpers import same_outcome


def plus_one(x):
    return x + 1


# --- what optimize is applied to -----------------------------------------------------------

class Plain:
    def method(self, x):
        return x + 1

    def __call__(self, x):
        return x * 2


def _gen(x):
    yield x


async def _coro(x):
    return x


async def _agen(x):
    yield x


@pytest.mark.parametrize("target, words", [
    (3, "got int"),
    ("plus_one", "got str"),
    (None, "got NoneType"),
    ([plus_one], "got list"),
    (Plain, "class"),
    (torch.nn.Linear, "class"),
    (staticmethod(plus_one), "staticmethod"),
    (classmethod(plus_one), "classmethod"),
    (_gen, "generator"),
    (_coro, "async"),
    (_agen, "async"),
])
def test_not_optimizable_is_a_clear_type_error(target, words):
    with pytest.raises(TypeError) as info:
        minidynamo.optimize()(target)
    msg = str(info.value)
    assert "minidynamo.optimize" in msg and words in msg, msg


def test_coroutine_object_never_created():
    # checked from the code flags: the async function is never called
    with pytest.raises(TypeError):
        minidynamo.optimize()(_coro)
    assert asyncio.iscoroutinefunction(_coro)


def test_bad_backend_names_and_types_fail_at_optimize_time():
    with pytest.raises(ValueError, match="unknown minidynamo backend 'nope'.*eager"):
        minidynamo.optimize("nope")
    with pytest.raises(ValueError, match="unknown minidynamo backend"):
        minidynamo.optimize(backend="nope")(plus_one)
    for bad in (3, None, 2.5, ["eager"]):
        with pytest.raises(TypeError, match="minidynamo backend must be"):
            minidynamo.optimize(backend=bad)
    for bad in (3, 2.5, ["eager"]):  # first argument: the function to optimize
        with pytest.raises(TypeError, match="needs a function or another callable.*backend=..."):
            minidynamo.optimize(bad)
    with pytest.raises(ValueError, match="unknown minidynamo mode"):
        minidynamo.optimize(mode="fastest")(plus_one)


def test_lambdas_and_odd_names_are_optimizable():
    f = minidynamo.optimize()(lambda x: x + 1)
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
    g = minidynamo.optimize(lambda x, k=2: x * k)
    torch.testing.assert_close(g(torch.ones(2)), torch.full((2,), 2.0))

    def h(x):
        return x - 1
    h.__name__ = "not an identifier!"
    h.__qualname__ = "class"
    oh = minidynamo.optimize()(h)
    torch.testing.assert_close(oh(torch.ones(2)), torch.zeros(2))


def test_methods_static_and_class_methods_decorated_in_the_class_body():
    class A:
        k = 3

        @minidynamo.optimize()
        def method(self, x):
            return x * self.k

        @staticmethod
        @minidynamo.optimize()
        def static(x):
            return x + 1

        @classmethod
        @minidynamo.optimize()
        def klass(cls, x):
            return x * cls.k

    x = torch.ones(2)
    a = A()
    torch.testing.assert_close(a.method(x), x * 3)
    torch.testing.assert_close(A.method(a, x), x * 3)
    torch.testing.assert_close(A.static(x), x + 1)
    torch.testing.assert_close(a.static(x), x + 1)
    torch.testing.assert_close(A.klass(x), x * 3)


def test_optimizing_an_optimized_function_wraps_the_original_once():
    opt = minidynamo.optimize()(plus_one)
    again = minidynamo.optimize()(opt)
    x = torch.ones(2)
    torch.testing.assert_close(again(x), x + 1)
    assert again._fn is plus_one


# --- signatures and wrong calls ---------------------------------------------------------------

def star_only(*args):
    return args[0] + args[1]


def star_kw(*args, **kwargs):
    return args[0] * kwargs.get("k", 1)


def kw_only(*, x, k=2):
    return x * k


def pos_only(x, /, y=1):
    return x + y


@pytest.mark.parametrize("fn, args, kwargs", [
    (star_only, (torch.ones(2), torch.ones(2)), {}),
    (star_only, (torch.ones(2),), {}),  # IndexError, the user's own
    (star_only, (), {}),
    (star_only, (torch.ones(2), torch.ones(2)), {"k": 1}),  # unexpected keyword
    (star_kw, (torch.ones(2),), {"k": 3}),
    (star_kw, (), {"k": 3}),
    (kw_only, (), {"x": torch.ones(2)}),
    (kw_only, (torch.ones(2),), {}),  # takes 0 positional arguments
    (kw_only, (), {}),
    (pos_only, (torch.ones(2),), {"y": torch.ones(2)}),
    (pos_only, (), {"x": torch.ones(2)}),  # positional-only passed as keyword
    (plus_one, (1, 2, 3), {}),
    (plus_one, (), {}),
    (plus_one, (torch.ones(2),), {"z": 2}),
    (plus_one, ("a",), {}),  # the user's TypeError from str + int
    (plus_one, (None,), {}),
])
def test_signatures_and_wrong_calls_behave_like_the_function(fn, args, kwargs):
    opt = minidynamo.optimize()(fn)
    for _ in range(2):
        same_outcome(fn, opt, *args, **kwargs)


# --- arguments that raise -------------------------------------------------------------------

class RaisingProperty:
    @property
    def value(self):
        raise ValueError("property says no")


class RaisingGetattr:
    def __getattr__(self, name):
        raise KeyError(name)


def test_user_exceptions_from_arguments_reach_the_caller_unchanged():
    def read_value(x, o):
        return x * o.value

    def read_missing(x, o):
        return x * o.missing

    # (an __eq__ that raises: tests/test_regressions.py::test_user_defined_eq_is_called)
    x = torch.ones(2)
    for fn, obj, exc in ((read_value, RaisingProperty(), ValueError), (read_missing, RaisingGetattr(), KeyError)):
        opt = minidynamo.optimize()(fn)
        for _ in range(2):
            err = same_outcome(fn, opt, x, obj)
            assert type(err) is exc


def test_odd_argument_types_run_correctly():
    def f(x, c):
        return x * len(c)
    opt = minidynamo.optimize()(f)
    t = torch.ones(2)
    for c in ({t: 1}, (i for i in range(3)), {1, 2}, frozenset({3}), range(4), b"ab", [[t]], {"a": {"b": t}}):
        same_outcome(f, opt, t, c)


def test_deep_recursion_falls_back_with_the_right_result():
    def rec(x, n):
        return x if n == 0 else rec(x + 1, n - 1)
    opt = minidynamo.optimize()(rec)
    for n in (3, 60, 3):
        same_outcome(rec, opt, torch.zeros(1), n)


# --- backends -------------------------------------------------------------------------------

def test_backend_that_raises_is_a_backend_error_naming_it():
    ran = []

    def exploding_backend(gm, example_inputs):
        raise ValueError("cannot compile this")

    def f(x):
        y = x
        ran.append(1)
        try:
            print("runs eagerly")  # declined inside a try: the frame cannot break, the whole call runs eagerly
        finally:
            pass
        return y * 2

    def g(x):
        return x * 2
    opt = minidynamo.optimize(backend=exploding_backend)(g)
    for _ in range(2):
        with pytest.raises(minidynamo.BackendError, match="exploding_backend.*ValueError: cannot compile this") as info:
            opt(torch.ones(2))
        assert isinstance(info.value.__cause__, ValueError)
    assert not ran
    # a function that runs eagerly as a whole never reaches the backend: it just runs, once per call
    opt_f = minidynamo.optimize(backend=exploding_backend)(f)
    torch.testing.assert_close(opt_f(torch.ones(2)), torch.full((2,), 2.0))
    assert ran == [1] and [e.kind for e in opt_f.cache_entries()] == ["eager"]


@pytest.mark.parametrize("result", [3, None, "gm", [1]])
def test_backend_returning_a_non_callable(result):
    def returns_junk(gm, example_inputs):
        return result
    opt = minidynamo.optimize(backend=returns_junk)(plus_one)
    with pytest.raises(minidynamo.BackendError, match="returns_junk.*not a callable"):
        opt(torch.ones(2))


def test_backend_with_the_wrong_signature_fails_at_optimize_time():
    class NotABackend:
        def __call__(self, gm):  # forgets example_inputs
            return gm
    with pytest.raises(TypeError, match=r"backend .*NotABackend.* takes \(gm\).*backend\(gm, example_inputs\)"):
        minidynamo.optimize(backend=NotABackend())


def test_backend_failing_with_a_type_error_is_a_backend_error():
    def needs_options(gm, example_inputs, options=None):
        return options["compile"](gm)  # TypeError: None is not subscriptable
    opt = minidynamo.optimize(backend=needs_options)(plus_one)
    with pytest.raises(minidynamo.BackendError, match="needs_options.*TypeError"):
        opt(torch.ones(2))


def test_backend_computing_wrong_values_is_what_the_user_gets():
    def zeros_backend(gm, example_inputs):
        return lambda *args: tuple(torch.zeros_like(a) for a in args)
    opt = minidynamo.optimize(backend=zeros_backend)(plus_one)
    x = torch.ones(3)
    torch.testing.assert_close(opt(x), torch.zeros(3))  # the backend's answer, not eager's


def test_exception_while_the_compiled_graph_runs_is_unchanged():
    class Boom(Exception):
        pass

    def failing_at_run_time(gm, example_inputs):
        def run(*args):
            raise Boom("at run time")
        return run
    opt = minidynamo.optimize(backend=failing_at_run_time)(plus_one)
    for _ in range(2):
        with pytest.raises(Boom, match="at run time"):
            opt(torch.ones(2))


def test_fullgraph_raises_unsupported_naming_the_construct_and_line():
    def f(x):
        print("hello")
        return x
    opt = minidynamo.optimize(fullgraph=True)(f)
    with pytest.raises(minidynamo.Unsupported) as info:
        opt(torch.ones(1))
    assert info.value.category == "side_effect"
    assert "print" in str(info.value) and "test_bad_input.py" in str(info.value)


# --- kernels that fail at launch --------------------------------------------------------------

@triton.jit
def needs_power_of_two(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def _launch(form):
    def f(a):
        out = torch.zeros_like(a)
        n = a.numel()
        if form == "too_many":
            K.add_kernel[(1,)](a, a, out, n, 16, 99)
        elif form == "too_few":
            K.add_kernel[(1,)](a, a, out, BLOCK=16)
        elif form == "unknown_kw":
            K.add_kernel[(1,)](a, a, out, n, BLOCK=16, nonsense=1)
        elif form == "twice":
            K.add_kernel[(1,)](a, a, out, n, a, BLOCK=16)
        elif form == "grid_raises":
            K.add_kernel[lambda meta: (n // 0,)](a, a, out, n, BLOCK=16)
        elif form == "grid_keyerror":
            K.add_kernel[lambda meta: (meta["missing"],)](a, a, out, n, BLOCK=16)
        elif form == "grid_str":
            K.add_kernel[lambda meta: "abc"](a, a, out, n, BLOCK=16)
        elif form == "grid_none":
            K.add_kernel[None](a, a, out, n, BLOCK=16)
        elif form == "not_power_of_two":
            needs_power_of_two[(1,)](a, out, n, BLOCK=12)
        elif form == "string_pointer":
            K.add_kernel[(1,)](a, "a", out, n, BLOCK=16)
        elif form == "no_grid":
            K.add_kernel(a, a, out, n, BLOCK=16)
        elif form == "run_without_grid":
            K.add_kernel.run(a, a, out, n, BLOCK=16, warmup=False)
        return out
    f.__name__ = f"launch_{form}"
    return f


@pytest.mark.parametrize("form", ["too_many", "too_few", "unknown_kw", "twice", "grid_raises",
                                  "grid_keyerror", "grid_str", "grid_none", "not_power_of_two",
                                  "string_pointer", "no_grid", "run_without_grid"])
def test_kernel_launch_errors_match_eager(form):
    f = _launch(form)
    opt = minidynamo.optimize()(f)
    a = torch.arange(16.0, device=DEVICE)
    for _ in range(2):
        same_outcome(f, opt, a)


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="on a GPU, eager Triton launches a meta tensor's null pointer and the "
                           "illegal memory access poisons the CUDA context for every later test")
def test_kernel_on_a_meta_tensor_fails_like_eager():
    def g(a):
        out = torch.empty_like(a)
        K.add_kernel[(1,)](a, a, out, a.numel(), BLOCK=16)
        return out.shape
    opt = minidynamo.optimize()(g)
    same_outcome(g, opt, torch.ones(4, device="meta"))


_CPU_TENSORS_TO_COMPILED_KERNEL = r"""
import os, sys, traceback
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, sys.argv[1])
import torch, minidynamo
from kernels import capture_kernels as K

def user_launch(a, b):
    o = torch.empty_like(a)
    K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
    return o

outcomes = []
for fn in (user_launch, minidynamo.optimize(user_launch)):
    try:
        fn(torch.ones(64), torch.ones(64))
        outcomes.append(None)
    except Exception as e:
        mine = [(f.name, f.lineno) for f in traceback.extract_tb(e.__traceback__) if f.filename == "<string>"]
        outcomes.append((type(e).__name__, str(e), mine[-1]))
print(outcomes)
assert outcomes[0] is not None and outcomes[0] == outcomes[1], outcomes
print(minidynamo.explain(user_launch)(torch.ones(64), torch.ones(64)))
"""


def test_cpu_tensors_to_a_compiled_kernel_fail_like_eager_at_the_users_line():
    """Compiled (not interpreted) Triton rejects host tensors: the call runs eagerly and
    raises eager's error from the user's line, and explain says why."""
    import os
    import subprocess
    import sys
    tests = os.path.dirname(os.path.abspath(__file__))
    path = [os.path.dirname(tests), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join(p for p in path if p))
    proc = subprocess.run([sys.executable, "-c", _CPU_TENSORS_TO_COMPILED_KERNEL, tests],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ("ValueError: kernel 'add_kernel' argument 'x_ptr' is a cpu tensor; a compiled Triton "
            "kernel needs GPU tensors") in proc.stdout, proc.stdout
