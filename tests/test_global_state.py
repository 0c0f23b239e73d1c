"""Process-wide torch state is an input of every entry, and a trace never changes it.

Each test calls the function eagerly and optimized under the same state, changes the
state, and compares again: a stale entry would give the old answer."""
import contextlib

import pytest
import torch
from helpers import CountingBackend, same, same_outcome

import minidynamo


def opt_of(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


def _twice(fn, opt, *args):
    """Called twice (trace, then cache hit): the same outcome as eager both times."""
    same_outcome(fn, opt, *args)
    same_outcome(fn, opt, *args)


# --- the state is guarded ----------------------------------------------------------------
def test_grad_mode_decides_a_branch_on_requires_grad():
    def f(x):
        y = x * 2
        if y.requires_grad:
            return y + 1
        return y - 1
    opt, _ = opt_of(f)
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        _twice(f, opt, x)
    _twice(f, opt, x)
    failure = opt.guard_failures()[-1]
    assert failure.reason == "global torch state changed: grad mode: traced with False, now True", failure
    with torch.no_grad():
        _twice(f, opt, x)  # the first entry still serves no_grad
    assert len(opt.cache_entries()) == 2


def test_default_dtype_is_not_folded_stale():
    def f(x):
        return torch.zeros(2).dtype == torch.float32, x + torch.ones(2)
    opt, _ = opt_of(f)
    x = torch.ones(2, dtype=torch.float64)
    _twice(f, opt, x)
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        _twice(f, opt, x)
    finally:
        torch.set_default_dtype(old)
    assert "default dtype: traced with float32, now float64" in opt.guard_failures()[-1].reason


def test_autocast_changes_what_dtype_an_op_gives():
    def f(x, y):
        z = x @ y
        return z.dtype, z.float() + 1
    opt, _ = opt_of(f)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    _twice(f, opt, x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = opt(x, y)
        assert got[0] == f(x, y)[0] == torch.bfloat16
    assert "autocast(cpu): traced with enabled=False" in opt.guard_failures()[-1].reason


def test_default_device_is_part_of_the_state():
    def f(x):
        return torch.zeros(2).device.type, x + 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    _twice(f, opt, x)
    with torch.device("meta"):
        got = opt(x)
        want = f(x)
    assert got[0] == want[0] == "meta"


def test_state_queries_are_constants_under_the_state_check():
    def f(x):
        return (torch.is_grad_enabled(), torch.get_default_dtype(),
                torch.are_deterministic_algorithms_enabled(), torch.is_inference_mode_enabled())
    opt, backend = opt_of(f)
    x = torch.ones(1)
    _twice(f, opt, x)
    assert opt.cache_entries()[0].kind == "constant" and backend.calls == 0
    with torch.no_grad():
        _twice(f, opt, x)
    with torch.inference_mode():
        _twice(f, opt, x)
    torch.use_deterministic_algorithms(True)
    try:
        _twice(f, opt, x)
    finally:
        torch.use_deterministic_algorithms(False)
    assert len(opt.cache_entries()) == 4
    _twice(f, opt, x)
    assert len(opt.cache_entries()) == 4


def test_guarded_queries_are_asked_again():
    import torch.fx._symbolic_trace as symbolic_trace

    def f(x):
        if symbolic_trace.is_fx_tracing():
            return x - 1
        return x + 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    _twice(f, opt, x)
    entry = opt.cache_entries()[0]
    assert any("is_fx_tracing()" in e for e in entry.guard_exprs), entry.guard_exprs
    with _fx_tracing_on(symbolic_trace):
        _twice(f, opt, x)
    assert len(opt.cache_entries()) == 2


@contextlib.contextmanager
def _fx_tracing_on(symbolic_trace):
    """What fx's symbolic tracing sets (a module flag up to torch 2.13, thread-local after)."""
    if hasattr(symbolic_trace, "_set_is_fx_tracing"):
        old = symbolic_trace._get_is_fx_tracing()
        symbolic_trace._set_is_fx_tracing(True)
        try:
            yield
        finally:
            symbolic_trace._set_is_fx_tracing(old)
        return
    old = symbolic_trace._is_fx_tracing_flag
    symbolic_trace._is_fx_tracing_flag = True
    try:
        yield
    finally:
        symbolic_trace._is_fx_tracing_flag = old


def test_process_constant_query_is_pinned_by_identity(monkeypatch):
    def f(x):
        return x + 1 if torch.cuda.is_available() else x - 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    _twice(f, opt, x)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: not torch.cuda.device_count() > 0)
    _twice(f, opt, x)  # a patched function is another object: traced again
    assert len(opt.cache_entries()) == 2


# --- a trace changes nothing ---------------------------------------------------------------
@contextlib.contextmanager
def _unchanged(what, like=None):
    """The process-wide state the trace could touch is the same afterwards. With `like`
    (a plain call), the state afterwards is the one that call leaves instead: what a
    graph break runs natively changes what eager changes, and nothing else does."""
    from torch._C._dynamo import eval_frame

    def state():
        prior = eval_frame.set_eval_frame(False)  # False (run cached code only) is benign
        return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads(),
                torch.is_autocast_enabled("cpu"), torch.get_rng_state().clone(), prior)

    def restore(s):
        torch.set_grad_enabled(s[0])
        torch.set_default_dtype(s[1])
        torch.set_num_threads(s[2])
        torch.set_autocast_enabled("cpu", s[3])
        torch.set_rng_state(s[4])
    eval_frame.set_eval_frame(False)  # so that a trace setting None would show
    before = start = state()
    if like is not None:
        try:
            like()
            before = state()
        finally:
            restore(start)
    try:
        yield
        after = state()
    finally:
        eval_frame.set_eval_frame(None)
        restore(start)
    for name, b, a in zip(("grad mode", "default dtype", "threads", "autocast", "RNG state",
                           "eval-frame callback"), before, after):
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        assert same, f"{what} changed {name}: {b!r} -> {a!r}"


