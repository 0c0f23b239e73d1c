"""`self.count += 1` on a buffer of a module passed in: the in-place op changes the buffer
itself (a graph node on its tensor), and STORE_ATTR puts that same tensor back under its
name. Module.__setattr__ then registers it again (register_buffer), which changes nothing
where both are nn.Module's own and no process-wide buffer registration hook is set: the
store is a no-op, the write itself reaching the buffer through the graph's in-place node.
Any other value stored under a buffer's name declines as before (objects.py)."""
from __future__ import annotations

import inspect

import torch

from ..exc import unsupported
from ..guards import Guard
from ..sources import ObjectSource

_module_py = torch.nn.modules.module
_HOOKS = tuple(a for a in ("_global_buffer_registration_hooks",) if hasattr(_module_py, a))


def stores_buffer_back(tx, obj, name: str, value) -> bool:
    """Whether `obj.name = value` (obj a module passed in) puts its buffer `name` back
    unchanged, guarded so; False where it is another store."""
    module = obj.value
    buffers = module.__dict__.get("_buffers")
    if not isinstance(buffers, dict) or name not in buffers or name in obj.stored:
        return False
    cls = type(module)
    setattr_ = inspect.getattr_static(cls, "__setattr__")
    register = inspect.getattr_static(cls, "register_buffer")
    if setattr_ is not torch.nn.Module.__setattr__ or register is not torch.nn.Module.register_buffer \
            or "register_buffer" in module.__dict__ or isinstance(module, torch.jit.ScriptModule):
        return False
    if obj.var_getattr(tx, name) is not value:
        return False
    present = [a for a in _HOOKS if getattr(_module_py, a)]
    if present:
        unsupported("side_effect", f"assigning buffer {name!r}: process-wide hooks are set ({', '.join(present)})")
    obj.guard_class_function(tx, "__setattr__", setattr_)
    obj.guard_class_function(tx, "register_buffer", register)
    if _HOOKS:
        tx.output.guards.add(Guard("NO_HOOKS", ObjectSource(_module_py, "torch.nn.modules.module"), None,
                                   {"attrs": _HOOKS}))
    return True
