"""Constructors and view/shape methods that take a size, given it as a torch.Size
(`y.size()`, `y.shape`), a tuple, a list, a literal or varargs. `Tensor.new` reads a
torch.Size as a shape and a tuple or list as data: the traced call must do the same.
Both graph paths are checked: the GraphModule (a counting backend) and the graph's code
inlined into the entry (the "eager" backend)."""
import pytest
import torch

import minidynamo
from helpers import check, same, same_outcome

# How the size reaches the call: (name, expression over y, Size-typed?)
SOURCES = [
    ("size", "y.size()"), ("shape", "y.shape"), ("tuple", "tuple(y.shape)"),
    ("list", "list(y.shape)"), ("literal", "(3, 4)"), ("varargs", "*y.shape"),
    ("literal_varargs", "3, 4"),
]


def _fn(body: str, name="f"):
    """A function of (x, y, z) whose body is one expression."""
    scope = {"torch": torch}
    exec(f"def {name}(x, y, z):\n    return {body}\n", scope)
    return scope[name]


def _args():
    x = torch.arange(12.0, dtype=torch.float64)  # dtype and values tell new() results apart
    y = torch.ones(3, 4)
    z = torch.arange(4.0).reshape(1, 4)
    return x, y, z


def _both_backends(fn, args=None, seed=None):
    """check() on the GraphModule path, then the inlined graph code ('eager' backend)."""
    args = args or _args()
    if seed is None:
        check(fn, args, kind="graph")
    opt = minidynamo.optimize(fn, backend="eager")
    for _ in range(2):
        if seed is not None:
            torch.manual_seed(seed)
            expected = fn(*args)
            torch.manual_seed(seed)
            same(opt(*args), expected)
        else:
            same_outcome(fn, opt, *args)
    (entry,) = opt.cache_entries()
    assert entry.kind == "graph", entry.reason
    return entry


# Deterministic values: compared in full.
VALUED = [
    "x.new_zeros({s})", "x.new_ones({s})",
    "torch.zeros({s})", "torch.ones({s}, dtype=torch.int32)", "x.reshape({s})",
    "x.view({s})", "z.expand({s})", "z.repeat({s})", "z.tile({s})",
]
# Data, not a shape: the size's values end up in the tensor.
DATA = ["x.new_tensor({s})", "torch.tensor({s})", "torch.as_tensor({s})"]
# Uninitialized values: the result is filled in place before it is returned.
UNINIT = ["x.new({s})", "x.new_empty({s})", "torch.empty({s})"]


@pytest.mark.parametrize("src", [s for _, s in SOURCES], ids=[n for n, _ in SOURCES])
@pytest.mark.parametrize("op", VALUED)
def test_size_taking_calls_with_values(op, src):
    _both_backends(_fn(op.format(s=src)))


@pytest.mark.parametrize("src", [s for _, s in SOURCES if not s.startswith(("*", "3,"))],
                         ids=[n for n, s in SOURCES if not s.startswith(("*", "3,"))])
@pytest.mark.parametrize("op", DATA + ["x.new_full({s}, 2.5)", "torch.full({s}, 7)"])
def test_size_as_data_or_with_more_arguments(op, src):
    _both_backends(_fn(op.format(s=src)))


@pytest.mark.parametrize("src", [s for _, s in SOURCES], ids=[n for n, _ in SOURCES])
@pytest.mark.parametrize("op", UNINIT)
def test_uninitialized_results_have_eager_metadata(op, src):
    if op.startswith("x.new(") and src.startswith(("(", "tuple", "list")):
        body = op.format(s=src)  # data: 3 and 4, values compared
    else:
        body = f"({op.format(s=src)}).fill_(1)"
    _both_backends(_fn(body))


def test_new_with_a_size_is_a_shape_and_with_a_tuple_is_data():
    f = _fn("(x.new(y.size()).fill_(1), x.new(y.shape).fill_(1), x.new(tuple(y.shape)), "
            "x.new(list(y.shape)), x.new(y.size()[1:]).fill_(1), x.new(y.shape, device='cpu').fill_(1))")
    entry = _both_backends(f)
    out = f(*_args())
    assert [tuple(o.shape) for o in out] == [(3, 4), (3, 4), (2,), (2,), (4,), (3, 4)]
    # The inlined code and the GraphModule's both pass the Size as sizes, the tuple as data.
    for code in (entry.source_text, entry.graph_code):
        assert code.count("x.new(3, 4)") == 2 and code.count("x.new((3, 4))") == 1, code


def test_new_other_forms():
    forms = [
        "x.new()",  # empty, 1-d
        "x.new(2, 3).fill_(1)",  # varargs: a shape
        "x.new([1, 2])",  # data
        "x.new(x)",  # the same storage, as eager
        "x.new(y.sum().size()).fill_(1)",  # an empty Size: a 0-d tensor, not x.new()
        "x.new(y.size()[:0]).fill_(1)",
        "x.new(torch.Size([2, 5])).fill_(1)",
        "x.new(*y.size()).fill_(1)",
    ]
    for body in forms:
        _both_backends(_fn(body))


def test_new_with_a_size_argument_of_the_function():
    def f(x, size):
        return x.new(size).fill_(1), x.new(size[:1]).fill_(1)

    check(f, (torch.ones(2), torch.Size([3, 4])), kind="graph")


def test_shape_methods_with_each_form():
    w = "x.reshape(3, 4)"
    bodies = [f"{w}.permute(z.size()[::-1][:0] + (1, 0))", f"{w}.permute(1, 0)", f"{w}.permute([1, 0])",
              f"{w}.permute(tuple(reversed(range(2))))", f"{w}.reshape(y.shape[::-1])",
              f"{w}.view(torch.Size([4, 3]))", f"{w}.expand(2, 3, 4)", f"{w}.expand(torch.Size([2]) + y.shape)",
              "torch.empty_strided(y.size(), (1, 3)).fill_(1)", "torch.zeros_like(y)",
              "torch.ones(y.size(), dtype=torch.float16)", "x.new_zeros(y.size(), dtype=torch.int8)"]
    for body in bodies:
        _both_backends(_fn(body))


@pytest.mark.parametrize("src", [s for _, s in SOURCES], ids=[n for n, _ in SOURCES])
@pytest.mark.parametrize("op", ["torch.rand({s})", "torch.randn({s})", "torch.rand({s}, dtype=torch.float64)"])
def test_random_factories_match_under_a_seed(op, src):
    _both_backends(_fn(op.format(s=src)), seed=0)


@pytest.mark.parametrize("src", [s for _, s in SOURCES if not s.startswith(("*", "3,"))],
                         ids=[n for n, s in SOURCES if not s.startswith(("*", "3,"))])
def test_randint_matches_under_a_seed(src):
    _both_backends(_fn(f"torch.randint(0, 10, {src})"), seed=1)
    _both_backends(_fn(f"torch.randint(10, {src}).shape"), seed=2)


@pytest.mark.parametrize("expr", ["torch.Tensor(y.size()).fill_(1)", "torch.Tensor(y[0, 0].size()).fill_(1)",
                                  "torch.Tensor(*y.size()).fill_(1)"])
def test_legacy_tensor_constructor_with_a_size(expr):
    _both_backends(_fn(expr))
