"""`t.item()` kept in the graph (config.capture_scalar_outputs, as torch.compile's setting):
the value is read at run time by the graph's own `item` node and stands in the trace as an
unbacked symbol of the shape environment (a SymInt, SymFloat or SymBool with no value the
trace knows). Tensor arithmetic with it is traced; whatever needs its value now (a branch,
`range(n)`, a size, printing it) raises GuardOnDataDependentSymNode, which the translator
turns into a graph break (`data_dependent`)."""
from __future__ import annotations

from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings

from .exc import unsupported
from .variables.symbolic import SymNodeVariable


def scalar_read(output, tensor):
    """The tracker of `tensor.item()`: a node of the graph, its fake value unbacked."""
    if tensor.fake.numel() != 1:
        unsupported("data_dependent", "Tensor.item() of a tensor that may not have one element "
                                      "(eager raises where it has more)")
    output._ensure_shape_env()
    with output.fake_mode:
        value = tensor.fake.item()
    node = output.sym_node("call_method", "item", (tensor.as_fx_arg(),), value)
    # the new symbol bound to this node (as torch's tracers record it): a backend tracing
    # the graph again finds where each unbacked symbol comes from
    node.meta["unbacked_bindings"] = compute_unbacked_bindings(output.shape_env, value)
    return SymNodeVariable(node, value)
