"""Triton kernels with known write sets, for testing minidynamo.triton.mutation.

Each ``Case`` records the exact parameters the kernel may write (or that the
analysis must give up, and words its reason must contain).  Cases with ``make``
can also be launched on small CPU tensors under ``TRITON_INTERPRET=1``: ``make()``
returns ``(kwargs, grid)`` and every store writes values that differ from the
initial contents, so a missed write shows up as a changed tensor.
"""
import sys
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import triton
import triton.language as language
import triton.language as tl
from triton.language import store as st

N = 64
BLOCK = 16


@dataclass
class Case:
    name: str
    kernel: object
    written: frozenset
    unknown: bool = False
    reason_has: tuple = ()
    make: Optional[Callable] = None


def _rand(*shape):
    return torch.rand(*shape) + 1.0  # strictly positive, so *3+1 etc. always changes it


def _std(*names, n=N):
    """kwargs with a fresh tensor per pointer name plus ``n`` and ``BLOCK``."""
    args = {name: _rand(n) for name in names}
    args.update(n=n, BLOCK=BLOCK)
    return args, (triton.cdiv(n, BLOCK),)


# --- plain kernels ---------------------------------------------------------------------
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 3.0 + 1.0, mask=mask)


@triton.jit
def two_outputs_kernel(x_ptr, sum_ptr, diff_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(sum_ptr + offs, x + y, mask=mask)
    tl.store(diff_ptr + offs, x - y - 5.0, mask=mask)


@triton.jit
def read_only_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0) * tl.load(y_ptr + offs,
                                                                          mask=offs < n))
    tl.device_assert(s == s)


@triton.jit
def descriptor_loop_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BLOCK, BLOCK])
    dst = tl.make_tensor_descriptor(base=out_ptr, shape=[M, N], strides=[N, 1],
                                    block_shape=[BLOCK, BLOCK])
    for j in range(0, tl.cdiv(N, BLOCK)):
        tile = tl.load_tensor_descriptor(src, [0, j * BLOCK])
        tl.store_tensor_descriptor(dst, [0, j * BLOCK], tile * 2.0 + 1.0)


