"""autograd.Function soundness, differentially: the optimized call against eager on equal
inputs — results, gradients, what the forward left in the objects it was given, printed
output — for three classes of bugs:

1. a forward that leaves a value it made where the caller can reach it (appended to a
   list, stored in a dict or an object it was given, a global list): the node returns it
   too, as eager's no-grad forward made it; what cannot be exact (a view of an input, an
   attribute of an outside object, print) breaks at the apply and runs as eager does;
   a backward's changes to outside containers happen at backward time, not before;
2. sizes stored on ctx or saved for backward while shapes are symbolic (dynamic=True,
   automatic dynamic, mark_dynamic): each call's own sizes, no recompilation per size;
3. autocast: torch.amp.custom_fwd/custom_bwd, autocast entered inside forward or
   backward, and tensors first read inside an autocast region (their guards are built
   for the state the entry checks them in).
"""
from __future__ import annotations

import contextlib
import copy
import io

import pytest
import torch

import minidynamo
from minidynamo.variables.autograd import apply_takes_keywords
from helpers import CountingBackend


# --- the differential harness -----------------------------------------------------------
class Holder:
    """A plain object a forward may store into."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _run(fn, args, backward: bool):
    """(result, args after, leaf gradients, printed, exception) of one call and backward."""
    buf = io.StringIO()
    result = exc = None
    grads = []
    with contextlib.redirect_stdout(buf):
        try:
            result = fn(*args)
            if backward:
                loss = _loss(result)
                if loss is not None:
                    loss.backward()
                grads = [t.grad for t in _leaves(args)]
        except Exception as e:  # noqa: BLE001 - compared with eager's
            exc = e
    return result, args, grads, buf.getvalue(), exc


def _tensors(value, out, seen):
    if id(value) in seen:
        return out
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out, seen)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out, seen)
    elif isinstance(value, Holder):
        _tensors(vars(value), out, seen)
    elif isinstance(value, torch.nn.Module):
        _tensors([*value.parameters(), *(v for k, v in vars(value).items() if not k.startswith("_"))], out, seen)
    return out


def _loss(result):
    parts = [t.float().sum() * (k + 1) for k, t in enumerate(_tensors(result, [], set()))
             if t.requires_grad]
    return sum(parts) if parts else None


def _leaves(args):
    return [t for t in _tensors(args, [], set()) if t.is_leaf and t.requires_grad]


def same(e, o, where="value"):
    """Equal as eager's: tensors in values, dtype, shape, requires_grad and whether they
    have a grad_fn; containers item by item; objects by their attributes."""
    assert type(e) is type(o), f"{where}: {type(e).__name__} != {type(o).__name__}"
    if isinstance(e, torch.Tensor):
        assert (e.dtype, e.shape, e.requires_grad, e.grad_fn is None) == \
            (o.dtype, o.shape, o.requires_grad, o.grad_fn is None), \
            f"{where}: {(e.dtype, tuple(e.shape), e.requires_grad, e.grad_fn)} != " \
            f"{(o.dtype, tuple(o.shape), o.requires_grad, o.grad_fn)}"
        torch.testing.assert_close(o.detach(), e.detach(), equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif isinstance(e, (list, tuple)):
        assert len(e) == len(o), f"{where}: {e!r} != {o!r}"
        for i, (a, b) in enumerate(zip(e, o)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(e, dict):
        assert list(e) == list(o), f"{where}: keys {list(e)} != {list(o)}"
        for k in e:
            same(e[k], o[k], f"{where}[{k!r}]")
    elif isinstance(e, Holder):
        same(vars(e), vars(o), f"{where}.__dict__")
    elif isinstance(e, torch.nn.Module):  # its state and its own plain attributes
        same(dict(e.state_dict()), dict(o.state_dict()), f"{where}.state_dict()")
        same({k: v for k, v in vars(e).items() if not k.startswith("_")},
             {k: v for k, v in vars(o).items() if not k.startswith("_")}, f"{where}.__dict__")
    else:
        assert e == o, f"{where}: {e!r} != {o!r}"


def differential(fn, *arg_sets, backend="eager", dynamic=None, entries=None, kind="graph", mark=None,
                 backward=True, identity=None):
    """Each argument set (a callable making fresh arguments) run eagerly and optimized, the
    optimized function kept across the sets: results, gradients of the leaf tensors, the
    arguments after the call and the printed output must be eager's. `entries`: how many
    cache entries the sets must end with; `kind`: each entry's kind; `mark(args)`: marks
    the optimized call's arguments (mark_dynamic); `identity(result, args)`: a fact about
    object identity that must be eager's (a list item is the result...)."""
    backend_obj = CountingBackend() if backend == "counting" else backend
    opt = minidynamo.optimize(fn, backend=backend_obj, dynamic=dynamic)
    for n, make in enumerate(arg_sets):
        torch.manual_seed(n)
        template = make()
        for attempt in ("first call", "second call"):
            where = f"argument set {n}, {attempt}"
            e = _run(fn, copy.deepcopy(template), backward)
            opt_args = copy.deepcopy(template)
            if mark is not None:
                mark(opt_args)
            o = _run(opt, opt_args, backward)
            assert (e[4] is None) == (o[4] is None), f"{where}: eager raised {e[4]!r}, optimized {o[4]!r}"
            if e[4] is not None:
                assert type(e[4]) is type(o[4]) and str(e[4]) == str(o[4]), f"{where}: {e[4]!r} != {o[4]!r}"
            else:
                same(e[0], o[0], f"{where}: result")
                same(e[2], o[2], f"{where}: gradients")
            same(e[1], o[1], f"{where}: arguments after the call")
            assert e[3] == o[3], f"{where}: printed {o[3]!r}, eager {e[3]!r}"
            if identity is not None and e[4] is None:
                assert identity(e[0], e[1]) == identity(o[0], o[1]), f"{where}: identity differs"
    got = opt.cache_entries()
    if kind is not None:
        assert all(x.kind == kind for x in got), [(x.kind, x.reason or x.break_reason) for x in got]
    if entries is not None:
        assert len(got) == entries, [(x.kind, x.reason) for x in got]
    return opt


