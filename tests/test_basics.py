"""The public API's shapes: decorator forms, wrapping, backends, the cache entry kinds."""
import inspect

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


def add_relu(x, y):
    """Adds and rectifies."""
    return torch.relu(x + y)


def test_bare_decorator():
    @minidynamo.optimize
    def f(x):
        return x * 2

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 2)
    assert [e.kind for e in f.cache_entries()] == ["graph"]


def test_called_decorator_default_backend():
    @minidynamo.optimize()
    def f(x):
        return x - 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x - 1)
    assert [e.kind for e in f.cache_entries()] == ["graph"]


def test_named_eager_backend():
    f = minidynamo.optimize("eager")(add_relu)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(f(x, y), add_relu(x, y))
    assert f.cache_entries()[0].kind == "graph"
    assert f.cache_entries()[0].gm is not None


def test_backend_callable_fullgraph_keyword(counting_backend):
    f = minidynamo.optimize(backend=counting_backend, fullgraph=True)(add_relu)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(f(x, y), add_relu(x, y))
    assert counting_backend.calls == 1
    assert torch.relu in counting_backend.ops()


def test_wraps_name_doc_signature():
    f = minidynamo.optimize(add_relu)
    assert f.__name__ == "add_relu"
    assert f.__doc__ == "Adds and rectifies."
    assert f.__wrapped__ is add_relu
    assert inspect.signature(f) == inspect.signature(add_relu)


def test_original_function_stays_eager(counting_backend):
    def f(x):
        return x + 1

    code = f.__code__
    opt = minidynamo.optimize(backend=counting_backend)(f)
    x = torch.randn(2)
    opt(x)
    assert f.__code__ is code
    f(x)
    assert counting_backend.calls == 1
    assert len(opt.cache_entries()) == 1 and opt.cache_entries()[0].hit_count == 1


def test_backend_called_once_per_compile(counting_backend):
    opt = minidynamo.optimize(backend=counting_backend)(add_relu)
    x, y = torch.randn(4), torch.randn(4)
    for _ in range(5):
        opt(x, y)
    assert counting_backend.calls == 1
    assert opt.cache_entries()[0].hit_count == 5
    opt(torch.randn(5), torch.randn(5))
    assert counting_backend.calls == 2


def test_example_inputs_are_the_real_tensors(counting_backend):
    opt = minidynamo.optimize(backend=counting_backend)(add_relu)
    x, y = torch.randn(4), torch.randn(4)
    opt(x, y)
    assert counting_backend.example_inputs[0][0] is x
    assert counting_backend.example_inputs[0][1] is y


def test_unknown_backend_name_errors_at_decoration():
    with pytest.raises(ValueError, match="unknown minidynamo backend 'nope'"):
        minidynamo.optimize("nope")


def test_backend_of_wrong_type_errors():
    with pytest.raises(TypeError, match="backend must be"):
        minidynamo.optimize(backend=42)(add_relu)


def test_backend_that_raises_names_it():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("cannot compile")

    opt = minidynamo.optimize(backend=broken_backend)(add_relu)
    with pytest.raises(minidynamo.BackendError, match="broken_backend.*RuntimeError: cannot compile"):
        opt(torch.randn(2), torch.randn(2))


def test_backend_returning_non_callable():
    def lazy_backend(gm, example_inputs):
        return None

    opt = minidynamo.optimize(backend=lazy_backend)(add_relu)
    with pytest.raises(minidynamo.BackendError, match="returned NoneType"):
        opt(torch.randn(2), torch.randn(2))


def test_optimize_rejects_non_functions():
    with pytest.raises(TypeError):
        minidynamo.optimize()(42)
    with pytest.raises(TypeError):
        minidynamo.optimize()(torch.nn.Linear)

    def gen(x):
        yield x

    with pytest.raises(TypeError, match="generator"):
        minidynamo.optimize()(gen)


def test_constant_entry_has_no_graph():
    def f(x):
        return x.shape[0] * 2, x.dtype

    info = check(f, torch.randn(3, 2), kind="constant")
    assert info.entries[0].gm is None


def test_fullgraph_error_names_category_and_user_line():
    def f(x):
        if x.sum() > 0:  # the data-dependent line
            return x
        return -x

    opt = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)
    with pytest.raises(minidynamo.Unsupported) as e:
        opt(torch.randn(3))
    assert e.value.category == "data_dependent"
    line = f.__code__.co_firstlineno + 1
    assert f"{__file__}:{line}" in str(e.value)
    assert "the data-dependent line" in str(e.value)


def test_reset_drops_entries(counting_backend):
    opt = minidynamo.optimize(backend=counting_backend)(add_relu)
    opt(torch.randn(2), torch.randn(2))
    minidynamo.reset()
    assert opt.cache_entries() == []
    opt(torch.randn(2), torch.randn(2))
    assert counting_backend.calls == 2


def test_optimized_function_as_method():
    class M:
        def __init__(self):
            self.k = 3

        @minidynamo.optimize
        def f(self, x):
            return x * self.k

    m = M()
    x = torch.randn(3)
    torch.testing.assert_close(m.f(x), x * 3)
    assert M.__dict__["f"].cache_entries()[0].kind == "graph"


def test_explain_reports_break_reason():
    def f(x):
        print("side effect")
        return x + 1

    out = minidynamo.explain(f)(torch.randn(2))
    text = str(out)
    assert "side_effect" in text


def test_check_itself_catches_a_wrong_graph():
    """The differential helper must fail when the optimized run differs from eager."""
    def wrong_backend(gm, example_inputs):
        return lambda *a: tuple(t + 1 for t in gm.forward(*a))

    def f(x):
        return x * 2

    with pytest.raises(AssertionError):
        check(f, torch.randn(3), kind="graph", backend=wrong_backend, graphs=0)


def test_check_itself_catches_a_wrong_graph_after_a_break():
    """... and when a resume function's graph is wrong, or a break was expected and none
    happened (or one of another category)."""
    def wrong_backend(gm, example_inputs):
        return lambda *a: tuple(t + 1 for t in gm.forward(*a))

    def f(x):
        print("break here")
        return x * 2

    with pytest.raises(AssertionError):
        check(f, torch.randn(3), kind="break", backend=wrong_backend)
    check(f, torch.randn(3), kind="break", reason="side_effect")
    with pytest.raises(AssertionError):
        check(f, torch.randn(3), kind="break", reason="call")
    with pytest.raises(AssertionError):
        check(lambda x: x * 2, torch.randn(3), kind="break")


def test_check_itself_catches_lost_identity():
    def f(x, lst):
        return lst

    def copying(x, lst):
        return list(lst)

    from helpers import _Compare
    eager = ([torch.ones(1), [1, 2]], {})
    opt = ([torch.ones(1), [1, 2]], {})
    with pytest.raises(AssertionError, match="input object"):
        _Compare(eager, opt, "probe")(f(*eager[0]), copying(*opt[0]))
