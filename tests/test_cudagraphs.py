"""mode="cudagraphs": correct results everywhere; recorded and replayed on a GPU."""
import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import triton

import minidynamo
from minidynamo.cudagraphs import CudaGraphRunner, analyse

_needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def gpu(test):
    """GPU-only: selected by `pytest -m gpu`, skipped without CUDA."""
    return pytest.mark.gpu(_needs_cuda(test))


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
    del kept  # releases both slots of a's recording
    a2 = torch.randn(200, device="cuda")
    torch.testing.assert_close(opt(a2, b), chain(a2, b))  # new address: new recording
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


# --- outputs: aliases of graph memory, never overwritten while held --------------------
# Each test runs twice: on a GPU with real CUDA graphs, and everywhere with a stand-in
# graph whose replay writes fresh results into the static outputs (the same overwrite a
# CUDA graph replay does), so the liveness rule is exercised without a GPU too (the
# rule reads reference counts, which are the same for CPU and CUDA storages).

class _ReplayIntoStatic:
    def __init__(self, compiled, inputs, outputs):
        self.compiled, self.inputs, self.outputs = compiled, inputs, outputs

    def replay(self):
        for static, new in zip(self.outputs, self.compiled(*self.inputs)):
            static.copy_(new)


@pytest.fixture(params=["stand-in", pytest.param("cuda", marks=[pytest.mark.gpu, _needs_cuda])])
def device(request, monkeypatch):
    if request.param == "cuda":
        return "cuda"

    def capture(self, rec):
        outputs = tuple(self.compiled(*rec.inputs))
        return _ReplayIntoStatic(self.compiled, rec.inputs, outputs), outputs
    monkeypatch.setattr(CudaGraphRunner, "_capture", capture)
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))
    return K.DEVICE  # the Triton interpreter's CPU tensors where there is no GPU


def static_ptrs(r: CudaGraphRunner) -> set:
    recs = r.recordings + ([r.copy_recording] if r.copy_recording else [])
    return {o.data_ptr() for rec in recs for s in rec.slots for o in s.outputs}


def slot_of(r: CudaGraphRunner, out):
    return next(s for rec in r.recordings for s in rec.slots
                if s.outputs[0].data_ptr() == out.data_ptr())


def test_loop_alternates_two_slots_without_copies(device):
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=device), torch.randn(200, device=device)
    ptrs = []
    o = None
    for _ in range(10):
        a.add_(1)  # new contents at the same address
        o = opt(a, b)  # the previous o is alive during this call
        torch.testing.assert_close(o, chain(a, b))
        ptrs.append(o.data_ptr())
    r = runner_of(opt)
    assert r.fallback_reason is None and r.clone_reason is None
    assert r.replays == 8 and r.held_fallbacks == 0
    assert len(r.recordings) == 1 and len(r.recordings[0].slots) == 2
    replayed = ptrs[2:]  # after the warm-up runs: the static outputs themselves, period 2
    assert set(replayed) <= static_ptrs(r) and len(set(replayed)) == 2
    assert all(p == q for p, q in zip(replayed, replayed[2:]))
    del o
    dropped = []
    for _ in range(4):  # results dropped at once: the same slot every time
        dropped.append(opt(a, b).data_ptr())
    assert len(set(dropped)) == 1 and r.held_fallbacks == 0


