"""Iterating over an object of a user class (`for x in obj`, `list(obj)`): CPython calls
its class's `__iter__`, which is inlined; a generator or an iterator it returns is iterated.

A `collections.abc.Sequence` subclass that keeps the mixin's `__iter__` iterates by the
sequence protocol: `self[0]`, `self[1]`, ... until `__getitem__` raises IndexError, which
the mixin catches. Each item is read from the trace's `__getitem__` as the loop asks for
it (a loop that changes the object sees the change). The end is the IndexError: the
trace models it only where `__getitem__` itself raises it, outside any try or with block
of its own, so nothing but the mixin could have caught it; anything else declines, as
before. (transformers' per-layer config view is such a Sequence: a DynamicCache made in a
forward iterates it.)
"""
from __future__ import annotations

import collections.abc
import types

import torch

from ..exc import Unsupported, current_location, unsupported
from .constant import ConstantVariable
from .lists import IteratorVariable, LiveItems
from .generators import GeneratorVariable
from .objects import UserObjectVariable, on_class
from .user_objects import InstanceAttributes

_SEQUENCE_ITER = collections.abc.Sequence.__iter__
_WITH_OPS = ("BEFORE_WITH", "SETUP_WITH", "SETUP_ASYNC_WITH", "BEFORE_ASYNC_WITH")


def user_iterator(tx, v):
    """iter(v) for an object of a user class with a Python `__iter__` (None: not one)."""
    if not isinstance(v, (UserObjectVariable, InstanceAttributes)):
        return None
    cls = v.python_type()
    if issubclass(cls, torch.nn.Module):  # containers: their own model (nn_modules.py)
        return None
    method = on_class(cls, "__iter__")
    if not isinstance(method, types.FunctionType):
        return None
    bound = v.var_getattr(tx, "__iter__")  # guards the class's __iter__ (it may be patched)
    if method is _SEQUENCE_ITER:
        getitem = on_class(cls, "__getitem__")
        if not isinstance(getitem, types.FunctionType):
            unsupported("construct", f"iterating over {v.describe()}: its __getitem__ is not a Python function")
        return IteratorVariable(_SequenceItems(tx, v, getitem.__code__))
    result = bound.call_function(tx, [], {})
    if isinstance(result, IteratorVariable):
        return result
    unsupported("construct", f"iterating over {v.describe()}: its __iter__ returned {result.describe()}, "
                             "not an iterator the trace models")


def drain(tx, it) -> list:
    """Every item left in iterator `it`, for consumers that read the whole iterable first
    (`list(obj)`, `sum(obj)`, unpacking): a generator drains as generators.py says."""
    if isinstance(it, GeneratorVariable):
        return it.iter_items(tx)
    items = []
    while (item := it.next_item()) is not None:
        items.append(item)
    return items


class _SequenceItems(LiveItems):
    """`obj[i]` for i = 0, 1, ..., each read when the loop asks for it, until the trace of
    `__getitem__` raises IndexError (see the module docstring)."""

    __slots__ = ("tx", "obj", "getitem_code", "made", "done")

    def __init__(self, tx, obj, getitem_code):
        super().__init__()
        self.tx, self.obj, self.getitem_code = tx, obj, getitem_code
        self.made: list = []
        self.done = False

    def at(self, index: int):
        while len(self.made) <= index:
            if self.done:
                return None
            if current_location.get() is None:  # read after the trace (a rebuilt iterator)
                unsupported("construct", f"an iterator over {self.obj.describe()} that outlives the trace")
            try:
                item = self.obj.var_getattr(self.tx, "__getitem__").call_function(
                    self.tx, [ConstantVariable(len(self.made))], {})
            except Unsupported as e:
                if not self._ended_by(e):
                    raise
                self.done = True
                return None
            self.made.append(item)
        return self.made[index]

    def _ended_by(self, e: Unsupported) -> bool:
        """`e` is an IndexError raised by `__getitem__` itself, caught by nothing before the
        mixin's `except IndexError`."""
        raised, at = e.raised, e.raised_at
        if raised is None or at is None or not issubclass(raised, IndexError):
            return False
        frame, index = at
        return (frame.code is self.getitem_code and frame.depth == self.tx.depth + 1
                and not frame.instructions[index].in_try
                and not any(inst.opname in _WITH_OPS for inst in frame.instructions))
