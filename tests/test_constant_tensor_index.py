"""Lists and tuples indexed by a tensor made from constants in the trace
(`lst[torch.as_tensor(2)]`): the index is known while tracing (the fake tensor's constant,
kept through arithmetic and in-place ops); a tensor whose value is data (an input, an
argmax) still runs as eager. Differential against eager."""
import torch
from kernels.capture_kernels import DEVICE, tl, triton

import minidynamo
from helpers import CountingBackend, check, same_outcome


def test_list_indexed_by_a_constant_tensor():
    def f(a, b):
        l1 = [a, b, a + 1, b + 1]
        return l1[torch.as_tensor(2)]

    check(f, (torch.randn(3), torch.randn(3)), kind="graph", graphs=1)


def test_index_follows_arithmetic_and_in_place_writes():
    def f(a, b):
        items = [a, b, a * 2, b * 3]
        i = torch.tensor(1)
        j = i + 2
        i.add_(1)  # written: now 2
        neg = torch.tensor([-1])
        return items[i], items[j], items[neg], (a, b)[torch.tensor(True)], items[torch.tensor(0, dtype=torch.int8)]

    check(f, (torch.randn(3), torch.randn(3)), kind="graph", graphs=1)


def test_out_of_range_and_float_indices_raise_as_eager():
    def out_of_range(a):
        return [a, a][torch.as_tensor(5)]

    def float_index(a):
        return [a, a][torch.tensor(1.0)]

    for fn in (out_of_range, float_index):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        same_outcome(fn, opt, torch.randn(2))


def test_an_index_read_from_data_is_not_known():
    def f(a, idx):
        return [a, a + 1, a + 2][idx]

    opt = minidynamo.optimize(f, backend=CountingBackend())
    for i in (0, 2, 1):
        same_outcome(f, opt, torch.randn(2), torch.tensor(i))

    def g(a):
        return [a, a + 1, a + 2][a.argmax()]

    opt = minidynamo.optimize(g, backend=CountingBackend())
    for x in (torch.tensor([0.0, 5.0, 1.0]), torch.tensor([9.0, 5.0, 1.0])):
        same_outcome(g, opt, x)


@triton.jit
def _store_two(ptr):
    tl.store(ptr, 2)


def test_a_kernel_writing_the_index_tensor_forgets_its_constant():
    """FakeTensorMode forgets a constant when an aten op writes its tensor; a Triton kernel's
    write it never sees. The index must be read as data after the kernel (eager picks
    items[2]), not as the constant 0 it was made from: a view written counts too."""
    def whole(a, b):
        items = [a, b, a * 2, b * 3]
        i = torch.tensor([0], device=DEVICE)
        _store_two[(1,)](i)
        return items[i]

    def through_a_view(a, b):
        items = [a, b, a * 2, b * 3]
        i = torch.tensor([0, 1], device=DEVICE)
        _store_two[(1,)](i[1:])
        return items[i[1]]

    for fn in (through_a_view, whole):
        opt = minidynamo.optimize(fn, backend=CountingBackend())
        same_outcome(fn, opt, torch.randn(3), torch.randn(3))
