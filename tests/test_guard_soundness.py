"""Guard soundness for two families torch.compile users meet: Python attributes set on
input tensors (`x.scale = 2`), and aliasing between tensor inputs (`f(a, b, a)`,
`f(a, a[:])`, a parameter passed as an argument). Each call is differential: the function
runs eagerly and optimized on fresh, identically built arguments (aliasing included), and
results and the arguments' state after the call must agree — on the default backend
(the graph's code inlined into the entry) and on AOTAutograd's `aot_eager`, which bakes
the traced aliasing into its graph."""
from __future__ import annotations

import pytest
import torch
from kernels import capture_kernels as K

import minidynamo
from helpers import same

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
    elif isinstance(v, torch.nn.Module):
        acc.extend(v.state_dict().values())
    return acc


def run_calls(fn, *makers, backends=BACKENDS) -> list:
    """For each backend, call the optimized `fn` once per maker (a function building fresh
    arguments), each time against a plain call on arguments built the same way; the
    optimized functions, one per backend."""
    opts = []
    for backend in backends:
        opt = minidynamo.optimize(fn, backend=backend)
        for n, make in enumerate(makers):
            eager_args, opt_args = make(), make()
            try:
                expected = fn(*eager_args)
            except Exception as e:  # noqa: BLE001 - compared below
                with pytest.raises(type(e)):
                    opt(*opt_args)
                continue
            got = opt(*opt_args)
            same(got, expected, f"{backend}, call {n}: result")
            for i, (e, o) in enumerate(zip(_tensors(eager_args, []), _tensors(opt_args, []))):
                same(o, e, f"{backend}, call {n}: argument tensor {i} after the call")
        opts.append(opt)
    return opts


def entries(opts) -> list:
    """The number of cache entries of each optimized function."""
    return [len(opt.cache_entries()) for opt in opts]


def kinds(opts) -> set:
    return {e.kind for opt in opts for e in opt.cache_entries()}


def tagged(**attrs):
    t = torch.arange(3.0)
    for k, v in attrs.items():
        setattr(t, k, v)
    return t


# --- Python attributes of input tensors ---------------------------------------------------

def test_hasattr_on_an_argument_tensor():
    def f(x):
        return x + 2 if hasattr(x, "test") else x + 1
    opts = run_calls(f, lambda: (tagged(),), lambda: (tagged(test=1),), lambda: (tagged(),))
    assert entries(opts) == [2, 2]  # the absent one serves the third call again


def test_hasattr_traced_present_then_absent():
    def f(x):
        return x * 3 if hasattr(x, "flag") else x
    opts = run_calls(f, lambda: (tagged(flag=None),), lambda: (tagged(),), lambda: (tagged(flag=0),))
    assert entries(opts) == [2, 2]  # present with another value: the same entry (hasattr reads no value)


@pytest.mark.parametrize("values", [(2, 3, 2), (0.5, 1.5), ("add", "mul"), (True, False)])
def test_attribute_value_is_guarded(values):
    def f(x):
        s = x.scale
        if isinstance(s, str):
            return x + 1 if s == "add" else x * 2
        return x * s
    makers = [(lambda v=v: (tagged(scale=v),)) for v in values]
    opts = run_calls(f, *makers)
    assert kinds(opts) == {"graph"} and entries(opts) == [len(set(values))] * 2
    run_calls(f, *makers, lambda: (tagged(),))  # absent: AttributeError, as eager


def test_attribute_holding_a_dict_and_a_tensor():
    def f(x):
        return x * x.meta["k"] + x.bias
    opts = run_calls(f, lambda: (tagged(meta={"k": 2}, bias=torch.ones(3)),),
                     lambda: (tagged(meta={"k": 5}, bias=torch.ones(3)),),
                     lambda: (tagged(meta={"k": 5}, bias=torch.full((3,), 4.0)),),
                     lambda: (tagged(meta={"k": 5}, bias=torch.ones(4)),))
    assert "graph" in kinds(opts) and entries(opts) == [3, 3]  # k=2, k=5; the bias of 4 raises
    run_calls(f, lambda: (tagged(meta={"j": 5}, bias=torch.ones(3)),))


def test_getattr_with_default():
    def f(x):
        return x * getattr(x, "scale", 10)
    opts = run_calls(f, lambda: (tagged(),), lambda: (tagged(scale=3),), lambda: (tagged(other=1),),
                     lambda: (tagged(scale=4),), lambda: (tagged(other=2),))
    assert kinds(opts) == {"graph"}
    assert entries(opts) == [4, 4]  # absent (empty dict), 3, absent among others, 4


