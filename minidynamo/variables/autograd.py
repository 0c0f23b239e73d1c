"""`MyFn.apply(...)` of a `torch.autograd.Function`: its forward and backward traced into
two bodies held by one graph node (run time: autograd_function.py).

The forward is traced with grad mode off (as `apply` runs it) into a body that lifts the
tensors it uses; a Function in the newer style (`forward(*args)` without ctx, plus
`setup_context(ctx, inputs, output)`) has both traced into that body, one after the
other, as autograd calls them; apply's keyword arguments take forward's positions as
torch maps them (`_forward_arguments`). The backward is traced right after, against gradients shaped like the
forward's outputs, into a second body whose lifted values are the forward's saved values.
Where the backward cannot be traced (it reads gradient values, prints, changes an outside
list), or the forward asked for unmaterialized gradients, the node runs the user's backward
eagerly on the saved values instead, and `explain()` shows why on the node.

What the forward leaves where the caller can reach it (a tensor appended to a list it was
given) the node returns after its outputs, and the trackers holding it are renamed in
place to name that output; a backward may not change what the caller can see
(function_effects.py). The backward is traced with autocast off, the state the engine
runs it in when `.backward()` is called outside autocast.
"""
from __future__ import annotations

import dis
import functools
import inspect
import types

import torch
import torch.fx as fx

from .._compat import CO_VARARGS, CO_VARKEYWORDS
from ..autograd_function import ApplySpec, AutogradFunctionApply, EagerBackward
from ..exc import Unsupported, unsupported
from ..subgraph import LiftingGraph, tracing_into
from .base import VariableTracker
from .constant import ConstantVariable
from .function_effects import escaping_outputs, find_escaping, made_state, outside_unchanged, rename_escaping
from .call_binding import bind_arguments
from .functions import BoundMethodVariable, UserFunctionVariable
from .lists import BaseListVariable, TupleVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable
from ..guards import Guard
from ..sources import AttrSource, ObjectSource
from .torch_graph_break import torch_allowed_function

_BASE = torch.autograd.Function
_ONCE_DIFFERENTIABLE_CODE = torch.autograd.function.once_differentiable(lambda ctx: None).__code__


_APPLY = inspect.getattr_static(_BASE, "apply")  # a classmethod (torch 2.13) or a C method (2.14)


def is_function_apply(value) -> bool:
    """`MyFn.apply` bound to a name (`my_op = MyFn.apply`)."""
    if not isinstance(value, (types.MethodType, types.BuiltinMethodType)):  # before any getattr:
        return False  # an object's own __getattr__ is user code, never run by a trace
    return is_function_class(value.__self__) and value.__name__ == "apply"


def is_function_class(value) -> bool:
    """A Function subclass whose apply is torch's own."""
    return (isinstance(value, type) and issubclass(value, _BASE) and value is not _BASE
            and inspect.getattr_static(value, "apply") is _APPLY)


class FunctionApplyVariable(VariableTracker):
    """`MyFn.apply`: calling it captures the Function."""

    __slots__ = ("fn_cls", "cls_source")

    def __init__(self, fn_cls, source=None, cls_source=None):
        super().__init__(source)
        self.fn_cls = fn_cls
        self.cls_source = cls_source  # where the class is read from (its methods are pinned)

    def python_type(self):
        return types.MethodType

    def describe(self):
        return f"{self.fn_cls.__qualname__}.apply"

    def call_function(self, tx, args, kwargs):
        if self.cls_source is None:
            unsupported("construct", f"{self.describe()} of a class that could not be guarded")
        for method in ("forward", "setup_context", "backward"):  # the class may be patched between calls
            tx.output.guards.add(Guard("ID_MATCH", AttrSource(self.cls_source, method),
                                       getattr(self.fn_cls, method)))
        with torch_allowed_function(self.fn_cls):
            return capture_apply(tx, self.fn_cls, list(args), dict(kwargs), self.cls_source)


