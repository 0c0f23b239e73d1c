"""C functions the trace does not model (`time.time`, `os.getpid`, `zlib.crc32`, a bound
`itertools.count().__next__`): a tracker that stands for the real callable until it is
called, and declines the call.

Declining at the call, not where the callable is read, puts a graph break at the call
instruction: the call runs natively once and its result goes on the stack of the resume
function, which starts after it. (A decline at the read would break at the LOAD_ATTR or
LOAD_GLOBAL, and the resume function would get the callable itself as a stack value,
which it could not trace either.)
"""
from __future__ import annotations

import sys
import types

from ..exc import Unsupported, unsupported
from ..guards import Guard
from ..sources import AttrSource
from .autograd import is_function_apply
from .base import RealValueVariable, VariableTracker
from .builtins import is_builtin_callable
from .functions import BoundMethodVariable
from .torch import is_torch_object
from .unbound_methods import call_unbound_method

_C_CALLABLE_TYPES = (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType,
                     types.MethodDescriptorType, types.ClassMethodDescriptorType)


class OpaqueCallableVariable(RealValueVariable):
    """A real C callable (`value`) the trace does not model: it may be passed around and
    rebuilt (from its source, else as the object itself); calling it declines ("call")."""

    __slots__ = ()
    rebuild = RealValueVariable.rebuild_as_itself

    def describe(self) -> str:
        return f"C function {_name(self.value)!r}"

    def call_function(self, tx, args, kwargs):
        result = call_unbound_method(tx, self.value, args, kwargs)  # `str.upper(s)`
        if result is not None:
            return result
        unsupported("call", f"C function {_name(self.value)!r} is not traced")


class UntracedValueVariable(VariableTracker):
    """A float an untraced C function returned (`started = time.time()`), handed to a
    resume function: held by its source, not specialized on (a guard on its value would
    fail on every call). The trace cannot read it: every operation on it declines; it is
    passed on and returned as the real object."""

    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def describe(self) -> str:
        return f"the {type(self.value).__name__} result of an untraced C function"


def wrap_untraced_result(tx, value, source):
    """The tracker of resume parameter `source`, the result of an untraced C function."""
    if type(value) is not float:
        return tx.wrap(value, source)
    tx.output.guards.add(Guard("TYPE_MATCH", source, float))
    return UntracedValueVariable(value, source)


def _name(value) -> str:
    return getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or repr(value)


def is_untraced_c_callable(value) -> bool:
    """A C callable that the builder has no model for (it would decline to wrap it)."""
    if type(value) not in _C_CALLABLE_TYPES:
        return False
    if is_builtin_callable(value) or is_torch_object(value) or is_function_apply(value):
        return False
    if value is sys._getframe or value is getattr(sys, "_getframemodulename", None):
        return False  # reads the frame: declines whole (builder.py)
    if type(getattr(value, "__self__", None)) in (list, dict):
        return False  # `lst.append`: the builder's model of the list's methods
    return True  # (the registry tries this rule last: no other model took the value)


def _wrap(tx, value, source):
    owner = getattr(value, "__self__", None)
    if source is None or owner is None or isinstance(owner, (types.ModuleType, type)):
        if source is not None:
            tx.output.guards.add(Guard("ID_MATCH", source, value))
        return OpaqueCallableVariable(value, source)
    # A method bound to an object (`x.add` of a tensor handed over a break): a new method
    # object on every attribute read, so it is the owner's method, as the trace reading
    # `owner.name` would make it.
    tx.output.guards.add(Guard("TYPE_MATCH", source, type(value)))
    tx.output.guards.add(Guard("EQUALS_MATCH", AttrSource(source, "__name__"), value.__name__))
    try:
        obj = tx.wrap(owner, AttrSource(source, "__self__"))
    except Unsupported:  # an owner the trace has no model of: the method itself
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(source, "__self__"), owner))
        return OpaqueCallableVariable(value, source)
    return BoundMethodVariable(obj, value.__name__)

