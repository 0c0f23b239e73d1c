"""Models of the collections types: OrderedDict, defaultdict and Counter made inside the
trace or passed in, `fromkeys` of the dict types (deques: deques.py; namedtuples: namedtuples.py;
user subclasses of dict and OrderedDict: dict_subclasses.py).

OrderedDict, defaultdict and Counter are dict trackers with their own methods. Those passed in, and
deques passed in, may be changed: the entry writes their final contents back in place
after the graph, as for lists and dicts (side_effects.py)."""
from __future__ import annotations

import operator
import types
from collections import Counter, OrderedDict, defaultdict

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable, _key, from_keys, key_var
from .identity_keys import passed_in_keys
from .functions import BoundMethodVariable, NestedFunctionVariable, PartialVariable, UserMethodVariable
from .lists import pulled_one_by_one
from .lists import TupleVariable
from .constant import fold
from .lists import IteratorVariable
from ..interpreter.operators import compare, binary_op


def bind_params(what: str, args, kwargs, names, defaults=None, positional_only=False) -> list:
    """Arguments of a C method → one tracker per parameter name, as CPython binds them;
    a mismatch is the TypeError the eager call raises."""
    defaults = defaults or {}
    if len(args) > len(names):
        unsupported("exceptions", f"TypeError: {what} takes at most {len(names)} arguments ({len(args)} given)")
    if kwargs and positional_only:
        unsupported("exceptions", f"TypeError: {what} takes no keyword arguments")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            unsupported("exceptions", f"TypeError: {what} got an unexpected keyword argument {k!r}")
        bound[k] = v
    for n in names:
        if n not in bound:
            if n not in defaults:
                unsupported("exceptions", f"TypeError: {what} missing required argument {n!r}")
            bound[n] = defaults[n]
    return [bound[n] for n in names]


def index_value(v: VariableTracker, what: str) -> int:
    if not v.is_python_constant():
        unsupported("data_dependent", f"{what} with {v.describe()}")
    value = v.as_python_constant()
    try:
        return operator.index(value)
    except TypeError:
        unsupported("exceptions", f"TypeError: {type(value).__name__!r} object cannot be interpreted as an integer")


# --- OrderedDict ------------------------------------------------------------------------
class OrderedDictVariable(DictVariable):
    """An OrderedDict: a dict whose equality with another OrderedDict is order-sensitive
    (DictVariable.equals), with move_to_end and popitem(last=)."""

    __slots__ = ()

    def __init__(self, items, source=None, lazy=None, size=None):
        super().__init__(items, source, dict_type=OrderedDict, lazy=lazy, size=size)

    def copy(self):
        return OrderedDictVariable(self.items)

    def call_method(self, tx, name, args, kwargs):
        if name == "move_to_end":
            key, last = bind_params("move_to_end()", args, kwargs, ("key", "last"), {"last": ConstantVariable(True)})
            k = _key(tx, key)
            at_end = last.truthy(tx)
            if k not in self.items:
                unsupported("exceptions", f"KeyError: {k!r}")
            self.check_mutable("OrderedDict.move_to_end", tx)
            items = self.items  # reordered in place: iterators and views read this dict
            value = items.pop(k)
            if at_end:
                items[k] = value
            else:
                rest = dict(items)
                items.clear()
                items[k] = value
                items.update(rest)
            return ConstantVariable(None)
        if name == "popitem":
            (last,) = bind_params("popitem()", args, kwargs, ("last",), {"last": ConstantVariable(True)})
            from_end = last.truthy(tx)
            if not self.items:
                unsupported("exceptions", "KeyError: 'dictionary is empty'")
            self.check_mutable("OrderedDict.popitem", tx)
            k = next(reversed(self.items)) if from_end else next(iter(self.items))
            return TupleVariable([key_var(k), self.items.pop(k)])
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"OrderedDictVariable({self.items!r})"