def test_other_attributes_do_not_recompile_a_present_one():
    def f(x):
        return x * x.scale
    opts = run_calls(f, lambda: (tagged(scale=2, note="a"),), lambda: (tagged(scale=2, note="b"),),
                     lambda: (tagged(scale=5, note="b"),))
    assert kinds(opts) == {"graph"} and entries(opts) == [2, 2]


def test_attribute_of_a_tensor_in_a_list_and_a_dict():
    def f(xs, d):
        y = xs[0] * 2 if hasattr(xs[1], "test") else xs[0]
        return y + getattr(d["w"], "bias", 0)
    run_calls(f, lambda: ([tagged(), tagged()], {"w": tagged()}),
              lambda: ([tagged(), tagged(test=1)], {"w": tagged()}),
              lambda: ([tagged(), tagged(test=1)], {"w": tagged(bias=5)}))


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        w = self.weight * getattr(self.weight, "mult", 1)
        return x * w + (self.offset if hasattr(self.offset, "use") else 0)


def test_attribute_of_a_module_parameter_and_buffer():
    m = Scaled()
    opt = minidynamo.optimize(lambda m, x: m(x))
    x = torch.arange(3.0)
    same(opt(m, x), m(x))
    m.weight.mult = 4
    same(opt(m, x), m(x))
    m.offset.use = True
    same(opt(m, x), m(x))
    del m.weight.mult
    same(opt(m, x), m(x))
    assert {e.kind for e in opt.cache_entries()} == {"graph"} and len(opt.cache_entries()) == 4


def test_attribute_of_a_global_tensor():
    opt = minidynamo.optimize(_uses_global_attr)
    x = torch.ones(3)
    _G.scale = 2
    same(opt(x), _uses_global_attr(x))
    _G.scale = 7
    same(opt(x), _uses_global_attr(x))
    assert [e.kind for e in opt.cache_entries()] == ["graph", "graph"]


_G = torch.ones(3)


def _uses_global_attr(x):
    return x * _G.scale


def test_attribute_set_inside_the_call_is_never_wrong():
    def f(x):
        y = x * 2 if hasattr(x, "tag") else x
        x.tag = "seen"
        return y + 1
    for backend in BACKENDS:
        opt = minidynamo.optimize(f, backend=backend)
        for tag in (None, None, "old", None):
            x, plain = torch.ones(2), torch.ones(2)
            if tag is not None:
                x.tag = plain.tag = tag
            same(opt(x), f(plain))
            assert x.tag == "seen"


def test_attribute_failure_is_explained():
    def f(x):
        return x + 2 if hasattr(x, "test") else x + 1
    opt = minidynamo.optimize(f)
    opt(tagged())
    opt(tagged(test=1))
    failure = opt.guard_failures()[-1]
    assert failure.kind == "NOT_IN_DICT" and "instance attributes" in failure.reason and "test" in failure.reason


# --- aliasing between tensor inputs --------------------------------------------------------

def three_separate():
    return torch.zeros(3), torch.ones(3), torch.zeros(3)


def first_is_third():
    a = torch.zeros(3)
    return a, torch.ones(3), a


def third_views_first():
    a = torch.zeros(3)
    return a, torch.ones(3), a[:]


def second_views_first():
    a = torch.ones(3)
    return a, a[:], a


def add_then_read(a, b, c):
    a.add_(b)
    return c + 1


@pytest.mark.parametrize("order", [
    (three_separate, first_is_third, second_views_first, third_views_first, three_separate),
    (first_is_third, three_separate, third_views_first, first_is_third),
    (third_views_first, first_is_third, three_separate, third_views_first),
], ids=["separate_first", "same_first", "view_first"])
def test_identity_and_views_between_arguments(order):
    run_calls(add_then_read, *order)


def test_identity_and_views_with_every_backend():
    """The report's repro: each aliasing relation is an entry of its own."""
    opts = run_calls(add_then_read, three_separate, first_is_third, second_views_first, three_separate)
    assert entries(opts) == [3, 3]


def _pair(a, b):
    return lambda: (lambda base: (a(base), b(base)))(torch.arange(1.0, 13.0).reshape(3, 4))


@pytest.mark.parametrize("view", [
    lambda t: t.view(12)[:4].view(1, 4),  # view(...)
    lambda t: t[1:2],                     # a slice
    lambda t: t.t()[:1],                  # a column, transposed: overlaps the first row at one element
    lambda t: t[:1],                      # the same row, another object
], ids=["view", "slice", "transpose", "first_row"])
def test_read_after_write_through_a_view(view):
    def f(a, c):
        y = c * 2
        a.mul_(10)
        return y + c
    def fresh():  # the same layouts over two storages
        return _pair(lambda t: t[:1], lambda t: t)()[0], view(torch.arange(1.0, 13.0).reshape(3, 4))
    run_calls(f, fresh, _pair(lambda t: t[:1], view), fresh)