# torch's Function.__init__ only warns that Function objects are deprecated (through torch
# 2.15); a torch whose __init__ raises, or does more, is not modelled.
_INIT_ONLY_WARNS = {i.opname for i in dis.get_instructions(_BASE.__init__)}.isdisjoint(
    {"RAISE_VARARGS", "STORE_ATTR"}) and "warn" in _BASE.__init__.__code__.co_names


def is_plain_function_class(cls) -> bool:
    """A Function subclass whose objects are torch's own (no __init__/__new__ of the user's):
    `MyFn()` only makes a handle whose `apply` is the class's."""
    return _INIT_ONLY_WARNS and is_function_class(cls) and cls.__init__ is _BASE.__init__ \
        and cls.__new__ is _BASE.__new__


def make_function_object(tx, cls, args, kwargs):
    """`MyFn()` in the trace (the older style `MyFn().apply(x)`), or None with arguments.
    The trace runs nothing for real, so torch's DeprecationWarning about such objects is not
    given by the optimized call (as under torch.compile); an eager run (a fallback) gives it."""
    if args or kwargs:
        return None
    return FunctionObjectVariable(cls)


class FunctionObjectVariable(VariableTracker):
    """An object of a Function subclass made in the trace: its `apply` is the class's
    (a classmethod); anything else it is asked for is declined, and so is letting it escape."""

    __slots__ = ("fn_cls",)

    def __init__(self, fn_cls):
        super().__init__(None)
        self.fn_cls = fn_cls

    def python_type(self):
        return self.fn_cls

    def describe(self):
        return f"a {self.fn_cls.__qualname__} object"

    def var_getattr(self, tx, name):
        if name != "apply":
            unsupported("construct", f"attribute {name!r} of {self.describe()} made while tracing")
        # The class is the one the trace called (pinned where it was read); its methods are
        # guarded by FunctionApplyVariable when apply is called.
        cls_source = ObjectSource(self.fn_cls, self.fn_cls.__qualname__)
        return FunctionApplyVariable(self.fn_cls, AttrSource(cls_source, "apply"), cls_source)


class FunctionCtxVariable(VariableTracker):
    """The `ctx` of one apply, as the forward and then the backward see it."""

    __slots__ = ("attrs", "saved", "needs_input_grad", "non_differentiable", "dirty",
                 "materialize_grads", "phase", "fn_name")

    def __init__(self, fn_name: str, needs_input_grad: tuple):
        super().__init__(None)
        self.fn_name = fn_name
        self.attrs: dict = {}
        self.saved: list | None = None  # trackers given to save_for_backward (None allowed)
        self.needs_input_grad = needs_input_grad
        self.non_differentiable: list = []
        self.dirty: list = []
        self.materialize_grads = True
        self.phase = "forward"

    def describe(self):
        return f"ctx of {self.fn_name}"

    def consumer_snapshot(self, of) -> tuple:
        """What a later reader could see of the ctx (generators.py compares it before and
        after a generator is drained): `of(tracker)` snapshots an attribute's value."""
        return ("ctx", self.phase, self.materialize_grads, tuple((k, id(v), of(v)) for k, v in self.attrs.items()),
                tuple(map(id, self.saved or ())), tuple(map(id, self.non_differentiable)), tuple(map(id, self.dirty)))

    def python_type(self):
        return torch.autograd.function.FunctionCtx

    def var_getattr(self, tx, name):
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(b) for b in self.needs_input_grad])
        if name in ("saved_tensors", "saved_variables"):
            if self.phase == "forward" or self.saved is None:
                unsupported("exceptions", f"ctx.{name} read before save_for_backward ran its backward")
            return TupleVariable(list(self.saved))
        if name in self.attrs:
            return self.attrs[name]
        if name in ("save_for_backward", "mark_non_differentiable", "mark_dirty", "set_materialize_grads"):
            return BoundMethodVariable(self, name)
        if name == "materialize_grads":
            return ConstantVariable(self.materialize_grads)
        unsupported("exceptions", f"AttributeError: {self.fn_name}'s ctx has no attribute {name!r}",
                    raised=AttributeError)

    def store_attr(self, tx, name, value):
        if self.phase != "forward":
            unsupported("side_effect", f"setting ctx.{name} in {self.fn_name}'s backward")
        if name in ("saved_tensors", "needs_input_grad", "materialize_grads"):
            unsupported("construct", f"assigning ctx.{name}")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        if self.phase != "forward" or kwargs:
            unsupported("call", f"ctx.{name}() in {self.fn_name}'s {self.phase}")
        if name == "save_for_backward":
            for a in args:
                if not (isinstance(a, TensorVariable) or _is_none(a)):
                    unsupported("exceptions", "TypeError: save_for_backward can only save variables, "
                                              f"but argument is of type {a.python_type().__name__}")
            self.saved = list(args)
        elif name in ("mark_non_differentiable", "mark_dirty"):
            if not all(isinstance(a, TensorVariable) for a in args):
                unsupported("exceptions", f"TypeError: ctx.{name}() takes tensors")
            (self.non_differentiable if name == "mark_non_differentiable" else self.dirty).extend(args)
        elif name == "set_materialize_grads" and len(args) == 1 and args[0].is_python_constant():
            self.materialize_grads = bool(args[0].as_python_constant())
        else:
            unsupported("call", f"ctx.{name}({', '.join(a.describe() for a in args)})")
        return ConstantVariable(None)


