"""flash-linear-attention (fla-core) ops through minidynamo, forward and backward against eager (GPU).

The cases and the measurement are bench/fla_capture.py's (on bench/liger_capture.py's
machinery): every case must give eager's outputs, input gradients and inputs after
backward, and a case whose `expect` is "capture" must be one graph whose
autograd.Function nodes all have traced backwards with Triton launches in their bodies,
hit again by the second call. fla's backend dispatch (FLA_DISABLE_BACKEND_DISPATCH) is
read when fla is imported, so the expectations follow the mode of this process. Skipped
without a CUDA GPU or without fla."""
import importlib.util
import os
import sys

import pytest
import torch

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_BENCH, f"{name}.py"))
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "CASES"):
        spec.loader.exec_module(module)  # imports neither fla nor anything GPU-specific
    return module


lc = _load("liger_capture")
fc = _load("fla_capture")

_needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_needs_fla = pytest.mark.skipif(importlib.util.find_spec("fla") is None, reason="fla (fla-core) is not installed")
_BY_NAME = {c.name: c for c in fc.CASES}


@pytest.fixture
def on_gpu(monkeypatch):
    error = fc.load_fla()
    if error is not None:
        pytest.skip(f"fla is not importable: {error}")
    monkeypatch.setattr(lc, "DEVICE", "cuda")


def _run(name):
    res = fc.run_fla_case(_BY_NAME[name], dynamo=False)
    assert res["status"] != "invalid", res["detail"]
    return res


@pytest.mark.gpu
@_needs_gpu
@_needs_fla
@pytest.mark.parametrize("case", fc.CASES, ids=[c.name for c in fc.CASES])
def test_fla_op(case, on_gpu):
    res = fc.run_fla_case(case, dynamo=False)
    failure = lc.expectation_failure(res)
    if case.expect == "xfail":
        pytest.xfail(f"known: {res['status']}: {res['detail'] or res['reason']}")
    assert failure is None, f"{case.name}: {failure}\n{fc.format_row(res)}"


@pytest.mark.gpu
@_needs_gpu
@_needs_fla
def test_fused_recurrent_gla_captured_with_launches(on_gpu):
    """A plain function over an autograd.Function: one graph, the Function a node whose
    forward and backward bodies launch fla's Triton kernels; equal to eager."""
    res = _run("fused_recurrent_gla")
    assert res["status"] == "captured", fc.format_row(res)
    assert res["entries"] == ["graph"] and res["fn_nodes"] == 1, res
    assert res["fwd_launches"] >= 1 and res["bwd_launches"] >= 1, res
    assert res["explain"]["graph_count"] == 1 and res["explain"]["graph_break_count"] == 0, res["explain"]


@pytest.mark.gpu
@_needs_gpu
@_needs_fla
@pytest.mark.parametrize("name", ["simple_gla", "gla", "delta_rule", "gated_delta_rule", "retention", "linear_attn"])
def test_disabled_public_ops_fall_back_with_reason(name, on_gpu):
    """fla's chunked public ops are torch.compiler.disable'd: the call runs eagerly, the
    reason says so, and the results are eager's."""
    res = _run(name)
    assert res["status"] == "fallback", fc.format_row(res)
    reasons = " ".join(res["explain"]["reasons"]) + str(res["reason"])
    assert "torch.compiler.disable" in reasons, reasons


@pytest.mark.gpu
@_needs_gpu
@_needs_fla
@pytest.mark.skipif(fc.DISPATCH == "on", reason="fla's backend dispatch wraps the kernel helpers in torch.compiler.disable")
@pytest.mark.parametrize("name", ["rms_norm", "rms_norm_prenorm", "layer_norm", "rms_norm_gated", "swiglu"])
def test_undispatched_modules_captured(name, on_gpu):
    """With FLA_DISABLE_BACKEND_DISPATCH=1 the norms and swiglu are one Function node each,
    with its Triton launches in the forward and backward bodies."""
    res = _run(name)
    assert res["status"] == "captured", fc.format_row(res)
    assert res["fn_nodes"] == 1 and res["fwd_launches"] >= 1 and res["bwd_launches"] >= 1, res


# --- no GPU needed ------------------------------------------------------------------------
def test_cases_are_well_formed():
    names = [c.name for c in fc.CASES]
    assert len(names) == len(set(names)) and len(names) >= 15
    assert all(c.expect in lc.EXPECTATIONS and not c.liger for c in fc.CASES)
    assert fc.DISPATCH in ("on", "off")


def test_format_row_of_an_invalid_result():
    row = fc.format_row({"name": "x", "status": "invalid", "detail": "fla is not importable: nope"})
    assert row.startswith("x") and "invalid" in row and "nope" in row
