"""Launchers with a per-call grid (``make_launcher(..., grid_per_call=True)``, called
``launcher(grid, *values)``): one launcher for every size. Each test compares against
``kernel[grid](...)`` (or torch) over sizes that change what Triton specialises on.

* Under Triton's interpreter (CPU) launchers take the ordinary path only.
* With Triton's launch path emulated (launcher_emulation.py) resolution and the generated
  replay code run on CPU too; the emulated kernels refuse any launch whose arguments
  do not match the specialisation they were compiled for.
* The `gpu` tests run the real thing."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")

import launcher_emulation as E  # noqa: E402
from kernels.capture_kernels import add_kernel, add_pruned  # noqa: E402
from test_launcher import heur_scale, marker, stacked_scale, tuned_add  # noqa: E402

from minidynamo.triton import resolve as resolve_module  # noqa: E402
from minidynamo.triton.launcher import make_launcher  # noqa: E402
from minidynamo.triton.resolved import CONSTANT, SCALAR, TENSOR  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
DEV = "cuda" if HAS_CUDA else "cpu"
ADD = ("x_ptr", "y_ptr", "out_ptr", "n")
# ints that flip Triton's specialisation (==1, divisible by 16, neither), in a changing order
SIZES = [300, 256, 1, 17, 1024, 300, 33, 512, 1, 48]


cdiv = triton.cdiv  # a grid's meta may hold constexprs, whose // is not Python's for negatives

def grid_for(n, block):
    return (cdiv(n, block), 1, 1)


def sync():
    if HAS_CUDA:
        torch.cuda.synchronize()


# ---------------------------------------------------------------- the interpreter (or a GPU)
def test_plain_kernel_across_sizes():
    lau = make_launcher(add_kernel, None, {"BLOCK": 128}, ADD, grid_per_call=True)
    for n in SIZES:
        x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
        out, ref = torch.empty(n, device=DEV), torch.empty(n, device=DEV)
        add_kernel[grid_for(n, 128)](x, y, ref, n, BLOCK=128)
        assert lau(grid_for(n, 128), x, y, out, n) is None
        sync()
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert "per call" in lau.describe()


def test_heuristics_kernel_across_sizes():
    # BLOCK = next_power_of_2(n) // 4 and EVEN = n % BLOCK == 0: both change with n.
    lau = make_launcher(heur_scale, None, {"scale": 3.0}, ("x_ptr", "out_ptr", "n"), grid_per_call=True)
    for n in SIZES:
        if n < 4:
            continue
        x = torch.randn(n, device=DEV)
        out, ref = torch.empty(n, device=DEV), torch.empty(n, device=DEV)
        block = triton.next_power_of_2(n) // 4
        heur_scale[grid_for(n, block)](x, ref, n, scale=3.0)
        lau(grid_for(n, block), x, out, n)
        sync()
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def _per_config(kernel, n):
    return tuple(grid_for(n, c.kwargs["BLOCK"]) for c in kernel.configs)


def test_autotuned_kernel_with_key_across_sizes():
    lau = make_launcher(tuned_add, None, {}, ADD, grid_per_call=True)
    for n in SIZES:
        x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
        out, ref = torch.empty(n, device=DEV), torch.empty(n, device=DEV)
        tuned_add[lambda m: (cdiv(m["n"], m["BLOCK"]),)](x, y, ref, n)
        lau(_per_config(tuned_add, n), x, y, out, n)
        sync()
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_autotuned_grid_entry_is_the_chosen_configs():
    # marker writes BLOCK into out[pid] for each program: the chosen config's block, over
    # exactly the grid given for that config.
    lau = make_launcher(marker, None, {}, ("out_ptr", "n"), grid_per_call=True)
    for n in (64, 96, 64, 160):
        grids = tuple((n // c.kwargs["BLOCK"] + 1, 1, 1) for c in marker.configs)
        lau(grids, torch.zeros(16, dtype=torch.int32, device=DEV), n)  # tunes (writes to scratch)
        out = torch.zeros(16, dtype=torch.int32, device=DEV)
        lau(grids, out, n)
        block = marker.cache[(n, "torch.int32")].kwargs["BLOCK"]
        programs = n // block + 1
        assert out[:programs].tolist() == [block] * programs and not out[programs:].any()


def test_autotune_over_heuristics_across_sizes():
    lau = make_launcher(stacked_scale, None, {"scale": -1.5}, ("x_ptr", "out_ptr", "n"), grid_per_call=True)
    for n in SIZES:
        x = torch.randn(n, device=DEV)
        out, ref = torch.empty(n, device=DEV), torch.empty(n, device=DEV)
        stacked_scale[lambda m: (cdiv(m["n"], m["BLOCK"]),)](x, ref, n, scale=-1.5)
        lau(_per_config(stacked_scale, n), x, out, n)
        sync()
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_autotune_prune_function_sees_the_arguments_as_named_args():
    # add_pruned's prune function reads named_args["n"]: the leading arguments go
    # positionally, as in the launch the user wrote. Every new n is tuned (pruned) again.
    lau = make_launcher(add_pruned, None, {}, ADD, grid_per_call=True)
    for n in (40, 8, 200, 40, 13):
        x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
        out = torch.empty(n, device=DEV)
        lau(_per_config(add_pruned, n), x, y, out, n)
        sync()
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_wrong_number_of_grids_is_an_error():
    lau = make_launcher(tuned_add, None, {}, ADD, grid_per_call=True)
    x = torch.randn(8, device=DEV)
    with pytest.raises(ValueError, match="2 autotune configs"):
        lau(((1, 1, 1),), x, x, x, 8)


# ---------------------------------------------------------------- emulated Triton
@pytest.fixture
def emu(monkeypatch):
    if HAS_CUDA:
        pytest.skip("the GPU tests run the real launch path")
    emulation = E.Emulation()
    internals = emulation.internals()
    monkeypatch.setattr(resolve_module, "internals", lambda: internals)
    return emulation


def _add_call(emu, lau, n, offset=0, block=64, grid=None):
    x, y, out = (torch.randn(n + offset)[offset:] for _ in range(3))
    emu.track(x, y, out)
    lau(grid or grid_for(n, block), x, y, out, n)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_emulated_plain_kernel_replays_per_specialisation(emu):
    lau = emu.launcher(emu.jit(E.add), None, {"BLOCK": 64}, ADD, grid_per_call=True)
    for n in SIZES:
        _add_call(emu, lau, n)
    # One ordinary launch (and compile) per class of n: odd, divisible by 16, 1.
    assert lau.ordinary_calls == 3 and emu.compiles == 3, lau.describe()
    assert emu.replays == len(SIZES) - 3
    r = lau.variants[0]
    assert r.grid_per_call and r.config_index is None
    assert [p.role for p in r.params] == [TENSOR, TENSOR, TENSOR, SCALAR, CONSTANT]


def test_emulated_grid_comes_from_each_call(emu):
    lau = emu.launcher(emu.jit(E.marker), None, {"BLOCK": 16}, ("out_ptr", "n"), grid_per_call=True)
    for programs in (3, 5, 2, 7):
        out = emu.track(torch.zeros(8, dtype=torch.int32))
        lau((programs, 1, 1), out, 48)
        assert out.tolist() == [16] * programs + [0] * (8 - programs)
    assert lau.ordinary_calls == 1 and emu.replays == 3


def test_emulated_misaligned_pointer_gets_its_own_variant(emu):
    lau = emu.launcher(emu.jit(E.add), None, {"BLOCK": 64}, ADD, grid_per_call=True)
    for offset in (0, 0, 1, 1, 0, 1):  # 4 bytes off: not 16-byte aligned
        _add_call(emu, lau, 100, offset)
    assert lau.ordinary_calls == 2 and len(lau.variants) == 2


def test_emulated_do_not_specialize_replays_every_int(emu):
    jit = emu.jit(E.add)
    jit.params[3].do_not_specialize = True  # as @triton.jit(do_not_specialize=["n"])
    lau = emu.launcher(jit, None, {"BLOCK": 64}, ADD, grid_per_call=True)
    for n in SIZES:
        _add_call(emu, lau, n)
    assert lau.ordinary_calls == 1 and emu.compiles == 1


def test_emulated_heuristics_are_recomputed_per_call(emu):
    kernel = triton.heuristics({"BLOCK": E.heuristic_block, "EVEN": E.heuristic_even})(emu.jit(E.scale))
    lau = emu.launcher(kernel, None, {"alpha": 2.0}, ("x_ptr", "out_ptr", "n"), grid_per_call=True)
    seen = set()
    for n in [48, 40, 64, 128, 96, 7, 9, 40, 64, 200, 48]:
        block = E.heuristic_block({"n": n})
        x, out = emu.track(torch.randn(n), torch.zeros(n))
        lau(grid_for(n, block), x, out, n)
        torch.testing.assert_close(out, x * 2.0, rtol=0, atol=0)
        seen.add((block, n % block == 0, n % 16 == 0))
    assert lau.ordinary_calls <= len(seen) + 1 and emu.replays >= 3, lau.describe()


def test_emulated_autotune_retunes_per_key_and_replays_tuned_keys(emu):
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})],
                            key=["n"], do_bench=E.last_config_wins())(emu.jit(E.marker))
    lau = emu.launcher(tuned, None, {}, ("out_ptr", "n"), grid_per_call=True)

    def call(n):
        grids = tuple((n // c.kwargs["BLOCK"] + 1, 1, 1) for c in tuned.configs)
        out = emu.track(torch.zeros(16, dtype=torch.int32))
        tuning = (n, "torch.int32") not in tuned.cache
        lau(grids, out, n)
        block = tuned.cache[(n, "torch.int32")].kwargs["BLOCK"]
        programs = n // block + 1
        if not tuning:  # (benchmarking writes with every config)
            assert out.tolist() == [block] * programs + [0] * (16 - programs)
    for n in (64, 96, 64, 96, 128, 64, 128):
        call(n)
    # Each new key tuned on the ordinary path (both configs benchmarked), then replayed.
    assert sorted(tuned.cache) == [(64, "torch.int32"), (96, "torch.int32"), (128, "torch.int32")]
    assert lau.ordinary_calls == 3 and emu.replays == 4, lau.describe()
    assert len(lau.variants) == 1  # the same config for every key: one variant
    r = lau.variants[0]
    assert r.config_index == 1 and r.state.tuners[0].key_parts[0].index == 1


def test_emulated_autotune_pruned_configs(emu):
    def prune(configs, named_args, **kwargs):  # reads `n` as a launch written positionally passes it
        return [c for c in configs if c.kwargs["BLOCK"] <= max(16, named_args["n"])]
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                            prune_configs_by={"early_config_prune": prune}, do_bench=E.last_config_wins())(
        emu.jit(E.marker))
    lau = emu.launcher(tuned, None, {}, ("out_ptr", "n"), grid_per_call=True)
    for n in (8, 100, 8, 100, 12):
        grids = tuple((n // c.kwargs["BLOCK"] + 1, 1, 1) for c in tuned.configs)
        lau(grids, emu.track(torch.zeros(16, dtype=torch.int32)), n)  # may tune: benchmarks write
        out = emu.track(torch.zeros(16, dtype=torch.int32))
        lau(grids, out, n)
        block = 16 if n < 64 else 64
        assert out[0].item() == block and out[n // block + 1:].sum() == 0
    assert lau.ordinary_calls == 3


def test_emulated_autotune_over_heuristics(emu):
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                            do_bench=E.last_config_wins())(
        triton.heuristics({"EVEN": E.heuristic_even})(emu.jit(E.scale)))
    lau = emu.launcher(tuned, None, {"alpha": -1.0}, ("x_ptr", "out_ptr", "n"), grid_per_call=True)
    for n in (128, 100, 128, 100, 64, 33):
        x, out = emu.track(torch.randn(n), torch.zeros(n))
        lau(tuple(grid_for(n, c.kwargs["BLOCK"]) for c in tuned.configs), x, out, n)
        torch.testing.assert_close(out, -x, rtol=0, atol=0)
    assert emu.replays >= 2 and lau.ordinary_calls == 4


def test_emulated_global_state_takes_the_ordinary_path(emu):
    lau = emu.launcher(emu.jit(E.add), None, {"BLOCK": 64}, ADD, grid_per_call=True)
    _add_call(emu, lau, 100)
    _add_call(emu, lau, 100)
    assert lau.ordinary_calls == 1

    class Hook:
        calls = [print]
    emu.runtime.launch_enter_hook = Hook()
    _add_call(emu, lau, 100)  # a launch hook: Triton's own path, and no variant made
    assert lau.ordinary_calls == 2 and "hooks" in lau.fallback_reason
    emu.runtime.launch_enter_hook = None
    _add_call(emu, lau, 100)
    assert lau.ordinary_calls == 2


def test_emulated_pinned_mode_is_unchanged(emu):
    lau = emu.launcher(emu.jit(E.add), (2, 1, 1), {"BLOCK": 64, "n": 100}, ADD[:3])
    for _ in range(3):
        x, y, out = emu.track(torch.randn(100), torch.randn(100), torch.zeros(100))
        lau(x, y, out)
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert lau.ordinary_calls == 1 and lau.variants[0].grid == (2, 1, 1)
    source = type(lau).__call__.__source__
    assert source.startswith("def launch_add(launcher, a0, a1, a2):"), source


def test_emulated_variant_code_names_what_it_holds(emu):
    lau = emu.launcher(emu.jit(E.add), None, {"BLOCK": 64}, ADD, grid_per_call=True)
    _add_call(emu, lau, 100)
    source = type(lau).__call__.__source__
    assert "gx, gy, gz = grid" in source and "entry_add(gx, gy, gz, current_stream(-1)" in source, source
    for opaque in ("RT", "H0", "P0", "DEV", "GETDEV"):
        assert opaque not in source.replace("entry", ""), source


# ---------------------------------------------------------------- GPU only
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def _gpu_add(lau, n, offset=0, block=128):
    x, y, out = (torch.randn(n + offset, device="cuda")[offset:] for _ in range(3))
    lau(grid_for(n, block), x, y, out, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@gpu
@needs_cuda
def test_gpu_per_call_fast_path_across_sizes():
    lau = make_launcher(add_kernel, None, {"BLOCK": 128}, ADD, grid_per_call=True)
    for n in SIZES * 2:
        _gpu_add(lau, n)
    # One ordinary launch per class of n (odd, divisible by 16, 1); every other call replays.
    assert lau.fast_path and lau.ordinary_calls == 3, lau.describe()
    assert "C entry" in lau.describe()
    source = type(lau).__call__.__source__
    assert "gx, gy, gz = grid" in source and "entry_add_kernel(gx, gy, gz" in source, source


@gpu
@needs_cuda
def test_gpu_per_call_misaligned_and_large_ints():
    lau = make_launcher(add_kernel, None, {"BLOCK": 128}, ADD, grid_per_call=True)
    for offset in (0, 1, 0, 1):
        _gpu_add(lau, 300, offset)
    assert lau.ordinary_calls == 2
    # An int past 2**31 is an i64 argument: another compiled kernel (x is short: the grid
    # covers it, the mask does not matter past n).
    x = torch.randn(256, device="cuda")
    out = torch.zeros(256, device="cuda")
    lau(grid_for(256, 128), x, x, out, 256)
    lau(grid_for(256, 128), x, x, out, 2**31 + 16)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + x, rtol=0, atol=0)
    assert lau.ordinary_calls == 4, lau.describe()  # 256: divisible by 16, a new class too


@gpu
@needs_cuda
def test_gpu_per_call_heuristics():
    lau = make_launcher(heur_scale, None, {"scale": 3.0}, ("x_ptr", "out_ptr", "n"), grid_per_call=True)
    classes = set()
    for n in [300, 256, 512, 300, 100, 256, 300, 512, 100]:  # four classes: as many as live variants
        x = torch.randn(n, device="cuda")
        out = torch.empty(n, device="cuda")
        block = triton.next_power_of_2(n) // 4
        lau(grid_for(n, block), x, out, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * 3.0, rtol=0, atol=0)
        classes.add((block, n % block == 0, n % 16 == 0))
    assert lau.fast_path and lau.ordinary_calls == len(classes), lau.describe()


@gpu
@needs_cuda
def test_gpu_per_call_real_autotune_per_key():
    @triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_warps=8)],
                     key=["n"])
    @triton.jit
    def real_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: triton.language.constexpr):
        offs = triton.language.program_id(0) * BLOCK + triton.language.arange(0, BLOCK)
        m = offs < n
        triton.language.store(out_ptr + offs, triton.language.load(x_ptr + offs, mask=m)
                              * triton.language.load(y_ptr + offs, mask=m), mask=m)

    lau = make_launcher(real_tuned, None, {}, ADD, grid_per_call=True)
    sizes = [4096, 1000, 4096, 1000, 8192, 4096, 1000]
    for n in sizes:
        x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
        lau(_per_config(real_tuned, n), x, y, out, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * y, rtol=0, atol=0)
    assert len(real_tuned.cache) == 3
    assert lau.ordinary_calls == 3, lau.describe()  # one tuning per key, then replays


@gpu
@needs_cuda
def test_gpu_per_call_side_stream_and_graph_capture():
    lau = make_launcher(add_kernel, None, {"BLOCK": 128}, ADD, grid_per_call=True)
    n = 300
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    lau(grid_for(n, 128), x, y, o, n)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)
        x.add_(1.0)
        lau(grid_for(n, 128), x, y, o, n)
    s.synchronize()
    torch.testing.assert_close(o, x + y, rtol=0, atol=0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        lau(grid_for(n, 128), x, y, o, n)
    x.mul_(2.0)
    o.zero_()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(o, x + y, rtol=0, atol=0)
    assert lau.ordinary_calls == 1