def _is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def _static_function(cls, name):
    """The function autograd calls as `cls.<name>(ctx, ...)`: a @staticmethod's, or a plain
    function in the class body (read through the class, it is the same function)."""
    found = inspect.getattr_static(cls, name)
    if isinstance(found, staticmethod):
        found = found.__func__
    if not isinstance(found, types.FunctionType):
        unsupported("construct", f"{cls.__qualname__}.{name} is not a Python function")
    return found


def _forward_arguments(tx, forward_var, takes_ctx: bool, args: list, kwargs: dict) -> list:
    """The positional arguments `apply(*args, **kwargs)` calls forward with, bound as torch
    binds them; a call torch rejects declines with its TypeError (the eager run raises it).

    A setup_context Function's arguments are first bound to forward's signature, defaults
    filled in (setup_context's `inputs` holds them all). Then keyword arguments take the
    positions of forward's parameters of the same name, defaults left out: positions after
    the last one given are left to forward's own defaults, and one skipped is an error."""
    forward = forward_var.fn
    given_keywords = bool(kwargs)
    if not takes_ctx:  # bound first: a binding error is raised before anything else
        args, kwargs = _bound_with_defaults(tx, forward_var, args, kwargs)
        if not apply_takes_keywords():  # such a torch passes forward the bound positionals only
            kwargs = {}
    if given_keywords and not apply_takes_keywords():
        unsupported("exceptions", "TypeError: apply() takes no keyword arguments")
    if not kwargs:
        return list(args)
    code = forward.__code__
    params = code.co_varnames[1 if takes_ctx else 0:code.co_argcount]
    last = len(args) - 1
    for name in kwargs:
        if name not in params:
            unsupported("exceptions", f"TypeError: forward() got an unexpected keyword argument {name!r}")
        if params.index(name) < len(args):
            unsupported("exceptions", f"TypeError: forward() got multiple values for argument {name!r}")
        last = max(last, params.index(name))
    slots = list(args) + [None] * (last + 1 - len(args))
    for name, value in kwargs.items():
        slots[params.index(name)] = value
    for i, value in enumerate(slots):
        if value is None:
            unsupported("exceptions", f"TypeError: forward() missing required argument: {params[i]!r} "
                                      f"(position {i})")
    return slots


@functools.cache
def apply_takes_keywords() -> bool:
    """Whether this torch's C `Function.apply` takes keyword arguments. Before 2.13 it raises
    TypeError for any keyword given to `apply`, and a setup_context Function's forward gets
    only the bound positional arguments (keyword-only parameters keep forward's defaults).
    Asked once, of a Function that does nothing."""
    class _Probe(_BASE):
        @staticmethod
        def forward(ctx, x, k=None):
            return x

        @staticmethod
        def backward(ctx, g):
            return g, None

    try:
        _Probe.apply(torch.zeros(()), k=1)
    except TypeError:
        return False
    return True


