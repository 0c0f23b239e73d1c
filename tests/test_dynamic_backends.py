"""Symbolic sizes handed to torch's compiling backends ("aot_eager", "inductor") and to
mode="cudagraphs": one compile serves every size the entry's guards admit, against eager
at each size. Inductor compiles C++ on the CPU (slow): few inductor compiles here."""
from __future__ import annotations

import pytest
import torch
from kernels.capture_kernels import DEVICE, add_kernel, triton

import minidynamo
from minidynamo import torch_backends
from minidynamo.cudagraphs import CudaGraphRunner


def _compiles(backend: str) -> int:
    """Graphs torch's backends compiled so far: AOTAutograd's count (inductor's goes through
    it too), one per graph, or one per size where an artifact is static."""
    from torch._dynamo.utils import counters
    return counters["aot_autograd"]["total"]


def _unwrapped(compiled):
    """The callable torch's backend made (compile_with checks what it returns)."""
    return getattr(compiled, "__wrapped__", compiled)


def _repro(x):
    return (x * 2).sum(0) + x.shape[0]


def _close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_mark_dynamic_one_compile_serves_every_size(backend):
    before = _compiles(backend)
    opt = minidynamo.optimize(_repro, backend=backend)
    x = torch.randn(7, 2)
    minidynamo.mark_dynamic(x, 0)
    _close(opt(x), _repro(x))
    sizes = (9, 2, 13, 7, 16) if backend == "inductor" else range(2, 40)
    for n in sizes:
        y = torch.randn(n, 2)
        _close(opt(y), _repro(y))
    [entry] = opt.cache_entries()
    assert "symbolic sizes" in str(entry)
    assert entry.hit_count == len(sizes) + 1  # the first call too
    assert _compiles(backend) - before == 1


def test_dynamic_true_aot_eager_many_sizes_one_compile():
    def f(x, y):
        return torch.tanh(x @ y).cumsum(0) / x.shape[0], (x.shape[0] * 3 + 1, x.shape[1] // 2)

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(f, backend="aot_eager", dynamic=True)
    for n in range(2, 30):
        x, y = torch.randn(n, 6), torch.randn(6, n + 1)
        got, want = opt(x, y), f(x, y)
        _close(got[0], want[0])
        assert got[1] == want[1]  # sizes returned: computed per call, not the first call's
    assert len(opt.cache_entries()) == 1
    assert _compiles("aot_eager") - before == 1


def test_automatic_dynamic_aot_eager_second_size_last_compile():
    def f(x):
        h = torch.relu(x - x.mean(0))
        return h.view(x.shape[0], -1, 2).sum(-1), x.numel() - x.shape[0]

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(f, backend="aot_eager")
    for n in [4, 4, *range(5, 40)]:
        x = torch.randn(n, 6)
        got, want = opt(x), f(x)
        _close(got[0], want[0])
        assert got[1] == want[1]
    entries = opt.cache_entries()
    assert len(entries) == 2 and "symbolic sizes" in str(entries[1])
    assert _compiles("aot_eager") - before == 2


def test_gradients_through_aot_eager_with_dynamic_sizes():
    torch.manual_seed(0)
    w = torch.randn(8, 5, requires_grad=True)

    def loss(x, w):
        return (torch.nn.functional.gelu(x @ w) * x.shape[0]).square().mean()

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(loss, backend="aot_eager", dynamic=True)
    for n in (3, 11, 6, 25):
        x = torch.randn(n, 8, requires_grad=True)
        xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        got = opt(x, w)
        got.backward()
        want = loss(xe, we)
        want.backward()
        _close(got, want)
        _close(x.grad, xe.grad)
        _close(w.grad, we.grad)
        w.grad = None
    assert len(opt.cache_entries()) == 1
    assert _compiles("aot_eager") - before == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_symbolic_int_arguments(backend):
    def f(x, k):
        return x[: x.shape[0] - 1] * k + k // 2, k * x.shape[1]

    before = _compiles(backend)
    opt = minidynamo.optimize(f, backend=backend, dynamic=True)
    calls = [(5, 3), (9, 7), (6, 12)] if backend == "inductor" else [(n, k) for n in range(3, 12) for k in (2, 5, 9)]
    for n, k in calls:
        x = torch.randn(n, 4)
        got, want = opt(x, k), f(x, k)
        _close(got[0], want[0])
        assert got[1] == want[1]
    assert len(opt.cache_entries()) == 1
    assert _compiles(backend) - before == 1


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_linear_mlp_module_over_sequence_lengths(backend):
    model = _mlp()
    opt = minidynamo.optimize(model, backend=backend)  # automatic dynamic
    before = _compiles(backend)
    lengths = (5, 8, 13, 16) if backend == "inductor" else range(2, 40, 3)
    with torch.no_grad():
        for n in lengths:
            x = torch.randn(2, n, 12)
            _close(opt(x), model(x))
    assert _compiles(backend) - before == 2  # static for the first length, then symbolic


def test_linear_mlp_module_parameter_grads_aot_eager():
    model, ref = _mlp(), _mlp()
    opt = minidynamo.optimize(model, backend="aot_eager", dynamic=True)
    before = _compiles("aot_eager")
    for n in (3, 7, 20):
        x = torch.randn(n, 12)
        opt(x).sum().backward()
        ref(x).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            _close(p.grad, q.grad)
    assert _compiles("aot_eager") - before == 1


def test_triton_launch_with_a_symbolic_grid_through_aot_eager():
    """The launch becomes torch's triton_kernel_wrapper_mutation with the grid and `n` as
    graph values: AOTAutograd traces it over the symbolic fakes (in a plain FakeTensorMode,
    which torch's higher-order-op rules are registered for)."""
    def f(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 16),)](x, y, out, n, BLOCK=16)
        return out * 2 + n

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(f, backend="aot_eager", dynamic=True)
    for n in (20, 37, 64, 5):
        x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
        _close(opt(x, y), f(x, y))
    assert len(opt.cache_entries()) == 1
    assert _compiles("aot_eager") - before == 1


