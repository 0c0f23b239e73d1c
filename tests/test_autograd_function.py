"""torch.autograd.Function.apply captured into the graph: each Function's forward (Triton
launches included) and backward become the bodies of one node of the captured graph, and
`backward()` through the optimized call gives eager's gradients. Differential: every case
runs eagerly and optimized on its own copies of the inputs (liger-style kernels write
gradients into them), compares outputs, then runs backward with non-uniform upstream
gradients and compares every input's .grad, the inputs and the upstream gradients left
behind (kernels write into those too) and any error backward raised.

MD_AUTOGRAD_EXPECT_EAGER=1 accepts an eager fallback wherever a graph is expected (the node
checks then apply only to graph entries): it checks the comparisons themselves on runs
that are eager on both sides."""
import contextlib
import copy
import io
import operator
import os
import subprocess
import sys

import pytest
import torch
import torch.fx as fx
from helpers import CountingBackend, same
from kernels import autograd_kernels as A
from kernels.autograd_kernels import DEVICE

import minidynamo

EXPECT_EAGER = os.environ.get("MD_AUTOGRAD_EXPECT_EAGER") == "1"


# --- what the captured graph looks like (adjust here if node names change) ---------------
def _name(target) -> str:
    return getattr(target, "__name__", None) or str(target)


def is_function_node(node) -> bool:
    """A node of the outer graph that applies one autograd.Function."""
    return node.op == "call_function" and "autograd_function" in _name(node.target)


def is_launch_node(node) -> bool:
    """A Triton launch, in the form shown to backends or the one replayed."""
    name = _name(node.target)
    return node.op == "call_function" and (
        name.startswith("launch_")
        or name in ("triton_kernel_wrapper_mutation", "triton_kernel_wrapper_functional"))


def function_bodies(gm, node):
    """(forward body, backward body) of a Function node: the GraphModules its get_attr
    arguments name, in order, as in torch's autograd_function_apply(fwd_body, bwd_body,
    *args). The backward is None when there is no traced one (it runs eagerly)."""
    bodies = [operator.attrgetter(a.target)(gm) for a in node.args
              if isinstance(a, fx.Node) and a.op == "get_attr"]
    bodies = [b for b in bodies if isinstance(b, fx.GraphModule)]
    return (bodies + [None, None])[:2]


def count_launches(gm) -> int:
    """Launch nodes in a body and in any graph nested in it."""
    if gm is None:
        return 0
    return sum(is_launch_node(n) for _, m in gm.named_modules() if isinstance(m, fx.GraphModule)
               for n in m.graph.nodes)


# --- the differential check -------------------------------------------------------------
def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad)  # keeps strides
    if isinstance(v, torch.nn.Module):
        return copy.deepcopy(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_clone(x) for x in v)
    return v


def _leaves(v, where):
    """(where, tensor) for every input tensor and module parameter."""
    if isinstance(v, torch.Tensor):
        return [(where, v)]
    if isinstance(v, torch.nn.Module):
        return [(f"{where}.{n}", p) for n, p in v.named_parameters()]
    if isinstance(v, (list, tuple)):
        return [x for i, a in enumerate(v) for x in _leaves(a, f"{where}[{i}]")]
    return []


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _tensors(x)]
    return []


def _identities(outs, leaves):
    """Per output tensor: the input it is, the earlier output it is, or None."""
    ids = []
    for i, t in enumerate(outs):
        ins = [w for w, x in leaves if x is t]
        earlier = [j for j in range(i) if outs[j] is t]
        ids.append(("input", ins[0]) if ins else ("output", earlier[0]) if earlier else None)
    return ids


def randn_upstream(t, generator):
    return torch.randn(t.shape, generator=generator, dtype=t.dtype, device=t.device)


def ones_upstream(t, generator):
    return torch.ones_like(t)


def _upstream(diff, seed, make):
    g = torch.Generator(device=DEVICE).manual_seed(1234 + seed)
    return [make(t, g) for t in diff]


class _Side:
    """One run: forward on fresh copies, then `passes` backward passes (retain_graph
    between them), each with its own non-uniform upstream gradients."""

    def __init__(self, f, args, grad_mode, passes, upstream):
        self.args = _clone(args)
        self.leaves = _leaves(list(self.args), "argument")
        self.stdout = io.StringIO()
        with contextlib.redirect_stdout(self.stdout), torch.set_grad_enabled(grad_mode):
            self.out = f(*self.args)
        outs = _tensors(self.out)
        self.ids = _identities(outs, self.leaves)
        self.diff = [t for t in outs if t.requires_grad]
        self.upstream, self.error = [], None
        for p in range(passes if self.diff else 0):
            grads = _upstream(self.diff, p, upstream)
            self.upstream.append(grads)
            try:
                torch.autograd.backward(self.diff, grads, retain_graph=p + 1 < passes)
            except Exception as e:  # noqa: BLE001 - the user's error is compared, not judged
                self.error = e
                break
        self.grads = [(w, t.grad) for w, t in self.leaves]


