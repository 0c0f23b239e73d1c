"""Module hooks are read on every call, as Module.__call__ reads them: adding one after
the first call recompiles, removing it goes back to the first entry. Forward hooks and
pre-hooks (the module's own and the process-wide ones) are traced in the graph as
`Module._call_impl` runs them; backward hooks are not (the module's call breaks and runs
natively, hooks and all)."""
import pytest
import torch
from helpers import CountingBackend, check, same

import minidynamo


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.relu(self.inner(x))


def run(model, x):
    return model(x) * 2


def _register(kind, module, calls):
    if kind == "forward":
        return module.register_forward_hook(lambda m, i, o: (calls.append(1), o * 0)[1])
    if kind == "forward_pre":
        return module.register_forward_pre_hook(lambda m, i: (calls.append(1), (i[0] + 100,))[1])
    if kind == "global_forward":
        return torch.nn.modules.module.register_module_forward_hook(
            lambda m, i, o: (calls.append(1), o + 5)[1])
    if kind == "global_forward_pre":
        return torch.nn.modules.module.register_module_forward_pre_hook(
            lambda m, i: (calls.append(1), None)[1])
    if kind == "full_backward":
        return module.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    raise AssertionError(kind)


@pytest.mark.parametrize("on", ["outer", "inner"])
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "global_forward", "global_forward_pre",
                                  "full_backward"])
def test_a_hook_added_after_the_first_call_is_honoured(kind, on):
    torch.manual_seed(0)
    model, x = Block(), torch.randn(2, 3, requires_grad=True)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    same(opt(model, x), run(model, x))
    eager_calls, opt_calls = [], []
    target = model if on == "outer" else model.inner
    handle = _register(kind, target, eager_calls)
    try:
        want = run(model, x)
        want.sum().backward()
        handle.remove()
        handle = _register(kind, target, opt_calls)
        got = opt(model, x)
        got.sum().backward()
        same(got, want)
        assert len(opt_calls) == len(eager_calls) > 0
        failure = opt.guard_failures()[-1]
        assert "now has hooks" in failure.reason and failure.kind == "NO_HOOKS", failure
        assert opt.cache_entries()[-1].kind == ("break" if kind == "full_backward" else "graph")
    finally:
        handle.remove()
    entries = len(opt.cache_entries())
    same(opt(model, x), run(model, x))  # hook removed: the first entry serves again
    assert len(opt.cache_entries()) == entries and opt.cache_entries()[0].hit_count == 3


def test_module_with_a_hook_at_first_call_is_one_graph():
    model, x = Block(), torch.randn(2, 3)
    calls = []
    handle = model.register_forward_hook(lambda m, i, o: (calls.append(1), o - 1)[1])
    try:
        opt = minidynamo.optimize(backend=CountingBackend())(run)
        same(opt(model, x), run(model, x))
        assert len(calls) == 2
        same(opt(model, x), run(model, x))  # cache hit
        assert len(calls) == 4
        (entry,) = opt.cache_entries()
        assert entry.kind == "graph" and entry.hit_count == 2
    finally:
        handle.remove()


class Scaled(Block):
    """A module whose class overrides __call__: calling it is not calling forward."""

    def __call__(self, x):
        return Block.forward(self, x) * 10


def test_a_module_class_overriding_call_is_not_called_as_forward():
    model, x = Scaled(), torch.randn(2, 3)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    same(opt(model, x), run(model, x))


