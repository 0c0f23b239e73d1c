"""Type hints as values: `int | None`, `Optional[int]`, `list[int]`, `Annotated[...]` read
from a class's annotations or a validator's closure (dataclass validators such as
huggingface_hub's strict configs check every attribute assignment against its hint).

Such an object is immutable and made once, where the annotation was evaluated: it is a
constant pinned by identity. `typing.get_origin` / `typing.get_args` on it and its
`__args__` / `__origin__` / `__metadata__` are answered from the real object (pure reads
of a value the entry pins).
"""
from __future__ import annotations

import types
import typing

from ..exc import unsupported
from .base import ObjectConstantVariable
from .lists import TupleVariable

# typing's own alias classes (Optional[int], Annotated[...], Callable[...]) and the
# builtins' (list[int], int | None).
_FORMS = tuple(t for t in (types.UnionType, types.GenericAlias, getattr(typing, "_GenericAlias", None),
                           getattr(typing, "_BaseGenericAlias", None)) if isinstance(t, type))
_READABLE = ("__args__", "__origin__", "__metadata__", "__parameters__")


def is_type_hint(value) -> bool:
    return isinstance(value, _FORMS)


def _as_tracker(tx, value):
    """A value read from a hint, without a source (the hint is pinned)."""
    if type(value) is tuple:
        return TupleVariable([_as_tracker(tx, v) for v in value])
    return tx.wrap(value, None)


class TypeHintVariable(ObjectConstantVariable):
    """A type hint object: a constant, pinned by identity where it was read."""

    def describe(self):
        return f"type hint {self.value!r}"

    def var_getattr(self, tx, name):
        if name in _READABLE:
            return _as_tracker(tx, self.real_attr(name))
        if name == "__class__":
            return tx.wrap(type(self.value), None)
        unsupported("construct", f"{name!r} of {self.describe()} is not traced")


class TypingQueryVariable(ObjectConstantVariable):
    """`typing.get_origin` / `typing.get_args`: pure functions of a hint, answered from the
    real one where the argument is a constant."""

    def describe(self):
        return f"typing.{self.value.__name__}"

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs or not args[0].is_python_constant():
            unsupported("construct", f"{self.describe()} of {args[0].describe() if args else 'nothing'}")
        return _as_tracker(tx, self.value(args[0].as_python_constant()))