def test_transposed_view_written():
    def f(a, b):
        a.add_(1)
        return b * 1
    fresh = lambda: (torch.zeros(2, 2), torch.ones(2, 2).t())  # noqa: E731

    def transposed():
        a = torch.arange(4.0).reshape(2, 2)
        return a, a.t()
    run_calls(f, fresh, transposed, fresh, transposed)


def test_out_argument_aliasing_an_input():
    def f(a, b):
        torch.mul(b, 2, out=a)
        return b + 0
    fresh = lambda: (torch.zeros(3), torch.ones(3))  # noqa: E731

    def same_storage():
        a = torch.ones(3)
        return a, a.view(3)
    run_calls(f, fresh, same_storage)


def test_slices_of_one_base():
    """Overlapping slices of one base are a different relation than separate tensors;
    slices that do not overlap are indistinguishable from separate tensors for the graph
    and reuse its entry."""
    def f(a, c):
        a.add_(1)
        return c * 2

    def separate():
        return torch.zeros(3), torch.zeros(3)

    def disjoint():
        base = torch.zeros(6)
        return base[:3], base[3:]

    def overlapping():
        base = torch.zeros(6)
        return base[:3], base[2:5]
    opts = run_calls(f, separate, disjoint, overlapping, separate, disjoint, overlapping)
    assert entries(opts) == [2, 2]


def test_traced_with_overlapping_slices():
    def f(a, c):
        a.add_(1)
        return c * 2

    def overlapping(start):
        def make():
            base = torch.zeros(6)
            return base[:3], base[start:start + 3]
        return make
    opts = run_calls(f, overlapping(2), overlapping(2), overlapping(1))
    assert entries(opts) == [2, 2]  # another offset overlaps other elements: another entry


def test_interleaved_views_are_overlapping_memory():
    """x[::2] and x[1::2] share no element but their byte ranges interleave: treated as
    overlapping (a recompile, never a wrong result)."""
    def f(a, c):
        a.add_(1)
        return c * 2
    def interleaved():
        base = torch.zeros(6)
        return base[::2], base[1::2]
    opts = run_calls(f, lambda: (torch.zeros(6)[::2], torch.zeros(6)[1::2]), interleaved)
    assert entries(opts) == [2, 2]


def test_metadata_mutation_through_identity():
    """`a.t_()` changes `c` too when they are one object; c's shape is folded."""
    def f(a, c):
        a.t_()
        return torch.ones(c.shape[0])
    run_calls(f, lambda: (torch.zeros(2, 3), torch.zeros(2, 3)),
              lambda: (lambda t: (t, t))(torch.zeros(2, 3)))


def test_only_pairs_with_a_written_input_matter():
    """`b` is only read: it may alias `c` (also only read) freely; `a` is written."""
    def f(a, b, c):
        a.add_(1)
        return b * c

    def separate():
        return torch.zeros(3), torch.ones(3), torch.ones(3)

    def readers_alias():
        t = torch.ones(3)
        return torch.zeros(3), t, t[:]

    def readers_same():
        t = torch.ones(3)
        return torch.zeros(3), t, t

    def writer_aliases_a_reader():
        t = torch.ones(3)
        return t, t[:], torch.ones(3)
    opts = run_calls(f, separate, readers_alias, readers_same, writer_aliases_a_reader, readers_same)
    assert entries(opts) == [2, 2]
    pure = run_calls(lambda a, b, c: a + b * c, three_separate, first_is_third, second_views_first)
    assert entries(pure) == [1, 1]
    assert all("check_aliasing" not in o.cache_entries()[0].guard_text() for o in pure)


def test_tensors_in_a_list_and_a_dict():
    def f(xs, d):
        xs[0].mul_(2)
        d["out"].add_(xs[1])
        return xs[1] + d["inp"]

    def separate():
        return [torch.ones(3), torch.ones(3)], {"out": torch.zeros(3), "inp": torch.ones(3)}

    def shared():
        a = torch.ones(3)
        return [a, a[:]], {"out": torch.zeros(3), "inp": a}

    def out_is_input():
        a = torch.ones(3)
        return [torch.ones(3), a], {"out": a, "inp": a.view(3)}
    run_calls(f, separate, shared, out_is_input, separate)


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.total.add_(x)
        return self.weight * 2 + self.total + x


