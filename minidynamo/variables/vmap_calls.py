"""`torch.vmap(fn, in_dims, out_dims)(*args)` (also `torch.func.vmap`) in a trace: `fn`
traced once into a body of its own on per-example values (each mapped tensor with its
mapped dimension taken off, as vmap shows it to `fn`), one node of the graph calling
torch.vmap on that body with the flattened dims (run time: `VmapCall`). So the graph
computes what eager's vmap computes, by vmap itself.

The arguments are matched to `in_dims` as vmap matches them (pytree prefixes, through
pytree_calls.py); what `fn` returns must be tensors in containers. Declined, with the
reason: keyword arguments to the mapped function, dims that are not constants, a body that
changes anything outside itself (eager's would hold batched tensors), writes a tensor it
reads or returns one it did not compute (a view, an argument, an outside tensor), and
`chunk_size` other than None.
"""
from __future__ import annotations

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..exc import Unsupported, unsupported
from ..subgraph import LiftingGraph, tracing_into
from .autograd import bodies_of
from .base import VariableTracker
from .checkpoint import check_memory
from .function_effects import made_state, outside_unchanged
from .lists import ListVariable, TupleVariable
from .pytree_calls import Structure, flatten, unflatten
from .tensor import TensorVariable

_OPTIONS = ("in_dims", "out_dims", "randomness", "chunk_size")
_DEFAULTS = {"in_dims": 0, "out_dims": 0, "randomness": "error", "chunk_size": None}


class VmapCall:
    """fx target of one captured vmap: `(body, *inputs) -> body's outputs, batched`."""

    __name__ = __qualname__ = "vmap"
    __module__ = "minidynamo.vmap"

    def __init__(self, in_dims: tuple, out_dims: tuple, randomness: str):
        self.in_dims, self.out_dims, self.randomness = in_dims, out_dims, randomness

    def __call__(self, body, *inputs):
        run = getattr(body, "forward", body)  # the body's code, not Module.__call__ (no hooks)
        return torch.vmap(run, in_dims=self.in_dims, out_dims=self.out_dims, randomness=self.randomness)(*inputs)

    def __repr__(self):
        return f"<torch.vmap of a traced body, in_dims={self.in_dims}, out_dims={self.out_dims}>"


class VmapFunctionVariable(VariableTracker):
    """What `torch.vmap(fn, ...)` returned: calling it captures one vmap node."""

    __slots__ = ("fn", "options")

    def __init__(self, fn, options: dict):
        super().__init__(None)
        self.fn, self.options = fn, options

    def describe(self):
        return f"torch.vmap of {self.fn.describe()}"

    def rebuild_new(self, rb) -> str:
        # (a break at its call: eager's vmap made again from the function and the options)
        return f"{rb.ns.bind(torch.vmap, 'vmap')}({rb.expr(self.fn)}, **{rb.ns.bind(self.options, 'vmap_options')})"

    def call_function(self, tx, args, kwargs):
        if kwargs:
            unsupported("call", "a vmapped function called with keyword arguments is not traced")
        return _capture(tx, self.fn, list(args), self.options)


def make_vmap(tx, args, kwargs):
    """`torch.vmap(fn, in_dims=0, out_dims=0, randomness='error', *, chunk_size=None)`."""
    if not args:
        unsupported("exceptions", "TypeError: vmap() missing 1 required positional argument: 'func'",
                    raised=TypeError)
    fn, *rest = args
    if len(rest) > len(_OPTIONS) or set(kwargs) - set(_OPTIONS) or any(n in kwargs for n in _OPTIONS[:len(rest)]):
        unsupported("call", "torch.vmap called with these arguments is not traced")
    options = dict(_DEFAULTS)
    for name, var in [*zip(_OPTIONS, rest), *kwargs.items()]:
        if not var.is_python_constant():
            unsupported("call", f"torch.vmap's {name} is {var.describe()}, not a constant")
        options[name] = var.as_python_constant()
    if options["chunk_size"] is not None:
        unsupported("call", "torch.vmap with chunk_size is not traced")
    return VmapFunctionVariable(fn, options)


