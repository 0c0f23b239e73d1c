"""Sizes read from tensor data under symbolic shapes.

With a shape environment (dynamic sizes), torch's fake tensors answer an op whose output
size comes from a tensor's values (a 0-d tensor as `arange`'s bound, `zeros(t)`) with an
unbacked size instead of raising. The trace must treat such an op as data-dependent (a
break, the op run natively) and never crash on the unbacked size or bake one call's value
into the graph."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend, same


def _paste(masks, boxes, img_h: int, img_w: int):
    # detectron2's mask pasting: bounds as int32 0-d tensors, then arange over them
    x0_int, y0_int = torch.clamp(boxes.min(dim=0).values.floor()[:2] - 1, min=0).to(dtype=torch.int32)
    x1_int = torch.clamp(boxes[:, 2].max().ceil() + 1, max=img_w).to(dtype=torch.int32)
    y1_int = torch.clamp(boxes[:, 3].max().ceil() + 1, max=img_h).to(dtype=torch.int32)
    x0, y0, x1, y1 = torch.split(boxes, 1, dim=1)
    n = masks.shape[0]
    img_y = torch.arange(y0_int, y1_int, device=masks.device, dtype=torch.float32) + 0.5
    img_x = torch.arange(x0_int, x1_int, device=masks.device, dtype=torch.float32) + 0.5
    img_y = (img_y - y0) / (y1 - y0) * 2 - 1
    img_x = (img_x - x0) / (x1 - x0) * 2 - 1
    gx = img_x[:, None, :].expand(n, img_y.size(1), img_x.size(1))
    gy = img_y[:, :, None].expand(n, img_y.size(1), img_x.size(1))
    grid = torch.stack([gx, gy], dim=3)
    return torch.nn.functional.grid_sample(masks, grid, align_corners=False)[:, 0]


def _run_all(fn, arg_sets, **opts):
    opt = minidynamo.optimize(fn, backend=CountingBackend(), **opts)
    for args in arg_sets:
        for _ in range(2):
            same(opt(*args), fn(*args))
    return opt


def test_mask_pasting_over_changing_boxes():
    torch.manual_seed(0)
    base = torch.tensor([[1., 2., 10., 12.], [3., 1., 20., 9.], [0., 0., 5., 5.]])
    sets = [(torch.rand(3, 1, 8, 8), base + i, 32, 32) for i in range(5)]
    _run_all(_paste, sets)


@pytest.mark.parametrize("dynamic", [None, True])
def test_arange_bounds_from_tensors(dynamic):
    def f(x, lo, hi):
        r = torch.arange(lo, hi, dtype=torch.float32)
        return x[: r.numel()] * 2 + r

    sets = [(torch.randn(12), torch.tensor(a), torch.tensor(b)) for a, b in [(1, 5), (2, 9), (0, 3), (4, 12)]]
    _run_all(f, sets, dynamic=dynamic)


@pytest.mark.parametrize("factory", ["zeros", "ones", "empty_size", "full", "new_zeros"])
def test_factories_sized_by_tensor_values(factory):
    def f(x, n):
        y = x * 3
        if factory == "zeros":
            z = torch.zeros(n)
        elif factory == "ones":
            z = torch.ones(n, 2).sum(1)
        elif factory == "empty_size":
            z = torch.zeros(torch.Size([int(n)]))
        elif factory == "full":
            z = torch.full((n,), 7.0)
        else:
            z = x.new_zeros(n)
        return y.sum() + z.sum() + z.numel(), z.shape

    sets = [(torch.randn(k), torch.tensor(m)) for k, m in [(4, 2), (6, 5), (8, 3), (5, 7)]]
    _run_all(f, sets, dynamic=True)


def test_unbacked_size_in_a_sized_frame_keeps_sizes_correct():
    # The frame's inputs change size every call (automatic dynamic), and a size comes from data.
    def f(x, k):
        m = torch.arange(k, dtype=x.dtype)
        return (x.sum() + m.sum(), x.shape[0] + m.shape[0])

    sets = [(torch.randn(n), torch.tensor(n % 4 + 1)) for n in (3, 5, 9, 4, 11)]
    _run_all(f, sets)


def test_fullgraph_says_data_dependent():
    def f(x, lo):
        return torch.arange(lo, 8) + x

    opt = minidynamo.optimize(f, backend=CountingBackend(), fullgraph=True, dynamic=True)
    with pytest.raises(minidynamo.Unsupported) as e:
        opt(torch.randn(8 - 3), torch.tensor(3))
    assert e.value.category == "data_dependent", e.value