# Block pointers are analysed but not launched: triton 3.9's interpreter removed them.
@triton.jit
def block_ptr_kernel(x_ptr, out_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_m, stride_n),
                            offsets=(0, 0), block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(out_ptr, (M, N), (stride_m, stride_n), (0, 0), (BM, BN), (1, 0))
    for _ in range(0, tl.cdiv(N, BN)):
        tile = tl.load(src, boundary_check=(0, 1))
        tl.store(dst, tile * 2.0 + 1.0, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


@triton.jit
def atomic_counter_kernel(x_ptr, counter_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.atomic_add(counter_ptr, tl.sum(x))
    tl.atomic_max(counter_ptr + 1, tl.max(x) + 100.0)


@triton.jit
def atomic_cas_lock_kernel(lock_ptr, data_ptr, x_ptr):
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(data_ptr, tl.load(data_ptr) + tl.load(x_ptr))
    tl.atomic_xchg(lock_ptr, 0)


@triton.jit
def where_select_kernel(a_ptr, b_ptr, x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    p = tl.where(pid % 2 == 0, a_ptr + offs, b_ptr + offs)
    tl.store(p, tl.load(x_ptr + offs) + 7.0, mask=offs < n)


@triton.jit
def loop_carried_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = x_ptr + tl.arange(0, BLOCK)
    dst = out_ptr
    for _ in range(0, tl.cdiv(n, BLOCK)):
        tl.store(dst + tl.arange(0, BLOCK), tl.load(src) * 3.0 + 1.0)
        src += BLOCK
        dst += BLOCK


@triton.jit
def swap_in_loop_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    # only `a` is stored through, but it is x_ptr then y_ptr: needs the loop fixpoint
    offs = tl.arange(0, BLOCK)
    a, b = x_ptr, y_ptr
    for _ in range(2):
        tl.store(a + offs, tl.load(z_ptr + offs) + 9.0)
        a, b = b, a


@triton.jit
def conditional_store_kernel(x_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) - 1.0, mask=offs < n)
    if pid == 0:
        tl.store(flag_ptr, -1.0)


@triton.jit
def store_kwargs_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
    tl.store(pointer=out_ptr + offs, value=x + 2.0, mask=mask, cache_modifier=".wb",
             eviction_policy="evict_first")


@triton.jit
def aliased_import_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = language.program_id(0) * BLOCK + language.arange(0, BLOCK)
    language.store(out_ptr + offs, language.load(x_ptr + offs, mask=offs < n) + 4.0,
                   mask=offs < n)


@triton.jit
def imported_store_kernel(x_ptr, out_ptr, n, BLOCK: language.constexpr):
    # `st` is triton.language.store imported under another name (compiled mode only:
    # the interpreter patches only module attributes, so this case is not launched)
    offs = tl.arange(0, BLOCK)
    st(out_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def gather_scatter_kernel(idx_ptr, x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # the stored address depends on loaded indices, but only out_ptr is written
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + idx, tl.load(x_ptr + offs, mask=mask) + 0.5, mask=mask)


@triton.jit
def strided_2d_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_om, BM: tl.constexpr,
                      BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    src = x_ptr + rows[:, None] * stride_xm + cols[None, :]
    dst = tl.multiple_of(out_ptr, 16) + rows[:, None] * stride_om
    dst = tl.broadcast_to(dst, (BM, BN)) + tl.max_contiguous(cols, BN)[None, :]
    tl.store(dst, tl.load(src, mask=mask) * -1.0, mask=mask)


@triton.jit
def constexpr_branch_kernel(x_ptr, y_ptr, out_ptr, n, SHIFT: tl.constexpr, STORE_Y: tl.constexpr,
                            BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + SHIFT
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + 1.0)
    if STORE_Y:
        tl.store(y_ptr + offs, x + 2.0)


@triton.jit
def tensor_method_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    (out_ptr + offs).store(tl.load(x_ptr + offs).to(tl.float32) + 8.0)


@triton.jit
def descriptor_store_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1],
                                     block_shape=[BLOCK, BLOCK])
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1],
                                    block_shape=[BLOCK, BLOCK])
    desc.store([0, 0], src.load([0, 0]) + 6.0)


