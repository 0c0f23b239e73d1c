"""Run time of a captured `torch.autograd.Function.apply`.

The trace turns one `MyFn.apply(...)` into one graph node holding two bodies, the way
torch's `autograd_function_apply` higher-order op does:

    fwd_body(*inputs)          -> ((tensor outputs..., escaping values...), (saved values...))
    bwd_body(*grads, *saved)   -> (one grad or None per input)

`inputs` are the apply's tensor arguments in order, then tensors the forward read from
elsewhere (they get no gradient, as in eager, where forward runs under no_grad). The
escaping values are tensors the forward made and left where the caller can reach them
(appended to a list it was given, stored in a dict): the node returns them after the
outputs, non-differentiable, as eager's no-grad forward made them. At run
time the node's target calls one generated `torch.autograd.Function` per node: its
forward runs `fwd_body` and keeps the saved tensors through `ctx.save_for_backward` (so
eager's check against in-place changes of saved tensors holds; saved sizes, ints when
shapes are symbolic, are kept on the ctx beside them), replays the user's
`mark_non_differentiable`, `mark_dirty` and `set_materialize_grads`; its backward runs
`bwd_body`, or, where the backward could not be traced, the user's own backward on a ctx
rebuilt from the saved values and the constants the forward set on its ctx.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from .callees import optimizable_callee_function, optimized_function


@dataclass(eq=False)
class EagerBackward:
    """What the user's backward needs when it runs eagerly: its function, the ctx it
    expects (constants set by the forward; tensor attributes and `save_for_backward`
    come from the saved values), and how its gradients line up."""

    backward: object  # the user's backward function (ctx, *grads) -> grads
    reason: str  # why it was not traced (shown by explain and the graph's code)
    n_saved: int  # saved values [0, n_saved) are ctx.saved_tensors; the rest hold attributes
    # ctx attribute -> how to make it: ("saved", i) is saved value n_saved + i (a tensor, or a
    # size when shapes are symbolic); ("constant", value); ("sequence", type, [parts...]).
    attrs: dict
    needs_input_grad: tuple  # one per apply argument
    user_outputs: tuple  # per user output: its index among tensor outputs, or None
    arg_of_input: tuple  # per generated input: the apply argument it is, or None (no grad)


@dataclass(eq=False)
class ApplySpec:
    """One captured apply: what the generated Function must replay."""

    name: str  # the user's Function class's __name__ (the generated one is named alike)
    n_outputs: int  # tensor outputs of the forward body (the user's)
    non_differentiable_idx: tuple = ()
    dirty_idx: tuple = ()
    materialize_grads: bool = True
    once_differentiable: bool = False
    eager_backward: EagerBackward | None = None  # None: the backward body runs
    n_escaping: int = 0  # non-differentiable tensors returned after the outputs (module docstring)
    saved_values_idx: tuple = ()  # saved values that are not tensors (sizes): kept on the ctx
    _generated: list = field(default_factory=list)  # [(fwd_body, bwd_body, Function)]


def _as_frame(backward):
    """A backward that could not be traced as one body still runs optimized as a frame of
    its own (graphs around its graph breaks), as torch.compile would compile it when
    autograd calls it; a backward that is not a plain Python function runs as it is."""
    if optimizable_callee_function(backward) is None:
        return backward
    return optimized_function(backward, "eager")


class _ReplayCtx:
    """The ctx a user's backward sees when it runs eagerly: attributes as the forward set
    them, `saved_tensors`, `needs_input_grad`."""

    def __init__(self, eager: EagerBackward, saved: tuple):
        held = saved[eager.n_saved:]
        for name, how in eager.attrs.items():
            setattr(self, name, _made(how, held))
        self.saved_tensors = saved[:eager.n_saved]
        self.needs_input_grad = eager.needs_input_grad


def _made(how, held):
    """A ctx attribute from its recipe (EagerBackward.attrs) and the values saved for it."""
    if how[0] == "saved":
        return held[how[1]]
    if how[0] == "constant":
        return how[1]
    return how[1]([_made(p, held) for p in how[2]])  # tuple, list or torch.Size


def _save(ctx, spec: ApplySpec, saved) -> None:
    """Tensors through save_for_backward; sizes (ints, where the trace kept them symbolic),
    which it refuses, on the ctx beside them."""
    if not spec.saved_values_idx:
        ctx.save_for_backward(*saved)
        return
    values = set(spec.saved_values_idx)
    ctx.save_for_backward(*(v for i, v in enumerate(saved) if i not in values))
    ctx.saved_values = tuple(saved[i] for i in spec.saved_values_idx)


def _saved(ctx, spec: ApplySpec) -> tuple:
    """The saved values in the order the forward body returned them (see `_save`)."""
    if not spec.saved_values_idx:
        return ctx.saved_tensors
    saved = list(ctx.saved_tensors)
    for i, value in zip(spec.saved_values_idx, ctx.saved_values):  # positions in increasing order
        saved.insert(i, value)
    return tuple(saved)


def _generate(spec: ApplySpec, fwd_body, bwd_body):
    """The autograd.Function that runs one captured apply."""
    eager = spec.eager_backward
    n_out = spec.n_outputs
    # The bodies' own code, not Module.__call__: a process-wide module hook of the user's
    # must not see them (eager calls no module here).
    fwd_body = getattr(fwd_body, "forward", fwd_body)
    bwd_body = getattr(bwd_body, "forward", bwd_body)
    # Escaping values (after the outputs) are what eager's no-grad forward made: no gradient.
    non_differentiable = (*spec.non_differentiable_idx, *range(n_out, n_out + spec.n_escaping))

    def forward(ctx, *inputs):  # Function.apply runs this under no_grad, as the user's
        outputs, saved = fwd_body(*inputs)
        _save(ctx, spec, saved)
        if non_differentiable:
            ctx.mark_non_differentiable(*(outputs[i] for i in non_differentiable))
        if spec.dirty_idx:
            ctx.mark_dirty(*(outputs[i] for i in spec.dirty_idx))
        ctx.set_materialize_grads(spec.materialize_grads)
        return tuple(outputs)

    def backward(ctx, *grads):
        saved = _saved(ctx, spec)
        grads = grads[:n_out]  # those of escaping values are not the user's
        if eager is None:
            # The body was traced against contiguous gradients; autograd may hand in an
            # expanded one (the gradient of a sum), which a kernel would read wrongly.
            return tuple(bwd_body(*(g.contiguous() if g is not None else g for g in grads), *saved))
        user_grads = [None if i is None else grads[i] for i in eager.user_outputs]
        result = _as_frame(eager.backward)(_ReplayCtx(eager, saved), *user_grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_args = len(eager.needs_input_grad)
        if len(result) < n_args or any(r is not None for r in result[n_args:]):
            raise RuntimeError(f"function {spec.name}Backward returned an incorrect number of gradients "
                               f"(expected {n_args}, got {len(result)})")
        return tuple(None if a is None else result[a] for a in eager.arg_of_input)

    if spec.once_differentiable:
        backward = torch.autograd.function.once_differentiable(backward)
    # Named as the user's class: autograd's messages name its backward `<name>Backward`.
    return type(spec.name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward),
        "__module__": __name__})


class AutogradFunctionApply:
    """fx target of one captured apply: `(fwd_body, bwd_body, *inputs) -> tensor outputs`.

    The index lists are keyword arguments for the reader of the graph (torch's
    higher-order op takes the same); what runs is the spec's generated Function, made
    once per pair of bodies (a backend may hand back other bodies)."""

    __name__ = __qualname__ = "autograd_function_apply"
    __module__ = "minidynamo.autograd"

    def __init__(self, spec: ApplySpec):
        self.spec = spec

    def __call__(self, fwd_body, bwd_body, *inputs, **index_lists):
        made = self.spec._generated
        if not made or made[0][0] is not fwd_body or made[0][1] is not bwd_body:
            made[:] = [(fwd_body, bwd_body, _generate(self.spec, fwd_body, bwd_body))]
        return made[0][2].apply(*inputs)

    def __repr__(self):
        return f"<autograd_function_apply of {self.spec.name}>"