def _capture(tx, fn, args: list, options: dict):
    output = tx.output
    structure = Structure()
    leaves, args_spec = pytree.tree_flatten(structure.real(TupleVariable(args)))
    leaves = [structure.back(tx, leaf) for leaf in leaves]
    in_dims = pytree._broadcast_to_and_flatten(options["in_dims"], args_spec)
    if in_dims is None:
        unsupported("call", f"torch.vmap's in_dims {options['in_dims']!r} do not match the arguments' structure")
    body = LiftingGraph(output.graph)
    mapped, per_example = [], []
    for i, (leaf, dim) in enumerate(zip(leaves, in_dims)):
        if dim is None:
            per_example.append(leaf)
            continue
        if not isinstance(leaf, TensorVariable) or type(dim) is not int:
            unsupported("call", f"torch.vmap maps {leaf.describe()} over dim {dim!r}: only tensors over an "
                                "int dim are traced")
        full = leaf.fake
        if not -full.dim() <= dim < full.dim():
            unsupported("call", f"torch.vmap maps a tensor of shape {tuple(full.shape)} over dim {dim}")
        # what vmap shows fn: the tensor with that dim taken off (a batch may be empty)
        keep = [d for d in range(full.dim()) if d != dim % full.dim()]
        fake = full.new_empty_strided([full.size(d) for d in keep], [full.stride(d) for d in keep])
        fake.requires_grad_(full.requires_grad)
        node = fx.Graph.create_node(body, "placeholder", f"mapped_{i}")
        node.target = node.name
        node.meta["val"] = fake
        mapped.append((leaf, dim))
        per_example.append(TensorVariable(node, fake))
    body_args = unflatten(tx, ListVariable(per_example), args_spec)
    roots = [fn, *args]
    before = (made_state(roots), len(output.deferred_calls))
    try:
        with outside_unchanged(output, "the vmapped function", why="eager's would hold batched tensors"), \
                tracing_into(output, body, grad_enabled=torch.is_grad_enabled()):
            result = fn.call_function(tx, list(body_args.items), {})
        if (made_state(roots), len(output.deferred_calls)) != before:
            unsupported("side_effect", "it changes state outside itself")
        outs, out_spec = flatten(tx, result)
        if not outs or not all(isinstance(o, TensorVariable) and o.node.graph is body
                               and o.node.op != "placeholder" for o in outs):
            unsupported("construct", "it returns something other than tensors it computed")
        if len({id(o.node) for o in outs}) != len(outs):  # (the node's items would share storage)
            unsupported("construct", "it returns one tensor twice")
        check_memory(body, outs)
    except Unsupported as e:
        unsupported(e.category, f"torch.vmap's function: {e.detail} (the call runs eagerly)", hint=e.hint)
    out_dims = pytree._broadcast_to_and_flatten(options["out_dims"], out_spec)
    if out_dims is None or not all(type(d) is int for d in out_dims):
        unsupported("call", f"torch.vmap's out_dims {options['out_dims']!r} do not match what the function returns")
    body.output(tuple(o.node for o in outs))
    n = sum(name.startswith("vmap_body_") for name in output.submodules)
    module = fx.GraphModule(bodies_of(output, body), body, class_name="vmap_body")
    attr = output.add_submodule(f"vmap_body_{n}", module)
    lifted = list(body.lifted)
    target = VmapCall((*(d for _, d in mapped), *(None,) * len(lifted)), tuple(out_dims), options["randomness"])
    node = output.graph.create_node("call_function", target, (attr, *(leaf.node for leaf, _ in mapped), *lifted), {})
    fakes = [leaf.fake for leaf, _ in mapped] + [n.meta["val"] for n in lifted]
    try:
        node.meta["val"] = tuple(target(module, *fakes))
    except Exception as e:  # noqa: BLE001 - vmap's own checks (unequal batch sizes): eager raises them
        unsupported("exceptions", f"{type(e).__name__}: {e}", raised=type(e) if type(e) in (ValueError,
                                                                                            RuntimeError) else None)
    node.meta["writes"] = node.meta["aliases"] = ()  # refused above (check_memory)
    node.meta["item_aliases"] = (False,) * len(outs)
    output.op_count += 1
    batched = [TensorVariable(output.getitem_node(node, i), val) for i, val in enumerate(node.meta["val"])]
    return unflatten(tx, ListVariable(batched), out_spec)


CALLS = {torch.vmap: make_vmap}
