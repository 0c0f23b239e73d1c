"""torch's own named backends ("aot_eager", "inductor", ...) for minidynamo's graphs.

The backend comes from torch's registry (`torch._dynamo.backends.registry`), so it follows
the installed torch. Before the graph is handed over, each Triton launch node becomes
torch's own `triton_kernel_wrapper_mutation` higher-order op with the kernel and its
constant arguments in torch's `kernel_side_table`: AOTAutograd then functionalizes the
launch and inductor compiles the user's kernel together with the ops around it, as it does
for a graph TorchDynamo captured. minidynamo's own launch program stays the default path
(backend="eager").
"""
from __future__ import annotations

import torch.fx as fx

from .exc import BackendError

# minidynamo's own names for what torch registers under another.
_ALIASES: dict = {}


def torch_backend_names() -> list:
    """The backend names torch's registry has (imports torch._dynamo on first use)."""
    from torch._dynamo.backends.registry import list_backends
    return list(list_backends()) + ["aot_eager"]  # torch lists it among its debug ones


def torch_backend(name: str):
    """A minidynamo backend running torch's backend `name`, or None if torch has none."""
    from torch._dynamo.backends.registry import lookup_backend
    try:
        compiler = lookup_backend(_ALIASES.get(name, name))
    except Exception:  # torch raises its own InvalidBackend
        return None

    try:
        from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation  # noqa: F401
    except ImportError:  # said at lookup: graphs with launches will be refused
        import warnings
        warnings.warn(f"this torch has no triton_kernel_wrapper_mutation higher-order op: graphs with "
                      f"Triton launches cannot go to torch's {name!r} backend (plain torch ops can)",
                      RuntimeWarning, stacklevel=4)

    def run(gm: fx.GraphModule, example_inputs):
        return compiler(with_torch_triton_ops(gm, compiles_kernels="inductor" in name), example_inputs)

    run.__name__ = run.__qualname__ = name
    return run


def with_torch_triton_ops(gm: fx.GraphModule, compiles_kernels: bool = False) -> fx.GraphModule:
    """`gm` with its Triton launch nodes rewritten as torch's triton_kernel_wrapper_mutation
    over torch's kernel side table. A graph with no launches is returned as it is.
    `compiles_kernels`: the backend compiles the kernels itself (inductor), which it cannot
    do for kernels run by Triton's interpreter."""
    from .triton.capture import ConfigGrid, TritonKernelWrapperMutation, kernel_chain
    launches = [n for n in gm.graph.nodes
                if n.op == "call_function" and isinstance(n.target, TritonKernelWrapperMutation)]
    _reject_launches_in_bodies(gm)
    if not launches:
        return gm
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_mutation
    except ImportError as e:
        raise BackendError("this torch has no triton_kernel_wrapper_mutation higher-order op, which torch's "
                           "backends need for Triton launches: use backend='eager' (minidynamo's launcher) "
                           f"({e})") from e
    for node in launches:
        record = node.target.table.records[node.kwargs["kernel_idx"]]
        chain = kernel_chain(record.kernel)
        if compiles_kernels and type(chain[-1]).__name__ == "InterpretedFunction":
            raise BackendError(f"kernel {record.name} runs in Triton's interpreter (TRITON_INTERPRET=1), "
                               "which inductor cannot compile: use backend='aot_eager' or 'eager'")
        grids = [tuple(record.grid)]
        if isinstance(record.grid, ConfigGrid):  # torch takes one grid per config, in order
            grids = [record.grid(dict(config.all_kwargs())) for config in chain[0].configs]
        kwargs = dict(node.kwargs["kwargs"])
        tensors = {k: v for k, v in kwargs.items() if isinstance(v, fx.Node)}
        constants = {k: v for k, v in kwargs.items() if not isinstance(v, fx.Node)}
        node.target = triton_kernel_wrapper_mutation
        node.kwargs = {
            "kernel_idx": kernel_side_table.add_kernel(record.kernel),
            "constant_args_idx": kernel_side_table.add_constant_args(constants),
            "grid": grids,
            "tma_descriptor_metadata": {},
            "kwargs": tensors,
        }
    gm.graph.lint()
    gm.recompile()
    return gm


def _reject_launches_in_bodies(gm: fx.GraphModule) -> None:
    """Triton launches inside an autograd.Function node's bodies (submodules of the graph)
    run through minidynamo's launcher, which torch's tracing cannot see through: say so
    rather than fail inside torch."""
    from .triton.capture import TritonKernelWrapperMutation
    for name, sub in gm.named_modules():
        if sub is gm or not isinstance(sub, fx.GraphModule):
            continue
        if any(n.op == "call_function" and isinstance(n.target, TritonKernelWrapperMutation)
               for n in sub.graph.nodes):
            raise BackendError(f"{name}: an autograd.Function whose forward or backward launches "
                               "Triton kernels cannot go to torch's backends yet; use backend='eager'")
