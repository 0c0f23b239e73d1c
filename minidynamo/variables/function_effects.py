"""What an autograd.Function's bodies do to objects outside them (variables/autograd.py).

A forward may leave a value it made where its caller can reach it: appended to a list it
was given, stored in a dict, on an object made in the frame. `find_escaping` finds those by
walking from the apply's arguments and the outside containers the trace changed;
`escaping_outputs` picks the body nodes the Function node returns for them (after its
outputs); once the node is emitted, `rename_escaping` makes each such tracker name the
node's output, in place, so every container holding it holds the new value.

A backward runs at backward time: it must not change what the forward's caller can see
(the entry writes outside containers back right after the forward's graph).
`outside_unchanged` refuses changes to outside lists and dicts while it is traced, and
attribute stores on outside objects and module global stores (`RefusedStores`; a
checkpointed body keeps those instead, body_stores.py); `made_state` tells whether it
changed objects made in the trace.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx

from ..exc import unsupported
from .base import ObjectConstantVariable, VariableTracker
from .lists import BaseListVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable


def find_escaping(fwd, ctx, roots) -> tuple[list, list]:
    """(trackers of values computed in the forward body (tensors, symbolic sizes) that the
    caller can reach once apply returns, every tracker it can reach): from the apply's
    arguments and the outside containers the trace changed (an outside object's attribute
    cannot be set; one of its lists or dicts changed is among those), through containers,
    objects and closures made in the trace. Everything else the forward made is gone."""
    found, seen, keep = [], set(), []
    todo = list(roots)
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        keep.append(v)  # ids stay unique while the walk runs
        if isinstance(v, (TensorVariable, SymNodeVariable)):
            if v.node.graph is fwd:
                found.append(v)
        elif v is ctx:
            unsupported("construct", f"{ctx.fn_name}'s ctx escapes its forward")
        elif isinstance(v, VariableTracker) and not isinstance(v, ObjectConstantVariable):
            for name in _slots(type(v)):
                todo.extend(_trackers_in(getattr(v, name, None)))
            todo.extend(_trackers_in(getattr(v, "__dict__", None)))
    return found, keep


def _slots(cls) -> tuple:
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(n for c in cls.__mro__ for n in getattr(c, "__slots__", ())
                                    if n not in ("source", "__weakref__", "__dict__"))
    return names


_SLOTS: dict = {}


def _trackers_in(value, depth: int = 2) -> list:
    """The trackers a tracker's attribute holds: itself, or the items (keys and values) of
    the Python containers trackers keep theirs in, and of the key wrappers in them."""
    if isinstance(value, VariableTracker):
        return [value]
    if depth == 0 or value is None or isinstance(value, (str, bytes, int, float)):
        return []
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif type(value).__module__.startswith("minidynamo.variables"):  # a key wrapper, live items
        items = [getattr(value, n, None) for n in _slots(type(value))]
    else:
        return []
    out = []
    for item in items:
        out.extend(_trackers_in(item, depth - 1))
    return out


def escaping_outputs(name, fwd, escaping, outs) -> list:
    """The forward body's nodes the apply node returns after the user's outputs: escaping
    tensors that are not outputs, and tensors whose sizes an escaping size reads."""
    out_nodes = {o.node for o in outs}
    extra: list = []
    for v in escaping:
        if isinstance(v, TensorVariable):
            if v.node not in out_nodes and v.node.op != "placeholder" and v.node not in extra:
                extra.append(v.node)
        else:
            extra.extend(n for n in _tensors_sizes_read(v.node) if n not in out_nodes and n not in extra)
    # Values sharing memory (a view of an input, one object left as two values) would be
    # separate objects here: those break instead.
    taken = {_storage(n.meta["val"]): f"the tensor {n.name} it reads" for n in fwd.lifted
             if isinstance(n.meta.get("val"), torch.Tensor)}
    taken.update({_storage(o.fake): "one of its outputs" for o in outs if o.node.graph is fwd})
    for v in escaping:
        if isinstance(v, TensorVariable) and v.node in extra:
            key = _storage(v.fake)
            if key in taken and taken[key] != v.node:
                what = taken[key] if isinstance(taken[key], str) else "another tensor it leaves outside"
                unsupported("side_effect", f"{name}.forward leaves outside a tensor sharing memory with {what}")
            taken[key] = v.node
    return extra


def _tensors_sizes_read(node) -> list:
    """Tensors made in the forward body whose sizes a symbolic size node computes from."""
    out, todo, seen = [], [node], set()
    while todo:
        n = todo.pop()
        if n in seen or n.op == "placeholder":
            continue
        seen.add(n)
        if not n.meta.get("sym"):
            out.append(n)
            continue
        todo.extend(n.all_input_nodes)
    return out


def _storage(fake):
    try:
        return fake.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return id(fake)


def rename_escaping(output, fwd, escaping, renamed: dict) -> None:
    """After the node is emitted (`renamed`: forward body node -> the node's output in
    the graph the apply is in): every escaping tracker names its value there (the output,
    the outer value a placeholder stands for, size arithmetic made again), in place, so
    each container or object holding it holds the new value."""
    outer_of = {fwd.placeholder_for(n): n for n in fwd.lifted}

    def outer(n):
        if n.graph is not fwd:
            return n
        if n not in renamed:
            if n.op == "placeholder":
                renamed[n] = outer_of[n]
            else:  # size arithmetic: computed again from the values it reads
                renamed[n] = output.sym_node(n.op, n.target, fx.node.map_arg(n.args, outer), n.meta["val"])
        return renamed[n]

    for v in escaping:
        if v.node.graph is fwd:
            v.node = outer(v.node)
            if isinstance(v, TensorVariable):
                v.fake = v.node.meta["val"]


def made_state(roots) -> dict:
    """id -> what it holds, for each object made in the trace reachable from `roots`
    (lists, dicts, objects): equal before and after a trace that changed none of them."""
    state, seen, todo = {}, {}, list(roots)
    while todo:
        v = todo.pop()
        if id(v) in seen or not isinstance(v, VariableTracker) or isinstance(
                v, (TensorVariable, SymNodeVariable, ObjectConstantVariable)):
            continue
        seen[id(v)] = v  # (kept alive: ids stay unique while the walk runs)
        held = []
        for name in _slots(type(v)):
            held.extend(_trackers_in(getattr(v, name, None)))
        held.extend(_trackers_in(getattr(v, "__dict__", None)))
        # Outside ones are watched by the hooks (outside_unchanged), and walked through only:
        # one reached for the first time (a closure cell's contents read) is no change.
        if v.source is None:
            state[id(v)] = tuple(map(id, held))
        todo.extend(held)
    return state


class RefusedStores:
    """What `outside_unchanged` does with a store on an object from outside (`obj.x = v`,
    stores.record_store) or on a module global (`global n; n = v`, global_stores.py) made
    while its block is traced: refused, before it is made."""

    def __init__(self, refuse):
        self.refuse = refuse

    def object_store(self, output, var) -> None:
        self.refuse(var)

    def global_store(self, output, globals_dict: dict, name: str) -> None:
        self.refuse(None, f"the global {name!r}")

    def undo(self, output) -> None:
        """Put back what the block stored (nothing: every store was refused)."""


@contextlib.contextmanager
def outside_unchanged(output, what: str, stores=RefusedStores,
                      why: str = "it runs at backward time, after the forward's graph"):
    """Within the block, a change to a list or dict from outside declines (and is taken back):
    the backward runs at backward time, the entry writes outside containers back after the
    forward's graph. Attribute and global stores go to `stores(refuse)`, which the block
    gets (refused as made by default); what it kept is put back when the block ends."""
    lists = [(v, None if v.appended is None else list(v.appended), v._size)
             for _, v in output.wrapped.values() if isinstance(v, BaseListVariable)]

    def refuse(var, change=None):
        for v, appended, size in lists:  # an append is recorded after it is made
            v.appended, v._size = appended, size
        if isinstance(var, BaseListVariable) and var.appended is not None and all(v is not var for v, _, _ in lists):
            # A list first read inside the block: the one append just made is its only change
            # (the frame reuses the tracker after the block: it must not keep the append).
            var._size -= len(var.appended)
            var.appended = None
        unsupported("side_effect", f"{what} changes {change or var.source.name()!r} from outside: {why}")

    # Nested (a Function's backward inside a checkpointed body): the enclosing refusal is
    # put back after.
    shadowed = ("record_append", "record_mutation", "store_watch")
    enclosing = {k: v for k, v in vars(output).items() if k in shadowed}
    watch = stores(refuse)
    output.record_append = output.record_mutation = refuse  # OutputGraph's own, shadowed
    output.store_watch = watch  # read by stores.record_store and global_stores
    try:
        yield watch
    finally:
        watch.undo(output)
        for k in shadowed:
            vars(output).pop(k, None)
        vars(output).update(enclosing)