def _meta(v):
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)} {v.dtype} requires_grad={v.requires_grad}"
    if isinstance(v, (list, tuple)):
        return type(v)(_meta(x) for x in v)
    return v


def _same(got, expected, where):
    try:
        same(got, expected, where)
    except AssertionError as e:
        msg = str(e)
        raise AssertionError(f"{msg if msg.startswith(where) else f'{where}: {msg}'}\n"
                             f"  optimized: {_meta(got)}\n  eager:     {_meta(expected)}") from None


def _compare(got: _Side, expected: _Side, what):
    _same(got.out, expected.out, f"{what}: result")
    assert got.ids == expected.ids, f"{what}: outputs that are inputs/each other {got.ids} != {expected.ids}"
    assert got.stdout.getvalue() == expected.stdout.getvalue(), f"{what}: printed output differs"
    assert len(got.diff) == len(expected.diff), f"{what}: outputs requiring grad differ"
    if expected.error is not None or got.error is not None:
        assert type(got.error) is type(expected.error) and str(got.error) == str(expected.error), \
            f"{what}: backward raised {got.error!r}, eager {expected.error!r}"
    for (w, g), (_, e) in zip(got.grads, expected.grads):
        _same(g, e, f"{what}: {w}.grad")
    for (w, t), (_, e) in zip(got.leaves, expected.leaves):
        _same(t.detach(), e.detach(), f"{what}: {w} after backward")
    _same(got.upstream, expected.upstream, f"{what}: upstream gradients after backward")


def _accepts(kind):
    kinds = set(kind) if isinstance(kind, tuple) else {kind}
    return kinds | {"eager"} if EXPECT_EAGER and "graph" in kinds else kinds


def _matches(count, expected):
    return expected is None or count == expected or (isinstance(expected, tuple) and count in expected)


def check_grad(fn, *args, kind="graph", functions=1, fwd_launches=None, bwd_launches=None,
               grad_mode=True, passes=1, upstream=randn_upstream, after=None, fullgraph_check=True):
    """Run `fn(*args)` eagerly and optimized (twice: the second hits the cache), forward
    and backward, and compare everything (see the module docstring).

    kind: the cache entry kind the call must end up in (a tuple: any of them).
    functions: Function nodes expected in the outer graph (an int, or a tuple of accepted
      counts, e.g. (0, 1) where inlining the forward is as right as one node).
    fwd_launches / bwd_launches: Triton launches expected in each Function node's forward /
      backward body (None: not checked).
    grad_mode: grad mode around the forward calls.
    passes: backward passes (retain_graph between them).
    upstream: makes each upstream gradient, `(output, generator) -> tensor` (non-uniform
      random values unless a case needs otherwise).
    after: the result of an earlier check_grad on the same `fn`: its optimized function is
      reused and this call must add exactly one cache entry (a recompile).
    Returns the optimized function (with `.backend`)."""
    if after is None:
        backend = CountingBackend()
        opt = minidynamo.optimize(backend=backend)(fn)
        opt.backend = backend
    else:
        opt, backend = after, after.backend
    expected = _Side(fn, args, grad_mode, passes, upstream)
    before, graphs_before = len(opt.cache_entries()), backend.calls
    for attempt in ("first call", "second call (cache hit)"):
        got = _Side(opt, args, grad_mode, passes, upstream)
        what = f"{fn.__name__}, {attempt}"
        _compare(got, expected, what)
        entries = opt.cache_entries()
        assert len(entries) == before + 1, f"{what}: {len(entries)} cache entries, expected {before + 1}"
    entry = entries[-1]
    why = entry.reason or entry.break_reason
    assert entry.kind in _accepts(kind), f"entry kind {entry.kind!r}, expected {kind!r}" + (
        f": {why}" if why else "")
    if entry.kind != "graph":
        return opt
    assert backend.calls == graphs_before + 1, f"backend called {backend.calls - graphs_before} times"
    gm = backend.graphs[-1]
    nodes = [n for n in gm.graph.nodes if is_function_node(n)]
    assert _matches(len(nodes), functions), \
        f"{len(nodes)} Function nodes, expected {functions}:\n{gm.code}"
    for node in nodes:
        fwd, bwd = function_bodies(gm, node)
        assert fwd is not None, f"no forward body for {node.format_node()}"
        assert _matches(count_launches(fwd), fwd_launches), \
            f"{count_launches(fwd)} launches in the forward body, expected {fwd_launches}:\n{fwd.code}"
        assert _matches(count_launches(bwd), bwd_launches), \
            f"{count_launches(bwd)} launches in the backward body, expected {bwd_launches}:\n" \
            f"{bwd.code if bwd is not None else 'no backward body'}"
    if fullgraph_check:
        # What traced without a fallback must also trace under fullgraph=True.
        strict = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(fn)
        with torch.set_grad_enabled(grad_mode):
            strict(*_clone(args))
    return opt


