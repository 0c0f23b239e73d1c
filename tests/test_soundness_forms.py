"""Soundness in new forms: differential programs (eager against optimized, on fresh,
identically built arguments, aliasing included; results, exceptions, printed output, the
arguments' state and gradients after the call) for the families whose guards and models
were fixed together — Python attributes of input tensors, aliasing between tensor inputs,
generators pulled by C consumers, nn.Parameters made inside, autograd.Function side
effects, and symbolic sizes on torch's backends — in forms the family's own tests do not
use. Each program changes, between its calls, the thing a guard or a model must notice;
a test also requires that something was traced (an all-eager run could not fail)."""
from __future__ import annotations

import collections
import contextlib
import io

import pytest
import torch
from torch import nn

import minidynamo
from helpers import same
from kernels import capture_kernels as K

BACKENDS = ("eager", "aot_eager")


def _tensors(v, acc):
    if isinstance(v, torch.Tensor):
        acc.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _tensors(x, acc)
    elif isinstance(v, dict):
        for x in v.values():
            _tensors(x, acc)
    elif isinstance(v, nn.Module):
        acc.extend(v.parameters())
        acc.extend(v.buffers())
    return acc


def _run(fn, args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            return fn(*args), None, buf.getvalue()
        except Exception as e:  # noqa: BLE001 - compared, not judged
            return None, e, buf.getvalue()


def differ(fn, *makers, backends=BACKENDS, grad=False, traced=True, **options):
    """Per backend, one optimized `fn` called once per maker (a function building fresh
    arguments) against a plain call on arguments built the same way. grad=True: the sum of
    every result tensor that requires grad is back-propagated on both sides and the inputs'
    gradients compared. traced=True: some entry (of the function or a resume function)
    holds a graph. Returns the optimized functions."""
    opts = []
    for backend in backends:
        opt = minidynamo.optimize(fn, backend=backend, **options)
        for n, make in enumerate(makers):
            where = f"{backend}, call {n}"
            eager_args, opt_args = make(), make()
            expected, e_exc, e_out = _run(fn, eager_args)
            got, o_exc, o_out = _run(opt, opt_args)
            assert (e_exc is None) == (o_exc is None), f"{where}: eager raised {e_exc!r}, optimized {o_exc!r}"
            if e_exc is not None:
                assert type(o_exc) is type(e_exc) and str(o_exc) == str(e_exc), f"{where}: {o_exc!r} != {e_exc!r}"
            assert o_out == e_out, f"{where}: printed {o_out!r}, eager {e_out!r}"
            if e_exc is None:
                same(got, expected, f"{where}: result")
                if grad:
                    losses = [sum(t.sum() for t in _tensors(r, []) if t.requires_grad) for r in (expected, got)]
                    if isinstance(losses[0], torch.Tensor):
                        for loss in losses:
                            loss.backward()
            for i, (e, o) in enumerate(zip(_tensors(eager_args, []), _tensors(opt_args, []))):
                same(o.detach(), e.detach(), f"{where}: argument tensor {i} after the call")
                if grad and e.is_leaf:
                    assert (e.grad is None) == (o.grad is None), f"{where}: gradient of argument tensor {i}"
                    if e.grad is not None:
                        same(o.grad, e.grad, f"{where}: gradient of argument tensor {i}")
        if traced:
            from helpers import entry_tree
            kinds = {e.kind for e in entry_tree(opt)}
            assert kinds - {"eager"}, f"{backend}: nothing was traced ({kinds})"
        opts.append(opt)
    return opts


def entries(opts) -> list:
    return [len(o.cache_entries()) for o in opts]


def tagged(n=3, **attrs):
    t = torch.arange(float(n))
    for k, v in attrs.items():
        setattr(t, k, v)
    return t


def tagging(n=3, **attrs):
    return lambda: (tagged(n, **attrs),)


# --- Python attributes of tensors ---------------------------------------------------------

def test_attribute_named_like_a_library_marker():
    def f(x):
        if hasattr(x, "_dynamo_dynamic_indices"):
            return x * len(x._dynamo_dynamic_indices)
        return x + 1
    opts = differ(f, tagging(), tagging(_dynamo_dynamic_indices={0}), tagging(_dynamo_dynamic_indices={0, 1}),
                  tagging())
    assert entries(opts) == [3, 3]


def test_flag_read_with_getattr_default_false():
    def f(x):
        return x * 2 if getattr(x, "_is_param", False) else x - 1
    differ(f, tagging(), tagging(_is_param=True), tagging(_is_param=False), tagging())


class LrMult(nn.Module):
    def __init__(self, **attrs):
        super().__init__()
        self.w = nn.Parameter(torch.arange(3.0))
        for k, v in attrs.items():
            setattr(self.w, k, v)

    def forward(self, x):
        return x * self.w * getattr(self.w, "lr_mult", 1.0)


def test_attribute_of_a_parameter_read_in_forward():
    differ(lambda m, x: m(x), lambda: (LrMult(), torch.ones(3)), lambda: (LrMult(lr_mult=3.0), torch.ones(3)),
           lambda: (LrMult(lr_mult=5.0), torch.ones(3)), lambda: (LrMult(), torch.ones(3)), grad=True)


def test_attribute_holding_a_tensor():
    def f(x):
        return x.extra * 2 + x
    differ(f, tagging(extra=torch.ones(3)), tagging(extra=torch.full((3,), 5.0)), tagging(extra=torch.ones(1)),
           tagging(extra=torch.ones(3, dtype=torch.float64)), tagging(extra=torch.ones(4)))


def test_attribute_holding_a_callable():
    def f(x):
        return x.fn(x)
    differ(f, tagging(fn=torch.sin), tagging(fn=torch.cos), tagging(fn=lambda t: t * 3), tagging(fn=torch.sin))


class Cfg:
    pass


def _cfg(scale):
    c = Cfg()
    c.inner = Cfg()
    c.inner.scale = scale
    return c


def test_attribute_holding_a_nested_object():
    def f(x):
        return x * x.cfg.inner.scale
    differ(f, lambda: (tagged(cfg=_cfg(2)),), lambda: (tagged(cfg=_cfg(3)),), lambda: (tagged(cfg=_cfg(2)),))


def test_vars_and_the_instance_dict():
    def count(x):
        return x * len(vars(x))

    def get(x):
        return x * x.__dict__.get("s", 1)

    def contains(x):
        return x + 1 if "s" in x.__dict__ else x
    for f in (count, get, contains):
        differ(f, tagging(), tagging(s=4), tagging(s=5, t=1), tagging())


def test_getattr_with_a_name_from_an_argument():
    def f(x, name):
        return x * getattr(x, name, 7)
    differ(f, lambda: (tagged(a=2), "a"), lambda: (tagged(a=2), "b"), lambda: (tagged(b=3), "b"),
           lambda: (tagged(a=2), "a"))


def test_attribute_deleted_and_set_again_on_one_tensor():
    def f(x):
        return x * x.k if hasattr(x, "k") else x - 1
    for backend in BACKENDS:
        opt = minidynamo.optimize(f, backend=backend)
        t = tagged(k=3)
        same(opt(t), f(t))
        del t.k
        same(opt(t), f(t))
        t.k = 9
        same(opt(t), f(t))
        assert {e.kind for e in opt.cache_entries()} == {"graph"}


def test_attribute_written_after_it_is_read():
    def f(x):
        x.count = getattr(x, "count", 0) + 1
        return x * x.count
    differ(f, tagging(), tagging(count=4), tagging(), traced=False)

    def g(x):
        r = x * getattr(x, "s", 1)
        x.s = 10
        return r
    differ(g, tagging(), tagging(s=3), tagging(), traced=False)


class Tagged(nn.Module):
    def __init__(self, tag=None):
        super().__init__()
        self.register_buffer("b", torch.arange(3.0))
        if tag is not None:
            self.b.tag = tag

    def forward(self, x):
        return x + (self.b * 10 if getattr(self.b, "tag", None) == "x" else self.b)


def test_attribute_of_a_buffer_compared_by_value():
    differ(lambda m, x: m(x), lambda: (Tagged(), torch.ones(3)), lambda: (Tagged("x"), torch.ones(3)),
           lambda: (Tagged("y"), torch.ones(3)), lambda: (Tagged("x"), torch.ones(3)))


def test_attribute_read_through_the_second_name_of_one_tensor():
    def f(a, b):
        return a * getattr(b, "s", 1)

    def same_object(s):
        def make():
            t = tagged() if s is None else tagged(s=s)
            return t, t
        return make

    def view(s):
        def make():
            t = tagged(s=s)
            return t, t[:]  # a view is another object: no attributes
        return make
    differ(f, same_object(None), same_object(3), view(3), same_object(4), view(4))


def test_attribute_of_a_parameter_passed_in():
    def f(p):
        return p * 2 if hasattr(p, "_is_sharded") else p + 1

    def make(flag):
        def build():
            p = nn.Parameter(torch.arange(3.0))
            if flag:
                p._is_sharded = True
            return (p,)
        return build
    differ(f, make(False), make(True), make(False), grad=True)


def test_attribute_holding_a_list_or_a_dict_of_tensors():
    def total(x):
        return sum(x.parts) * x

    def keyed(x):
        return x + x.meta["b"]
    differ(total, tagging(parts=[1, 2]), tagging(parts=[1, 2, 3]), tagging(parts=[5, 2]))
    differ(keyed, tagging(meta={"b": torch.ones(3)}), tagging(meta={"b": torch.ones(3) * 4}),
           tagging(meta={"c": 1, "b": torch.ones(3)}), tagging(meta={"c": 1}))


_MARKED = tagged(m=2)


def _reads_global_attr(x):
    return x * getattr(_MARKED, "m", 10)


def test_attribute_of_a_global_tensor_deleted():
    opt = minidynamo.optimize(_reads_global_attr)
    x = torch.ones(3)
    same(opt(x), _reads_global_attr(x))
    del _MARKED.m
    try:
        same(opt(x), _reads_global_attr(x))
    finally:
        _MARKED.m = 2


def test_attribute_with_changing_sizes():
    def f(x):
        return x * x.s
    opts = differ(f, tagging(3, s=2), tagging(5, s=2), tagging(7, s=3), tagging(4, s=2))
    assert entries(opts) == [3, 3]  # static, symbolic with s=2, symbolic with s=3


def test_attribute_and_aliasing_together():
    def f(x, y):
        x.add_(1)
        return y * getattr(y, "s", 1)

    def make(alias, s):
        def build():
            t = tagged() if s is None else tagged(s=s)
            return (t, t) if alias else (tagged(), t)
        return build
    differ(f, make(False, None), make(True, None), make(True, 2), make(False, 2), make(True, None))


def test_attribute_read_after_a_graph_break():
    def f(xs):
        y = xs[0] * 2
        print("break")
        return y * getattr(xs[0], "s", 5)
    differ(f, lambda: ([tagged()],), lambda: ([tagged(s=2)],), lambda: ([tagged()],))


def _attr_or_zero(t, name="s"):
    return getattr(t, name, 0)


def test_attribute_read_by_a_helper_with_a_default_name():
    def f(x):
        return x + _attr_or_zero(x) + _attr_or_zero(x, "q")
    differ(f, tagging(), tagging(s=1), tagging(q=2), tagging(s=1, q=2), tagging())


def test_attribute_holding_another_input_or_itself():
    def through_attr(x, y):
        x.other.add_(1)
        return y * 1

    def make(alias):
        def build():
            y = torch.zeros(3)
            return tagged(other=y if alias else torch.zeros(3)), y
        return build
    differ(through_attr, make(False), make(True), make(False))

    def through_self(x, y):
        x.me.mul_(2)
        return y + 0

    def selfish(alias):
        def build():
            x = torch.ones(3)
            x.me = x
            return x, (x if alias else torch.ones(3))
        return build
    differ(through_self, selfish(False), selfish(True), selfish(False))


# --- aliasing between tensor inputs ----------------------------------------------------------

class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(3))
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.b.add_(1)
        return x * 2


