"""Models of the collections types: OrderedDict, defaultdict and deque made inside the
trace or passed in, `fromkeys` of the dict types (namedtuples: namedtuples.py).

OrderedDict and defaultdict are dict trackers with their own methods. Those passed in, and
deques passed in, may be changed: the entry writes their final contents back in place
after the graph, as for lists and dicts (side_effects.py)."""
from __future__ import annotations

import operator
import types
from collections import OrderedDict, defaultdict, deque

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable, _key, from_keys
from .functions import BoundMethodVariable, NestedFunctionVariable, PartialVariable, UserMethodVariable
from .lists import LiveItems, TupleVariable, items_equal
from . import namedtuples


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


def _index_value(v: VariableTracker, what: str) -> int:
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
            return TupleVariable([ConstantVariable(k), self.items.pop(k)])
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"OrderedDictVariable({self.items!r})"


# --- defaultdict ------------------------------------------------------------------------
def _is_none(v: VariableTracker) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _check_factory(factory: VariableTracker) -> None:
    """defaultdict's first argument: None or a callable (what CPython checks)."""
    if _is_none(factory):
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
        if _is_none(factory):
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
    """An OrderedDict or defaultdict read from the frame: like a dict (keys guarded when
    first looked into), one tracker per object however it is reached."""
    from .builder import wrap
    if source is not None:
        seen = tx.output.containers.get(id(value))
        if seen is not None and seen[0] is value:
            tx.output.guards.add(Guard("ALIAS_MATCH", source, True, {"other": seen[2]}))
            return seen[1]
    if not all(is_constant_value(k) for k in value):
        unsupported("construct", f"a {type(value).__name__} with keys that are not constants")
    kind = type(value)

    def entries():
        if source is not None:
            tx.output.guards.add(Guard("DICT_KEYS", source, tuple(value), {"type": kind}))
        return {k: wrap(tx, v, ItemSource(source, k) if source else None) for k, v in value.items()}

    if source is None:
        var = OrderedDictVariable(entries()) if kind is OrderedDict else \
            DefaultDictVariable(entries(), wrap(tx, value.default_factory, None))
        return var
    tx.output.guards.add(Guard("TYPE_MATCH", source, kind))
    if kind is OrderedDict:
        var = OrderedDictVariable({}, source, lazy=entries, size=len(value))
    else:
        var = DefaultDictVariable({}, source=source, lazy=entries, size=len(value),
                                  factory_lazy=lambda: wrap(tx, value.default_factory,
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
        if kwargs:
            unsupported("exceptions", "TypeError: fromkeys() takes no keyword arguments")
        if not 1 <= len(args) <= 2:
            unsupported("exceptions", f"TypeError: fromkeys expected 1 or 2 arguments, got {len(args)}")
        return from_keys(tx, self.value.__self__, args)

    def rebuild_new(self, rb) -> str:  # across a graph break: the bound method itself
        return rb.ns.bind(self.value, "fromkeys")


def _wrap_fromkeys(tx, value, source):
    if source is not None:  # a bound method is made anew on each lookup: pin what it is bound to
        guards = tx.output.guards
        guards.add(Guard("TYPE_MATCH", source, types.BuiltinMethodType))
        guards.add(Guard("ID_MATCH", AttrSource(source, "__self__"), value.__self__))
        guards.add(Guard("EQUALS_MATCH", AttrSource(source, "__name__"), "fromkeys"))
    return FromKeysVariable(value, source)


# --- deque --------------------------------------------------------------------------------
class DequeVariable(VariableTracker):
    """A deque: items and maxlen. `version` counts changes, as CPython's deque state does,
    so an iterator taken before a change declines when advanced after it."""

    __slots__ = ("_items", "_lazy", "_size", "_maxlen", "_maxlen_lazy", "version")

    def __init__(self, items, maxlen=None, source=None, lazy=None, size=None, maxlen_lazy=None):
        super().__init__(source)
        self._items = list(items) if lazy is None else None
        self._lazy = lazy
        self._size = size
        self._maxlen = maxlen
        self._maxlen_lazy = maxlen_lazy
        self.version = 0

    @property
    def items(self) -> list:
        if self._lazy is not None:
            lazy, self._lazy = self._lazy, None
            self._items = list(lazy())
        return self._items

    @property
    def maxlen(self):
        if self._maxlen_lazy is not None:
            lazy, self._maxlen_lazy = self._maxlen_lazy, None
            self._maxlen = lazy()
        return self._maxlen

    def python_type(self):
        return deque

    def describe(self):
        return f"deque of length {len(self._items) if self._lazy is None else self._size}"

    def truthy(self, tx):
        return bool(self.items)

    def iter_items(self, tx):
        return DequeIteration(self)

    def reversed_items(self, tx):
        return DequeIteration(self, reverse=True)

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return self.method_getattr(tx, name)

    def _changing(self, what: str, tx) -> list:
        if self.source is not None:  # a deque from outside: its final contents are written back
            tx.output.record_mutation(self, f"deque.{what} on {self.source.name()!r}")
        self.version += 1
        return self.items

    def writeback(self, rb, target: str, temp: str) -> tuple[str, str]:
        """(the final contents, how to put them in) for a deque from outside (side_effects.py):
        in place, so the caller's deque stays the same object with its maxlen."""
        return "[" + ", ".join(rb.expr(i) for i in self.items) + "]", f"{target}.clear(); {target}.extend({temp})"

    def _position(self, tx, key, what="deque index") -> int:
        if key.is_python_constant() and isinstance(key.as_python_constant(), slice):
            unsupported("exceptions", "TypeError: sequence index must be integer, not 'slice'")
        i = _index_value(key, what)
        n = len(self.items)
        if not -n <= i < n:
            unsupported("exceptions", "IndexError: deque index out of range")
        return i % n

    def getitem(self, tx, key):
        return self.items[self._position(tx, key)]

    def delitem(self, tx, key):
        i = self._position(tx, key)
        del self._changing("__delitem__", tx)[i]

    def _trim(self, items: list, from_left: bool) -> None:
        maxlen = self.maxlen
        if maxlen is not None and len(items) > maxlen:
            excess = len(items) - maxlen
            if from_left:
                del items[:excess]
            else:
                del items[len(items) - excess:]

    def _find(self, tx, x, start=0, stop=None) -> int | None:
        version = self.version
        items = self.items
        for i in range(start, len(items) if stop is None else min(stop, len(items))):
            equal = items_equal(tx, items[i], x)
            if self.version != version:  # an __eq__ changed the deque while it was searched
                unsupported("exceptions", "RuntimeError: deque mutated during iteration")
            if equal:
                return i
        return None

    def call_method(self, tx, name, args, kwargs):
        what = f"deque.{name}()"
        one = lambda: bind_params(what, args, kwargs, ("x",), positional_only=True)[0]  # noqa: E731
        none = ConstantVariable(None)
        if name == "append":
            x = one()
            items = self._changing(name, tx)
            items.append(x)
            self._trim(items, from_left=True)
            return none
        if name == "appendleft":
            x = one()
            items = self._changing(name, tx)
            items.insert(0, x)
            self._trim(items, from_left=False)
            return none
        if name in ("pop", "popleft"):
            bind_params(what, args, kwargs, (), positional_only=True)
            if not self.items:
                unsupported("exceptions", "IndexError: pop from an empty deque")
            return self._changing(name, tx).pop(-1 if name == "pop" else 0)
        if name in ("extend", "extendleft"):
            new = list(one().iter_items(tx))  # all read first: extending a deque by itself is fine
            items = self._changing(name, tx)
            for x in new:
                if name == "extend":
                    items.append(x)
                    self._trim(items, from_left=True)
                else:
                    items.insert(0, x)
                    self._trim(items, from_left=False)
            return none
        if name == "rotate":
            (n,) = bind_params(what, args, kwargs, ("n",), {"n": ConstantVariable(1)}, positional_only=True)
            steps = _index_value(n, "deque.rotate()")
            items = self._changing(name, tx)
            if len(items) > 1 and steps % len(items):
                k = steps % len(items)
                items[:] = items[-k:] + items[:-k]
            return none
        if name in ("clear", "reverse"):
            bind_params(what, args, kwargs, (), positional_only=True)
            items = self._changing(name, tx)
            if name == "clear":
                items.clear()
            else:
                items.reverse()
            return none
        if name in ("copy", "__copy__"):
            bind_params(what, args, kwargs, (), positional_only=True)
            return DequeVariable(self.items, self.maxlen)
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._find(tx, args[0]) is not None)
        if name == "count":
            x = one()
            version, items = self.version, list(self.items)
            count = sum(1 for i in items if items_equal(tx, i, x))
            if self.version != version:
                unsupported("exceptions", "RuntimeError: deque mutated during iteration")
            return ConstantVariable(count)
        if name == "index":
            x, start, stop = bind_params(what, args, kwargs, ("x", "start", "stop"),
                                         {"start": ConstantVariable(0), "stop": ConstantVariable(None)},
                                         positional_only=True)
            n = len(self.items)
            lo, hi = _index_value(start, what), None if _is_none(stop) else _index_value(stop, what)
            lo, hi, _ = slice(lo, hi).indices(n)
            found = self._find(tx, x, lo, hi)
            if found is None:
                unsupported("exceptions", f"ValueError: {x.describe()} is not in deque")
            return ConstantVariable(found)
        if name == "remove":
            x = one()
            found = self._find(tx, x)
            if found is None:
                unsupported("exceptions", f"ValueError: {x.describe()} is not in deque")
            del self._changing(name, tx)[found]
            return none
        if name == "insert":
            i, x = bind_params(what, args, kwargs, ("i", "x"), positional_only=True)
            at = _index_value(i, what)
            if self.maxlen is not None and len(self.items) >= self.maxlen:
                unsupported("exceptions", "IndexError: deque already at its maximum size")
            self._changing(name, tx).insert(at, x)
            return none
        return super().call_method(tx, name, args, kwargs)

    def rebuild_new(self, rb) -> str:
        inner = "".join(rb.expr(i) + ", " for i in self.items)
        return f"{rb.ns.bind(deque, 't')}(({inner}), {self.maxlen!r})"

    def __repr__(self):
        return f"DequeVariable({self._items!r}, maxlen={self._maxlen!r})"


class DequeIteration(LiveItems):
    """What iterating a deque yields: the items now, for callers that use them at once;
    for an iterator, each item when it is taken. CPython's deque iterator raises once the
    deque changed (even after it is exhausted)."""

    __slots__ = ("deque_var", "version", "size", "reverse")

    def __init__(self, deque_var: DequeVariable, reverse: bool = False):
        self.deque_var, self.reverse = deque_var, reverse
        self.version = deque_var.version
        self.size = len(deque_var.items)
        super().__init__(reversed(deque_var.items) if reverse else deque_var.items)

    def at(self, index: int):
        if self.deque_var.version != self.version:
            unsupported("exceptions", "RuntimeError: deque mutated during iteration")
        if index >= self.size:
            return None
        return self.deque_var.items[self.size - 1 - index if self.reverse else index]


def _make_deque(tx, cls, args, kwargs):
    iterable, maxlen = bind_params("deque()", args, kwargs, ("iterable", "maxlen"),
                                   {"iterable": TupleVariable([]), "maxlen": ConstantVariable(None)})
    limit = None if _is_none(maxlen) else _index_value(maxlen, "deque maxlen")
    if limit is not None and limit < 0:
        unsupported("exceptions", "ValueError: maxlen must be non-negative")
    d = DequeVariable(list(iterable.iter_items(tx)), limit)
    d._trim(d.items, from_left=True)
    return d


def _wrap_deque(tx, value, source):
    """A deque read from the frame: its length guarded when its items are first looked
    at, its maxlen when first read; one tracker per object however it is reached."""
    from .builder import wrap
    if source is None:
        return DequeVariable([wrap(tx, v, None) for v in value], value.maxlen)
    guards = tx.output.guards
    seen = tx.output.containers.get(id(value))
    if seen is not None and seen[0] is value:
        guards.add(Guard("ALIAS_MATCH", source, True, {"other": seen[2]}))
        return seen[1]
    guards.add(Guard("TYPE_MATCH", source, deque))

    def items():
        guards.add(Guard("LEN_MATCH", source, len(value), {"type": deque}))
        return [wrap(tx, v, ItemSource(source, i)) for i, v in enumerate(value)]

    def maxlen():
        guards.add(Guard("EQUALS_MATCH", AttrSource(source, "maxlen"), value.maxlen))
        return value.maxlen

    var = DequeVariable((), source=source, lazy=items, size=len(value), maxlen_lazy=maxlen)
    tx.output.containers[id(value)] = (value, var, source)
    return var


def _register():
    from .builder import register_wrapper
    from .objects import register_constructor
    register_constructor(lambda cls: cls is OrderedDict, _make_ordered_dict, first=True)
    register_constructor(lambda cls: cls is defaultdict, _make_defaultdict, first=True)
    register_constructor(lambda cls: cls is deque, _make_deque, first=True)
    register_wrapper(lambda v: type(v) in (OrderedDict, defaultdict), _wrap_dict, guard_identity=False)
    register_wrapper(lambda v: type(v) is deque, _wrap_deque, guard_identity=False)
    register_wrapper(_is_fromkeys, _wrap_fromkeys, guard_identity=False)
    namedtuples.register()


_register()
