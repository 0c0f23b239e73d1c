"""The launch program's output pool (triton/pool.py): returned `empty_like` outputs and the
scratch buffer are reused across calls only once nobody holds them. Every test keeps what
a user might keep — the output, a view, its storage, a tensor autograd saved — and checks
it still holds the values of its own call after later calls. On CPU the launches go to
the stand-in C entry of test_launch_program; on a GPU to the real one."""
import pytest
import torch
from kernels import capture_kernels as K
from test_launch_program import run_calls, skip_read, stand_in_resolution  # noqa: F401 - a fixture

from minidynamo import held
from minidynamo.triton.pool import OutputPool

N = 256


@pytest.fixture
def dev(request):
    """The device the program runs on: the stand-in resolution on CPU, the GPU's own."""
    if torch.cuda.is_available():
        return "cuda"
    request.getfixturevalue("stand_in_resolution")
    return "cpu"


def one_launch(a, b):
    o = torch.empty_like(a)
    K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=64)
    return o


def pair(dev):
    return torch.randn(N, device=dev), torch.randn(N, device=dev)


def built(fn, dev):
    """fn optimized, its launch program built (after the first call), and its pool."""
    opt = run_calls(fn, lambda i: pair(dev), calls=2)
    entry = opt.cache_entries()[0]
    assert "reused across calls once dropped" in entry.program_note, entry.program_note
    (pool,) = [v for v in entry.ns.values.values() if isinstance(v, OutputPool)]
    return opt, pool


def test_dropped_outputs_are_reused_and_kept_ones_never_overwritten(dev):
    opt, pool = built(one_launch, dev)
    for _ in range(6):  # the usual loop: the last output is held while the next call runs
        a, b = pair(dev)
        o = opt(a, b)
        torch.testing.assert_close(o, a + b)
    assert pool.reused >= 4
    kept = []
    for _ in range(5):
        a, b = pair(dev)
        kept.append((opt(a, b), a + b))
    for got, want in kept:
        torch.testing.assert_close(got, want)
    assert len({got.data_ptr() for got, _ in kept}) == 5


def test_views_storages_and_saved_tensors_keep_their_memory(dev):
    opt, pool = built(one_launch, dev)
    a, b = pair(dev)
    view = opt(a, b)[10:]  # the output itself is dropped; the view holds its storage
    want_view = (a + b)[10:]
    a2, b2 = pair(dev)
    storage = opt(a2, b2).untyped_storage()
    want_storage = a2 + b2
    a3, b3 = pair(dev)
    w = torch.randn(N, device=dev, requires_grad=True)
    loss = (opt(a3, b3) * w).sum()  # mul saves the output for w's gradient
    for _ in range(4):
        opt(*pair(dev))
    torch.testing.assert_close(view, want_view)
    torch.testing.assert_close(torch.empty(0, device=dev).set_(storage), want_storage)
    loss.backward()
    torch.testing.assert_close(w.grad, a3 + b3)


def test_scratch_buffer_comes_from_the_pool_too(dev):
    opt, pool = built(skip_read, dev)
    for _ in range(5):
        a, b = pair(dev)
        out = opt(a, b)
        torch.testing.assert_close(out, skip_read(a.clone(), b.clone()))
    assert pool.reused >= 3


def test_without_storage_use_counts_nothing_is_pooled(dev, monkeypatch):
    monkeypatch.setattr(held, "use_count", None)
    opt = run_calls(one_launch, lambda i: pair(dev), calls=4)
    note = opt.cache_entries()[0].program_note
    assert "launch(es)" in note and "reused" not in note, note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_other_streams_and_graph_capture_get_their_own_memory():
    opt, pool = built(one_launch, "cuda")
    held_out = opt(*pair("cuda"))  # noqa: F841 - holds one slot
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a, b = pair("cuda")
        on_side = opt(a, b)
        want_side = a + b
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(on_side, want_side)
    slots_before = pool.describe()
    sa, sb = pair("cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = opt(sa, sb)
    for _ in range(3):
        sa.copy_(torch.randn(N, device="cuda"))
        graph.replay()
        fresh = opt(*pair("cuda"))  # never the graph's output memory
        torch.testing.assert_close(static_out, sa + sb)
        assert fresh.data_ptr() != static_out.data_ptr()
    assert pool.describe().split(",")[0] == slots_before.split(",")[0]


def test_pool_is_not_used_while_capturing():
    calls = []
    pool = OutputPool(lambda: calls.append(1) or (torch.zeros(4),), capturing=lambda: True)
    assert pool.take(0) is None and not calls
