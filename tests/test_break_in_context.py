"""Graph breaks inside with regions: the graph leaves the regions it entered, the entry
enters them again for real, the native instruction runs inside them and the resume
function goes on inside them; each region's exit runs once, with the exception the
block raised (a suppressing exit suppresses). Compared with eager: results, exceptions,
printed output (what the native code sees of grad mode, autocast, inference mode), the
arguments after the call (logs of a user manager's enter/exit), torch's state after the
call (also after an exception), and the number of graphs compiled."""
from __future__ import annotations

import contextlib
import copy
import io
import sys

import pytest
import torch

import minidynamo
from helpers import Args, CountingBackend, check, entry_tree

PY = sys.version_info[:2]
KIND = "break"
# 3.10: a generator starts with GEN_START; one made again at its yield is not (yet):
# a break inside a @contextmanager's region runs the call eagerly there.
GEN_KIND = "break" if PY >= (3, 11) else "eager"


class Boom(Exception):
    pass


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 4)), generator=g)


def torch_state() -> tuple:
    """What a with region may change, read for real (autocast's nesting depth too)."""
    torch.autocast_increment_nesting()
    nesting = torch.autocast_decrement_nesting()
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu"),
            torch.get_autocast_dtype("cpu"), torch.is_autocast_cache_enabled(), nesting)


def report(tag):
    """Declined (it prints): the frame breaks at its call, and it runs in the real state."""
    print(tag, torch_state())


def fail(tag):
    print(tag, torch_state())
    raise Boom(f"failed in {tag}")


def check_break(fn, *args, graphs=None, kind=KIND, reason=None):
    """check() with the printed output swallowed (it is compared), then the state after
    the call, from grad mode on, compared with eager's (an exception is the user's)."""
    with contextlib.redirect_stdout(io.StringIO()):
        info = check(fn, Args(*args), kind=kind, graphs=graphs if kind == "break" else None, reason=reason)
    same_state_after(fn, *args)
    return info


def same_state_after(fn, *args):
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    after = []
    for f in (fn, opt, opt):
        torch.set_grad_enabled(True)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            try:
                f(*copy.deepcopy(args))
                raised = None
            except Exception as e:  # noqa: BLE001 - the user's exception: compared
                raised = (type(e), str(e))
        after.append((raised, out.getvalue(), torch_state()))
    torch.set_grad_enabled(True)
    assert after[1] == after[0] and after[2] == after[0], after


# --- each manager, with a declined call inside ---------------------------------------------
def in_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        report("no_grad")
        w = z * y
    return w, y + w, w.requires_grad, torch.is_grad_enabled()


