"""In-place ops, aliasing and identity: the caller sees exactly what eager would do.

The differential helper compares the arguments' state after each call, the identity of
returned inputs and whether returned views alias the same input."""
import torch

import minidynamo
from helpers import CountingBackend, check


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


def test_inplace_method_on_input():
    def f(x):
        x.add_(1)
        x.mul_(2)
        return x.sum()

    check(f, t(), kind="graph")


def test_inplace_then_read_sees_new_value():
    def f(x, y):
        a = x * 1
        x.add_(y)
        return a, x * 1

    check(f, (t(), t()), kind="graph")


def test_setitem_on_input():
    def f(x):
        x[0] = 1
        x[:, 1] = 0
        return x + 0

    check(f, t(), kind="graph")


def test_mutation_through_view_reaches_base():
    def f(x):
        v = x[0]
        v.zero_()
        row = x.view(-1)[:3]
        row.fill_(5)
        return x * 1

    check(f, t(), kind="graph")


def test_views_passed_together_keep_aliasing():
    def f(base, view):
        view.add_(100)
        return base + 0

    b = t()
    check(f, (b, b[1]), kind="graph")


def test_input_returned_unchanged_is_same_object():
    def f(x, y):
        return x, (y, x), {"x": x}

    check(f, (t(), t()), kind="constant")


def test_input_returned_after_inplace_is_same_object():
    def f(x):
        x.add_(1)
        return x

    info = check(f, t(), kind="graph")
    x = torch.zeros(3)
    assert info.opt(x) is x
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_inplace_result_returned_is_input():
    def f(x):
        return x.mul_(3), x.clamp_(max=1.0)

    check(f, t(), kind="graph")


def test_returned_view_aliases_input():
    def f(x):
        return x[0], x.view(-1), x.t(), x.reshape(12)

    check(f, t(), kind="graph")
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = t()
    v = opt(x)[0]
    v.fill_(42)
    assert (x[0] == 42).all()


def test_output_is_fresh_tensor_not_input():
    def f(x):
        return x + 0, x.clone(), x.contiguous()  # contiguous() of a contiguous tensor is x itself

    check(f, t(), kind="graph")


def test_same_tensor_twice_in_output_and_input():
    def f(x):
        y = x * 2
        return [y, y, x, x]

    info = check(f, t(), kind="graph")
    x = t()
    out = info.opt(x)
    assert out[0] is out[1] and out[2] is x and out[3] is x


def test_list_argument_mutation_happens_once():
    def f(lst, x):
        lst.append(x + 1)
        return len(lst)

    # The append is traced and written back to the caller's list after the graph.
    info = check(f, ([], t()), kind="graph")
    outside = []
    x = t()
    assert info.opt(outside, x) == 1 and info.opt(outside, x) == 2
    assert len(outside) == 2  # exactly once per call
    torch.testing.assert_close(outside, [x + 1, x + 1])
    assert {e.kind for e in info.opt.cache_entries()} == {"graph"}


def test_dict_argument_mutation_is_written_back():
    def f(d, x):
        d["out"] = x * 2
        return x

    check(f, ({}, t()), ({"out": 1, "other": t()}, t()), kind="graph", same_entry=False)


def test_inplace_on_global_tensor_is_graph():
    def f(x):
        G_ACC.add_(x)
        return G_ACC * 1

    before = G_ACC.clone()
    opt = minidynamo.optimize(backend=CountingBackend())(f)
    x = torch.ones(3)
    opt(x)
    opt(x)
    torch.testing.assert_close(G_ACC, before + 2)
    assert opt.cache_entries()[0].kind == "graph"


G_ACC = torch.zeros(3)


def test_inplace_on_module_buffer():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(1))

        def forward(self, x):
            self.n.add_(1)
            return x * self.n

    def f(m, x):
        return m(x)

    check(f, (Counter(), t()), kind="graph")


def test_out_argument():
    def f(x, out):
        r = torch.add(x, 1, out=out)
        return r is out, out * 1

    check(f, (t(), t()), kind="graph")


def test_augmented_assignment_on_alias():
    def f(x):
        y = x
        y += 1
        return x is y, x

    check(f, t(), kind="graph")


def test_inplace_op_dtype_error_raises_like_eager():
    def f(x):
        x += 0.5
        return x

    check(f, torch.arange(3), kind="eager", reason="torch_op")
