"""autograd.Function in its other forms, captured as one node like the ctx style
(tests/test_autograd_function.py has the differential check this file reuses):
`setup_context` Functions (forward without ctx), keyword arguments to `apply`, bound as
torch binds them, and a Function applied inside another Function's forward.

Each case runs eagerly and optimized, forward and backward with non-uniform upstream
gradients; results, every input's .grad and errors must be eager's, the call must be one
graph with the Function node in it."""
import inspect

import pytest
import torch
from helpers import CountingBackend
from test_autograd_function import check_grad, function_bodies, is_function_node, t

import minidynamo
from minidynamo.variables.autograd import apply_takes_keywords


# --- setup_context style ----------------------------------------------------------------
class SetupMul(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class SetupExp(torch.autograd.Function):
    """Saves its output (torch saves it as an output, not as an input)."""

    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


class SetupScale(torch.autograd.Function):
    """A non-tensor input read back through `inputs`, and a constant on ctx."""

    @staticmethod
    def forward(x, alpha, shift=0.5):
        return x * alpha + shift

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, alpha, _ = inputs
        ctx.alpha = alpha

    @staticmethod
    def backward(ctx, g):
        return g * ctx.alpha, None, None


class SetupSplit(torch.autograd.Function):
    """Two outputs, one marked non-differentiable from setup_context."""

    @staticmethod
    def forward(x):
        return x * 2, x > 0

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, mask = output
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)

    @staticmethod
    def backward(ctx, g, g_mask):
        (mask,) = ctx.saved_tensors
        return g * 2 * mask


class SetupNeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.x_needs, ctx.w_needs = ctx.needs_input_grad

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w if ctx.x_needs else None, g * x if ctx.w_needs else None


class SetupVmapRule(torch.autograd.Function):
    """vmap support declared (generate_vmap_rule): unused outside torch.func transforms."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class SetupVmapMethod(torch.autograd.Function):
    """A vmap staticmethod of its own: unused outside torch.func transforms."""

    @staticmethod
    def forward(x, w):
        return x * w + 1

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g * w, None

    @staticmethod
    def vmap(info, in_dims, x, w):
        raise AssertionError("vmap is only called under torch.vmap")


class SetupDirty(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.mul_(3)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_dirty(inputs[0])

    @staticmethod
    def backward(ctx, g):
        return g * 3


class SetupNoMaterialize(torch.autograd.Function):
    """Unmaterialized gradients: the backward runs as the user's code."""

    @staticmethod
    def forward(x):
        return x * 2, x * 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.scale = 2.0

    @staticmethod
    def backward(ctx, ga, gb):
        out = torch.zeros(())
        if ga is not None:
            out = out + ga * ctx.scale
        if gb is not None:
            out = out + gb * 3
        return out


class SetupBackwardPrints(torch.autograd.Function):
    """A backward that cannot be traced (it prints): it runs eagerly on the saved values
    and the attributes setup_context set."""

    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[1])
        ctx.tag = "mul"

    @staticmethod
    def backward(ctx, g):
        print("backward of", ctx.tag)
        (w,) = ctx.saved_tensors
        return g * w, None