@triton.jit
def tuple_unpack_kernel(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    dst, src = a_ptr, b_ptr
    tl.store(dst + offs, tl.load(src + offs) * 2.0 + 1.0)


@triton.jit
def break_in_loop_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = x_ptr
    for i in range(4):
        if i == 1:
            p = out_ptr
            break
        p = y_ptr
    tl.store(p + offs, tl.load(x_ptr + offs) + 3.0)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), num_stages=2):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + stride_cm * rm[:, None] + stride_cn * rn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(cols < N, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    y = xc * rstd * tl.load(W + cols, mask=cols < N) + tl.load(B + cols, mask=cols < N)
    tl.store(Y + cols, y, mask=cols < N)


# --- calls into other jit functions -------------------------------------------------------
# Kernels reach these as `helpers.<name>`: a module attribute, as with `import helpers`.
@triton.jit
def store_fn(ptr, val, mask):
    tl.store(ptr, val, mask=mask)


@triton.jit
def offset_ptr(base, offs):
    return base + offs


@triton.jit
def load_fn(ptr, mask):
    return tl.load(ptr, mask=mask, other=0.0)


@triton.jit
def outer_store(ptr, src, mask):
    # two levels: outer_store -> store_fn -> tl.store
    store_fn(ptr, load_fn(src, mask) * 3.0 + 1.0, mask)


@triton.jit
def maybe_store(ptr, val, ENABLED: tl.constexpr):
    if ENABLED:
        tl.store(ptr, val)


helpers = sys.modules[__name__]


@triton.jit
def helper_positional_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    helpers.store_fn(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask)


@triton.jit
def helper_keyword_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    helpers.store_fn(mask=mask, val=helpers.load_fn(x_ptr + offs, mask) + 2.0,
                     ptr=out_ptr + offs)


@triton.jit
def helper_returns_pointer_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = helpers.offset_ptr(x_ptr, offs)
    dst = helpers.offset_ptr(offs=offs, base=out_ptr)
    tl.store(dst, tl.load(src, mask=mask) + 3.0, mask=mask)


@triton.jit
def nested_helpers_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    helpers.outer_store(out_ptr + offs, x_ptr + offs, offs < n)


@triton.jit
def optional_pointer_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # None for a pointer the helper only stores through under a constexpr guard
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    helpers.maybe_store(None, x, False)
    helpers.maybe_store(out_ptr + offs, x + 1.0, True)


def _make_closure_kernel():
    @triton.jit
    def local_store(p, v):
        tl.store(p, v)

    @triton.jit
    def closure_helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        local_store(out_ptr + offs, tl.load(x_ptr + offs) - 2.0)

    return closure_helper_kernel


closure_helper_kernel = _make_closure_kernel()


@triton.jit
def ping(p, D: tl.constexpr):
    if D > 0:
        pong(p, D - 1)
    else:
        tl.store(p, 5.0)


@triton.jit
def pong(p, D: tl.constexpr):
    ping(p, D)


@triton.jit
def recursive_kernel(out_ptr):
    ping(out_ptr, 2)


# --- cases the analysis must give up on ----------------------------------------------------
def py_helper(p):
    return p


@triton.jit
def unknown_call_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(py_helper(x_ptr) + offs))


@triton.jit
def impure_asm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("st.global.b32 [$1], $2; mov.b32 $0, 0;", "=r,l,r",
                                  [x_ptr + offs, offs], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + offs, y)


@triton.jit
def pure_asm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [tl.load(x_ptr + offs)],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y)


@triton.jit
def int_to_pointer_kernel(addr_ptr, out_ptr):
    p = tl.load(addr_ptr).to(tl.pointer_type(tl.float32))
    tl.store(p, 1.0)
    tl.store(out_ptr, 2.0)


@triton.jit
def pointer_table_kernel(table_ptr, out_ptr):
    # table_ptr holds pointers: the store target is not any argument's memory
    p = tl.load(table_ptr)
    tl.store(p, 1.0)


@triton.jit
def global_stmt_kernel(x_ptr):
    global N
    tl.store(x_ptr, 1.0)


@triton.jit
def constexpr_fn_value_kernel(x_ptr, out_ptr, FN: tl.constexpr):
    # a jit function passed as a constexpr argument only ever sees a loaded value
    tl.store(out_ptr, FN(tl.load(x_ptr)))


@triton.jit
def constexpr_fn_pointer_kernel(x_ptr, out_ptr, FN: tl.constexpr):
    tl.store(out_ptr, tl.load(FN(x_ptr)))


# --- wrapped kernels -----------------------------------------------------------------------
autotuned_add = triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])(add_kernel)
heuristic_inplace = triton.heuristics({"BLOCK": lambda args: 16})(inplace_kernel)


@triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
@triton.heuristics({"SHIFT": lambda args: 0, "STORE_Y": lambda args: True})
@triton.jit
def stacked_kernel(x_ptr, y_ptr, out_ptr, n, SHIFT: tl.constexpr, STORE_Y: tl.constexpr,
                   BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + SHIFT
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + 1.0)
    if STORE_Y:
        tl.store(y_ptr + offs, x + 2.0)


zeroing_autotuned = triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"],
                                    reset_to_zero=["y_ptr"])(add_kernel)


def _hook(nargs):
    nargs["x_ptr"].add_(1)


