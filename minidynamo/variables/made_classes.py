"""Classes and functions a trace made for real while tracing (`collections.namedtuple(...)`,
a class statement): the class object stands for the one eager makes on every call.

Inside the trace the object made at trace time is used (its MRO, its attributes); each
is registered here with its tracker, so that wherever the object is reached again
(`type(obj)`, `obj.__class__`, a method read from the class) the trace gets that tracker,
and wherever it outlives the trace (returned, live at a graph break, an instance of it
rebuilt) the entry uses the tracker's rebuild: the class made again, once per call.
"""
from __future__ import annotations

import types
import weakref

# object made at trace time → the tracker that stands for it (and rebuilds it per call)
_made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_KINDS = (type, types.FunctionType)  # what a trace makes: classes of metaclass type, functions


def register(obj, var) -> None:
    _made[obj] = var


def made_tracker(obj):
    """The tracker of a class or function the trace made, else None."""
    if type(obj) not in _KINDS:  # (only these hash by identity: no __hash__ of the user's runs)
        return None
    return _made.get(obj)


def is_made(obj) -> bool:
    return made_tracker(obj) is not None


def holds_made(value) -> bool:
    """Whether a dict key or set member is, or is a tuple holding, an object a trace made."""
    return is_made(value) or type(value) is tuple and any(holds_made(x) for x in value)


def wrap_made(tx, value, source):
    return _made[value]


def class_expr(rb, cls) -> str:
    """The expression of `cls` in code an entry runs after its graph: the class made for
    this call where the trace made it, else the class itself."""
    var = made_tracker(cls)
    return rb.expr(var) if var is not None else rb.ns.bind(cls, "cls")