# --- 1. values the forward leaves outside ---------------------------------------------------
class AppendSin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        s = x.sin()
        lst.append(s)
        ctx.save_for_backward(x)
        return s * 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x.cos(), None


def _x(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True), [])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_appended_intermediate_is_eagers(backend):
    differential(lambda x, lst: AppendSin.apply(x, lst) + 1, _x(3), _x(3), backend=backend, entries=1)


def test_appended_intermediate_used_after_the_apply():
    # The appended tensor (no grad in eager) feeds later ops of the same graph.
    def f(x):
        lst = []
        y = AppendSin.apply(x, lst)
        return y * lst[0], lst
    differential(f, lambda: (torch.randn(4, requires_grad=True),), entries=1)


def test_appended_intermediate_changed_in_place_after():
    def f(x, lst):
        y = AppendSin.apply(x, lst)
        lst[-1].mul_(3)
        return y + lst[-1]
    differential(f, _x(2, 3), entries=1)


class StoreMany(torch.autograd.Function):
    """A dict entry, a tuple appended to a nested list, an int, and a size."""

    @staticmethod
    def forward(ctx, x, d, nested):
        c = x.cos()
        d["cos"] = c
        d["n"] = 7
        nested[0].append((x.exp(), c + 1))
        nested.append(x.shape[0])
        ctx.save_for_backward(c)
        return x * c

    @staticmethod
    def backward(ctx, g):
        c, = ctx.saved_tensors
        return g * c, None, None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dict_tuple_nested_list(backend):
    def f(x, d, nested):
        return StoreMany.apply(x, d, nested).sum(0)
    differential(f, lambda: (torch.randn(3, 2, requires_grad=True), {"a": 1}, [[]]), backend=backend,
                 entries=1)


GLOBAL_LOG: list = []


