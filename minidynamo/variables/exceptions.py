"""Exception objects made in the trace (`ValueError("bad")`, `raise KeyError`), as the
translator raises and catches them (interpreter/unwind.py).

An ExceptionVariable is its class and its args (trackers), plus what CPython sets when it
is raised: `__cause__`, `__context__`, `__suppress_context__`. Only classes whose
construction and text are CPython's own are modeled: the builtin exception classes, and
user subclasses of them that add no methods or attributes (`class ShapeError(ValueError):
pass`). Such a class's `str(e)` / `repr(e)` and attributes like `StopIteration.value` or
`OSError.errno` come from a real instance made from constant args at trace time (C code
only, no code of the user's runs). An exception object never leaves the trace: returning
it or holding it across a graph break declines (nothing rebuilds it).
"""
from __future__ import annotations

import builtins
import types

from ..exc import attribute_error, builtin_raises, unsupported
from ..guards import Guard
from ..sources import AttrSource, ObjectSource
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import bound_member, function_var
from .lists import TupleVariable

# What a class body leaves in the class's __dict__ without adding behaviour.
_PLAIN_CLASS_KEYS = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__",
                     "__static_attributes__", "__annotations__", "__orig_bases__", "__parameters__",
                     "__annotate__", "__annotate_func__", "__annotations_cache__"}
# A builtin exception class whose own entries are only these behaves as BaseException does
# (C's SimpleExtendsException): its args are stored as given, its text is str(args).
_SIMPLE_BUILTIN_KEYS = {"__new__", "__init__", "__doc__"}
_CONSTANT_TYPES = (int, float, str, bool, bytes, type(None))


def why_not_modeled(cls) -> str | None:
    """Why objects of exception class `cls` are not modeled (None: they are)."""
    if type(cls) is not type:
        return f"{cls.__qualname__} has a metaclass"
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            continue
        extra = {k for k, v in vars(base).items() if k not in _PLAIN_CLASS_KEYS and not _plain_member(k, v)}
        if extra == {"__init__"} and isinstance(vars(base)["__init__"], types.FunctionType):
            continue  # inlined on the object being made (make_exception)
        if extra:
            return (f"the exception class {base.__qualname__} defines {', '.join(sorted(extra))} (only "
                    "builtin exception classes and subclasses that add nothing are modeled)")
    return None


def _plain_member(name: str, value) -> bool:
    """A class member that adds no behaviour CPython's exception machinery uses: a method,
    static or class method, property or constant under a name that is no dunder (read
    through ExceptionVariable.var_getattr, `class_member`)."""
    if name.startswith("__") and name.endswith("__"):
        return False
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return all(f is None or isinstance(f, types.FunctionType) for f in (value.fget, value.fset, value.fdel))
    return isinstance(value, (types.FunctionType, *_CONSTANT_TYPES))


def _simple(cls) -> bool:
    """Args stored as given, text from args: no C attributes of its own."""
    return all(base.__module__ != "builtins" or base is object or set(vars(base)) <= _SIMPLE_BUILTIN_KEYS
               or base is BaseException for base in cls.__mro__)


def make_exception(tx, cls, args: list, kwargs: dict, made_at=None) -> "ExceptionVariable":
    """The tracker of `cls(*args, **kwargs)`; declines what is not modeled."""
    why = why_not_modeled(cls)
    if why is not None:
        unsupported("exceptions", f"making a {cls.__qualname__}: {why}")
    init = next((vars(b)["__init__"] for b in cls.__mro__ if "__init__" in vars(b)), None)
    if isinstance(init, types.FunctionType):
        return _made_by_python_init(tx, cls, init, args, kwargs, made_at)
    if kwargs:
        unsupported("exceptions", f"making a {cls.__qualname__} with keyword arguments")
    real = None
    if all(a.is_python_constant() for a in args):
        try:
            real = cls(*[a.as_python_constant() for a in args])  # C code only (why_not_modeled)
        except Exception as e:  # noqa: BLE001 - the eager run raises it
            unsupported("exceptions", f"{type(e).__name__} making a {cls.__qualname__}: {e}",
                        raised=attribute_error(e))
        if type(real) is not cls:  # OSError(errno, ...) picks a subclass
            unsupported("exceptions", f"{cls.__qualname__}(...) made a {type(real).__qualname__}")
    elif not _simple(cls) and not issubclass(cls, StopIteration):  # its `value` is args[0]: modeled
        unsupported("exceptions", f"a {cls.__qualname__} made from values known only at run time")
    return ExceptionVariable(cls, list(args), real, made_at)