class SetupOnce(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class SetupPlainMethods(torch.autograd.Function):
    """setup_context and backward written without @staticmethod (read through the class)."""

    @staticmethod
    def forward(x):
        return x * x

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


setup_mul = SetupMul.apply


def mul_then_exp(x, w):
    return SetupExp.apply(SetupMul.apply(x, w)) + 1


@pytest.mark.parametrize("which", ["both", "x", "w"])
def test_setup_context_saves_inputs(which):
    check_grad(lambda x, w: SetupMul.apply(x, w) * 2, t(3, 4, grad=which != "w"), t(3, 4, grad=which != "x"))


def test_setup_context_saves_output():
    check_grad(lambda x: SetupExp.apply(x) - x, t(5))


def test_setup_context_two_in_one_graph():
    check_grad(mul_then_exp, t(4), t(4), functions=2)


def test_setup_context_apply_bound_at_import():
    check_grad(lambda x, w: setup_mul(x, w).sum(1), t(2, 3), t(2, 3))


def test_setup_context_non_tensor_inputs_and_defaults():
    check_grad(lambda x: SetupScale.apply(x, -1.5), t(5))


def test_setup_context_non_differentiable_output():
    def fn(x):
        y, mask = SetupSplit.apply(x)
        return y, mask, mask.requires_grad
    check_grad(fn, t(6))


@pytest.mark.parametrize("which", ["both", "x", "w"])
def test_setup_context_needs_input_grad(which):
    check_grad(lambda x, w: SetupNeedsGrad.apply(x, w), t(3, grad=which != "w"), t(3, grad=which != "x"))


@pytest.mark.parametrize("cls", [SetupVmapRule, SetupVmapMethod], ids=["generate_vmap_rule", "vmap"])
def test_setup_context_with_vmap_support_declared(cls):
    if cls is SetupVmapRule:
        check_grad(lambda x: cls.apply(x) * 3, t(4))
    else:
        check_grad(lambda x, w: cls.apply(x, w) * 3, t(4), t(4))


def test_setup_context_mark_dirty():
    def fn(x):
        y = x + 1
        z = SetupDirty.apply(y)
        return z * y, z is y
    check_grad(fn, t(5))


def test_setup_context_unmaterialized_grads_backward_runs_eagerly():
    check_grad(lambda x: SetupNoMaterialize.apply(x)[0], t(5))
    check_grad(lambda x: SetupNoMaterialize.apply(x), t(5))


def test_setup_context_untraceable_backward_runs_eagerly():
    opt = check_grad(lambda x, w: SetupBackwardPrints.apply(x, w), t(4), t(4))
    gm = opt.backend.graphs[-1]
    (node,) = [n for n in gm.graph.nodes if is_function_node(n)]
    assert "side_effect" in node.meta["eager_backward"], node.meta


def test_setup_context_once_differentiable():
    check_grad(lambda x: SetupOnce.apply(x), t(5))


def test_setup_context_and_backward_without_staticmethod():
    check_grad(lambda x: SetupPlainMethods.apply(x) + 1, t(4))


def test_setup_context_under_no_grad():
    check_grad(lambda x, w: SetupMul.apply(x, w), t(3), t(3), grad_mode=False, functions=(0, 1))


def test_setup_context_is_traced_into_the_forward_body():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(lambda x: SetupExp.apply(x))
    opt(t(3))
    gm = backend.graphs[-1]
    (node,) = [n for n in gm.graph.nodes if is_function_node(n)]
    fwd, bwd = function_bodies(gm, node)
    assert "exp" in fwd.code and "mul" in bwd.code, (fwd.code, bwd.code)


# --- keyword arguments to apply ---------------------------------------------------------
class KwScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w=None, scale=1.0, shift=0.0):
        ctx.save_for_backward(w)
        ctx.scale = scale
        return x * w * scale + shift

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        # as many gradients as apply's inputs after torch bound them (needs_input_grad)
        return (g * w * ctx.scale, None, None, None)[:len(ctx.needs_input_grad)]


class KwNeeds(torch.autograd.Function):
    """Returns one gradient per input torch counted: keyword arguments are inputs."""

    @staticmethod
    def forward(ctx, x, scale=1.0):
        ctx.n_inputs = len(ctx.needs_input_grad)
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * 2


class KwSetup(torch.autograd.Function):
    @staticmethod
    def forward(x, w, scale=1.0):
        return x * w * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, scale = inputs
        ctx.save_for_backward(x, w)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale, None


class KwOnlySetup(torch.autograd.Function):
    """A keyword-only parameter: torch binds it as a keyword, which apply then rejects."""

    @staticmethod
    def forward(x, *, scale=1.0):
        return x * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g


class KwOnlyCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, *rest, scale=1.0):
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g


class KwVar(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, **options):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


KW_CASES = {
    "scale_by_keyword": lambda x, w: KwScale.apply(x, w, scale=2.0),
    "tensor_by_keyword": lambda x, w: KwScale.apply(x, w=w, scale=-1.5),
    "all_by_keyword": lambda x, w: KwScale.apply(shift=0.5, scale=3.0, w=w, x=x),
    "later_default_left_to_forward": lambda x, w: KwScale.apply(x, w=w),
    "star_star_dict": lambda x, w: KwScale.apply(x, **{"w": w, "scale": 0.5}),
    "setup_context_by_keyword": lambda x, w: KwSetup.apply(x, w=w, scale=2.0),
    "setup_context_default": lambda x, w: KwSetup.apply(x, w=w),
    "setup_context_star_star": lambda x, w: KwSetup.apply(**{"x": x, "w": w}),
}


