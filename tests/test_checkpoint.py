"""torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False) captured into the graph:
one node calling torch's checkpoint on the traced body. Differential: every case runs
eagerly and optimized on copies of the same modules and inputs, under the same seed, and
compares outputs, gradients and how many tensors autograd saved outside the checkpoint (the
body's activations are dropped and recomputed, as in eager); declines compare with the
eager run and show the break."""
import contextlib
import copy
import functools
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import CountingBackend, check, same
from torch.utils.checkpoint import checkpoint

import minidynamo


def _checkpoint_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__name__", "") == "checkpoint"]


def _run(fn, module, inputs, seed=0):
    """(outputs, gradients of the module's parameters and of the inputs, tensors autograd
    saved through the thread's hooks) of fn(module, *inputs) and a backward through it."""
    module = copy.deepcopy(module)
    inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    torch.manual_seed(seed)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(module, *inputs)
    loss = sum((o.float() * torch.arange(o.numel()).reshape(o.shape).cos()).sum()
               for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor))
    loss.backward()
    grads = [p.grad for p in module.parameters()] + [t.grad for t in inputs]
    return out, grads, sorted(packed)


def _differential(fn, module, *inputs, graphs=1, nodes=1):
    """fn eager and optimized: equal outputs, gradients and saved tensors, three times (the
    later calls hit the cache); `nodes` checkpoint nodes in one graph."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    expected = _run(fn, module, inputs)
    # NOTE: traced first, outside the hooks: a trace's fake ops would reach the thread's hooks.
    same(_run(opt, module, inputs)[:2], expected[:2], "outputs and gradients")
    for _ in range(2):
        got = _run(opt, module, inputs)
        same(got[0], expected[0], "outputs")
        same(got[1], expected[1], "gradients")
        assert got[2] == expected[2], f"saved tensors: {got[2]} != eager's {expected[2]}"
    assert backend.calls == graphs, backend.calls
    assert [len(_checkpoint_nodes(gm)) for gm in backend.graphs] == [nodes] * graphs
    return backend, expected


class Block(torch.nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 8)
        self.p = p

    def forward(self, x, scale=1.0):
        h = F.gelu(self.lin(x)) * scale
        return self.out(F.dropout(h, self.p, training=self.training)) + x


class Stack(torch.nn.Module):
    def __init__(self, n=2, p=0.0):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(p) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x


def test_linear_gelu_block():
    lin = torch.nn.Linear(8, 8)

    def f(m, x):
        y = checkpoint(lambda a: F.gelu(m(a)), x, use_reentrant=False)
        return y.sum() * 2

    _, (_, _, packed) = _differential(f, lin, torch.randn(4, 8, requires_grad=True))
    # The saved tensors outside the checkpoint are its input, not the body's activations.
    plain = _run(lambda m, x: F.gelu(m(x)).sum() * 2, lin, [torch.randn(4, 8, requires_grad=True)])[2]
    assert len(packed) < len(plain), (packed, plain)


def test_two_checkpointed_layers():
    _differential(lambda m, x: m(x), Stack(2), torch.randn(3, 8, requires_grad=True), nodes=2)


def test_input_without_grad_and_parameters_only():
    _differential(lambda m, x: m(x), Stack(2), torch.randn(3, 8), nodes=2)


def test_dropout_inside_same_as_eager_with_seed():
    stack = Stack(2, p=0.5).train()
    backend, (out, _, _) = _differential(lambda m, x: m(x) * 1.5, stack, torch.randn(16, 8, requires_grad=True),
                                         nodes=2)
    assert not torch.equal(out, _run(lambda m, x: m(x) * 1.5, stack, [torch.randn(16, 8)], seed=1)[0])


def test_random_ops_before_and_after_keep_their_order():
    block = Block(p=0.3).train()

    def f(m, x):
        x = x + torch.rand_like(x)
        y = checkpoint(m, x, use_reentrant=False)
        return y * torch.rand_like(y)

    _differential(f, block, torch.randn(5, 8, requires_grad=True))


def test_hf_style_partial_with_bound_call_and_kwargs():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(Block() for _ in range(2))
            self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)

        def forward(self, x, scale):
            for layer in self.layers:
                x = self._gradient_checkpointing_func(functools.partial(layer.__call__, scale=scale), x)
            return x

    model = Model()
    _differential(lambda m, x, s: m(x, s), model, torch.randn(3, 8, requires_grad=True),
                  torch.randn(8, requires_grad=True), nodes=2)


def test_keyword_arguments_reach_the_function():
    block = Block()

    def f(m, x, s):
        return checkpoint(m, x, use_reentrant=False, preserve_rng_state=False, scale=s)

    _differential(f, block, torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True))


def test_tuple_output_with_none_and_input_returned():
    lin = torch.nn.Linear(8, 8)

    def body(a, b):
        return (torch.tanh(lin(a)) * b, None, a, [b.exp()])

    def f(m, x, y):
        out = checkpoint(body, x, y, use_reentrant=False)
        assert out[2] is x and out[1] is None
        return out[0], out[3][0]

    _differential(f, lin, torch.randn(3, 8, requires_grad=True), torch.randn(3, 8, requires_grad=True))


def test_same_tensor_passed_twice():
    lin = torch.nn.Linear(8, 8)
    _differential(lambda m, x: checkpoint(lambda a, b: m(a) * b.sin(), x, x, use_reentrant=False), lin,
                  torch.randn(3, 8, requires_grad=True))


def test_without_grad_mode_runs_inline():
    block = Block()

    def f(x):
        with torch.no_grad():
            return checkpoint(block, x, use_reentrant=False)

    info = check(f, torch.randn(3, 8), kind="graph")
    assert not _checkpoint_nodes(info.backend.graphs[0])


# --- declines: the call breaks and checkpoint runs eagerly ---------------------------------
def _breaks(fn, *args, reason="call"):
    """fn breaks at the checkpoint with `reason`; outputs, gradients, warnings and printed
    output equal eager's."""
    def run(f):
        a = [t.detach().clone().requires_grad_(t.requires_grad) for t in args]
        torch.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = f(*a)
            out.sum().backward()
        return out, [t.grad for t in a], [str(w.message) for w in caught]

    expected = run(fn)
    info = check(fn, *[tuple(args)], kind="break", reason=reason)
    got = run(minidynamo.optimize(backend=CountingBackend())(fn))
    same(got[0], expected[0])
    same(got[1], expected[1])
    assert got[2] == expected[2], (got[2], expected[2])
    return info


