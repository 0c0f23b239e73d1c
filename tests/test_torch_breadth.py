"""torch breadth: queries that return non-tensors, torch.backends settings, torch.device,
nn.Modules made inside the function, module containers, `@torch.no_grad()` as a
decorator, and logging calls. Each function is compared with eager (helpers.check) and
what is captured is asserted; settings are changed between calls to show the entry is
not stale."""
import contextlib

import pytest
import torch
import torch.fx._symbolic_trace as symbolic_trace
from helpers import CountingBackend, check, same_outcome

import minidynamo


def opt_of(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


def _twice(fn, opt, *args):
    """Called twice (trace, then cache hit): the same outcome as eager both times."""
    same_outcome(fn, opt, *args)
    same_outcome(fn, opt, *args)


def own_guards(entry) -> list:
    """The entry's guard expressions other than the global-state check."""
    return [e for g, e in zip(entry.guards, entry.guard_exprs) if g.kind != "GLOBAL_STATE"]


@contextlib.contextmanager
def setting(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# --- queries returning non-tensors ---------------------------------------------------------
def _branch(flag):
    """A function that branches on `flag()` (so a stale answer gives a wrong result)."""
    def f(x):
        if flag():
            return x + 1
        return x - 1
    f.__name__ = f"branch_on_{getattr(flag, '__name__', 'query')}"
    return f


_QUERIES = [
    torch._C._is_tracing, torch.jit.is_scripting, torch.jit.is_tracing, torch.onnx.is_in_onnx_export,
    symbolic_trace.is_fx_tracing, torch.is_autocast_enabled, lambda: torch.is_autocast_enabled("cpu"),
    lambda: torch.is_autocast_enabled(device_type="cuda"),
    torch.distributed.is_available,
    lambda: torch.distributed.is_available() and torch.distributed.is_initialized(),
    torch._C._are_functorch_transforms_active, torch.compiler.is_compiling, torch.compiler.is_exporting,
    torch._dynamo.is_compiling, lambda: torch.autograd._is_checkpoint_valid(),
    lambda: torch.backends.cuda.flash_sdp_enabled(), lambda: torch.backends.cuda.math_sdp_enabled(),
    lambda: torch.amp.is_autocast_available("cpu"),
]
# (A Python function of torch's reached as a plain value, not through a torch module,
# is interpreted: the lambdas read them through their modules.)


@pytest.mark.parametrize("query", _QUERIES, ids=lambda q: getattr(q, "__name__", "query"))
def test_query_is_a_constant_in_one_graph(query):
    check(_branch(query), torch.ones(3), kind="graph", graphs=1)


def test_is_compiling_answers_as_the_plain_call_does():
    """Under minidynamo the entry replays what the plain call does: is_compiling() is False
    (torch.compile would answer True)."""
    def f(x):
        return x * 2, torch.compiler.is_compiling(), torch._dynamo.is_compiling()
    info = check(f, torch.ones(2), kind="graph", graphs=1)
    assert info.opt(torch.ones(2))[1:] == (False, False)


def test_checkpoint_validity_is_asked_again_each_call():
    def f(x):
        return x + 1 if torch.autograd._is_checkpoint_valid() else x - 1
    info = check(f, torch.ones(2), kind="graph", graphs=1)
    assert any("_is_checkpoint_valid" in e for e in own_guards(info.entries[0])), own_guards(info.entries[0])


def test_sdp_backend_flag_change_recompiles():
    def f(x):
        return x + 1 if torch.backends.cuda.math_sdp_enabled() else x - 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    old = torch.backends.cuda.math_sdp_enabled()
    try:
        _twice(f, opt, x)
        torch.backends.cuda.enable_math_sdp(not old)
        _twice(f, opt, x)
    finally:
        torch.backends.cuda.enable_math_sdp(old)
    assert len(opt.cache_entries()) == 2


# --- torch.backends settings ---------------------------------------------------------------
_MATMUL = torch.backends.cuda.matmul
_CUDNN = torch.backends.cudnn


def tf32_matmul(x):
    if torch.backends.cuda.matmul.allow_tf32:
        return x + 1
    return x - 1


def fp16_reduction(x):
    return x * 2, torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction


def cudnn_tf32(x):
    return x + 1 if torch.backends.cudnn.allow_tf32 else x - 1


def cudnn_enabled(x):
    return x + 1 if torch.backends.cudnn.enabled else x - 1


def cudnn_benchmark(x):
    return x + 1 if torch.backends.cudnn.benchmark else x - 1


def matmul_precision(x):
    if torch.get_float32_matmul_precision() == "highest":
        return x + 1
    return x * 3, torch.get_float32_matmul_precision()


@pytest.mark.parametrize("fn, obj, name, other", [
    (tf32_matmul, _MATMUL, "allow_tf32", None),
    (fp16_reduction, _MATMUL, "allow_fp16_reduced_precision_reduction", None),
    (cudnn_tf32, _CUDNN, "allow_tf32", None),
    (cudnn_enabled, _CUDNN, "enabled", None),
    (cudnn_benchmark, _CUDNN, "benchmark", None),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_backend_flag_read_is_guarded(fn, obj, name, other):
    """One graph; assigning the flag between calls recompiles, and the answer follows it."""
    check(fn, torch.ones(2), kind="graph", graphs=1)
    opt, backend = opt_of(fn)
    x = torch.ones(2)
    _twice(fn, opt, x)
    with setting(obj, name, not getattr(obj, name)):
        _twice(fn, opt, x)
    _twice(fn, opt, x)
    assert len(opt.cache_entries()) == 2 and backend.calls == 2
    guards = own_guards(opt.cache_entries()[0])
    assert any(name in e for e in guards), guards


def test_matmul_precision_change_recompiles():
    opt, backend = opt_of(matmul_precision)
    x = torch.ones(2)
    old = torch.get_float32_matmul_precision()
    try:
        for precision in ("highest", "high", "medium", "high"):
            torch.set_float32_matmul_precision(precision)
            _twice(matmul_precision, opt, x)
    finally:
        torch.set_float32_matmul_precision(old)
    # "high" and "medium" both allow TF32: only the query's own guard tells them apart
    assert len(opt.cache_entries()) == 3 and backend.calls == 3


def test_fp32_precision_setting_is_guarded():
    if not hasattr(_MATMUL, "fp32_precision"):
        pytest.skip("torch without the fp32_precision settings")

    def f(x):
        return x * 2, torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision
    check(f, torch.ones(2), kind="graph", graphs=1)


def test_unknown_settings_attribute_raises_as_eager():
    def f(x):
        return x + torch.backends.cuda.matmul.no_such_flag
    check(f, torch.ones(2), kind="break", reason="exceptions")
