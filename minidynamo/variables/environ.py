"""`os.environ` read in a trace, as torch.compile reads it: `os.environ.get(name[,
default])`, `os.environ[name]` and `name in os.environ` are constants under a guard on
that one variable (its value, or its absence), asked again by the entry; anything else
(iteration, writes: the process's environment outlives the call) declines.
"""
from __future__ import annotations

import functools
import os

from ..exc import unsupported
from ..guards import Guard
from ..sources import CallSource
from .base import VariableTracker
from .constant import ConstantVariable


@functools.lru_cache(maxsize=None)
def _reader(name: str):
    """`os.environ.get(name)` as a no-argument query (one object per name: one guard)."""
    return functools.partial(os.environ.get, name)


class _EnvironRead(CallSource):
    """`os.environ.get(name)`, named as written (CallSource names a call without arguments)."""

    def name(self, naming=None):
        return self.label


class EnvironVariable(VariableTracker):
    """The process's `os.environ` (guarded by identity)."""

    def python_type(self):
        return type(os.environ)

    def describe(self):
        return "os.environ"

    def _read(self, tx, key: VariableTracker):
        if not key.is_python_constant() or not isinstance(key.as_python_constant(), str):
            unsupported("construct", f"os.environ read with {key.describe()}, not a str")
        name = key.as_python_constant()
        value = os.environ.get(name)
        tx.output.guards.add(Guard("EQUALS_MATCH", _EnvironRead(_reader(name), f"os.environ.get({name!r})"), value))
        return value

    def var_getattr(self, tx, name):
        if name in ("get", "__getitem__", "__contains__"):
            return self.method_getattr(tx, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            value = self._read(tx, args[0])
            return ConstantVariable(value) if value is not None else (args[1] if len(args) == 2 else
                                                                       ConstantVariable(None))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            value = self._read(tx, args[0])
            if value is None:
                unsupported("exceptions", f"KeyError: {args[0].as_python_constant()!r} (not in os.environ)")
            return ConstantVariable(value)
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._read(tx, args[0]) is not None)
        return super().call_method(tx, name, args, kwargs)

    def getitem(self, tx, key):
        return self.call_method(tx, "__getitem__", [key], {})

    def contains(self, tx, key):
        return self.call_method(tx, "__contains__", [key], {})


def _wrap_environ(tx, value, source):
    return EnvironVariable(source)
