"""torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=True) captured: one node
calling torch's reentrant checkpoint on the traced body. Differential as
tests/test_checkpoint.py (outputs, gradients, tensors autograd saved); where the reentrant
variant behaves otherwise than a captured node would (no tensor argument requiring grad,
keyword arguments for the function, an output it did not compute), the call breaks and
runs as in eager (warnings and errors included)."""
import functools
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import check, CountingBackend, same
from test_checkpoint import _checkpoint_nodes, _differential, Block, LIN
from torch.utils.checkpoint import checkpoint

import minidynamo


class Stack(torch.nn.Module):
    def __init__(self, n=2, p=0.0):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(p) for _ in range(n))
        self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=True)

    def forward(self, x, scale):
        for layer in self.layers:
            x = self._gradient_checkpointing_func(functools.partial(layer.__call__, scale=scale), x)
        return x


def test_reentrant_layers_are_captured():
    backend, _ = _differential(lambda m, x: m(x, 2.0), Stack(2), torch.randn(3, 8, requires_grad=True), nodes=2)
    assert all(n.kwargs["use_reentrant"] is True for n in _checkpoint_nodes(backend.graphs[0]))


def test_reentrant_with_dropout_and_a_closure_tensor():
    stack = Stack(1, p=0.5).train()

    def f(m, x):
        h = x.sin()  # computed outside, read by the body through its closure

        def body(a):
            return m(a, 1.0) * h

        return checkpoint(body, x * 2, use_reentrant=True, preserve_rng_state=True) + 1

    _differential(f, stack, torch.randn(16, 8, requires_grad=True))


def _run_eager_and_optimized(fn, x):
    """(outputs, gradient of x or the error backward raised, warnings) of fn, eager and optimized."""
    results = []
    for run in (fn, minidynamo.optimize(backend=CountingBackend())(fn)):
        a = x.detach().clone().requires_grad_(x.requires_grad)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = run(a)
            try:
                out.sum().backward()
                grad = [a.grad] + [p.grad.clone() for p in LIN.parameters()]
            except RuntimeError as e:
                grad = str(e)
            for p in LIN.parameters():
                p.grad = None
        results.append((out, grad, [str(w.message) for w in caught]))
    (out, grad, warned), (out2, grad2, warned2) = results
    same(out2, out)
    assert out2.requires_grad == out.requires_grad
    if isinstance(grad, str):
        assert grad2 == grad
    else:
        same(grad2, grad)
    assert warned2 == warned, (warned2, warned)
    return results


@pytest.mark.filterwarnings("ignore:None of the inputs")
def test_no_argument_requiring_grad_breaks_and_warns_as_eager():
    def f(x):
        y = checkpoint(LIN, x, use_reentrant=True)
        return y * 2 if y.requires_grad else y * 3  # the parameters require grad; y does not

    results = _run_eager_and_optimized(f, torch.randn(2, 4))
    assert any("requires_grad" in w for w in results[0][2])
    assert isinstance(results[0][1], str)  # no gradient: backward raises
    info = check(f, torch.randn(2, 4), kind="break", reason="call")
    assert "no tensor argument requires grad" in info.break_reason.detail


def test_keyword_arguments_for_the_function_break_and_raise_as_eager():
    def f(x):
        return checkpoint(lambda a, s: LIN(a) * s, x, use_reentrant=True, s=2.0)

    with pytest.raises(ValueError, match="Unexpected keyword"):
        f(torch.randn(2, 4, requires_grad=True))
    with pytest.raises(ValueError, match="Unexpected keyword"):
        minidynamo.optimize(backend=CountingBackend())(f)(torch.randn(2, 4, requires_grad=True))


@pytest.mark.parametrize("body", [lambda a: (LIN(a), a), lambda a: LIN(a).detach(), lambda a: (LIN(a),) * 2],
                         ids=["returns its input", "detached", "one tensor twice"])
def test_outputs_unlike_reentrant_break(body):
    def f(x):
        out = checkpoint(body, x, use_reentrant=True)
        outs = out if isinstance(out, tuple) else (out,)
        # what the trace would get wrong: which objects come back, and whether they require grad
        return outs[0] * (1 + (outs[-1] is x) + 2 * (outs[0] is outs[-1]) + 4 * outs[-1].requires_grad)

    _run_eager_and_optimized(f, torch.randn(2, 4, requires_grad=True))
    info = check(f, torch.randn(2, 4, requires_grad=True), kind="break", reason="construct")
    assert "use_reentrant=True" in info.break_reason.detail


def test_without_grad_mode_runs_inline():
    def f(x):
        with torch.no_grad():
            return F.relu(checkpoint(LIN, x, use_reentrant=True))

    info = check(f, torch.randn(3, 4, requires_grad=True), kind="graph")
    assert not _checkpoint_nodes(info.backend.graphs[0])
