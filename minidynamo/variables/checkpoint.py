"""`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, **kwargs)` in a trace:
`fn(*args, **kwargs)` traced into a body of its own, one node of the graph calling torch's
checkpoint on it (run time: checkpointing.py), so the body's activations are dropped and
recomputed in backward, as in eager. The reentrant variant (`use_reentrant=True`) is
captured the same way, its node calling torch's checkpoint with use_reentrant=True.

The body runs twice in eager, the second time at backward time: one that changes anything
outside itself (an outside list, an object made in the frame, a print) declines, as does
one that writes a tensor it reads or returns a view of one (the node would hide that from
the graph's memory facts). Attribute and global stores it puts back before returning
leave nothing to run twice (transformers' kernel hub layers set a context variable around
each layer's forward, a global under a compiler): kept while it is traced and dropped after,
where each leaves the value it found (body_stores.py). Without grad mode checkpoint only
calls the function: the call is traced inline. An unspecified `use_reentrant` (torch then warns and runs the reentrant
variant), `context_fn` / `debug` / `determinism_check` other than their defaults, and where
the reentrant variant would differ from the node (_check_reentrant) decline.
"""
from __future__ import annotations

import inspect
import operator

import torch
import torch.fx as fx
import torch.utils.checkpoint as torch_checkpoint

from ..autograd_function import AutogradFunctionApply
from ..checkpointing import CheckpointCall, CheckpointSpec
from ..exc import Unsupported, unsupported
from ..memory_facts import written_values
from ..subgraph import LiftingGraph, tracing_into
from .autograd import bodies_of
from .body_stores import BodyStores
from .constant import ConstantVariable
from .function_effects import made_state, outside_unchanged
from .lists import BaseListVariable, ListVariable, TupleVariable
from .tensor import TensorVariable

# checkpoint's keyword arguments and their defaults (those it passes on to the recompute).
_OPTIONS = {"preserve_rng_state": True, "early_stop": True}
_DECLINED_UNLESS_DEFAULT = {"context_fn": torch_checkpoint.noop_context_fn, "debug": False,
                            "determinism_check": "default"}
if "respect_saved_tensors_hooks" in inspect.signature(torch_checkpoint.checkpoint).parameters:
    _DECLINED_UNLESS_DEFAULT["respect_saved_tensors_hooks"] = None


def capture_checkpoint(tx, args: list, kwargs: dict):
    """Trace `torch.utils.checkpoint.checkpoint(*args, **kwargs)`."""
    if not args:
        unsupported("exceptions", "TypeError: checkpoint() missing 1 required positional argument: 'function'",
                    raised=TypeError)
    fn, *fn_args = args
    fn_kwargs = dict(kwargs)
    reentrant = _constant(fn_kwargs.pop("use_reentrant", ConstantVariable(None)), "use_reentrant")
    if reentrant is None:
        unsupported("call", "torch.utils.checkpoint.checkpoint without use_reentrant: torch warns and runs "
                            "the reentrant variant, which is not captured",
                    hint="pass use_reentrant=False (torch recommends it)")
    for name, default in _DECLINED_UNLESS_DEFAULT.items():
        if name in fn_kwargs and _constant(fn_kwargs.pop(name), name) != default:
            unsupported("call", f"torch.utils.checkpoint.checkpoint with {name} other than its default "
                                "is not captured")
    options = {name: _constant(fn_kwargs.pop(name), name) for name in _OPTIONS if name in fn_kwargs}
    if reentrant:
        _check_reentrant(fn_args, fn_kwargs)
    if not torch.is_grad_enabled():  # checkpoint then only calls the function
        return fn.call_function(tx, list(fn_args), fn_kwargs)
    return _capture(tx, fn, fn_args, fn_kwargs, options, reentrant)


def _check_reentrant(fn_args: list, fn_kwargs: dict) -> None:
    """Decline what the reentrant variant does otherwise than the captured node would (it
    is called with use_reentrant=True, so the rest is torch's own): keyword arguments for
    the function (torch raises), and tensor arguments none of which requires grad (torch
    warns; the outputs then require none, and no gradient reaches the parameters)."""
    if fn_kwargs:
        unsupported("call", "torch.utils.checkpoint.checkpoint(use_reentrant=True) with keyword arguments for "
                            f"the function ({', '.join(fn_kwargs)}): torch raises ValueError")
    if not any(isinstance(a, TensorVariable) and a.fake.requires_grad for a in fn_args):
        unsupported("call", "torch.utils.checkpoint.checkpoint(use_reentrant=True) where no tensor argument "
                            "requires grad: its outputs require none and no gradient reaches the function's "
                            "parameters (torch warns)", hint="use_reentrant=False is captured whatever requires grad")


def _constant(var, name: str):
    if not var.is_python_constant():
        unsupported("call", f"torch.utils.checkpoint.checkpoint's {name} is {var.describe()}, not a constant")
    return var.as_python_constant()


