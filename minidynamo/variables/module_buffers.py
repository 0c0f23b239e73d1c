"""`self.count += 1` on a buffer of a module passed in: the in-place op changes the buffer
itself (a graph node on its tensor), and STORE_ATTR puts that same tensor back under its
name. Module.__setattr__ then registers it again (register_buffer), which changes nothing
where both are nn.Module's own and no process-wide buffer registration hook is set: the
store is a no-op, the write itself reaching the buffer through the graph's in-place node.

`self.count = self.count + 1` puts a new plain tensor under the buffer's name: a store the
entry makes after the graph through the module's own `__setattr__` (register_buffer, as in
eager), later reads in the trace answered by it (objects.py `stored`). Any other value
stored under a buffer's name declines as before (objects.py)."""
from __future__ import annotations

import inspect

import torch

from ..exc import unsupported
from ..guards import Guard
from ..sources import ObjectSource
from .stores import BufferSlotSource, record_store
from .tensor import TensorVariable

_module_py = torch.nn.modules.module
_HOOKS = tuple(a for a in ("_global_buffer_registration_hooks",) if hasattr(_module_py, a))


def stores_buffer_back(tx, obj, name: str, value) -> bool:
    """Whether `obj.name = value` (obj a module passed in) puts its buffer `name` back
    unchanged, guarded so; False where it is another store."""
    if name in obj.stored or not _registers_as_buffer(obj.value, name):
        return False
    if obj.var_getattr(tx, name) is not value:
        return False
    _guard_registration(tx, obj, name)
    return True


def replaces_buffer(tx, obj, name: str, value) -> bool:
    """Whether `obj.name = value` puts a new plain tensor under the name of a buffer of
    `obj` (a module passed in): then recorded as a store (written back after the graph,
    through Module.__setattr__) and guarded so; False where it is another store."""
    module = obj.value
    if not _registers_as_buffer(module, name) or not isinstance(value, TensorVariable) \
            or value.python_type() is not torch.Tensor:
        return False
    if id(module.__dict__["_buffers"]) in tx.output.containers:
        unsupported("side_effect", f"assigning buffer {name!r} after reading the module's buffer table "
                                   "(that read is not rebuilt after the write)")
    _guard_registration(tx, obj, name)
    tx.output.guards.add(Guard("EQUALS_MATCH", BufferSlotSource(obj.source, name), True))
    record_store(tx.output, obj)
    obj.stored[name] = value
    return True


def check_buffer_table_read(obj):
    """`module._buffers` read after the trace stored a new tensor as one of its buffers:
    the table holds the old one until the entry writes the store back."""
    replaced = [n for n in obj.stored if n in obj.value.__dict__.get("_buffers", ())]
    if replaced:
        unsupported("side_effect", f"reading the buffer table of {obj.describe()} after assigning its buffer "
                                   f"{replaced[0]!r} (the table is written after the graph)")


def _registers_as_buffer(module, name: str) -> bool:
    """Whether Module.__setattr__ would register a tensor stored under `name` as a buffer
    (nn.Module's own __setattr__ and register_buffer, the name a buffer's and no other
    table's)."""
    tables = [module.__dict__.get(t) for t in ("_buffers", "_parameters", "_modules")]
    if not all(isinstance(t, dict) for t in tables) or name not in tables[0] or any(name in t for t in tables[1:]):
        return False
    cls = type(module)
    return inspect.getattr_static(cls, "__setattr__") is torch.nn.Module.__setattr__ \
        and inspect.getattr_static(cls, "register_buffer") is torch.nn.Module.register_buffer \
        and "register_buffer" not in module.__dict__ and not isinstance(module, torch.jit.ScriptModule)


def _guard_registration(tx, obj, name: str):
    """That a store under the buffer `name` keeps registering as now: the class's
    __setattr__ and register_buffer, and no process-wide registration hook."""
    present = [a for a in _HOOKS if getattr(_module_py, a)]
    if present:
        unsupported("side_effect", f"assigning buffer {name!r}: process-wide hooks are set ({', '.join(present)})")
    cls = type(obj.value)
    obj.guard_class_function(tx, "__setattr__", inspect.getattr_static(cls, "__setattr__"))
    obj.guard_class_function(tx, "register_buffer", inspect.getattr_static(cls, "register_buffer"))
    if _HOOKS:
        tx.output.guards.add(Guard("NO_HOOKS", ObjectSource(_module_py, "torch.nn.modules.module"), None,
                                   {"attrs": _HOOKS}))
