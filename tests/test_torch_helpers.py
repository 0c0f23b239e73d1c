"""torch's helpers that real models call, traced as torch.compile traces them:
`torch._assert` and the `torch._check*` family, `has_torch_function` (which torch's Python
wrappers ask first), `torch.compiler.is_compiling()` answering True inside a trace, and
the nn containers a module holds (Sequential, ModuleList, ModuleDict, ParameterList).
Each function is compared with eager (helpers.check) where eager and torch.compile agree;
where they do not (is_compiling), what each answers is asserted."""
import pytest
import torch
from torch import nn
from helpers import CountingBackend, check, same_outcome

import minidynamo


def opt_of(fn, **kw):
    backend = CountingBackend()
    return minidynamo.optimize(fn, backend=backend, **kw), backend


def own_guards(entry) -> list:
    return [e for g, e in zip(entry.guards, entry.guard_exprs) if g.kind != "GLOBAL_STATE"]


# --- torch._assert -------------------------------------------------------------------------
class BatchNormAct(nn.BatchNorm2d):
    """timm's BatchNormAct2d: asserts the rank before normalising."""

    def forward(self, x):
        torch._assert(x.ndim == 4, f"expected 4D input (got {x.ndim}D input)")
        return torch.relu(super().forward(x))


def test_assert_true_is_a_no_op_in_one_graph():
    def f(x, bn):
        torch._assert(x.shape[1] == 3, "three channels")
        return bn(x) * 2
    bn = BatchNormAct(3).eval()
    check(f, (torch.randn(2, 3, 4, 4), bn), kind="graph", graphs=1)


def test_assert_per_block_keeps_one_graph():
    """One assert per block (efficientnet's BatchNormAct): no break at any of them."""
    blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), BatchNormAct(4)) for _ in range(3)]).eval()
    info = check(lambda x, m: m(x), (torch.randn(1, 4, 5, 5), blocks), kind="graph", graphs=1)
    assert len(info.backend.ops()) >= 9


def test_assert_false_raises_eagers_error_at_run_time_once():
    """A condition false at trace time: the graph of what comes before runs, then eager's
    AssertionError, with eager's message, on every call (nothing raised while tracing)."""
    seen = []

    def f(x):
        seen.append(1)
        y = x * 2
        torch._assert(x.shape[0] == 3, "need three rows")
        return y
    info = check(f, torch.ones(2, 2), kind="break", reason="exceptions")
    assert len(seen) == 3  # eager, then the first and second optimized call: once each
    with pytest.raises(AssertionError, match="^need three rows$"):
        info.opt(torch.ones(2, 2))


def test_assert_on_a_tensor_breaks_as_torch_compile():
    """A tensor condition is decided by its data: eager's `if not condition` runs at the
    break (torch.compile breaks there too), so the error is eager's, raised once."""
    def f(x):
        y = x.sum()
        torch._assert(y > 0, "positive sum")
        return x + 1
    check(f, torch.ones(3), -torch.ones(3), kind="break", reason="data_dependent", same_entry=True)


def test_assert_on_a_symbolic_size_is_a_guard():
    def f(x):
        torch._assert(x.shape[0] >= 2, "at least two rows")
        return x * 2
    opt, be = opt_of(f, dynamic=True)
    for n in (3, 5, 9):
        same_outcome(f, opt, torch.ones(n, 2))
    assert len(opt.cache_entries()) == 1 and be.calls == 1
    assert any(">= 2" in e or "2 <=" in e or "> 1" in e or "1 <" in e
               for e in own_guards(opt.cache_entries()[0])), own_guards(opt.cache_entries()[0])
    same_outcome(f, opt, torch.ones(1, 2))  # the guard fails: eager's AssertionError
    assert len(opt.cache_entries()) == 2


def test_assert_reached_as_a_plain_name():
    from torch import _assert

    def f(x):
        _assert(x.dim() == 2, "2-d")
        return x + 1
    check(f, torch.ones(2, 2), kind="graph", graphs=1)


