"""namedtuple and typing.NamedTuple classes defined outside the optimized function: their
instances are tuple trackers whose `tuple_type` is the class (made inside by calling the
class, or passed in), with fields as attributes and `_make`, `_replace`, `_asdict`
modelled. `collections.namedtuple(...)` called inside the function: namedtuple_classes.py;
`typing.NamedTuple(...)` there declines (a new class per call)."""
from __future__ import annotations

import collections
import inspect
import types

from ..exc import READS_FRAME, unsupported
from ..guards import Guard
from ..sources import AttrSource, ObjectSource
from .attribute_protocols import overrides_instance_dict
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .call_binding import bind_arguments
from .functions import function_var, UserFunctionVariable, UserMethodVariable
from .lists import TupleVariable
from .objects import ClassVariable
from .stores import record_store
from .namedtuple_classes import make_class
from .tuple_types import _TUPLEGETTER, _STOCK_CODES, _stock_name, namedtuple_base, is_plain_tuple_type


def is_plain_namedtuple(cls) -> bool:
    """A namedtuple class whose instances behave as tuples do (is_plain_tuple_type) and
    whose metaclass is type (calling it is its __new__)."""
    return namedtuple_base(cls) is not None and type(cls) is type and is_plain_tuple_type(cls)


def _fields_of(cls) -> tuple:
    return namedtuple_base(cls).__dict__["_fields"]


# --- attributes of instances --------------------------------------------------------------
def namedtuple_getattr(tx, tup: TupleVariable, name: str):
    """`p.name` for a namedtuple instance's tracker, or None where tuple's own lookup
    applies (tuple methods such as count and index)."""
    cls = tup.tuple_type
    if namedtuple_base(cls) is None:
        return None
    source = tup.source
    if name == "__class__":
        return tx.wrap(cls, None)  # the instance's type is guarded already
    if tup.stored and name in tup.stored:  # set by the trace (namedtuple_setattr)
        return tup.stored[name]
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        static = None
    data_descriptor = static is not None and overrides_instance_dict(static)
    if cls.__dictoffset__ and not data_descriptor:  # instances of this class have a __dict__
        found = _instance_attribute(tx, tup, name)
        if found is not None:
            return found
    if static is None:
        return None
    _guard_class_attribute(tx, _class_source(cls, source), name, static)
    if type(static) is _TUPLEGETTER:
        index = static.__reduce__()[1][0]
        return tup.items[index]
    stock = _stock_name(static)
    if stock is not None:
        fn = static.__func__ if isinstance(static, classmethod) else static
        owner = ClassVariable(cls) if isinstance(static, classmethod) else tup
        return UserMethodVariable(NamedTupleMethodVariable(fn), owner)
    if isinstance(static, types.FunctionType):
        return UserMethodVariable(function_var(static), tup)
    if isinstance(static, staticmethod):
        return function_var(static.__func__)
    if isinstance(static, classmethod):
        return UserMethodVariable(function_var(static.__func__), ClassVariable(cls))
    if isinstance(static, property):
        if static.fget is None:
            unsupported("exceptions", f"AttributeError: property {name!r} has no getter", raised=AttributeError)
        return function_var(static.fget).call_function(tx, [tup], {})
    if hasattr(type(static), "__get__"):
        return None  # tuple's methods (count, index, __getitem__...): the tuple tracker's own
    if source is not None:
        return tx.wrap(static, AttrSource(source, name))
    if is_constant_value(static):
        return ConstantVariable(static)
    if name == "_field_defaults":
        return DictVariable({k: tx.wrap(v, None) for k, v in static.items()})
    unsupported("construct", f"class attribute {name!r} of {cls.__qualname__} read through an instance "
                             "made while tracing (not a constant)")


def _instance_attribute(tx, tup: TupleVariable, name: str):
    """An attribute in the instance's own __dict__ (a namedtuple subclass without
    __slots__). One made while tracing has none (attribute writes decline)."""
    if tup.source is None:
        return None
    seen = tx.output.wrapped.get(tup.source)
    if seen is None:
        unsupported("construct", f"the __dict__ of {tup.source.name()!r} is not known while tracing")
    inst_dict = seen[0].__dict__
    if name in inst_dict:
        return tx.wrap(inst_dict[name], AttrSource(tup.source, name))
    tx.output.guards.add(Guard("NOT_IN_DICT", tup.source, None, {"attr": name}))
    return None


