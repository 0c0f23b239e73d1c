"""Objects of user nn.Module subclasses made inside the optimized function (transformers'
`ACT2FN[name]` makes a new activation module in the forward that calls it): the class's
`__init__` traced, nn.Module.__init__ / __setattr__ / __getattr__ modelled, the forward
inlined; one made in the trace that escapes is made after the graph with the same state.
Modules with parameters or buffers decline, naming why."""
import functools
import math

import pytest
import torch
import torch.nn as nn

import minidynamo
from helpers import CountingBackend, check


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4,)), generator=g)


# --- classes of the kind transformers' activations are ------------------------------------
class GELUActivation(nn.Module):
    def __init__(self, use_gelu_python: bool = False):
        super().__init__()
        self.act = self._gelu_python if use_gelu_python else nn.functional.gelu

    def _gelu_python(self, x):
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def forward(self, x):
        return self.act(x)


class GELUTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = functools.partial(nn.functional.gelu, approximate="tanh")

    def forward(self, x):
        return self.act(x)


class NewGELU(nn.Module):  # no __init__ of its own: Module's
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Clipped(nn.Module):
    def __init__(self, min: float, max: float):
        if min > max:
            raise ValueError(f"min should be < max (got min: {min}, max: {max})")
        super().__init__()
        self.min = min
        self.max = max

    def forward(self, x):
        return torch.clip(nn.functional.gelu(x), self.min, self.max)


class ClassInstantier(dict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACT2FN = ClassInstantier({"gelu": GELUActivation, "gelu_python": (GELUActivation, {"use_gelu_python": True}),
                          "gelu_pytorch_tanh": GELUTanh, "gelu_new": NewGELU,
                          "gelu_10": (Clipped, {"min": -10, "max": 10}), "relu": nn.ReLU})


def state(m):
    """What a module made in the call is: its class, its instance dictionary's keys in
    order, training, its submodules (recursively) and its plain attributes."""
    plain = {k: v for k, v in vars(m).items() if not k.startswith("_") and not isinstance(v, torch.Tensor)}
    return (type(m), list(vars(m)), m.training, {k: state(c) if c is not None else None
                                                 for k, c in m._modules.items()},
            {k: (v if not callable(v) else getattr(v, "__name__", type(v))) for k, v in plain.items()},
            list(m.parameters()), list(m.buffers()))


# --- made and called in the forward: one graph ---------------------------------------------
@pytest.mark.parametrize("name", ["gelu", "gelu_python", "gelu_pytorch_tanh", "gelu_new", "gelu_10", "relu"])
def test_act2fn_made_and_called(name):
    def f(x):
        return ACT2FN[name](x) * 2

    check(f, t(), t(4, seed=1), kind="graph", graphs=1)


def test_pooler_as_deberta_calls_it():
    class Pooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(4, 4)
            self.act_name = "gelu"

        def forward(self, h):
            return ACT2FN[self.act_name](self.dense(h[:, 0]))

    pooler = Pooler()
    check(lambda h: pooler(h), t(2, 3, 4), kind="graph")


def test_made_in_train_mode_whatever_the_caller():
    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.0)

        def forward(self, x):
            return self.drop(x) + (1 if self.training else 0)

    outer = nn.Identity().eval()

    def f(x):
        return outer(Drop()(x)), outer.training

    check(f, t(), kind="graph")


def test_submodules_made_inside_and_passed_in():
    passed = nn.Linear(4, 4)

    class Block(nn.Module):
        def __init__(self, lin):
            super().__init__()
            self.act = GELUActivation()
            self.seq = nn.Sequential(NewGELU(), nn.ReLU())
            self.lin = lin
            self.tag = "block"

        def forward(self, x):
            return self.seq(self.lin(self.act(x))), self.tag

    check(lambda x: Block(passed)(x), t(3, 4), kind="graph")


def test_containers_of_user_modules():
    def f(x):
        layers = nn.ModuleList([GELUActivation(), NewGELU()])
        for layer in layers:
            x = layer(x)
        return nn.Sequential(GELUTanh(), Clipped(-1.0, 1.0))(x), len(layers)

    check(f, t(), kind="graph")


