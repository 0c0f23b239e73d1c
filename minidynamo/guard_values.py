"""What the guards compare values by (guard_kinds.py renders the checks): equality that
also tells apart items of other types (1 == 1.0 == True, yet a trace that read one has not
read the others), dict keys in order, values that cannot change behind an unchanged
identity, and NaN, which never equals itself. Layer: a leaf (it imports only torch)."""
from __future__ import annotations

import torch

_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device, range)
_SAME_TYPE_ONLY = (str, bytes, type(None))  # equal only to values of their own type


def typed_key(v):
    """`v` with the type of every item beside it: equal only where the items are equal and of
    the same types, at any depth."""
    t = type(v)
    if t is tuple or t is list:
        return t, tuple(typed_key(x) for x in v)
    if t is frozenset or t is set:  # a set is guarded by a frozen copy; its own type is checked apart
        return frozenset, frozenset(typed_key(x) for x in v)
    if t is dict:
        return t, tuple((typed_key(k), typed_key(x)) for k, x in v.items())
    return t, v


def holds_type_blind_items(v) -> bool:
    """Whether equality alone could miss a change of type in `v` or its items (numbers at any
    depth, or objects whose == may answer for other types)."""
    if type(v) in (tuple, list, frozenset, set):
        return any(holds_type_blind_items(x) for x in v)
    if type(v) is dict:
        return any(holds_type_blind_items(k) or holds_type_blind_items(x) for k, x in v.items())
    return type(v) not in _SAME_TYPE_ONLY


def keys_are(d, keys: tuple, by_id: tuple) -> bool:
    """Whether dict `d` has `keys` in order: the very objects where `by_id` says so, equal
    keys of the same types (typed_key) elsewhere."""
    if len(d) != len(keys):
        return False
    for actual, key, identity in zip(d, keys, by_id):
        if identity:
            if actual is not key:
                return False
        elif actual is not key and typed_key(actual) != typed_key(key):
            return False
    return True


def is_immutable(value) -> bool:
    """Whether `value` (and all it holds) cannot change behind an unchanged identity."""
    if type(value) in (tuple, frozenset):
        return all(is_immutable(v) for v in value)
    return type(value) in _IMMUTABLE


def unequal_to_itself(v) -> bool:
    """A NaN of any scalar type: `v != v`."""
    if isinstance(v, (tuple, frozenset, str, bytes)):
        return False
    try:
        return bool(v != v)
    except Exception:  # a value whose != is not a truth value
        return False