def test_buffer_written_and_its_detached_alias_passed():
    def f(m, x):
        return m(x)

    def detached():
        m = Counter()
        return m, m.b.detach()

    def data():
        m = Counter()
        return m, m.b.data
    differ(f, lambda: (Counter(), torch.ones(3)), detached, data, lambda: (Counter(), torch.ones(3)))


def test_aliases_inside_a_dict_and_nested_tuples():
    def f(d, t):
        d["a"].mul_(3)
        return t[0][1] + 1

    def separate():
        return {"a": torch.ones(3)}, ((torch.ones(3), torch.ones(3)),)

    def shared():
        x = torch.ones(3)
        return {"a": x}, ((torch.ones(3), x.unsqueeze(0).squeeze(0)),)
    differ(f, separate, shared, separate, shared)


def test_out_argument_is_the_same_memory_as_the_input():
    def f(a, b):
        torch.add(b, 1, out=a)
        return b * 2

    def same_view():
        x = torch.ones(6)
        return x[:3], x[:3]
    differ(f, lambda: (torch.zeros(3), torch.ones(3)), same_view, lambda: (torch.zeros(3), torch.ones(3)))


def _views(view_a, view_b, base_size):
    """(separate, shared): the same two views over two bases, then over one (same layouts,
    so only the aliasing guard tells the calls apart)."""
    def base():
        return torch.arange(1.0, 13.0)[:torch.Size(base_size if isinstance(base_size, tuple) else (base_size,))
                                       .numel()].reshape(base_size)

    def separate():
        return view_a(base()), view_b(base())

    def shared():
        x = base()
        return view_a(x), view_b(x)
    return separate, shared