def _uses_compiler_disable(x):
    return _disabled_helper(x) + 1


@torch.compiler.disable
def _disabled_helper(x):
    return x * 3


def _sets_grad_mode(x):
    torch._C._set_grad_enabled(False)
    y = x * 2
    torch._C._set_grad_enabled(True)
    return y


def _sets_default_dtype(x):
    torch._C._set_default_dtype(torch.float64)  # a stateful C function the trace declines
    y = x * torch.ones(x.shape)  # float64 in eager: the break runs the setter natively first
    torch._C._set_default_dtype(torch.float32)
    return y


def _sets_threads(x):
    torch.set_num_threads(1)
    return x + 1


def _random(x):
    return torch.rand(3) + torch.nn.functional.dropout(x, 0.5) + torch.randn_like(x)


@pytest.mark.parametrize("fn", [_uses_compiler_disable, _sets_grad_mode, _sets_default_dtype, _sets_threads,
                                _random], ids=lambda f: f.__name__)
def test_explain_and_declined_traces_change_nothing(fn):
    x = torch.ones(4, 3)
    if fn in (_random, _sets_grad_mode):  # traced whole (grad mode is a change in the graph): explain runs nothing
        with _unchanged("explain()"):
            out = minidynamo.explain(fn)(x)
        assert out.graph_count == 1 and out.graph_break_count == 0, out
        return
    # The others break at a declined call: explain runs the call for real, as the plain
    # call would, and the traces around the break add nothing to what it changes.
    with _unchanged("explain()", like=lambda: fn(x.clone())):
        minidynamo.explain(fn)(x)
    opt, _ = opt_of(fn)
    for attempt in ("first call", "second call (cache hit)"):
        expected = []
        with _unchanged(f"an optimized {attempt}", like=lambda: expected.append(fn(x.clone()))):
            got = opt(x.clone())  # the declined call runs natively: the plain call's state
        same(got, expected[0], attempt)
    assert [e.kind for e in opt.cache_entries()] == ["break"]


def test_compiler_disable_is_named():
    opt, _ = opt_of(_uses_compiler_disable)
    opt(torch.ones(2))
    reason = opt.cache_entries()[0].break_reason
    assert reason.category == "call" and "_disabled_helper is wrapped by torch.compiler.disable" in str(reason)


