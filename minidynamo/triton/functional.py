"""Graph pass: launch nodes in mutation form → functional form.

`triton_kernel_wrapper_mutation(...)` becomes
`triton_kernel_wrapper_functional(..., tensors_to_clone=[...])`, which launches on clones
of the tensors the kernel writes (strides preserved) and returns them by parameter name.
Each written tensor is then updated from its clone with `copy_` right after the launch,
which is how functional backends (AOT-style functionalization) represent a mutation, and
keeps eager semantics for every later reader, views and bases included.

`tensors_to_clone` comes from the kernel's mutation analysis: read-only arguments are
never cloned; when the analysis says "unknown", every tensor argument is cloned. The same
tensor passed as two written parameters is cloned once, so the kernel still sees them alias.
"""
from __future__ import annotations

import operator

import torch.fx as fx

from .capture import TritonKernelWrapperMutation


def functionalize(gm: fx.GraphModule) -> fx.GraphModule:
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, TritonKernelWrapperMutation):
            continue
        table = node.target.table
        record = table.records[node.kwargs["kernel_idx"]]
        kwargs = node.kwargs["kwargs"]
        tensor_names = [n for n, v in kwargs.items() if isinstance(v, fx.Node)]
        written = record.written_tensors()
        to_clone = tensor_names if written is None else [n for n in tensor_names if n in written]
        with graph.inserting_after(node):
            fnode = graph.create_node(
                "call_function", table.functional, (),
                {**node.kwargs, "tensors_to_clone": to_clone}, name=node.name + "_functional")
        _facts(fnode, (), ())  # launches on clones, writes none of its arguments
        last = fnode
        seen = set()
        for name in to_clone:
            target = kwargs[name]
            if target in seen:
                continue
            seen.add(target)
            with graph.inserting_after(last):
                new = graph.create_node("call_function", operator.getitem, (fnode, name))
            _facts(new, (), ())  # a clone: fresh memory
            with graph.inserting_after(new):
                last = graph.create_node("call_method", "copy_", (target, new))
            at = last.all_input_nodes.index(target)
            _facts(last, (at,), (at,))  # writes its target, returns it
        graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm


def _facts(node: fx.Node, writes: tuple, aliases: tuple) -> None:
    """The write/alias facts later passes read (graph.py's module docstring)."""
    node.meta["writes"] = writes
    node.meta["aliases"] = aliases
