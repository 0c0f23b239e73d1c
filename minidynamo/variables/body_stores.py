"""Stores a checkpointed body makes on objects from outside and on module globals, kept
while it is traced and put back after it, where each leaves the value it found.

Eager's checkpoint runs the body's Python twice: in forward and again in backward, to
recompute. The captured node re-runs only the body's graph in backward, and the outer
trace carries out the body's Python effects once. So a body may be captured only where
running its effects once and twice is the same: where none is left when it returns. A
store that the body undoes before returning (`saved = obj.x; obj.x = v; ...; obj.x =
saved`, a context-variable style `token = var.set(v) ... var.reset(token)`) leaves none:
reads inside the body see `v` as eager's do, in the trace as in both of eager's runs, and
what the outer frame sees afterwards is the value from before, so the trace drops the
store rather than writing it back.

A store leaves the value it found when its final value is the very tracker read before it
(from the object or global, guarded by the builder as any read), or a constant of the same
type and value (None, a bool, an int, a string, a float of the same repr): the read's guard
pins what the entry then assumes it was. Anything else (another object, a new attribute, a
global that did not exist, a deletion, a buffer) declines the capture as a change.
"""
from __future__ import annotations

from ..exc import unsupported
from ..sources import GlobalSource
from .attribute_protocols import instance_dict, overrides_instance_dict
from .constant import ConstantVariable
from .function_effects import RefusedStores
from .global_stores import DELETED, binding_of, forget_global
from .objects import _ABSENT, on_class, UserObjectVariable

_UNBOUND = object()  # a global the trace had not stored before the body
_SAME_TYPES = (type(None), bool, int, float, str, bytes)


class BodyStores(RefusedStores):
    """The stores a body made, kept (see the module's docstring); other objects' refused."""

    def __init__(self, refuse):
        super().__init__(refuse)
        # id(tracker) → (it, its `stored` before the body, its `raw_stores`, in output.mutated)
        self.objects: dict = {}
        # (id(globals), name) → (globals, name, the trace's value before the body or _UNBOUND)
        self.globals: dict = {}

    def object_store(self, output, var) -> None:
        if type(var) is not UserObjectVariable or var.source is None:
            self.refuse(var)
        if id(var) not in self.objects:
            self.objects[id(var)] = (var, dict(var.stored), set(var.raw_stores), id(var) in output.mutated)

    def global_store(self, output, globals_dict: dict, name: str) -> None:
        key = (id(globals_dict), name)
        if key not in self.globals:
            binding = binding_of(output, globals_dict, name)
            self.globals[key] = (globals_dict, name, _UNBOUND if binding is None else binding.contents)

    def settle(self, tx) -> None:
        """Decline unless every store put back the value it found; the stores are dropped
        (undo, again when the block ends)."""
        changed = self._changed(tx)
        self.undo(tx.output)
        if changed:
            unsupported("side_effect", f"it changes {changed[0]}, which eager's recompute would change again")

    def _changed(self, tx) -> list:
        out = []
        for var, before, _, _ in self.objects.values():
            for name, final in var.stored.items():
                if name in before:
                    original = before[name]
                else:
                    original = _attribute(tx, var, name)
                if final is not original and not _same_constant(final, original):
                    out.append(f"attribute {name!r} of {var.source.name()}")
        for globals_dict, name, before in self.globals.values():
            final = binding_of(tx.output, globals_dict, name).contents
            if before is _UNBOUND:
                # (one absent is not guarded absent: it declines)
                before = tx.wrap(globals_dict[name], GlobalSource(name, globals_dict)) if name in globals_dict \
                    else None
            if final is DELETED or final is not before and not _same_constant(final, before):
                out.append(f"the global {name!r}")
        return out

    def undo(self, output) -> None:
        for var, before, raw, mutated in self.objects.values():
            var.stored.clear()
            var.stored.update(before)
            var.raw_stores.clear()
            var.raw_stores.update(raw)
            if not mutated:
                output.mutated.pop(id(var), None)
        for globals_dict, name, before in self.globals.values():
            if before is _UNBOUND:
                forget_global(output, globals_dict, name)
            else:
                binding_of(output, globals_dict, name).contents = before
        self.objects.clear()
        self.globals.clear()


def _attribute(tx, var, name: str):
    """The tracker of the value `obj.name` had in the instance dictionary before the body
    (guarded as the read the body may have made), or None where it had none there."""
    inst = instance_dict(var.value)
    static = on_class(type(var.value), name)
    if not isinstance(inst, dict) or name not in inst or static is not _ABSENT and overrides_instance_dict(static):
        return None
    return tx.wrap(inst[name], var._attr_source(name))


def _same_constant(a, b) -> bool:
    if not (isinstance(a, ConstantVariable) and isinstance(b, ConstantVariable)):
        return False
    x, y = a.value, b.value
    return type(x) is type(y) and type(x) in _SAME_TYPES and x == y and repr(x) == repr(y)
