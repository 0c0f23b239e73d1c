"""A checkpointed body that stores into an outside object's attribute or a module global
and puts the value back before it returns: nothing is left for eager's recompute to do
again, so the body is captured and the stores are dropped. Stores left changed still
break (eager runs them twice). Differential: outputs, gradients, saved tensors and the
outside state after the call equal eager's."""
import functools

import torch
import torch.nn.functional as F
from helpers import CountingBackend
from test_checkpoint import _breaks, _checkpoint_nodes, _differential
from torch.utils.checkpoint import checkpoint

import minidynamo

ACTIVE = None  # set around a body, as a context variable would be
COUNT = 0


def _scaled(h):
    return h * 3.0 if ACTIVE == "triple" else h


def test_global_set_and_put_back_is_captured():
    lin = torch.nn.Linear(8, 8)

    def body(a):
        global ACTIVE
        saved = ACTIVE
        ACTIVE = "triple"
        try:
            return _scaled(F.gelu(lin(a)))  # the body itself sees the stored value
        finally:
            ACTIVE = saved

    def f(m, x):
        return checkpoint(body, x, use_reentrant=False) * 2

    x = torch.randn(3, 8, requires_grad=True)
    _, (out, _, _) = _differential(f, lin, x)
    assert ACTIVE is None
    assert torch.allclose(out, F.gelu(lin(x)) * 6)


class ContextVarLike:
    """A context variable that, under a compiler, keeps its value in an attribute: `set`
    returns the previous value, `reset` puts it back (kernel hub layers' CompileableContextVar)."""

    def __init__(self):
        self.value = None
        self.in_use = False

    def get(self):
        return self.value if self.in_use else None

    def set(self, value):
        previous = self.value
        self.value = value
        self.in_use = True
        return previous

    def reset(self, token):
        self.value = token
        self.in_use = token is not None


ACTIVE_FUNCS = ContextVarLike()


def routed(cls):
    """A decorator of a layer class, as kernel hub layers': the layer's own functions made
    active around its forward."""
    forward = cls.forward

    @functools.wraps(forward)
    def new_forward(self, *args, **kwargs):
        active = dict(ACTIVE_FUNCS.get() or {})
        active["act"] = self.act
        token = ACTIVE_FUNCS.set(active)
        try:
            return forward(self, *args, **kwargs)
        finally:
            ACTIVE_FUNCS.reset(token)

    cls.forward = new_forward
    return cls


def act(h):
    found = ACTIVE_FUNCS.get()
    return found["act"](h) if found else F.gelu(h)


@routed
class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.act = torch.tanh

    def forward(self, x, scale=1.0):
        return act(self.lin(x)) * scale + x


class Model(torch.nn.Module):
    """transformers' gradient checkpointing: a partial of checkpoint, each layer's bound call."""

    def __init__(self, n=2):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(n))
        self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)

    def forward(self, x, scale):
        for layer in self.layers:
            x = self._gradient_checkpointing_func(functools.partial(layer.__call__, scale=scale), x)
        return x


def test_hf_style_layers_setting_a_context_variable_are_captured():
    model = Model()
    _differential(lambda m, x, s: m(x, s), model, torch.randn(3, 8, requires_grad=True),
                  torch.randn(8, requires_grad=True), nodes=2)
    assert ACTIVE_FUNCS.value is None and ACTIVE_FUNCS.in_use is False


def test_context_variable_already_set_outside_is_put_back():
    model = Model()
    ACTIVE_FUNCS.set({"outer": torch.relu})
    try:
        before = ACTIVE_FUNCS.value
        _differential(lambda m, x, s: m(x, s), model, torch.randn(3, 8, requires_grad=True),
                      torch.randn(8, requires_grad=True), nodes=2)
        assert ACTIVE_FUNCS.value is before and ACTIVE_FUNCS.in_use is True
    finally:
        ACTIVE_FUNCS.reset(None)


class Flags:
    def __init__(self, fast):
        self.fast = fast