def namedtuple_setattr(tx, tup: TupleVariable, name: str, value) -> None:
    """`p.name = v` on an instance of a namedtuple subclass passed in whose class gives it a
    __dict__: kept in `tup.stored` (later reads see it) and set after the graph. Guarded:
    the class's `__setattr__` and what the class has under `name` (absent, or the same
    plain value or function, never a descriptor that would take the write)."""
    cls = tup.tuple_type
    static = _ABSENT
    for klass in cls.__mro__:
        if name in vars(klass):
            static = vars(klass)[name]
            break
    why = None
    if namedtuple_base(cls) is None or not cls.__dictoffset__:
        why = "its class gives it no instance dictionary"
    elif tup.source is None:
        why = "it is not reachable from the function's inputs"
    elif inspect.getattr_static(cls, "__setattr__") is not object.__setattr__:
        why = f"{cls.__qualname__}.__setattr__ is not traced"
    elif static is not _ABSENT and hasattr(type(static), "__get__") and not isinstance(static, types.FunctionType):
        why = f"{name!r} is a {type(static).__name__} of its class"
    if why is not None:
        unsupported("side_effect", f"setting attribute {name!r} on {tup.describe()}, which outlives the call: {why}")
    class_source = _class_source(cls, tup.source)
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(class_source, "__setattr__"), object.__setattr__))
    if static is _ABSENT:
        tx.output.guards.add(Guard("HASATTR", class_source, False, {"attr": name}))
    else:
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(class_source, name), static))
    record_store(tx.output, tup)
    if tup.stored is None:
        tup.stored = {}
    tup.stored[name] = value


def attribute_writeback(tup: TupleVariable, rb, target: str, temp: str) -> tuple[str, str]:
    """(the values, the statements setting them) for the attributes the trace set."""
    names = list(tup.stored)
    content = "(" + "".join(f"{rb.expr(tup.stored[n])}, " for n in names) + ")"
    setattr_ = rb.ns.bind(object.__setattr__, "object_setattr")
    return content, "; ".join(f"{setattr_}({target}, {n!r}, {temp}[{i}])" for i, n in enumerate(names))


_ABSENT = object()


def _class_source(cls, instance_source):
    """Where guards read the class: through the instance passed in, or the class itself."""
    if instance_source is not None:
        return AttrSource(instance_source, "__class__")
    return ObjectSource(cls, cls.__qualname__)


def _guard_class_attribute(tx, class_source, name, static) -> None:
    """What the class gives for `name` is inlined or read: pin it (a class can be patched)."""
    on_class = AttrSource(class_source, name)
    if isinstance(static, classmethod):  # read through the class: a bound method, made anew
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(on_class, "__func__"), static.__func__))
    elif isinstance(static, staticmethod):
        tx.output.guards.add(Guard("ID_MATCH", on_class, static.__func__))
    elif isinstance(static, (types.FunctionType, property, _TUPLEGETTER)):
        tx.output.guards.add(Guard("ID_MATCH", on_class, static))


# --- the stock methods ----------------------------------------------------------------------
class NamedTupleMethodVariable(UserFunctionVariable):
    """One of the functions collections.namedtuple generates (`_make`, `_replace`,
    `_asdict`, `__getnewargs__`, `__repr__`), applied natively: their bodies call
    `tuple.__new__` and `map`, which the trace would not follow."""

    def call_function(self, tx, args, kwargs):
        name = _STOCK_CODES[self.fn.__code__]
        if name == "_make":
            return self._make(tx, args, kwargs)
        if not args or not isinstance(args[0], TupleVariable) or namedtuple_base(args[0].tuple_type) is None:
            unsupported("construct", f"namedtuple {name}() applied to {args[0].describe() if args else 'nothing'}")
        tup, rest = args[0], args[1:]
        cls = tup.tuple_type
        if _stock_name(inspect.getattr_static(cls, name, None)) != name or \
                getattr(inspect.getattr_static(cls, name), "__code__", None) is not self.fn.__code__:
            unsupported("construct", f"{self.fn.__qualname__} applied to a {cls.__qualname__}")
        if name == "_replace":
            if rest:
                unsupported("exceptions", f"TypeError: _replace() takes 1 positional argument but {len(args)} were given")
            fields = _fields_of(cls)
            unknown = [k for k in kwargs if k not in fields]
            if unknown:
                unsupported("exceptions", f"TypeError: Got unexpected field names: {unknown!r}")
            made = _class_method(cls, "_make")  # _replace makes its result with type(self)._make
            items = [kwargs.get(f, item) for f, item in zip(fields, tup.items)]
            return made.call_function(tx, [TupleVariable(items)], {})
        if rest or kwargs:
            unsupported("exceptions", f"TypeError: {name}() takes 1 positional argument")
        if name == "_asdict":
            fields = inspect.getattr_static(cls, "_fields")
            if not is_constant_value(fields):
                unsupported("construct", f"{cls.__qualname__}._fields is not a constant")
            return DictVariable(dict(zip(fields, tup.items)))
        if name == "__getnewargs__":
            return TupleVariable(list(tup.items))
        if tup.is_python_constant():  # __repr__
            return ConstantVariable(repr(tup.as_python_constant()))
        unsupported("construct", f"repr of {tup.describe()}")

    def _make(self, tx, args, kwargs):
        if len(args) != 2 or kwargs or not isinstance(args[0], ClassVariable):
            unsupported("construct", "namedtuple _make() called with these arguments")
        cls = args[0].value
        static = inspect.getattr_static(cls, "_make", None)
        if namedtuple_base(cls) is None or not isinstance(static, classmethod) or static.__func__ is not self.fn:
            unsupported("construct", f"{self.fn.__qualname__} applied to {cls!r}")
        items = list(args[1].iter_items(tx))
        fields = _fields_of(cls)
        if len(items) != len(fields):
            unsupported("exceptions", f"TypeError: Expected {len(fields)} arguments, got {len(items)}")
        return TupleVariable(items, tuple_type=cls)


