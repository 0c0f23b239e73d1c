"""torch.autograd.Functions used by the autograd.Function capture tests, written the way
liger-kernel writes its ops (module level, as users write them): Triton kernels for the
forward and backward, `@staticmethod` over a `functools.wraps` decorator, ctx attributes,
kernels that write gradients into the saved inputs or into the incoming gradient. Small
enough for Triton's CPU interpreter: fp32, one program per row, no libdevice math."""
import functools
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_FUSED_SIZE = 65536


# --- shared utilities, as in liger's ops/utils.py ----------------------------------------
def ensure_contiguous(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        def maybe_to_contiguous(x):
            return x.contiguous() if isinstance(x, torch.Tensor) else x

        args = [maybe_to_contiguous(arg) for arg in args]
        kwargs = {k: maybe_to_contiguous(v) for k, v in kwargs.items()}
        return fn(ctx, *args, **kwargs)
    return wrapper


def calculate_settings(n):
    BLOCK_SIZE = triton.next_power_of_2(n)
    if BLOCK_SIZE > MAX_FUSED_SIZE:
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the maximum "
                           f"number of elements per row {MAX_FUSED_SIZE}.")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 32
    elif BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps


# --- SwiGLU: c = silu(a) * b; the backward writes da, db into the saved a, b ------------
@triton.jit
def _swiglu_forward_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = a_row * tl.sigmoid(a_row) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


@triton.jit
def _swiglu_backward_kernel(dc_ptr, a_ptr, b_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    dc_ptr += program_id * stride
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dc_row = tl.load(dc_ptr + col_offsets, mask=mask, other=0)
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    sig_a = tl.sigmoid(a_row)
    silu_a = a_row * sig_a
    db_row = dc_row * silu_a
    da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row
    tl.store(a_ptr + col_offsets, da_row, mask=mask)
    tl.store(b_ptr + col_offsets, db_row, mask=mask)


def swiglu_forward(a, b):
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _swiglu_forward_kernel[(n_rows,)](a, b, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                      num_warps=num_warps)
    return a, b, c.view(*ori_shape)


def swiglu_backward(a, b, dc):
    ori_shape = dc.shape
    n_cols = ori_shape[-1]
    dc = dc.view(-1, n_cols)
    n_rows = dc.shape[0]
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _swiglu_backward_kernel[(n_rows,)](dc, a, b, dc.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                       num_warps=num_warps)
    return a.view(*ori_shape), b.view(*ori_shape)


class SiLUMulFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, a, b):
        a, b, c = swiglu_forward(a, b)
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        a, b = swiglu_backward(a, b, dc)
        return a, b


silu_mul = SiLUMulFunction.apply


# --- RMSNorm: ctx constants, three saved tensors, dX written into dY ---------------------
_CASTING_MODE_NONE: tl.constexpr = tl.constexpr(0)
_CASTING_MODE_GEMMA: tl.constexpr = tl.constexpr(1)
_str_to_casting_mode = {"llama": _CASTING_MODE_NONE.value, "gemma": _CASTING_MODE_GEMMA.value}


@triton.jit
def _rms_norm_forward_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr, n_cols, eps,
                             casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0).to(tl.int64)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    if casting_mode == _CASTING_MODE_GEMMA:
        W_row = W_row + 1.0
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(mean_square + eps)
    tl.store(RSTD_ptr + row_idx, rstd)
    tl.store(Y_ptr + row_idx * Y_row_stride + col_offsets, X_row * rstd * W_row, mask=mask)


@triton.jit
def _rms_norm_backward_kernel(dY_ptr, dY_row_stride, dX_ptr, dX_row_stride, X_ptr, X_row_stride, W_ptr,
                              RSTD_ptr, dW_ptr, dW_row_stride, n_cols,
                              casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0).to(tl.int64)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dY_row = tl.load(dY_ptr + row_idx * dY_row_stride + col_offsets, mask=mask, other=0)
    X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    if casting_mode == _CASTING_MODE_GEMMA:
        W_row = W_row + 1.0
    rstd = tl.load(RSTD_ptr + row_idx)
    m = dY_row * W_row
    dX_row = rstd * m - rstd * rstd * rstd / n_cols * tl.sum(m * X_row, axis=0) * X_row
    tl.store(dW_ptr + row_idx * dW_row_stride + col_offsets, dY_row * X_row * rstd, mask=mask)
    tl.store(dX_ptr + row_idx * dX_row_stride + col_offsets, dX_row, mask=mask)


