"""What recompiles are reported as: in the user's names (their function and line, the
expression a stack value came from, `self.scale`, a forward's parameter names), every
recompile of the chain of graph breaks included, led by the entry the call came closest to."""
import warnings

import pytest
import torch

import minidynamo
from minidynamo._compat import PY311


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.config.cache_size_limit = 8
    minidynamo.config.error_on_recompile = False


def after_a_break(x):
    s = float(x.max())
    return x * s


def test_recompiles_after_a_break_are_in_guard_failures():
    opt = minidynamo.optimize(after_a_break, dynamic=False)  # each float on the stack a constant
    for i in range(3):
        x = torch.full((3,), float(i))
        torch.testing.assert_close(opt(x), after_a_break(x))
    failures = opt.guard_failures()
    assert len(failures) == 2, failures
    line = after_a_break.__code__.co_firstlineno + 1
    for f in failures:
        assert f.function == "after_a_break"
        assert f.where == f"{__file__}:{line}"
        assert f.resume == f"after the graph break at line {line}"
        assert "___stack" not in f.reason and "___stack" not in f.source
    value = f"the value of `float(x.max())` at line {line}" if PY311 else f"the value on the stack at line {line}"
    assert failures[0].source.startswith(value)
    assert failures[0].reason.startswith(f"{failures[0].source} changed: expected 0.0, actual 1.0")
    assert failures[1].message().startswith(f"recompiling after_a_break after the graph break at line {line} "
                                            f"({__file__}:{line})")


def test_the_cache_limit_warning_after_a_break_names_the_user_function_and_points_at_the_caller():
    minidynamo.config.cache_size_limit = 2
    opt = minidynamo.optimize(after_a_break, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(4):
            x = torch.full((3,), float(i))
            torch.testing.assert_close(opt(x), after_a_break(x))
    (w,) = [w for w in caught if "cache_size_limit" in str(w.message)]
    line = after_a_break.__code__.co_firstlineno + 1
    assert f"after_a_break after the graph break at line {line}" in str(w.message)
    assert "resume_in" not in str(w.message) and "___stack" not in str(w.message)
    assert w.filename == __file__  # the loop's call, not generated code


def test_error_on_recompile_after_a_break_names_the_user_function():
    opt = minidynamo.optimize(after_a_break)
    opt(torch.zeros(3))
    minidynamo.config.error_on_recompile = True
    with pytest.raises(minidynamo.RecompileError, match="recompiling after_a_break after the graph break"):
        opt(torch.ones(3))


def scaled(x):
    return x * 2


def test_the_reason_is_the_closest_entrys_not_the_newest():
    opt = minidynamo.optimize(scaled)
    x = torch.randn(4)
    opt(x)
    opt(x.double())
    x.requires_grad_()
    out = opt(x)
    torch.testing.assert_close(out, scaled(x))
    assert out.requires_grad
    last = opt.guard_failures()[-1]
    # entry 0 differs only in requires_grad; entry 1 (the newest) in dtype and requires_grad
    assert last.entry == 0 and "requires_grad mismatch" in last.reason, last.message()
    assert [o.entry for o in last.others] == [1] and "dtype mismatch" in last.others[0].reason
    lines = last.message().splitlines()
    assert lines[0].endswith("no entry's guards passed; closest:")
    assert lines[1].startswith("  entry 0: tensor 'x' requires_grad mismatch")


def test_a_tie_goes_to_the_newest_entry():
    opt = minidynamo.optimize(scaled, dynamic=False)
    for n in (2, 3, 4):
        opt(torch.randn(n))
    assert opt.guard_failures()[-1].entry == 1  # both differ in one size: the newest


class Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, tokens, mask=None):
        return tokens * self.scale


def test_a_module_is_reported_as_its_forward_with_self_and_parameter_names():
    model = Scaler()
    opt = minidynamo.optimize(model)
    x = torch.randn(3)
    torch.testing.assert_close(opt(x), model(x))
    model.scale = 3.0
    torch.testing.assert_close(opt(x), model(x))
    torch.testing.assert_close(opt(x.double()), model(x.double()))
    first, second = opt.guard_failures()
    where = f"{__file__}:{Scaler.forward.__code__.co_firstlineno}"
    assert first.message() == (f"recompiling Scaler.forward ({where}): self.scale changed: expected 2.0, "
                               "actual 3.0 [guard EQUALS_MATCH self.scale]")
    assert second.reason == "tensor 'tokens' dtype mismatch: expected torch.float32, actual torch.float64"
    assert "api.py" not in first.message() and "closure" not in second.message()