def test_stateful_c_function_is_declined_before_it_runs_and_named():
    # (torch._C._set_grad_enabled is traced now: a grad-mode change in the graph.)
    opt, _ = opt_of(_sets_default_dtype)
    with _unchanged("a declined trace"):
        minidynamo.explain(_sets_default_dtype)(torch.ones(2))
    assert opt(torch.ones(2)).dtype == torch.float64  # as eager: the setter ran natively, once, before the op
    assert torch.get_default_dtype() == torch.float32
    assert "torch._C._set_default_dtype is not a torch operator" in str(opt.cache_entries()[0].break_reason)


def test_reasons_name_the_real_qualified_function():
    def f(x):
        return x + torch._C._get_cudnn_enabled()
    out = minidynamo.explain(f)(torch.ones(2))
    assert "torch._C._get_cudnn_enabled is not a torch operator" in str(out.break_reasons[0]), \
        out.break_reasons


@pytest.mark.parametrize("seed", [0, 7])
def test_seeded_random_ops_match_eager(seed):
    opt, _ = opt_of(_random)
    x = torch.ones(4, 3)
    for _ in range(2):  # trace, then cache hit
        torch.manual_seed(seed)
        want = _random(x)
        after_eager = torch.get_rng_state()
        torch.manual_seed(seed)
        got = opt(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert torch.equal(torch.get_rng_state(), after_eager)
    assert opt.cache_entries()[0].kind == "graph"


def test_torch_settings_read_as_attributes_are_guarded():
    """A setting users assign between calls (not a function call): read through its
    source, so a change is noticed."""
    def f(x):
        if torch.backends.cudnn.deterministic:
            return x + 1
        return x - 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    old = torch.backends.cudnn.deterministic
    try:
        _twice(f, opt, x)
        torch.backends.cudnn.deterministic = not old
        _twice(f, opt, x)
    finally:
        torch.backends.cudnn.deterministic = old
    assert len(opt.cache_entries()) == 2


def test_a_failure_shows_the_state_traced_under_not_the_state_now():
    def f(x):
        return x * 2
    opt, _ = opt_of(f)
    x = torch.ones(2)
    opt(x)
    with torch.autocast("cpu"):
        opt(x)
    (failure,) = opt.guard_failures()
    assert "is_autocast_enabled('cpu') is False" in failure.guard, failure.guard
    assert "autocast off" in opt.cache_entries()[0].describe()


def _fp32_precision_settable() -> bool:
    matmul = torch.backends.cuda.matmul
    return hasattr(matmul, "fp32_precision")


@pytest.mark.skipif(not _fp32_precision_settable(), reason="this torch has no fp32_precision setting")
def test_a_raw_precision_setting_that_computes_the_same_is_a_hit():
    """torch 2.15 leaves `fp32_precision` at 'ieee' (not 'none') once `allow_tf32` is set
    back to False; torch's C state check sees a change, but every setting reads as traced:
    the entry is served (no third compile), and the TF32 change itself still recompiles."""
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision

    def f(x):
        return x + 1 if matmul.allow_tf32 else x - 1

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = torch.ones(2)
    try:
        same(opt(x), f(x))
        matmul.fp32_precision = "ieee"
        same(opt(x), f(x))
        assert backend.calls == 1, [e.reason for e in opt.cache_entries()]
        matmul.allow_tf32 = True
        same(opt(x), f(x))
        assert backend.calls == 2
        matmul.allow_tf32 = False
        same(opt(x), f(x))
        assert backend.calls == 2
        failure = opt.guard_failures()[-1]
        assert "TF32 matmul: traced with False, now True" in str(failure), failure
    finally:
        matmul.fp32_precision = before
        matmul.allow_tf32 = False


def test_float32_matmul_precision_is_named_in_a_failure():
    def f(x):
        return x * 2

    opt = minidynamo.optimize(f, backend=CountingBackend())
    before = torch.get_float32_matmul_precision()
    try:
        opt(torch.ones(2))
        torch.set_float32_matmul_precision("medium" if before != "medium" else "high")
        opt(torch.ones(2))
        assert "float32 matmul precision: traced with" in str(opt.guard_failures()[-1])
    finally:
        torch.set_float32_matmul_precision(before)
