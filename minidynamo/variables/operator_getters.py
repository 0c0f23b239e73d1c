"""operator.itemgetter, attrgetter and methodcaller objects, made in the trace or passed
in: calling one is the subscripts, attribute reads or method call it stands for, traced
(`rows.sort(key=itemgetter(1))`, `map(attrgetter("weight"), layers)`). One made in the
trace that escapes is made again after the graph from its parts."""
from __future__ import annotations

import operator

from ..exc import builtin_raises, unsupported
from ..interpreter.operators import getitem
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .lists import TupleVariable

GETTER_CLASSES = (operator.itemgetter, operator.attrgetter, operator.methodcaller)


class OperatorGetterVariable(VariableTracker):
    """`cls(*parts, **keywords)`: itemgetter's keys (any trackers), attrgetter's dotted
    names, or methodcaller's name and arguments (the first part the name)."""

    __slots__ = ("cls", "parts", "keywords")

    def __init__(self, cls, parts: list, keywords: dict, source=None):
        super().__init__(source)
        self.cls, self.parts, self.keywords = cls, list(parts), dict(keywords)

    def python_type(self):
        return self.cls

    def describe(self):
        return f"operator.{self.cls.__name__} object"

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            _type_error(f"{self.cls.__name__} expected 1 argument, got {len(args) + len(kwargs)}")
        (obj,) = args
        if self.cls is operator.itemgetter:
            items = [getitem(tx, obj, key) for key in self.parts]
        elif self.cls is operator.attrgetter:
            items = [_dotted(tx, obj, name.as_python_constant()) for name in self.parts]
        else:
            method = obj.var_getattr(tx, self.parts[0].as_python_constant())
            return method.call_function(tx, self.parts[1:], dict(self.keywords))
        return items[0] if len(items) == 1 else TupleVariable(items)

    def rebuild_new(self, rb):
        parts = [rb.expr(p) for p in self.parts] + [f"{k}={rb.expr(v)}" for k, v in self.keywords.items()]
        return f"{rb.ns.bind(self.cls, self.cls.__name__)}({', '.join(parts)})"


def _type_error(text: str):
    """CPython's TypeError for a bad call, raised in the trace (a handler may catch it)."""
    builtin_raises(TypeError, [ConstantVariable(text)], f"TypeError: {text}")


def _dotted(tx, obj, name: str):
    for part in name.split("."):
        obj = obj.var_getattr(tx, part)
    return obj


def make_getter(tx, cls, args, kwargs):
    """`operator.itemgetter(1)` and its kind called in the trace. CPython's argument errors
    (their text differs between versions) are found by making one for real from stand-ins
    of the arguments: the constants themselves, 0 for any other (a C constructor that only
    keeps them); the names of attrgetter and methodcaller are constants."""
    args, kwargs = list(args), dict(kwargs)
    try:
        cls(*[a.as_python_constant() if a.is_python_constant() else 0 for a in args], **{k: 0 for k in kwargs})
    except TypeError as e:
        _type_error(str(e))
    names = args if cls is operator.attrgetter else args[:1] if cls is operator.methodcaller else []
    if not all(name.is_python_constant() for name in names):
        unsupported("construct", f"operator.{cls.__name__} of a name computed by the graph")
    return OperatorGetterVariable(cls, args, kwargs)


def wrap_getter(tx, value, source):
    """One passed in (identity-guarded; its parts never change): its parts from
    `__reduce__`, constants of the object."""
    maker, parts = value.__reduce__()[:2]
    parts, keywords = list(parts), {}
    if type(value) is operator.methodcaller and not isinstance(maker, type):
        # with keywords: (partial(methodcaller, name, **keywords), args)
        parts, keywords = [maker.args[0], *parts], dict(maker.keywords)
    if not all(is_constant_value(p) for p in [*parts, *keywords.values()]):
        unsupported("construct", f"operator.{type(value).__name__} object holding non-constant parts")
    return OperatorGetterVariable(type(value), [ConstantVariable(p) for p in parts],
                                  {k: ConstantVariable(v) for k, v in keywords.items()}, source)
