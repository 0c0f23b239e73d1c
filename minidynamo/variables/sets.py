"""Sets and frozensets of constants (and of objects hashed by identity).

CPython's set iterates in its hash table's order, which depends on how the set was made
(items added one by one, a table merged whole from another set, resizes, deleted
entries), not on its members alone: {1, 9} and {9, 1} iterate differently, and so do two
equal sets of strings. The trace's own set (`values`) is made by the operations the
program makes its set by, so it iterates as the program's does ("mirrored"). Where it
cannot be (a set passed in, copied: `order` holds the order a guard pins; one made from
such a set: None), nothing that reads the order (iteration, repr) is traced from it."""
from __future__ import annotations

import operator

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .dict_keys import MIRRORED, ObjectKey, _key, has_identity_keys, has_object_keys, key_var
from .lists import pulled_one_by_one
from .made_classes import holds_made

_SET_UPDATES = ("update", "difference_update", "intersection_update", "symmetric_difference_update")
_SET_OPERATORS = {"or_": operator.or_, "and_": operator.and_, "sub": operator.sub, "xor": operator.xor}


class SetVariable(VariableTracker):
    """A set (or frozenset) of constants: literals, comprehensions, constant arguments.
    `shadow`: a set made by the program's own operations, taken as it is (mirrored)."""

    __slots__ = ("values", "set_type", "order")

    def __init__(self, values=(), source=None, set_type=set, order=None, *, shadow=None):
        super().__init__(source)
        if shadow is not None:
            self.values, self.order = shadow, MIRRORED
        else:
            self.values = set(values)
            self.order = order if order is not None or self.values else MIRRORED  # a new empty set
        self.set_type = set_type

    def python_type(self):
        return self.set_type

    def ordered_keys(self) -> list | None:
        """The members in the program's iteration order; None where the trace does not know it."""
        if len(self.values) <= 1:
            return list(self.values)
        if has_identity_keys(self.values):  # hashed by address here, by the object's hash there
            return None
        if self.order is MIRRORED:
            return list(self.values)
        return None if self.order is None else list(self.order)

    def mirrors(self) -> bool:
        return self.order is MIRRORED and not (has_identity_keys(self.values) and len(self.values) > 1)

    def rebuild_new(self, rb) -> str:
        t = rb.ns.bind(self.python_type(), "t")
        if has_identity_keys(self.values) or any(holds_made(k) for k in self.values):
            # members hashed by identity: the objects of this call
            return f"{t}(({''.join(rb.key(k) + ', ' for k in self.values)}))"
        keys = self._order_or_decline("a set handed back")
        if has_object_keys(self.values):  # members hashed by value: rebuilt, added one by one
            if list(self.set_type(tuple(keys))) != keys:
                unsupported("construct", "a set of objects hashed by value whose order a set made anew "
                                         "does not give")
            return f"{t}(({''.join(rb.key(k) + ', ' for k in keys)}))"
        # Made anew from a bound object, iterating as the program's set does: its members
        # added one by one, or a table merged whole from a copy of the trace's set.
        for made_from in (tuple(keys), frozenset(self.values), self.values.copy()):
            if list(self.set_type(made_from)) == keys:
                return f"{t}({rb.ns.bind(made_from, 'c')})"
        unsupported("construct", "a set whose order no set made anew gives")

    def _order_or_decline(self, what: str) -> list:
        keys = self.ordered_keys()
        if keys is None:
            unsupported("construct", f"{what}: a set whose iteration order the trace does not know "
                                     "(it depends on how the set was made)")
        return keys

    def is_python_constant(self):
        return not has_object_keys(self.values)

    def as_python_constant(self):
        if not self.is_python_constant():
            return super().as_python_constant()
        if self.order is MIRRORED and type(self.values) is self.set_type:
            return self.values  # iterates (and prints) as the program's set
        keys = self.ordered_keys()
        made = self.set_type(self.values if keys is None else keys)
        if keys is not None and list(made) != keys:
            unsupported("construct", "a set passed in whose order a copy of it does not keep")
        return made

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def describe(self):
        return f"set of {len(self.values)} items"

    def truthy(self, tx):
        return bool(self.values)

    def add(self, tx, item):
        if self.source is not None:
            unsupported("side_effect", f"set.add on {self.source.name()!r}, which outlives the call")
        if type(self.values) is frozenset:
            self.values, self.order = set(self.values), None
        self.values.add(_key(tx, item))

    def iter_items(self, tx):
        if sum(type(v) is ObjectKey for v in self.values) > 1:
            unsupported("construct", "iterating over a set of objects hashed by identity (its order "
                                     "depends on their addresses)")
        return [key_var(v) for v in self._order_or_decline("iterating over it")]

    def update_with(self, tx, name: str, others: list) -> None:
        """set.update / difference_update pull each iterable one item at a time, adding or
        discarding it before taking the next (CPython's set_update_internal and
        set_difference_update_internal), so code making an item sees the set change; a set
        or a dict is merged whole (set_merge, a presized table), as here. intersection_update
        and symmetric_difference_update take the whole iterable first."""
        if self.source is not None:
            unsupported("side_effect", f"set.{name} on {self.source.name()!r}, which outlives the call")
        if type(self.values) is frozenset:
            self.values, self.order = set(self.values), None
        for other in others:
            if name in ("update", "difference_update") and not _merged_whole(other):
                for item in pulled_one_by_one(tx, other):
                    key = _key(tx, item)
                    if name == "update":
                        self.values.add(key)
                    else:
                        self.values.discard(key)
                continue
            if name == "symmetric_difference_update" and len(others) != 1:
                unsupported("exceptions", f"TypeError: set.symmetric_difference_update() takes exactly "
                                          f"one argument ({len(others)} given)")
            if name == "intersection_update" and len(others) > 1:  # CPython intersects all, then swaps
                mirrored = self.values.intersection(*[self._mirror(tx, o) for o in others])
                self.values.clear()
                self.values.update(mirrored)
                self.order = None
                return
            getattr(self.values, name)(self._mirror(tx, other))

    def _mirror(self, tx, other):
        """`other` as the real object the program's set operation reads: a set's shadow, a
        dict's keys as a dict, any other iterable's items as a list. An operand whose layout
        the trace does not mirror makes this set's order unknown."""
        if other is self:
            return self.values
        if isinstance(other, SetVariable):
            if not other.mirrors():
                self.order = None
            return other.values
        keys = [_key(tx, i) for i in other.iter_items(tx)]
        if other.python_type() is dict:  # CPython presizes for an exact dict
            return dict.fromkeys(keys)
        return keys

    def call_method(self, tx, name, args, kwargs):
        if name == "add" and len(args) == 1:
            self.add(tx, args[0])
            return ConstantVariable(None)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(_key(tx, args[0]) in self.values)
        if name == "__len__":
            return ConstantVariable(len(self.values))
        if name in ("discard", "remove", "clear") and self.set_type is set and not kwargs:
            if self.source is not None:
                unsupported("side_effect", f"set.{name} on {self.source.name()!r}, which outlives the call")
            keys = [_key(tx, a) for a in args]
            if name == "clear" and not args:
                self.values.clear()  # the small table again, as CPython's set_clear
                self.order = MIRRORED
                return ConstantVariable(None)
            if len(keys) == 1 and (name == "discard" or keys[0] in self.values):
                self.values.discard(keys[0])  # leaves a dummy entry in both tables
                return ConstantVariable(None)
        if name == "copy" and not args and not kwargs:
            if self.set_type is frozenset and self.order is MIRRORED:
                return self
            return self._made(self.values.copy(), self.mirrors())
        if name in _SET_UPDATES and not kwargs and self.set_type is set:
            self.update_with(tx, name, args)
            return ConstantVariable(None)
        if name in ("union", "intersection", "difference", "symmetric_difference") and not kwargs and all(
                a.is_python_constant() for a in args) and not has_object_keys(self.values):
            if name == "symmetric_difference" and len(args) != 1:
                return super().call_method(tx, name, args, kwargs)
            probe = SetVariable(shadow=set())
            if not self.mirrors():
                probe.order = None
            result = getattr(self.values, name)(*[probe._mirror(tx, a) for a in args])
            return self._made(result, probe.order is MIRRORED)
        return super().call_method(tx, name, args, kwargs)

    def _made(self, result, mirrored: bool) -> SetVariable:
        made = SetVariable(shadow=result, set_type=self.set_type)
        if not mirrored:
            made.order = None
        return made

    def apply_set_operator(self, tx, name: str, other) -> SetVariable | None:
        """`self | other` (&, -, ^) for two sets of constants, on the shadows themselves."""
        if name not in _SET_OPERATORS or not isinstance(other, SetVariable) or has_object_keys(
                self.values) or has_object_keys(other.values):
            return None
        result = _SET_OPERATORS[name](self.values, other.values)
        return self._made(self.set_type(result) if type(result) is not self.set_type else result,
                          self.mirrors() and other.mirrors() and type(result) is self.set_type)


def _merged_whole(other) -> bool:
    return isinstance(other, SetVariable) or (isinstance(other, DictVariable) and other.python_type() is dict)


def set_made_from(tx, ctor, arg) -> SetVariable:
    """set(arg) / frozenset(arg), by the route CPython's make_new_set takes for `arg`."""
    made = SetVariable(shadow=set())
    if arg is not None and _merged_whole(arg):
        shadow = ctor(made._mirror(tx, arg))
    else:
        shadow = ctor(_key(tx, i) for i in ([] if arg is None else arg.iter_items(tx)))
    order = made.order
    made = SetVariable(shadow=shadow, set_type=ctor)
    if order is None or has_identity_keys(shadow):
        made.order = None
    return made