def t(*shape, grad=True):
    return torch.randn(*shape, device=DEVICE, requires_grad=grad)


# --- Functions of this module -----------------------------------------------------------
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        return g * ctx.alpha, None


scale = Scale.apply


# --- liger-style Triton Functions -------------------------------------------------------
def swiglu(a, b):
    return A.SiLUMulFunction.apply(a, b)


def swiglu_module_name(a, b):
    return A.silu_mul(a, b) * 2


def swiglu_local_name(a, b):
    return scale(A.silu_mul(a, b), 0.5)


def swiglu_transposed(a, b):
    # the gradient reaching the backward is not contiguous: ensure_contiguous copies it
    return A.silu_mul(a, b).t()


def swiglu_summed(a, b):
    # the gradient reaching the backward is a stride-0 expand of the upstream one
    return A.silu_mul(a, b).sum()


def test_swiglu():
    check_grad(swiglu, t(4, 10), t(4, 10), fwd_launches=1, bwd_launches=1)


def test_swiglu_3d_rows():
    check_grad(swiglu, t(2, 3, 10), t(2, 3, 10), fwd_launches=1, bwd_launches=1)


def test_swiglu_apply_bound_at_import():
    check_grad(swiglu_module_name, t(4, 10), t(4, 10), fwd_launches=1, bwd_launches=1)


def test_swiglu_then_function_of_this_module():
    check_grad(swiglu_local_name, t(4, 10), t(4, 10), functions=2)


def test_swiglu_non_contiguous_input():
    check_grad(swiglu, t(10, 4).t(), t(4, 10), fwd_launches=1, bwd_launches=1)


def test_swiglu_incoming_grad_not_contiguous():
    check_grad(swiglu_transposed, t(4, 10), t(4, 10), fwd_launches=1, bwd_launches=1)