def _bound_with_defaults(tx, forward_var, args: list, kwargs: dict) -> tuple[list, dict]:
    """`inspect.signature(forward).bind(*args, **kwargs)` with defaults applied, as
    (bound.args, bound.kwargs): every positional parameter and the extra positional
    arguments, then keyword-only parameters and extra keywords."""
    forward = forward_var.fn
    if hasattr(forward, "__wrapped__") or hasattr(forward, "__signature__"):
        unsupported("construct", f"{forward.__qualname__} has a signature other than its code's "
                                 "(torch binds apply's arguments to the signature)")
    code = forward.__code__
    bound = bind_arguments(forward_var, tx, code, list(args), dict(kwargs))
    names = code.co_varnames
    n_pos, n_kwonly = code.co_argcount, code.co_kwonlyargcount
    positional = [bound[n] for n in names[:n_pos]]
    keyword = {n: bound[n] for n in names[n_pos:n_pos + n_kwonly]}
    rest = n_pos + n_kwonly
    if code.co_flags & CO_VARARGS:
        positional += list(bound[names[rest]].items)
        rest += 1
    if code.co_flags & CO_VARKEYWORDS:
        keyword.update(bound[names[rest]].items)
    return positional, keyword


def _method(cls, name, cls_source):
    """`cls.<name>` as autograd calls it, a tracker whose defaults are read through the class."""
    return UserFunctionVariable(_static_function(cls, name), AttrSource(cls_source, name) if cls_source else None)


