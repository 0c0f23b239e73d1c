"""Tests for minidynamo.triton.launcher: a launcher must behave exactly like
``kernel[grid](**constants, **dynamic)``.  On CPU the kernels run under Triton's
interpreter (ordinary path only); the `gpu` tests also check the fast path."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from kernels.capture_kernels import add_kernel, last_config_wins  # noqa: E402

from minidynamo.triton.launcher import make_launcher  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
DEV = "cuda" if HAS_CUDA else "cpu"
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def pytest_configure(config):  # harmless if pyproject already registers it
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped elsewhere)")


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr, NEG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    r = alpha * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m)
    if NEG:
        r = -r
    tl.store(out_ptr + offs, r, mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}, num_warps=2)],
                 key=["n"], do_bench=last_config_wins())
@triton.jit
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def _block_marker(out_ptr, n, BLOCK: tl.constexpr):
    # out[pid] = BLOCK: the output shows which config ran and with which grid.
    pid = tl.program_id(0)
    tl.store(out_ptr + pid + tl.arange(0, 1), tl.full((1,), BLOCK, tl.int32))


marker = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
                         key=["n"], do_bench=last_config_wins())(_block_marker)


@triton.heuristics({"BLOCK": lambda a: triton.next_power_of_2(a["n"]) // 4,
                    "EVEN": lambda a: a["n"] % (triton.next_power_of_2(a["n"]) // 4) == 0})
@triton.jit
def heur_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale)
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})],
                 key=["n"], do_bench=last_config_wins())
@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def stacked_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale)
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)


def cdiv_grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


N = 300


def rand(n=N, dtype=torch.float32):
    return torch.randn(n, device=DEV, dtype=dtype)


def check(kernel, grid, consts, names, make_values, out_index, calls=3):
    """Run direct launches and the launcher on identical inputs; outputs must match."""
    lau = make_launcher(kernel, grid, consts, names)
    direct_grid = tuple(grid) if isinstance(grid, list) else grid  # the interpreter wants tuples
    for _ in range(calls):
        vals = make_values()
        ref = [v.clone() if isinstance(v, torch.Tensor) else v for v in vals]
        kernel[direct_grid](**consts, **dict(zip(names, ref)))
        assert lau(*vals) is None
        if HAS_CUDA:
            torch.cuda.synchronize()
        torch.testing.assert_close(vals[out_index], ref[out_index], rtol=0, atol=0)
    return lau


def add_values(n=N):
    return lambda: (rand(n), rand(n), torch.empty(n, device=DEV))


@pytest.mark.parametrize("grid", [(triton.cdiv(N, 128),), [triton.cdiv(N, 128), 1],
                                  (triton.cdiv(N, 128), 1, 1), lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)],
                         ids=["tuple", "list", "tuple3", "lambda"])
def test_add_grids(grid):
    lau = check(add_kernel, grid, {"n": N, "BLOCK": 128}, ("x_ptr", "y_ptr", "out_ptr"), add_values(), 2)
    assert "add_kernel" in lau.describe()


def test_constexprs_floats_and_num_warps():
    for neg in (False, True):
        check(axpy_kernel, cdiv_grid, {"alpha": 2.5, "n": N, "BLOCK": 64, "NEG": neg, "num_warps": 2},
              ("x_ptr", "y_ptr", "out_ptr"), add_values(), 2)


def test_int_and_float_in_dynamic_names():
    sizes = iter([N, 256, 1, 257, 1024, N])
    names = ("x_ptr", "y_ptr", "out_ptr", "alpha", "n")
    lau = make_launcher(axpy_kernel, cdiv_grid, {"BLOCK": 64, "NEG": False}, names)
    for n in sizes:  # n changes Triton's specialisation (==1, %16) and the grid
        x, y = rand(1024), rand(1024)
        o, ref = torch.zeros(1024, device=DEV), torch.zeros(1024, device=DEV)
        axpy_kernel[cdiv_grid](x, y, ref, 0.5, n, BLOCK=64, NEG=False)
        lau(x, y, o, 0.5, n)
        torch.testing.assert_close(o, ref, rtol=0, atol=0)
    if HAS_CUDA:  # one ordinary launch per specialisation (plain, %16, ==1); the rest replay fast
        assert lau.fast_path and lau.ordinary_calls == 3, lau.describe()


def test_autotuned_grid_uses_meta_block():
    lau = check(tuned_add, cdiv_grid, {"n": N}, ("x_ptr", "y_ptr", "out_ptr"), add_values(), 2)
    assert tuned_add.best_config.kwargs["BLOCK"] == 64
    assert lau(*add_values()()) is None


def test_heuristics_kernel():
    check(heur_scale, cdiv_grid, {"n": N, "scale": 3.0}, ("x_ptr", "out_ptr"),
          lambda: (rand(), torch.empty(N, device=DEV)), 1)
    check(heur_scale, cdiv_grid, {"n": 256, "scale": 3.0}, ("x_ptr", "out_ptr"),
          lambda: (rand(256), torch.empty(256, device=DEV)), 1)


def test_autotune_over_heuristics():
    check(stacked_scale, cdiv_grid, {"n": N, "scale": -1.5}, ("x_ptr", "out_ptr"),
          lambda: (rand(), torch.empty(N, device=DEV)), 1)


def test_changed_autotune_configs_do_not_run_stale_config():
    n = 64
    lau = make_launcher(marker, cdiv_grid, {"n": n}, ("out_ptr",))
    old_configs = marker.configs
    def zeros():
        return torch.zeros(16, dtype=torch.int32, device=DEV)
    try:
        # (change to make, BLOCK the launch must use afterwards)
        steps = [(None, 32), ([triton.Config({"BLOCK": 8})], 8), ("clear", 8),
                 ([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], 64),
                 ("append", 64), ("clear", 4)]  # Triton keeps a cached config after an append
        for change, block in steps:
            if change == "clear":  # cleared cache: the autotuner must run again
                marker.cache.clear()
            elif change == "append":  # same list object, new length
                marker.configs.append(triton.Config({"BLOCK": 4}))
            elif change is not None:
                marker.configs = change
            for _ in range(3):
                # Benchmarking writes the output too, so the first (tuning) call goes to scratch.
                lau(zeros())
                o, ref = zeros(), zeros()
                lau(o)
                marker[cdiv_grid](ref, n)
                torch.testing.assert_close(o, ref)
                assert o[0].item() == block and o[n // block - 1].item() == block
    finally:
        marker.configs = old_configs
        marker.cache.clear()


def test_describe_and_attributes():
    lau = make_launcher(add_kernel, (3,), {"n": N, "BLOCK": 128}, ("x_ptr", "y_ptr", "out_ptr"))
    lau(*add_values()())
    d = lau.describe()
    assert "add_kernel" in d and "(3,)" in d
    assert isinstance(lau.fast_path, bool)
    if not HAS_CUDA:
        assert lau.fast_path is False and "interpreter" in lau.fallback_reason


def test_not_a_kernel():
    with pytest.raises(TypeError):
        make_launcher(object(), (1,), {}, ())


def test_errors_propagate_like_direct_launch():
    def bad_grid(meta):
        raise ValueError("grid failed")
    lau = make_launcher(add_kernel, bad_grid, {"n": N, "BLOCK": 128}, ("x_ptr", "y_ptr", "out_ptr"))
    with pytest.raises(ValueError):
        add_kernel[bad_grid](*add_values()(), n=N, BLOCK=128)
    with pytest.raises(ValueError):
        lau(*add_values()())


# ---------------------------------------------------------------- GPU only
ADD = ("x_ptr", "y_ptr", "out_ptr")


@gpu
@needs_cuda
@pytest.mark.parametrize("kernel,grid,consts", [
    (add_kernel, (3,), {"n": N, "BLOCK": 128}),
    (add_kernel, cdiv_grid, {"n": N, "BLOCK": 128, "num_warps": 2}),
    (tuned_add, cdiv_grid, {"n": N}),
], ids=["tuple", "lambda", "autotune"])
def test_gpu_fast_path_taken(kernel, grid, consts):
    lau = check(kernel, grid, consts, ADD, add_values(), 2, calls=5)
    assert lau.fast_path, lau.describe()
    assert lau.ordinary_calls == 1
    assert "fast path" in lau.describe()


@gpu
@needs_cuda
def test_gpu_heuristics_fast_path():
    lau = check(stacked_scale, cdiv_grid, {"n": N, "scale": 2.0}, ("x_ptr", "out_ptr"),
                lambda: (rand(), torch.empty(N, device=DEV)), 1, calls=4)
    assert lau.fast_path and lau.ordinary_calls == 1, lau.describe()


@gpu
@needs_cuda
def test_gpu_misaligned_view_falls_back():
    lau = make_launcher(add_kernel, cdiv_grid, {"n": N, "BLOCK": 128}, ADD)
    x, y, o = rand(N + 1), rand(N + 1), torch.zeros(N + 1, device=DEV)
    lau(x[:N], y[:N], o[:N])
    lau(x[:N], y[:N], o[:N])
    assert lau.fast_path and lau.ordinary_calls == 1
    for _ in range(3):
        xs, ys, os_ = x[1:], y[1:], torch.zeros(N + 1, device=DEV)[1:]
        assert xs.data_ptr() % 16 != 0
        lau(xs, ys, os_)
        torch.testing.assert_close(os_, xs + ys, rtol=0, atol=0)
    # the misaligned call took the ordinary path once, then got its own variant
    assert lau.ordinary_calls == 2
    lau(x[:N], y[:N], o[:N])
    assert lau.ordinary_calls == 2
    torch.testing.assert_close(o[:N], x[:N] + y[:N], rtol=0, atol=0)


@gpu
@needs_cuda
def test_gpu_real_autotune_repeated_calls():
    @triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_warps=8)],
                     key=["n"])
    @triton.jit
    def real_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * tl.load(y_ptr + offs, mask=m), mask=m)

    n = 4096
    lau = make_launcher(real_tuned, cdiv_grid, {"n": n}, ADD)
    for _ in range(20):
        x, y, o = rand(n), rand(n), torch.empty(n, device=DEV)
        lau(x, y, o)
        torch.testing.assert_close(o, x * y, rtol=0, atol=0)
    assert lau.fast_path and lau.ordinary_calls == 1


@gpu
@needs_cuda
def test_gpu_side_stream_and_graph_capture():
    lau = make_launcher(add_kernel, cdiv_grid, {"n": N, "BLOCK": 128}, ADD)
    x, y, o = rand(), rand(), torch.zeros(N, device=DEV)
    lau(x, y, o)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)   # keep the side stream busy: a wrong stream would race
        x.add_(1.0)
        lau(x, y, o)
    s.synchronize()
    torch.testing.assert_close(o, x + y, rtol=0, atol=0)
    # Capturing launches onto the legacy/default stream is an error, so a graph that
    # replays the launch shows the launcher used the current (capturing) stream.
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        lau(x, y, o)
    x.mul_(2.0)
    o.zero_()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(o, x + y, rtol=0, atol=0)
    assert lau.ordinary_calls == 1


@gpu
@needs_cuda
def test_gpu_launch_hooks_take_ordinary_path():
    from triton import knobs
    seen = []

    def hook(meta):
        seen.append(meta)
    lau = make_launcher(add_kernel, (3,), {"n": N, "BLOCK": 128}, ADD)
    lau(*add_values()())
    lau(*add_values()())
    assert lau.ordinary_calls == 1
    chain = knobs.runtime.launch_enter_hook
    chain.add(hook)
    try:
        vals = add_values()()
        lau(*vals)
        torch.testing.assert_close(vals[2], vals[0] + vals[1])
        assert seen and lau.ordinary_calls == 2
    finally:
        chain.remove(hook)
    lau(*add_values()())
    assert lau.ordinary_calls == 2