# --- torch._check family, _assert_scalar, _assert_async ------------------------------------
def checks_that_hold(x):
    n = x.shape[0]
    torch._check(n > 0)
    torch._check(n > 0, lambda: "positive")
    torch._check_with(ValueError, n == 4, lambda: "four")
    torch._check_index(n < 10, lambda: "index")
    torch._check_value(x.ndim == 2, lambda: "value")
    torch._check_type(x.dtype == torch.float32, lambda: "type")
    torch._check_not_implemented(x.shape[1] == 3, lambda: "not implemented")
    return x * 2


def test_checks_that_hold_are_no_ops():
    check(checks_that_hold, torch.ones(4, 3), kind="graph", graphs=1)


def test_checks_on_symbolic_sizes_are_guards():
    opt, be = opt_of(checks_that_hold, dynamic=True)
    same_outcome(checks_that_hold, opt, torch.ones(4, 3))
    same_outcome(checks_that_hold, opt, torch.ones(4, 3))
    assert be.calls == 1
    same_outcome(checks_that_hold, opt, torch.ones(5, 3))  # _check_with(ValueError, n == 4) fails


@pytest.mark.parametrize("check_fn, error", [
    (lambda x: torch._check(x.shape[0] == 3, lambda: "three"), RuntimeError),
    (lambda x: torch._check_with(ValueError, x.shape[0] == 3, lambda: "three"), ValueError),
    (lambda x: torch._check_index(x.shape[0] == 3, lambda: "three"), IndexError),
    (lambda x: torch._check_value(x.shape[0] == 3), ValueError),
    (lambda x: torch._check_type(x.shape[0] == 3, lambda: "three"), TypeError),
    (lambda x: torch._check_not_implemented(x.shape[0] == 3, lambda: "three"), NotImplementedError),
])
def test_a_failing_check_raises_eagers_error(check_fn, error):
    def f(x):
        y = x + 1
        check_fn(x)
        return y
    with pytest.raises(error):
        f(torch.ones(2))
    check(f, torch.ones(2), kind="break", reason="exceptions")


def test_assert_scalar():
    def f(x):
        torch._assert_scalar(x.shape[0] == 2, "two rows")
        torch._assert_scalar(True, "always")
        return x + 1
    check(f, torch.ones(2, 2), kind="graph", graphs=1)
    check(f, torch.ones(3, 2), kind="break", reason="exceptions")


def test_assert_async_is_a_graph_op():
    """`torch._assert_async(t)`: one node, which raises eager's error when the graph runs."""
    def f(x):
        torch._assert_async(x.sum() > 0)
        torch._assert_async((x > -10).all(), "bounded")
        return x * 2
    info = check(f, torch.ones(3), -torch.ones(3), kind="graph", graphs=1)
    assert info.backend.ops().count(torch._assert_async) == 2


# --- has_torch_function ----------------------------------------------------------------------
def asks_has_torch_function(x, w, n):
    from torch.overrides import has_torch_function, has_torch_function_unary, has_torch_function_variadic
    flags = (has_torch_function((x, w)), has_torch_function([x, None, n, 2.0, "s", (x,)]),
             has_torch_function_unary(w), has_torch_function_variadic(x, w, None),
             torch._C._has_torch_function((torch.float32, torch.device("cpu"))))
    return x * n if not any(flags) else x, flags


def test_has_torch_function_is_a_constant():
    check(asks_has_torch_function, (torch.ones(3), nn.Parameter(torch.ones(3)), 2), kind="graph", graphs=1)


def test_has_torch_function_of_symbolic_sizes_does_not_specialise():
    def f(x):
        return x + 1 if not torch.overrides.has_torch_function((x.shape[0], x.numel())) else x
    opt, be = opt_of(f, dynamic=True)
    for n in (2, 3, 4):
        same_outcome(f, opt, torch.ones(n))
    assert be.calls == 1 and len(opt.cache_entries()) == 1


def lib_scale(x, factor=2.0):
    """A library function as torch's own Python wrappers are written."""
    from torch.overrides import handle_torch_function, has_torch_function_unary
    if has_torch_function_unary(x):
        return handle_torch_function(lib_scale, (x,), x, factor=factor)
    return x * factor


def test_a_torch_function_wrapper_traces():
    check(lambda x: lib_scale(x) + 1, torch.ones(3), kind="graph", graphs=1)