def _class_method(cls, name):
    """`cls.name` for a classmethod, as a tracker to call (the stock one natively)."""
    static = inspect.getattr_static(cls, name)
    if not isinstance(static, classmethod):
        unsupported("construct", f"{cls.__qualname__}.{name} is not a classmethod")
    fn = NamedTupleMethodVariable(static.__func__) if _stock_name(static) == name else function_var(static.__func__)
    return UserMethodVariable(fn, ClassVariable(cls))


# --- construction -----------------------------------------------------------------------
def _make_namedtuple(tx, cls, args, kwargs):
    """`P(...)`: the arguments bound as the generated __new__ binds them (defaults
    included); a class that changes construction (its own __new__/__init__) is not modelled."""
    if not is_plain_namedtuple(cls):
        return None
    base = namedtuple_base(cls)
    if inspect.getattr_static(cls, "__new__") is not base.__dict__["__new__"] or cls.__init__ is not object.__init__:
        return None
    new = base.__dict__["__new__"].__func__
    # The construction relies on both (a class can be patched after the trace).
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(_class_source(cls, None), "__new__"), new))
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(_class_source(cls, None), "__init__"), object.__init__))
    bound = bind_arguments(UserFunctionVariable(new), tx, new.__code__, [ClassVariable(cls), *args], kwargs)
    names = new.__code__.co_varnames[1:new.__code__.co_argcount]
    return TupleVariable([bound[n] for n in names], tuple_type=cls)


class NamedTupleFactoryVariable(UserFunctionVariable):
    """`collections.namedtuple` / `typing.NamedTuple` called inside the optimized function."""

    def call_function(self, tx, args, kwargs):
        if self.fn is collections.namedtuple:
            return make_class(tx, args, kwargs)
        # It also names the class's module after the calling frame's globals, which a
        # graph break's helper would replace: the whole call runs eagerly.
        unsupported("construct", f"{self.fn.__module__}.{self.fn.__qualname__}() inside the optimized function "
                                 "makes a new class on every call",
                    hint="define the namedtuple class at module level and call it inside the function",
                    no_break=READS_FRAME)


_DISALLOW_INSTANTIATION = 1 << 7  # Py_TPFLAGS_DISALLOW_INSTANTIATION


def _is_uninstantiable_constant(value) -> bool:
    """A tuple of constants whose type cannot be instantiated (sys.version_info, sys.flags):
    a tuple tracker could not fold it (it makes its type from the items), so it is a constant."""
    return isinstance(value, tuple) and type(value) is not tuple \
        and type(value).__flags__ & _DISALLOW_INSTANTIATION and is_constant_value(tuple(value))


def _wrap_uninstantiable_constant(tx, value, source):
    if source is not None:
        tx.output.guards.add(Guard("EQUALS_MATCH", source, value))
    return ConstantVariable(value, source)


def _is_stock_function(value) -> bool:
    return type(value) is types.FunctionType and value.__code__ in _STOCK_CODES


def _wrap_stock_function(tx, value, source):
    return NamedTupleMethodVariable(value, source)


def _wrap_factory(tx, value, source):
    return NamedTupleFactoryVariable(value, source)