def test_module_init_by_name_and_arguments():
    class ByName(nn.Module):
        def __init__(self, scale, *, shift=0.0):
            nn.Module.__init__(self)
            self.scale, self.shift = scale, shift

        def forward(self, x):
            return x * self.scale + self.shift

    check(lambda x: ByName(2.0, shift=1.0)(x) + ByName(3)(x), t(), kind="graph")


def test_attribute_before_module_init_keeps_its_place():
    class Early(nn.Module):
        def __init__(self):
            self.early = 3
            super().__init__()
            self.late = 4

        def forward(self, x):
            return x + self.early + self.late

    def f(x):
        m = Early()
        return m(x), m

    info = check(f, t(), kind="graph")
    eager, got = f(t())[1], info.opt(t())[1]
    assert state(got) == state(eager)


def test_class_attribute_shadows_a_submodule():
    class Shadow(nn.Module):
        act = None  # found by object's lookup before Module.__getattr__ sees _modules

        def __init__(self):
            super().__init__()
            self.act = NewGELU()

        def forward(self, x):
            return (x if self.act is None else self.act(x)) + 1

    check(lambda x: Shadow()(x), t(), kind="graph")


def test_submodule_set_to_none_and_deleted():
    class Swap(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = NewGELU()
            self.b = GELUActivation()
            self.a = None
            del self.b
            self.b = 2.0

        def forward(self, x):
            return x * self.b, self.a

    check(lambda x: Swap()(x), t(), kind="graph")


def test_forward_replaced_on_the_instance():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.forward = self.double

        def double(self, x):
            return x * 2

        def forward(self, x):
            return x

    check(lambda x: Plain()(x), t(), kind="graph")


def test_own_call():
    class Called(nn.Module):
        def __call__(self, x):
            return x - 1

    check(lambda x: Called()(x), t(), kind="graph")


# --- escaping: made after the graph with the same state -------------------------------------
def test_returned_module_is_made_again_exactly():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = GELUActivation(True)
            self.seq = nn.Sequential(NewGELU(), nn.ReLU())
            self.k = 2

        def forward(self, x):
            return self.seq(self.act(x)) * self.k

    def f(x):
        m = Block()
        return m(x), m, [m]

    info = check(f, t(), kind="graph")
    eager, got = f(t()), info.opt(t())
    assert state(got[1]) == state(eager[1])
    assert got[2][0] is got[1]
    assert got[1].act.act.__self__ is got[1].act  # the bound method rebuilt over the new object
    torch.testing.assert_close(got[1](t()), eager[1](t()))


def test_live_at_a_graph_break():
    def f(x):
        m = GELUActivation()
        y = m(x)
        minidynamo.graph_break()
        return m(y) + 1, m

    info = check(f, t(), kind="break")
    assert state(info.opt(t())[1]) == state(f(t())[1])


def test_stored_on_a_passed_in_module():
    holder = nn.Module()

    def f(x):
        holder.extra = 1  # a plain attribute: written after the graph
        act = GELUTanh()
        return act(x), act.training

    check(f, t(), kind="graph")


# --- what declines, and why ----------------------------------------------------------------
def test_parameter_declines_naming_why():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))

        def forward(self, x):
            return x * self.w

    def f(x):
        return Scaled()(x)

    check(f, t(), kind="break", reason="construct")
    with pytest.raises(minidynamo.Unsupported, match="no parameters or buffers"):
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(f)(t())


def test_buffer_and_parameterful_submodule_decline():
    class WithBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(4))

        def forward(self, x):
            return x + self.b

    class WithLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

    check(lambda x: WithBuffer()(x), t(), kind="break", reason="construct")
    with pytest.raises(minidynamo.Unsupported, match="allocates and initialises parameters"):
        minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(lambda x: WithLinear()(x))(t())


def test_internal_tables_are_not_handed_out():
    def f(x):
        m = nn.Sequential()
        act = GELUActivation()
        return act(x), len(list(act.children())), len(m)

    check(f, t(), kind="break", reason="construct")


