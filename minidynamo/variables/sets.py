"""Sets and frozensets of constants (and of objects hashed by identity).

CPython's set iterates in its hash table's order, which depends on how the set was made
(items added one by one, a table merged whole from another set, resizes, deleted
entries), not on its members alone: {1, 9} and {9, 1} iterate differently, and so do two
equal sets of strings. The trace's own set (`values`) is made by the operations the
program makes its set by, so it iterates as the program's does ("mirrored"). Where it
cannot be (a set passed in, copied: `order` holds the order a guard pins; one made from
such a set: None), nothing that reads the order (iteration, repr) is traced from it.

A set from outside that the trace changes (`S.add(3)` on a global, a closure's or an
argument's set) keeps the operations it took: the entry replays them on the real set after
the graph (side_effects.py), so its table ends as eager's would, dummies and order included.
Its order is unknown to the trace from then on."""
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

    __slots__ = ("values", "set_type", "order", "replay", "recipe")

    def __init__(self, values=(), source=None, set_type=set, order=None, *, shadow=None):
        super().__init__(source)
        if shadow is not None:
            self.values, self.order = shadow, MIRRORED
        else:
            self.values = set(values)
            self.order = order if order is not None or self.values else MIRRORED  # a new empty set
        self.set_type = set_type
        self.replay = []  # (method, argument) applied to the set from outside, in order
        # (set, method, arguments): made by `S.copy()` / `S.union(T)`... where S's order is not
        # the trace's to know, unchanged since: made again by that call on the real objects
        self.recipe = None

    def changing(self, tx, name: str) -> None:
        """Before an operation changes this set: one from outside is recorded as changed."""
        self.recipe = None
        if self.source is not None and not self.replay:
            tx.output.record_mutation(self, f"set.{name} on {self.source.name()!r}")

    def changed(self, name: str, arg=None) -> None:
        """After it changed this set: what the entry replays on the real one."""
        if self.source is not None:
            self.replay.append((name, arg))
            self.order = None  # the real table's layout is not the shadow's

    def writeback(self, rb, target: str, temp: str) -> tuple[str, str]:
        steps = []
        for name, arg in self.replay:
            if name == "clear":
                steps.append(f"{target}.clear()")
            elif name in ("add", "discard"):
                steps.append(f"{target}.{name}({rb.key(arg)})")
            elif isinstance(arg, tuple):  # difference_update by a set: each member discarded
                steps.append(f"{target}.{name}(({''.join(rb.key(k) + ', ' for k in arg)}))")
            else:  # a set or dict merged whole: one of the same size iterating alike
                steps.append(f"{target}.{name}({rb.ns.bind(arg, 'merged')})")
        return "None", "; ".join(steps)

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
        if self.recipe is not None and not any(getattr(v, "replay", None) for v in (self.recipe[0], *self.recipe[2])):
            receiver, name, args = self.recipe  # eager's own call: its result iterates as eager's
            parts = [rb.ns.bind(a.value, "arg") if isinstance(a, _Now) else rb.expr(a) for a in args]
            return f"{rb.expr(receiver)}.{name}({''.join(p + ', ' for p in parts)})"
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
        key = _key(tx, item)
        self.changing(tx, "add")
        if type(self.values) is frozenset:
            self.values, self.order = set(self.values), None
        self.values.add(key)
        self.changed("add", key)

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
        if self.source is not None and name not in ("update", "difference_update"):
            unsupported("side_effect", f"set.{name} on {self.source.name()!r}, which outlives the call")
        self.changing(tx, name)
        if type(self.values) is frozenset:
            self.values, self.order = set(self.values), None
        for other in others:
            if name in ("update", "difference_update") and not _merged_whole(other):
                for item in pulled_one_by_one(tx, other):  # CPython adds (discards) each as it comes
                    key = _key(tx, item)
                    if name == "update":
                        self.values.add(key)
                    else:
                        self.values.discard(key)
                    self.changed("add" if name == "update" else "discard", key)
                continue
            if self.source is not None:
                self.changed(name, _merged_alike(self, tx, name, other))
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

    def _members(self, tx, other):
        """The members of `other` (a set, or any iterable's items), for a query of membership."""
        if isinstance(other, SetVariable):
            return other.values
        return [_key(tx, i) for i in other.iter_items(tx)]

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
            keys = [_key(tx, a) for a in args]
            if name == "clear" and not args:
                self.changing(tx, name)
                self.values.clear()  # the small table again, as CPython's set_clear
                self.order = MIRRORED
                self.changed(name)
                return ConstantVariable(None)
            if len(keys) == 1 and (name == "discard" or keys[0] in self.values):
                self.changing(tx, name)
                self.values.discard(keys[0])  # leaves a dummy entry in both tables
                self.changed("discard", keys[0])
                return ConstantVariable(None)
        if name == "copy" and not args and not kwargs:
            if self.set_type is frozenset and self.order is MIRRORED:
                return self
            return self._made(self.values.copy(), self.mirrors(), (self, name, []))
        if name in _SET_UPDATES and not kwargs and self.set_type is set:
            self.update_with(tx, name, args)
            return ConstantVariable(None)
        if name in ("isdisjoint", "issubset", "issuperset") and len(args) == 1 and not kwargs:
            return ConstantVariable(getattr(self.values, name)(self._members(tx, args[0])))
        if name in ("union", "intersection", "difference", "symmetric_difference") and not kwargs and all(
                a.is_python_constant() or isinstance(a, SetVariable) for a in args):
            if name == "symmetric_difference" and len(args) != 1:
                return super().call_method(tx, name, args, kwargs)
            probe = SetVariable(shadow=set())
            if not self.mirrors():
                probe.order = None
            result = getattr(self.values, name)(*[probe._mirror(tx, a) for a in args])
            # members hashed by identity or by a dataclass's hash: the order is not the program's
            return self._made(result, probe.order is MIRRORED and not has_object_keys(result), (self, name, args))
        return super().call_method(tx, name, args, kwargs)

    def _made(self, result, mirrored: bool, recipe=None) -> SetVariable:
        made = SetVariable(shadow=result, set_type=self.set_type)
        if not mirrored:
            made.order = None
            if recipe is not None and not has_object_keys(result) and recipe[0].source is not None and all(
                    isinstance(a, SetVariable) and a.source is not None or not isinstance(a, SetVariable)
                    for a in recipe[2]):
                receiver, name, args = recipe  # sets from outside, other arguments as they are now
                made.recipe = (receiver, name, [a if isinstance(a, SetVariable) else _Now(a.as_python_constant())
                                                for a in args])
        return made

    def apply_set_operator(self, tx, name: str, other) -> SetVariable | None:
        """`self | other` (&, -, ^) for two sets of constants, on the shadows themselves."""
        if name not in _SET_OPERATORS or not isinstance(other, SetVariable):
            return None
        result = _SET_OPERATORS[name](self.values, other.values)
        return self._made(self.set_type(result) if type(result) is not self.set_type else result,
                          self.mirrors() and other.mirrors() and type(result) is self.set_type
                          and not has_object_keys(result))