def _made_by_python_init(tx, cls, init, args: list, kwargs: dict, made_at) -> "ExceptionVariable":
    """`cls(*args, **kwargs)` for a class whose `__init__` is Python: BaseException.__new__
    keeps the positional args as `args`, then that `__init__` runs on the object (its
    attribute writes kept on the tracker). Its text is not modeled (no instance is made)."""
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(ObjectSource(cls, cls.__qualname__), "__init__"), init))
    exc = ExceptionVariable(cls, list(args), None, made_at)
    result = function_var(init).call_function(tx, [exc, *args], kwargs)
    if not (result.is_python_constant() and result.as_python_constant() is None):
        unsupported("exceptions", "TypeError: __init__() should return None")
    return exc


class ExceptionVariable(VariableTracker):
    """An exception object made in the trace (see the module docstring)."""

    __slots__ = ("exc_type", "args", "real", "made_at", "cause", "context", "suppress_context", "attrs")

    def __init__(self, exc_type, args, real=None, made_at=None):
        super().__init__(None)
        self.exc_type = exc_type
        self.args = args
        self.real = real  # an equal instance made from constant args, for its text and C attributes
        self.made_at = made_at  # (translator, instruction index, step) of the call that made it
        self.cause = None
        self.context = None
        self.suppress_context = False
        self.attrs: dict = {}  # set by a Python `__init__` of its class: name → tracker

    def store_attr(self, tx, name, value):
        if hasattr(BaseException, name) or name in ("__notes__", "__dict__"):
            unsupported("exceptions", f"setting {name!r} on a {self.describe()}")
        self.attrs[name] = value

    def python_type(self):
        return self.exc_type

    def describe(self):
        return f"{self.exc_type.__name__} exception made in the trace"

    def __repr__(self):
        return f"ExceptionVariable({self.exc_type.__name__}, {self.args!r})"

    def text(self, conversion) -> str:
        """str(e) / repr(e): CPython's, from the args (constants only)."""
        if self.real is None and not issubclass(self.exc_type, _OWN_INIT) and all(
                a.is_python_constant() for a in self.args):
            # A class whose Python __init__ set the args (super().__init__(msg)): its text is
            # its builtin base's of them; __new__ (C) stores them without running that __init__.
            self.real = self.exc_type.__new__(self.exc_type, *[a.as_python_constant() for a in self.args])
        if self.real is None:
            unsupported("exceptions", f"{conversion.__name__}() of a {self.describe()} whose args are "
                                      "known only at run time")
        return conversion(self.real)

    def real_for_format(self):
        """The equal instance format() and the f-string conversions read (constant args only)."""
        self.text(str)
        return self.real

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "__class__":
            return tx.wrap(self.exc_type, None)
        if name in ("__cause__", "__context__"):
            value = self.cause if name == "__cause__" else self.context
            return ConstantVariable(None) if value is None else value
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "value" and issubclass(self.exc_type, StopIteration):
            return self.args[0] if self.args else ConstantVariable(None)
        if self.real is not None and _c_attribute(self.exc_type, name):
            value = getattr(self.real, name)
            if isinstance(value, _CONSTANT_TYPES):
                return ConstantVariable(value)
        member = self._class_member(tx, name)
        if member is not None:
            return member
        if not hasattr(self.exc_type, name):
            unsupported("exceptions", f"AttributeError: {self.exc_type.__name__!r} object has no "
                                      f"attribute {name!r}", raised=AttributeError)
        unsupported("exceptions", f"attribute {name!r} of a {self.describe()} is not modeled")


    def _class_member(self, tx, name):
        """A member its Python class defines (`_plain_member`), pinned by identity: a method
        bound to the exception, a static or class method, a property's getter run on it, a
        constant. None where no class of the user's defines `name`."""
        owner = next((b for b in self.exc_type.__mro__ if b.__module__ != "builtins" and name in vars(b)), None)
        if owner is None or not _plain_member(name, vars(owner)[name]):
            return None
        value = vars(owner)[name]
        read = AttrSource(ObjectSource(self.exc_type, self.exc_type.__qualname__), name)
        if isinstance(value, classmethod):  # a new bound method on every read: its function
            tx.output.guards.add(Guard("ID_MATCH", AttrSource(read, "__func__"), value.__func__))
        else:
            tx.output.guards.add(Guard("ID_MATCH", read, getattr(self.exc_type, name)))
        if isinstance(value, property) and value.fget is None:
            unsupported("exceptions", f"AttributeError: property {name!r} has no getter", raised=AttributeError)
        bound = bound_member(tx, value, self, tx.wrap(self.exc_type, None))
        return bound if bound is not None else ConstantVariable(value)


