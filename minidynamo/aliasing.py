"""Aliasing between tensor inputs: which inputs the graph writes, and the guard that the
memory those inputs share on a call is what the trace saw.

A graph is traced for one aliasing relation of its inputs. `a.add_(b); return c + 1`
traced with three separate tensors reads `c` as it came in; called with `c` being `a` (or
a view of it) eager reads the sum. A compiling backend (AOTAutograd) bakes the relation
into its graph, a CUDA graph into its recording; only the eager backend, which runs the
ops as recorded on the real tensors, happens to follow it. So an entry whose graph
writes an input carries one TENSOR_ALIASING guard over its tensor inputs:

* inputs the trace saw share a storage (`a is c`, `b = a[:]`, `a.t()`, `a[1:]`, two
  parameters over one flat buffer) must again: the same objects where they were the same
  object, the same storage offset, sizes and strides (so the same elements overlap);
* inputs the trace saw over different storages may now share one only where it cannot be
  observed: neither is written, or both are different objects over disjoint byte ranges
  (`x[:3]` and `x[3:]`): a graph traced for separate tensors is right for those.

Pairs of inputs the graph only reads never matter (a read sees the same values whoever
else views them). The check is one set of storage addresses (`torch._C._storage_address`,
about 0.1 µs per tensor) in the common case — distinct storages traced, distinct now; the
exact relation is worked out only when two inputs share a storage. Graphs that write no
input get no guard at all.

Memory shared by two different storages (two `torch.from_numpy` of one array) is not seen,
as in torch.compile: no backend models it either.
"""
from __future__ import annotations

import torch

from .dynamic import has_symbolic
from .guards import Guard
from .sources import TensorsSource


def _python_storage_address(t) -> int:
    return t.untyped_storage()._cdata


_storage_address = getattr(torch._C, "_storage_address", _python_storage_address)


def _key(t) -> int:
    """The storage's address; the tensor's own id where it has none (sparse, nested)."""
    try:
        return _storage_address(t)
    except Exception:
        return id(t)


def _layout(t) -> tuple:
    return t.storage_offset(), tuple(t.shape), t.stride()


def _span(t) -> tuple[int, int]:
    """[first byte, past the last byte) of the memory `t`'s elements occupy."""
    if t.numel() == 0:
        return 0, 0
    lo = t.data_ptr()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return lo, lo + (last + 1) * t.element_size()


def _overlap(a, b) -> bool:
    (lo1, hi1), (lo2, hi2) = _span(a), _span(b)
    return lo1 < hi2 and lo2 < hi1


def written_inputs(graph) -> set:
    """Placeholders of `graph` that its nodes may write, directly or through a view, from
    the write and alias facts the trace recorded on each node (graph.py); a node without
    them may write every value it takes."""
    roots: dict = {}  # node -> placeholders whose memory it may share
    written: set = set()
    for node in graph.nodes:
        if node.op == "placeholder":
            roots[node] = {node}
            continue
        if node.op in ("output", "get_attr"):
            continue
        inputs = node.all_input_nodes
        shared = node.meta.get("aliases")
        mine = set()
        for a in inputs if shared is None else [inputs[i] for i in shared]:
            mine |= roots.get(a, set())
        roots[node] = mine
        writes = node.meta.get("writes")
        targets = inputs if writes is None else [inputs[i] for i in writes]
        for m in targets:
            if writes is not None:  # set_ moves a value onto another's memory
                roots[m] = roots.get(m, set()) | mine
            written |= roots.get(m, set())
    return written


# Up to this many tensor inputs, an entry traced over separate storages also serves calls
# whose written inputs are views of one storage that do not overlap (worked out pair by pair
# on each such call); with more, such a call gets an entry of its own, whose fast path
# checks the shared storages.
RELAX_MAX = 32