hooked_autotuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}, pre_hook=_hook)],
                                   key=["n"])(add_kernel)


# --- launch recipes ------------------------------------------------------------------------
def _matmul_args():
    a, b, c = _rand(32, 16), _rand(16, 32), _rand(32, 32)
    return dict(a_ptr=a, b_ptr=b, c_ptr=c, M=32, N=32, K=16, stride_am=16, stride_ak=1,
                stride_bk=32, stride_bn=1, stride_cm=32, stride_cn=1, BM=16, BN=16, BK=16), (2, 2)


def _layer_norm_args():
    x, y = _rand(4, 16), _rand(4, 16)
    return dict(X=x, Y=y, W=_rand(16), B=_rand(16), Mean=_rand(4), Rstd=_rand(4), stride=16,
                N=16, eps=1e-5, BLOCK=16), (4,)


def _desc_loop_args():
    return dict(x_ptr=_rand(8, 32), out_ptr=_rand(8, 32), M=8, N=32, BLOCK=8), (1,)


def _strided_args():
    x, out = _rand(8, 16), _rand(8, 32)
    return dict(x_ptr=x, out_ptr=out, M=8, N=16, stride_xm=16, stride_om=32, BM=4, BN=16), (2,)


def _atomic_args():
    args, grid = _std("x_ptr")
    return {**args, "counter_ptr": torch.zeros(2)}, grid


def _lock_args():
    lock = torch.zeros(1, dtype=torch.int32)
    return dict(lock_ptr=lock, data_ptr=_rand(1), x_ptr=_rand(1)), (4,)


def _scatter_args():
    args, grid = _std("x_ptr", "out_ptr")
    return {**args, "idx_ptr": torch.randperm(N, dtype=torch.int32)}, grid


def _desc_args():
    return dict(x_ptr=_rand(16, 16), out_ptr=_rand(16, 16), M=16, N=16, BLOCK=8), (1,)


def _no_block(*names):
    def make():
        args, grid = _std(*names)
        del args["BLOCK"]
        return args, grid
    return make


def _std_maker(*names, **extra):
    def make():
        args, grid = _std(*names)
        return {**args, **extra}, grid
    return make