def test_explain_of_a_module_names_its_forward_and_arguments():
    out = minidynamo.explain(Scaler())(torch.randn(3))
    assert out.name == "Scaler.forward"
    assert out.where == f"{__file__}:{Scaler.forward.__code__.co_firstlineno}"
    sources = {g.source for g in out.guards}
    assert {"tokens", "self.scale"} <= sources, sources
    assert not any("closure" in s or "args[" in s for s in sources), sources
    assert str(out).startswith(f"Scaler.forward ({out.where}): 1 graph")


def _raises_after_a_break(x):
    y = x + 1
    print("mid")
    if y.sum() > 0:
        raise ValueError("bad value")
    return y


def test_a_traceback_through_a_resume_function_names_the_users_function():
    # The code after the break runs as a resume function: its frame keeps the user's name
    # (and file and line), so the traceback reads as the eager one does.
    import traceback
    opt = minidynamo.optimize(backend="eager")(_raises_after_a_break)
    for _ in range(2):  # the first call traces, the second runs the cached entries
        with pytest.raises(ValueError, match="bad value") as info:
            opt(torch.ones(3))
        frames = traceback.extract_tb(info.value.__traceback__)
        assert frames[-1].name == "_raises_after_a_break"
        assert frames[-1].line == 'raise ValueError("bad value")'
        assert not any(f.name.startswith("resume_in") for f in frames if not f.filename.startswith("<"))


def _package_frames(exc) -> list:
    import os
    import traceback
    package = os.path.dirname(minidynamo.__file__)
    return [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename.startswith("<minidynamo") or f.filename.startswith(package)]


def _helper_raising(z):
    raise ValueError("from the helper")


def _calls_a_raising_helper(x):
    y = x * 2
    print("mid")
    return _helper_raising(y + 1)


@pytest.mark.parametrize("how", ["function", "module"])
def test_a_users_exception_leaves_with_one_frame_of_the_package(how):
    # Eager shows the user's frames; so does the optimized call, past the one frame where it
    # was entered: no dispatch, cache, guard or resume-driver frames in between.
    import traceback

    class Net(torch.nn.Module):
        def forward(self, x):
            return _calls_a_raising_helper(x)

    opt = minidynamo.optimize(backend="eager")(_calls_a_raising_helper) if how == "function" \
        else minidynamo.optimize(Net(), backend="eager")
    for _ in range(3):  # traced, then cached entries
        with pytest.raises(ValueError, match="from the helper") as info:
            opt(torch.ones(3))
        assert len(_package_frames(info.value)) <= 1, _package_frames(info.value)
        names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
        assert names[-2:] == ["_calls_a_raising_helper", "_helper_raising"]


def test_full_tracebacks_keeps_the_package_frames():
    minidynamo.config.full_tracebacks = True
    try:
        opt = minidynamo.optimize(backend="eager")(_calls_a_raising_helper)
        with pytest.raises(ValueError) as info:
            opt(torch.ones(3))
        assert len(_package_frames(info.value)) > 1
    finally:
        minidynamo.config.full_tracebacks = False


def test_the_packages_own_error_keeps_its_frames():
    # fullgraph=True refusing a break is the package's error: its frames say where.
    opt = minidynamo.optimize(backend="eager", fullgraph=True)(_calls_a_raising_helper)
    with pytest.raises(minidynamo.Unsupported) as info:
        opt(torch.ones(3))
    assert len(_package_frames(info.value)) > 1


def test_a_break_inside_torch_names_the_users_line_that_led_there():
    net = torch.nn.Linear(4, 2)
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)

    def train_step(x):
        sgd.zero_grad()
        loss = net(x).sum()
        loss.backward()
        sgd.step()
        return loss

    report = minidynamo.explain(train_step)(torch.ones(3, 4))
    by_detail = {b.detail: b for b in report.break_reasons}
    # zero_grad is marked by torch itself (torch._disable_dynamo): named as such, at the user's line
    zero = next(b for d, b in by_detail.items() if d.startswith("Optimizer.zero_grad"))
    assert "torch._disable_dynamo" in zero.detail and zero.where.endswith("sgd.zero_grad()")
    # the step's break is inside torch/optim (which decline comes first there depends on
    # torch's version and state): the user's line that called it is named too
    step = next(b for b in report.break_reasons if b.reached_from and b.reached_from.endswith("sgd.step()"))
    assert "torch" in step.where and "called from" in str(report)