def rms_norm_forward(X, W, eps, casting_mode):
    if not isinstance(casting_mode, int):
        assert casting_mode in _str_to_casting_mode, f"Invalid casting mode: {casting_mode}"
        casting_mode = _str_to_casting_mode[casting_mode]
    shape = X.shape
    dim = shape[-1]
    X = X.view(-1, dim)
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    RSTD = torch.empty(n_rows, dtype=torch.float32, device=X.device)
    assert X.shape[1] == W.shape[0], \
        "Incompatible hidden size dimension between tensor1.shape[1] and tensor2.shape[0]"
    _rms_norm_forward_kernel[(n_rows,)](Y, Y.stride(0), X, X.stride(0), W, RSTD, n_cols, eps,
                                        casting_mode=casting_mode, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return Y.view(*shape), X, RSTD, BLOCK_SIZE, num_warps, casting_mode


def rms_norm_backward(dY, X, W, RSTD, casting_mode, BLOCK_SIZE, num_warps, in_place):
    shape = dY.shape
    dim = shape[-1]
    dY = dY.view(-1, dim)
    n_rows, n_cols = dY.shape
    _dW = torch.empty((n_rows, n_cols), dtype=torch.float32, device=W.device)
    if in_place is True:
        dX = dY
    else:
        dX = torch.zeros_like(dY)
    _rms_norm_backward_kernel[(n_rows,)](dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W, RSTD,
                                         _dW, _dW.stride(0), n_cols, casting_mode,
                                         BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    dX = dX.view(*shape)
    dW = _dW.sum(dim=0).to(W.dtype)
    return dX, dW


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, X, W, eps, casting_mode="llama", in_place=True):
        Y, X, RSTD, BLOCK_SIZE, num_warps, casting_mode = rms_norm_forward(X, W, eps, casting_mode)
        ctx.eps = eps
        ctx.casting_mode = casting_mode
        ctx.in_place = in_place
        ctx.BLOCK_SIZE = BLOCK_SIZE
        ctx.num_warps = num_warps
        ctx.save_for_backward(X, W, RSTD)
        return Y

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dY):
        X, W, RSTD = ctx.saved_tensors
        dX, dW = rms_norm_backward(dY, X, W, RSTD, ctx.casting_mode, ctx.BLOCK_SIZE, ctx.num_warps,
                                   ctx.in_place)
        return dX, dW, None, None, None


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-6, casting_mode="llama", in_place=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=DEVICE)
                                         + 0.1 * torch.randn(hidden_size, device=DEVICE))
        self.variance_epsilon = eps
        self.casting_mode = casting_mode
        self.in_place = in_place

    def forward(self, hidden_states):
        return RMSNormFunction.apply(hidden_states, self.weight, self.variance_epsilon, self.casting_mode,
                                     self.in_place)


# --- a loss computed with its gradients in forward; the backward reads the grad's value --
@triton.jit
def element_mul_kernel(X_ptr, X_stride, grad_output_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    X_ptr += program_id * X_stride
    grad_output = tl.load(grad_output_ptr)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols)
        tl.store(X_ptr + X_offsets, X_block * grad_output, mask=X_offsets < n_cols)


def _scale_in_place(t, grad_output):
    # as liger's element_mul_kernel launches: the saved gradient is scaled where it lies
    n_rows, n_cols = t.shape
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))
    element_mul_kernel[(n_rows,)](t, t.stride(-2), grad_output, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)


class LinearSquareLossFunction(torch.autograd.Function):
    """loss = mean((x @ w)^2); the gradients are computed in forward and only scaled in
    backward, which skips the scaling when the incoming gradient is exactly 1.0 (a branch
    on the gradient's value: the backward cannot be traced ahead of time)."""

    @staticmethod
    def forward(ctx, _input, weight, check="equal"):
        y = _input @ weight
        loss = (y * y).mean()
        dy = 2.0 * y / y.numel()
        grad_input = dy @ weight.t()
        grad_weight = _input.t() @ dy
        ctx.check = check
        ctx.save_for_backward(grad_input.detach(), grad_weight.detach())
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        grad_input, grad_weight = ctx.saved_tensors
        if ctx.check == "equal":
            unit = torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device))
        else:
            unit = grad_output.item() == 1.0
        if not unit:
            _scale_in_place(grad_input, grad_output)
            _scale_in_place(grad_weight, grad_output)
        return grad_input, grad_weight, None