def _raises_as_eager_without_apply_keywords(fn, *args) -> bool:
    """torch before 2.13: C `Function.apply` takes no keyword arguments, and a call that
    leaves some for it raises TypeError. Then the optimized call raises it too, and no graph
    is made; True when that was checked (the torch here rejects this call)."""
    try:
        fn(*[a.detach().clone() for a in args])
    except TypeError as e:
        if str(e) != "apply() takes no keyword arguments":
            raise
    else:
        return False
    assert not apply_takes_keywords()
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    for _ in range(2):
        with pytest.raises(TypeError, match="apply\\(\\) takes no keyword arguments"):
            opt(*[a.detach().clone() for a in args])
    assert all(e.kind != "graph" for e in opt.cache_entries()), opt.cache_entries()
    return True


@pytest.mark.parametrize("name", list(KW_CASES))
def test_keyword_arguments(name):
    fn = KW_CASES[name]
    fn.__name__ = name
    if _raises_as_eager_without_apply_keywords(fn, t(3, 4), t(3, 4)):
        return
    check_grad(fn, t(3, 4), t(3, 4))


def test_keyword_arguments_count_as_inputs():
    # The keyword makes two inputs: the backward's one gradient is too few, in eager and here.
    if not _raises_as_eager_without_apply_keywords(lambda x: KwNeeds.apply(x, scale=2.0), t(4)):
        check_grad(lambda x: KwNeeds.apply(x, scale=2.0), t(4))
    check_grad(lambda x: KwNeeds.apply(x), t(4))


def test_keyword_argument_needs_input_grad():
    fn = lambda x, w: KwScale.apply(x, w=w) + KwSetup.apply(x, w=w)  # noqa: E731
    if _raises_as_eager_without_apply_keywords(fn, t(3), t(3, grad=False)):
        return
    check_grad(fn, t(3), t(3, grad=False), functions=2)


