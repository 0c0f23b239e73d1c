"""Context managers traced into the graph: grad mode and autocast regions, nullcontext.
Each function is compared with eager (values, requires_grad, dtypes), on every Python
(the `with` bytecode differs: SETUP_WITH on 3.10, BEFORE_WITH after)."""
import contextlib

import pytest
import torch
from helpers import PY, assert_uses, by_version, check

import minidynamo


def no_grad_region(x):
    with torch.no_grad():
        y = x * 2
    z = x * 3
    return y, z, y.requires_grad, z.requires_grad


def enable_grad_region(x):
    with torch.enable_grad():
        y = x * 2
    return y, y.requires_grad


def set_grad_enabled_context(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y, x * 3


def set_grad_enabled_statement(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y, (y * x).requires_grad


def return_inside_the_block(x):
    with torch.no_grad():
        return x * 2, torch.is_grad_enabled()


def nested(x):
    with torch.no_grad():
        with torch.enable_grad():
            a = x * 2
        b = x * 3
    return a, b


def autocast_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        inner = torch.is_autocast_enabled("cpu")
    return y, y.dtype, (x @ w).dtype, inner


def null_context(x):
    with contextlib.nullcontext(x) as same:
        return same + 1


@torch.no_grad()
def _no_grad_helper(x):
    return x * 5


def decorated_helper(x):
    return _no_grad_helper(x) + x


CASES = [no_grad_region, enable_grad_region, set_grad_enabled_context, set_grad_enabled_statement,
         return_inside_the_block, nested, autocast_region, null_context, decorated_helper]


def _args(fn):
    x = torch.randn(3, 3, requires_grad=True)
    return (x, torch.randn(3, 3)) if fn is autocast_region else (x,)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_traced_like_eager(fn):
    assert_uses(fn, by_version(py310=("SETUP_WITH",), py311=("BEFORE_WITH",), py314=("LOAD_SPECIAL",)),
                nested=False) if fn not in (
        set_grad_enabled_statement, decorated_helper) else None
    check(fn, _args(fn), kind="graph")


def test_enable_grad_under_an_outer_no_grad():
    with torch.no_grad():
        check(enable_grad_region, (torch.randn(2, requires_grad=True),), kind="graph")


def test_the_graph_carries_the_regions():
    out = minidynamo.explain(no_grad_region)(torch.randn(2, requires_grad=True))
    code = out.graphs[0].code
    assert "_set_grad_enabled(False)" in code and "_set_grad_enabled(True)" in code, code
    out = minidynamo.explain(autocast_region)(*_args(autocast_region))
    code = out.graphs[0].code
    assert "_enter_autocast" in code and "_exit_autocast" in code, code


class _Mine:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def other_manager(x):
    with _Mine():
        return x + 1


def stops_inside(x):
    with torch.no_grad():
        with torch.autocast("cpu"):
            print("inside")
            return x * 2


def test_user_managers_are_traced_and_a_stopped_trace_leaves_no_state():
    # A class with __enter__/__exit__ in Python is made and entered in the trace
    # (tests/test_user_objects.py has the rest).
    check(other_manager, (torch.ones(2),), kind="graph")
    before = (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"))
    # The print breaks the graph inside both regions.
    check(stops_inside, (torch.ones(2),), kind="break", reason="side_effect")
    assert (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")) == before


@contextlib.contextmanager
def _grad_off(scale):
    with torch.no_grad():
        yield scale * 2


def generator_context(x):
    with _grad_off(3) as s:
        y = x * s
    return y, x * 2, torch.is_grad_enabled()


@contextlib.contextmanager
def _device_context(device):
    """liger-kernel's helper: the device's own context where its backend has one."""
    device = torch.device(device)
    backend = getattr(torch, device.type, None)
    if backend is not None and hasattr(backend, "device"):
        with backend.device(device):
            yield
    else:
        yield


def library_device_context(x):
    with _device_context(x.device):
        return x + 1


def cuda_device_noop(x):
    with torch.cuda.device(-1):  # a negative index selects nothing, as in eager
        return x * 3


@contextlib.contextmanager
def _with_cleanup():
    try:
        yield
    finally:
        print("cleanup")


def generator_with_finally(x):
    with _with_cleanup():
        return x + 1


@pytest.mark.parametrize("fn", [generator_context, library_device_context, cuda_device_noop],
                         ids=lambda f: f.__name__)
def test_generator_and_device_contexts(fn):
    check(fn, torch.randn(3, requires_grad=True), kind="graph")


def test_a_contextmanager_with_try_finally_runs_eagerly():
    # The print in its finally block declines in the with block's exit: the frame breaks
    # at that call, which leaves a generator resumed at its yield (3.10: eager, whole).
    check(generator_with_finally, torch.ones(2), kind="break" if PY >= (3, 11) else "eager",
          reason="side_effect")