def in_enable_grad(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = x * y
            report("enable_grad")
            w = z + x
        v = w * 2
    return v, w, v.requires_grad, w.requires_grad


def in_set_grad_enabled(x):
    with torch.set_grad_enabled(False):
        y = x * 2
        report("set_grad_enabled")
    return y, x * 3


def in_autocast(x):
    y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ x
        report("autocast")
        w = z @ y
    return w, y @ w.float(), torch.is_autocast_enabled("cpu")


def in_autocast_disabled(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ x
        with torch.autocast("cpu", enabled=False):
            b = x @ x
            report("autocast off")
            c = b @ x
        d = c @ x
    return a, b, c, d


def in_inference_mode(x):
    y = x * 2
    with torch.inference_mode():
        z = y + 1
        report("inference")
        w = z * 2
    return w, w.is_inference(), y.is_inference(), (y * 3).requires_grad


def in_inference_mode_false(x):
    with torch.inference_mode():
        a = x + 1
        with torch.inference_mode(False):
            b = x * 2
            report("inference off")
            c = b + 1
    return a, b, c, [v.is_inference() for v in (a, b, c)], c.requires_grad


def in_cuda_device(x):
    # Triton libraries enter the tensor's device; a CPU tensor has no index (see below).
    with torch.cuda.device(x.device.index if x.is_cuda else -1):
        y = x * 2
        report("cuda.device")
        z = y + 1
    return z


def cuda_device_of_a_cpu_tensor(x):
    with torch.cuda.device(x.device.index):
        y = x * 2
        report("cuda.device(None)")
    return y


def test_cuda_device_without_an_index():
    # torch.cuda.device(None) selects the current device where CUDA is available (nothing
    # changes); where it is not, torch's __enter__ raises TypeError: the call runs eagerly.
    if torch.cuda.is_available():
        check_break(cuda_device_of_a_cpu_tensor, t())
    else:
        check_break(cuda_device_of_a_cpu_tensor, t(), kind="eager", reason="exceptions")


def in_cuda_device_negative(x):
    with torch.cuda.device(-1):
        y = x * 2
        report("cuda.device(-1)")
    return y + 1


def in_nullcontext(x):
    with contextlib.nullcontext(x * 2) as y:
        report("nullcontext")
        z = y + 1
    return z


@pytest.mark.parametrize("fn", [in_no_grad, in_enable_grad, in_set_grad_enabled, in_autocast, in_autocast_disabled,
                                in_inference_mode, in_inference_mode_false, in_cuda_device,
                                in_cuda_device_negative, in_nullcontext], ids=lambda f: f.__name__)
def test_a_declined_call_inside_each_manager(fn):
    check_break(fn, t().requires_grad_())


def test_graphs_around_an_autocast_break():
    # The graph before the print; the resume function's, up to the with block's end (the
    # real manager's exit runs natively: a break of its own); the one after the block.
    info = check_break(in_autocast, t().requires_grad_(), graphs=3)
    graph = info.backend.graphs[0].graph
    targets = [n.target.__name__ for n in graph.nodes if n.op == "call_function"
               and "autocast" in getattr(n.target, "__name__", "")]
    assert targets == ["_enter_autocast", "_exit_autocast"]  # the graph leaves what it entered
    kinds = [e.kind for e in entry_tree(info.opt)]  # the function's own chain
    assert kinds == ["break", "break", "graph"], kinds


def test_a_grad_mode_break_graph_is_balanced():
    info = check_break(in_no_grad, t().requires_grad_(), graphs=2)
    modes = [n.args[0] for n in info.backend.graphs[0].graph.nodes if n.target is torch._C._set_grad_enabled]
    assert modes == [False, True]


def print_inside_no_grad(x):
    y = x * 2
    with torch.no_grad():
        print("inside", y.shape)  # print itself declines: the frame breaks at it
        z = y + 1
    return z, z.requires_grad


def c_call_inside_autocast(x):
    import zlib
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        n = zlib.crc32(b"abc") % 7  # a C function the trace does not call
        z = y @ x * n
    return z


@pytest.mark.parametrize("fn", [print_inside_no_grad, c_call_inside_autocast], ids=lambda f: f.__name__)
def test_print_and_c_calls(fn):
    check_break(fn, t().requires_grad_())


# --- exceptions ---------------------------------------------------------------------------
def raises_in_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        fail("no_grad")
    return z


def raises_in_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        fail("autocast")
    return y


def raises_in_inference_mode(x):
    with torch.inference_mode():
        y = x + 1
        fail("inference")
    return y


def raises_in_nested(x):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.inference_mode():
            y = x @ x
            fail("nested")
    return y


def raises_after_the_break(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        report("before")
        if y.shape[0] == 4:
            raise Boom("after the break")  # in the resume function
    return y


@pytest.mark.parametrize("fn", [raises_in_no_grad, raises_in_autocast, raises_in_inference_mode,
                                raises_in_nested, raises_after_the_break], ids=lambda f: f.__name__)
def test_an_exception_passes_through_the_real_exits(fn):
    check_break(fn, t().requires_grad_())


def test_the_traceback_names_the_user_line():
    opt = minidynamo.optimize(backend=CountingBackend())(raises_in_autocast)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(Boom) as info:
        opt(t())
    lines = [frame.lineno for frame in info.traceback if frame.name == "raises_in_autocast"]
    assert raises_in_autocast.__code__.co_firstlineno + 3 in [n + 1 for n in lines], lines


# --- user managers: exits once, with the exception, suppressing ---------------------------------
class Logged:
    """Logs enter and exit (with the exception type) into a list passed in."""

    def __init__(self, log, name, suppress=False):
        self.log, self.name, self.suppress = log, name, suppress

    def __enter__(self):
        self.log.append(("enter", self.name))
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", self.name, exc_type.__name__ if exc_type else None,
                         str(exc) if exc is not None else None))
        return self.suppress


def user_manager(x, log):
    with Logged(log, "a"):
        y = x * 2
        report("user")
        z = y + 1
    return z


def user_manager_raises(x, log):
    with Logged(log, "a"):
        y = x * 2
        fail("user")
    return y


def user_manager_suppresses(x, log):
    y = x * 2
    with Logged(log, "outer"):
        with Logged(log, "inner", suppress=True):
            y = y + 1
            fail("suppressed")
            y = y * 100  # not reached
        y = y * 3  # reached: the inner exit suppressed
    return y


def user_manager_suppresses_later(x, log):
    y = x * 2
    with Logged(log, "s", suppress=True):
        report("first")
        y = y + 1
        fail("later")
    return y - 1


def user_manager_around_autocast(x, log):
    with Logged(log, "outer"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            fail("mixed")
    return y


@pytest.mark.parametrize("fn", [user_manager, user_manager_raises, user_manager_suppresses,
                                user_manager_suppresses_later, user_manager_around_autocast],
                         ids=lambda f: f.__name__)
def test_user_managers(fn):
    check_break(fn, t().requires_grad_(), [])


# --- nesting, loops, returns, jumps ------------------------------------------------------------
def nested_managers(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ x
        with torch.no_grad():
            b = a @ x
            with torch.inference_mode():
                c = x + 1
                report("innermost")
                d = c * 2
            report("middle")
            e = b @ x
        report("outer")
        f = a @ a
    return a, b, d, e, f, d.is_inference()


def statement_inside_inference_mode(x):
    with torch.inference_mode():
        torch.set_grad_enabled(True)  # grad on inside inference mode, as eager allows
        y = x + 1
        report("grad on in inference")
        z = y * 2
    return z, torch.is_grad_enabled()


def loop_with_break_inside(x):
    for i in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            x = x @ x
            report(f"step {i}")
        x = x.float() / 4
    return x


def return_from_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        report("returning")
        return y @ x


def return_from_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        report("returning")
        return y + 1, torch.is_grad_enabled()


def tensor_condition_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        if y.sum() > 0:  # a jump on a tensor value: both ways resume inside the region
            z = y @ x
        else:
            z = y @ y
    return z


@pytest.mark.parametrize("fn", [nested_managers, statement_inside_inference_mode, loop_with_break_inside,
                                return_from_inside, return_from_inside_no_grad],
                         ids=lambda f: f.__name__)
def test_nesting_loops_returns(fn):
    check_break(fn, t().requires_grad_())


def test_a_jump_on_a_tensor_inside_a_region():
    check_break(tensor_condition_inside, t(), kind=KIND, reason="data_dependent")
    check_break(tensor_condition_inside, -t().abs(), kind=KIND, reason="data_dependent")


def test_under_an_outer_state():
    # The same function called inside regions entered around the optimized call: the
    # exits restore that outer state.
    opt = minidynamo.optimize(backend=CountingBackend())(nested_managers)
    for outer in (torch.no_grad, torch.enable_grad, lambda: torch.autocast("cpu", enabled=False)):
        states = []
        for f in (nested_managers, opt, opt):
            with outer(), contextlib.redirect_stdout(io.StringIO()) as out:
                result = f(t())
                states.append((out.getvalue(), torch_state(), [r.dtype for r in result[:-1]]))
        assert states[1] == states[0] and states[2] == states[0], states


# --- decorators and library-style helpers --------------------------------------------------------
def device_guard(fn):
    """A decorator entering the tensor's device around the call, as Triton libraries do."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tensor = next(a for a in args if isinstance(a, torch.Tensor))
        with torch.cuda.device(tensor.device.index if tensor.is_cuda else -1):
            return fn(*args, **kwargs)
    return wrapper


@device_guard
def guarded_op(x, y):
    z = x * y
    report("guarded")
    return z + 1


def calls_a_guarded_op(x):
    return guarded_op(x, x + 1) * 2


def test_a_decorator_entering_the_device():
    # The decline is inside the decorated call: the frame breaks at the call and the
    # wrapper runs optimized on its own, breaking inside its with block.
    info = check_break(calls_a_guarded_op, t(), kind="break")
    kinds = [e.kind for e in info.tree]
    assert kinds.count("break") >= 2, kinds


def test_tree_kinds_of_a_nested_break():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(in_inference_mode)
    with contextlib.redirect_stdout(io.StringIO()):
        opt(t())
    assert [e.kind for e in entry_tree(opt)][0] == "break"


# --- @contextlib.contextmanager generators: resumed at their yield -----------------------------
@contextlib.contextmanager
def logged_generator(log, k, catch=()):
    log.append(("enter", k))
    try:
        with torch.no_grad():  # a region of the generator's own, open at its yield
            yield k * 2
    except catch as e:
        log.append(("caught", type(e).__name__, str(e)))
    finally:
        log.append(("exit", k, torch.is_grad_enabled()))


@contextlib.contextmanager
def grad_off_by_statement():
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    try:
        yield prev
    finally:
        torch.set_grad_enabled(prev)


@contextlib.contextmanager
def device_of(x):
    """A library helper over torch's manager (cf. liger-kernel, flash-linear-attention)."""
    with torch.cuda.device(x.device.index if x.is_cuda else -1):
        yield


@contextlib.contextmanager
def prints_on_exit(tag):
    yield
    print("leaving", tag, torch_state())


def generator_manager(x, log):
    with logged_generator(log, 3) as s:
        y = x * s
        report("in generator")
        z = y + 1
    return z, z.requires_grad


def generator_manager_suppresses(x, log):
    y = x + 1
    with logged_generator(log, 3, catch=Boom) as s:
        y = x * s
        fail("caught by the generator")
    return y


def generator_manager_raises_on(x, log):
    with logged_generator(log, 3, catch=ValueError) as s:
        y = x * s
        fail("not caught")
    return y


def generator_manager_by_statement(x):
    with grad_off_by_statement() as prev:
        y = x * 2
        report("grad off by a statement")
        z = y * 3
    return z, prev, z.requires_grad


def generator_inside_autocast(x, log):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with logged_generator(log, 1) as s:
            y = x @ x
            with torch.inference_mode():
                report("three deep")
                z = y * s
    return y, z


def device_helper(x):
    with device_of(x):
        y = x * 2
        report("device helper")
    return y + 1


def exit_prints(x):
    with prints_on_exit("block"):
        y = x * 2
    return y  # the exit's print declines: the frame breaks at the exit call


@pytest.mark.parametrize("fn", [generator_manager, generator_manager_suppresses, generator_manager_raises_on,
                                generator_inside_autocast], ids=lambda f: f.__name__)
def test_contextmanager_generators_with_a_log(fn):
    check_break(fn, t().requires_grad_(), [], kind=GEN_KIND)


@pytest.mark.parametrize("fn", [generator_manager_by_statement, device_helper, exit_prints],
                         ids=lambda f: f.__name__)
def test_contextmanager_generators(fn):
    check_break(fn, t().requires_grad_(), kind=GEN_KIND)


# --- a Triton library's op: the device entered around a launch, a print inside ----------------
def current_device():
    return torch.cuda.current_device() if torch.cuda.is_available() else None


def report_device(tag):
    print(tag, current_device(), torch_state())


def _launch_op():
    from kernels.capture_kernels import add_kernel, triton

    @device_guard
    def add(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 16),)](x, y, out, n, BLOCK=16)
        report_device("launched")
        return out * 2

    return add


ADD = _launch_op()


def calls_a_launching_op(x):
    y = x + 1
    return ADD(x, y) + ADD(y, x)


def device_region_in_frame(x):
    with torch.cuda.device(x.device.index if x.is_cuda else -1):
        y = x * 2
        report_device("in frame")
        z = y + 1
    report_device("after")
    return z


def test_a_launching_op_inside_the_device_region():
    from kernels.capture_kernels import DEVICE
    x = torch.randn(40, device=DEVICE)
    check_break(calls_a_launching_op, x, kind="break")
    check_break(device_region_in_frame, x)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_device_is_switched_for_the_native_code():
    # The tensor on the last GPU, the current device the first: inside the region the
    # native code sees the tensor's device, after it the first again (one GPU: both 0).
    last = torch.cuda.device_count() - 1
    x = torch.randn(40, device=f"cuda:{last}")
    torch.cuda.set_device(0)
    check_break(device_region_in_frame, x)
    check_break(calls_a_launching_op, x, kind="break")
    assert torch.cuda.current_device() == 0


def test_explain_reports_the_breaks_of_a_region():
    with contextlib.redirect_stdout(io.StringIO()):
        report_text = str(minidynamo.explain(in_autocast)(t()))
    assert "graph break" in report_text and "print() writes output" in report_text, report_text
    assert "leaving autocast" in report_text, report_text  # the resume function's own break


def loop_inside_a_region(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for i in range(3):
            x = x @ x / 4
            report(f"step {i}")
    return x


def long_loop_inside_a_region(x):
    # More iterations than cache_size_limit: the later ones run the resume function
    # eagerly, still inside the real manager.
    with torch.no_grad():
        for i in range(12):
            x = x * 1.5
            report(f"step {i}")
    return x, x.requires_grad


class PrintsOnExit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        print("leaving", torch_state())
        return False


def user_exit_declines(x):
    with PrintsOnExit():
        with torch.no_grad():
            y = x * 2
    return y  # the exit's print: the frame breaks at the exit call


@pytest.mark.parametrize("fn", [loop_inside_a_region, long_loop_inside_a_region, user_exit_declines],
                         ids=lambda f: f.__name__)
def test_loops_and_exits_that_decline(fn):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cache-limit warning of the long loop
        check_break(fn, t().requires_grad_())