def test_errors_as_eager():
    class Early(nn.Module):
        def __init__(self):
            self.sub = NewGELU()  # AttributeError: before Module.__init__
            super().__init__()

    class BadChild(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = NewGELU()
            self.sub = 3  # TypeError: a submodule's name takes a module or None

    class Args(nn.Module):
        def __init__(self):
            super().__init__(3)  # TypeError: Module.__init__ takes no arguments

    for cls in (Early, BadChild, Args):
        def f(x, cls=cls):
            return cls(), x + 1

        check(f, t(), kind="break", reason="exceptions")
    check(lambda x: (Clipped(2.0, 1.0), x), t(), kind="break", reason="exceptions")
    check(lambda x: NewGELU().missing, t(), kind="break", reason="exceptions")


def test_own_setattr_declines():
    class Custom(nn.Module):
        def __setattr__(self, name, value):
            super().__setattr__(name, value)

        def forward(self, x):
            return x

    check(lambda x: Custom()(x) + 1, t(), kind="break", reason="call")


# --- guards: the class and the process-wide hooks --------------------------------------------
def test_patching_the_class_recompiles():
    class Act(nn.Module):
        def forward(self, x):
            return x + 1

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(lambda x: Act()(x))
    x = t()
    torch.testing.assert_close(opt(x), x + 1)
    Act.forward = lambda self, x: x - 1
    torch.testing.assert_close(opt(x), x - 1)
    assert backend.calls == 2


def test_process_wide_forward_hook_traced():
    seen = []

    def hook(module, args, out):
        seen.append(type(module).__name__)
        return out * 2

    handle = nn.modules.module.register_module_forward_hook(hook)
    try:
        check(lambda x: NewGELU()(x), t(), kind="graph")  # the append: written after the graph
    finally:
        handle.remove()
    assert seen == ["NewGELU"] * 4  # eager, twice optimized, once under fullgraph=True
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(lambda x: NewGELU()(x))
    x = t()
    opt(x)
    handle = nn.modules.module.register_module_forward_hook(lambda m, a, o: o + 100)
    try:
        torch.testing.assert_close(opt(x), NewGELU()(x))  # the new hook is seen: a recompile
    finally:
        handle.remove()


def test_class_attribute_none_is_found_before_getattr():
    class Lazy:
        value = None

        def __getattr__(self, name):
            return "from __getattr__"

    def f(x):
        obj = Lazy()
        return x + 1, obj.value, obj.other

    check(f, t(), kind="graph")


# --- `t.requires_grad = flag` (wav2vec2's feature encoder sets it on its input's view) -------
def test_requires_grad_write_that_changes_nothing():
    def f(x, w):
        h = x[:, None]
        h.requires_grad = False  # a leaf without grad: nothing changes
        y = (h * w).sum(-1)
        y.requires_grad = True  # computed with grad: already so, but not a leaf: eager raises
        return y

    check(f, (t(2, 3), t(3).requires_grad_()), kind="break", reason="exceptions")

    def g(x):
        h = x[:, None] * 2
        h.requires_grad = False
        return h

    check(g, t(2, 3), kind="graph")


def test_requires_grad_write_that_changes_the_flag_breaks():
    def f(x, w):
        h = x[:, None]
        h.requires_grad = True  # autograd metadata, not an op: backends drop it
        return h * w

    info = check(f, (t(2, 3), t(3).requires_grad_()), kind="break", reason="construct")
    assert "changes the autograd flag" in str(info.break_reason)
    check(lambda x: setattr(x[:, None], "requires_grad", 1), t(2, 3), kind="break", reason="exceptions")


def test_setattr_builtin_as_store_attr():
    holder = nn.Module()

    def f(x):
        setattr(holder, "flag", True)  # as `holder.flag = True`: written after the graph
        act = GELUActivation()
        setattr(act, "scale", 2.0)
        return act(x) * act.scale

    check(f, t(), kind="graph")
    assert holder.flag is True