@pytest.mark.parametrize("views", [
    (lambda t: t, lambda t: t.as_strided((2, 2), (1, 1)), 4),
    (lambda t: t, lambda t: t.unsqueeze(0).expand(2, 3), 3),
    (lambda t: t.narrow(1, 1, 2), lambda t: t.narrow(0, 0, 2), (2, 3)),
    (lambda t: t[1], lambda t: t.unsqueeze(1).expand(2, 2, 2)[:, 0], (2, 2)),
], ids=["as_strided", "expand", "narrow", "select_vs_expanded"])
def test_as_strided_unsqueeze_expand_and_narrow_views(views):
    def f(a, b):
        a.add_(10)
        return b.sum(0)
    separate, shared = _views(*views)
    differ(f, separate, shared, separate, shared)


def test_write_into_an_expanded_alias_raises_as_eager():
    def f(a, b):
        b.add_(1)
        return a * 2

    def expanded():
        x = torch.ones(3)
        return x.unsqueeze(0), x.expand(2, 3)
    differ(f, lambda: (torch.ones(1, 3), torch.ones(2, 3)), expanded, traced=False)


def test_graph_returns_a_written_input_that_aliases_another():
    def f(a, b):
        a.add_(1)
        return a, b + 0
    differ(f, lambda: (torch.zeros(3), torch.ones(3)), lambda: (lambda x: (x, x))(torch.ones(3)),
           lambda: (torch.zeros(3), torch.ones(3)))


