"""torch's own named backends ("aot_eager", "inductor") for minidynamo's graphs: forward
and backward against eager, Triton launches handed over as torch's
triton_kernel_wrapper_mutation, and clear errors where a graph cannot go."""
from __future__ import annotations

import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import DEVICE, triton

import minidynamo
from minidynamo.backends import list_backends


def _grads(fn, backend, *args):
    """(result, grads of the args that require grad) of fn, optimized with `backend` or not."""
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    run = minidynamo.optimize(fn, backend=backend) if backend else fn
    out = run(*args)
    out.backward()
    return out.detach(), [a.grad for a in args if a.requires_grad], run


def _same_as_eager(fn, backend, *args):
    expected, expected_grads, _ = _grads(fn, None, *args)
    got, got_grads, opt = _grads(fn, backend, *args)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    for g, e in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert [e.kind for e in opt.cache_entries()] == ["graph"]
    return opt


def mlp(x, w1, w2):
    return (torch.nn.functional.gelu(x @ w1) @ w2).square().mean()


def test_list_backends_has_torch_names():
    names = list_backends()
    assert {"eager", "aot_eager", "inductor"} <= set(names)
    assert minidynamo.list_backends() == names


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown minidynamo backend 'nope'.*'aot_eager'"):
        minidynamo.optimize(mlp, backend="nope")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_plain_ops_forward_and_backward(backend):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    w1 = torch.randn(16, 32, generator=g).requires_grad_()
    w2 = torch.randn(32, 4, generator=g).requires_grad_()
    _same_as_eager(mlp, backend, x, w1, w2)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


def test_autograd_function_node_through_aot_eager():
    def f(x):
        return _Cube.apply(x.sin()).sum()

    _same_as_eager(f, "aot_eager", torch.randn(5, requires_grad=True))


def _with_kernel(x, w):
    h = torch.relu(x @ w)
    y = torch.empty_like(h)
    n = h.numel()
    K.add_kernel[(triton.cdiv(n, 64),)](h, h, y, n, BLOCK=64)
    return (y * h).sum()


def test_triton_launch_through_aot_eager_as_torch_hop():
    graphs = []

    def keep(gm, example_inputs):
        from minidynamo.torch_backends import with_torch_triton_ops
        gm = with_torch_triton_ops(gm)
        graphs.append(gm)
        return gm.forward

    x = torch.randn(8, 8, device=DEVICE)
    w = torch.randn(8, 8, device=DEVICE, requires_grad=True)
    _same_as_eager(_with_kernel, "aot_eager", x, w)
    minidynamo.optimize(_with_kernel, backend=keep)(x, w)
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation
    assert [n.target for n in graphs[0].graph.nodes].count(triton_kernel_wrapper_mutation) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU kernels are compiled: torch reads their IR")
def test_interpreted_kernels_under_aot_eager_log_no_torch_traceback():
    # torch cannot read which inputs an interpreted kernel writes: it warns with a traceback
    # at each functionalization. minidynamo says so once, in one line of its own log.
    import logging

    class Keep(logging.Handler):
        records: list = []

        def emit(self, record):
            self.records.append(record)

    keep = Keep()
    # torch's loggers do not propagate to the root logger: listen on them directly
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._higher_order_ops.triton_kernel_wrap")]
    for lg in loggers:
        lg.addHandler(keep)
    try:
        x = torch.randn(8, 8)
        w = torch.randn(8, 8, requires_grad=True)
        _same_as_eager(_with_kernel, "aot_eager", x, w)
    finally:
        for lg in loggers:
            lg.removeHandler(keep)
    noisy = [r.getMessage() for r in keep.records if r.exc_info]
    assert not noisy, noisy


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU inductor compiles the kernel")
def test_inductor_refuses_interpreted_kernels_clearly():
    x = torch.randn(8, 8)
    w = torch.randn(8, 8, requires_grad=True)
    with pytest.raises(minidynamo.BackendError, match="Triton's interpreter"):
        minidynamo.optimize(_with_kernel, backend="inductor", fullgraph=True)(x, w)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_graph_that_changes_grad_mode_leaves_it_as_eager(backend):
    # The backend runs the graph while compiling (its state change must not leak into the
    # trace's guards) and drops the change from what it returns (the entry makes it).
    def g(x):
        y = x * 2
        torch.set_grad_enabled(False)
        return y * 3
    opt = minidynamo.optimize(g, backend=backend)
    try:
        for _ in range(2):
            torch.set_grad_enabled(True)
            x = torch.ones(3, requires_grad=True)
            got = opt(x)
            got_mode = torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            expected = g(x)
            assert got_mode is torch.is_grad_enabled() is False
            assert torch.equal(got, expected) and got.requires_grad == expected.requires_grad
    finally:
        torch.set_grad_enabled(True)
    assert len(opt.cache_entries()) == 1


def _detached_alias():
    w = torch.ones(3, requires_grad=True)
    return w, w.detach()


def _data_alias():
    w = torch.ones(3, requires_grad=True)
    return w, w.data


def _real_view():
    z = torch.ones(3, dtype=torch.complex64)
    return z, torch.view_as_real(z)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("make", [_detached_alias, _data_alias, _real_view], ids=lambda m: m.__name__)
def test_writes_aot_autograd_refuses_run_uncompiled(make, backend):
    """AOTAutograd refuses a write into an input that shares memory with another input in
    ways it does not model (a detached alias, a view of another dtype): the graph runs
    uncompiled, with eager's results and gradients (was a BackendError)."""
    def f(x, y):
        y.mul_(2)
        return (x * x).sum().real if x.is_complex() else (x * x).sum()

    opt = minidynamo.optimize(f, backend=backend)
    for _ in range(2):
        eager_args, opt_args = make(), make()
        expected, got = f(*eager_args), opt(*opt_args)
        assert torch.equal(got, expected)
        assert torch.equal(opt_args[0], eager_args[0])
        if expected.requires_grad:
            expected.backward()
            got.backward()
            assert torch.equal(opt_args[0].grad, eager_args[0].grad)