# --- defaultdict ------------------------------------------------------------------------
def is_none(v: VariableTracker) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _check_factory(factory: VariableTracker) -> None:
    """defaultdict's first argument: None or a callable (what CPython checks)."""
    if is_none(factory):
        return
    if factory.is_python_constant():
        if not callable(factory.as_python_constant()):
            unsupported("exceptions", "TypeError: first argument must be callable or None")
        return
    if not isinstance(factory, (NestedFunctionVariable, PartialVariable, UserMethodVariable, BoundMethodVariable)):
        unsupported("construct", f"defaultdict with the factory {factory.describe()} (not known to be callable)")


class DefaultDictVariable(DictVariable):
    """A defaultdict: reading a missing key (`d[k]`, not get/in/pop) calls the factory
    (traced like any call) and stores what it returns. For a defaultdict passed in that
    is a write, written back after the graph like any dict write."""

    __slots__ = ("_factory", "_factory_lazy")

    def __init__(self, items, factory=None, source=None, lazy=None, size=None, factory_lazy=None):
        super().__init__(items, source, dict_type=defaultdict, lazy=lazy, size=size)
        self._factory = factory if factory is not None else ConstantVariable(None)
        self._factory_lazy = factory_lazy  # () -> tracker: read (and guarded) when first used

    @property
    def factory(self) -> VariableTracker:
        if self._factory_lazy is not None:
            lazy, self._factory_lazy = self._factory_lazy, None
            self._factory = lazy()
        return self._factory

    def is_python_constant(self):
        return self.factory.is_python_constant() and super().is_python_constant()

    def as_python_constant(self):
        return defaultdict(self.factory.as_python_constant(),
                           {k: v.as_python_constant() for k, v in self.items.items()})

    def copy(self):
        return DefaultDictVariable(self.items, self.factory)

    def getitem(self, tx, key):
        k = _key(tx, key)
        if k in self.items:
            return self.items[k]
        return self.missing(tx, k)

    def missing(self, tx, k):
        """defaultdict.__missing__: the factory's result, stored under the key."""
        factory = self.factory
        if is_none(factory):
            unsupported("exceptions", f"KeyError: {k!r}")
        value = factory.call_function(tx, [], {})
        self.check_mutable("a missing key read (defaultdict.__missing__)", tx)
        self.items[k] = value
        return value

    def var_getattr(self, tx, name):
        if name == "default_factory":
            return self.factory
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__missing__" and len(args) == 1 and not kwargs:
            k = _key(tx, args[0])
            return self.missing(tx, k)
        return super().call_method(tx, name, args, kwargs)

    def rebuild_new(self, rb) -> str:
        body = ", ".join(f"{rb.key(k)}: {rb.expr(v)}" for k, v in self.items.items())
        return f"{rb.ns.bind(defaultdict, 't')}({rb.expr(self.factory)}, {{{body}}})"

    def __repr__(self):
        return f"DefaultDictVariable({self.factory!r}, {self.items!r})"


def new_dict_of_type(tx, dict_type, items: dict) -> DictVariable:
    """A dict tracker of `dict_type` holding `items` (fromkeys of OrderedDict, defaultdict)."""
    if dict_type is OrderedDict:
        return OrderedDictVariable(items)
    if dict_type is defaultdict:
        return DefaultDictVariable(items)
    unsupported("construct", f"a {dict_type.__qualname__} made while tracing")


