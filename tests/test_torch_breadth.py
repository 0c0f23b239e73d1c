"""torch breadth: queries that return non-tensors, torch.backends settings, torch.device,
nn.Modules made inside the function, module containers, `@torch.no_grad()` as a
decorator, and logging calls. Each function is compared with eager (helpers.check) and
what is captured is asserted; settings are changed between calls to show the entry is
not stale."""
import contextlib
import logging

import pytest
import torch
import torch.fx._symbolic_trace as symbolic_trace
from torch.backends.cuda import matmul as _matmul_settings
from helpers import CountingBackend, check, same_outcome

import minidynamo


def opt_of(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


def _twice(fn, opt, *args):
    """Called twice (trace, then cache hit): the same outcome as eager both times."""
    same_outcome(fn, opt, *args)
    same_outcome(fn, opt, *args)


def own_guards(entry) -> list:
    """The entry's guard expressions other than the global-state check."""
    return [e for g, e in zip(entry.guards, entry.guard_exprs) if g.kind != "GLOBAL_STATE"]


@contextlib.contextmanager
def setting(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# --- queries returning non-tensors ---------------------------------------------------------
def _branch(flag):
    """A function that branches on `flag()` (so a stale answer gives a wrong result)."""
    def f(x):
        if flag():
            return x + 1
        return x - 1
    f.__name__ = f"branch_on_{getattr(flag, '__name__', 'query')}"
    return f


_QUERIES = [
    torch._C._is_tracing, torch.jit.is_scripting, torch.jit.is_tracing, torch.onnx.is_in_onnx_export,
    symbolic_trace.is_fx_tracing, torch.is_autocast_enabled, lambda: torch.is_autocast_enabled("cpu"),
    lambda: torch.is_autocast_enabled(device_type="cuda"),
    torch.distributed.is_available,
    lambda: torch.distributed.is_available() and torch.distributed.is_initialized(),
    torch._C._are_functorch_transforms_active, torch.compiler.is_exporting,
    lambda: torch.autograd._is_checkpoint_valid(),
    lambda: torch.backends.cuda.flash_sdp_enabled(), lambda: torch.backends.cuda.math_sdp_enabled(),
    lambda: torch.amp.is_autocast_available("cpu"),
]
# (A Python function of torch's reached as a plain value, not through a torch module,
# is interpreted: the lambdas read them through their modules.)


@pytest.mark.parametrize("query", _QUERIES, ids=lambda q: getattr(q, "__name__", "query"))
def test_query_is_a_constant_in_one_graph(query):
    check(_branch(query), torch.ones(3), kind="graph", graphs=1)


def test_checkpoint_validity_is_asked_again_each_call():
    def f(x):
        return x + 1 if torch.autograd._is_checkpoint_valid() else x - 1
    info = check(f, torch.ones(2), kind="graph", graphs=1)
    assert any("_is_checkpoint_valid" in e for e in own_guards(info.entries[0])), own_guards(info.entries[0])


def test_sdp_backend_flag_change_recompiles():
    def f(x):
        return x + 1 if torch.backends.cuda.math_sdp_enabled() else x - 1
    opt, _ = opt_of(f)
    x = torch.ones(2)
    old = torch.backends.cuda.math_sdp_enabled()
    try:
        _twice(f, opt, x)
        torch.backends.cuda.enable_math_sdp(not old)
        _twice(f, opt, x)
    finally:
        torch.backends.cuda.enable_math_sdp(old)
    assert len(opt.cache_entries()) == 2


# --- torch.backends settings ---------------------------------------------------------------
_MATMUL = torch.backends.cuda.matmul
_CUDNN = torch.backends.cudnn


def tf32_matmul(x):
    if torch.backends.cuda.matmul.allow_tf32:
        return x + 1
    return x - 1


def fp16_reduction(x):
    return x * 2, torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction


def cudnn_tf32(x):
    return x + 1 if torch.backends.cudnn.allow_tf32 else x - 1


def cudnn_enabled(x):
    return x + 1 if torch.backends.cudnn.enabled else x - 1


def cudnn_benchmark(x):
    return x + 1 if torch.backends.cudnn.benchmark else x - 1


def matmul_precision(x):
    if torch.get_float32_matmul_precision() == "highest":
        return x + 1
    return x * 3, torch.get_float32_matmul_precision()


@pytest.mark.parametrize("fn, obj, name, other", [
    (tf32_matmul, _MATMUL, "allow_tf32", None),
    (fp16_reduction, _MATMUL, "allow_fp16_reduced_precision_reduction", None),
    (cudnn_tf32, _CUDNN, "allow_tf32", None),
    (cudnn_enabled, _CUDNN, "enabled", None),
    (cudnn_benchmark, _CUDNN, "benchmark", None),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_backend_flag_read_is_guarded(fn, obj, name, other):
    """One graph; assigning the flag between calls recompiles, and the answer follows it."""
    check(fn, torch.ones(2), kind="graph", graphs=1)
    opt, backend = opt_of(fn)
    x = torch.ones(2)
    _twice(fn, opt, x)
    with setting(obj, name, not getattr(obj, name)):
        _twice(fn, opt, x)
    _twice(fn, opt, x)
    assert len(opt.cache_entries()) == 2 and backend.calls == 2
    guards = own_guards(opt.cache_entries()[0])
    assert any(name in e for e in guards), guards


def test_matmul_precision_change_recompiles():
    opt, backend = opt_of(matmul_precision)
    x = torch.ones(2)
    old = torch.get_float32_matmul_precision()
    try:
        for precision in ("highest", "high", "medium", "high"):
            torch.set_float32_matmul_precision(precision)
            _twice(matmul_precision, opt, x)
    finally:
        torch.set_float32_matmul_precision(old)
    # "high" and "medium" both allow TF32: only the query's own guard tells them apart
    assert len(opt.cache_entries()) == 3 and backend.calls == 3


def test_fp32_precision_setting_is_guarded():
    if not hasattr(_MATMUL, "fp32_precision"):
        pytest.skip("torch without the fp32_precision settings")

    def f(x):
        return x * 2, torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision
    check(f, torch.ones(2), kind="graph", graphs=1)


def test_unknown_settings_attribute_raises_as_eager():
    def f(x):
        return x + torch.backends.cuda.matmul.no_such_flag
    check(f, torch.ones(2), kind="break", reason="exceptions")


# --- nn.Modules made inside the function --------------------------------------------------
nn = torch.nn


def softmax_made(x):
    return nn.Softmax(dim=1)(x)


def relu_made(x):
    return nn.ReLU()(x) + torch.nn.Tanh()(x)


def sequential_made(x):
    s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    outs = [m(x) for m in s]
    return s(x), outs, len(s), s[-1](x), s[1:](x), isinstance(s, nn.Sequential)


def modulelist_made(x):
    layers = nn.ModuleList([nn.ReLU(), nn.Sigmoid()])
    layers.append(nn.Tanh())
    layers.extend([nn.Softplus()])
    y = x
    for i, m in enumerate(layers):
        y = m(y) * (i + 1)
    tail = layers[1:]
    return y, len(layers), [m(x) for m in tail], len(tail), layers[0] in layers, layers[0] in tail


def moduledict_made(x):
    acts = nn.ModuleDict({"relu": nn.ReLU(), "tanh": nn.Tanh()})
    out = [(k, m(x)) for k, m in acts.items()]
    return out, list(acts.keys()), [m(x) for m in acts.values()], "relu" in acts, "gelu" in acts, \
        acts["tanh"](x), acts.relu(x), len(acts), [k for k in acts]


def mixed_with_passed_module(x, lin):
    return nn.Sequential(lin, nn.ReLU(), nn.Dropout(p=0.0))(x)


def losses_made(logits, target, y):
    return (nn.CrossEntropyLoss()(logits, target), nn.MSELoss(reduction="sum")(logits, y),
            nn.SmoothL1Loss(beta=0.5)(logits, y), nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target))


def norms_without_parameters(x):
    return (nn.LayerNorm(4, elementwise_affine=False)(x), nn.InstanceNorm1d(3)(x),
            nn.GroupNorm(1, 3, affine=False)(x))


def shapes_made(img):
    up = nn.Upsample(scale_factor=2, mode="nearest")(img)
    pooled = nn.MaxPool2d(2)(up)
    flat = nn.Flatten()(pooled)
    return nn.Unflatten(1, (2, -1))(flat), nn.ZeroPad2d(1)(img), nn.AdaptiveAvgPool2d(1)(img), \
        nn.PixelShuffle(2)(img.repeat(1, 4, 1, 1))


def attributes_of_made(x):
    m = nn.LeakyReLU(negative_slope=0.2)
    return m(x), m.negative_slope, m.training, m.inplace


_LIN = nn.Linear(4, 4)


@pytest.mark.parametrize("fn, args", [
    (softmax_made, (torch.randn(2, 3),)),
    (relu_made, (torch.randn(3),)),
    (sequential_made, (torch.randn(3),)),
    (modulelist_made, (torch.randn(3),)),
    (moduledict_made, (torch.randn(3),)),
    (mixed_with_passed_module, (torch.randn(2, 4), _LIN)),
    (losses_made, (torch.randn(4, 5), torch.tensor([0, 1, 4, 2]), torch.randn(4, 5))),
    (norms_without_parameters, (torch.randn(2, 3, 4),)),
    (shapes_made, (torch.randn(1, 2, 4, 4),)),
    (attributes_of_made, (torch.randn(3),)),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_module_made_inside_is_inlined(fn, args):
    check(fn, args, kind="graph", graphs=1)


def test_made_module_that_escapes_is_a_new_object_each_call():
    def f(x, lin):
        act = nn.GELU(approximate="tanh")
        return act, nn.Sequential(lin, act), act(x)
    lin = nn.Linear(2, 2)
    info = check(f, (torch.randn(2), lin), kind="graph", graphs=1)
    first, second = info.opt(torch.randn(2), lin), info.opt(torch.randn(2), lin)
    act, seq, _ = first
    assert type(act) is nn.GELU and act.approximate == "tanh" and act is not second[0]
    assert type(seq) is nn.Sequential and seq[0] is lin and seq[1] is act  # one object, twice
    assert len(info.opt.cache_entries()) == 1


def test_made_module_live_at_a_graph_break():
    def f(x):
        m = nn.Softmax(dim=0)
        print("between")
        return m(x)
    check(f, torch.randn(3), kind="break", reason="side_effect")


def _record_rng(fn):
    before = torch.get_rng_state()
    fn()
    return torch.equal(before, torch.get_rng_state())


# Arguments for the constructors that need some (the others are made with none).
_SAMPLE_ARGS = {
    "Threshold": (0.1, 2.0), "GLU": (), "Unflatten": (1, (2, 2)), "Upsample": (None, 2),
    "UpsamplingNearest2d": (None, 2), "UpsamplingBilinear2d": (None, 2), "PixelShuffle": (2,),
    "PixelUnshuffle": (2,), "ChannelShuffle": (2,), "Fold": ((4, 4), 2), "Unfold": (2,),
    "LocalResponseNorm": (2,), "ConstantPad1d": (1, 0.5), "ConstantPad2d": (1, 0.5),
    "ConstantPad3d": (1, 0.5),
}


@pytest.mark.parametrize("cls", sorted(__import__("minidynamo.variables.nn_modules", fromlist=["x"]).PARAMETERLESS,
                                       key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_parameterless_constructors_are_pure(cls):
    """What the trace makes for real: no parameter, no tensor buffer, no random number."""
    name = cls.__name__
    if name in _SAMPLE_ARGS:
        args = _SAMPLE_ARGS[name]
    elif "Pool" in name or "Pad" in name or "Unpool" in name:
        args = (2, 2) if name.startswith("LPPool") else (2,)
    else:
        args = ()
    made = []
    assert _record_rng(lambda: made.append(cls(*args)))
    m = made[0]
    assert all(p is None for p in m._parameters.values()) and all(b is None for b in m._buffers.values())
    assert not m._modules and not list(m.parameters())


def linear_made(x):
    return nn.Linear(3, 3)(x).shape  # (its values are random)


def affine_layer_norm_made(x):
    return nn.LayerNorm(3)(x)


def batch_norm_made(x):
    return nn.BatchNorm1d(3, affine=False)(x)


def fractional_pool_made(x):
    return nn.FractionalMaxPool2d(2, output_size=1)(x).shape


@pytest.mark.parametrize("fn, words", [
    (linear_made, "randomly"),
    (affine_layer_norm_made, "elementwise_affine=True"),
    (batch_norm_made, "allocates"),
    (fractional_pool_made, "not known"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_module_with_parameters_made_inside_is_declined(fn, words):
    """Its parameters would be allocated and (for most) randomly initialised: the call
    runs natively at a graph break."""
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    info = check(fn, x, kind="break", reason="call")
    assert words in str(info.break_reason), info.break_reason


def dropout_bad_p(x):
    return nn.Dropout(p=2.0)(x)


def moduledict_bad_key(x):
    return nn.ModuleDict({"a.b": nn.ReLU()})


def moduledict_reserved_key(x):
    return nn.ModuleDict({"forward": nn.ReLU()})


def sequential_index_out_of_range(x):
    return nn.Sequential(nn.ReLU())[3](x)


def sequential_of_a_non_module(x):
    return nn.Sequential(nn.ReLU(), 3)


def setting_an_attribute_of_a_made_module(x):
    m = nn.ReLU()
    m.inplace = True
    return m(x)


@pytest.mark.parametrize("fn, reason", [
    (dropout_bad_p, "exceptions"), (moduledict_bad_key, "exceptions"), (moduledict_reserved_key, "exceptions"),
    (sequential_of_a_non_module, "call"), (setting_an_attribute_of_a_made_module, "construct"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_made_module_errors_break_and_raise_as_eager(fn, reason):
    check(fn, torch.randn(3), kind="break", reason=reason)


def test_index_out_of_range_raises_as_eager():
    """A subscript cannot break: the call runs eagerly whole and raises IndexError."""
    check(sequential_index_out_of_range, torch.randn(3), kind="eager", reason="exceptions")


def test_global_forward_hook_is_not_skipped():
    """A process-wide forward hook runs for a module made inside: the call is not inlined
    while one is set, and setting one later is noticed by the entry."""
    def f(x):
        return nn.ReLU()(x)
    opt, _ = opt_of(f)
    x = torch.randn(3)
    _twice(f, opt, x)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o + 100)
    try:
        got = opt(x)
        torch.testing.assert_close(got, f(x))
        assert got.min() >= 100
    finally:
        handle.remove()
    _twice(f, opt, x)


# --- module containers passed in ---------------------------------------------------------
def _seq():
    return nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2), nn.Tanh())


def _mlist():
    return nn.ModuleList([nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)])


def _mdict():
    return nn.ModuleDict({"proj": nn.Linear(3, 3), "act": nn.GELU()})


def call_sequential(x, seq):
    return seq(x)


def iterate_sequential(x, seq):
    outs = []
    for m in seq:
        x = m(x)
        outs.append(x)
    return outs, len(seq)


def index_sequential(x, seq):
    return seq[0](x), seq[-1](x), seq[1](seq[0](x))


def slice_sequential(x, seq):
    head = seq[:2]
    return head(x), seq[2:](head(x)), len(head), seq[::2][1](x)


def enumerate_modulelist(x, layers):
    for i, layer in enumerate(layers):
        x = layer(x) + i
    return x, len(layers)


def modulelist_membership_and_slices(x, layers):
    first = layers[0]
    return first in layers, layers[-1] in layers[:1], [m(x) for m in layers[1:]], len(layers[::2])


def moduledict_views(x, d):
    out = {k: m(x) for k, m in d.items()}
    return out, list(d.keys()), [m(x) for m in d.values()], len(d), "act" in d, "nope" in d, \
        d["act"](x), [k for k in d]


@pytest.mark.parametrize("fn, make", [
    (call_sequential, _seq), (iterate_sequential, _seq), (index_sequential, _seq), (slice_sequential, _seq),
    (enumerate_modulelist, _mlist), (modulelist_membership_and_slices, _mlist), (moduledict_views, _mdict),
], ids=lambda v: getattr(v, "__name__", None))
def test_container_passed_in(fn, make):
    torch.manual_seed(0)
    check(fn, (torch.randn(2, 3), make()), kind="graph", graphs=1)


def test_slice_of_a_passed_sequential_holds_the_same_modules():
    def f(seq):
        return seq[1:], seq[::-1]
    seq = _seq()
    info = check(f, seq, kind="constant")
    tail, backwards = info.opt(seq)
    assert type(tail) is nn.Sequential and list(tail._modules) == ["1", "2", "3"]
    assert all(a is b for a, b in zip(tail, list(seq)[1:]))
    assert list(backwards._modules) == ["3", "2", "1", "0"] and backwards[0] is seq[3]
    assert tail is not info.opt(seq)[0]  # a new Sequential per call, as in eager


def test_slice_of_a_passed_modulelist_is_renumbered():
    def f(layers):
        return layers[1:]
    layers = _mlist()
    info = check(f, layers, kind="constant")
    tail = info.opt(layers)
    assert type(tail) is nn.ModuleList and list(tail._modules) == ["0", "1"] and tail[0] is layers[1]


def test_container_changed_between_calls_recompiles():
    seq = _seq()
    opt, _ = opt_of(iterate_sequential)
    x = torch.randn(2, 3)
    _twice(iterate_sequential, opt, x, seq)
    seq.append(nn.Sigmoid())
    _twice(iterate_sequential, opt, x, seq)
    del seq[0]
    _twice(iterate_sequential, opt, x, seq)
    assert len(opt.cache_entries()) == 3


def passed_index_out_of_range(x, seq):
    return seq[7](x)


def test_passed_index_out_of_range_raises_as_eager():
    check(passed_index_out_of_range, (torch.randn(2, 3), _seq()), kind="eager", reason="exceptions")


class _MySequential(nn.Sequential):
    pass


def test_slice_of_a_sequential_subclass_is_declined():
    """Slicing makes an object of the subclass (its own constructor): not modelled."""
    def f(x, seq):
        return seq[0](x), len(seq[1:])
    seq = _MySequential(nn.ReLU(), nn.Tanh())
    check(f, (torch.randn(3), seq), kind="eager", reason="construct")


# --- torch.device ------------------------------------------------------------------------
def device_fields(x):
    cpu = torch.device("cpu")
    gpu = torch.device("cuda", 1)
    parsed = torch.device("cuda:0")
    return (x.to(cpu), cpu.type, cpu.index, gpu.type, gpu.index, parsed.index, str(gpu),
            cpu == x.device, torch.device(x.device).type, torch.device("cpu", 0).index)


def device_of_input(x):
    d = x.device
    return torch.zeros(2, device=d), d.type, d.index, d == torch.device("cpu")


@pytest.mark.parametrize("fn", [device_fields, device_of_input], ids=lambda f: f.__name__)
def test_device_is_a_folded_constant(fn):
    info = check(fn, torch.randn(2), kind="graph", graphs=1)
    ops = info.backend.ops()
    assert not any("device" in str(op) for op in ops), ops  # folded: no device node


def bad_device(x):
    return x.to(torch.device("no_such_device"))


def test_bad_device_raises_as_eager():
    check(bad_device, torch.randn(2), kind="break", reason="exceptions")


# --- torch.distributions -------------------------------------------------------------------
D = torch.distributions


def normal_log_prob(x):
    d = D.Normal(x, 1.0, validate_args=False)
    return d.log_prob(x * 2), d.entropy(), d.mean, d.stddev, d.batch_shape


def categorical_log_prob(logits):
    return D.Categorical(logits=logits, validate_args=False).log_prob(torch.tensor([0, 2]))


def returned_distribution(x):
    return D.Normal(x, x.exp(), validate_args=False)


@pytest.mark.parametrize("fn, arg", [
    (normal_log_prob, torch.randn(3)), (categorical_log_prob, torch.randn(2, 3)),
    (returned_distribution, torch.randn(3)),
], ids=lambda v: getattr(v, "__name__", None))
def test_distribution_made_inside(fn, arg):
    check(fn, arg, kind="graph", graphs=1)


def normal_sample(x):
    d = D.Normal(x, 0.5, validate_args=False)
    return d.sample(), d.rsample((2,)), d.sample().requires_grad


def test_distribution_sample_matches_eager_under_a_seed():
    """Sampling draws from the RNG in the graph, in the order eager draws."""
    opt, backend = opt_of(normal_sample)
    x = torch.randn(3, requires_grad=True)
    for _ in range(2):
        torch.manual_seed(3)
        want = normal_sample(x)
        torch.manual_seed(3)
        got = opt(x)
        for a, b in zip(got[:2], want[:2]):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
            assert a.requires_grad == b.requires_grad
        assert got[2] is want[2] is False
    assert [e.kind for e in opt.cache_entries()] == ["graph"] and backend.calls == 1


def validated_normal(x):
    return D.Normal(x, 1.0).log_prob(x)


def test_validated_distribution_breaks():
    """validate_args (on by default) checks the parameters' values: data-dependent."""
    info = check(validated_normal, torch.randn(3), kind="break")
    assert info.break_reason.category in ("construct", "data_dependent"), info.break_reason


# --- grad-mode context managers as decorators ----------------------------------------------
def no_grad_inner(x):
    @torch.no_grad()
    def double(y):
        return y * 2
    z = double(x)
    return z, z.requires_grad, (x * 2).requires_grad, torch.is_grad_enabled()


def no_grad_without_parentheses(x):
    @torch.no_grad
    def double(y):
        return y * 2, torch.is_grad_enabled()
    return double(x), double.__wrapped__(x)


def enable_grad_inside_no_grad(x):
    @torch.enable_grad()
    def grow(y):
        return y * 3
    with torch.no_grad():
        a = grow(x)
        b = x * 3
    return a, b, a.requires_grad, b.requires_grad


def set_grad_enabled_decorator(x):
    @torch.set_grad_enabled(False)
    def off(y):
        return y + 1
    mode_after_decorating = torch.is_grad_enabled()
    return off(x), mode_after_decorating, (x + 1).requires_grad


@torch.no_grad()
def _module_level_no_grad(y):
    return y.sin()


def no_grad_reached_from_the_frame(x):
    return _module_level_no_grad(x), x.sin()


class _WithNoGradMethod(nn.Module):
    @torch.no_grad()
    def stats(self, x):
        return x.mean(), x.std()

    def forward(self, x):
        return self.stats(x), x * 2


def no_grad_method(x, m):
    return m(x)


def decorated_function_returned(x):
    def double(y):
        return y * 2
    wrapped = torch.no_grad()(double)
    return wrapped, wrapped(x)


@pytest.mark.parametrize("fn, args", [
    (no_grad_inner, ()), (no_grad_without_parentheses, ()), (enable_grad_inside_no_grad, ()),
    (set_grad_enabled_decorator, ()), (no_grad_reached_from_the_frame, ()),
    (no_grad_method, (_WithNoGradMethod(),)), (decorated_function_returned, ()),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_grad_mode_decorator_is_a_region(fn, args):
    check(fn, (torch.randn(3, requires_grad=True), *args), kind="graph", graphs=1)


def test_returned_decorated_function_runs_without_grad():
    info = check(decorated_function_returned, torch.randn(3, requires_grad=True), kind="graph", graphs=1)
    wrapped, _ = info.opt(torch.randn(2, requires_grad=True))
    assert not wrapped(torch.ones(2, requires_grad=True)).requires_grad


def break_inside_decorated(x):
    @torch.no_grad()
    def noisy(y):
        print("inside")
        return y * 2
    return noisy(x), (x * 2).requires_grad


def test_break_inside_a_decorated_function():
    check(break_inside_decorated, torch.randn(3, requires_grad=True), kind="break", reason="side_effect")


def decorated_generator(x):
    @torch.no_grad()
    def gen(y):
        yield y * 2
    return list(gen(x))


def test_decorated_generator_is_declined():
    """Each step of a decorated generator runs in the mode: not modelled as a region. (The
    call cannot break: the context manager being called is on the stack.)"""
    info = check(decorated_generator, torch.randn(3, requires_grad=True), kind="eager", reason="call")
    assert "decorating" in str(info.entries[0].reason)


# --- logging ----------------------------------------------------------------------------------
_log = logging.getLogger("minidynamo.tests.breadth")
_log.propagate = False


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())


@pytest.fixture
def records():
    handler = _Records()
    _log.addHandler(handler)
    old = _log.level
    _log.setLevel(logging.WARNING)
    try:
        yield handler.seen
    finally:
        _log.removeHandler(handler)
        _log.setLevel(old)
        _log.disabled = False


def logs_below_the_level(x):
    _log.debug("x is %s", x.shape)
    _log.info("info")
    _log.log(5, "very fine")
    y = x * 2
    _log.debug("y=%r", 1)
    return y


def test_logging_below_the_level_is_a_guarded_no_op(records):
    info = check(logs_below_the_level, torch.randn(3), kind="graph", graphs=1)
    assert records == []
    guards = own_guards(info.entries[0])
    assert any("isEnabledFor(10)" in g for g in guards) and any("isEnabledFor(5)" in g for g in guards), guards
    opt, backend = opt_of(logs_below_the_level)
    x = torch.randn(3)
    opt(x)
    _log.setLevel(logging.DEBUG)  # now the records are emitted: the entry is not reused
    got = opt(x)
    torch.testing.assert_close(got, x * 2)
    assert records == ["x is torch.Size([3])", "info", "y=1"]
    assert opt.cache_entries()[-1].kind == "break"
    _log.setLevel(logging.WARNING)
    opt(x)
    assert len(records) == 3 and backend.calls >= 1


def test_disabled_logger_and_logging_disable(records):
    def f(x):
        _log.warning("careful")
        _log.error("bad %d", 3)
        return x + 1
    opt, _ = opt_of(f)
    x = torch.randn(2)
    _log.disabled = True
    opt(x)
    opt(x)
    assert records == [] and [e.kind for e in opt.cache_entries()] == ["graph"]
    _log.disabled = False
    logging.disable(logging.ERROR)
    try:
        opt(x)
        assert records == []
    finally:
        logging.disable(logging.NOTSET)
    opt(x)
    assert records == ["careful", "bad 3"]


def logs_a_warning(x):
    _log.warning("warned %s", "once")
    return x + 1


def test_logging_at_the_level_still_breaks(records):
    check(logs_a_warning, torch.randn(2), kind="break", reason="side_effect")
    assert records == ["warned once"] * 3  # eager, then the two optimized calls (fullgraph refuses first)


def missing_message(x):
    _log.debug()
    return x


def module_level_logging(x):
    logging.debug("root")
    return x + 1


class _ChattyLogger(logging.Logger):
    def debug(self, msg, *args, **kwargs):
        print("overridden", msg)


_chatty = _ChattyLogger("minidynamo.tests.chatty")


def overridden_debug(x):
    _chatty.debug("hi")
    return x + 1


@pytest.mark.parametrize("fn, reason", [
    (missing_message, "side_effect"), (module_level_logging, "side_effect"), (overridden_debug, "side_effect"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_logging_that_is_not_a_no_op_breaks(fn, reason, records):
    check(fn, torch.randn(2), kind="break", reason=reason)


# --- made modules and graph breaks -------------------------------------------------------------
class _Printing(nn.Module):
    def forward(self, x):
        print("forward of _Printing")
        return x * 2


def break_inside_a_made_sequential(x, printing):
    return nn.Sequential(nn.ReLU(), printing, nn.Tanh())(x) + 1


def made_container_live_at_a_break(x):
    s = nn.Sequential(nn.ReLU(), nn.Sigmoid())
    d = nn.ModuleDict({"a": nn.Tanh()})
    print("between")
    return s(x), d["a"](x), len(s)


@pytest.mark.parametrize("fn, args", [
    (break_inside_a_made_sequential, (_Printing(),)), (made_container_live_at_a_break, ()),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_made_modules_across_a_graph_break(fn, args):
    check(fn, (torch.randn(3), *args), kind="break", reason="side_effect")


def tf32_through_an_imported_name(x):
    return x + 1 if _matmul_settings.allow_tf32 else x - 1


def test_settings_object_imported_by_name_is_guarded():
    check(tf32_through_an_imported_name, torch.ones(2), kind="graph", graphs=1)
    opt, _ = opt_of(tf32_through_an_imported_name)
    _twice(tf32_through_an_imported_name, opt, torch.ones(2))
    with setting(_MATMUL, "allow_tf32", not _MATMUL.allow_tf32):
        _twice(tf32_through_an_imported_name, opt, torch.ones(2))
    assert len(opt.cache_entries()) == 2
    assert any("allow_tf32" in g for g in own_guards(opt.cache_entries()[0]))


def test_private_functional_helper_without_tensors_is_plain_python():
    # F._none_or_dtype(None) (MultiheadAttention's forward) returns None: not an operator call
    def f(x):
        return x * 2 if torch.nn.functional._none_or_dtype(None) is None else x

    check(f, torch.randn(3), kind="graph")


def test_privateuse1_backend_name_is_a_guarded_query():
    def f(x):
        return x + 1 if torch._C._get_privateuse1_backend_name() == "privateuseone" else x

    check(f, torch.randn(3), kind="graph")


@pytest.mark.parametrize("train", [False, True])
def test_multihead_attention_is_one_graph(train):
    # Its forward reads Tensor.is_nested (a constant of the tensor's layout, under its guard).
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.0).train(train)

    def f(x):
        return mha(x, x, x)[0]

    check(f, torch.randn(2, 5, 8), kind="graph")


def test_is_nested_and_device_kind_queries_are_constants():
    def f(x):
        return x * 2 if not x.is_nested and x.is_cpu and not x.is_mkldnn and not x.is_sparse_csr else x

    check(f, torch.randn(3), kind="graph")