def test_swiglu_incoming_grad_expanded():
    # In a fresh interpreter: a backward kernel handed the stride-0 gradient as if it
    # were contiguous reads past its memory, which can crash the process.
    code = ("from test_autograd_function import check_grad, swiglu_summed, t\n"
            "check_grad(swiglu_summed, t(4, 10), t(4, 10), fwd_launches=1, bwd_launches=1)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.abspath(__file__)),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit status {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-4000:]}"


def test_swiglu_one_input_requires_grad():
    check_grad(swiglu, t(4, 10), t(4, 10, grad=False), fwd_launches=1, bwd_launches=1)


def test_swiglu_no_input_requires_grad():
    # Inlining the forward (no node) is as right as one node: nothing needs a backward.
    check_grad(swiglu, t(4, 10, grad=False), t(4, 10, grad=False), functions=(0, 1))


def test_swiglu_under_no_grad():
    check_grad(swiglu, t(4, 10), t(4, 10), grad_mode=False, functions=(0, 1))


def test_swiglu_recompiles_on_requires_grad():
    opt = check_grad(swiglu, t(4, 10), t(4, 10, grad=False), fwd_launches=1, bwd_launches=1)
    opt = check_grad(swiglu, t(4, 10, grad=False), t(4, 10), after=opt, fwd_launches=1, bwd_launches=1)
    check_grad(swiglu, t(4, 10, grad=False), t(4, 10, grad=False), after=opt, functions=(0, 1))


def swiglu_mlp(mlp, x):
    return mlp(x)


def test_swiglu_in_module_forward():
    torch.manual_seed(0)
    check_grad(swiglu_mlp, A.LigerSwiGLUMLP(8, 12), t(2, 3, 8), fwd_launches=1, bwd_launches=1)


def rms_norm(x, w):
    return A.RMSNormFunction.apply(x, w, 1e-6)


def rms_norm_options(x, w, casting_mode, in_place):
    return A.RMSNormFunction.apply(x, w, 1e-5, casting_mode, in_place)


def test_rms_norm():
    check_grad(rms_norm, t(2, 3, 10), t(10), fwd_launches=1, bwd_launches=1)


@pytest.mark.parametrize("casting_mode", ["llama", "gemma"])
@pytest.mark.parametrize("in_place", [True, False])
def test_rms_norm_ctx_constants(casting_mode, in_place):
    check_grad(rms_norm_options, t(6, 12), t(12), casting_mode, in_place, fwd_launches=1, bwd_launches=1)


def test_rms_norm_weight_only_requires_grad():
    check_grad(rms_norm, t(6, 12, grad=False), t(12), fwd_launches=1, bwd_launches=1)


def rms_norm_module(norm, x):
    return norm(x)


def test_rms_norm_in_module_forward():
    torch.manual_seed(0)
    check_grad(rms_norm_module, A.RMSNorm(10), t(2, 3, 10), fwd_launches=1, bwd_launches=1)


def rms_norm_bad_mode(x, w):
    return A.RMSNormFunction.apply(x, w, 1e-6, "mistral")


def test_rms_norm_bad_casting_mode_raises_as_eager():
    opt = minidynamo.optimize(backend=CountingBackend())(rms_norm_bad_mode)
    for f in (rms_norm_bad_mode, opt, opt):
        with pytest.raises(AssertionError, match="Invalid casting mode: mistral"):
            f(t(4, 8), t(8))


def norm_mlp_residual(norm, mlp, x):
    # x reaches the loss through both Functions and directly
    h = norm(x)
    return mlp(h) + x


def test_inputs_used_inside_and_outside():
    torch.manual_seed(0)
    check_grad(norm_mlp_residual, A.RMSNorm(8), A.LigerSwiGLUMLP(8, 12), t(2, 3, 8), functions=2,
               fwd_launches=1, bwd_launches=1)


def loss_equal(x, w):
    return A.LinearSquareLossFunction.apply(x, w)


def loss_item(x, w):
    return A.LinearSquareLossFunction.apply(x, w, "item")


@pytest.mark.parametrize("fn", [loss_equal, loss_item], ids=["torch_equal", "item"])
def test_untraceable_backward_runs_eagerly(fn):
    # The backward branches on the gradient's value: it runs as the user's code, on the
    # saved values, and its kernel scales them in place.
    check_grad(fn, t(6, 4), t(4, 3), fwd_launches=0)


@pytest.mark.parametrize("fn", [loss_equal, loss_item], ids=["torch_equal", "item"])
def test_untraceable_backward_unit_grad(fn):
    # a gradient of exactly 1.0: the backward takes its other branch (no scaling)
    check_grad(fn, t(6, 4), t(4, 3), fwd_launches=0, upstream=ones_upstream)


# --- pure torch -------------------------------------------------------------------------
def scaled_pow(x, w):
    y, mask, power = A.ScaledPowFunction.apply(x, w, 3, 0.5)
    return y, mask, power + 1


def test_int_float_args_tuple_and_non_differentiable_outputs():
    check_grad(scaled_pow, t(4, 5), t(5), fwd_launches=0)


def scaled_pow_used_outside(x, w):
    y, mask, _ = A.ScaledPowFunction.apply(x * 2, w, 2, -1.5)
    return torch.where(mask, y, x.sin()) + w


def test_inputs_used_inside_and_outside_pure_torch():
    check_grad(scaled_pow_used_outside, t(4, 5), t(5))


@pytest.mark.parametrize("passes", [1, 2])
def test_retain_graph_two_backward_passes(passes):
    check_grad(scaled_pow, t(4, 5), t(5), passes=passes)


def needs_grad_mul(x, w):
    return A.NeedsGradMulFunction.apply(x, w, 3)


@pytest.mark.parametrize("which", ["both", "x", "w"])
def test_needs_input_grad(which):
    check_grad(needs_grad_mul, t(3, 4, grad=which != "w"), t(3, 4, grad=which != "x"))


def pass_through(x, w):
    a, b = A.PassThroughFunction.apply(x, w)
    return a, b, a is x


def test_input_returned_unchanged():
    check_grad(pass_through, t(4), t(4))


def same_tensor_twice(x):
    return A.SavedMulFunction.apply(x, x)


def test_same_tensor_passed_twice():
    # Both gradients land on x. One node, or a graph break at the apply (which then runs
    # natively), are both right here.
    opt = check_grad(same_tensor_twice, t(4), kind=("graph", "break"))
    entry = opt.cache_entries()[-1]
    if entry.kind == "break":
        assert entry.break_reason.category == "construct", entry.break_reason


def add_offset(x):
    return A.AddOffsetFunction.apply(x)


def test_tensor_read_from_module_gets_no_grad():
    check_grad(add_offset, t(5))
    assert A.OFFSET.grad is None


def mul_in_place(x):
    y = x + 1
    z = A.MulInPlaceFunction.apply(y, 3)
    return z * y, z is y


def test_mark_dirty_on_non_leaf():
    check_grad(mul_in_place, t(5))


def no_materialize_first(x):
    a, _ = A.NoMaterializeFunction.apply(x)
    return a


def no_materialize_second(x):
    _, b = A.NoMaterializeFunction.apply(x)
    return b


def no_materialize_both(x):
    return A.NoMaterializeFunction.apply(x)


@pytest.mark.parametrize("fn", [no_materialize_first, no_materialize_second, no_materialize_both],
                         ids=["first", "second", "both"])
def test_set_materialize_grads_false(fn):
    check_grad(fn, t(5))


def cube_once(x):
    return A.CubeOnceFunction.apply(x)


def test_once_differentiable():
    check_grad(cube_once, t(5))


def scale_three_times(x):
    for alpha in (2.0, -0.5, 3.0):
        x = Scale.apply(x, alpha)
    return x


def test_applied_several_times_in_one_call():
    check_grad(scale_three_times, t(5), functions=3)


def apply_local_class(x):
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return Twice.apply(x) + 1


def test_class_defined_inside_falls_back():
    # A class statement in the optimized function makes a new class per call; running
    # eagerly is the expected, correct outcome.
    check_grad(apply_local_class, t(5), kind="eager")


# --- errors raised by backward are eager's ----------------------------------------------
def bad_grad_count(x, w):
    return A.BadGradCountFunction.apply(x, w)


def saved_then_changed(x, w):
    h = x * 1
    y = A.SavedMulFunction.apply(h, w)
    h.add_(1)
    return y


@pytest.mark.parametrize("fn", [bad_grad_count, saved_then_changed], ids=["grad_count", "saved_changed"])
def test_backward_errors_as_eager(fn):
    # grad_count: "function BadGradCountFunctionBackward returned an incorrect number of
    # gradients"; saved_changed: "... modified by an inplace operation".
    check_grad(fn, t(4), t(4))


@pytest.mark.parametrize("fn", [A.CubeFunction.apply, A.CubeOnceFunction.apply], ids=["cube", "once"])
def test_double_backward(fn):
    def cube(x):
        return fn(x)

    def grad_of_grad(f, x):
        x = x.detach().clone().requires_grad_()
        try:
            (gx,) = torch.autograd.grad(f(x), x, torch.randn_like(x, requires_grad=False), create_graph=True)
            (ggx,) = torch.autograd.grad((gx * gx).sum(), x)
        except RuntimeError as e:
            return type(e), str(e)
        return gx.detach(), ggx
    x = t(5)
    opt = minidynamo.optimize(backend=CountingBackend())(cube)
    torch.manual_seed(0)
    expected = grad_of_grad(cube, x)
    for _ in range(2):
        torch.manual_seed(0)
        same(grad_of_grad(opt, x), expected)
    assert [e.kind for e in opt.cache_entries()][-1] in _accepts("graph")


class _PlainBackward(torch.autograd.Function):
    """backward written without @staticmethod (autograd reads it through the class)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_backward_without_staticmethod():
    def fn(x):
        return _PlainBackward.apply(x) + 1
    check_grad(fn, torch.randn(4, 3, requires_grad=True), kind="graph", functions=1)


def test_bodies_run_by_the_inlined_entry_call_launchers_directly():
    """The eager backend's entry runs copies of the bodies whose launch nodes call each
    kernel's launcher positionally (no kwargs dict, no side-table lookup per launch);
    the graph shown keeps the triton_kernel_wrapper_mutation form."""
    def fn(a, b):
        return A.silu_mul(a, b) * 2
    a, b = (torch.randn(4, 8, device=A.DEVICE, requires_grad=True) for _ in range(2))
    opt = minidynamo.optimize(fn)
    opt(a, b).sum().backward()
    (entry,) = opt.cache_entries()
    bound = [v for v in entry.ns.values.values() if isinstance(v, torch.fx.GraphModule)]
    assert len(bound) == 2 and all("triton_kernel_wrapper_mutation" not in m.code for m in bound)
    assert any("launch_" in m.code for m in bound)
    shown = entry.gm
    assert "triton_kernel_wrapper_mutation" in shown.fwd_body_0.code