def test_has_torch_function_under_a_torch_function_mode_runs_as_eager():
    """A function mode around the call: the global-state guard fails, and the call runs
    eagerly (the mode handles has_torch_function's wrapper as in eager)."""
    from torch.overrides import TorchFunctionMode

    class Passthrough(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(x):
        return x - 1 if torch.overrides.has_torch_function_unary(x) else x + 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    same_outcome(f, opt, x)
    with Passthrough():
        same_outcome(f, opt, x)
    assert [e.kind for e in opt.cache_entries()] == ["graph", "eager"]


# --- torch.compiler.is_compiling() --------------------------------------------------------
_COMPILING = [
    lambda: torch.compiler.is_compiling(), lambda: torch.compiler.is_dynamo_compiling(),
    lambda: torch._dynamo.is_compiling(), lambda: torch._utils.is_compiling(),
]


@pytest.mark.parametrize("query", range(len(_COMPILING)))
def test_is_compiling_is_true_inside_a_trace(query):
    ask = _COMPILING[query]

    def f(x):
        return (x + 1 if ask() else x - 1), ask(), torch.compiler.is_exporting(), torch.jit.is_scripting(), \
            torch.jit.is_tracing()
    opt, be = opt_of(f, fullgraph=True)
    x = torch.ones(2)
    assert f(x)[1:] == (False, False, False, False)  # the plain call
    for _ in range(2):
        out = opt(x)
        assert out[1:] == (True, False, False, False) and torch.equal(out[0], x + 1)
    assert be.calls == 1 and len(opt.cache_entries()) == 1


def test_is_compiling_is_pinned_by_the_functions_identity(monkeypatch):
    def f(x):
        return x + 1 if torch.compiler.is_compiling() else x - 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    assert torch.equal(opt(x), x + 1)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: False)
    assert torch.equal(opt(x), x - 1)  # the patched function is asked, in a new trace
    assert len(opt.cache_entries()) == 2


def test_is_compiling_after_a_graph_break_and_in_a_disabled_function():
    """A resume function is traced too (True); a disabled function runs plainly (False),
    both as under torch.compile."""
    @minidynamo.disable
    def plain():
        return torch.compiler.is_compiling()

    def f(x):
        before = torch.compiler.is_compiling()
        minidynamo.graph_break()
        return x + 1, before, torch.compiler.is_compiling(), plain()
    opt, _ = opt_of(f)
    assert opt(torch.ones(2))[1:] == (True, True, False)


def test_an_eager_fallback_answers_as_the_plain_call():
    def f(x):
        try:  # a decline inside try: the whole call runs eagerly
            print("side effect")
        finally:
            pass
        return torch.compiler.is_compiling()
    opt, _ = opt_of(f)
    assert opt(torch.ones(2)) is False and opt.cache_entries()[0].kind == "eager"


def _is_cuda_stream_capturing():
    try:
        return torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def _is_tracing():
    """transformers' is_tracing(): compiling first, stream capture last."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing() or _is_cuda_stream_capturing()


def compilable_check(x):
    """transformers' torch_compilable_check: plain `torch._check` when tracing."""
    cond = x.shape[-1] == 3
    if _is_tracing():
        torch._check(cond)
    else:
        torch._check_with(ValueError, cond, lambda: "last dim must be 3")
    return x.softmax(-1)


def test_library_code_takes_its_compiling_path_in_one_graph():
    """Answering False sent this down the stream-capture query, which on a CPU build
    raises inside a try (the whole call then ran eagerly)."""
    check(compilable_check, torch.randn(2, 3), kind="graph", graphs=1)


def _stream_query_raises() -> bool:
    try:
        torch.cuda.is_current_stream_capturing()
    except Exception:  # noqa: BLE001 - a CPU build (torch's placeholder class), no usable driver
        return True
    return False


def test_stream_capturing_is_a_guarded_constant():
    def f(x):
        return x + 1 if torch.cuda.is_current_stream_capturing() else x - 1
    if not _stream_query_raises():
        info = check(f, torch.ones(2), kind="graph", graphs=1)
        assert any("is_current_stream_capturing" in e for e in own_guards(info.entries[0]))
    else:  # where the plain call raises, so does the optimized one: the call runs at a break
        check(f, torch.ones(2), kind="break", reason="exceptions")


