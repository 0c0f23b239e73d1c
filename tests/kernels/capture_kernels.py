"""Kernels and launch helpers used by the Triton capture tests (module level, as users
write them)."""
import functools
import itertools
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Triton 3.6's interpreter cannot take a Python bool as a (non-constexpr) kernel argument;
# eager launches fail there too, so tests pass such flags as ints.
BOOL_ARGS = DEVICE != "cpu" or tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 7)


def last_config_wins():
    """A do_bench for the autotuner that needs no GPU benchmarker: the last config wins."""
    c = itertools.count()

    def bench(fn, quantiles=None, **_):
        fn()
        t = 100.0 - next(c)
        return [t, t, t] if quantiles else t
    return bench


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def scale_inplace(x_ptr, alpha, n, BLOCK: tl.constexpr = 16):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


@triton.jit
def strided_copy(src_ptr, dst_ptr, n, src_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs * src_stride, mask=m), mask=m)


@triton.jit
def options_kernel(x_ptr, out_ptr, n, bias, flag, maybe, BLOCK: tl.constexpr, NEG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m) + bias
    if NEG:
        v = -v
    if flag:
        v = v * 2
    tl.store(out_ptr + offs, v, mask=m)


@triton.jit
def clash_kernel(kernel, grid, n, BLOCK: tl.constexpr):
    # parameters literally named `kernel` and `grid`
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(grid + offs, tl.load(kernel + offs, mask=m) + 1, mask=m)


@triton.jit(do_not_specialize=["n"])
def add_dns(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def row_sum_2d(x_ptr, out_ptr, stride, COLS: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1)
    v = tl.load(x_ptr + row * stride + col)
    tl.atomic_add(out_ptr + row, v)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32}, num_warps=2)],
                 key=["n"], do_bench=last_config_wins())
@triton.jit
def add_autotuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"]) if args["n"] < 64 else 64})
@triton.jit
def add_heuristic(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                 do_bench=last_config_wins())
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def add_stack(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= max(16, named_args["n"])]


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 128})], key=["n"],
                 prune_configs_by={"early_config_prune": _prune}, do_bench=last_config_wins())
@triton.jit
def add_pruned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                 reset_to_zero=["acc_ptr"], do_bench=last_config_wins())
@triton.jit
def sum_into(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(acc_ptr, tl.sum(tl.load(x_ptr + offs, mask=m, other=0.0)))


def grid_1d(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


class GridObject:
    def __init__(self, block):
        self.block = block

    def __call__(self, meta):
        return (triton.cdiv(meta["n"], self.block),)


GRID_OBJECT = GridObject(16)


def _cdiv_grid(n, block, meta):
    return (triton.cdiv(n, block),)


PARTIAL_LAUNCH = functools.partial(add_kernel[(4,)], BLOCK=16)


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(configs=[triton.Config({"BLOCK": 16}, pre_hook=_zero_out),
                          triton.Config({"BLOCK": 32}, pre_hook=_zero_out)],
                 key=["n"], do_bench=last_config_wins())
@triton.jit
def accumulate_hooked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                 restore_value=["x_ptr"], do_bench=last_config_wins())
@triton.jit
def double_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)