def test_module_buffer_written_and_passed_as_argument():
    def f(m, x):
        return m(x)

    def separate():
        return Accumulate(), torch.ones(3)

    def buffer_as_argument():
        m = Accumulate()
        m.total.fill_(1)
        return m, m.total

    def buffer_view_as_argument():
        m = Accumulate()
        return m, m.total[:]
    run_calls(f, separate, buffer_as_argument, buffer_view_as_argument, separate)


def test_traced_with_a_duplicate_argument_that_requires_grad_nearby():
    """Traced with a written tensor passed twice beside a parameter: one graph input (AOTAutograd
    failed on the written duplicate), the identity guarded."""
    def f(a, c, w):
        a.add_(1)
        return w * 2 + c

    def dup():
        a = torch.zeros(3)
        return a, a, torch.ones(3, requires_grad=True)

    def separate():
        return torch.zeros(3), torch.zeros(3), torch.ones(3, requires_grad=True)
    run_calls(f, dup, separate, dup)


_STATE = torch.zeros(3)


def _bump_global(x):
    _STATE.add_(1)
    return x + 1


def test_global_written_and_passed_as_argument():
    for backend in BACKENDS:
        opt = minidynamo.optimize(_bump_global, backend=backend)
        opt(torch.zeros(3))
        for arg in (lambda: _STATE, lambda: _STATE[:], lambda: torch.zeros(3)):
            _STATE.zero_()
            expected = _bump_global(arg()).clone()
            _STATE.zero_()
            same(opt(arg()), expected)
            same(_STATE, torch.ones(3))


def test_write_before_a_graph_break():
    def f(a, c):
        a.add_(1)
        y = c * 2
        print("break")
        return y
    run_calls(f, lambda: (torch.zeros(3), torch.zeros(3)), lambda: (lambda t: (t, t))(torch.zeros(3)),
              lambda: (lambda t: (t, t[:]))(torch.zeros(3)))


def test_in_place_triton_launch():
    def f(a, c):
        K.scale_inplace[(1,)](a, 2.0, a.numel())
        return c + 1

    def make(alias):
        def build():
            a = torch.ones(4, device=K.DEVICE)
            return (a, a if alias == "same" else a[:] if alias == "view" else torch.ones(4, device=K.DEVICE))
        return build
    run_calls(f, make("none"), make("same"), make("view"), make("none"))


def test_aliasing_failure_is_explained():
    opt = minidynamo.optimize(add_then_read, backend="aot_eager")
    opt(*three_separate())
    opt(*first_is_third())
    failure = opt.guard_failures()[-1]
    assert failure.kind == "TENSOR_ALIASING"
    assert "a (written by the graph) and c were separate memory when traced, now the same object" in failure.reason
    opt(*second_views_first())
    reasons = [f.reason for f in (opt.guard_failures()[-1], *opt.guard_failures()[-1].others)]
    assert any("overlapping views of one storage" in r for r in reasons), reasons



# --- found by the guard audit (docs/guards.md) ------------------------------------------------

class Plain:
    pass


def test_hasattr_and_getattr_default_on_a_user_object():
    """HASATTR / NOT_PRESENT_IN_GENERIC_DICT: an attribute the object lacks, on the instance
    or on its class, pinned absent."""
    def f(o, x):
        return x * getattr(o, "scale", 5) + (1 if hasattr(o, "flag") else 0)

    def make(scale=None, flag=False):
        def build():
            o = Plain()
            if scale is not None:
                o.scale = scale
            if flag:
                o.flag = True
            return o, torch.ones(2)
        return build
    run_calls(f, make(), make(scale=2), make(flag=True), make(), make(scale=3, flag=True))


def test_hasattr_on_an_attribute_added_to_the_class():
    class Late:
        pass

    def f(o, x):
        return x + 1 if hasattr(o, "flag") else x
    opt = minidynamo.optimize(f)
    x = torch.ones(2)
    same(opt(Late(), x), f(Late(), x))
    Late.flag = True
    same(opt(Late(), x), f(Late(), x))
    del Late.flag
    same(opt(Late(), x), f(Late(), x))


class Color:
    RED = None
    BLUE = None


Color.RED, Color.BLUE = Color(), Color()


