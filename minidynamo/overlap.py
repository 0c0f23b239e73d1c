"""Eager's memory-overlap checks, which fake tensors skip.

An in-place or out= op raises in eager when the tensor it writes has elements sharing
memory (an expand: `x.expand(3, 4).add_(1)`) or partly overlaps one it reads
(`x[1:].copy_(x[:-1])`). On fakes the same op succeeds, so a trace would record it and
the graph would raise later, outside the user's `try` and after side effects that eager
never reached. Which ops check is op by op (zero_ and fill_ on an expand do not), so a
write that eager might refuse is declined: the call runs eagerly.

Mirrors ATen's `has_internal_overlap` (YES) and `get_overlap_status` (PARTIAL). Symbolic
sizes are compared only where the answer is known without a guard; a write that may
overlap is declined."""
from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true


def _known(cond) -> bool:
    return statically_known_true(cond)


def _concrete(*values) -> bool:
    return all(type(v) is int for v in values)


def internal_overlap(t: torch.Tensor, surely: bool = False) -> bool:
    """Some element of `t` may be another's memory too (a stride-0 dimension of size > 1);
    `surely`: is, whatever the symbolic sizes."""
    sizes, strides = t.shape, t.stride()
    if any(_known(s == 0) for s in sizes):
        return False
    return any(type(st) is int and st == 0 and (_known(s > 1) if surely else not _known(s <= 1))
               for s, st in zip(sizes, strides))


def _dense(t: torch.Tensor) -> bool:
    """ATen's is_non_overlapping_and_dense: some permutation of `t` is contiguous."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def partial_overlap(a: torch.Tensor, b: torch.Tensor, storage) -> bool:
    """`a` and `b` cover intersecting memory without being the same elements in the same
    order (ATen's PARTIAL); the full-overlap case `x.add_(x)` is allowed. With symbolic
    sizes, what is not known without a guard counts as a partial overlap."""
    if a is b or storage(a) is None or storage(a) != storage(b):
        return False
    if _known(a.numel() == 0) or _known(b.numel() == 0):
        return False
    a_begin, b_begin = a.storage_offset() * a.itemsize, b.storage_offset() * b.itemsize
    a_end, b_end = a_begin + a.numel() * a.itemsize, b_begin + b.numel() * b.itemsize
    if _known(a_end <= b_begin) or _known(b_end <= a_begin):
        return False
    if _known(a_begin == b_begin) and _known(a_end == b_end) and a.dim() == b.dim() and all(
            _known(x == y) for x, y in zip(a.stride(), b.stride())):
        return False  # the same elements: full
    if not _concrete(*a.shape, *b.shape, *a.stride(), *b.stride(), a.storage_offset(), b.storage_offset()):
        # May overlap in part: declined rather than guarded, unless one is not dense
        # (a broadcast source), which ATen does not refuse.
        return not (internal_overlap(a, surely=True) or internal_overlap(b, surely=True))
    if not _dense(a) or not _dense(b):
        return False  # ATen: too hard to tell (it does not raise)
    return True


def refused_write(written: list, args: list, storage) -> str | None:
    """Why eager may refuse one aten op writing `written` ((list index or None,
    tensor) pairs) while reading `args` (the op's arguments, in order). An
    element of a written list (a foreach op) meets the same element of the other lists,
    as eager's per-tensor checks pair them."""
    for _, w in written:
        if internal_overlap(w):
            return "writes to a tensor whose elements share memory (an expand)"
    for index, w in written:
        for v in args:  # w itself among them is a full overlap, not refused
            if isinstance(v, (list, tuple)):
                v = v if index is None else v[index:index + 1] if len(v) > index else ()
            else:
                v = (v,)
            if any(isinstance(t, torch.Tensor) and partial_overlap(w, t, storage) for t in v):
                return "writes to a tensor that partly overlaps one it reads"
    return None
