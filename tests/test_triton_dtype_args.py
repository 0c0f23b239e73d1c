"""A kernel taking a triton.language dtype as a constexpr argument (liger-kernel's
`X_dtype=torch_to_triton_dtype[X.dtype]`): a constant of the launch, written so that a
GraphModule's generated code can name it."""
import pytest
import torch
from helpers import CountingBackend, check
from kernels.capture_kernels import DEVICE, tl, triton


@triton.jit
def cast_kernel(x_ptr, o_ptr, n, DT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m).to(DT), mask=m)


TO_TRITON = {torch.float32: tl.float32, torch.float16: tl.float16}


def cast_through_kernel(x):
    o = torch.empty_like(x)
    cast_kernel[(1,)](x, o, x.numel(), DT=TO_TRITON[x.dtype], BLOCK=16)
    return o


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_triton_dtype_argument_is_a_constant_of_the_launch(dtype):
    backend = CountingBackend()  # the GraphModule path: fx writes the graph's code
    check(cast_through_kernel, torch.randn(8, device=DEVICE).to(dtype), kind="graph", backend=backend)
    assert "triton.language." in backend.graphs[0].code
    check(cast_through_kernel, torch.randn(8, device=DEVICE).to(dtype), kind="graph")  # inlined