# --- Counter ------------------------------------------------------------------------------
class CounterVariable(DictVariable):
    """A Counter: a missing key reads 0 (and is not stored), deleting a missing key is
    fine, update/subtract count, and two Counters are equal when their counts agree with
    missing ones read as 0 (3.10+). Counting folds on constant counts."""

    __slots__ = ()

    def __init__(self, items, source=None, lazy=None, size=None):
        super().__init__(items, source, dict_type=Counter, lazy=lazy, size=size)

    def as_python_constant(self):
        return Counter({k: v.as_python_constant() for k, v in self.items.items()})

    def copy(self):
        return CounterVariable(self.items)

    def getitem(self, tx, key):
        k = _key(tx, key)
        return self.items[k] if k in self.items else ConstantVariable(0)

    def delitem(self, tx, key):
        k = _key(tx, key)
        if k in self.items:
            self.check_mutable("item deletion", tx)
            del self.items[k]

    def equals(self, tx, other):
        if not isinstance(other, CounterVariable):
            return super().equals(tx, other)  # Counter.__eq__ leaves it to dict's
        return all(compare(tx, "==", c.getitem(tx, ConstantVariable(k)), d.getitem(tx, ConstantVariable(k))).truthy(tx)
                   for c, d in ((self, other), (other, self)) for k in list(c.items))

    def count_in(self, tx, what: str, source, kwargs, sign: int) -> None:
        """Counter.update (sign 1) / subtract (sign -1): a mapping's counts, or one per element."""
        self.check_mutable(f"Counter.{what}", tx)
        op = "add" if sign > 0 else "sub"
        if source is not None and not is_none(source):
            if isinstance(source, DictVariable):
                if sign > 0 and not self.items:
                    self.items.update(source.items)  # CPython's fast path: the counts as they are
                else:
                    for k, count in list(source.items.items()):
                        old = self.items.get(k, ConstantVariable(0))
                        self.items[k] = binary_op(tx, op, count, old) if sign > 0 else binary_op(tx, op, old, count)
            else:
                # CPython's _count_elements (update) and subtract's loop count each element
                # before taking the next: an iterator's code sees the counts so far.
                for element in pulled_one_by_one(tx, source):
                    k = _key(tx, element)
                    self.items[k] = binary_op(tx, op, self.items.get(k, ConstantVariable(0)), ConstantVariable(1))
        if kwargs:
            self.count_in(tx, what, DictVariable(kwargs), {}, sign)

    def call_method(self, tx, name, args, kwargs):
        if name in ("update", "subtract"):
            (source,) = bind_params(f"Counter.{name}()", args, {}, ("iterable",), {"iterable": ConstantVariable(None)})
            self.count_in(tx, name, source, kwargs, 1 if name == "update" else -1)
            return ConstantVariable(None)
        if name == "__missing__" and len(args) == 1 and not kwargs:
            return ConstantVariable(0)
        if name == "fromkeys":
            unsupported("exceptions", "NotImplementedError: Counter.fromkeys() is undefined.  Use Counter(iterable) instead.")
        if name in ("most_common", "total", "elements"):
            if not self.is_python_constant() or not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
                unsupported("construct", f"Counter.{name} of counts that are not constants")
            method = getattr(self.as_python_constant(), name)
            if name == "elements":  # an iterator over a snapshot: the counts are read at the call
                listed = fold(tx, lambda *a, **k: list(method(*a, **k)), [a.as_python_constant() for a in args],
                              {k: v.as_python_constant() for k, v in kwargs.items()}, "Counter.elements()")
                return IteratorVariable(listed.items)
            return fold(tx, method, [a.as_python_constant() for a in args],
                        {k: v.as_python_constant() for k, v in kwargs.items()}, f"Counter.{name}()")
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"CounterVariable({self.items!r})"


def _make_counter(tx, cls, args, kwargs):
    (source,) = bind_params("Counter()", args, {}, ("iterable",), {"iterable": ConstantVariable(None)})
    c = CounterVariable({})
    c.count_in(tx, "update", source, kwargs, 1)
    return c


# --- constructors -------------------------------------------------------------------------
def _fill(tx, d: DictVariable, what: str, args, kwargs) -> DictVariable:
    """`dict(*args, **kwargs)`'s filling: a mapping or an iterable of pairs, then keywords."""
    if len(args) > 1:
        unsupported("exceptions", f"TypeError: {what} expected at most 1 argument, got {len(args)}")
    if args:
        d.update_from(tx, args[0])
    for k, v in kwargs.items():
        d.items[k] = v
    return d


def _make_ordered_dict(tx, cls, args, kwargs):
    return _fill(tx, OrderedDictVariable({}), "OrderedDict", args, kwargs)


