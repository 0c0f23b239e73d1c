"""torch functions, Tensor methods and attributes, indexing, nn.Module: graph nodes on
fake tensors, differential against eager."""
import torch
import torch.nn.functional as F

from helpers import assert_uses, by_version, check

G_WEIGHT = torch.randn(3, 3)
G_HOLDER = {"bias": torch.randn(3)}


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


def test_torch_functions():
    def f(x, y):
        return (torch.relu(x), torch.cat([x, y], dim=0), torch.stack((x, y)), torch.where(x > 0, x, y),
                torch.matmul(x, y.t()), torch.sigmoid(x), torch.clamp(x, min=-0.5, max=0.5),
                torch.max(x, dim=1).values, torch.sort(x, dim=0)[0], torch.flatten(x))

    info = check(f, (t(), t()), kind="graph")
    assert torch.relu in info.backend.ops()


def test_functional_namespace():
    def f(x, w):
        return (F.relu(x), F.softmax(x, dim=-1), F.linear(x, w), F.gelu(x), F.pad(x, (1, 1)),
                F.layer_norm(x, (3,)), F.dropout(x, p=0.0, training=False))

    check(f, (t(), t(5, 3)), kind="graph")


def test_factories_from_shapes():
    def f(x):
        return (torch.empty_like(x).shape, torch.zeros_like(x), torch.ones(x.shape[0], 2),
                torch.zeros(3, dtype=x.dtype), torch.full((2,), 7.0), torch.arange(x.shape[1]),
                torch.eye(2, device=x.device) + 1)

    check(f, t(), kind="graph")


def test_tensor_methods():
    def f(x):
        return (x.sum(dim=1), x.mean(), x.view(-1), x.view(3, 4), x.t(), x.reshape(2, 6),
                x.transpose(0, 1).contiguous(), x.unsqueeze(0), x.permute(1, 0), x.float(),
                x.to(torch.float64), x.abs().max(), x.softmax(-1), x.clone(), x.expand(2, 4, 3),
                x.chunk(2), x.split(1, dim=1), x.T, x.mT, x.exp().log())

    assert_uses(f, ("LOAD_METHOD", "LOAD_ATTR"))
    check(f, t(), kind="graph")


def test_metadata_is_constant():
    def f(x):
        return (x.shape, x.size(0), x.size(), x.size(-1), x.dtype, x.device, x.ndim, x.dim(),
                x.numel(), x.is_contiguous(), x.stride(), x.requires_grad, x.is_floating_point(),
                len(x), x.element_size(), x.shape[-1] * 2)

    info = check(f, t(), kind="constant")
    assert info.graphs == 0


def test_metadata_feeds_ops():
    def f(x):
        b, n = x.shape
        return x.new_zeros(b, n * 2) + 1, x.view(b * n), x.reshape(x.size(1), -1)

    check(f, t(), kind="graph")


def test_torch_size_and_dtype_objects():
    def f(x):
        s = x.shape
        return torch.zeros(s), s[1:], s == (4, 3), x.to(dtype=torch.float16), torch.Size([2, 2])

    check(f, t(), kind="graph")


def test_indexing_and_slicing():
    def f(x):
        return (x[0], x[-1], x[1:3], x[:, 0], x[..., 1:], x[None], x[::2, ::-1] if False else x[::2],
                x[0, 1], x[[0, 2]], x[x > 0], x[:, None, :])

    assert_uses(f, by_version(py310=("BINARY_SUBSCR",), py314=("BINARY_OP []",)))
    # x[x > 0] has a data-dependent size: a break at the read (3.14's BINARY_OP [] too)
    check(f, t(), kind="break", reason="data_dependent")


def test_indexing_without_boolean_mask():
    def f(x, idx):
        return x[0], x[-1], x[1:3], x[:, 0], x[..., 1:], x[None], x[::2], x[0, 1], x[idx], x[:, None, :]

    check(f, (t(), torch.tensor([0, 2])), kind="graph")


def test_tensor_setitem_mutates_input():
    def f(x):
        x[0] = 1
        x[1:, 0] = x[1:, 1] * 2
        return x

    assert_uses(f, "STORE_SUBSCR")
    check(f, t(), kind="graph")


def test_reductions_returning_named_tuples():
    def f(x):
        v, i = x.max(dim=0)
        m = x.min(1)
        return v, i, m.values, m.indices, torch.topk(x, 2).indices

    check(f, t(), kind="graph")


def test_global_and_closure_tensors_are_inputs():
    bias = t(3)

    def f(x):
        return x @ G_WEIGHT + G_HOLDER["bias"] + bias

    info = check(f, t(), kind="graph")
    assert len(info.backend.example_inputs[0]) == 4


