"""aten ops that check their tensors' values in eager and raise (an index out of range, a
class past num_classes, a matrix that is not positive-definite, probabilities below 0).

Fake tensors have no values: the trace records such an op and the graph raises later,
outside the `try` of the frame that eager catches it in. Inside a try block of some frame
of the trace the op therefore declines (graph.py); elsewhere the graph raises the same
exception eager does. Layer: leaf (imports torch only)."""
from __future__ import annotations

import torch

_aten = torch.ops.aten

DATA_CHECKED = frozenset({
    _aten.gather, _aten.scatter, _aten.scatter_add, _aten.scatter_reduce, _aten.index_select, _aten.index,
    _aten.index_put, _aten._index_put_impl_, _aten.index_add, _aten.index_copy, _aten.index_fill, _aten.take,
    _aten.put, _aten.embedding, _aten.embedding_bag, _aten._embedding_bag, _aten.one_hot, _aten.nll_loss_forward,
    _aten.nll_loss2d_forward, _aten.multinomial, _aten._linalg_check_errors, _aten.masked_scatter,
    _aten.bincount, _aten.repeat_interleave, _aten._assert_async, _aten.histc, _aten.binary_cross_entropy,
    _aten.bernoulli, _aten.normal,
    # their in-place forms
    _aten.scatter_, _aten.scatter_add_, _aten.scatter_reduce_, _aten.index_put_, _aten.index_add_,
    _aten.index_copy_, _aten.index_fill_, _aten.put_, _aten.masked_scatter_, _aten.bernoulli_,
})
# Calls whose fake run decomposes before the checked op reaches the dispatcher.
CHECKED_CALLS = (torch.nn.functional.one_hot,)