def test_aliasing_on_both_sides_of_a_graph_break():
    def f(a, b):
        y = a * 2
        print("break")
        a.add_(1)
        return b + y

    def g(a, b):
        y = b * 2
        a.add_(1)
        print("break")
        a.add_(1)
        return y, b * 3
    for fn in (f, g):
        differ(fn, lambda: (torch.zeros(3), torch.ones(3)), lambda: (lambda x: (x, x))(torch.ones(3)),
               lambda: (lambda x: (x, x[1:]))(torch.ones(4)[:3]), lambda: (torch.zeros(3), torch.ones(3)))


def test_detached_alias_zeroed_and_base_read():
    def f(a, b):
        b.zero_()
        return a.sum()
    differ(f, lambda: (torch.ones(3), torch.ones(3)), lambda: (lambda x: (x, x.detach()))(torch.ones(3)),
           lambda: (torch.ones(3), torch.ones(3)))


def test_transposed_write_and_flat_read():
    def f(a, b):
        a.t().add_(1)
        return b.reshape(-1) * 1

    def flat():
        x = torch.zeros(2, 2)
        return x, x.view(4)
    differ(f, lambda: (torch.zeros(2, 2), torch.zeros(4)), flat, lambda: (torch.zeros(2, 2), torch.zeros(4)))


def test_a_row_of_unbind_and_its_base():
    def f(a, b):
        a.add_(1)
        return b * 1

    def row():
        x = torch.zeros(2, 3)
        return x, x.unbind(0)[1]
    differ(f, lambda: (torch.zeros(2, 3), torch.zeros(3)), row, lambda: (torch.zeros(2, 3), torch.zeros(3)))


def _disjoint():
    x = torch.zeros(6)
    return x[:3], x[3:]


def _overlapping():
    x = torch.zeros(6)
    return x[:3], x[2:5]


def test_disjoint_views_reuse_and_overlapping_ones_do_not_with_inductor():
    def f(a, b):
        a.add_(1)
        return b.sum() + a.sum()
    opts = differ(f, lambda: (torch.zeros(3), torch.ones(3)), _disjoint, _overlapping,
                  lambda: (torch.zeros(3), torch.ones(3)), _disjoint, backends=("aot_eager", "inductor"))
    assert entries(opts) == [2, 2]


