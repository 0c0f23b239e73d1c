"""Run time of a captured `torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=...)`.

The trace turns the call into one graph node holding the function's body, traced into a
graph of its own (variables/checkpoint.py):

    checkpoint(body, *inputs, use_reentrant=False or True, preserve_rng_state=..., ...)

`inputs` are the tensors the body reads: the checkpointed call's positional tensor
arguments first, then what the function reads from elsewhere (parameters, closures,
keyword arguments). At run time the node calls torch's own checkpoint, as eager does, with
the body as the function and the positional tensor arguments as its arguments, the rest
reached by closure: checkpoint saves exactly what eager's saves (its inputs through
autograd, every activation of the body through its own saved-tensor hooks, dropped and
recomputed in backward), restores the RNG state for the recompute, and runs its checks.
The reentrant variant likewise: the body runs under no_grad, and in backward again with
grad, its backward reaching what the closure holds (parameters) as eager's does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch.utils.checkpoint as torch_checkpoint


@dataclass(frozen=True)
class CheckpointSpec:
    """One captured checkpoint call."""

    # Per positional tensor argument of the user's call, in order: the body input it is
    # (one tensor passed twice is one input).
    passed_idx: tuple


class CheckpointCall:
    """fx target of one captured checkpoint: `(body, *inputs, **options) -> body's outputs`.
    The options are checkpoint's own keyword arguments, passed on as the user gave them."""

    __name__ = __qualname__ = "checkpoint"
    __module__ = "minidynamo.checkpoint"

    def __init__(self, spec: CheckpointSpec):
        self.spec = spec

    def __call__(self, body, *inputs, **options):
        # The body's own code, not Module.__call__: a process-wide module hook of the user's
        # must not see it (eager calls no module here).
        run = getattr(body, "forward", body)
        passed_idx = self.spec.passed_idx

        def function(*passed):  # what the recompute calls again with the saved arguments
            values = list(inputs)
            for i, value in zip(passed_idx, passed):
                values[i] = value
            return run(*values)

        return torch_checkpoint.checkpoint(function, *(inputs[i] for i in passed_idx), **options)

    def __repr__(self):
        return "<torch.utils.checkpoint.checkpoint of a traced body>"
