"""What an op does to memory, found by running it on fake tensors and recorded on its node
once for every later pass (CUDA graphs, the launch program, the fake-op memo):

* ``node.meta["writes"]``: positions in ``node.all_input_nodes`` of the values the op wrote —
  those whose version counter moved (in-place ops, ``out=``, ``x[i] = v``, ``torch.relu_``)
  or that an aten op's schema marks written (`FactMode`: the writes counters miss).
  A view shares its base's counter and storage, so a write through a view also shows on
  every argument it views; passes map a written value to the inputs it may reach through
  its aliases.
* ``node.meta["aliases"]``: positions of the values whose storage the result shares (a
  view, or an in-place op's own argument); ``()`` is a fresh tensor.

Nodes made elsewhere carry the same facts, recorded where they are made: a Triton launch
(variables/triton.py) from its kernel's source analysis, the functional pass's nodes
(triton/functional.py). `written_values` and `aliased_values` read them back as nodes; a
node without them reads as None: unknown, every input may be written and aliased.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch._subclasses import fake_tensor as _fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode

from .data_checks import DATA_CHECKED
from .fakecache import SLOW, direct, learn, memo_key, replay
from .overlap import refused_write


def written_values(node: fx.Node) -> list | None:
    """The graph values `node` writes (a write through a view also writes what it views:
    follow `aliased_values`), or None when unknown."""
    writes = node.meta.get("writes")
    return None if writes is None else [node.all_input_nodes[i] for i in writes]


def aliased_values(node: fx.Node) -> list | None:
    """The graph values whose memory `node`'s result shares ([]: a fresh tensor, or no
    tensor), or None when unknown."""
    shared = node.meta.get("aliases")
    return None if shared is None else [node.all_input_nodes[i] for i in shared]


def tensor_args(fx_value, fake_value, acc: list) -> list:
    """(fx node, fake tensor) pairs of one lowered argument, walked in parallel."""
    if isinstance(fake_value, torch.Tensor):
        if isinstance(fx_value, fx.Node):
            acc.append((fx_value, fake_value))
    elif isinstance(fake_value, (list, tuple)):
        for n, f in zip(fx_value, fake_value):
            tensor_args(n, f, acc)
    elif isinstance(fake_value, dict):
        for k, f in fake_value.items():
            tensor_args(fx_value[k], f, acc)
    return acc


def versions_of(tensors: list) -> list | None:
    """Version counters of the arguments, or None where one has none (inference tensors)."""
    try:
        return [t._version for _, t in tensors]
    except RuntimeError:
        return None


# aten ops that write batch norm's running statistics without their schema saying so (nor
# their version counters): written argument positions, and the `training` flag's position.
_UNDECLARED_WRITES = {
    "aten::native_batch_norm": ((3, 4), 5),
    "aten::cudnn_batch_norm": ((3, 4), 5),
    "aten::miopen_batch_norm": ((3, 4), 5),
    "aten::batch_norm_update_stats": ((1, 2), None),
}


_WRITE_SPOTS: dict = {}  # aten op -> ((position, name, keyword only, flag position), ...)


def _write_spots(func) -> tuple:
    schema = getattr(func, "_schema", None)
    if schema is None:
        return ()
    args = schema.arguments
    spots = [(i, a.name, a.kwarg_only, None) for i, a in enumerate(args)
             if a.alias_info is not None and a.alias_info.is_write]
    positions, flag = _UNDECLARED_WRITES.get(schema.name, ((), None))
    spots += [(i, args[i].name, False, flag) for i in positions]
    return tuple(spots)


class WriteLog:
    """The tensors the aten ops of one traced call write, by their schemas."""

    __slots__ = ("ids", "storages", "overlap", "checked")

    def __init__(self):
        self.ids: set = set()
        self.storages: set = set()
        self.overlap = None  # why eager may refuse a write (overlap.py), or None
        self.checked = None  # an aten op that checks tensor values (data_checks.py), or None

    def note(self, spots, args, kwargs) -> None:
        written = []
        for i, name, kwarg_only, flag in spots:
            if flag is not None and not (args[flag] if flag < len(args) else kwargs.get("training")):
                continue
            v = kwargs.get(name) if kwarg_only or i >= len(args) else args[i]
            listed = isinstance(v, (list, tuple))
            for k, t in enumerate(v if listed else (v,)):  # Tensor(a!)[] too
                if isinstance(t, torch.Tensor):
                    self.ids.add(id(t))
                    self.storages.add(storage_of(t))
                    written.append((k if listed else None, t))
        if written and self.overlap is None:
            self.overlap = refused_write(written, [*args, *kwargs.values()], storage_of)


# Ops FakeTensorMode.dispatch answers first, from the tensor's own fields (prim.device).
_META_HANDLERS = getattr(_fake_tensor, "_DISPATCH_META_HANDLERS", {})


class FactMode(FakeTensorMode):
    """FakeTensorMode that, while `log` is set, notes what each aten op writes by its
    schema. Version counters alone miss writes: foreach and fused ops do not bump them on
    fake tensors, batch norm never bumps its running statistics', and inference tensors
    have none."""

    log = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo (two eval-frame
        # switches a call, 2% of a model's first trace) so that Dynamo never traces it; this
        # mode runs only inside minidynamo's own traces.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        log = self.log
        if log is not None:
            spots = _WRITE_SPOTS.get(func)
            if spots is None:
                spots = _WRITE_SPOTS[func] = _write_spots(func)
            if spots:
                log.note(spots, args, kwargs or {})
            if func.overloadpacket in DATA_CHECKED:
                log.checked = func
        handler = _META_HANDLERS.get(func)
        if handler is not None:  # prim.device and the like: FakeTensorMode.dispatch's first step
            return handler(args)
        kwargs = kwargs or {}
        result = direct(self, func, args, kwargs)
        if result is not SLOW:
            return result
        key = memo_key(self, func, args, kwargs)
        if key is not None:
            result = replay(self, key, args)
            if result is not SLOW:
                return result
        result = super().__torch_dispatch__(func, types, args, kwargs)
        if key is not None:
            learn(key, args, kwargs, result)
        return result


def storage_of(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
        return None


def memory_facts(tensors: list, versions, log, result):
    """(nodes written, nodes whose storage the result shares, per-item sharing for a
    tuple result or ()), from one fake run of the op."""
    if not tensors:
        return (), (), ()
    # Storages after the op: set_ moves an argument onto another's storage.
    storages = [(n, storage_of(t)) for n, t in tensors]
    written = ()
    if versions is not None and [t._version for _, t in tensors] != versions:
        written = tuple(n for (n, t), v in zip(tensors, versions) if t._version != v)
    if log.ids:
        written += tuple(n for (n, t), (_, st) in zip(tensors, storages)
                         if id(t) in log.ids or st in log.storages or st is None)
    written = _unique(written)
    if isinstance(result, torch.Tensor):
        return written, _shared(storages, result), ()
    shared, items = (), []
    for r in result if isinstance(result, (tuple, list)) else ():
        mine = _shared(storages, r) if isinstance(r, torch.Tensor) else ()
        shared += mine
        items.append(bool(mine))
    return written, _unique(shared), tuple(items)


def _shared(storages: list, t: torch.Tensor) -> tuple:
    """Argument nodes whose storage `t` shares (all of them where a storage is unknown)."""
    s = storage_of(t)
    return _unique(n for n, st in storages if st == s or s is None or st is None)


def positions(node: fx.Node, values: tuple) -> tuple:
    if not values:
        return ()
    inputs = node.all_input_nodes
    lift = getattr(node.graph, "lift", None)  # a body's graph names outer values by placeholders
    return tuple(inputs.index(lift(v) if lift is not None else v) for v in values)


def _unique(nodes) -> tuple:
    return tuple(dict.fromkeys(nodes))
