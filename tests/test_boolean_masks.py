"""Boolean-mask writes `x[mask] = v` (index_put_ in the graph: a number, a 0-d tensor, a
row broadcast over the selected rows, on a tensor passed in or made in the trace), and
mask reads `x[mask]`, whose shape depends on the data: a graph break at the read, as
torch.compile breaks there, the rest traced.
Differential against eager."""
import torch

from helpers import check


def test_mask_writes_trace_in_one_graph():
    def f(x, y, row, s):
        z = x.clone()
        z[y > 0] = 0
        z[y < -1] = y.sum()
        x[s > 0] = row  # an input written in place
        return z * 2

    check(f, (torch.randn(5, 3), torch.randn(5, 3), torch.randn(3), torch.randn(5)), kind="graph", graphs=1)


def test_mask_read_breaks_and_the_rest_is_traced():
    def f(x, y):
        x = x.clone()
        m = y > 0
        x[m] = y[m] * 2
        return x + 1

    info = check(f, (torch.randn(6), torch.randn(6)), kind="break",
                 reason="data_dependent")
    assert info.graphs == 2  # before the read, after it (torch.compile's too)


def test_mask_augmented_assignment():
    def f(x, log):
        m = torch.isnan(x)
        x[m] = 0
        x[~m] *= 2
        log.append("after")
        return x.sum()

    x = torch.randn(4, 3)
    x[1, 2] = float("nan")
    check(f, (x, []), kind="break", reason="data_dependent")


def test_indexing_a_list_by_a_mask_still_runs_eagerly():
    def f(x, lst):
        return x + lst[x > 0]

    check(f, (torch.randn(3), [1, 2]), kind="eager")