LIN = torch.nn.Linear(4, 4)


@pytest.mark.filterwarnings("ignore:torch.utils.checkpoint")
def test_unspecified_use_reentrant_declines_and_warns_as_eager():
    info = _breaks(lambda x: checkpoint(LIN, x) * 2, torch.randn(2, 4, requires_grad=True))
    assert "without use_reentrant" in info.break_reason.detail


def test_context_fn_declines():
    def f(x):
        return checkpoint(LIN, x, use_reentrant=False, context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext())) * 2

    info = _breaks(f, torch.randn(2, 4, requires_grad=True))
    assert "context_fn" in info.break_reason.detail


def test_append_to_outside_list_declines_and_runs_twice_as_eager():
    seen = []

    def body(a):
        seen.append(1)
        return LIN(a).relu()

    def f(x):
        return checkpoint(body, x, use_reentrant=False) * 2

    seen.clear()
    f(torch.randn(2, 4, requires_grad=True)).sum().backward()
    eager_count = len(seen)
    seen.clear()
    info = _breaks(f, torch.randn(2, 4, requires_grad=True), reason="side_effect")
    assert "checkpoint" in info.break_reason.detail
    seen.clear()
    minidynamo.optimize(backend=CountingBackend())(f)(torch.randn(2, 4, requires_grad=True)).sum().backward()
    assert len(seen) == eager_count == 2


def test_local_list_changed_declines():
    def f(x):
        acc = []

        def body(a):
            acc.append(a)
            return LIN(a).relu()

        y = checkpoint(body, x, use_reentrant=False)
        return y * len(acc)

    _breaks(f, torch.randn(2, 4, requires_grad=True), reason="side_effect")


def test_print_declines():
    def body(a):
        print("in body")
        return LIN(a).relu()

    _breaks(lambda x: checkpoint(body, x, use_reentrant=False) * 2, torch.randn(2, 4, requires_grad=True),
            reason="side_effect")


def test_writing_a_tensor_it_reads_declines_and_writes_twice_as_eager():
    def body(a, out):
        out.add_(1)
        return LIN(a) * 2

    def f(x, buf):
        return checkpoint(body, x, use_reentrant=False, out=buf) * 2

    counts = []
    for run in (f, minidynamo.optimize(backend=CountingBackend())(f)):
        buf = torch.zeros(2)
        run(torch.randn(2, 4, requires_grad=True), buf).sum().backward()
        counts.append(buf.tolist())
    assert counts == [[2.0, 2.0]] * 2, counts
    _breaks(f, torch.randn(2, 4, requires_grad=True), torch.zeros(2), reason="side_effect")


def test_object_output_declines():
    class Box:
        def __init__(self, t):
            self.t = t

    def f(x):
        return checkpoint(lambda a: Box(LIN(a)), x, use_reentrant=False).t * 2

    info = _breaks(f, torch.randn(2, 4, requires_grad=True), reason="construct")
    assert "returns" in info.break_reason.detail


@pytest.mark.parametrize("reentrant, requires_grad", [(None, True), (True, False)])
def test_fullgraph_refuses_what_it_declines(reentrant, requires_grad):
    opt = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(
        lambda x: checkpoint(LIN, x, use_reentrant=reentrant))
    with pytest.raises(minidynamo.Unsupported, match="use_reentrant"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt(torch.randn(2, 4, requires_grad=requires_grad))


def test_nested_checkpoint_with_an_autograd_function_inside():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    def f(m, x):
        def inner(a):
            return Square.apply(m(a)).tanh()

        def outer(a):
            return checkpoint(inner, a * 2, use_reentrant=False) + 1

        return checkpoint(outer, x, use_reentrant=False)

    _differential(f, torch.nn.Linear(8, 8), torch.randn(3, 8, requires_grad=True))