def test_a_base_and_its_view_after_separate_tensors():
    def f(a, b):
        b.add_(1)
        return a * 1

    def base_and_view():
        x = torch.zeros(6)
        return x, x[3:]
    differ(f, lambda: (torch.zeros(6), torch.zeros(3)), base_and_view, _disjoint,
           lambda: (torch.zeros(6), torch.zeros(3)))


def test_items_of_one_list_alias():
    def f(xs):
        xs[0].add_(1)
        return xs[1] * 2, xs[2] + 0

    def separate():
        return ([torch.zeros(2), torch.zeros(2), torch.zeros(2)],)

    def first_is_last():
        x = torch.zeros(2)
        return ([x, torch.zeros(2), x],)

    def sliding():
        x = torch.zeros(4)
        return ([x[:2], x[1:3], x[2:]],)
    differ(f, separate, first_is_last, sliding, separate)


def test_in_place_on_a_view_of_a_non_leaf_passed_beside_its_base():
    def f(x, v):
        v.mul_(2)
        return x.sum()

    def base_and_view():
        b = torch.ones(4, requires_grad=True).clone()
        return b, b[:2]
    differ(f, lambda: (torch.ones(4, requires_grad=True).clone(), torch.ones(2, requires_grad=True).clone()),
           base_and_view, grad=True)


def test_zeroed_base_read_through_an_expanded_view():
    def f(a, b):
        a.zero_()
        return b.sum(1)
    separate, shared = _views(lambda t: t, lambda t: t.expand(2, 3), 3)
    differ(f, separate, shared, separate)


def test_aliasing_with_symbolic_sizes():
    def f(x, w):
        x.add_(w.sum())
        return x.shape[0] * w
    differ(f, lambda: (torch.arange(3.0), torch.ones(2)), lambda: (torch.arange(5.0), torch.ones(2)),
           lambda: (lambda t: (t, t[:2]))(torch.arange(6.0)), lambda: (torch.arange(7.0), torch.ones(2)),
           backends=("eager", "aot_eager", "inductor"), dynamic=True)


def test_requires_grad_changed_on_one_name_of_a_tensor():
    """`a.requires_grad_()` is autograd metadata, not an op: it was a graph node that
    torch's backends dropped (the input stayed requires_grad=False on aot_eager), and
    `b.requires_grad` was folded from the trace's separate fake when `b is a` (False where
    eager has True, on every backend). It breaks now; an unchanged flag is a no-op."""
    def flip(a, b):
        a.requires_grad_()
        return b * 2, b.requires_grad

    def same_object():
        t = torch.ones(3)
        return t, t
    differ(flip, lambda: (torch.ones(3), torch.ones(3)), same_object, lambda: (torch.ones(3), torch.ones(3)))

    def made(x):
        y = (x * 2).detach().requires_grad_()
        return y, y * 3, y.requires_grad

    def off(x):
        x.requires_grad_(False)
        return x * 2, x.requires_grad  # aot_eager: was a BackendError

    def unchanged(x):
        return x.requires_grad_() * 2
    differ(made, lambda: (torch.ones(2),), grad=True)
    differ(off, lambda: (torch.ones(2, requires_grad=True),))
    opts = differ(unchanged, lambda: (torch.ones(2, requires_grad=True),), grad=True)
    assert all(e.kind == "graph" for o in opts for e in o.cache_entries())


def test_detach_in_place_on_one_name_of_a_tensor():
    """`a.detach_()` clears autograd metadata: `b.requires_grad` was folded True when `b is a`
    (eager: False), and aot_eager left the input attached. It breaks now where it changes
    something; on a tensor without grad it is a no-op."""
    def f(a, b):
        a.detach_()
        return b.requires_grad, b * 2

    def separate():
        return torch.ones(3, requires_grad=True) * 1, torch.ones(3, requires_grad=True) * 1

    def same_object():
        t = torch.ones(3, requires_grad=True) * 1
        return t, t
    differ(f, separate, same_object, separate)
    opts = differ(lambda x: x.detach_() + 1, lambda: (torch.ones(2),))
    assert all(e.kind == "graph" for o in opts for e in o.cache_entries())