class _ScaledCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3 / x.shape[0]

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 / x.shape[0]


def test_autograd_function_using_sizes_through_aot_eager():
    def f(x):
        return _ScaledCube.apply(x).sum()

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(f, backend="aot_eager", dynamic=True)
    for n in (4, 7, 13):
        x = torch.randn(n, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        opt(x).backward()
        f(xe).backward()
        _close(x.grad, xe.grad)
    assert len(opt.cache_entries()) == 1
    assert _compiles("aot_eager") - before == 1


def test_break_between_two_graphs_each_symbolic():
    def f(x):
        y = torch.sin(x) * x.shape[0]
        minidynamo.graph_break()
        return y[1:].sum(0) - y.shape[0], y.shape[0] + 1

    before = _compiles("aot_eager")
    opt = minidynamo.optimize(f, backend="aot_eager", dynamic=True)
    for n in range(3, 20):
        x = torch.randn(n, 3)
        got, want = opt(x), f(x)
        _close(got[0], want[0])
        assert got[1] == want[1]
    assert [e.kind for e in opt.cache_entries()] == ["break"]
    assert _compiles("aot_eager") - before == 2  # the graph before the break and the resume's


def test_backend_that_cannot_take_symbolic_inputs_compiles_per_size(monkeypatch):
    monkeypatch.setattr(torch_backends, "_SYMBOLIC_BACKENDS", frozenset())
    before = _compiles("aot_eager")
    opt = minidynamo.optimize(_repro, backend="aot_eager")
    x = torch.randn(7, 2)
    minidynamo.mark_dynamic(x, 0)
    for n in (7, 9, 7, 12, 9):
        y = torch.randn(n, 2) if n != 7 else x
        _close(opt(y), _repro(y))
    runner = _unwrapped(opt.cache_entries()[0].compiled)
    assert isinstance(runner, torch_backends.StaticPerSize) and "specialises" in runner.why
    assert _compiles("aot_eager") - before == 3  # one artifact per size, each for that size only


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_input_transposed_in_place_under_symbolic_sizes(backend):
    """The shape guards are about the input as it comes in, not as the trace left its fake;
    torch's backend gets static artifacts (its fakes would describe the input after `t_`)."""
    def f(x):
        x.t_()
        return x * x.shape[1]

    opt = minidynamo.optimize(f, backend=backend, dynamic=True)
    for n in (4, 7, 9):
        a = torch.randn(n, 3)
        b = a.clone()
        _close(opt(a), f(b))
        assert a.shape == b.shape and a.stride() == b.stride()
    [entry] = opt.cache_entries()
    if backend == "aot_eager":
        assert "in place" in _unwrapped(entry.compiled).why


def test_backend_failing_on_symbolic_inputs_falls_back_to_static_artifacts(monkeypatch):
    real = torch_backends._compile

    def refuse_symbolic(compiler, name, gm, inputs, symbolic=False):
        if symbolic:
            raise NotImplementedError("no symbolic sizes here")
        return real(compiler, name, gm, inputs)

    monkeypatch.setattr(torch_backends, "_compile", refuse_symbolic)
    opt = minidynamo.optimize(_repro, backend="aot_eager", dynamic=True)
    for n in (4, 6, 4, 6, 8):
        y = torch.randn(n, 2)
        _close(opt(y), _repro(y))
    runner = _unwrapped(opt.cache_entries()[0].compiled)
    assert "no symbolic sizes here" in runner.why and len(runner.artifacts) == 3


def test_guards_the_backend_adds_are_the_entrys(monkeypatch):
    """A backend deciding on a symbolic size (inductor: `s0 <= 4096`) adds a guard to the
    shape environment; the entry checks it, and a size deciding otherwise compiles again."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    decisions = []

    def deciding(gm, example_inputs):
        small = example_inputs[0].shape[0] <= 10  # a SymBool: its bool() is a guard
        decisions.append(bool(small))
        return gm.forward

    monkeypatch.setitem(_BACKENDS, "md_test_deciding", None)
    register_backend(name="md_test_deciding")(deciding)
    monkeypatch.setattr(torch_backends, "_SYMBOLIC_BACKENDS", frozenset({"md_test_deciding"}))
    opt = minidynamo.optimize(_repro, backend="md_test_deciding", dynamic=True)
    for n in (4, 9, 3, 20, 15, 5):
        y = torch.randn(n, 2)
        _close(opt(y), _repro(y))
    assert decisions == [True, False]
    small, large = opt.cache_entries()
    assert "x.size(0) <= 10" in small.guard_text() and "11 <= x.size(0)" in large.guard_text()


# mode="cudagraphs": a recording holds one set of sizes; a view of one buffer has the
# same address at every length. The stand-in capture (test_cudagraphs.py's) replays by
# running the graph on the recording's inputs, on the CPU.
class _ReplayIntoStatic:
    def __init__(self, compiled, inputs, outputs):
        self.compiled, self.inputs, self.outputs = compiled, inputs, outputs

    def replay(self):
        for static, new in zip(self.outputs, self.compiled(*self.inputs)):
            static.copy_(new)


@pytest.fixture
def cuda_graph_stand_in(monkeypatch):
    def capture(self, rec):
        outputs = tuple(self.compiled(*[t.clone() for t in rec.inputs]))
        return _ReplayIntoStatic(self.compiled, rec.inputs, outputs), outputs
    monkeypatch.setattr(CudaGraphRunner, "_capture", capture)
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_cudagraphs_records_per_size_of_a_symbolic_entry(cuda_graph_stand_in, backend):
    buf = torch.randn(64, 3)
    opt = minidynamo.optimize(_repro, backend=backend, mode="cudagraphs")
    for n in (7, 7, 7, 9, 7, 9, 12, 30, 40, 50, 60, 9):  # past MAX_RECORDINGS too
        x = buf[:n]  # one address, many lengths
        minidynamo.mark_dynamic(x, 0)
        _close(opt(x), _repro(x))
    assert len(opt.cache_entries()) == 1
    runner = opt.cache_entries()[0].compiled
    assert runner.replays > 0 and len({rec.key for rec in runner.recordings}) == len(runner.recordings)