W = frozenset
CASES = [
    Case("add", add_kernel, W({"out_ptr"}), make=_std_maker("x_ptr", "y_ptr", "out_ptr")),
    Case("inplace", inplace_kernel, W({"x_ptr"}), make=_std_maker("x_ptr")),
    Case("two_outputs", two_outputs_kernel, W({"sum_ptr", "diff_ptr"}),
         make=_std_maker("x_ptr", "sum_ptr", "diff_ptr", "y_ptr")),
    Case("read_only", read_only_kernel, W(), make=_std_maker("x_ptr", "y_ptr")),
    Case("block_ptr_loop", block_ptr_kernel, W({"out_ptr"})),
    Case("descriptor_loop", descriptor_loop_kernel, W({"out_ptr"}), make=_desc_loop_args),
    Case("atomic_counter", atomic_counter_kernel, W({"counter_ptr"}), make=_atomic_args),
    Case("atomic_cas_lock", atomic_cas_lock_kernel, W({"lock_ptr", "data_ptr"}), make=_lock_args),
    Case("where_select", where_select_kernel, W({"a_ptr", "b_ptr"}),
         make=_std_maker("a_ptr", "b_ptr", "x_ptr")),
    Case("loop_carried", loop_carried_kernel, W({"out_ptr"}),
         make=lambda: ({**_std("x_ptr", "out_ptr")[0]}, (1,))),
    Case("swap_in_loop", swap_in_loop_kernel, W({"x_ptr", "y_ptr"}),
         make=lambda: (_std("x_ptr", "y_ptr", "z_ptr")[0], (1,))),
    Case("conditional_store", conditional_store_kernel, W({"out_ptr", "flag_ptr"}),
         make=_std_maker("x_ptr", "out_ptr", "flag_ptr")),
    Case("store_kwargs", store_kwargs_kernel, W({"out_ptr"}), make=_std_maker("x_ptr", "out_ptr")),
    Case("aliased_import", aliased_import_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("imported_store", imported_store_kernel, W({"out_ptr"})),
    Case("gather_scatter", gather_scatter_kernel, W({"out_ptr"}), make=_scatter_args),
    Case("strided_2d", strided_2d_kernel, W({"out_ptr"}), make=_strided_args),
    Case("constexpr_branch", constexpr_branch_kernel, W({"out_ptr", "y_ptr"}),
         make=_std_maker("x_ptr", "y_ptr", "out_ptr", SHIFT=0, STORE_Y=True)),
    Case("tensor_method_store", tensor_method_store_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("descriptor_store", descriptor_store_kernel, W({"out_ptr"}), make=_desc_args),
    Case("tuple_unpack", tuple_unpack_kernel, W({"a_ptr"}), make=_std_maker("a_ptr", "b_ptr")),
    Case("break_in_loop", break_in_loop_kernel, W({"x_ptr", "y_ptr", "out_ptr"}),
         make=_std_maker("x_ptr", "y_ptr", "out_ptr")),
    Case("matmul", matmul_kernel, W({"c_ptr"}), make=_matmul_args),
    Case("layer_norm", layer_norm_kernel, W({"Y", "Mean", "Rstd"}), make=_layer_norm_args),
    Case("helper_positional", helper_positional_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("helper_keyword", helper_keyword_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("helper_returns_pointer", helper_returns_pointer_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("nested_helpers", nested_helpers_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    Case("optional_pointer", optional_pointer_kernel, W({"out_ptr"}),
         make=_std_maker("x_ptr", "out_ptr")),
    # not launched: the interpreter resolves device functions through globals only
    Case("closure_helper", closure_helper_kernel, W({"out_ptr"})),
    Case("recursive", recursive_kernel, W(), unknown=True,
         reason_has=("recursive_kernel", "ping", "recursive call cycle")),
    Case("unknown_call", unknown_call_kernel, W(), unknown=True,
         reason_has=("unknown_call_kernel", "py_helper", "line")),
    Case("impure_asm", impure_asm_kernel, W(), unknown=True,
         reason_has=("impure_asm_kernel", "inline_asm_elementwise", "is_pure")),
    Case("pure_asm", pure_asm_kernel, W({"out_ptr"})),
    Case("int_to_pointer", int_to_pointer_kernel, W(), unknown=True,
         reason_has=("int_to_pointer_kernel", "pointer type")),
    Case("pointer_table", pointer_table_kernel, W(), unknown=True,
         reason_has=("pointer_table_kernel", "tl.store", "not derived")),
    Case("global_stmt", global_stmt_kernel, W(), unknown=True,
         reason_has=("global_stmt_kernel", "Global")),
    Case("constexpr_fn_value", constexpr_fn_value_kernel, W({"out_ptr"})),
    Case("constexpr_fn_pointer", constexpr_fn_pointer_kernel, W(), unknown=True,
         reason_has=("constexpr_fn_pointer_kernel", "'FN'", "resolved statically")),
    Case("autotuned", autotuned_add, W({"out_ptr"}), make=_no_block("x_ptr", "y_ptr", "out_ptr")),
    Case("heuristics", heuristic_inplace, W({"x_ptr"}), make=_no_block("x_ptr")),
    Case("stacked", stacked_kernel, W({"out_ptr", "y_ptr"}),
         make=_no_block("x_ptr", "y_ptr", "out_ptr")),
    Case("reset_to_zero", zeroing_autotuned, W({"out_ptr", "y_ptr"}),
         make=_no_block("x_ptr", "y_ptr", "out_ptr")),
    Case("autotune_hook", hooked_autotuned, W(), unknown=True,
         reason_has=("add_kernel", "pre_hook")),
]