def capture_apply(tx, cls, args: list, kwargs: dict, cls_source=None):
    """Trace `cls.apply(*args, **kwargs)`: one node holding the forward and backward bodies."""
    name = cls.__qualname__
    if inspect.getattr_static(cls, "vjp") is not inspect.getattr_static(_BASE, "vjp"):
        unsupported("construct", f"{name} defines vjp, which is not captured")
    output = tx.output
    # Inside another Function's forward (which runs under no_grad), the inner apply is a
    # node of that forward's body, run by the outer node as eager runs it: non-executable.
    # A backward's inner apply would record a graph under create_graph, which its body,
    # traced with grad off, does not model.
    inside = getattr(output.graph, "function_body", None)
    if inside == "backward" or (inside is None and isinstance(output.graph, LiftingGraph)):
        unsupported("construct", f"{name}.apply inside another Function's backward")
    # torch's test: forward takes no ctx where setup_context is overridden.
    setup_context = _method(cls, "setup_context", cls_source) if cls.setup_context is not _BASE.setup_context \
        else None
    forward_var = _method(cls, "forward", cls_source)
    args = _forward_arguments(tx, forward_var, setup_context is None, args, kwargs)
    backward = _static_function(cls, "backward")
    tensor_args = [a for a in args if isinstance(a, TensorVariable)]
    if len({id(a.node) for a in tensor_args}) != len(tensor_args):
        unsupported("construct", f"the same tensor passed twice to {name}.apply")
    needs = tuple(isinstance(a, TensorVariable) and a.fake.requires_grad for a in args)
    ctx = FunctionCtxVariable(name, needs)

    fwd = LiftingGraph(output.graph)
    fwd.function_body = "forward"
    for a in tensor_args:  # each tensor argument is an input with its own gradient slot
        fwd.lift(a.node)
    with tracing_into(output, fwd, grad_enabled=False):
        if setup_context is None:
            result = tx.inline_call(forward_var, [ctx, *args], {})
        else:  # forward(*inputs), then setup_context(ctx, inputs, output): what apply calls
            result = tx.inline_call(forward_var, list(args), {})
            tx.inline_call(setup_context, [ctx, TupleVariable(list(args)), result], {})
        returned_tuple = isinstance(result, TupleVariable) and result.tuple_type is tuple
        user_outputs = list(result.items) if returned_tuple else [result]
        outs = [o for o in user_outputs if isinstance(o, TensorVariable)]
        for o in user_outputs:
            if not isinstance(o, TensorVariable) and not o.is_python_constant():
                unsupported("construct", f"{name}.forward returned {o.describe()}")
        out_nodes = [fwd.lift(o.node) for o in outs]
    # Values the forward made that the caller can reach (appended to a list it was given, a
    # size it returned): the node returns them too, and their trackers then name its outputs.
    escaping, reachable = find_escaping(fwd, ctx, [*args, *(v for v, _ in output.mutated.values()),
                                                   *(o for o in user_outputs if not isinstance(o, TensorVariable))])
    extra_nodes = escaping_outputs(name, fwd, escaping, outs)
    arg_index = {id(a.node): i for i, a in enumerate(args) if isinstance(a, TensorVariable)}
    dirty_idx = tuple(i for i, o in enumerate(outs) if any(o is d for d in ctx.dirty))
    if len(dirty_idx) != len(ctx.dirty):
        unsupported("construct", f"{name} marks dirty a tensor it does not return")
    non_diff_idx = tuple(i for i, o in enumerate(outs) if any(o is d for d in ctx.non_differentiable))
    once = backward.__code__ is _ONCE_DIFFERENTIABLE_CODE
    user_backward = backward.__wrapped__ if once else backward

    ctx.phase = "backward"
    bwd = LiftingGraph(fwd, lift_from=lambda n: n if n.graph is fwd else fwd.lift(n))
    bwd.function_body = "backward"
    eager, bwd_nodes = None, None
    if not ctx.materialize_grads:
        eager_reason = "the forward set materialize_grads(False): gradients may be None"
    else:
        before = made_state(ctx.attrs.values())
        try:
            with outside_unchanged(output, f"{name}.backward"):
                bwd_nodes = _trace_backward(tx, ctx, bwd, user_backward, user_outputs, outs, args, fwd, arg_index)
            eager_reason = None
        except Unsupported as e:
            eager_reason = f"{e.category}: {e.detail}"
        if made_state(ctx.attrs.values()) != before:  # the trace's objects cannot be put back
            unsupported("side_effect", f"{name}.backward changes an object its ctx holds, which runs at "
                                       "backward time")
    if eager_reason is not None:
        bwd = LiftingGraph(fwd)  # an empty body: the user's backward runs eagerly
        eager, held = _eager_backward(ctx, user_backward, eager_reason, user_outputs, outs, args, fwd,
                                      {id(v) for v in reachable})
        saved_nodes = [fwd.lift(v.node) if isinstance(v, TensorVariable) else None
                       for v in (ctx.saved or [])] + [fwd.lift(v.node) for v in held]
        bwd.output(())
    else:
        saved_nodes = list(bwd.lifted)
        bwd.output(tuple(bwd_nodes))
    fwd.output(((*out_nodes, *extra_nodes), tuple(saved_nodes)))
    spec = ApplySpec(cls.__name__, len(outs), non_diff_idx, dirty_idx, ctx.materialize_grads, once, eager,
                     n_escaping=len(extra_nodes),
                     saved_values_idx=tuple(i for i, n in enumerate(saved_nodes)
                                            if n is not None and not isinstance(n.meta.get("val"), torch.Tensor)))
    results, renamed = _emit(tx, cls, spec, fwd, bwd, user_outputs, outs, args, extra_nodes)
    rename_escaping(output, fwd, escaping, renamed)
    return TupleVariable(results) if returned_tuple else results[0]


def _output_positions(user_outputs) -> tuple:
    """Per output of the user's forward: its index among the tensor outputs, or None."""
    tensors = iter(range(len(user_outputs)))
    return tuple(next(tensors) if isinstance(o, TensorVariable) else None for o in user_outputs)


def _grad_fake(output, o):
    with output.fake_mode:
        return torch.empty_like(o.fake, memory_format=torch.contiguous_format)


