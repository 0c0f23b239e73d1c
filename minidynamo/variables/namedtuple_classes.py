"""`collections.namedtuple(...)` called inside the optimized function.

Eager makes a new class on every call, its `__module__` the calling frame's module. The
trace makes one class of its own (namedtuple is pure: it builds a class from constants)
and models instances of it as any namedtuple's (namedtuples.py); the class never leaves
the trace. Where the class or an instance outlives it (returned, live at a graph break),
the entry makes the class again, once per call, by the same call with the module named
(`module=`), so each call gets a new class as in eager, and instances are made of it.
"""
from __future__ import annotations

import collections

from ..exc import READS_FRAME, unsupported
from ..sources import GlobalSource
from .constant import is_constant_value
from .made_classes import register
from .objects import ClassVariable

_PARAMETERS = ("typename", "field_names", "rename", "defaults", "module")


class MadeNamedTupleClassVariable(ClassVariable):
    """A namedtuple class made in the trace; `recipe` the constant arguments that make it
    (the module resolved)."""

    __slots__ = ("recipe",)

    def __init__(self, value, recipe: dict):
        super().__init__(value, None)
        self.recipe = recipe

    def describe(self):
        return f"namedtuple class {self.value.__qualname__!r} made in the function"

    def rebuild(self, rb) -> str:
        return rb.built_once(self)

    def rebuild_new(self, rb) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.recipe.items())
        return f"{rb.ns.bind(collections.namedtuple, 'namedtuple')}({args})"


def make_class(tx, args, kwargs):
    """`collections.namedtuple(typename, field_names, *, rename=False, defaults=None,
    module=None)` with constant arguments: the class, made now."""
    if len(args) > 2 or set(kwargs) - set(_PARAMETERS) or len(args) + len(kwargs) < 2 or \
            set(_PARAMETERS[:len(args)]) & set(kwargs):
        unsupported("call", "collections.namedtuple() with these arguments is not traced", no_break=READS_FRAME)
    given = dict(zip(_PARAMETERS, args), **kwargs)
    if not all(v.is_python_constant() for v in given.values()):
        unsupported("construct", "collections.namedtuple() with arguments that are not constants",
                    no_break=READS_FRAME)
    recipe = {k: v.as_python_constant() for k, v in given.items()}
    if not all(is_constant_value(v) or type(v) in (list, tuple) and all(is_constant_value(x) for x in v)
               for v in recipe.values()):
        unsupported("construct", "collections.namedtuple() with arguments that are not constants",
                    no_break=READS_FRAME)
    if recipe.get("module") is None:
        # namedtuple names the module after the caller's globals (3.12+: its function's
        # __module__, the same unless reassigned): read, so guarded
        found = "__name__" in tx.f_globals
        name = tx.wrap(tx.f_globals["__name__"], GlobalSource("__name__", tx.f_globals)) if found else None
        recipe["module"] = (name.as_python_constant() if name is not None else None) or "__main__"
    try:
        cls = collections.namedtuple(**recipe)
    except Exception as e:  # noqa: BLE001 - a bad field name: eager raises it
        unsupported("exceptions", f"collections.namedtuple() raised {type(e).__name__}: {e}", raised=type(e),
                    no_break=READS_FRAME)
    var = MadeNamedTupleClassVariable(cls, recipe)
    register(cls, var)  # read back (`type(p)`): this tracker (made_classes.py)
    return var