# --- hooks traced as Module._call_impl runs them ------------------------------------------
class Scale(torch.nn.Module):
    """A forward with a keyword argument, so hooks with kwargs have something to see."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


def _hooked(register, cls=Block):
    """A module of `cls` with the hooks `register(module)` adds: they live in its hook dicts
    (deep-copied with it by `check`, the hook functions shared)."""
    torch.manual_seed(0)
    model = cls()
    register(model)
    return model


def _checked(fn, model, *args, calls=None, per_call=None, **kw):
    """check() one graph; where `calls` (a list the hooks append to) is given, every run
    (eager, two optimized calls, fullgraph) ran the hooks `per_call` times, not more."""
    if calls is not None:
        calls.clear()
    info = check(fn, (model, *args) if model is not None else args, kind=kw.pop("kind", "graph"), **kw)
    if calls is not None:
        assert len(calls) == 4 * per_call, calls
    return info


def test_forward_hook_replacing_the_output_is_traced():
    model = _hooked(lambda m: m.register_forward_hook(lambda mod, args, out: out * 3 + args[0]))
    info = _checked(run, model, torch.randn(2, 3))
    assert "add" in str(info.backend.graphs[0].code)


def test_forward_hook_returning_none_keeps_the_output():
    calls = []
    model = _hooked(lambda m: m.register_forward_hook(lambda mod, args, out: calls.append(out.shape[0])))
    _checked(run, model, torch.randn(2, 3), calls=calls, per_call=1)
    assert calls == [2, 2, 2, 2]


def test_forward_hook_with_kwargs_sees_the_keywords():
    def hook(mod, args, kwargs, out):
        return out + kwargs["scale"] * args[0]

    model = _hooked(lambda m: m.register_forward_hook(hook, with_kwargs=True), Scale)
    _checked(lambda m, x: m(x, scale=5.0), model, torch.randn(2, 3))


def test_prepend_puts_a_hook_first():
    def register(m):
        m.register_forward_hook(lambda mod, args, out: out * 2)
        m.register_forward_hook(lambda mod, args, out: out + 1, prepend=True)
        m.register_forward_pre_hook(lambda mod, args: args[0] * 10)
        m.register_forward_pre_hook(lambda mod, args: (args[0] - 1,), prepend=True)

    model, x = _hooked(register), torch.randn(2, 3)
    _checked(run, model, x)
    # (relu(inner((x - 1) * 10)) + 1) * 2: the order matters, and is torch's
    want = (torch.relu(model.inner((x - 1) * 10)) + 1) * 2 * 2
    same(run(model, x), want)


@pytest.mark.parametrize("returns", ["tuple", "value", "none"])
def test_pre_hook_replaces_the_arguments(returns):
    def hook(mod, args):
        if returns == "tuple":
            return (args[0] + 100,)
        if returns == "value":  # a non-tuple result is the one argument
            return args[0] * -1
        return None

    model, x = _hooked(lambda m: m.register_forward_pre_hook(hook)), torch.randn(2, 3)
    _checked(run, model, x)
    changed = {"tuple": x + 100, "value": -x, "none": x}[returns]
    same(run(model, x), torch.relu(model.inner(changed)) * 2)


def test_pre_hook_with_kwargs_replaces_args_and_kwargs():
    def hook(mod, args, kwargs):
        return (args[0] + 1,), {**kwargs, "scale": kwargs["scale"] * 3}

    def in_place(mod, args, kwargs):  # changes the dict it was given, returns None
        kwargs["scale"] = kwargs["scale"] + 1

    def register(m):
        m.register_forward_pre_hook(hook, with_kwargs=True)
        m.register_forward_pre_hook(in_place, with_kwargs=True)

    model, x = _hooked(register, Scale), torch.randn(2, 3)
    _checked(lambda m, x: m(x, scale=2.0), model, x)
    same(model(x, scale=2.0), model.lin(x + 1) * 7.0)


def test_pre_hook_with_kwargs_returning_a_bad_value_raises_as_eager():
    model = _hooked(lambda m: m.register_forward_pre_hook(lambda mod, a, k: a, with_kwargs=True))
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        run(model, torch.randn(2, 3))
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        opt(model, torch.randn(2, 3))


@pytest.mark.parametrize("kind", ["forward", "forward_pre"])
def test_process_wide_hooks_are_traced(kind):
    calls = []
    api = torch.nn.modules.module
    if kind == "forward":
        handle = api.register_module_forward_hook(lambda m, i, o: (calls.append(type(m).__name__), o + 5)[1])
    else:
        handle = api.register_module_forward_pre_hook(lambda m, i: (calls.append(type(m).__name__), None)[1])
    try:
        _checked(run, Block(), torch.randn(2, 3), calls=calls, per_call=2)  # Block and its Linear
        assert calls[:2] == ["Linear", "Block"] if kind == "forward" else ["Block", "Linear"]
    finally:
        handle.remove()


def test_process_wide_hooks_run_before_the_modules_own():
    log = []
    model = _hooked(lambda m: (m.register_forward_hook(lambda mod, i, o: (log.append("own"), o * 2)[1]),
                               m.register_forward_pre_hook(lambda mod, i: log.append("own pre"))))
    handles = [torch.nn.modules.module.register_module_forward_hook(
                   lambda mod, i, o: (log.append("global"), o + 1)[1] if mod is not None and
                   isinstance(mod, Block) else None),
               torch.nn.modules.module.register_module_forward_pre_hook(
                   lambda mod, i: log.append("global pre") if isinstance(mod, Block) else None)]
    try:
        _checked(run, model, torch.randn(2, 3), calls=log, per_call=4)
        assert log[:4] == ["global pre", "own pre", "global", "own"]
    finally:
        for h in handles:
            h.remove()


def test_a_hook_appending_a_tensor_is_run_once_per_call():
    seen = []
    model = _hooked(lambda m: m.inner.register_forward_hook(lambda mod, i, o: seen.append(o)))
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    x = torch.randn(2, 3)
    for n in range(1, 4):
        same(opt(model, x), run(model, x))
        assert len(seen) == 2 * n
        same(seen[-2], seen[-1])
    assert [e.kind for e in opt.cache_entries()] == ["graph"]


def test_a_hook_on_a_module_inside_a_sequential():
    def register(m):
        m[1].register_forward_hook(lambda mod, i, o: o * 0.5)
        m[0].register_forward_pre_hook(lambda mod, i: (i[0].flip(0),))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    register(model)
    x = torch.randn(2, 3)
    _checked(run, model, x)
    same(run(model, x), model[1].forward(model[0].forward(x.flip(0))) * 0.5 * 2)  # forward: no hooks


def test_a_hook_closing_over_a_tensor():
    bias = torch.randn(3)
    model = _hooked(lambda m: m.register_forward_hook(lambda mod, i, o: o + bias))
    x = torch.randn(2, 3)
    _checked(run, model, x)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    bias.add_(1)  # the closure's tensor is read at run time, not baked in
    same(opt(model, x), run(model, x))
    assert len(opt.cache_entries()) == 1


def test_a_hook_added_then_removed_recompiles_each_time():
    model, x = Block(), torch.randn(2, 3)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    first = model.register_forward_hook(lambda mod, i, o: o + 1)
    same(opt(model, x), run(model, x))
    assert opt.guard_failures()[-1].kind == "NO_HOOKS"
    second = model.register_forward_hook(lambda mod, i, o: o * 3)
    same(opt(model, x), run(model, x))
    failure = opt.guard_failures()[-1]
    assert failure.kind == "DICT_KEYS" and "_forward_hooks" in failure.source, failure
    first.remove()
    same(opt(model, x), run(model, x))
    assert opt.guard_failures()[-1].kind == "DICT_KEYS"
    second.remove()
    entries = len(opt.cache_entries())
    same(opt(model, x), run(model, x))  # no hooks again: the first entry
    assert len(opt.cache_entries()) == entries == 4
    assert all(e.kind == "graph" for e in opt.cache_entries())
    assert opt.cache_entries()[0].hit_count == 2


def test_a_hook_replaced_by_another_under_the_same_key_recompiles():
    model, x = Block(), torch.randn(2, 3)
    handle = model.register_forward_hook(lambda mod, i, o: o + 1)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    same(opt(model, x), run(model, x))
    model._forward_hooks[handle.id] = lambda mod, i, o: o - 1  # a new lambda: another code object
    same(opt(model, x), run(model, x))
    assert len(opt.cache_entries()) == 2


def test_backward_hooks_still_decline_and_say_which():
    calls = []
    model = _hooked(lambda m: m.register_full_backward_hook(lambda mod, gi, go: calls.append(1)))
    x = torch.randn(2, 3, requires_grad=True)
    opt = minidynamo.optimize(backend=CountingBackend())(run)
    got = opt(model, x)
    got.sum().backward()
    same(got, run(model, x))
    assert len(calls) == 1
    (entry,) = opt.cache_entries()
    assert entry.kind == "break", entry.kind
    assert "backward hooks" in str(entry.break_reason) and "_backward_hooks" in str(entry.break_reason)


def test_a_hook_that_cannot_be_traced_breaks_and_runs_each_hook_once():
    calls = []

    def register(m):
        m.register_forward_hook(lambda mod, i, o: calls.append("first"))
        m.register_forward_hook(lambda mod, i, o: print("hook", o.shape) or o + 1)  # print: not traced

    model = _hooked(register)
    check(run, (model, torch.randn(2, 3)), kind="break")
    assert calls == ["first"] * 3  # eager, two optimized calls (fullgraph=True declines before running any)


@pytest.mark.parametrize("kind", ["forward", "forward_pre", "full_backward"])
def test_process_wide_hooks_on_modules_made_in_the_trace(kind):
    def made_inside(x):
        return torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())(x) * 2

    calls = []
    api = torch.nn.modules.module
    if kind == "forward":
        handle = api.register_module_forward_hook(lambda m, i, o: (calls.append(type(m).__name__), o + 1)[1])
    elif kind == "forward_pre":
        handle = api.register_module_forward_pre_hook(lambda m, i: (calls.append(type(m).__name__), (i[0] * 3,))[1])
    else:
        handle = api.register_module_full_backward_hook(lambda m, gi, go: None)
    try:
        x = torch.randn(2, 3)
        if kind == "full_backward":  # not traced: the call breaks, the module runs natively
            info = check(made_inside, x, kind="break")
            assert "backward hooks" in str(info.entries[0].break_reason)
        else:
            _checked(made_inside, None, x, calls=calls, per_call=3)
            order = ["ReLU", "Tanh", "Sequential"] if kind == "forward" else ["Sequential", "ReLU", "Tanh"]
            assert calls[:3] == order
    finally:
        handle.remove()


class Recorder:
    def __init__(self):
        self.shapes = []

    def hook(self, module, args, out):
        self.shapes.append(tuple(out.shape))
        return out.clamp(min=0.1)


def _offset_hook(offset, module, args, out):
    return out - offset


def test_hooks_that_are_bound_methods_and_partials():
    import functools
    recorder = Recorder()

    def register(m):
        m.register_forward_hook(recorder.hook)
        m.inner.register_forward_hook(functools.partial(_offset_hook, 0.25))

    model = _hooked(register)
    _checked(run, model, torch.randn(2, 3))  # (its deep copies of the model copy the recorder)
    opt, x = minidynamo.optimize(backend=CountingBackend())(run), torch.randn(2, 3)
    for n in range(1, 3):
        same(opt(model, x), run(model, x))
        assert recorder.shapes == [(2, 3)] * 2 * n
    assert [e.kind for e in opt.cache_entries()] == ["graph"]
