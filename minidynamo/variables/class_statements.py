"""Class statements in the traced code: `class A(Base): ...`.

LOAD_BUILD_CLASS pushes `__build_class__` (BuildClassVariable); calling it does what
CPython's does for metaclass `type`: the body function is inlined with a namespace of its
own (a DictVariable its LOAD_NAME / STORE_NAME use: opcodes/class_bodies.py), then the class
is `type(name, bases, namespace)`.

The class is made for real at trace time, so the trace uses it as any class (instances,
methods, class attributes, isinstance, super()). Nothing user-written runs there: the
metaclass is `type`, every base's `__init_subclass__` is object's, the namespace holds only
constants, classes and functions (no `__set_name__`). A function the body made is made for
real from the same code (a stand-in: its cells empty), registered with its tracker
(made_classes.py), so a method read from the class is that tracker, its closure the frame's.

Eager makes a new class on every call. Where the class (or an instance, a method) outlives
the trace, the entry makes it again, once per call, by `type(name, bases, namespace)` from
the namespace's trackers: its functions made with this call's cells.
"""
from __future__ import annotations

import builtins
import types
import weakref

from ..exc import Raised, Unsupported, unsupported
from .base import VariableTracker
from .cells import CellVariable
from .constant import is_constant_value
from .dicts import DictVariable
from .functions import NestedFunctionVariable, _pairs_dict, make_function
from .made_classes import register
from .objects import ClassVariable

# What 3.14 leaves in the namespace of a class body with annotations (3.10-3.13 decline at
# SETUP_ANNOTATIONS): evaluated lazily, a read would run the annotation code.
_ANNOTATION_NAMES = ("__annotations__", "__annotate__", "__annotate_func__", "__conditional_annotations__")


class BuildClassVariable(VariableTracker):
    """`builtins.__build_class__`, as LOAD_BUILD_CLASS pushes it."""

    def python_type(self):
        return types.BuiltinFunctionType

    def describe(self):
        return "__build_class__"

    def rebuild(self, rb) -> str:
        return rb.ns.bind(builtins.__build_class__, "build_class")

    def call_function(self, tx, args, kwargs):
        return build_class(tx, args, kwargs)


class ClassStatementVariable(ClassVariable):
    """A class made by a class statement in the trace: `value` the class made at trace time;
    `namespace` the trackers the body left (name → tracker, in order), `bases` the bases'
    trackers, `class_cell` the `__class__` cell its methods close over (or None)."""

    __slots__ = ("name", "bases", "namespace", "class_cell")

    def __init__(self, value, name, bases, namespace, class_cell):
        super().__init__(value, None)
        self.name = name
        self.bases = bases
        self.namespace = namespace
        self.class_cell = class_cell

    def describe(self):
        return f"class {self.value.__qualname__!r} defined in the function"

    def store_attr(self, tx, name, value):
        unsupported("side_effect", f"setting attribute {name!r} of {self.describe()}", no_break=NEW_CLASS_PER_CALL)

    def delete_attr(self, tx, name):
        unsupported("side_effect", f"deleting attribute {name!r} of {self.describe()}", no_break=NEW_CLASS_PER_CALL)

    def rebuild(self, rb) -> str:
        return rb.built_once(self)

    def rebuild_new(self, rb) -> str:
        entries = []
        for key, var in self.namespace.items():
            # 3.14's __classdict__ cell: type() fills it; only annotation code reads it (declined)
            value = f"{rb.ns.bind(types.CellType, 'CellType')}()" if key == "__classdictcell__" else rb.expr(var)
            entries.append(f"{key!r}: {value}")
        bases = "".join(rb.expr(b) + ", " for b in self.bases)
        return f"{rb.ns.bind(type, 'type')}({self.name!r}, ({bases}), {{{', '.join(entries)}}})"

    def fills_cell(self, cell) -> bool:
        """type() fills the `__class__` cell itself (the namespace's `__classcell__`)."""
        return cell is self.class_cell


# A declined class statement runs the whole call eagerly: the code after a break there
# would get a new class on every call, which its guards pin (traced again per call).
NEW_CLASS_PER_CALL = "a graph break there would hand the code after it a new class on every call"


def build_class(tx, args, kwargs):
    """`__build_class__(body, name, *bases, **keywords)` of a class statement."""
    try:
        return _build_class(tx, args, kwargs)
    except Raised:
        raise  # an exception of the traced code's (a try around the statement may catch it)
    except Unsupported as e:
        if e.no_break is None and e.raised is None:
            e.no_break = NEW_CLASS_PER_CALL
        raise


