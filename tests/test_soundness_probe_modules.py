"""Module and tensor state changed between calls, probed against eager: what the fakes or
the guards must see of parameters, gradients and the state a call leaves behind."""
import warnings

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


def test_param_data_of_new_shape_with_stale_grad():
    # `p.data = t` of another shape leaves p.grad of the old one: the forward runs eagerly
    # (only backward fails), so the call must too, not fail making the fake.
    def run(f, x):
        out = [f(x).sum()]
        out[0].backward()
        m.weight.data = torch.ones(4, 3)
        m.bias.data = torch.ones(4)
        out.append(f(x))
        return out

    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    expected = run(lambda t: m(t), x)
    for backend in (CountingBackend(), "aot_eager"):
        m = torch.nn.Linear(3, 2)
        m.load_state_dict(state)
        got = run(minidynamo.optimize(lambda t: m(t), backend=backend), x)
        assert torch.allclose(got[0], expected[0]) and torch.allclose(got[1], expected[1])


def test_out_resizing_an_input_breaks():
    # torch.exp(x, out=buf) resizes the input buf: eager allows it; AOTAutograd cannot
    # replay a graph input's new size, so the op stays outside the graph, as resize_.
    def f(x, buf):
        torch.exp(x, out=buf)
        return buf + 1

    for backend in ("eager", "aot_eager"):
        opt = minidynamo.optimize(f, backend=backend)
        for shape, n in (((3, 4), 0), ((2, 5), 10)):
            x = torch.randn(shape)
            b1, b2 = torch.empty(n), torch.empty(n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's deprecation of resizing a non-empty out
                expected, got = f(x, b1), opt(x, b2)
            assert torch.equal(expected, got) and torch.equal(b1, b2) and b1.shape == b2.shape


def test_factory_with_requires_grad_made_outside_the_graph():
    # torch.ones(n, requires_grad=True) in the graph came back from aot_eager as an
    # intermediate: the loss over it lost requires_grad, and backward found no graph.
    def f(x):
        w = torch.ones(x.shape[0], requires_grad=True)
        loss = (x * w).sum()
        loss.backward()
        return loss.detach(), w.grad, w.requires_grad

    for backend in ("eager", "aot_eager"):
        opt = minidynamo.optimize(f, backend=backend)
        for n in (3, 3, 5):
            x = torch.randn(n)
            expected, got = f(x), opt(x)
            assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
                       for a, b in zip(expected, got))


def test_memo_keys_tell_list_element_types_apart():
    # [2, 1] and [2.0, 1.0] (or [1, 2] and [1+0j, 2+0j]) are equal keys: the second op took
    # the first's memoized result, and the graph raised eager's TypeError outside the
    # handler, or after the list append it no longer made.
    def float_sizes(x, log):
        a = x.repeat([2, 1])
        log.append(1)
        return a, x.repeat([2.0, 1.0])

    def complex_data(x):
        a = x.new_tensor([1, 2])
        try:
            b = x.new_tensor([1 + 0j, 2 + 0j])
        except TypeError:
            b = x * 0
        return a, b

    check(float_sizes, (torch.randn(2, 3), []), kind="break")
    check(complex_data, torch.randn(2), kind="eager")


def _caught(op):
    def f(x, i):
        try:
            y = op(x, i)
        except (RuntimeError, IndexError):
            y = x * 0 - 1
        return y
    return f


def test_value_checked_ops_inside_try_run_eagerly():
    # An index out of range (and the like) raises in eager by the values, which fakes do
    # not have: the graph raised it outside the handler that eager ran.
    good, bad = (torch.randn(5), torch.tensor([0, 2])), (torch.randn(5), torch.tensor([0, 7]))
    ops = [lambda x, i: torch.gather(x, 0, i), lambda x, i: x[i], lambda x, i: x.clone().index_add_(0, i, x[:2]),
           lambda x, i: torch.nn.functional.one_hot(i, 3).float(),
           lambda x, i: torch.nn.functional.cross_entropy(x.view(1, 5).expand(2, 5), i)]
    for op in ops:
        # The frame runs eagerly; the lambda it calls is optimized on its own (one graph),
        # whose raise reaches the eager handler.
        check(_caught(op), good, bad, kind="eager", reason="data_dependent", graphs=1)


def test_value_checked_ops_outside_try_still_traced():
    def f(x, i):
        return torch.gather(x, 0, i), x[i], torch.nn.functional.embedding(i, x.view(5, 1))

    def in_with(x, i):
        with torch.no_grad():  # a with statement's exit lets the exception through
            return torch.gather(x, 0, i) * 2

    def in_except_body(x, i):
        try:
            raise KeyError("k")
        except KeyError:
            return x[i]

    def in_finally_only(x, i):
        state = []
        try:  # a finally lets the exception through (transformers wraps forward so)
            return torch.nn.functional.embedding(i, x.view(5, 1)) + 1
        finally:
            state.append(1)

    def except_not_implemented(x, i):
        y = x.clone()
        try:  # transformers' static cache: a fallback for devices without index_copy_
            y.index_copy_(0, i, x[:2])
        except NotImplementedError:
            y[i] = x[:2]
        return y

    def except_other_classes(x, i):
        try:
            return torch.gather(x, 0, i) * 2
        except (KeyError, TypeError, torch.fx.GraphModule):  # none is raised by a value check
            return x

    for fn in (f, in_with, in_except_body, in_finally_only, except_not_implemented, except_other_classes):
        check(fn, (torch.randn(5), torch.tensor([0, 2])), kind="graph")


@pytest.mark.parametrize("handler", ["Exception", "RuntimeError", "IndexError", "(KeyError, IndexError)",
                                     "torch.linalg.LinAlgError", "BaseException", "LookupError", ""])
def test_value_checked_op_under_a_handler_that_may_catch_runs_eagerly(handler):
    """Each of these handlers may catch what gather raises for an index out of range (a
    bare `except:` too): the op declines, so eager's raise reaches it."""
    src = (f"def f(x, i):\n    try:\n        return torch.gather(x, 0, i) * 2\n"
           f"    except {handler}:\n        return x - 1\n")
    scope = {"torch": torch}
    exec(src, scope)
    check(scope["f"], (torch.randn(5), torch.tensor([0, 2])), (torch.randn(5), torch.tensor([0, 7])),
          kind="eager", reason="data_dependent", graphs=0)


def _index_helper(x, i):
    return x.index_select(0, i) + 1


def test_value_checked_op_in_a_callee_of_a_try():
    def f(x, i):
        try:
            return _index_helper(x, i)
        except IndexError:
            return x - 1

    check(f, (torch.randn(5), torch.tensor([0, 2])), (torch.randn(5), torch.tensor([0, 7])), kind="eager",
          reason="data_dependent", graphs=1)