def _capture(tx, fn, fn_args: list, fn_kwargs: dict, options: dict, reentrant: bool):
    output = tx.output
    body = LiftingGraph(output.graph)
    body.function_body = "checkpoint"  # a Function applied inside is a node of the body
    passed = [a for a in fn_args if isinstance(a, TensorVariable)]
    for a in passed:  # the arguments checkpoint saves come first
        body.lift(a.node)
    roots = [fn, *fn_args, *fn_kwargs.values()]
    before = (made_state(roots), len(output.deferred_calls), _tensor_attrs(output))
    try:
        with outside_unchanged(output, "the checkpointed function", stores=BodyStores) as stores:
            with tracing_into(output, body, grad_enabled=True):
                result = fn.call_function(tx, list(fn_args), fn_kwargs)
            stores.settle(tx)  # stores it put back are dropped; others decline
        if (made_state(roots), len(output.deferred_calls), _tensor_attrs(output)) != before:
            unsupported("side_effect", "it changes state outside itself")
        structure, outs = _flatten(result)
        check_memory(body, outs)
        if reentrant:
            _check_reentrant_outputs(body, outs)
    except Unsupported as e:
        unsupported(e.category, f"torch.utils.checkpoint's function: {e.detail} (eager runs it again in "
                                "backward; the call runs eagerly)", hint=e.hint)
    made = [o for o in outs if o.node.graph is body]
    out_nodes = list(dict.fromkeys(o.node for o in made))
    body.output(tuple(out_nodes))
    n = sum(name.startswith("checkpoint_body_") for name in output.submodules)
    module = fx.GraphModule(bodies_of(output, body), body, class_name="checkpoint_body")
    attr = output.add_submodule(f"checkpoint_body_{n}", module)
    lifted = list(body.lifted)
    spec = CheckpointSpec(tuple(lifted.index(a.node) for a in passed))
    node = output.graph.create_node("call_function", CheckpointCall(spec), (attr, *lifted),
                                    {"use_reentrant": reentrant, **options})
    node.meta["val"] = tuple(n.meta["val"] for n in out_nodes)
    node.meta["writes"] = node.meta["aliases"] = ()  # refused above (check_memory)
    node.meta["item_aliases"] = (False,) * len(out_nodes)
    output.op_count += 1
    renamed = {}
    for i, n in enumerate(out_nodes):
        renamed[n] = TensorVariable(output.getitem_node(node, i), n.meta["val"])
    return _rebuild(structure, {id(o): renamed[o.node] for o in made})


def _check_reentrant_outputs(body, outs: list) -> None:
    """The reentrant variant returns its function's tensors through an autograd.Function
    whose inputs require grad: each one new, and each of a floating dtype requiring grad.
    Decline where the body's would not be so (an input returned, a detached result)."""
    if len({o.node for o in outs}) != len(outs):
        unsupported("construct", "with use_reentrant=True it returns one tensor twice")
    for o in outs:
        if o.node.graph is not body:
            unsupported("construct", "with use_reentrant=True it returns a tensor it did not compute")
        if (o.fake.is_floating_point() or o.fake.is_complex()) and not o.fake.requires_grad:
            unsupported("construct", "with use_reentrant=True it returns a tensor that does not require grad "
                                     "(reentrant checkpoint's output would)")


def _tensor_attrs(output) -> dict:
    return {k: (id(v[0]), [(n, id(x)) for n, x in v[1].items()]) for k, v in output.tensor_attrs.items()}


def _flatten(result):
    """(the structure of what the function returned, its tensors): tensors, constants and
    tuples or lists of them, at any depth."""
    if isinstance(result, TensorVariable):
        return result, [result]
    if isinstance(result, ConstantVariable):
        return result, []
    if isinstance(result, BaseListVariable) and result.python_type() in (tuple, list):
        parts = [_flatten(item) for item in result.items]
        return (result.python_type(), [p for p, _ in parts]), [t for _, ts in parts for t in ts]
    unsupported("construct", f"it returns {result.describe()} (tensors, constants, tuples and lists of them "
                             "are captured)")


def _rebuild(structure, made: dict):
    if isinstance(structure, TensorVariable):
        return made.get(id(structure), structure)  # a tensor from outside returned: the same object
    if isinstance(structure, ConstantVariable):
        return structure
    kind, parts = structure
    items = [_rebuild(p, made) for p in parts]
    return TupleVariable(items) if kind is tuple else ListVariable(items)


def check_memory(body: LiftingGraph, outs: list) -> None:
    """Decline a body that writes a tensor it reads, or returns a view of one."""
    read = {_storage(p.meta["val"]) for p in body.nodes
            if p.op == "placeholder" and isinstance(p.meta.get("val"), torch.Tensor)}
    for node in body.nodes:
        if node.op not in ("call_function", "call_method") or node.target is operator.getitem \
                or node.meta.get("sym"):
            continue
        if isinstance(node.target, AutogradFunctionApply):
            written = [] if not node.target.spec.dirty_idx else None
        else:
            written = written_values(node)
        if written is None:
            unsupported("construct", f"its operation {node.name} may write the tensors it reads")
        if any(_storage(w.meta.get("val")) in read for w in written):
            unsupported("side_effect", f"it writes a tensor it reads ({node.name})")
    for o in outs:
        if o.node.graph is body and _storage(o.fake) in read:
            unsupported("construct", "it returns a view of a tensor it reads")


def _storage(fake):
    try:
        return fake.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, AttributeError):
        return id(fake)
