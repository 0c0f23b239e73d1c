"""mode="cudagraphs": correct results everywhere; recorded and replayed on a GPU."""
import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import triton

import minidynamo
from minidynamo.cudagraphs import CudaGraphRunner, analyse

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def chain(a, b):
    x = a
    for _ in range(3):
        o = torch.empty_like(x)
        K.add_kernel[lambda m: (triton.cdiv(o.numel(), m["BLOCK"]),)](x, b, o, o.numel(), BLOCK=64)
        x = torch.relu(o)
    return x


def scale_input(a):
    K.scale_inplace[(4,)](a, 2.0, a.numel())
    return a * 1


def runner_of(opt) -> CudaGraphRunner:
    return opt.cache_entries()[0].compiled


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown minidynamo mode 'fast'"):
        minidynamo.optimize(mode="fast")(chain)


def test_analysis_of_inputs_written_and_aliasing_outputs():
    def f(a, b):
        return a.view(-1), b + 1
    opt = minidynamo.optimize(f)
    opt(torch.randn(4), torch.randn(4))
    written, aliasing, _ = analyse(opt.cache_entries()[0].gm)
    assert written == set() and len(aliasing) == 1
    opt2 = minidynamo.optimize(scale_input)
    opt2(torch.randn(64, device=K.DEVICE))
    written, aliasing, _ = analyse(opt2.cache_entries()[0].gm)
    assert written == {0} and aliasing == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU fallback path")
def test_without_cuda_runs_plain_graph_and_says_why():
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200), torch.randn(200)
    for _ in range(4):
        torch.testing.assert_close(opt(a, b), chain(a, b))
    r = runner_of(opt)
    assert r.replays == 0 and r.fallback_reason == "no CUDA device"


@gpu
def test_replay_new_addresses_and_kept_outputs():
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device="cuda"), torch.randn(200, device="cuda")
    kept = [opt(a, b) for _ in range(5)]
    for k in kept:  # outputs kept by the caller are never overwritten by later replays
        torch.testing.assert_close(k, chain(a, b))
    a2 = torch.randn(200, device="cuda")
    torch.testing.assert_close(opt(a2, b), chain(a2, b))  # new address: copied in
    a.mul_(3)
    torch.testing.assert_close(opt(a, b), chain(a, b))  # contents read at call time
    assert runner_of(opt).replays >= 4 and runner_of(opt).fallback_reason is None


@gpu
def test_inputs_written_once_per_call():
    opt = minidynamo.optimize(mode="cudagraphs")(scale_input)
    x = torch.randn(64, device="cuda")
    ref = x.clone()
    for _ in range(5):
        out = opt(x)
        ref = scale_input(ref)
        torch.testing.assert_close(x, ref)
        torch.testing.assert_close(out, ref)
    assert runner_of(opt).replays >= 3


@gpu
def test_cpu_op_in_graph_falls_back_with_reason():
    def f(a):
        return a + torch.ones(a.shape[0]).to(a.device)
    opt = minidynamo.optimize(mode="cudagraphs")(f)
    a = torch.randn(8, device="cuda")
    for _ in range(4):
        torch.testing.assert_close(opt(a), f(a))
    assert "CPU" in runner_of(opt).fallback_reason
