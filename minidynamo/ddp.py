"""DDP: a graph captured inside DistributedDataParallel's forward is split at gradient-bucket
boundaries, so the all-reduce of one bucket overlaps the backward of the next.

DDP all-reduces a bucket of gradients as soon as autograd has accumulated the last of them
(its reducer hooks each parameter's AccumulateGrad). A graph run op by op (minidynamo's own
eager backends) keeps one autograd node per op, so those hooks fire as in eager. A backend
that compiles the backward into one node (`aot_eager`, `inductor`, any AOTAutograd backend)
would hand every gradient over at the end of the whole backward, leaving nothing to overlap.
So, as torch.compile's DDPOptimizer does, the graph is cut into pieces holding about
`bucket_bytes_cap` bytes of parameters each, counted from the graph's end (the backward runs
in reverse); each piece is compiled by the backend on its own, and the pieces run in order.
Parameters are graph inputs here (the real `nn.Parameter`s), so a piece's size is the bytes
of the parameter inputs its ops use first, from the end.
"""
from __future__ import annotations

import logging

import torch
import torch.fx as fx

log = logging.getLogger("minidynamo.ddp")

# Set False to hand DDP graphs to the backend whole (no overlap with a compiled backward).
split_graphs = True


def active_ddp_module():
    """The DistributedDataParallel whose forward is running (DDP marks it), or None."""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # a build without distributed
        return None
    return DistributedDataParallel._get_active_ddp_module()


def splitting(backend):
    """`backend`, splitting graphs at bucket boundaries while a DDP forward is active."""
    def compile_split(gm, example_inputs):
        ddp = active_ddp_module() if split_graphs else None
        if ddp is None:
            return backend(gm, example_inputs)
        parts = bucket_partition(gm, example_inputs, ddp)
        if parts is None:
            return backend(gm, example_inputs)
        return compile_pieces(gm, example_inputs, parts, backend)
    compile_split.__wrapped__ = backend
    return compile_split


def _bucket_caps(ddp) -> tuple:
    cap = ddp.bucket_bytes_cap
    first = min(getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap), cap)
    return first, cap


def bucket_partition(gm: fx.GraphModule, example_inputs, ddp):
    """{node: piece index} cutting `gm` where DDP's buckets would end, or None for one piece."""
    ignored = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    params = {id(p) for name, p in ddp.module.named_parameters() if p.requires_grad and name not in ignored}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    sizes = {n: x.untyped_storage().nbytes() for n, x in zip(placeholders, example_inputs)
             if isinstance(x, torch.Tensor) and id(x) in params}
    if not sizes:
        return None
    first_cap, cap = _bucket_caps(ddp)
    buckets = [[]]  # from the graph's end: buckets[0] is the one being filled
    filled, seen = 0, set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        limit = first_cap if len(buckets) == 1 else cap
        # A piece must hand something on: cut only where the bucket has an output used later.
        if filled >= limit and _used_outside(buckets[0]):
            buckets.insert(0, [])
            filled = 0
        buckets[0].append(node)
        for arg in node.all_input_nodes:
            if arg in sizes and arg not in seen:
                seen.add(arg)
                filled += sizes[arg]
    if len(buckets) < 2:
        return None
    return {node: i for i, bucket in enumerate(buckets) for node in bucket}


def _used_outside(bucket: list) -> bool:
    inside = set(bucket)
    return any(user not in inside for node in bucket for user in node.users)


def compile_pieces(gm, example_inputs, parts: dict, backend):
    """Split `gm` by `parts`, compile each piece with `backend` on fake inputs, and return
    the split module's forward (each piece's call goes straight to its compiled callable)."""
    from torch.fx.passes.split_module import split_module
    from torch._subclasses.fake_tensor import FakeTensorMode

    split = split_module(gm, None, lambda node: parts[node], keep_original_order=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in example_inputs]
    values = _Values(split)
    with mode:
        values.run(*fakes)
    pieces = 0
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        name = node.target
        sub = getattr(split, name)
        examples = [values.env_of[a] if isinstance(a, fx.Node) else a for a in node.args]
        node.op, node.target = "call_function", _piece(sub, examples, backend, name)
        delattr(split, name)
        pieces += 1
    split.graph.lint()
    split.recompile()
    log.info("DDP graph split into %d pieces at bucket boundaries (bucket_bytes_cap %d)", pieces,
             _bucket_caps(active_ddp_module())[1])
    split._minidynamo_ddp_pieces = pieces
    return split.forward


class _Values(fx.Interpreter):
    """Runs the split graph on fakes, keeping every node's value (requires_grad included:
    AOTAutograd decides from its inputs which gradients a piece's backward computes)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.env_of = {}

    def run_node(self, n):
        out = self.env_of[n] = super().run_node(n)
        return out


def _piece(sub: fx.GraphModule, examples, backend, name: str):
    """The compiled callable of one piece. Backends expect graphs returning a tuple: a piece
    with one output returns it as a 1-tuple to the backend and unwrapped to the split graph."""
    output = next(n for n in sub.graph.nodes if n.op == "output")
    single = not isinstance(output.args[0], (tuple, list))
    if single:
        output.args = ((output.args[0],),)
        sub.recompile()
    compiled = backend(sub, examples)
    if isinstance(compiled, torch.nn.Module):
        compiled = compiled.forward

    def run(*args):
        out = compiled(*args)
        return out[0] if single else out
    run.__name__ = run.__qualname__ = f"ddp_{name}"
    return run