def test_constant_put_back_is_guarded_on_the_value_found():
    """`flags.fast = False ... flags.fast = False` leaves flags as found only where it was
    False: a call with True must not reuse the capture."""
    lin = torch.nn.Linear(4, 4)

    def f(flags, x):
        def body(a):
            flags.fast = False
            y = lin(a).relu()
            flags.fast = False
            return y

        return checkpoint(body, x, use_reentrant=False) * 2

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for fast in (False, True, False):
        eager_flags, opt_flags = Flags(fast), Flags(fast)
        x = torch.randn(2, 4, requires_grad=True)
        want = f(eager_flags, x)
        got = opt(opt_flags, x)
        assert torch.equal(got, want)
        assert opt_flags.fast == eager_flags.fast is False
    first = backend.graphs[0]
    assert len(_checkpoint_nodes(first)) == 1
    assert not any(_checkpoint_nodes(gm) for gm in backend.graphs[1:])  # True: a break


def test_attribute_left_changed_breaks():
    lin = torch.nn.Linear(4, 4)
    flags = Flags(False)

    def f(x):
        def body(a):
            flags.fast = not flags.fast  # eager's recompute toggles it back
            return lin(a).relu()

        return checkpoint(body, x, use_reentrant=False) * 2

    info = _breaks(f, torch.randn(2, 4, requires_grad=True), reason="side_effect")
    assert "'fast'" in info.break_reason.detail


def test_global_counted_breaks_and_counts_twice_as_eager():
    lin = torch.nn.Linear(4, 4)

    def body(a):
        global COUNT
        COUNT += 1
        return lin(a).relu()

    def f(x):
        return checkpoint(body, x, use_reentrant=False) * 2

    global COUNT
    counts = []
    for run in (f, minidynamo.optimize(backend=CountingBackend())(f)):
        COUNT = 0
        run(torch.randn(2, 4, requires_grad=True)).sum().backward()
        counts.append(COUNT)
    assert counts == [2, 2], counts
    info = _breaks(f, torch.randn(2, 4, requires_grad=True), reason="side_effect")
    assert "COUNT" in info.break_reason.detail


def test_global_set_to_another_object_and_back_to_an_equal_constant():
    """Put back as an equal constant (a new string object) counts as put back; set to an
    object and not put back declines."""
    lin = torch.nn.Linear(4, 4)

    def back(a):
        global ACTIVE
        ACTIVE = [1]
        ACTIVE = None
        return lin(a).relu()

    def left(a):
        global ACTIVE
        ACTIVE = ["on"]
        return lin(a).relu()

    _differential(lambda m, x: checkpoint(back, x, use_reentrant=False), lin, torch.randn(2, 4, requires_grad=True))
    global ACTIVE
    try:
        _breaks(lambda x: checkpoint(left, x, use_reentrant=False) * 2, torch.randn(2, 4, requires_grad=True),
                reason="side_effect")
        assert ACTIVE == ["on"]
    finally:
        ACTIVE = None


def test_function_backward_storing_a_global_runs_at_backward_time():
    """A store in an autograd.Function's backward is not made at forward time."""
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            global COUNT
            COUNT += 1
            return g * 2

    def f(x):
        return Double.apply(x).sin()

    global COUNT
    seen = []
    for run in (f, minidynamo.optimize(backend=CountingBackend())(f)):
        COUNT = 0
        y = run(torch.randn(3, requires_grad=True))
        seen.append(COUNT)
        y.sum().backward()
        seen.append(COUNT)
    assert seen == [0, 1, 0, 1], seen


def test_store_of_the_frame_before_the_body_is_kept():
    """The frame sets an attribute, the body changes it and puts the frame's value back:
    the frame's store is written back after the graph, the body's are dropped."""
    lin = torch.nn.Linear(4, 4)

    def f(flags, x):
        flags.fast = "frame"

        def body(a):
            saved = flags.fast
            flags.fast = "body"
            y = lin(a).relu() * (2 if flags.fast == "body" else 3)
            flags.fast = saved
            return y

        return checkpoint(body, x, use_reentrant=False) * 2

    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(f)
    for _ in range(2):
        eager_flags, opt_flags = Flags(None), Flags(None)
        x = torch.randn(2, 4, requires_grad=True)
        assert torch.equal(opt(opt_flags, x), f(eager_flags, x))
        assert opt_flags.fast == eager_flags.fast == "frame"
    assert backend.calls == 1 and len(_checkpoint_nodes(backend.graphs[0])) == 1