@torch._dynamo.disable
def _disabled_hook_body(x):
    return None


def test_a_break_in_a_modules_hook_is_named_without_the_packages_lines():
    # optimize(module) calls the module from a function of the package: the code after a
    # break in the module's hooks is named for the module's call, not by a line of api.py.
    net = torch.nn.Linear(3, 3)
    net.register_forward_pre_hook(lambda mod, args: _disabled_hook_body(args[0]))
    report = minidynamo.explain(net)(torch.ones(2, 3))
    text = str(report)
    assert "after a graph break in the module's call (its hooks)" in text
    assert "api.py" not in text


class Extras(torch.nn.Module):
    def forward(self, x, *rest, **extra):
        for v in rest:
            x = x + v
        for v in extra.values():
            x = x * v
        return x


def test_arguments_past_the_forwards_parameters_read_as_passed():
    # `rest` and `extra` gather what the call passed: args[1] has no parameter of its own,
    # a keyword argument is named by its key.
    opt = minidynamo.optimize(Extras(), dynamic=False)
    opt(torch.ones(3), torch.ones(3), scale=torch.ones(3))
    opt(torch.ones(3), torch.ones(3).double(), scale=torch.ones(3))
    opt(torch.ones(3), torch.ones(3), scale=torch.ones(3).double())
    first, second = opt.guard_failures()
    assert first.reason.startswith("tensor 'args[1]' dtype mismatch"), first.reason
    assert second.source == "scale" and second.reason.startswith("tensor scale dtype mismatch"), second.reason


def test_a_modules_shape_guard_names_the_forwards_parameter_in_every_field():
    opt = minidynamo.optimize(Scaler())
    for n in (2, 3, 1):
        opt(torch.randn(n))
    failure = opt.guard_failures()[-1]
    shape = next(f for f in (failure, *failure.others) if f.kind == "SHAPE_ENV")
    assert shape.reason == "tokens.size(0) = 1: the entry needs 2 <= tokens.size(0)", shape.reason
    assert (shape.source, shape.expected, shape.actual) == ("tokens.size(0)", "2 <= tokens.size(0)",
                                                            "tokens.size(0) = 1")
    assert shape.raw_source == "args[0].size(0)"  # the name the guard runs with


class Accumulate(torch.nn.Module):
    def forward(self, total, step):
        total.add_(step)
        return total * 2


def test_an_aliasing_failure_names_the_forwards_parameters():
    opt = minidynamo.optimize(Accumulate())
    t = torch.zeros(4)
    opt(torch.zeros(4), torch.ones(4))
    opt(t, t)
    (failure,) = opt.guard_failures()
    assert failure.kind == "TENSOR_ALIASING"
    said = "total (written by the graph) and step were separate memory when traced, now the same object"
    assert failure.reason.endswith(said) and failure.actual == said, failure.message()
    assert failure.source == "total, step"


def _closing_over_mod():
    mod = 2.0

    def scale(x):
        return x * mod
    return scale


def test_a_users_closure_called_mod_is_not_the_modules_self():
    # Only the cell that holds the optimized module reads as `self`, not every `mod`.
    scale = _closing_over_mod()

    class Net(torch.nn.Module):
        def forward(self, x):
            return scale(x)

    opt = minidynamo.optimize(Net())
    opt(torch.ones(3))
    scale.__closure__[0].cell_contents = 3.0
    torch.testing.assert_close(opt(torch.ones(3)), torch.full((3,), 3.0))
    (failure,) = opt.guard_failures()
    # `scale` is made per call as far as the guards know: its cell is read through it
    assert failure.reason == "closure 'scale'.__closure__[0].cell_contents changed: expected 2.0, actual 3.0", \
        failure.reason


def test_names_come_from_sources_not_from_rewriting_text():
    import minidynamo.user_names as user_names
    with open(user_names.__file__) as f:
        assert "import re" not in f.read()
