"""mode="cudagraphs" for graphs that autograd differentiates: forward and backward each
recorded as a CUDA graph, replayed through one autograd.Function.

A captured graph runs its ops with autograd recording (minidynamo's backends run op by op),
so its backward is whatever autograd built: the ops' derivative formulas and the backward
bodies of captured `autograd.Function`s (liger's kernels). A recording of such a graph
(`TrainingSlot`) captures

  forward:  the graph over our aliases of the inputs (`detach()`: same memory, leaves that
            require grad where the caller's do), autograd recording;
  backward: `torch.autograd.grad` of the outputs that require grad with respect to the
            inputs that do, from static gradient buffers (`grad_outputs`).

Both captures of a recording share one memory pool of their own (`capture`). Recordings
do not share pools: one recording's values saved for its backward live from its forward
replay until its backward replay, and any order of those across recordings is possible
(micro-batches: forward A, forward B, backward A, backward B), so memory that is a
temporary of A's backward must never hold B's saved values (a shared pool reused it: B's
gradients came out wrong). Everything a replay leaves for a later replay of the same
recording is held by the slot for as long as it exists: static outputs, the values
autograd saved (the capture's autograd graph is retained), the gradient buffers and the
gradients. A call replays the forward (`_Replay.forward`); autograd later
calls `_Replay.backward`, which copies the incoming gradients into the buffers and replays
the backward graph.

Lifetimes. Forward outputs are aliases of the slot's memory, valid until the slot is
replayed again; the slot is not replayed while any output (or view, or saved copy of it)
is held, nor between its forward and its backward (`pending`): the runner uses its other
slot or runs the plain graph. Gradients are the slot's own tensors, handed to autograd
with our reference kept: autograd copies them where it keeps them (a parameter's `.grad`
is a new tensor, or an in-place sum) and never writes into them. A backward after the
slot's forward was replayed again (`retain_graph=True`, then another call, then a second
backward) would read overwritten values: it raises.
"""
from __future__ import annotations

import weakref

import torch

from .held import HeldCheck

_streams: dict = {}  # device index -> the stream training recordings are captured on


def capture_stream(device: torch.device):
    """The stream every training recording on `device` is captured on (the backward of an
    op runs on its forward's stream: one stream keeps both in one capture)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _streams:
        with torch.cuda.device(index):
            _streams[index] = torch.cuda.Stream()
    return _streams[index]


class _Pending:
    """Lives on the ctx of one forward replay until its backward ran (or autograd dropped
    the ctx without one); the slot keeps a weak reference."""

    __slots__ = ("__weakref__",)


class TrainingSlot:
    """One capture of a graph's forward and backward over an input set."""

    __slots__ = ("fwd", "bwd", "outputs", "grad_outputs", "grad_inputs", "diff_out",
                 "held", "pending", "generation", "keep")

    def __init__(self, fwd, bwd, outputs, diff_out, grad_outputs, grad_inputs, keep=()):
        self.fwd, self.bwd = fwd, bwd
        self.outputs = tuple(o.detach() for o in outputs)  # ours: aliases of the static outputs
        self.diff_out = diff_out  # indices of the outputs that require grad
        self.grad_outputs = grad_outputs  # static buffers, one per differentiable output
        self.grad_inputs = grad_inputs  # one per input: its static gradient, or None
        self.keep = keep  # the capture's outputs: their autograd graph holds the saved values
        self.held = HeldCheck(self.outputs)
        self.pending = None  # weakref to the _Pending of a forward awaiting its backward
        self.generation = 0  # forward replays so far

    def is_free(self) -> bool:
        p = self.pending
        return (p is None or p() is None) and self.held.is_free()