def test_resize_of_an_input():
    """resize_/resize_as_ on an input: aot_eager failed (an out-of-bounds storage, an expand
    error) where eager runs; they break now, as under torch.compile."""
    def grow(a, b):
        a.resize_(6)
        a[3:] = 2.0  # what resize_ added is uninitialized
        return b * 1, b.shape, a.shape

    def like(a):
        a.resize_as_(torch.ones(3, 2))
        return a.shape, a * 2

    def same_object():
        t = torch.ones(3)
        return t, t
    differ(grow, lambda: (torch.ones(3), torch.ones(3)), same_object, lambda: (torch.ones(3), torch.ones(3)))
    differ(like, lambda: (torch.ones(2, 3),))


def test_triton_kernel_writes_what_another_input_reads():
    """A launch's output is another argument's memory (the same object, overlapping rows of
    one base), and an in-place kernel on a row of a base read whole through a view."""
    def add_then_read(x, y, out, z):
        K.add_kernel[(1,)](x, y, out, out.numel(), BLOCK=16)
        return z * 2

    def separate():
        return (torch.arange(4.0, device=K.DEVICE), torch.ones(4, device=K.DEVICE),
                torch.zeros(4, device=K.DEVICE), torch.zeros(4, device=K.DEVICE))

    def same_object():
        o = torch.zeros(4, device=K.DEVICE)
        return torch.arange(4.0, device=K.DEVICE), torch.ones(4, device=K.DEVICE), o, o

    def overlapping():
        b = torch.zeros(8, device=K.DEVICE)
        return torch.arange(4.0, device=K.DEVICE), torch.ones(4, device=K.DEVICE), b[:4], b[2:6]
    differ(add_then_read, separate, same_object, overlapping, separate)

    def scale_then_sum(x, y):
        K.scale_inplace[(1,)](x, 3.0, x.numel())
        return y.sum(0)

    def row_and_base():
        b = torch.ones(8, device=K.DEVICE)
        return b[:4], b.view(2, 4)
    differ(scale_then_sum, lambda: (torch.ones(4, device=K.DEVICE), torch.ones(2, 4, device=K.DEVICE)),
           row_and_base, lambda: (torch.ones(4, device=K.DEVICE), torch.ones(2, 4, device=K.DEVICE)))


# --- generators pulled by C consumers ---------------------------------------------------------

def test_fromkeys_pulling_a_generator_with_side_effects():
    def f(x, log):
        d = dict.fromkeys(log.append(i) or i + len(log) for i in range(3))
        return x * len(log), d
    differ(f, lambda: (torch.ones(2), []), lambda: (torch.ones(2), [7]))


def test_join_and_bytearray_of_generators_run_their_side_effects_once():
    """Both decline (a join of non-constants, bytearray of a generator): the whole call runs
    eagerly, the generator's appends exactly once."""
    def f(x, log):
        def g():
            for i in range(3):
                log.append(i)
                yield str(i)
        s = "".join(g())
        b = bytearray(i + len(log) for i in range(3) if not log.append(i))
        return x * len(s), s, bytes(b)
    differ(f, lambda: (torch.ones(2), []), lambda: (torch.ones(2), [7]), traced=False)


def test_consumers_reading_what_they_fill():
    def f(x):
        seen = []
        m = max((i for i in range(4) if not seen.append(i)), key=lambda i: -i + len(seen))
        out = []
        out.extend(i + len(out) for i in range(3))
        lst = [1, 2]
        lst += (len(lst) + i for i in range(2))
        d = {}
        d.update((k, len(d)) for k in "abc")
        s = set()
        s.update(len(s) + i for i in range(3))
        return x * m, seen, out, lst, d, sorted(s)
    differ(f, lambda: (torch.ones(2),))


def test_frozenset_deque_and_zip_partial_pulls():
    def f(x):
        acc = []
        fs = frozenset(acc.append(i) or i * 2 for i in range(4))
        dq = collections.deque(maxlen=2)

        def g():
            for i in range(5):
                yield len(dq) + i
        dq.extend(g())
        z = dict(zip("ab", (acc.append(i) or i for i in range(5))))
        a = any(acc.append(i) or i > 1 for i in range(5))
        return x + len(fs), sorted(fs), list(dq), z, a, acc
    differ(f, lambda: (torch.ones(2),))


# --- nn.Parameter made inside -----------------------------------------------------------------

class MakesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        p = nn.Parameter(torch.ones(3))
        return self.lin(x) * p, p


def test_parameter_made_in_a_module_forward():
    differ(lambda m, x: m(x), lambda: (MakesParameter(), torch.ones(3)), grad=True)


def test_parameter_flags_data_and_int_dtype():
    def frozen(x):
        p = nn.Parameter(x * 2, requires_grad=False)
        return p + 1, p, p.requires_grad, type(p).__name__

    def assigned(x):
        p = nn.Parameter(torch.zeros(3))
        p.data = x * 3
        return p * 2, p

    def in_dict(x):
        p = nn.Parameter(x.clone())
        return {"p": p, "y": p * x}

    def integer(x):
        return nn.Parameter(x) + 1  # eager: only floating point tensors can require gradients
    differ(frozen, lambda: (torch.ones(3),), lambda: (torch.ones(3, requires_grad=True),), grad=True)
    differ(assigned, lambda: (torch.ones(3),), grad=True)
    differ(in_dict, lambda: (torch.ones(3),), grad=True)
    differ(integer, lambda: (torch.ones(3, dtype=torch.int64),), traced=False)


def test_parameter_changed_under_no_grad_and_stored():
    def scaled(x):
        p = nn.Parameter(torch.ones(3))
        with torch.no_grad():
            p.mul_(x)
        return p * 2, p.is_leaf, p.requires_grad

    def stored(x, store):
        p = nn.Parameter(x.detach().clone())
        store.append(p)
        return p.sum()
    differ(scaled, lambda: (torch.full((3,), 2.0),), grad=True)
    differ(stored, lambda: (torch.ones(3), []), grad=True)


# --- autograd.Function ------------------------------------------------------------------------

class CtxTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.wt = w * 2
        ctx.n = x.shape[0]
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g * ctx.wt, g.sum() * ctx.n * torch.ones_like(ctx.wt)


class SavesView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        ctx.save_for_backward(y[:2])
        return y

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        out = g.clone()
        out[:2] *= v
        return out


class ArgmaxToo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = torch.argmax(x).reshape(1)
        ctx.mark_non_differentiable(idx)
        return x * 3, idx

    @staticmethod
    def backward(ctx, g, gi):
        return g * 3


def test_function_ctx_tensor_attribute_saved_view_and_non_differentiable_output():
    differ(lambda x, w: CtxTensor.apply(x, w), lambda: (torch.ones(3, requires_grad=True),
                                                       torch.full((3,), 2.0, requires_grad=True)),
           lambda: (torch.ones(4, requires_grad=True), torch.full((4,), 3.0, requires_grad=True)), grad=True)
    differ(lambda x: SavesView.apply(x), lambda: (torch.arange(1.0, 4.0).requires_grad_(),), grad=True)

    def f(x):
        a, i = ArgmaxToo.apply(x)
        return a, i, i.requires_grad
    differ(f, lambda: (torch.arange(3.0).requires_grad_(),), lambda: (torch.tensor([3.0, 1, 2], requires_grad=True),),
           grad=True)


class AppendsSize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        lst.append(x.shape[0])
        return x + len(lst)

    @staticmethod
    def backward(ctx, g):
        return g, None