class LigerSwiGLUMLP(torch.nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False, device=DEVICE)
        self.up_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False, device=DEVICE)
        self.down_proj = torch.nn.Linear(intermediate_size, hidden_size, bias=False, device=DEVICE)

    def forward(self, x):
        return self.down_proj(SiLUMulFunction.apply(self.gate_proj(x), self.up_proj(x)))


# --- pure torch -----------------------------------------------------------------------
class ScaledPowFunction(torch.autograd.Function):
    """y = (x * w) ** power * scale with an int and a float argument; returns a tuple of
    y, a bool mask marked non-differentiable and the int itself. ctx holds a tensor
    attribute (not saved), a dtype, a tuple and a string; None is saved along with x."""

    @staticmethod
    def forward(ctx, x, w, power, scale):
        xw = x * w
        y = xw ** power * scale
        mask = y > 0
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(x, None)
        ctx.w = w
        ctx.power, ctx.scale = power, scale
        ctx.w_shape = tuple(w.shape)
        ctx.dtype = x.dtype
        ctx.reduce = "sum"
        return y, mask, power

    @staticmethod
    def backward(ctx, gy, gmask, gpower):
        x, nothing = ctx.saved_tensors
        assert nothing is None
        w = ctx.w
        d = gy * ctx.power * (x * w) ** (ctx.power - 1) * ctx.scale
        gw = d * x
        if ctx.reduce == "sum":
            gw = gw.reshape(-1, *ctx.w_shape).sum(0)
        return (d * w).to(ctx.dtype), gw, None, None


class NeedsGradMulFunction(torch.autograd.Function):
    """x * w * scale; also returns ctx.needs_input_grad as a bool tensor, so a wrong value
    shows in the result, and the backward computes only the needed gradients and trims its
    return to one per apply argument (liger's `gradients[: len(ctx.needs_input_grad)]`)."""

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        flags = torch.tensor(ctx.needs_input_grad, device=x.device)
        return x * w * scale, flags

    @staticmethod
    def backward(ctx, g, gflags):
        x, w = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = g * w * ctx.scale
        if ctx.needs_input_grad[1]:
            gw = g * x * ctx.scale
        return (gx, gw, None, None)[: len(ctx.needs_input_grad)]


class MulInPlaceFunction(torch.autograd.Function):
    """Multiplies its input in place and returns it, marked dirty."""

    @staticmethod
    def forward(ctx, x, k):
        x.mul_(k)
        ctx.mark_dirty(x)
        ctx.k = k
        return x

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class NoMaterializeFunction(torch.autograd.Function):
    """Two outputs, gradients not materialized: the backward sees None for an output
    that was not used. The two branches differ on purpose (the `+ 100` is reached only
    with a real gradient for the second output), so a zero gradient handed in place of
    None shows in the result."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2, x * x

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        if g2 is None:
            return g1 * 2
        if g1 is None:
            return g2 * 2 * x + 100
        return g1 * 2 + g2 * 2 * x + 100


class CubeFunction(torch.autograd.Function):
    """x ** 3 with a backward made of differentiable ops (double backward works)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class CubeOnceFunction(torch.autograd.Function):
    """x ** 3 with a @once_differentiable backward (double backward raises)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class BadGradCountFunction(torch.autograd.Function):
    """A backward that returns one gradient for two inputs: eager raises at backward."""

    @staticmethod
    def forward(ctx, x, w):
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g


class SavedMulFunction(torch.autograd.Function):
    """x * w with both saved: changing x in place afterwards makes backward raise."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class PassThroughFunction(torch.autograd.Function):
    """Returns its input unchanged (eager hands back a view of it, not the object) and
    x * w."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x, x * w

    @staticmethod
    def backward(ctx, gx, gy):
        x, w = ctx.saved_tensors
        return gx + gy * w, gy * x


OFFSET = torch.linspace(-1.0, 1.0, 5, device=DEVICE).requires_grad_()


class AddOffsetFunction(torch.autograd.Function):
    """Reads a module-level tensor that requires grad: it gets no gradient (the forward
    runs under no_grad in eager)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2 + OFFSET

    @staticmethod
    def backward(ctx, g):
        return g * 2