def capture(compiled, inputs: list, needs_grad, warm: bool) -> TrainingSlot:
    """Record forward and backward of `compiled` over `inputs` (the recording's tensors;
    `needs_grad`: which of the caller's require grad).
    `warm`: run forward and backward once on the capture stream first (lazy initialisation
    of libraries on that stream stays out of the graphs); only where no input is written."""
    device = next(t.device for t in inputs if t.is_cuda)
    stream = capture_stream(device)
    pool = torch.cuda.graph_pool_handle()  # this recording's own (see the module's docstring)
    leaves = [t.detach().requires_grad_(g) for t, g in zip(inputs, needs_grad)]
    diff_in = [i for i, t in enumerate(leaves) if t.requires_grad]
    if warm:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            _grads(compiled(*leaves), leaves, diff_in, None)
        torch.cuda.current_stream().wait_stream(stream)
    fwd = torch.cuda.CUDAGraph()
    with torch.cuda.graph(fwd, pool=pool, stream=stream):
        outputs = tuple(compiled(*leaves))
    diff_out = tuple(i for i, o in enumerate(outputs) if o.requires_grad)
    grad_outputs = [torch.empty_like(outputs[i]) for i in diff_out]
    bwd = torch.cuda.CUDAGraph()
    with torch.cuda.graph(bwd, pool=pool, stream=stream):
        grads = _grads(outputs, leaves, diff_in, grad_outputs)
    return TrainingSlot(fwd, bwd, outputs, diff_out, grad_outputs, grads, keep=outputs)


def _grads(outputs, leaves, diff_in, grad_outputs, retain: bool = True) -> list:
    """Per input: the gradient autograd computes for it from `grad_outputs` (zeros-like
    placeholders when None), or None. The autograd graph is retained: it holds the values
    saved for backward, which the forward replay writes and the backward replay reads."""
    outs = [o for o in outputs if o.requires_grad]
    if grad_outputs is None:
        grad_outputs = [torch.zeros_like(o) for o in outs]
    got = torch.autograd.grad(outs, [leaves[i] for i in diff_in], grad_outputs,
                              retain_graph=retain, allow_unused=True)
    grads: list = [None] * len(leaves)
    for i, g in zip(diff_in, got):
        grads[i] = g
    return grads


class _Replay(torch.autograd.Function):
    """forward: copy staged inputs in, replay the forward graph, hand out aliases of the
    outputs; backward: copy gradients in, replay the backward graph."""

    @staticmethod
    def forward(ctx, slot, rec, clone: bool, *args):
        staged = rec.staged
        for i in staged:
            rec.inputs[i].copy_(args[i])
        # The backward replay reads the inputs read in place: saved, autograd raises as in
        # eager when the caller changes one in place before backward.
        ctx.save_for_backward(*(a for i, a in enumerate(args) if i not in staged) if staged else args)
        slot.fwd.replay()
        slot.generation += 1
        ctx.slot, ctx.generation = slot, slot.generation
        ctx.pending = token = _Pending()
        slot.pending = weakref.ref(token)
        # Without storage use counts (held.py) nothing tells a held output: copies.
        outs = tuple([o.clone() if clone else o.detach() for o in slot.outputs])
        diff = slot.diff_out
        if len(diff) != len(outs):
            ctx.mark_non_differentiable(*(o for i, o in enumerate(outs) if i not in diff))
        return outs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        slot = ctx.slot
        ctx.saved_tensors  # noqa: B018 - the version check of the inputs read in place
        if ctx.generation != slot.generation:
            raise RuntimeError(
                "minidynamo cudagraphs: backward through a graph whose CUDA-graph recording was "
                "replayed again since this forward (its saved values are overwritten); call "
                "backward before calling the function again, or use the default mode")
        for buf, i in zip(slot.grad_outputs, slot.diff_out):
            g = grads[i]
            if g is None:
                buf.zero_()
            elif g.data_ptr() != buf.data_ptr():
                buf.copy_(g)
        slot.bwd.replay()
        slot.pending = None
        ctx.pending = None
        return (None, None, None, *slot.grad_inputs)