def _build_class(tx, args, kwargs):
    if kwargs:
        unsupported("construct", f"a class statement with keywords ({', '.join(kwargs)}): a metaclass "
                                 "or __init_subclass__ arguments are not traced")
    if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable) or not args[1].is_python_constant():
        unsupported("construct", "__build_class__ called other than by a class statement")
    body, name, bases = args[0], args[1].as_python_constant(), args[2:]
    base_classes = tuple(_base_class(b) for b in bases)
    namespace = DictVariable({})
    cell = tx.inline_call(body, [], {}, namespace=namespace)
    ns = dict(namespace.items)
    if any(key in ns for key in _ANNOTATION_NAMES):
        unsupported("construct", "annotations in a class body are not traced")
    if "__slots__" in ns:
        unsupported("construct", "a class statement whose body defines __slots__ is not traced")
    class_cell = ns.get("__classcell__")
    returned_none = cell.is_python_constant() and cell.as_python_constant() is None
    if not (cell is class_cell if isinstance(cell, CellVariable) else returned_none and class_cell is None):
        unsupported("construct", f"the class body of {name!r} returned {cell.describe()}")
    real = _Reals(tx)
    values = {key: real.value(key, var) for key, var in ns.items()}
    try:
        cls = type(name, base_classes, values)
    except Exception as e:  # noqa: BLE001 - bad bases (an MRO conflict, a final class): eager raises it
        unsupported("exceptions", f"{type(e).__name__}: {e}", raised=type(e))
    var = ClassStatementVariable(cls, name, list(bases), ns, class_cell)
    if class_cell is not None:
        class_cell.store(tx, var)  # what type() does with __classcell__
    register(cls, var)
    return var


def _base_class(var):
    """A base of a class statement as a class whose subclassing runs nothing user-written."""
    base = var.as_python_constant() if var.is_python_constant() else None
    if not isinstance(base, type):
        unsupported("construct", f"a class statement with base {var.describe()}: only classes are traced "
                                 "(__mro_entries__ is not)")
    if type(base) is not type:
        unsupported("construct", f"a class statement whose base {base.__qualname__} has metaclass "
                                 f"{type(base).__qualname__} (only type is traced)")
    hook = next((k for k in base.__mro__ if "__init_subclass__" in vars(k)), object)
    if hook is not object:
        unsupported("construct", f"a class statement whose base {base.__qualname__} has an __init_subclass__ "
                                 f"({hook.__qualname__}'s), which would run")
    return base


# The stand-ins a trace made, per trace: id(function tracker) → (tracker, function).
_stand_ins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Reals:
    """The namespace's values as real objects, for the class made at trace time."""

    def __init__(self, tx):
        self.tx = tx
        self.cells: dict = {}  # id(cell tracker) → the real cell the stand-ins hold

    def value(self, key, var):
        if key in ("__classcell__", "__classdictcell__"):
            return self.cell(var)
        if isinstance(var, NestedFunctionVariable):
            return self.function(var)
        if var.is_python_constant():
            value = var.as_python_constant()
            if is_constant_value(value) or isinstance(value, (type, types.ModuleType, types.FunctionType,
                                                              types.BuiltinFunctionType)):
                if hasattr(type(value), "__set_name__"):
                    unsupported("construct", f"class attribute {key!r} has a __set_name__ that would run")
                return value
        unsupported("construct", f"class attribute {key!r} is {var.describe()}: a class statement's "
                                 "body is traced where it holds constants, classes and functions")

    def cell(self, var):
        found = self.cells.get(id(var))
        if found is None:
            found = self.cells[id(var)] = types.CellType()
        return found

    def function(self, fn):
        made = _stand_ins.setdefault(self.tx.output, {})
        hit = made.get(id(fn))
        if hit is not None:
            return hit[1]
        if fn.attrs or fn.dict_var is not None and fn.dict_var.items:
            unsupported("construct", f"a method with attributes set ({fn.describe()})")
        defaults = _constant(fn.defaults_var, fn, "defaults")
        kwdefaults = _constant(fn.kwdefaults_var, fn, "keyword defaults")
        closure = tuple(self.cell(c) for c in fn.closure.items) if fn.closure is not None else None
        real = make_function(fn.code, fn.globals, fn.name, defaults, kwdefaults, closure)
        if fn.annotations is not None:
            flag, value = fn.annotations
            if flag == 0x10 or not value.is_python_constant():  # 3.14's __annotate__: reading it runs code
                unsupported("construct", f"annotations of {fn.describe()} in a class statement are not traced")
            real.__annotations__ = _pairs_dict(value.as_python_constant())
        made[id(fn)] = (fn, real)
        register(real, fn)
        return real


def _constant(var, fn, what):
    if var is None:
        return None
    if not var.is_python_constant():
        unsupported("construct", f"{fn.describe()} in a class statement has {what} that are not constants")
    return var.as_python_constant()