def _trace_backward(tx, ctx, bwd, user_backward, user_outputs, outs, args, fwd, arg_index):
    """The backward body's outputs: one gradient node (or None) per forward input."""
    output = tx.output
    grads = []
    for i, o in enumerate(outs):
        node = bwd.placeholder(f"grad_{i}")
        node.meta["val"] = fake = _grad_fake(output, o)
        grads.append(TensorVariable(node, fake))
    # By position: a tensor returned twice has two gradient slots (autograd fills the last).
    grad_args = [grads[i] if i is not None else ConstantVariable(None) for i in _output_positions(user_outputs)]
    # The engine runs a backward under no_grad (create_graph=False) and in the autocast state
    # of the `.backward()` call, not of the forward's: autocast off, as torch recommends
    # (custom_bwd enters the forward's state itself, a region of the body).
    with tracing_into(output, bwd, grad_enabled=False, autocast_off=True):
        result = tx.inline_call(UserFunctionVariable(user_backward), [ctx, *grad_args], {})
    got = list(result.items) if isinstance(result, BaseListVariable) and result.python_type() in (tuple, list) \
        else [result]
    if len(got) < len(args) or any(not _is_none(g) for g in got[len(args):]):
        unsupported("exceptions", f"RuntimeError: {ctx.fn_name}.backward returned {len(got)} gradients "
                                  f"for {len(args)} inputs")
    per_input = []
    for outer in fwd.lifted:  # the forward body's inputs, in order
        i = arg_index.get(id(outer))
        g = got[i] if i is not None else ConstantVariable(None)
        if _is_none(g):
            per_input.append(None)
            continue
        if not isinstance(g, TensorVariable):
            unsupported("construct", f"{ctx.fn_name}.backward returned {g.describe()} as a gradient")
        # The engine checks the generated Function's gradients as it checks the user's: it
        # sums one to its input's shape where that input expands to it, and casts a floating
        # dtype (a backward under autocast) to the input's. What it would reject, the eager
        # backward shows with the engine's own error.
        want, got_fake = args[i].fake, g.fake
        if not _expands_to(want.shape, got_fake.shape) or got_fake.device != want.device or (
                got_fake.dtype != want.dtype and not (got_fake.is_floating_point() and want.is_floating_point())):
            unsupported("construct", f"{ctx.fn_name}.backward returned a gradient of shape "
                                     f"{tuple(got_fake.shape)}, {got_fake.dtype} on {got_fake.device} for an input "
                                     f"of {tuple(want.shape)}, {want.dtype} on {want.device}")
        per_input.append(bwd.lift(g.node))
    for i, a in enumerate(args):
        if not isinstance(a, TensorVariable) and not _is_none(got[i]):
            unsupported("exceptions", f"RuntimeError: {ctx.fn_name}.backward returned a gradient for "
                                      f"its non-tensor input {i}")
    return per_input


def _expands_to(shape, desired) -> bool:
    """`shape` broadcasts to `desired` (autograd then sums a gradient of `desired` to it)."""
    if len(shape) > len(desired):
        return False
    return all(s == d or s == 1 for s, d in zip(reversed(tuple(shape)), reversed(tuple(desired))))


def _eager_backward(ctx, user_backward, reason, user_outputs, outs, args, fwd, outside: set) -> tuple:
    """(EagerBackward, the trackers of the values saved for its ctx attributes: tensors,
    and sizes that stay symbolic, so the user's backward sees each call's own). `outside`:
    ids of the trackers the caller can reach (a mutable one cannot be handed over as a copy)."""
    held: list = []

    def recipe(attr, v):
        if isinstance(v, (TensorVariable, SymNodeVariable)):
            held.append(v)
            return ("saved", len(held) - 1)
        shared = v.source is not None or id(v) in outside
        if isinstance(v, BaseListVariable) and v.python_type() in (tuple, list, torch.Size) and _holds_values(v) \
                and not (shared and v.python_type() is list):
            return ("sequence", v.python_type(), [recipe(attr, item) for item in v.items])
        if v.is_python_constant():
            value = v.as_python_constant()
            if not shared or _immutable(value):
                return ("constant", value)
        if shared:
            unsupported("side_effect", f"ctx.{attr} holds {v.describe()}, which the caller also holds: the "
                                       f"backward, which is not traced ({reason}), would get a copy")
        unsupported("construct", f"ctx.{attr} holds {v.describe()}: the backward, which is not traced "
                                 f"({reason}), could not be given it")

    attrs = {attr: recipe(attr, v) for attr, v in ctx.attrs.items()}
    arg_index = {id(a.node): i for i, a in enumerate(args) if isinstance(a, TensorVariable)}
    eager = EagerBackward(user_backward, reason, len(ctx.saved or []), attrs, ctx.needs_input_grad,
                          _output_positions(user_outputs),
                          tuple(arg_index.get(id(n)) for n in fwd.lifted))
    return eager, held


