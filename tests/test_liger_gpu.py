"""liger-kernel's public ops through minidynamo, forward and backward against eager (GPU).

The cases and the measurement are bench/liger_capture.py's: every case must give eager's
outputs, input gradients and inputs after backward (no wrong result, no error), and a
case whose `expect` is "capture" must be captured: one graph whose autograd.Function
nodes all have traced backwards, hit again by the second call. Skipped without a CUDA
GPU or without liger_kernel. The harness's own classification is checked on CPU with
pure-torch Functions."""
import importlib.util
import os
import sys

import pytest
import torch

import minidynamo

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "liger_capture.py")
_spec = importlib.util.spec_from_file_location("liger_capture", _PATH)
lc = sys.modules.setdefault("liger_capture", importlib.util.module_from_spec(_spec))
if not hasattr(lc, "CASES"):
    _spec.loader.exec_module(lc)  # imports neither liger nor anything GPU-specific

_needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_needs_liger = pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None,
                                  reason="liger_kernel is not installed")


@pytest.mark.gpu
@_needs_gpu
@_needs_liger
@pytest.mark.parametrize("case", lc.CASES, ids=[c.name for c in lc.CASES])
def test_liger_op(case, monkeypatch):
    error = lc.load_liger()
    if error is not None:
        pytest.skip(f"liger_kernel is not importable: {error}")
    monkeypatch.setattr(lc, "DEVICE", "cuda")
    res = lc.run_case(case, dynamo=False)
    failure = lc.expectation_failure(res)
    if case.expect == "xfail":
        pytest.xfail(f"known: {res['status']}: {res['detail'] or res['reason']}")
    assert failure is None, f"{case.name}: {failure}\n{lc.format_row(res)}"


# --- the harness itself, on CPU with pure-torch Functions --------------------------------
class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ValueBranch(torch.autograd.Function):
    """Its backward reads the gradient's value: not traceable, it runs eagerly."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 if g.sum().item() != 0 else g


class WrongBackward(torch.autograd.Function):
    """Different gradients in each call: the harness must call it wrong."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, g):
        WrongBackward.calls += 1
        return g * WrongBackward.calls


def _case(name, fn, expect="capture"):
    return lc.Case(name, fn, lambda g: (g.randn(4, 8), g.randn(8, grad=False)), expect=expect, liger=False)


def _run_cpu(case, monkeypatch):
    monkeypatch.setattr(lc, "DEVICE", "cpu")
    return lc.run_case(case, dynamo=False)


def double(x, y):
    return Double.apply(x) + y


def value_branch(x, y):
    return ValueBranch.apply(x) * y


def with_print(x, y):
    print("side effect")
    return Double.apply(x)


def wrong(x, y):
    return WrongBackward.apply(x)


def test_harness_captured(monkeypatch):
    res = _run_cpu(_case("double", double), monkeypatch)
    assert res["status"] == "captured", res
    assert (res["fn_nodes"], res["bwd_traced"], res["entries"], res["exact"]) == (1, True, ["graph"], True)
    assert lc.expectation_failure(res) is None


def test_harness_partial_eager_backward(monkeypatch):
    res = _run_cpu(_case("value_branch", value_branch), monkeypatch)
    assert res["status"] == "partial", res
    assert res["bwd_traced"] is False and res["eager_backward"], res
    assert "expected a capture" in lc.expectation_failure(res)
    assert lc.expectation_failure({**res, "expect": "partial"}) is None


def test_harness_fallback_reason(monkeypatch):
    res = _run_cpu(_case("with_print", with_print, expect="fallback"), monkeypatch)
    assert res["status"] == "fallback" and res["reason"], res
    assert lc.expectation_failure(res) is None
    assert "expected a capture" in lc.expectation_failure({**res, "expect": "capture"})


def test_harness_wrong_gradient(monkeypatch):
    WrongBackward.calls = 0
    res = _run_cpu(_case("wrong", wrong), monkeypatch)
    # the second eager run already differs: eager is not reproducible, minidynamo is wrong
    assert res["status"] == "wrong" and "arg[0].grad" in res["detail"], res
    assert lc.expectation_failure(res).startswith("wrong")


def test_harness_invalid_case(monkeypatch):
    case = lc.Case("bad", double, lambda g: (g.randn(4, 8), g.randn(5, grad=False)), liger=False)
    res = _run_cpu(case, monkeypatch)
    assert res["status"] == "invalid" and "eager run failed" in res["detail"], res
    assert "invalid" in lc.expectation_failure(res)


def _side(value, differentiable=()):
    return lc.Side(outputs=[("out", value)], grads=[], after=[], upstream={},
                   differentiable=list(differentiable))


def test_harness_compare_tolerances():
    one = torch.ones(3, dtype=torch.bfloat16)
    assert lc.compare(_side(one), _side(one.clone())) == {"max_abs_diff": 0.0, "exact": True}
    assert lc.compare(_side(one * 1.0078125), _side(one))["exact"] is False  # within bf16 tolerance
    with pytest.raises(AssertionError, match="output out"):
        lc.compare(_side(one * 1.5), _side(one))
    with pytest.raises(AssertionError, match="output out"):
        lc.compare(_side(one.float()), _side(one))
    with pytest.raises(AssertionError, match="outputs requiring grad"):
        lc.compare(_side(one, ["out"]), _side(one))


def test_cases_are_well_formed():
    names = [c.name for c in lc.CASES]
    assert len(names) == len(set(names)) >= 38
    assert all(c.expect in lc.EXPECTATIONS and callable(c.fn) and c.fn.__name__ == c.name for c in lc.CASES)
    assert minidynamo.optimize(lc.CASES[0].fn)  # a Python function minidynamo accepts
