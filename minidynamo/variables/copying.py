"""`copy.deepcopy(x)` and `copy.copy(x)` of values the trace holds: a model of the two
functions, not their code inlined.

Why a model: the standard library's deepcopy keys its memo by `id()` of every object it
meets and reaches an ordinary object's state through the C `object.__reduce_ex__(4)`;
inlined, a trace would need `id()` of objects that do not exist yet and a model of the
pickle protocol, and would interpret thousands of instructions for one config
(transformers copies its config in every forward that makes a cache). The model walks the
trackers instead, with a memo keyed by tracker (one object is one tracker: builder.py
keeps one tracker per list, dict and config passed in; objects made in the trace are
their tracker), so sharing and cycles inside the copied value are kept as CPython keeps
them.

What is copied, as copy.py does it:
- constants, classes and functions (copy's atomic types) are the value itself; a tuple is
  itself unless an item's copy is a new object;
- lists, dicts and sets become new trackers made in the trace (nothing is written to the
  original; only escaping makes them real);
- an object of a plain class, made in the trace or passed in (a config), becomes a new
  `NewObjectVariable` whose `__dict__` is the copy of the original's, in order, set past
  the class's `__setattr__` (`y.__dict__.update(state)` in copy._reconstruct). The class
  must copy as `object.__reduce_ex__(4)` does: no `__deepcopy__`/`__copy__`,
  `__reduce__`, `__reduce_ex__`, `__getstate__`, `__setstate__`, `__getnewargs__` of its
  own, no entry in `copyreg.dispatch_table` or copy's dispatch tables; the entry asks that
  again (`CopiesPlainlySource`). A passed-in object's `__dict__` keys are guarded in order,
  and its values as any attribute read.
Anything else (tensors, modules, an explicit memo, classes with copy hooks) declines, naming
what. Identity of equal immutable constants is not kept (CPython does not promise it).
"""
from __future__ import annotations

import copy
import copyreg
import types
from dataclasses import dataclass

from ..exc import unsupported
from ..guards import Guard
from ..sources import ItemSource, Source
from .attribute_protocols import InstanceDictView, class_attribute, dict_source, instance_dict
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable, has_object_keys
from .dict_keys import is_object_key
from .sets import SetVariable
from .lists import ListVariable, TupleVariable
from .objects import ClassVariable, UserObjectVariable
from .user_objects import InstanceDictVariable, NewObjectVariable, why_not_modelled

# Attributes whose presence (anything but object's own) means the class copies itself.
_HOOKS = {True: ("__deepcopy__",), False: ("__copy__",)}
_ANY_COPY = ("__setstate__", "__getnewargs__", "__getnewargs_ex__")
_OBJECT_OWN = (("__reduce_ex__", object.__reduce_ex__), ("__reduce__", object.__reduce__),
               ("__getstate__", getattr(object, "__getstate__", None)))  # (3.11+)


def _special_cased(deep: bool):
    """The types copy.deepcopy (deep) or copy.copy handles by a table of its own: a dispatch
    dict up to 3.13; 3.14's copy.copy keeps two sets instead."""
    if deep:
        return copy._deepcopy_dispatch
    table = getattr(copy, "_copy_dispatch", None)
    if table is not None:
        return table
    return copy._copy_atomic_types | copy._copy_builtin_containers


def copies_plainly(cls, deep: bool) -> bool:
    """Whether copy.deepcopy (deep) or copy.copy makes an object of `cls` as
    `object.__reduce_ex__(4)` describes it: `cls.__new__(cls)`, then its `__dict__` (deep:
    copied) set on it, with no hook of the class's own on the way."""
    if cls in _special_cased(deep) or cls in copyreg.dispatch_table or issubclass(cls, type):
        return False
    if any(class_attribute(cls, name) is not None for name in _HOOKS[deep] + _ANY_COPY):
        return False
    return all(class_attribute(cls, name) is own for name, own in _OBJECT_OWN)


@dataclass(frozen=True, eq=False)
class CopiesPlainlySource(Source):
    """`copies_plainly(cls, deep)`, asked again by the entry (a class patched with a copy
    hook, or registered with copyreg, after the trace)."""

    cls: type
    deep: bool

    def expr(self, ns):
        return f"{ns.bind(copies_plainly, 'copies_plainly')}({ns.bind(self.cls, 'cls')}, {self.deep!r})"

    def name(self, naming=None):
        return f"whether {'copy.deepcopy' if self.deep else 'copy.copy'} copies {self.cls.__qualname__} plainly"

    def __eq__(self, other):
        return isinstance(other, CopiesPlainlySource) and other.cls is self.cls and other.deep == self.deep

    def __hash__(self):
        return hash((id(self.cls), self.deep))


def _atomic(v) -> bool:
    """Values copy returns as they are (`copy._deepcopy_atomic`, `copy._copy_immutable`)."""
    if isinstance(v, ConstantVariable):
        value = v.as_python_constant()
        return not isinstance(value, (tuple, frozenset))
    if isinstance(v, ClassVariable):
        return True
    t = v.python_type()
    return t in (types.FunctionType, types.BuiltinFunctionType)