class _Busy:
    """A lock another thread holds: a try without waiting fails."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()

    def acquire(self, blocking=True):
        return blocking and self.lock.acquire()

    def __enter__(self):
        self.lock.acquire()

    def __exit__(self, *exc):
        self.lock.release()


def test_steady_calls_replay_without_the_full_path(device, monkeypatch):
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=device), torch.randn(200, device=device)
    o = None
    for _ in range(4):  # warm-up runs, then both slots recorded
        o = opt(a, b)
    r = runner_of(opt)
    assert len(r.recordings[0].slots) == 2
    full = []
    original = CudaGraphRunner._call
    monkeypatch.setattr(CudaGraphRunner, "_call", lambda self, args: full.append(1) or original(self, args))
    for _ in range(4):  # the previous output held during each call: the other slot
        a.add_(1)
        o = opt(a, b)
        torch.testing.assert_close(o, chain(a, b))
    assert not full and r.replays == 6 and r.calls == 8
    kept = opt(a, b)
    third = opt(a, b)  # both slots held: the full path runs the plain graph
    assert full == [1] and r.held_fallbacks == 1 and third.data_ptr() not in static_ptrs(r)
    torch.testing.assert_close(third, chain(a, b))
    del o, kept, third
    c = torch.randn(200, device=device)  # other addresses: the full path
    torch.testing.assert_close(opt(c, b), chain(c, b))
    assert full == [1, 1]
    r._lock = _Busy()  # another thread replaying: wait for it on the full path
    torch.testing.assert_close(opt(a, b), chain(a, b))
    assert full == [1, 1, 1]


def test_held_outputs_are_never_overwritten(device):
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=device), torch.randn(200, device=device)
    kept, expected = [], []
    for _ in range(8):
        a.mul_(-1.5)  # a wrongly overwritten output would show other numbers
        kept.append(opt(a, b))
        expected.append(chain(a, b))
    for k, e in zip(kept, expected):
        torch.testing.assert_close(k, e)
    r = runner_of(opt)
    assert r.replays == 2 and r.held_fallbacks == 4  # both slots held: plain runs
    assert {k.data_ptr() for k in kept[4:]}.isdisjoint(static_ptrs(r))
    del kept
    torch.testing.assert_close(opt(a, b), chain(a, b))
    assert r.replays == 3  # released slots are replayed again


def _rebuild_from_storage(o):  # keeps the storage object alone, not the tensor
    s, off, size, stride = o.untyped_storage(), o.storage_offset(), o.shape, o.stride()
    dtype, device = o.dtype, o.device
    return lambda: torch.empty(0, dtype=dtype, device=device).set_(s, off, size, stride)


HOLDERS = {  # what the caller keeps of an output → a function reading it back later
    "view": lambda o: (lambda v: lambda: v)(o[1:]),
    "detach": lambda o: (lambda v: lambda: v)(o.detach()),
    "data": lambda o: (lambda v: lambda: v)(o.data),
    "storage": _rebuild_from_storage,
}


@pytest.mark.parametrize("holder", sorted(HOLDERS))
def test_a_kept_alias_of_an_output_is_not_overwritten(device, holder):
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=device), torch.randn(200, device=device)
    for _ in range(4):
        opt(a, b)  # warm-up, record, replay
    o = opt(a, b)
    slot = slot_of(runner_of(opt), o)
    want = o.clone()
    read = HOLDERS[holder](o)
    want = want[1:] if holder == "view" else want
    del o
    for _ in range(3):
        a.mul_(-2)
        torch.testing.assert_close(opt(a, b), chain(a, b))  # from the other slot
    torch.testing.assert_close(read(), want)
    assert not slot.held.is_free() and runner_of(opt).replays == 6
    del read
    assert slot.held.is_free()  # released: its memory may be replayed over again


def test_output_saved_for_backward_is_not_overwritten(device):
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=device), torch.randn(200, device=device)
    for _ in range(4):
        opt(a, b)
    w = torch.randn(200, device=device, requires_grad=True)
    o = opt(a, b)
    slot = slot_of(runner_of(opt), o)
    loss = (o * w).sum()  # autograd saves the output (it is the gradient of w)
    del o
    want = chain(a, b)
    for _ in range(3):
        a.mul_(-2)
        torch.testing.assert_close(opt(a, b), chain(a, b))
    assert not slot.held.is_free()
    loss.backward()
    torch.testing.assert_close(w.grad, want)
    assert slot.held.is_free()  # backward released the saved output


def test_copy_recording_uses_slots_too(device, monkeypatch):
    monkeypatch.setattr(minidynamo.cudagraphs, "MAX_RECORDINGS", 1)
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    b = torch.randn(200, device=device)
    kept = []
    for _ in range(8):
        a = torch.randn(200, device=device)  # a new address each call (past the first)
        kept.append((opt(a, b), chain(a, b)))
    for got, want in kept:
        torch.testing.assert_close(got, want)
    r = runner_of(opt)
    assert r.copy_recording is not None and len(r.copy_recording.slots) == 2
    assert r.held_fallbacks > 0




def test_without_storage_use_count_outputs_are_cloned(monkeypatch):
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))
    monkeypatch.setattr(CudaGraphRunner, "_capture", lambda self, rec: (
        lambda outs: (_ReplayIntoStatic(self.compiled, rec.inputs, outs), outs))(
            tuple(self.compiled(*rec.inputs))))
    monkeypatch.setattr(minidynamo.held, "use_count", None)
    opt = minidynamo.optimize(mode="cudagraphs")(chain)
    a, b = torch.randn(200, device=K.DEVICE), torch.randn(200, device=K.DEVICE)
    kept = []
    for _ in range(5):
        a.add_(1)
        kept.append((opt(a, b), chain(a, b)))
    for got, want in kept:
        torch.testing.assert_close(got, want)
    r = runner_of(opt)
    assert "_storage_Use_Count" in r.clone_reason and r.replays == 3
    assert len(r.recordings[0].slots) == 1


# --- training: forward and backward recorded together (cudagraph_training.py) ----------
# The stand-in replays re-run the graph (forward, with autograd) and autograd.grad
# (backward) and copy into the slot's static tensors, as the CUDA graphs' replays write them.

@pytest.fixture(params=["stand-in", pytest.param("cuda", marks=[pytest.mark.gpu, _needs_cuda])])
def tdevice(request, monkeypatch):
    if request.param == "cuda":
        return "cuda"
    from minidynamo import cudagraph_training as T

    def capture_training(self, rec):
        leaves = [t.detach().requires_grad_(g) for t, g in zip(rec.inputs, self.needs_grad)]
        diff_in = [i for i, t in enumerate(leaves) if t.requires_grad]
        outs = tuple(self.compiled(*leaves))
        diff_out = tuple(i for i, o in enumerate(outs) if o.requires_grad)
        grad_outputs = [torch.empty_like(outs[i]) for i in diff_out]
        grads = T._grads(outs, leaves, diff_in, None)
        live = {}

        class Fwd:
            def replay(self_):
                with torch.enable_grad():
                    live["outs"] = tuple(self.compiled(*leaves))
                for s, n in zip(outs, live["outs"]):
                    s.detach().copy_(n)

        class Bwd:
            def replay(self_):
                for s, n in zip(grads, T._grads(live["outs"], leaves, diff_in, grad_outputs, retain=False)):
                    if s is not None:
                        s.copy_(n)
        return T.TrainingSlot(Fwd(), Bwd(), outs, diff_out, grad_outputs, grads, keep=outs)
    monkeypatch.setattr(CudaGraphRunner, "_capture_training", capture_training)
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))
    return "cpu"


def mlp_loss(x, w1, w2):
    h = torch.relu(x @ w1)
    return ((h @ w2) ** 2).mean(), h


def _params(device):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(16, 16, generator=g).to(device).requires_grad_() for _ in range(2)]


def test_training_steps_replay_forward_and_backward(tdevice):
    opt = minidynamo.optimize(mode="cudagraphs")(mlp_loss)
    ws, ref_ws = _params(tdevice), _params(tdevice)
    x = torch.randn(8, 16, device=tdevice)
    for step in range(6):
        x.mul_(-1.1)  # same address, new contents
        for w, r in zip(ws, ref_ws):
            w.grad = r.grad = None
        loss, h = opt(x, *ws)
        ref_loss, ref_h = mlp_loss(x, *ref_ws)
        (loss + h.sum()).backward()
        (ref_loss + ref_h.sum()).backward()
        torch.testing.assert_close(loss, ref_loss)
        for w, r in zip(ws, ref_ws):
            torch.testing.assert_close(w.grad, r.grad)
    r = runner_of(opt)
    assert r.training and r.fallback_reason is None and r.replays == 4
    # a parameter's .grad is autograd's copy, never the slot's gradient buffer
    slot = r.recordings[0].slots[0]
    assert {w.grad.data_ptr() for w in ws}.isdisjoint(
        {g.data_ptr() for g in slot.grad_inputs if g is not None})


def test_training_gradients_accumulate_across_replays(tdevice):
    opt = minidynamo.optimize(mode="cudagraphs")(mlp_loss)
    ws, ref_ws = _params(tdevice), _params(tdevice)
    x = torch.randn(8, 16, device=tdevice)
    for _ in range(5):  # no zeroing: .grad sums every step's gradient
        opt(x, *ws)[0].backward()
        mlp_loss(x, *ref_ws)[0].backward()
    for w, r in zip(ws, ref_ws):
        torch.testing.assert_close(w.grad, r.grad)
    assert runner_of(opt).replays == 3


def test_two_forwards_before_backward_use_two_slots(tdevice):
    opt = minidynamo.optimize(mode="cudagraphs")(mlp_loss)
    ws, ref_ws = _params(tdevice), _params(tdevice)
    x = torch.randn(8, 16, device=tdevice)
    for _ in range(2):
        opt(x, *ws)[0].backward()
        mlp_loss(x, *ref_ws)[0].backward()
    pending = []
    for _ in range(3):  # micro-batches: forwards first (the third finds both slots pending)
        pending.append(opt(x, *ws)[0])
        mlp_loss(x, *ref_ws)[0].backward()
    for loss in pending:
        loss.backward()
    for w, r in zip(ws, ref_ws):
        torch.testing.assert_close(w.grad, r.grad)
    r = runner_of(opt)
    assert r.replays == 2 and r.held_fallbacks == 1 and len(r.recordings[0].slots) == 2


def test_training_input_at_new_addresses_is_staged(tdevice):
    def f(h, w):
        return (torch.tanh(h @ w) ** 2).sum()
    opt = minidynamo.optimize(mode="cudagraphs")(f)
    w0, w = _params(tdevice)
    r0, rw = (t.detach().clone().requires_grad_() for t in (w0, w))
    for i in range(6):
        x = torch.randn(4, 16, device=tdevice, generator=None) * (i + 1)
        opt(x @ w0, w).backward()  # h: a new tensor each call, whose grad flows on to w0
        f(x @ r0, rw).backward()
    torch.testing.assert_close(w0.grad, r0.grad)
    torch.testing.assert_close(w.grad, rw.grad)
    r = runner_of(opt)
    assert r.staged == (0,) and r.copy_recording is not None and r.replays >= 3


def test_outputs_requiring_grad_keep_autograd_and_are_not_overwritten(tdevice):
    def f(a, w):
        return a * w
    opt = minidynamo.optimize(mode="cudagraphs")(f)
    a = torch.randn(16, device=tdevice)
    w = torch.randn(16, device=tdevice, requires_grad=True)
    outs = []
    for _ in range(5):  # kept, never backwarded: both slots pending, then plain runs
        outs.append((opt(a, w), f(a, w)))
    for o, want in outs:
        torch.testing.assert_close(o, want)
        assert o.grad_fn is not None
    r = runner_of(opt)
    assert r.training and r.clone_reason is None and r.replays == 2 and r.held_fallbacks == 1
    outs[2][0].sum().backward()  # a replay's
    torch.testing.assert_close(w.grad, a)


def test_input_changed_in_place_before_backward_raises_as_in_eager(tdevice):
    opt = minidynamo.optimize(mode="cudagraphs")(mlp_loss)
    ws = _params(tdevice)
    x = torch.randn(8, 16, device=tdevice)
    for _ in range(3):
        opt(x, *ws)[0].backward()
    loss = opt(x, *ws)[0]
    assert runner_of(opt).replays == 2
    x.add_(1)  # the backward replay would read the new values
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