# --- nn containers held by the module -------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.norms = nn.ModuleList([nn.LayerNorm(4) for _ in range(3)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "box": nn.Linear(4, 3)})
        self.scales = nn.ParameterList([nn.Parameter(torch.full((4,), 0.5 + i)) for i in range(3)])
        self.depth = 2

    def forward(self, x):
        raise NotImplementedError


def _net():
    torch.manual_seed(0)
    return Net()


def containers_index_slice_len(m, x):
    x = m.stem(x)
    x = m.stem[1:](x) + m.stem[-1](x)
    for layer in m.layers[1:]:
        x = layer(x)
    for layer in m.layers[: m.depth]:
        x = layer(x)
    return x, len(m.layers), len(m.stem), len(m.heads), len(m.layers[::2]), len(m.stem[:-1])


def containers_iterate(m, x):
    outs = []
    for i, (layer, norm) in enumerate(zip(m.layers, m.norms)):
        x = norm(layer(x)) * (i + 1)
        outs.append(x)
    for layer in reversed(m.layers):
        x = layer(x)
    for mod in reversed(m.stem):
        x = mod(x)
    return x, outs, [type(c).__name__ for c in m.stem]


def containers_dict(m, x):
    out = {k: h(x) for k, h in m.heads.items()}
    return out, list(m.heads.keys()), [h(x).shape for h in m.heads.values()], "cls" in m.heads, \
        "nope" in m.heads, [k for k in m.heads], sorted(dict(m.heads)), dict(m.heads)["box"](x)


def containers_membership(m, x):
    first = m.layers[0]
    return first in m.layers, m.stem[0] in m.layers, m.layers[-1] in m.layers[1:], \
        any(isinstance(c, nn.ReLU) for c in m.stem), [r(x) for r in reversed(m.layers[1:])]


def containers_parameter_list(m, x):
    for s in m.scales:
        x = x * s
    return x + m.scales[-1], len(m.scales), [s.shape for s in reversed(m.scales)], \
        sum(p.sum() for p in m.scales)


def containers_made_here(m, x):
    extra = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    empty = nn.ModuleList()
    y = x if empty else x + 1
    for act in reversed(extra):
        y = act(y)
    return y if extra else -y, dict(nn.ModuleDict({"a": nn.ReLU()}))["a"](x)


@pytest.mark.parametrize("fn", [containers_index_slice_len, containers_iterate, containers_dict,
                                containers_membership, containers_parameter_list, containers_made_here],
                         ids=lambda f: f.__name__)
def test_containers_of_a_module(fn):
    check(fn, (_net(), torch.randn(2, 4)), kind="graph", graphs=1)


def test_containers_through_an_optimized_module():
    class Model(Net):
        def forward(self, x):
            for layer, norm in zip(reversed(self.layers), self.norms):
                x = norm(layer(x))
            x = self.stem[1:](x)
            return {k: h(x) for k, h in dict(self.heads).items()}, x * self.scales[0]
    torch.manual_seed(0)
    model = Model()
    backend = CountingBackend()
    opt = minidynamo.optimize(model, backend=backend, fullgraph=True)
    x = torch.randn(2, 4)
    for _ in range(2):
        got, want = opt(x), model(x)
        torch.testing.assert_close(got, want)
    assert backend.calls == 1


def test_reversed_sees_a_container_changed_between_calls():
    m = _net()
    opt, _ = opt_of(containers_iterate)
    x = torch.randn(2, 4)
    same_outcome(containers_iterate, opt, m, x)
    m.layers.append(nn.Linear(4, 4))
    m.norms.append(nn.LayerNorm(4))
    same_outcome(containers_iterate, opt, m, x)
    del m.stem[1]
    same_outcome(containers_iterate, opt, m, x)
    assert len(opt.cache_entries()) == 3


def test_parameter_list_changed_between_calls_recompiles():
    m = _net()
    opt, _ = opt_of(containers_parameter_list)
    x = torch.randn(2, 4)
    same_outcome(containers_parameter_list, opt, m, x)
    m.scales.append(nn.Parameter(torch.full((4,), 3.0)))
    same_outcome(containers_parameter_list, opt, m, x)
    assert len(opt.cache_entries()) == 2


def test_reversed_module_dict_is_eagers_error():
    def f(m, x):
        out = []
        for h in reversed(m.heads):  # its __getitem__ takes names: eager's KeyError, at the break
            out.append(h(x))
        return out
    check(f, (_net(), torch.randn(2, 4)), kind="break", reason="call")


