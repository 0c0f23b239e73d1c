"""torch.compile's call form: `optimize(fn=None, *, backend, fullgraph, dynamic, mode)`.

A first argument is always the function to optimize (a string excepted: a backend name);
a backend goes by keyword and is checked when given. Nothing is guessed from parameter
names: every case below was once taken for the other kind of callable.
"""
import inspect
import warnings

import pytest
import torch
from helpers import CountingBackend, same, same_outcome

import minidynamo


def _differential(fn, opt, *args, kind="graph"):
    """Two calls (trace, then cache hit) with eager's outcome; one entry of `kind`."""
    for _ in range(2):
        same_outcome(fn, opt, *args)
    assert [e.kind for e in opt.cache_entries()] == [kind]


# --- bare @optimize optimizes the function, whatever its parameters are called -------------

def run(model, x):
    return model(x).relu()


def step(module, batch):
    return module(batch) * 2


def gm_named(gm, example_inputs):  # a user function with a backend's parameter names
    return gm(example_inputs) + 1


@pytest.mark.parametrize("fn", [run, step, gm_named])
def test_bare_decorator_optimizes_functions_with_model_module_gm_parameters(fn):
    opt = minidynamo.optimize(fn)
    assert isinstance(opt, minidynamo.OptimizedFunction) and opt.__wrapped__ is fn
    _differential(fn, opt, torch.nn.Linear(4, 3), torch.randn(2, 4))


def test_decorator_syntax_on_a_model_parameter_function():
    @minidynamo.optimize
    def train_step(model, x):
        return model(x).sum()
    model, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    _differential(train_step.__wrapped__, train_step, model, x)


# --- backend= is always a backend ---------------------------------------------------------

def with_kwargs(gm, example_inputs, **kwargs):
    with_kwargs.calls += 1
    return gm.forward


def with_default(gm, example_inputs, options=None):
    with_default.calls += 1
    return gm.forward


def odd_names(fx_module, inputs):
    odd_names.calls += 1
    return fx_module.forward


def star_args(*args):
    star_args.calls += 1
    return args[0].forward


def add_relu(x, y):
    return torch.relu(x + y)


@pytest.mark.parametrize("backend", [with_kwargs, with_default, odd_names, star_args])
def test_backend_keyword_with_kwargs_defaults_or_odd_names_is_the_backend(backend):
    backend.calls = 0
    opt = minidynamo.optimize(backend=backend)(add_relu)
    assert opt.__wrapped__ is add_relu
    _differential(add_relu, opt, torch.randn(3), torch.randn(3))
    assert backend.calls == 1


def test_backend_whose_signature_cannot_be_read_is_accepted():
    calls = []

    def opaque(gm, example_inputs):
        calls.append(gm)
        return gm.forward
    opaque.__signature__ = "unreadable"  # inspect.signature raises TypeError on it
    opt = minidynamo.optimize(backend=opaque)(add_relu)
    _differential(add_relu, opt, torch.randn(3), torch.randn(3))
    assert len(calls) == 1


@pytest.mark.parametrize("backend, shown", [
    (lambda gm: gm, r"'<lambda>' takes \(gm\)"),
    (lambda: None, r"'<lambda>' takes \(\)"),
    (lambda gm, example_inputs, *, options: gm, "options"),  # a required keyword
    (torch.nn.Linear(2, 2), r"takes \(input"),  # a module's forward(input)
])
def test_backend_that_cannot_take_gm_and_example_inputs_fails_at_optimize(backend, shown):
    with pytest.raises(TypeError, match=shown) as info:
        minidynamo.optimize(backend=backend)
    assert "backend(gm, example_inputs)" in str(info.value)


def test_backend_lambda_is_never_taken_for_the_function():
    seen = []
    opt = minidynamo.optimize(backend=lambda gm, example_inputs: seen.append(gm) or gm.forward)(add_relu)
    assert isinstance(opt, minidynamo.OptimizedFunction) and opt.__wrapped__ is add_relu
    _differential(add_relu, opt, torch.randn(2), torch.randn(2))
    assert len(seen) == 1


# --- the first argument: the function, a backend name, or a clear error -------------------

@pytest.mark.parametrize("target, words", [
    (CountingBackend(), ["CountingBackend", "a backend", "backend=..."]),
    (torch.nn.Linear, ["class Linear"]),
    (CountingBackend, ["class CountingBackend"]),
    (42, ["got int", "backend=..."]),
])
def test_first_argument_that_is_no_python_function_is_a_type_error(target, words):
    with pytest.raises(TypeError) as info:
        minidynamo.optimize(target)
    msg = str(info.value)
    assert msg.startswith("minidynamo.optimize") and all(w in msg for w in words), msg
    assert "first argument of minidynamo.optimize is the function to optimize" in msg