class _BaseExceptionInit(VariableTracker):
    """A simple builtin exception class's `__init__` reached by `super().__init__(...)` from
    a Python `__init__`: BaseException's, which sets `args` to the positional arguments."""

    __slots__ = ("exc",)

    def __init__(self, exc):
        super().__init__(None)
        self.exc = exc

    def call_function(self, tx, args, kwargs):
        if kwargs:
            message = f"{self.exc.exc_type.__name__}() takes no keyword arguments"
            builtin_raises(TypeError, [ConstantVariable(message)], f"TypeError: {message}")
        self.exc.args = list(args)
        self.exc.real = None  # its text follows the new args
        return ConstantVariable(None)


# Builtin exception classes whose __init__ is not BaseException's (it sets fields of its
# own, or takes keywords): the others' store the positional args and nothing else.
_OWN_INIT = tuple(c for c in (OSError, UnicodeEncodeError, UnicodeDecodeError, UnicodeTranslateError, ImportError,
                              SyntaxError, SystemExit, AttributeError, NameError,
                              getattr(builtins, "BaseExceptionGroup", None)) if c is not None)


def exception_init(exc: ExceptionVariable, klass) -> VariableTracker:
    """`super().__init__` of exception `exc` found on builtin class `klass`."""
    if issubclass(klass, _OWN_INIT):
        unsupported("exceptions", f"super().__init__ of {klass.__qualname__}, which sets attributes of its own "
                                  "(only BaseException's args are modeled)")
    return _BaseExceptionInit(exc)


def _c_attribute(cls, name: str) -> bool:
    """`name` is a data attribute a builtin exception class defines (OSError.errno)."""
    return any(base.__module__ == "builtins" and name in vars(base) and not callable(vars(base)[name])
               for base in cls.__mro__) and not name.startswith("__")


def exception_class(v):
    """The exception class a tracker stands for (`except ValueError`), else None."""
    if not v.is_python_constant():
        return None
    value = v.as_python_constant()
    return value if isinstance(value, type) and issubclass(value, BaseException) else None


def matches(exc: ExceptionVariable, spec) -> bool:
    """`except spec:` catches `exc` (CHECK_EXC_MATCH / 3.10's JUMP_IF_NOT_EXC_MATCH)."""
    if isinstance(spec, TupleVariable):  # nested tuples are accepted too
        return any([matches(exc, item) for item in spec.items])  # every item checked, as CPython does
    cls = exception_class(spec)
    if cls is None:
        unsupported("exceptions", f"TypeError: catching {spec.describe()}, which is not an exception class")
    return issubclass(exc.exc_type, cls)
