"""More context managers traced as regions: user classes whose __enter__/__exit__ set grad
mode through torch._C._set_grad_enabled or torch.set_grad_enabled, the profiler's
record_function, managers handed in as arguments (torch's grad-mode objects, user
objects), and @contextlib.contextmanager applied inside the traced function. Each is
compared with eager (values, printed output, the arguments' state after the call) and the
grad mode after the call."""
import contextlib

import pytest
import torch
from helpers import check

import minidynamo


class GradOffC:
    def __enter__(self):
        self.prev = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prev)
        return False


class GradMode:
    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.prev = torch.is_grad_enabled()
        torch.set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        torch.set_grad_enabled(self.prev)


def user_c_manager(x):
    with GradOffC() as cm:
        y = x * 2
        inside = torch.is_grad_enabled()
    return y, x * 3, inside, cm.prev, torch.is_grad_enabled()


def user_python_manager(x):
    with GradMode(False):
        y = x * 2
        with GradMode(True):
            z = x * 4
    return y, z, x * 3


def user_manager_break_inside(x):
    with GradOffC():
        y = x * 2
        print("inside", torch.is_grad_enabled())
        z = y * x
    return y, z, x + 1


def set_grad_enabled_bad_mode(x):
    torch._C._set_grad_enabled(1)
    return x + 1


def record_function_region(x):
    with torch.profiler.record_function("scale") as rf:
        y = x * 2
    with torch.autograd.profiler.record_function("shift", "extra"):
        z = y + 1
    return z, rf.name


def record_function_break_inside(x):
    with torch.profiler.record_function("scale"):
        y = x * 2
        print("inside")
        z = y + 1
    return z


def manager_argument(x, ctx):
    with ctx:
        y = x * 2
        inside = torch.is_grad_enabled()
    return y, x * 3, inside


def contextmanager_defined_inside(x):
    @contextlib.contextmanager
    def scaled(s):
        with torch.no_grad():
            yield s * 2

    with scaled(3) as s:
        y = x * s
    return y, x * 2, torch.is_grad_enabled(), scaled.__name__


def contextmanager_defined_inside_with_finally(x):
    log = []

    @contextlib.contextmanager
    def logged():
        try:
            log.append("enter")
            yield
        finally:
            log.append("exit")

    with logged():
        y = x + 1
    return y, log


def _grad_after(fn, *args):
    """Grad mode after an eager and an optimized call (each from grad on)."""
    torch.set_grad_enabled(True)
    fn(*args)
    eager = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    minidynamo.optimize(backend=lambda gm, ex: gm.forward)(fn)(*args)
    opt = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    return eager, opt


@pytest.mark.parametrize("fn", [user_c_manager, user_python_manager, record_function_region,
                                contextmanager_defined_inside, contextmanager_defined_inside_with_finally],
                         ids=lambda f: f.__name__)
def test_traced_in_one_graph(fn):
    x = torch.randn(3, requires_grad=True)
    info = check(fn, (x,), kind="graph")
    assert info.graphs == 1
    eager, opt = _grad_after(fn, x)
    assert eager == opt is True


def test_user_manager_region_is_in_the_graph():
    out = minidynamo.explain(user_c_manager)(torch.randn(2, requires_grad=True))
    code = out.graphs[0].code
    assert "_set_grad_enabled(False)" in code and "_set_grad_enabled(True)" in code, code


def test_a_break_inside_a_user_manager_region():
    x = torch.randn(3, requires_grad=True)
    check(user_manager_break_inside, (x,), kind="break", reason="side_effect")
    eager, opt = _grad_after(user_manager_break_inside, x)
    assert eager == opt is True


def test_a_break_inside_record_function():
    check(record_function_break_inside, (torch.randn(3),), kind="break", reason="side_effect", graphs=2)


def test_set_grad_enabled_of_a_non_bool_raises_as_eager():
    check(set_grad_enabled_bad_mode, (torch.randn(2),), kind="break", reason="exceptions")


@pytest.mark.parametrize("make", [torch.no_grad, torch.enable_grad, lambda: GradOffC(), lambda: GradMode(False),
                                  lambda: contextlib.nullcontext()],
                         ids=["no_grad", "enable_grad", "user_c", "user_python", "nullcontext"])
def test_a_manager_passed_in(make):
    x = torch.randn(3, requires_grad=True)
    # Two objects of one class: one entry (guarded by type, not identity).
    check(manager_argument, (x, make()), (x, make()), kind="graph", graphs=1)
    with torch.no_grad():
        check(manager_argument, (x, make()), kind="graph")
    eager, opt = _grad_after(manager_argument, x, make())
    assert eager == opt is True


def test_set_grad_enabled_object_passed_in():
    # Made before the call, it has already set the mode; its exit puts back the mode it
    # found when made.
    x = torch.randn(3, requires_grad=True)
    try:
        check(manager_argument, (x, torch.set_grad_enabled(False)), kind="graph")
        torch.set_grad_enabled(True)
        cm = torch.set_grad_enabled(False)
        y = minidynamo.optimize(backend=lambda gm, ex: gm.forward)(manager_argument)(x, cm)
        assert torch.is_grad_enabled() is True and y[2] is False
    finally:
        torch.set_grad_enabled(True)


def test_a_manager_of_another_class_recompiles():
    backend = _Counting()
    opt = minidynamo.optimize(backend=backend)(manager_argument)
    x = torch.randn(2, requires_grad=True)
    a = opt(x, torch.no_grad())
    b = opt(x, torch.enable_grad())
    assert a[2] is False and b[2] is True and not a[0].requires_grad and b[0].requires_grad
    assert backend.calls == 2 and len(opt.cache_entries()) == 2


class _Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        return gm.forward


def test_a_break_inside_a_contextmanager_defined_inside():
    def f(x):
        @contextlib.contextmanager
        def off():
            with torch.no_grad():
                yield

        with off():
            y = x * 2
            print("inside")
        return y, x * 3

    # Its generator function exists only in the trace: it cannot be resumed after a break.
    check(f, (torch.randn(3, requires_grad=True),), kind="eager")
