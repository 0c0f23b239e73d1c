"""torch.compile's `mode=` and `options=`: Inductor's modes and settings reach Inductor
with backend="inductor", as torch.compile passes them; elsewhere they are refused, saying
what to do."""
import pytest
import torch

import minidynamo


def double_plus_one(x):
    return x * 2 + 1


@pytest.fixture
def compile_fx_calls(monkeypatch):
    """Inductor's compile_fx replaced by one that records the settings it was handed and
    runs the graph as it is (no C++ compile in a unit test)."""
    import torch._inductor.compile_fx as cfx
    calls = []

    def spy(gm, example_inputs, config_patches=None, **kwargs):
        calls.append(dict(config_patches or {}))
        return gm.forward
    monkeypatch.setattr(cfx, "compile_fx", spy)
    return calls


@pytest.mark.parametrize("mode", ["max-autotune", "max-autotune-no-cudagraphs"])
def test_an_inductor_mode_reaches_inductor(mode, compile_fx_calls):
    from torch._inductor import list_mode_options
    opt = minidynamo.optimize(double_plus_one, backend="inductor", mode=mode)
    x = torch.randn(5)
    torch.testing.assert_close(opt(x), double_plus_one(x))
    assert compile_fx_calls, "inductor was not called"
    expected = list_mode_options(mode, None)
    assert all(compile_fx_calls[0].get(k) == v for k, v in expected.items()), compile_fx_calls[0]


def test_options_reach_inductor(compile_fx_calls):
    opt = minidynamo.optimize(double_plus_one, backend="inductor", options={"max_autotune": True,
                                                                            "epilogue_fusion": False})
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), double_plus_one(x))
    assert compile_fx_calls[0]["max_autotune"] is True and compile_fx_calls[0]["epilogue_fusion"] is False


def test_plain_inductor_gets_no_settings(compile_fx_calls):
    opt = minidynamo.optimize(double_plus_one, backend="inductor")
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), double_plus_one(x))
    assert compile_fx_calls == [{}]


def test_an_unknown_inductor_option_names_the_close_match():
    with pytest.raises(ValueError, match=r"no option 'max_autotun' \(did you mean 'max_autotune'\?\)"):
        minidynamo.optimize(double_plus_one, backend="inductor", options={"max_autotun": True})


def test_an_option_of_the_wrong_type_is_refused():
    with pytest.raises(ValueError, match="max_autotune"):
        minidynamo.optimize(double_plus_one, backend="inductor", options={"max_autotune": 3})


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_inductor_mode_elsewhere_says_to_use_inductor(backend):
    with pytest.raises(ValueError, match=r"mode='max-autotune' is one of Inductor's modes: pass backend='inductor'"):
        minidynamo.optimize(double_plus_one, backend=backend, mode="max-autotune")


def test_reduce_overhead_elsewhere_points_at_cudagraphs():
    with pytest.raises(ValueError, match="use mode='cudagraphs'"):
        minidynamo.optimize(double_plus_one, mode="reduce-overhead")


def test_options_elsewhere_are_refused():
    with pytest.raises(ValueError, match="options= are Inductor's settings; backend 'aot_eager' takes none"):
        minidynamo.optimize(double_plus_one, backend="aot_eager", options={"max_autotune": True})


def test_mode_and_options_together_are_refused_as_torch_compile_does():
    with pytest.raises(ValueError, match="mode= or options=, not both"):
        minidynamo.optimize(double_plus_one, backend="inductor", mode="max-autotune", options={"max_autotune": True})


def test_options_must_be_a_dict():
    with pytest.raises(TypeError, match="options must be a dict"):
        minidynamo.optimize(double_plus_one, backend="inductor", options=["max_autotune"])


def test_an_unknown_mode_lists_both_kinds():
    with pytest.raises(ValueError, match="unknown minidynamo mode 'fast'.*'max-autotune'"):
        minidynamo.optimize(double_plus_one, mode="fast")


def test_the_decorator_form_takes_options(compile_fx_calls):
    @minidynamo.optimize(backend="inductor", options={"max_autotune": True})
    def f(x):
        return x - 1
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x - 1)
    assert compile_fx_calls[0]["max_autotune"] is True
