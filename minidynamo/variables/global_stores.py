"""`global n; n = n + 1` and `STATE = x * 2` in traced code: a module global assigned by
the trace (the optimized function's or an inlined function's own globals). As a closure
cell of the frame (cells.py), the binding is one tracker per globals dict and name per
trace: later reads in the trace see the stored value, and the entry writes it into the
globals dict after the graph, in order with the other writes, before a graph break's
native instruction or the return (side_effects.py). A value read there before the store
is not rebuilt from the global after it (`replaced_sources`)."""
from __future__ import annotations

import weakref

from ..exc import unsupported
from ..sources import AttrSource, GlobalSource, ObjectSource
from .base import VariableTracker

# output → {(id(globals), name): GlobalBinding}
_bindings: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


DELETED = object()  # the contents of a global the trace deleted


class _GlobalName:
    """What the binding is registered under among the trace's reads (a type no other value
    has, so no alias guard pairs it with a list or dict the trace read)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class GlobalBinding(VariableTracker):
    """Module global `name` of `globals_dict`, assigned by the trace: `contents` is its
    value from the store on."""

    __slots__ = ("globals_dict", "name", "contents")

    def __init__(self, globals_dict: dict, name: str):
        super().__init__(ObjectSource(_GlobalName(name), f"the global {name!r}"))
        self.globals_dict = globals_dict
        self.name = name
        self.contents = None

    def describe(self):
        return f"the global {self.name!r}"

    def global_source(self) -> GlobalSource:
        return GlobalSource(self.name, self.globals_dict)

    def writeback(self, rb, target: str, temp: str) -> tuple[str, str]:
        """(the final value, how to put it in): side_effects.py."""
        if self.contents is DELETED:
            return "None", f"del {self.global_source().expr(rb.ns)}"
        return rb.expr(self.contents), f"{self.global_source().expr(rb.ns)} = {temp}"

    def replaced_sources(self, output) -> set:
        """Where the trace read this global before the store: `G['n']`, or `mod.n` through
        the module (read before the write-back, so they are not rebuilt with the new value)."""
        found = set()
        for source, (_, var) in output.wrapped.items():
            if var is self.contents:
                continue
            if source == self.global_source():
                found.add(source)
            elif isinstance(source, AttrSource) and source.attr == self.name:
                base = output.wrapped.get(source.base)
                if base is not None and getattr(base[0], "__dict__", None) is self.globals_dict:
                    found.add(source)
        return found

    def replaces(self, source, var) -> bool:
        return False


def binding_of(output, globals_dict: dict, name: str):
    """The trace's binding of global `name` of `globals_dict`, or None where it stored none."""
    found = _bindings.get(output)
    return found.get((id(globals_dict), name)) if found else None


def stored_global(output, globals_dict: dict, name: str):
    """The value the trace stored in global `name` of `globals_dict`, or None (a global
    the trace deleted: NameError)."""
    binding = binding_of(output, globals_dict, name)
    if binding is not None and binding.contents is DELETED:
        unsupported("exceptions", f"NameError: name {name!r} is not defined", raised=NameError)
    return None if binding is None else binding.contents


def forget_global(output, globals_dict: dict, name: str) -> None:
    """The trace's binding of global `name` dropped: the global is as the trace found it
    (a checkpointed body that put it back, body_stores.py)."""
    binding = _bindings.get(output, {}).pop((id(globals_dict), name), None)
    if binding is not None:
        output.mutated.pop(id(binding), None)
        output.wrapped.pop(binding.source, None)


def _watch(output, globals_dict: dict, name: str) -> None:
    """A store while a backward or a checkpointed body is traced: refused, or kept to be
    checked (function_effects.outside_unchanged)."""
    watch = vars(output).get("store_watch")
    if watch is not None:
        watch.global_store(output, globals_dict, name)


def delete_global(tx, name: str) -> None:
    """`del name` of a global the trace assigned (deleted after the graph); another
    declines: whether it exists then is not known to the trace."""
    _watch(tx.output, tx.f_globals, name)
    binding = binding_of(tx.output, tx.f_globals, name)
    if binding is None or binding.contents is DELETED:
        unsupported("side_effect", f"deleting the global {name!r}")
    binding.contents = DELETED


def store_global(tx, name: str, value, globals_dict: dict | None = None) -> None:
    """`STORE_GLOBAL name` of `value` in `tx`'s globals (or in `globals_dict`, a module's
    attribute set through the module)."""
    output, g = tx.output, tx.f_globals if globals_dict is None else globals_dict
    _watch(output, g, name)
    binding = binding_of(output, g, name)
    if binding is None:
        binding = _bindings.setdefault(output, {})[(id(g), name)] = GlobalBinding(g, name)
        output.mutated[id(binding)] = (binding, f"assigning the global {name!r}")
        output.wrapped[binding.source] = (binding.source.obj, binding)
    binding.contents = value