class Doubles(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Wraps(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return Doubles.apply(x) + 1

    @staticmethod
    def backward(ctx, g):
        return Doubles.apply(g) * 5


def test_function_applied_twice_nested_and_under_no_grad():
    def twice(x, lst):
        return AppendsSize.apply(x, lst) + AppendsSize.apply(x * 2, lst), list(lst)
    differ(twice, lambda: (torch.ones(3, requires_grad=True), []), lambda: (torch.ones(3, requires_grad=True), [1]),
           grad=True)
    # aot_eager: a BackendError by design (the nested backward cannot be traced; backends.md)
    differ(lambda x: Wraps.apply(x), lambda: (torch.ones(3, requires_grad=True),), backends=("eager",), grad=True)

    def no_grad(x):
        with torch.no_grad():
            y = Doubles.apply(x)
        return y, y.requires_grad
    differ(no_grad, lambda: (torch.ones(3, requires_grad=True),), lambda: (torch.ones(3),))


class IntoDict(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, d):
        d["k"] = x.sum()
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_function_writes_a_dict_made_in_the_frame_and_marks_dirty():
    def f(x):
        d = {}
        y = IntoDict.apply(x, d)
        return y + d["k"], d
    differ(f, lambda: (torch.ones(3, requires_grad=True),), grad=True)
    differ(lambda x: Dirty.apply(x * 1), lambda: (torch.ones(3, requires_grad=True),), grad=True)


# --- symbolic sizes on torch's backends ---------------------------------------------------------

def _r(*sizes):
    return torch.randn(*sizes, generator=torch.Generator().manual_seed(sum(sizes)))


DYNAMIC_BACKENDS = ("eager", "aot_eager", "inductor")


def test_size_arithmetic_reductions_and_views_returned():
    def arith(x):
        n = x.size(0)
        return x.sum(0) * n, n * 2 + 1, x.shape[0] // 2, (n - 1, x.numel()), x.mean(0), x.sum() / n

    def view(x, n):
        return x.view(-1, n) * 2

    def ranges(x):
        return x + torch.arange(x.size(0)), torch.arange(x.size(0) * 2).sum()
    differ(arith, lambda: (_r(3, 2),), lambda: (_r(5, 2),), lambda: (_r(7, 2),), backends=DYNAMIC_BACKENDS,
           dynamic=True)
    differ(view, lambda: (_r(6), 2), lambda: (_r(6), 3), lambda: (_r(12), 4), lambda: (_r(5), 2),
           backends=DYNAMIC_BACKENDS, dynamic=True)
    differ(ranges, lambda: (_r(3),), lambda: (_r(5),), lambda: (_r(8),), backends=DYNAMIC_BACKENDS, dynamic=True)


def test_int_argument_changing_and_a_break_between_symbolic_graphs():
    def sliced(x, k):
        return x[:k] * k, x.narrow(0, 0, k).sum(), k * x.shape[0]

    def broken(x):
        y = x * 2
        n = y.shape[0]
        print("break", n)
        return y[: n - 1].sum(0), n
    differ(sliced, lambda: (_r(8), 2), lambda: (_r(8), 3), lambda: (_r(8), 5), lambda: (_r(8), 9),
           backends=DYNAMIC_BACKENDS)
    differ(broken, lambda: (_r(3, 2),), lambda: (_r(5, 2),), lambda: (_r(9, 2),), backends=DYNAMIC_BACKENDS,
           dynamic=True)


def test_branches_factories_and_strides_on_symbolic_sizes():
    def branch(x):
        if x.shape[0] > 4:
            return x[:4] + 1
        return torch.cat([x, x]) * x.shape[0]

    def factories(x):
        n = x.shape[0]
        return torch.full((n, 2), float(n)), torch.zeros(n // 2 + 1), [n] * 2, x.new_ones(n + 1)

    def strides(x):
        n = x.shape[0]
        y = x.expand(2, n).reshape(n * 2)
        return y, y.stride(), x.unsqueeze(-1).expand(n, n).sum(1), x.t().contiguous().stride()
    differ(branch, lambda: (_r(3),), lambda: (_r(6),), lambda: (_r(2),), lambda: (_r(4),), lambda: (_r(5),),
           backends=DYNAMIC_BACKENDS, dynamic=True)
    differ(factories, lambda: (_r(3),), lambda: (_r(6),), lambda: (_r(7),), backends=DYNAMIC_BACKENDS, dynamic=True)
    differ(strides, lambda: (_r(3),), lambda: (_r(4),), lambda: (_r(6),), backends=DYNAMIC_BACKENDS, dynamic=True)


def test_sizes_from_tensor_data():
    def f(x):
        return x.nonzero().shape[0], x[x > 0].sum(), torch.unique(x.round()).numel()
    differ(f, lambda: (torch.tensor([1.0, -1.0, 2.0]),), lambda: (torch.tensor([1.0, 2.0, 3.0, 4.0]),),
           lambda: (torch.tensor([-1.0, -2.0]),), backends=DYNAMIC_BACKENDS, traced=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_differ_notices_a_wrong_result(backend, monkeypatch):
    """The harness can fail: an optimized function that computes something else is caught."""
    real = minidynamo.optimize
    monkeypatch.setattr(minidynamo, "optimize", lambda fn, **kw: real(lambda x: fn(x) * 2, **kw))
    with pytest.raises(AssertionError, match="not close"):
        differ(lambda x: x + 1, lambda: (torch.ones(2),), backends=(backend,))
