"""PYTEST_DONT_REWRITE: the traced asserts must raise plain AssertionErrors.

Branches, loops, comprehensions, comparisons and boolean logic that depend only on
constants, shapes and dtypes: all traced into one graph, differential against eager."""
import pytest
import torch

from helpers import assert_uses, by_version, check


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


def test_if_else_on_shape():
    def f(x):
        if x.shape[0] > 3:
            y = x * 2
        else:
            y = x - 2
        return y

    assert_uses(f, "COMPARE_OP", ("POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_FALSE"))
    check(f, t(5, 2), kind="graph")
    check(f, t(2, 2), kind="graph")


def test_if_on_dtype_and_ndim():
    def f(x):
        if x.dtype == torch.float32 and x.ndim == 2:
            return x.sum(0)
        elif x.dtype is torch.int64:
            return x + 1
        return x.double()

    check(f, t(), kind="graph")
    check(f, torch.arange(4), kind="graph")
    check(f, torch.randn(2, 2, 2), kind="graph")


def test_if_is_none_and_not_none():
    def f(x, bias=None, scale=None):
        if bias is not None:
            x = x + bias
        if scale is None:
            scale = 2
        return x * scale

    assert_uses(f, by_version(py310=("IS_OP",), py311=("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NONE"),
                              py312=("POP_JUMP_IF_NOT_NONE", "POP_JUMP_IF_NONE")))
    check(f, t(), kind="graph")
    check(f, (t(), t()), kind="graph")


def test_chained_comparison():
    def f(x):
        n = x.shape[0]
        return x * (1 < n <= 4), 0 < n < 2, n == 4 != 5, 1 < 2 > 0

    assert_uses(f, by_version(py310=("DUP_TOP",), py311=("COPY",)), by_version(py310=("ROT_THREE",), py311=("SWAP",)))
    check(f, t(), kind="graph")


def test_boolean_ops_short_circuit():
    def f(x, a, b):
        c = a and b
        d = a or b
        e = not a
        g = (a and x.shape[0]) or 7
        return x + 1, c, d, e, g, None or "z", 0 and x

    assert_uses(f, by_version(py310=("JUMP_IF_FALSE_OR_POP",), py312=("COPY",)), "UNARY_NOT")
    check(f, (t(), 0, 3), (t(), 2, ""), kind="graph", same_entry=False)


def test_is_and_is_not():
    def f(x, y):
        return x + 1, x is y, x is not y, None is None, type(x) is torch.Tensor

    assert_uses(f, "IS_OP")
    check(f, (t(), t()), kind="graph")


def test_is_same_input_object():
    def f(x, y):
        return (x * 2) if x is y else (x - y)

    x = t()
    check(f, (x, x), kind="graph")


def test_for_over_range():
    def f(x):
        for i in range(3):
            x = x + i
        for i in range(5, 0, -2):
            x = x * i
        return x

    assert_uses(f, "GET_ITER", "FOR_ITER")
    info = check(f, t(), kind="graph")
    assert len([o for o in info.backend.ops() if "add" in str(o)]) == 3


def test_for_over_tuple_list_enumerate_zip():
    def f(xs, ws):
        acc = 0
        for i, x in enumerate(xs):
            acc = acc + x * i
        for x, w in zip(xs, ws):
            acc = acc + x * w
        for j, (x, w) in enumerate(zip(xs, ws), 1):
            acc = acc - j * x
        for x in [xs[0], xs[1]]:
            acc = acc + x
        return acc

    xs = (t(), t(), t())
    ws = [1.0, 2.0, 3.0]
    check(f, (xs, ws), kind="graph")


def test_for_over_dict_and_items():
    def f(x, d):
        for k in d:
            x = x + d[k]
        for k, v in d.items():
            x = x * v
        return x

    check(f, (t(), {"a": 1.0, "b": 3.0}), kind="graph")


def test_for_over_tensor_rows():
    def f(x):
        out = []
        for row in x:
            out.append(row.sum())
        return torch.stack(out)

    check(f, t(3, 4), kind="graph")


def test_for_else_break_continue():
    def f(x):
        for i in range(10):
            if i % 2:
                continue
            if i > 6:
                break
            x = x + i
        else:
            x = x * 100
        for i in range(2):
            pass
        else:
            x = x - 1
        return x

    check(f, t(), kind="graph")


def test_while_loop_on_constants():
    def f(x):
        i = 0
        while i < x.shape[0]:
            x = x + 1
            i += 1
        while True:
            i -= 1
            if i < 2:
                break
        return x, i

    check(f, t(3, 2), kind="graph")


def test_nested_loops():
    def f(x):
        total = x * 0
        for i in range(3):
            for j in range(i):
                total = total + x * (i + j)
        return total

    check(f, t(), kind="graph")