def _make_defaultdict(tx, cls, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    _check_factory(factory)
    return _fill(tx, DefaultDictVariable({}, factory), "defaultdict", list(args[1:]), kwargs)


# --- dicts passed in ------------------------------------------------------------------------
def _wrap_dict(tx, value, source):
    """An OrderedDict, defaultdict or Counter read from the frame: like a dict (keys
    guarded when first looked into), one tracker per object however it is reached."""
    if source is not None:
        seen = tx.output.containers.get(id(value))
        if seen is not None and seen[0] is value:
            tx.output.guards.add(Guard("ALIAS_MATCH", source, True, {"other": seen[2]}))
            return seen[1]
    kind = type(value)

    def entries():
        items = tuple(value.items())
        keys = passed_in_keys(tx, value, source, kind)  # guarded, those hashed by identity as themselves
        return {key: tx.wrap(v, ItemSource(source, k) if source else None) for key, (k, v) in zip(keys, items)}

    if source is None:
        if kind is defaultdict:
            return DefaultDictVariable(entries(), tx.wrap(value.default_factory, None))
        return (OrderedDictVariable if kind is OrderedDict else CounterVariable)(entries())
    tx.output.guards.add(Guard("TYPE_MATCH", source, kind))
    if kind is not defaultdict:
        var = (OrderedDictVariable if kind is OrderedDict else CounterVariable)({}, source, lazy=entries,
                                                                                size=len(value))
    else:
        var = DefaultDictVariable({}, source=source, lazy=entries, size=len(value),
                                  factory_lazy=lambda: tx.wrap(value.default_factory,
                                                            AttrSource(source, "default_factory")))
    tx.output.containers[id(value)] = (value, var, source)
    return var


# --- fromkeys -----------------------------------------------------------------------------
_FROMKEYS_TYPES = (dict, OrderedDict, defaultdict)


def _is_fromkeys(value) -> bool:
    return type(value) is types.BuiltinMethodType and getattr(value, "__name__", None) == "fromkeys" \
        and getattr(value, "__self__", None) in _FROMKEYS_TYPES


class FromKeysVariable(ObjectConstantVariable):
    """`dict.fromkeys`, `OrderedDict.fromkeys`, `defaultdict.fromkeys` (bound to the class)."""

    def describe(self):
        return f"{self.value.__self__.__qualname__}.fromkeys"

    def call_function(self, tx, args, kwargs):
        owner = self.value.__self__
        if kwargs and owner is OrderedDict:  # OrderedDict.fromkeys(iterable, value=None) takes keywords
            named = dict(zip(("iterable", "value"), args))
            for k, v in kwargs.items():
                if k not in ("iterable", "value") or k in named:
                    unsupported("exceptions", f"TypeError: fromkeys() got an unexpected or repeated keyword "
                                              f"argument {k!r}", raised=TypeError)
                named[k] = v
            if "iterable" not in named:
                unsupported("exceptions", "TypeError: fromkeys() missing required argument 'iterable'",
                            raised=TypeError)
            args = [named["iterable"]] + ([named["value"]] if "value" in named else [])
        elif kwargs:
            unsupported("exceptions", f"TypeError: {owner.__name__}.fromkeys() takes no keyword arguments",
                        raised=TypeError)
        if not 1 <= len(args) <= 2:
            unsupported("exceptions", f"TypeError: fromkeys expected 1 or 2 arguments, got {len(args)}",
                        raised=TypeError)
        return from_keys(tx, owner, args)

    def rebuild_new(self, rb) -> str:  # across a graph break: the bound method itself
        return rb.ns.bind(self.value, "fromkeys")


def _wrap_fromkeys(tx, value, source):
    if source is not None:  # a bound method is made anew on each lookup: pin what it is bound to
        guards = tx.output.guards
        guards.add(Guard("TYPE_MATCH", source, types.BuiltinMethodType))
        guards.add(Guard("ID_MATCH", AttrSource(source, "__self__"), value.__self__))
        guards.add(Guard("EQUALS_MATCH", AttrSource(source, "__name__"), "fromkeys"))
    return FromKeysVariable(value, source)
