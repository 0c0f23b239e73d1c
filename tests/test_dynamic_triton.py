"""Triton launches with symbolic sizes: the grid and int arguments are graph values computed
per call, so one entry serves every size, with results equal to eager's."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")

from kernels.capture_kernels import (add_autotuned, add_heuristic, add_kernel,  # noqa: E402
                                     add_stack, double_inplace, grid_1d)

import minidynamo  # noqa: E402
from minidynamo.triton.capture import launch_record  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SIZES = (5, 17, 33, 40, 64, 100, 129)


def plain_tuple_grid(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 16),)](x, y, out, n, BLOCK=16)
    return out * 2


def meta_lambda_grid(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=32)
    return out


def autotuned(x, y):
    out = torch.empty_like(x)
    add_autotuned[grid_1d](x, y, out, x.numel())
    return out


def autotuned_with_key(x, y):
    out = x + y
    double_inplace[grid_1d](out, x.numel())  # re-tuned per n, as Triton does
    return out


def autotuned_heuristics(x, y):
    out = torch.empty_like(x)
    add_stack[grid_1d](x, y, out, x.numel())
    return out


def heuristic_block(x, y):
    out = torch.empty_like(x)
    add_heuristic[grid_1d](x, y, out, x.numel())
    return out


def sizes_of_two_dims(x, y):
    out = torch.empty_like(x)
    n = x.shape[0] * x.shape[1]
    add_kernel[(triton.cdiv(n, 16), 1, 1)](x, y, out, n, BLOCK=16)
    return out.sum(1)


def _run(fn, make, sizes=SIZES, dynamic=None):
    opt = minidynamo.optimize(fn, dynamic=dynamic)
    for n in sizes:
        x, y = make(n), make(n)
        got, expected = opt(x, y), fn(x, y)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    return opt


def _vec(n):
    return torch.randn(n, device=DEV)


@pytest.mark.parametrize("fn", [plain_tuple_grid, meta_lambda_grid, autotuned, autotuned_with_key])
def test_one_symbolic_entry_after_the_first_change(fn):
    opt = _run(fn, _vec)
    entries = opt.cache_entries()
    assert len(entries) == 2
    # the symbolic entry's launch computes its grid per call, from x.size(0)
    launches = [n for n in entries[1].gm.graph.nodes if launch_record(n) is not None]
    assert len(launches) == 1 and launch_record(launches[0]).grid_per_call
    assert entries[1].hit_count == len(SIZES) - 1


def test_dynamic_true_serves_every_size_from_the_first_call():
    opt = _run(plain_tuple_grid, _vec, dynamic=True)
    assert len(opt.cache_entries()) == 1


def test_grid_from_two_symbolic_dims():
    opt = _run(sizes_of_two_dims, lambda n: torch.randn(n, n % 7 + 2, device=DEV),
               sizes=(3, 4, 9, 10, 23, 40))
    assert len(opt.cache_entries()) <= 3  # dim 1 varies from the second call on too


@pytest.mark.parametrize("fn, entries", [(heuristic_block, 3), (autotuned_heuristics, 2)])
def test_heuristics_on_a_symbolic_size(fn, entries):
    # A heuristic's value (BLOCK from n) is a symbolic expression of n in the grid, and
    # Triton recomputes it per launch: the grid the graph computes agrees with it. The
    # heuristic's own branch (`n < 64`) is a guard: n = 100 takes a third entry.
    opt = _run(fn, _vec, sizes=(5, 17, 33, 100, 17, 5))
    assert len(opt.cache_entries()) == entries


def test_constexpr_from_a_size_is_specialised_under_a_guard():
    def f(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(1,)](x, y, out, n, BLOCK=triton.next_power_of_2(n))
        return out
    # next_power_of_2 of n as a constexpr: guarded to its value (8, 16), not to n itself
    opt = _run(f, _vec, sizes=(5, 7, 9, 6, 16, 11))
    entries = opt.cache_entries()
    assert len(entries) == 3 and [e.hit_count for e in entries] == [1, 2, 3]
    assert "9 <= x.size(0) <= 16" in entries[2].guard_text()