def test_a_module_is_optimized_through_its_forward_or_a_function_calling_it():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        @minidynamo.optimize
        def forward(self, x):
            return self.lin(x).relu()

    net, x = Net(), torch.randn(2, 4)
    for _ in range(2):
        same(net(x), Net.forward.__wrapped__(net, x))
    assert [e.kind for e in Net.forward.cache_entries()] == ["graph"]
    call = lambda model, x: model(x)  # noqa: E731
    _differential(call, minidynamo.optimize(call), torch.nn.Linear(4, 3), x)


def test_string_first_argument_names_a_backend(capsys):
    opt = minidynamo.optimize("eager")(add_relu)
    _differential(add_relu, opt, torch.randn(3), torch.randn(3))

    @minidynamo.optimize("debug")
    def g(x):
        return x * 3
    _differential(g.__wrapped__, g, torch.randn(2))
    assert "minidynamo graph (1 inputs)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown minidynamo backend 'add_relu'"):
        minidynamo.optimize("add_relu")
    with pytest.raises(TypeError, match="two backends: 'debug' and backend='eager'"):
        minidynamo.optimize("debug", backend="eager")


def test_function_and_options_in_one_call():
    backend = CountingBackend()
    opt = minidynamo.optimize(add_relu, backend=backend, fullgraph=True)
    assert isinstance(opt, minidynamo.OptimizedFunction) and opt._cache.fullgraph
    _differential(add_relu, opt, torch.randn(3), torch.randn(3))
    assert backend.calls == 1
    assert minidynamo.optimize(add_relu, mode="cudagraphs").mode == "cudagraphs"
    again = minidynamo.optimize(opt, backend="eager")  # an optimized function: its original, re-optimized
    assert again._fn is add_relu and again._cache.backend == "eager"


def test_signature_is_torch_compiles():
    params = inspect.signature(minidynamo.optimize).parameters
    assert list(params) == ["fn", "backend", "fullgraph", "dynamic", "mode", "options"]
    assert params["fn"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and params["fn"].default is None
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in list(params)[1:])
    assert params["backend"].default == "eager" and repr(params["backend"].default) == "'eager'"
    assert [params[p].default for p in ("fullgraph", "dynamic", "mode", "options")] == [False, None, None, None]
    assert set(params) <= set(inspect.signature(torch.compile).parameters) | {"fn"}


# --- fullgraph, dynamic, mode -------------------------------------------------------------

def test_fullgraph_must_be_a_bool():
    with pytest.raises(TypeError, match="fullgraph must be True or False, not 'yes'"):
        minidynamo.optimize(fullgraph="yes")


def test_dynamic_false_traces_each_size():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt = minidynamo.optimize(add_relu, dynamic=False)
    for n in (3, 4, 5):
        same_outcome(add_relu, opt, torch.randn(n), torch.randn(n))
    assert len(opt.cache_entries()) == 3


def test_dynamic_none_is_static_then_symbolic_for_the_size_that_changed():
    opt = minidynamo.optimize(add_relu)
    for n in (3, 4, 5, 9):
        same_outcome(add_relu, opt, torch.randn(n), torch.randn(n))
    entries = opt.cache_entries()
    assert len(entries) == 2
    assert "(3,)" in str(entries[0]) and "symbolic sizes" in str(entries[1])
    assert [e.hit_count for e in entries] == [1, 3]


def test_dynamic_true_is_symbolic_from_the_first_call():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt = minidynamo.optimize(add_relu, dynamic=True)
    for n in (3, 4, 5):
        same_outcome(add_relu, opt, torch.randn(n), torch.randn(n))
    assert len(opt.cache_entries()) == 1


@pytest.mark.parametrize("dynamic", [1, 0, "auto", "True"])
def test_dynamic_other_values_are_a_type_error(dynamic):
    with pytest.raises(TypeError, match=f"dynamic must be None, False or True, not {dynamic!r}"):
        minidynamo.optimize(add_relu, dynamic=dynamic)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_torch_compile_modes_name_the_supported_ones(mode):
    with pytest.raises(ValueError, match=f"mode='{mode}' is one of Inductor's modes: pass backend='inductor'"
                       ".*None, 'default', 'cudagraphs'") as info:
        minidynamo.optimize(add_relu, mode=mode)
    assert ("use mode='cudagraphs'" in str(info.value)) == (mode == "reduce-overhead")


def test_supported_modes():
    for mode in (None, "default"):
        opt = minidynamo.optimize(add_relu, mode=mode)
        _differential(add_relu, opt, torch.randn(3), torch.randn(3))