class LogsGlobally(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        GLOBAL_LOG.append(x.exp())
        GLOBAL_LOG.append("forward")
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3


def test_global_list_appended_in_forward():
    def f(x):
        return LogsGlobally.apply(x).relu()

    GLOBAL_LOG.clear()
    x = torch.randn(5, requires_grad=True)
    f(x).sum().backward()
    expected, grad = list(GLOBAL_LOG), x.grad
    GLOBAL_LOG.clear()
    x2 = x.detach().clone().requires_grad_()
    opt = minidynamo.optimize(f)
    opt(x2).sum().backward()
    same(expected, GLOBAL_LOG)
    same(grad, x2.grad)
    assert [e.kind for e in opt.cache_entries()] == ["graph"]
    GLOBAL_LOG.clear()


class ReturnsWhatItAppends(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        s = x.sin()
        lst.append(s)
        return s

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def test_appended_output_is_the_output():
    # In eager the list holds the output itself (it gets its grad_fn when apply returns).
    differential(lambda x, lst: ReturnsWhatItAppends.apply(x, lst), _x(3), entries=1,
                 identity=lambda r, args: args[1][0] is r)


def test_appended_output_identity_inside_the_frame():
    def f(x):
        lst = []
        y = ReturnsWhatItAppends.apply(x, lst)
        return y * 2 if lst[0] is y else y
    differential(f, lambda: (torch.randn(3, requires_grad=True),), entries=1)


class OuterAppends(torch.autograd.Function):
    """An inner Function's forward appends; the outer forward passes the list through."""

    @staticmethod
    def forward(ctx, x, lst):
        return AppendSin.apply(x, lst) * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3, None


def test_nested_function_appends():
    differential(lambda x, lst: OuterAppends.apply(x, lst), _x(4), entries=1)


class SetUpAppends(torch.autograd.Function):
    """setup_context style, with a default: the forward (no ctx) appends."""

    @staticmethod
    def forward(x, lst, scale=2.0):
        s = x.sin()
        lst.append(s)
        return s * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, lst, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.scale * x.cos(), None, None


class WithCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = []
        self.w = torch.nn.Parameter(torch.randn(3))


class AppendsToModuleCache(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, m):
        t = x * m.w
        m.cache.append(t)
        return t + 1

    @staticmethod
    def backward(ctx, g):
        return g, None


def _applied_in_a_loop(x, lst):
    for _ in range(3):
        x = SetUpAppends.apply(x, lst)
    return x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", ["setup_context", "keywords", "loop", "module attribute"])
def test_more_forms_leaving_values(case, backend):
    fn, make = {
        "setup_context": (lambda x, lst: SetUpAppends.apply(x, lst) + 1, _x(3)),
        "keywords": (lambda x, lst: SetUpAppends.apply(x, lst=lst, scale=3.0) + 1, _x(3)),
        "loop": (_applied_in_a_loop, _x(3)),
        "module attribute": (lambda x, m: AppendsToModuleCache.apply(x, m),
                             lambda: (torch.randn(3, requires_grad=True), WithCache())),
    }[case]
    if case == "keywords" and not apply_takes_keywords():
        # torch before 2.13 rejects keywords to apply: the call raises as eager's does
        opt = minidynamo.optimize(fn, backend=backend)
        for f in (fn, opt):
            with pytest.raises(TypeError, match="takes no keyword arguments"):
                f(*make())
        return
    differential(fn, make, backend=backend, entries=1)


class AppendsSize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        s = x.sum(0)
        lst.append(s.shape[0] * 2)
        lst.append(s)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def test_appended_symbolic_size():
    differential(lambda x, lst: AppendsSize.apply(x, lst), lambda: (torch.randn(2, 3, requires_grad=True), []),
                 lambda: (torch.randn(2, 5, requires_grad=True), []), dynamic=True, entries=1)


class AppendsView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        lst.append(x[0])  # a view of the input: sharing memory with it
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


WEIGHT = torch.randn(4)


class AppendsViewOfGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        lst.append(WEIGHT[1:])  # a view of a tensor the forward reads: sharing its memory
        return x * WEIGHT

    @staticmethod
    def backward(ctx, g):
        return g * WEIGHT, None


class SetsAttr(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, obj):
        obj.last = x.cos()
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class Prints(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward of", tuple(x.shape))
        return x * 2

    @staticmethod
    def backward(ctx, g):
        print("backward")
        return g * 2


@pytest.mark.parametrize("case", ["view", "global view", "print"])
def test_what_breaks_runs_as_eager(case):
    fn, make = {
        "view": (lambda x, lst: AppendsView.apply(x, lst) + 1, _x(2, 3)),
        "global view": (lambda x, lst: AppendsViewOfGlobal.apply(x, lst) + 1, _x(4)),
        "print": (lambda x: Prints.apply(x) + 1, lambda: (torch.randn(3, requires_grad=True),)),
    }[case]
    differential(fn, make, kind="break")


def test_a_forward_storing_on_an_object_passed_in_is_captured():
    # obj.last = x.cos() in the forward: the node returns it, the entry stores it after
    # the graph (as eager's no-grad forward made it)
    differential(lambda x, o: SetsAttr.apply(x, o) + 1,
                 lambda: (torch.randn(3, requires_grad=True), Holder(a=1)), kind="graph")


def test_attr_of_an_object_made_in_the_frame():
    def f(x):
        o = Holder()
        y = SetsAttr.apply(x, o)
        return y + o.last, o
    differential(f, lambda: (torch.randn(3, requires_grad=True),), entries=1)


BACKWARD_LOG: list = []


class LogsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        BACKWARD_LOG.append(g.sum())
        return g * 2


def test_backward_changes_outside_list_at_backward_time():
    BACKWARD_LOG.clear()
    opt = minidynamo.optimize(lambda x: LogsInBackward.apply(x) + 1)
    x = torch.randn(3, requires_grad=True)
    y = opt(x)
    assert BACKWARD_LOG == []  # nothing before the backward runs
    y.sum().backward()
    assert len(BACKWARD_LOG) == 1 and BACKWARD_LOG[0].item() == 3.0
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    BACKWARD_LOG.clear()


# --- 2. sizes on ctx and saved for backward with symbolic shapes ---------------------------------
class ScaleBySize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x0 = x.size(0)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.x0


class FlatThenBack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        ctx.n = x.numel()
        return x.reshape(-1) * 2

    @staticmethod
    def backward(ctx, g):
        return (g / ctx.n).view(ctx.shape) * 2


class SizesSetUp(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x.sum(-1) * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.rows, ctx.cols = x.shape
        ctx.k = k

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(-1).expand(ctx.rows, ctx.cols) * ctx.k, None


class SizeArgument(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.n = n
        return x[:n] * 2

    @staticmethod
    def backward(ctx, g):
        return torch.cat([g * ctx.n, g.new_zeros(g.shape[0] * 0 + 1, *g.shape[1:])]), None


def _sized(*shapes):
    return [lambda s=s: (torch.randn(*s, requires_grad=True),) for s in shapes]


@pytest.mark.parametrize("fn_cls", [ScaleBySize, FlatThenBack])
def test_sizes_on_ctx_dynamic_true(fn_cls):
    differential(lambda x: fn_cls.apply(x), *_sized((3, 4), (5, 4), (7, 4)), dynamic=True, entries=1)


def test_sizes_on_ctx_setup_context():
    differential(lambda x: SizesSetUp.apply(x, 3), *_sized((3, 4), (5, 6), (2, 2)), dynamic=True, entries=1)


def test_size_argument_saved():
    def f(x):
        return SizeArgument.apply(x, x.shape[0] - 1)
    differential(f, *_sized((3, 2), (6, 2)), dynamic=True, entries=1)


def test_sizes_on_ctx_automatic_dynamic():
    # The second size makes the size symbolic (one more entry), the third hits it.
    differential(lambda x: FlatThenBack.apply(x) + 1, *_sized((3, 4), (5, 4), (7, 4)), entries=2)


def test_sizes_on_ctx_mark_dynamic():
    differential(lambda x: ScaleBySize.apply(x).sin(), *_sized((3,), (5,), (9,)), entries=1,
                 mark=lambda args: minidynamo.mark_dynamic(args[0], 0))


class ReturnsSizes(torch.autograd.Function):
    """Non-tensor outputs that are sizes: symbolic ones come back out of the node's graph."""

    @staticmethod
    def forward(ctx, x):
        s = x.sum(0)
        ctx.n = x.shape[0]
        return x * 2, x.shape[0], s.shape[0] + 1

    @staticmethod
    def backward(ctx, g, n, m):
        assert n is None and m is None
        return g * ctx.n


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_returning_sizes(backend):
    def f(x):
        y, n, m = ReturnsSizes.apply(x)
        return y.sum(0) * n, y.new_ones(m) * n, (n, m)
    differential(f, *_sized((3, 4), (5, 6), (7, 2)), backend=backend, dynamic=True, entries=1)


class PrintsInBackward(torch.autograd.Function):
    """Its backward is not traced (it prints): the user's runs, with each call's sizes."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        ctx.info = (x.size(0), "rows")
        return x.sum(0)

    @staticmethod
    def backward(ctx, g):
        print("rows", ctx.info[0], ctx.info[1])
        return g.expand(ctx.shape) * ctx.info[0]


def test_sizes_for_an_eager_backward():
    differential(lambda x: PrintsInBackward.apply(x), *_sized((3, 2), (5, 2), (4, 2)), dynamic=True, entries=1)


@pytest.mark.parametrize("fn_cls", [ScaleBySize, FlatThenBack])
def test_sizes_on_ctx_aot_eager(fn_cls):
    # torch's backends may specialise: only the values are required here, not one entry.
    differential(lambda x: fn_cls.apply(x), *_sized((3, 4), (5, 4)), backend="aot_eager", dynamic=True,
                 kind=None)


# --- 3. autocast ----------------------------------------------------------------------------------
class AmpMatmul(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.t(), a.t() @ g


class AmpMatmulFp32(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (a @ b).relu()

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = g * (a @ b > 0)
        return g @ b.t(), a.t() @ g


class AutocastInside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = a @ b
        return y.float() + 1

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ga = g @ b.t()
        return ga.float(), a.t() @ g


class PlainMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.t(), a.t() @ g


class DtypeInBackward(torch.autograd.Function):
    """Its backward reads a dtype autocast decides: the engine runs it with autocast off."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g.float() @ b.t()
        scale = 2.0 if ga.dtype == torch.bfloat16 else 1.0
        return (ga * scale).float(), (a.t() @ g.float()).float()


class AmpPrintsInBackward(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        print("backward", g.dtype)
        return g @ b.t(), a.t() @ g


class LoudInsideAutocast(torch.autograd.Function):
    """Its backward declines inside an autocast region (print): it runs eagerly, and the
    rest of the frame is traced in the frame's own state, not the region's."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with torch.autocast("cpu", dtype=torch.bfloat16):
            print("backward")
            ga = g @ b.t()
        return ga.float(), a.t() @ g


def _ab(dtype=torch.float32):
    return lambda: (torch.randn(3, 4, dtype=dtype, requires_grad=True),
                    torch.randn(4, 5, dtype=dtype, requires_grad=True))


def _under_autocast(fn_cls):
    def f(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn_cls.apply(a, b)
    return f


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn_cls", [AmpMatmul, AmpMatmulFp32, PlainMatmul, AutocastInside, DtypeInBackward])
def test_function_under_autocast(fn_cls, backend):
    differential(_under_autocast(fn_cls), _ab(), _ab(), backend=backend, entries=1)


@pytest.mark.parametrize("fn_cls", [AmpMatmul, AmpMatmulFp32, AutocastInside])
def test_function_outside_autocast(fn_cls):
    differential(lambda a, b: fn_cls.apply(a, b) * 2, _ab(), entries=1)


def test_cast_inputs_on_bfloat16_inputs():
    differential(_under_autocast(AmpMatmulFp32), _ab(torch.bfloat16), entries=1)


def test_amp_function_whose_backward_runs_eagerly():
    differential(_under_autocast(AmpPrintsInBackward), _ab(), _ab(), entries=1)


def test_tensor_first_read_inside_autocast():
    # The mechanism behind the custom_bwd crash: a tensor read inside the region (here a
    # list item) had the region's dispatch keys in its guard, which the entry then failed.
    def f(xs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return xs[0] @ xs[1]
    differential(f, lambda: ([torch.randn(3, 4), torch.randn(4, 2)],), backward=False, entries=1)


class LogsThroughCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, log):
        ctx.log = log
        return x * 2

    @staticmethod
    def backward(ctx, g):
        ctx.log.append(g.sum())
        return g * 2, None


@pytest.mark.parametrize("made_in_frame", [False, True])
def test_backward_appends_to_a_list_on_ctx(made_in_frame):
    # The list is appended to when the backward runs, not when the forward's graph does.
    def f(x, log):
        if made_in_frame:
            log = []
        y = LogsThroughCtx.apply(x, log)
        return y, log

    opt = minidynamo.optimize(f)
    for _ in range(2):
        x, log = torch.randn(3, requires_grad=True), []
        y, got = opt(x, log)
        assert got == [] and (got is log) != made_in_frame
        y.sum().backward()
        assert len(got) == 1 and got[0].item() == 3.0
        torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


class ReturnsTwice(torch.autograd.Function):
    """The same tensor returned twice (and appended): autograd gives its gradient to the
    last slot, the first gets zeros; each slot is the backward's own argument."""

    @staticmethod
    def forward(ctx, x, lst, loud):
        s = x.sin()
        lst.append(s)
        ctx.loud = loud
        return s, s

    @staticmethod
    def backward(ctx, g1, g2):
        if ctx.loud:
            print("backward", g1.sum().item(), g2.sum().item())
        return g1 + 10 * g2, None, None


@pytest.mark.parametrize("loud", [False, True])
def test_same_tensor_returned_twice(loud):
    def f(x, lst):
        a, b = ReturnsTwice.apply(x, lst, loud)
        return a.sum() + 2 * b.sum(), a is b, lst[0] is a
    differential(f, _x(3), entries=1)


def test_backward_declining_inside_autocast():
    def f(a, b):
        y = LoudInsideAutocast.apply(a, b)
        z = a @ b
        return y, z, z.dtype
    differential(f, _ab(), entries=1)


SHARED_LOG: list = []


class LogsBothWays(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k, ctx.note, ctx.shape = k, "n", x.shape
        SHARED_LOG.append(("fwd", k))
        return x * k

    @staticmethod
    def backward(ctx, g):
        SHARED_LOG.append(("bwd", ctx.note))
        SHARED_LOG.append(len(ctx.shape))
        return g * ctx.k, None


@pytest.mark.parametrize("dynamic", [None, True])
def test_frame_and_backward_append_to_one_global_list(dynamic):
    # The frame's and the forward's appends are written back after the graph; the
    # backward's happen when it runs (the fuzzer's function_backward_side_effect).
    def f(x):
        SHARED_LOG.append("frame")
        y = LogsBothWays.apply(x, 3.0)
        SHARED_LOG.append("after")
        return y.sum()

    logs = []
    for fn in (f, minidynamo.optimize(f, dynamic=dynamic)):
        for n in (2, 4):
            SHARED_LOG.clear()
            x = torch.ones(n, 3, requires_grad=True)
            loss = fn(x)
            at_forward = list(SHARED_LOG)
            loss.backward()
            logs.append((at_forward, SHARED_LOG[len(at_forward):], x.grad.sum().item()))
    assert logs[:2] == logs[2:]
    SHARED_LOG.clear()


class BackwardLogs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        SHARED_LOG.append("bwd")
        return g * 2


@pytest.mark.parametrize("form", ["after", "twice after", "in a helper", "extend after"])
def test_backward_reads_the_global_list_first(form):
    # The list is first read by the backward's trace (which declines: the backward runs at
    # backward time); the frame's later append must not carry the backward's along.
    def helper(y):
        SHARED_LOG.append("helper")
        return y

    def f(x):
        y = BackwardLogs.apply(x)
        if form == "after":
            SHARED_LOG.append("frame")
        elif form == "twice after":
            SHARED_LOG.append("frame")
            SHARED_LOG.append("again")
        elif form == "in a helper":
            y = helper(y)
        else:
            SHARED_LOG.extend(["a", "b"])
        return y + 1

    logs = []
    for fn in (f, minidynamo.optimize(f)):
        for _ in range(2):
            SHARED_LOG.clear()
            x = torch.ones(3, requires_grad=True)
            out = fn(x)
            at_forward = list(SHARED_LOG)
            out.sum().backward()
            logs.append((at_forward, list(SHARED_LOG), x.grad.tolist()))
    assert logs[:2] == logs[2:], logs
    SHARED_LOG.clear()


class Doubles(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_global_module_hooks_never_see_the_bodies(backend):
    # Eager calls no module: a process-wide forward hook must not run on the node's bodies
    # (the fuzzer's function_global_hooks).
    calls = []

    def hook(module, args, out):
        calls.append(type(module).__name__)
        return out * 10 if isinstance(out, torch.Tensor) else out

    opt = minidynamo.optimize(lambda x: Doubles.apply(x) + 1, backend=backend)
    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        for _ in range(2):
            x = torch.ones(2, requires_grad=True)
            out = opt(x)
            out.sum().backward()
            torch.testing.assert_close(out, torch.full((2,), 3.0))
            torch.testing.assert_close(x.grad, torch.full((2,), 2.0))
    finally:
        handle.remove()
    assert calls == []