class _Copier:
    """One call's copy: the memo (tracker id → (tracker, copy)) and what was copied."""

    def __init__(self, tx, deep: bool):
        self.tx = tx
        self.deep = deep
        self.memo: dict = {}
        self.what = "copy.deepcopy" if deep else "copy.copy"

    def decline(self, v):
        unsupported("construct", f"{self.what} of {v.describe()} is not traced")

    def item(self, v):
        """An item of the copied value: copied again (deep), or shared (shallow)."""
        return self(v) if self.deep else v

    def __call__(self, v):
        hit = self.memo.get(id(v))
        if hit is not None:
            return hit[1]
        if _atomic(v):
            return v
        made = self._copy(v)
        if made is not v:
            self.memo[id(v)] = (v, made)
        return made

    def _remember(self, v, made):
        """Before the items are copied: a value reaching itself gets the copy (cycles)."""
        self.memo[id(v)] = (v, made)
        return made

    def _copy(self, v):
        if isinstance(v, ConstantVariable):  # a tuple or frozenset of constants
            value = v.as_python_constant()
            return v if type(value) in (tuple, frozenset) else self.decline(v)
        if type(v) is TupleVariable and v.python_type() is tuple:
            items = list(v.items)
            copies = [self.item(x) for x in items]
            hit = self.memo.get(id(v))  # a cycle through a list inside: copy.py returns that copy
            if hit is not None:
                return hit[1]
            return v if all(a is b for a, b in zip(items, copies)) else TupleVariable(copies)
        if type(v) is ListVariable and v.python_type() is list:
            made = self._remember(v, ListVariable([]))
            made.items.extend(self.item(x) for x in list(v.items))
            return made
        if type(v) is SetVariable and v.python_type() in (set, frozenset) and not has_object_keys(v.values):
            if v.python_type() is frozenset and not self.deep:
                return v
            keys = v.ordered_keys()
            if self.deep:  # rebuilt from a list of its members (set.__reduce__): added one by one
                made = SetVariable(shadow=v.python_type()(v.values if keys is None else keys))
            else:  # set.copy merges the table whole
                made = SetVariable(shadow=v.values.copy())
            if keys is None or not (self.deep or v.mirrors()):
                made.order = None
            made.set_type = v.python_type()
            return made
        if type(v) in (DictVariable, InstanceDictVariable) and v.python_type() is dict:
            return self._dict(v, dict(v.items))
        if isinstance(v, InstanceDictView):
            return self._dict(v, self._outside_state(v.owner))
        if type(v) is NewObjectVariable:
            return self._object(v, v.cls, dict(v.attrs))
        if type(v) is UserObjectVariable and v.source is not None and not v.is_module():
            return self._object(v, type(v.value), None)
        return self.decline(v)

    def _dict(self, v, items: dict):
        made = self._remember(v, DictVariable({}))
        for k, x in items.items():
            if is_object_key(k):
                unsupported("construct", f"{self.what} of a dict keyed by {k.var.describe()} is not traced")
            made.items[k] = self.item(x)  # keys are constants: copy keeps them
        return made

    def _object(self, v, cls, state):
        why = why_not_modelled(cls)
        if why is not None:
            unsupported("construct", f"{self.what} of a {cls.__qualname__} object: {why}")
        self.tx.output.guards.add(Guard("EQUALS_MATCH", CopiesPlainlySource(cls, self.deep), True))
        if not copies_plainly(cls, self.deep):
            unsupported("construct", f"{self.what} of a {cls.__qualname__} object: the class copies itself "
                                     "(a copy hook, copyreg or a pickle protocol method of its own)")
        made = self._remember(v, NewObjectVariable(cls))
        if state is None:
            state = self._outside_state(v)
        made.attrs.update((k, self.item(x)) for k, x in state.items())
        return made

    def _outside_state(self, obj) -> dict:
        """The `__dict__` of an object passed in, as the trace sees it: its keys guarded in
        order, the values read as attributes (guarded), the trace's own writes over them."""
        real = instance_dict(obj.value)
        if type(real) is not dict:
            self.decline(obj)
        source = dict_source(obj.source)
        self.tx.output.guards.add(Guard("DICT_KEYS", source, tuple(real), {"type": dict}))
        cls = type(obj.value)
        state = {}
        for k, value in real.items():
            static = class_attribute(cls, k)
            if k in obj.stored:
                state[k] = obj.stored[k]
            elif static is not None and hasattr(type(static), "__set__"):  # a data descriptor wins over __dict__
                state[k] = self.tx.wrap(value, ItemSource(source, k))
            else:
                state[k] = self.tx.wrap(value, obj._attr_source(k))
        for k, x in obj.stored.items():
            state.setdefault(k, x)
        return state


class CopyFunctionVariable(VariableTracker):
    """`copy.deepcopy` or `copy.copy` (pinned by identity where it was read)."""

    __slots__ = ("fn",)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self):
        return types.FunctionType

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.fn

    def describe(self):
        return f"copy.{self.fn.__name__}"

    def call_function(self, tx, args, kwargs):
        deep = self.fn is copy.deepcopy
        bound = dict(zip(("x", "memo") if deep else ("x",), args), **kwargs)
        if len(args) + len(kwargs) != len(bound) or "x" not in bound or set(bound) - {"x", "memo"} or \
                not deep and "memo" in bound:
            unsupported("construct", f"{self.describe()} with these arguments")
        memo = bound.get("memo")
        if memo is not None and not (memo.is_python_constant() and memo.as_python_constant() is None):
            unsupported("construct", f"{self.describe()} with a memo of the caller's is not traced")
        return _Copier(tx, deep)(bound["x"])


def _copy_function(tx, value, source):
    return CopyFunctionVariable(value, source)

