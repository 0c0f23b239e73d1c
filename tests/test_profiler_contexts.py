"""The profiler's `profile` contexts made in the traced function: torch.profiler.profile(...)
and torch.autograd.profiler.profile(...) are no-op regions, as under torch.compile (the
profiler is not started; the region's work goes into the graph). A graph break inside one
(alone or around a record_function) splits the function as a nullcontext is split. The
object the `with` gives cannot be read in a trace: reading it declines. A profiler given an
`on_trace_ready` callback is not a no-op: the callback runs as in eager. Each is compared
with eager (values, printed output)."""
import contextlib
import io

import pytest
import torch
from helpers import check

import minidynamo


def profile_region(x):
    y = x ** 2
    with torch.profiler.profile():
        y = y + 2
        with torch.profiler.record_function("my_function"):
            z = y ** 3
    return z + 1


def autograd_profile_region(x):
    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        y = x * 2
    del prof
    return y - 1


def profile_with_arguments(x):
    acts = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=acts, record_shapes=True, with_stack=False):
        y = x.sin()
    return y, len(acts)


def profile_break_inside(x):
    y = x ** 2
    with torch.profiler.profile():
        y = y + 2
        with torch.profiler.record_function("my_function"):
            z = y ** 3
            z.tolist()
            z = z + 1
    return z


def autograd_profile_break_inside(x):
    y = x ** 2
    with torch.autograd.profiler.profile():
        y = y + 2
        with torch.autograd.profiler.record_function("my_function"):
            z = y ** 3
            print("inside")
            z = z + 1
    return z


def profile_object_read(x):
    with torch.profiler.profile() as prof:
        y = x + 1
    return y, prof.events() is not None


def profile_object_type(x):
    with torch.autograd.profiler.profile() as prof:
        y = x + 1
    return y, type(prof).__name__


def profile_object_returned(x):
    with torch.autograd.profiler.profile() as prof:
        y = x + 1
    return y, prof


@pytest.mark.parametrize("fn", [profile_region, autograd_profile_region, profile_with_arguments,
                                profile_object_type],
                         ids=lambda f: f.__name__)
def test_profile_region_traces_in_one_graph(fn):
    x = torch.randn(2, 2, requires_grad=True)
    info = check(fn, (x,), (torch.randn(2, 2, requires_grad=True),), kind="graph")
    assert info.graphs == 1


def test_a_data_dependent_break_inside_profile_regions():
    check(profile_break_inside, (torch.randn(2, 2, requires_grad=True),), kind="break", reason="data_dependent",
          graphs=2)


def test_a_print_inside_autograd_profile_regions():
    check(autograd_profile_break_inside, (torch.randn(2, 2),), kind="break", reason="side_effect", graphs=2)


@pytest.mark.parametrize("fn", [profile_object_read, profile_object_returned], ids=lambda f: f.__name__)
def test_the_profile_object_is_never_read_in_a_trace(fn):
    opt = minidynamo.optimize(backend="eager")(fn)
    x = torch.randn(3)
    got = opt(x)
    expected = fn(x)
    assert torch.equal(got[0], expected[0]) and type(got[1]) is type(expected[1])
    entries = opt.cache_entries()
    assert entries and all(e.kind != "graph" for e in entries), [e.kind for e in entries]
    with pytest.raises(minidynamo.Unsupported):
        minidynamo.optimize(backend="eager", fullgraph=True)(fn)(x)


def test_the_profiler_is_left_as_it_was():
    x = torch.randn(3)
    minidynamo.optimize(backend="eager")(profile_break_inside)(x)
    assert not torch.autograd.profiler._is_profiler_enabled


def profile_with_callback(x):
    with torch.profiler.profile(on_trace_ready=lambda p: print("ready")):
        y = x * 2
    return y + 1


def test_a_profiler_callback_runs_as_in_eager():
    # its callback is user code the profiler runs when it stops: not a no-op region
    opt = minidynamo.optimize(backend="eager")(profile_with_callback)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        got = opt(torch.ones(2))
    assert out.getvalue() == "ready\n"
    assert torch.equal(got, profile_with_callback(torch.ones(2)))
    assert all(e.kind != "graph" or e.resumes for e in opt.cache_entries())