def test_list_comprehension():
    def f(x):
        ys = [x * i for i in range(3) if i != 1]
        return ys, [[j for j in range(i)] for i in range(3)]

    assert_uses(f, "LIST_APPEND", by_version(py310=("MAKE_FUNCTION",), py312=("LOAD_FAST_AND_CLEAR",)))
    check(f, t(), kind="graph")


def test_dict_and_set_comprehension():
    def f(x):
        d = {f"k{i}": x + i for i in range(3)}
        s = {i * i for i in range(-2, 3)}
        return d, s

    assert_uses(f, "MAP_ADD", "SET_ADD")
    check(f, t(), kind="graph")


def test_comprehension_keeps_outer_variable():
    def f(x):
        i = 10
        ys = [x + i for i in range(2)]
        return ys, i

    check(f, t(), kind="graph")


def test_comprehension_over_shape():
    def f(x):
        return x.reshape([d for d in reversed(x.shape)])

    check(f, t(2, 3), kind="graph")


def test_generator_expression():
    def f(x):
        return sum(x * i for i in range(3))

    check(f, t(), kind="graph")


def test_ternary_on_constant():
    def f(x, flag):
        return x + 1 if flag else x - 1

    info = check(f, (t(), True), (t(), False), kind="graph", same_entry=False)
    assert len(info.entries) == 2


def test_early_return_in_loop():
    def f(x):
        for i in range(10):
            if i == 2:
                return x * i
        return x

    check(f, t(), kind="graph")


def test_arithmetic_on_constants_folded():
    def f(x):
        a = 7
        b = 2
        r = (a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a << b, a >> 1, a & b, a | b, a ^ b,
             -a, +a, ~a, not a, 2.5 * 2, divmod(a, b), abs(-3), min(1, 2), max(3, 4), sum((1, 2)))
        return x * r[0], r

    info = check(f, t(), kind="graph")
    assert len(info.backend.ops()) == 1  # everything else folded


def test_arithmetic_on_tensors_is_graph():
    def f(x, y):
        return (x + y, x - y, x * y, x / y, x // (y.abs() + 1), x % 2, x ** 2, x @ y.t(), -x, +x,
                2 - x, 3 / (y.abs() + 1))

    info = check(f, (t(), t()), kind="graph")
    assert len(info.backend.ops()) >= 12


def test_bitwise_and_invert_on_int_tensors():
    def f(a, b):
        return a & b, a | b, a ^ b, ~a, a << 1, a >> 1

    ints = torch.arange(6)
    check(f, (ints, ints.flip(0)), kind="graph")


def test_comparisons_on_tensors_are_graph():
    def f(x, y):
        return x < y, x <= 0, x == y, x != 1, x > y, x >= y

    assert_uses(f, "COMPARE_OP")
    check(f, (t(), t()), kind="graph")


def test_inplace_operators_on_constants_and_tensors():
    def f(x):
        n = 3
        n += 2
        n *= 3
        n -= 1
        n //= 2
        n **= 2
        n %= 50
        y = x.clone()
        y += 1
        y *= n
        y -= x
        y /= 2
        return y, n

    assert_uses(f, by_version(py310=("INPLACE_ADD",), py311=("BINARY_OP",)))
    check(f, t(), kind="graph")


def test_inplace_operator_on_input_tensor_mutates_it():
    def f(x):
        x += 1
        x *= 2
        return x

    info = check(f, t(), kind="graph")
    x = torch.zeros(2)
    assert info.opt(x) is x and x.tolist() == [2.0, 2.0]


def test_inplace_add_on_tuple_rebinds():
    def f(x):
        tup = (x,)
        tup += (x + 1,)
        return tup

    check(f, t(), kind="graph")


@pytest.mark.parametrize("n", [1, 4])
def test_loop_count_from_shape_recompiles_per_shape(n):
    def f(x):
        for _ in range(x.shape[0]):
            x = x.cumsum(0)
        return x

    check(f, t(n), kind="graph")


def test_assert_true_traces_false_falls_back():
    def f(x):
        assert x.dim() == 2, "needs a matrix"
        return x + 1

    check(f, t(), kind="graph")
    check(f, t(3), kind="eager", reason="exceptions")


def test_is_on_distinct_inputs_is_guarded():
    def f(x, y):
        return (x * 2) if x is y else (x - y)

    a, b = t(), t()
    info = check(f, (a, b), kind="graph")
    out = info.opt(a, a)  # the same object twice now: must not reuse the x - y graph
    torch.testing.assert_close(out, a * 2)
    assert len(info.opt.cache_entries()) == 2
    assert "were different objects when traced" in info.opt.guard_failures()[0].reason


def test_inplace_result_is_the_input():
    def f(x):
        y = x.add_(1)
        z = torch.relu_(y)
        return y is x, z is x, x

    check(f, t(), kind="graph")