class _Now:
    """A constant argument of a set method, as it was at the call."""

    __slots__ = ("value",)
    replay = None

    def __init__(self, value):
        self.value = value


def _merged_alike(target: SetVariable, tx, name: str, other):
    """What the entry merges into the real set for `other` merged whole: an object whose
    merge changes the table as the program's did. difference_update discards each member
    (any container of them will do); update inserts in the other's iteration order after
    presizing for its size, unless the real set is empty (then CPython may copy the
    other's table slot by slot): a dict of the same keys, or a set iterating alike."""
    if has_object_keys(target.values):
        unsupported("side_effect", f"set.{name} on {target.source.name()!r} with members hashed by identity")
    if isinstance(other, DictVariable):
        keys = list(other.items)
        return tuple(keys) if name == "difference_update" else dict.fromkeys(keys)
    if other is target:
        unsupported("side_effect", f"set.{name} of {target.source.name()!r} with itself")
    if has_object_keys(other.values):
        unsupported("side_effect", f"set.{name} on {target.source.name()!r} with members hashed by identity")
    if name == "difference_update":
        return tuple(other.values)
    keys = other.ordered_keys()
    if keys is None or not target.values:
        unsupported("side_effect", f"set.update on {target.source.name()!r} from a set whose layout the trace "
                                   "does not know")
    for made in (frozenset(keys), set(keys), frozenset(other.values)):
        if list(made) == keys and len(made) == len(keys):
            return made
    unsupported("side_effect", f"set.update on {target.source.name()!r} from a set no set made anew iterates like")


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