def test_identity_of_user_objects_is_guarded():
    """`c is Color.RED` on objects passed in (ID_MATCH between two sources): the answer is
    pinned, not folded once."""
    import enum

    class Mode(enum.Enum):
        A = 1
        B = 2

    def f(m, c, x):
        y = x * 2 if m is Mode.A else x
        return y + 1 if c is Color.RED else y
    run_calls(f, lambda: (Mode.A, Color.RED, torch.ones(2)), lambda: (Mode.B, Color.RED, torch.ones(2)),
              lambda: (Mode.A, Color.BLUE, torch.ones(2)), lambda: (Mode.B, Color.BLUE, torch.ones(2)))


def test_calls_inside_torch_func_transforms_run_eagerly():
    """FUNCTORCH_STACK_MATCH: under vmap/grad the tensors are functorch's wrappers, whose
    dispatch keys fail the entries traced outside; the call then runs eagerly (was: an
    InternalError from faking a batched tensor)."""
    from torch.func import grad, vmap

    def f(x):
        return (x.sin() * 2).sum()
    opt = minidynamo.optimize(f)
    x = torch.arange(3.0)
    same(opt(x), f(x))
    same(vmap(opt)(torch.ones(2, 3)), vmap(f)(torch.ones(2, 3)))
    same(grad(opt)(x), grad(f)(x))
    same(opt(x), f(x))
    assert opt.cache_entries()[0].hit_count >= 1


def test_optimizer_step_over_a_flat_buffer():
    """Parameters as views of one flat buffer (traced shared: the exact relation is checked
    on every call), against separate parameters and a gradient that is another parameter."""
    def step(ps, gs):
        for p, g in zip(ps, gs):
            p.add_(g, alpha=-0.5)
        return ps[0] * 1

    def flat():
        base = torch.arange(8.0)
        return list(base.split(2)), [torch.ones(2) for _ in range(4)]

    def separate():
        return [torch.arange(2.0) + 2 * i for i in range(4)], [torch.ones(2) for _ in range(4)]

    def grad_is_a_param():
        base = torch.arange(8.0)
        ps = list(base.split(2))
        return ps, [ps[1], torch.ones(2), torch.ones(2), torch.ones(2)]

    def shifted():  # the same buffer, views at other offsets: other overlaps
        base = torch.arange(10.0)
        return [base[1:3], base[2:4], base[5:7], base[7:9]], [torch.ones(2) for _ in range(4)]
    opts = run_calls(step, flat, flat, separate, grad_is_a_param, shifted, flat)
    assert entries(opts) == [4, 4]


def test_tied_parameters():
    class Tied(torch.nn.Module):
        def __init__(self, tie):
            super().__init__()
            self.a = torch.nn.Linear(2, 2, bias=False)
            self.b = torch.nn.Linear(2, 2, bias=False)
            with torch.no_grad():
                self.a.weight.copy_(torch.eye(2))
                self.b.weight.copy_(torch.eye(2) * 2)
            if tie:
                self.b.weight = self.a.weight

    def step(m):
        with torch.no_grad():
            m.a.weight.mul_(2)
            m.b.weight.mul_(3)
        return m.a.weight.sum() + m.b.weight.sum()
    opts = run_calls(step, lambda: (Tied(False),), lambda: (Tied(True),), lambda: (Tied(False),))
    assert entries(opts) == [2, 2]


def test_hasattr_on_a_module_that_later_registers_it():
    """A module's attributes also live in its parameters, buffers and submodules: the
    absence is `not hasattr(m, 'extra')`, which asks Module.__getattr__ too."""
    def f(m, x):
        return m(x) + (m.extra if hasattr(m, "extra") else 0)
    m = torch.nn.Linear(2, 2)
    opt = minidynamo.optimize(f)
    x = torch.ones(2)
    same(opt(m, x), f(m, x))
    m.register_buffer("extra", torch.full((2,), 100.0))
    same(opt(m, x), f(m, x))
    del m.extra
    m.extra = torch.nn.Parameter(torch.ones(2))
    same(opt(m, x), f(m, x))


def test_many_inputs_over_one_storage_get_their_own_entry(monkeypatch):
    """Past aliasing.RELAX_MAX inputs, separate-storage entries do not serve disjoint views of
    one storage (that check runs pair by pair): such calls get an entry traced over the
    shared storage, checked on its fast path."""
    from minidynamo import aliasing
    monkeypatch.setattr(aliasing, "RELAX_MAX", 2)

    def step(ps):
        for p in ps:
            p.mul_(2)
        return ps[0] + 0

    def separate():
        return ([torch.ones(2), torch.ones(2), torch.ones(2)],)

    def flat():
        return (list(torch.ones(6).split(2)),)
    opts = run_calls(step, separate, flat, flat, separate)
    assert entries(opts) == [2, 2]
    assert all(e.hit_count >= 1 for o in opts for e in o.cache_entries())