class AliasingCheck:
    """The run-time check of one entry: called with the tuple of its tensor inputs."""

    def __init__(self, names: list, tensors: list, written: list, symbolic: bool = False):
        self.names = names
        self.written = tuple(written)
        self.n = len(tensors)
        self.indices = range(self.n)
        keys = [_key(t) for t in tensors]
        first_key: dict = {}
        first_obj: dict = {}
        self.group = tuple(map(first_key.setdefault, keys, self.indices))  # traced storage groups
        self.same = tuple(map(first_obj.setdefault, map(id, tensors), self.indices))  # traced objects
        self.distinct = len(first_key) == self.n
        self.layouts = {i: _layout(t) for i, t in enumerate(tensors) if keys.count(keys[i]) > 1}
        # Groups of inputs over one storage, and where their members sit: given TENSOR_MATCH's
        # sizes and strides the storage offset says which elements overlap (with symbolic
        # sizes, all of the layout).
        self.n_groups = len(first_key)
        by_group: dict = {}
        for i in self.layouts:
            by_group.setdefault(self.group[i], []).append(i)
        self.shared = tuple(tuple(g) for g in by_group.values())
        self.members = tuple(self.layouts)
        self._where = _layout if symbolic else torch.Tensor.storage_offset
        self.wheres = tuple(self._where(tensors[i]) for i in self.members)
        self.__name__ = "check_aliasing"

    def __call__(self, ts: tuple) -> bool:
        try:
            if self.distinct:  # the common case: one set of storage addresses
                if len(set(map(_storage_address, ts))) == self.n:
                    return True
            else:  # shared as traced: the same groups of storages, offsets, no object twice
                addrs = list(map(_storage_address, ts))
                members = list(map(ts.__getitem__, self.members))
                if (len(set(addrs)) == self.n_groups
                        and all(len(set(map(addrs.__getitem__, g))) == 1 for g in self.shared)
                        and tuple(map(self._where, members)) == self.wheres
                        and len(set(map(id, members))) == len(members)):
                    return True
        except Exception:  # a tensor without a storage: the slow path keys it by id
            pass
        return self.first_difference(ts) is None

    def first_difference(self, ts, names=None) -> str | None:
        """None when `ts` alias as traced (up to what cannot be observed); else in words,
        the inputs called `names` (their sources' names in the user's terms) or as traced."""
        names, group, same = names or self.names, self.group, self.same
        keys = [_key(t) for t in ts]
        objects: dict = {}
        for i, t in enumerate(ts):
            g = group[i]
            if g != i:
                if keys[i] != keys[g]:
                    return f"{names[i]} and {names[g]} shared a storage when traced, now they do not"
                if _layout(t) != self.layouts[i] or _layout(ts[g]) != self.layouts[g]:
                    return (f"{names[i]} and {names[g]} share a storage as when traced, but at other "
                            f"offsets, sizes or strides (offset, sizes, strides now "
                            f"{_layout(t)} and {_layout(ts[g])}, traced {self.layouts[i]} and {self.layouts[g]})")
            j = objects.setdefault(id(t), same[i])  # the first input that is this object
            if j != same[i] and group[j] == g:  # traced apart: below
                return f"{names[j]} and {names[i]} were different tensors when traced, now the same object"
            if same[i] != i and ts[same[i]] is not t:
                return f"{names[same[i]]} and {names[i]} were the same tensor when traced, now different objects"
        by_key: dict = {}
        for i, k in enumerate(keys):
            by_key.setdefault(k, []).append(i)
        for members in by_key.values():
            groups = {group[i] for i in members}
            if len(groups) < 2:
                continue
            for i in members:  # traced apart, now over one storage: fine unless a write shows
                if not self.written[i]:
                    continue
                for j in members:
                    if group[j] == group[i]:
                        continue
                    if self.n > RELAX_MAX:  # a fresh entry checks such calls on its fast path
                        return (f"{names[i]} (written by the graph) and {names[j]} were separate storages "
                                f"when traced, now one (not relaxed for more than {RELAX_MAX} tensors)")
                    if ts[i] is ts[j] or _overlap(ts[i], ts[j]):
                        return (f"{names[i]} (written by the graph) and {names[j]} were separate memory "
                                f"when traced, now {'the same object' if ts[i] is ts[j] else 'overlapping views of one storage'}")
        return None

    def describe(self, names=None) -> str:
        if self.distinct:
            return "separate memory (or views that do not overlap where one is written)"
        names, shared = names or self.names, {}
        for i, g in enumerate(self.group):
            shared.setdefault(g, []).append(names[i])
        parts = [" / ".join(v) for v in shared.values() if len(v) > 1]
        return "storages shared as traced: " + "; ".join(parts)


def aliasing_guard(inputs, graph):
    """The TENSOR_ALIASING guard over the graph's tensor inputs (graph.GraphInput), or None
    where the graph writes none of them or has fewer than two."""
    tensor_inputs = [inp for inp in inputs if isinstance(inp.example, torch.Tensor)]
    if len(tensor_inputs) < 2:
        return None
    written = written_inputs(graph)
    flags = [inp.node in written for inp in tensor_inputs]
    if not any(flags):
        return None
    symbolic = any(has_symbolic(tuple(inp.node.meta["val"].shape)) for inp in tensor_inputs
                   if isinstance(inp.node.meta.get("val"), torch.Tensor))
    check = AliasingCheck([inp.source.name() for inp in tensor_inputs],
                          [inp.example for inp in tensor_inputs], flags, symbolic)
    return Guard("TENSOR_ALIASING", TensorsSource(tuple(inp.source for inp in tensor_inputs)), check)