REJECTED = {
    # ctx style: torch maps keywords to forward's positional parameters by name
    "unknown_keyword": (lambda x: KwScale.apply(x, bogus=1), "forward() got an unexpected keyword argument 'bogus'"),
    "ctx_by_keyword": (lambda x: KwScale.apply(x, ctx=1), "forward() got an unexpected keyword argument 'ctx'"),
    "given_twice": (lambda x: KwScale.apply(x, x, w=x), "forward() got multiple values for argument 'w'"),
    "position_skipped": (lambda x: KwScale.apply(x, scale=2.0), "forward() missing required argument: 'w' (position 1)"),
    "keyword_only_parameter": (lambda x: KwOnlyCtx.apply(x, scale=2.0), "forward() got an unexpected keyword argument 'scale'"),
    "var_keyword_parameter": (lambda x: KwVar.apply(x, mode=1), "forward() got an unexpected keyword argument 'mode'"),
    # setup_context style: bound to forward's signature first
    "setup_unknown_keyword": (lambda x: KwSetup.apply(x, x, bogus=1), "got an unexpected keyword argument 'bogus'"),
    "setup_missing": (lambda x: KwSetup.apply(x), "missing a required argument: 'w'"),
    "setup_too_many": (lambda x: KwSetup.apply(x, x, 1.0, 2.0), "too many positional arguments"),
    "setup_keyword_only": (lambda x: KwOnlySetup.apply(x), "forward() got an unexpected keyword argument 'scale'"),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_keyword_arguments_torch_rejects_raise_as_eager(name):
    fn, message = REJECTED[name]
    if not apply_takes_keywords():  # torch before 2.13: any keyword is rejected first
        if name == "setup_keyword_only":  # ... and forward's keyword-only parameter keeps its default
            check_grad(fn, t(3))
            return
        if "=" in inspect.getsource(fn).split("apply(", 1)[1] and not name.startswith("setup_"):
            message = "apply() takes no keyword arguments"
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    for f in (fn, opt, opt):
        with pytest.raises(TypeError) as e:
            f(t(3))
        assert str(e.value) == message, e.value
    assert all(e.kind != "graph" for e in opt.cache_entries()), opt.cache_entries()
    with pytest.raises(minidynamo.Unsupported) as e:
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(fn)(t(3))
    assert e.value.category == "exceptions", e.value


# --- a Function applied inside another Function's forward -------------------------------
class InnerSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Under the outer forward's no_grad, needs_input_grad still says requires_grad.
        return x * x if ctx.needs_input_grad[0] else x * x + 100

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("an inner Function's backward never runs: its forward ran under no_grad")


class OuterSquarePlus(torch.autograd.Function):
    """forward applies InnerSquare; its own backward gives the gradient."""

    @staticmethod
    def forward(ctx, x, w):
        sq = InnerSquare.apply(x)
        ctx.save_for_backward(x, w)
        return sq * w if not sq.requires_grad else sq * 0

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * 2 * x * w, g * x * x


class InnerSetup(torch.autograd.Function):
    @staticmethod
    def forward(x, alpha):
        return x.sin() * alpha

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[1]

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not reached")


class InnerDirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.add_(1)

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not reached")


OFFSET = torch.linspace(-1, 1, 4)


class InnerReadsGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + OFFSET

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not reached")


class OuterMany(torch.autograd.Function):
    """Several inner Functions, an in-place one on a tensor the forward made, a global."""

    @staticmethod
    def forward(ctx, x):
        h = InnerSetup.apply(x, 2.0)
        h = InnerDirty.apply(h * 1)
        h = InnerReadsGlobal.apply(h)
        ctx.save_for_backward(x)
        return h, h.requires_grad

    @staticmethod
    def backward(ctx, g, _):
        (x,) = ctx.saved_tensors
        return g * 2 * x.cos()


class Middle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return OuterSquarePlus.apply(x, x * 0 + 3)

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("not reached")


class OuterTwoLevels(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Middle.apply(x) + 1

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 6 * x


def _inner_nodes(gm):
    """(outer node, [Function nodes inside its forward body]) for each Function node."""
    found = []
    for node in gm.graph.nodes:
        if is_function_node(node):
            fwd, _ = function_bodies(gm, node)
            found.append((node, [n for n in fwd.graph.nodes if is_function_node(n)], fwd))
    return found


@pytest.mark.parametrize("x_grad", [True, False])
def test_function_inside_a_forward(x_grad):
    opt = check_grad(lambda x, w: OuterSquarePlus.apply(x, w) + 1, t(3, 4, grad=x_grad), t(3, 4))
    ((_, inner, fwd),) = _inner_nodes(opt.backend.graphs[-1])
    assert len(inner) == 1, fwd.code


def test_several_functions_inside_a_forward():
    opt = check_grad(lambda x: OuterMany.apply(x)[0] * 2, t(4))
    ((_, inner, fwd),) = _inner_nodes(opt.backend.graphs[-1])
    assert len(inner) == 3, fwd.code


def test_functions_nested_two_levels():
    opt = check_grad(lambda x: OuterTwoLevels.apply(x), t(5))
    ((_, inner, fwd),) = _inner_nodes(opt.backend.graphs[-1])
    (middle,) = inner
    middle_fwd, _ = function_bodies(fwd, middle)
    assert sum(is_function_node(n) for n in middle_fwd.graph.nodes) == 1, middle_fwd.code


class OuterInnerInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return SetupMul.apply(g, 2 * x)


def test_function_inside_a_backward_runs_that_backward_as_a_frame():
    # Not traced into the backward body: the backward runs as a frame of its own, where
    # the inner apply is captured at the top level.
    opt = check_grad(lambda x: OuterInnerInBackward.apply(x) + 1, t(4))
    gm = opt.backend.graphs[-1]
    (node,) = [n for n in gm.graph.nodes if is_function_node(n)]
    assert "inside another Function's backward" in node.meta["eager_backward"], node.meta


class NeedsGradInBackwardFrame(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.scale = float(x.abs().max())  # data-dependent: the apply runs natively, its ctx is real
        return x * w * ctx.scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grads = (g * w * ctx.scale, g * x * ctx.scale if ctx.needs_input_grad[1] else None, None)
        return grads[:len(ctx.needs_input_grad)]


@pytest.mark.parametrize("w_grad", [True, False])
def test_needs_input_grad_read_in_a_backward_frame(w_grad):
    # liger's fused linear cross entropy: `.item()` in the forward, and in the backward
    # `gradients[:len(ctx.needs_input_grad)]` read off the real ctx (a C attribute)
    import minidynamo.api as api
    minidynamo.reset()
    w = t(4).requires_grad_(w_grad)
    check_grad(lambda x: NeedsGradInBackwardFrame.apply(x, w).sum(), t(4), kind="break", functions=0,
               fullgraph_check=False)
    entries = [(c.name, e) for c in list(api._all_caches) for e in c.entries]
    backward = [(name, e) for name, e in entries if "backward" in name]
    assert backward and not any("needs_input_grad" in str(e.break_reason or e.reason) for _, e in backward), \
        [(name, e.kind, str(e.break_reason or e.reason)) for name, e in backward]