def test_global_tensor_contents_changing_between_calls(counting_backend):
    import minidynamo

    def f(x):
        return x + G_WEIGHT

    opt = minidynamo.optimize(backend=counting_backend)(f)
    x = t(3, 3)
    torch.testing.assert_close(opt(x), x + G_WEIGHT)
    G_WEIGHT.add_(10)  # same object, new contents: read at call time, no recompile
    torch.testing.assert_close(opt(x), x + G_WEIGHT)
    assert counting_backend.calls == 1


def test_tensor_in_container_argument():
    def f(batch):
        return batch["x"] * batch["scale"] + batch["extra"][0]

    check(f, ({"x": t(), "scale": 2.0, "extra": [t(3)]},), kind="graph")


def test_tensor_attribute_of_object():
    class Holder:
        def __init__(self):
            self.w = t(3)

    def f(h, x):
        return x * h.w

    check(f, (Holder(), t()), kind="graph")


def test_dtype_promotion_and_int_tensors():
    def f(a, b):
        return a + b, a * 1.5, (a > 2).sum(), a.to(torch.int32) // 2

    check(f, (torch.arange(6), torch.randn(6)), kind="graph")


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 8)
        self.fc2 = torch.nn.Linear(8, 2)
        self.register_buffer("scale", torch.tensor(0.5))
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_module_passed_in():
    def f(m, x):
        return m(x), m.fc1.weight.shape, m.scale + 1

    with torch.no_grad():
        check(f, (MLP(), t()), kind="graph")


def test_module_parameters_are_graph_inputs():
    def f(m, x):
        return m.fc1(x) + m.fc1.bias

    m = MLP()
    info = check(f, (m, t()), kind="graph")
    example = info.backend.example_inputs[0]
    assert any(e.shape == (8, 3) for e in example)


def test_module_forward_with_grad():
    def f(m, x):
        return m(x).sum()

    check(f, (MLP(), t()), kind="graph")


def test_shape_mismatch_raises_like_eager():
    def f(x, y):
        return x + y

    check(f, (t(4, 3), t(5, 3)), kind="eager", reason="torch_op")  # an operator, not a call: no break


def test_matmul_mismatch_message_is_eagers():
    def f(x, y):
        return torch.mm(x, y)

    # The failing call breaks the graph and runs natively: eager's own error.
    check(f, (t(2, 3), t(2, 3)), kind="break", reason="torch_op")


def test_item_and_tolist_break():
    def f(x):
        return x.sum().item() + 1

    def g(x):
        return x.tolist()

    check(f, t(), kind="break", reason="data_dependent")
    check(g, t(), kind="break", reason="data_dependent")


def test_tensor_truth_value_breaks():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    # The graph computes the condition; each side is a resume function.
    info = check(f, torch.ones(3), torch.full((3,), -1.0), kind="break", reason="data_dependent", graphs=2)
    assert sorted(e.kind for e in info.tree) == ["break", "constant", "graph"]


def test_requires_grad_inputs():
    def f(x, w):
        return (x * w).sum()

    check(f, (t(), t(4, 3).requires_grad_()), kind="graph")


def test_enumerate_tensor():
    def f(x):
        return [r * i for i, r in enumerate(x)]
    check(f, t(), kind="graph")



def test_method_on_returned_namedtuple():
    def f(x):
        r = x.max(dim=0)
        return r, r.values
    check(f, t(), kind="graph")



def test_tensor_bool_ops():
    def f(x):
        return (x > 0) & (x < 1), ~(x > 0), x.masked_fill(x > 0, 0.0)
    check(f, t(), kind="graph")



def test_shape_unpack_and_math():
    import math
    def f(x):
        n, m = x.shape
        return x.view(n * m) / math.sqrt(m), math.pi, math.ceil(n / 3)
    check(f, t(), kind="graph")



def test_getattr_dtype_stuff():
    def f(x):
        return x.to(torch.float64) if x.dtype != torch.float64 else x, torch.finfo(x.dtype).eps
    check(f, t(), kind="graph")



def test_slice_objects():
    def f(x):
        s = slice(1, 3)
        return x[s], x[slice(None, None, 2)]
    check(f, t(), kind="graph")



def test_return_none_only():
    def f(x):
        x.add_(1)
    check(f, t(), kind="graph")



def test_chained_methods_on_list_result():
    def f(x):
        parts = x.split(2, dim=0)
        return torch.cat(list(parts)[::-1])
    check(f, t(), kind="graph")



def test_tuple_compare_shapes():
    def f(x, y):
        if x.shape == y.shape:
            return x + y
        return x
    check(f, (t(), t()), kind="graph")