_ATOMS = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, slice, range)


def _immutable(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return isinstance(value, _ATOMS)


def _holds_values(v) -> bool:
    """A tuple or list with a tensor or a symbolic size in it, at any depth."""
    return any(isinstance(i, (TensorVariable, SymNodeVariable)) or (isinstance(i, BaseListVariable) and _holds_values(i))
               for i in v.items)


def bodies_of(output, graph) -> torch.nn.Module:
    """A module holding the bodies a body's own Function nodes name (a Function applied
    inside this one's forward): what its GraphModule reads them from."""
    holder = torch.nn.Module()
    for node in graph.nodes:
        if node.op == "get_attr":
            holder.add_module(node.target, output.submodules[node.target])
    return holder


def _emit(tx, cls, spec, fwd, bwd, user_outputs, outs, args, extra_nodes):
    """The node in the graph being traced (the frame's, or an outer Function's forward body);
    the trackers of the user's outputs, in order, and {forward body node: the node's output}
    for the outputs and the escaping values."""
    output = tx.output
    n = output.next_body_index()
    fwd_gm = fx.GraphModule(bodies_of(output, fwd), fwd, class_name=f"{cls.__name__}_fwd_body")
    bwd_gm = fx.GraphModule(torch.nn.Module(), bwd, class_name=f"{cls.__name__}_bwd_body")
    fwd_attr = output.add_submodule(f"fwd_body_{n}", fwd_gm)
    bwd_attr = output.add_submodule(f"bwd_body_{n}", bwd_gm)
    index_lists = {"non_differentiable_idx": list(spec.non_differentiable_idx),
                   "dirty_idx": list(spec.dirty_idx)}
    node = output.graph.create_node("call_function", AutogradFunctionApply(spec),
                                    (fwd_attr, bwd_attr, *fwd.lifted), index_lists)
    if spec.eager_backward is not None:
        node.meta["eager_backward"] = spec.eager_backward.reason
    output.op_count += 1
    grad_on = torch.is_grad_enabled() and any(
        isinstance(a, TensorVariable) and a.fake.requires_grad for a in args)
    fakes = []
    for i, o in enumerate(outs):
        differentiable = grad_on and i not in spec.non_differentiable_idx and (
            o.fake.is_floating_point() or o.fake.is_complex())
        if i in spec.dirty_idx:
            fakes.append(o.fake)
            continue
        with output.fake_mode:
            fake = o.fake.detach()
            if differentiable:
                fake.requires_grad_(True)
        fakes.append(fake)
    with output.fake_mode:  # escaping values: as eager's no-grad forward made them
        fakes += [n.meta["val"].detach() for n in extra_nodes]
    node.meta["val"] = tuple(fakes)
    made, renamed = {}, {}
    for i, o in enumerate(outs):
        if id(o) in made:
            continue
        if i in spec.dirty_idx:  # the input itself, changed in place: its tracker stays the one
            made[id(o)] = o
            continue
        item = output.getitem_node(node, i)
        if o.node.graph is fwd:  # made by the forward: the tracker now names the output, in place,
            renamed[o.node] = item  # wherever the forward also left it (appended to a list)
            o.node, o.fake = item, fakes[i]
            made[id(o)] = o
        else:  # an input returned: apply returns a new tensor (a view of it)
            made[id(o)] = TensorVariable(item, fakes[i])
    for k, extra in enumerate(extra_nodes):
        renamed[extra] = output.getitem_node(node, len(outs) + k)
    return [made[id(o)] if isinstance(o, TensorVariable) else o for o in user_outputs], renamed
