"""Subgraphs: an fx graph traced inside another (the bodies of a captured
autograd.Function, a checkpointed function), taking what it uses from its parent as placeholders.

While a body is traced, `OutputGraph.graph` is the body's `LiftingGraph`; every node it
creates may name a node of an enclosing graph, and `create_node` replaces such a node by
a placeholder of the body, made once per outer node ("lifting"). The body's `lifted`
list says which outer node each of those placeholders stands for, in order: the caller
passes them in.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx

from .globalstate import _AUTOCAST_DEVICES


class LiftingGraph(fx.Graph):
    """An fx graph whose foreign nodes become placeholders. `lift_from(node)` turns a
    node of any enclosing graph into the node of the parent graph that the placeholder
    stands for (itself, for the parent's own nodes)."""

    def __init__(self, parent: fx.Graph, lift_from=None):
        super().__init__()
        self.parent = parent
        self._lift_from = lift_from or (lambda node: node)
        self.lifted: list[fx.Node] = []  # parent nodes, in placeholder order
        self._placeholder_of: dict = {}

    def lift(self, node: fx.Node) -> fx.Node:
        """The placeholder of this graph standing for `node` (of an enclosing graph)."""
        if node.graph is self:
            return node
        outer = self._lift_from(node)
        found = self._placeholder_of.get(outer)
        if found is None:
            found = self._placeholder_of[outer] = super().create_node("placeholder", outer.name)
            # A placeholder's target is its parameter's name: the unique node name, so a
            # later node named after the same op cannot shadow it.
            found.target = found.name
            if "val" in outer.meta:
                found.meta["val"] = outer.meta["val"]
            self.lifted.append(outer)
        return found

    def placeholder_for(self, outer: fx.Node):
        """The placeholder already standing for `outer`, or None."""
        return self._placeholder_of.get(outer)

    def create_node(self, op, target, args=(), kwargs=None, name=None, type_expr=None):
        args = fx.node.map_arg(args, self.lift)
        kwargs = fx.node.map_arg(kwargs or {}, self.lift)
        return super().create_node(op, target, args, kwargs, name, type_expr)


@contextlib.contextmanager
def tracing_into(output, graph: LiftingGraph, grad_enabled: bool, autocast_off: bool = False):
    """Within the block, the trace records into `graph` with grad mode as given (what the
    fake ops compute `requires_grad` under); with `autocast_off`, autocast disabled on every
    device type (the fake ops' dtypes; regions the block enters itself still apply)."""
    saved, output.graph = output.graph, graph
    was = torch.is_grad_enabled()
    depth, inference_regions = len(output.entered), output.inference_regions
    torch._C._set_grad_enabled(grad_enabled)
    enabled = [d for d in _AUTOCAST_DEVICES if autocast_off and _autocast_enabled(d)]
    for device in enabled:
        torch.set_autocast_enabled(device, False)
    try:
        yield graph
    finally:
        # A body whose trace declined inside a region (a backward then runs eagerly, and the
        # frame's trace goes on): leave the real managers it entered, innermost first.
        while len(output.entered) > depth:
            output.entered.pop().__exit__(None, None, None)
        output.inference_regions = inference_regions
        for device in enabled:
            torch.set_autocast_enabled(device, True)
        torch._C._set_grad_enabled(was)
        output.graph = saved


def _autocast_enabled(device: str) -> bool:
    try:
        return torch.is_autocast_enabled(device)
    except (RuntimeError, TypeError, AttributeError):  # a device type this build lacks
        return False
