"""`Color(2)`: calling an Enum class with a value is a look-up of the member that has it
(Enum.__new__ reads `_value2member_map_`), not the making of an object. Traced where that
is all the call does: the metaclass's own `__call__`, Enum's own `__new__` and one
hashable constant argument that names a member; the member is a fixed object (an enum's
members are made with its class, once), held by identity. A value no member has runs
`_missing_` (a user's hook, or Flag's composing of members): not traced."""
from __future__ import annotations

import enum

from ..sources import ObjectSource


def is_enum_class(cls) -> bool:
    return isinstance(cls, enum.EnumMeta)


def lookup_member(tx, cls, args, kwargs):
    """The member `cls(value)` returns, or None where the call may do more than look up."""
    if kwargs or len(args) != 1 or not args[0].is_python_constant():
        return None
    if type(cls).__call__ is not enum.EnumMeta.__call__ or cls.__new__ is not enum.Enum.__new__:
        return None
    value = args[0].as_python_constant()
    try:
        member = cls._value2member_map_.get(value)
    except TypeError:  # unhashable: Enum.__new__ searches the members by equality
        return None
    if member is None:
        return None
    return wrap_member(tx, member)


def wrap_member(tx, member):
    """An enum member's tracker: the member itself, pinned by identity (made once, with
    its class)."""
    return tx.wrap(member, ObjectSource(member, f"{type(member).__qualname__}.{member.name}"))