class _MyList(nn.ModuleList):
    def __reversed__(self):
        return iter(list(self._modules.values())[:1])


def test_reversed_of_a_subclass_with_its_own_reversed_is_not_modelled():
    def f(m, x):
        out = []
        for layer in reversed(m):
            out.append(layer(x))
        return out
    check(f, (_MyList([nn.Linear(2, 2), nn.ReLU()]), torch.randn(2)), kind="break", reason="call")


def test_parameter_list_index_out_of_range_and_slice():
    check(lambda m, x: x * m.scales[5], (_net(), torch.randn(4)), kind="eager", reason="exceptions")
    check(lambda m, x: len(m.scales[1:]), (_net(), torch.randn(4)), kind="eager", reason="construct")


# --- parameters() and buffers() ------------------------------------------------------------
# Module.parameters() walks named_modules() with a set of modules and a set of tensors as
# memos (`if self not in memo`, `if v in memo`): modules and tensors as set keys (dicts.py,
# identity_keys.py).
@pytest.mark.parametrize("fn", [
    lambda m, x: x.to(next(m.parameters()).dtype) * 2,
    lambda m, x: x.to(next(m.parameters()).device) * 2,
    lambda m, x: (x * 2, [n for n, _ in m.named_parameters()], [p.shape for p in m.parameters()]),
    lambda m, x: (x * 2, [b.dtype for b in m.buffers()], [n for n, _ in m.named_buffers()]),
    lambda m, x: x + sum(p.sum() for p in m.layers.parameters()),
], ids=["next_dtype", "next_device", "named_parameters", "buffers", "sub_parameters"])
def test_parameters_and_buffers(fn):
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    m.layers = nn.ModuleList([nn.Linear(4, 4)])
    check(fn, (m, torch.randn(2, 4)), kind="graph", graphs=1)


def test_api_usage_logging_is_dropped_from_the_trace():
    # torchvision's models log their use (torchvision.utils._log_api_usage_once)
    def f(x):
        torch._C._log_api_usage_once("minidynamo.test.usage")
        return x + 1

    check(f, torch.ones(3), kind="graph")


# --- @torch.jit.script functions: their Python original is inlined (transformers' deberta_v2) --
def _scripted_scale_source():
    import torch as _torch

    def scaled(x: _torch.Tensor, factor: int) -> _torch.Tensor:
        return _torch.sqrt(_torch.tensor(x.size(-1) * factor, dtype=_torch.float))
    return scaled


scaled_size_sqrt = torch.jit.script(_scripted_scale_source())


def uses_a_script_function(x):
    return x / scaled_size_sqrt(x, 2)


def test_a_script_function_is_inlined():
    check(uses_a_script_function, (torch.randn(4, 8),), (torch.randn(3, 6),), kind="graph", same_entry=False)


def test_a_failing_check_under_fullgraph_raises_eagers_error():
    """fullgraph=True: a false torch._check that the traced code does not catch raises
    eager's error (torch.compile's graph raises it too); a plain `raise` is still refused,
    and so is a check inside a `try` of the traced code that the trace cannot enter."""
    seen = []

    def f(x):
        seen.append(1)
        torch._check(x.shape[0] > 3, lambda: "Shape is not greater than 3")
        return x + 1

    opt = minidynamo.optimize(f, backend=CountingBackend(), fullgraph=True)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="^Shape is not greater than 3$"):
            opt(torch.randn(3))
    assert len(seen) == 2  # the eager run, once a call
    assert torch.equal(opt(torch.ones(5)), torch.ones(5) + 1)

    def g(x):
        if x.shape[0] == 2:
            raise ValueError("v")
        return x

    with pytest.raises(minidynamo.Unsupported):
        minidynamo.optimize(g, backend=CountingBackend(), fullgraph=True)(torch.ones(2))

    def h(x):
        try:
            with torch.no_grad():
                torch._check(x.shape[0] > 3)
        except RuntimeError:
            return x - 1
        return x + 1

    with pytest.raises(minidynamo.Unsupported):
        minidynamo.optimize(h, backend=CountingBackend(), fullgraph=True)(torch.ones(2))
