"""Objects of user classes made inside the trace, `super()`, and the dunder methods of
user objects in operators.

An object made by calling a plain Python class is a NewObjectVariable: its `__init__` is
inlined with the new tracker as `self`, attribute writes land in the tracker (nothing
outside can see the object yet, so they are not side effects), methods, properties and
class attributes are looked up through the class as CPython does (`InstanceAttributes`,
which objects of dict subclasses share: dict_subclasses.py). If the object escapes
(returned, or live at a graph break) it is rebuilt after the graph: `object.__new__(cls)`,
then its instance dictionary filled in order. Classes whose objects this would not
reproduce exactly (metaclasses that act on instances, `__new__`, `__slots__`, `__del__`,
builtin bases) decline.
"""
from __future__ import annotations

import abc
import types
from dataclasses import dataclass

import torch

from .._compat import PY311
from ..exc import builtin_raises, unsupported
from ..guards import Guard
from ..sources import AttrSource, ObjectSource, Source
from .attribute_protocols import call_getattribute, class_attribute, own_getattribute
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .functions import function_var, UserMethodVariable
from .made_classes import class_expr, made_tracker
from .objects import ClassVariable, UserObjectVariable

# Class attributes that make an object something `object.__new__` + `__dict__` cannot
# rebuild, or whose lifetime has effects of its own.
_UNMODELLED = ("__new__", "__slots__", "__del__")
# What a metaclass may define and leave its classes' instances as `type` makes them: hooks
# run when a class is made or a class attribute is set, and plain class metadata.
_METACLASS_HARMLESS = frozenset((
    "__new__", "__init__", "__prepare__", "__init_subclass__", "__setattr__", "__delattr__",
    "__module__", "__qualname__", "__doc__", "__firstlineno__", "__static_attributes__",
    "__annotations__", "__annotate__", "__annotate_func__", "__annotations_cache__", "__orig_bases__",
    "__parameters__", "__type_params__", "__dict__", "__weakref__"))
_HEAPTYPE, _IMMUTABLETYPE = 1 << 9, 1 << 8  # Py_TPFLAGS_*


def is_python_class(klass) -> bool:
    """A class made by a class statement (or `type()`): allocated, and mutable. C types are
    static, or (made from a spec: deque and defaultdict on 3.12+) immutable."""
    flags = klass.__flags__
    return bool(flags & _HEAPTYPE) and not flags & _IMMUTABLETYPE and klass.__module__ != "builtins"


def metaclass_problem(meta) -> str | None:
    """Why classes of metaclass `meta` are not modelled (None: it only acts on classes)."""
    for klass in meta.__mro__:
        # ABCMeta's isinstance/issubclass hooks answer by the class, as issubclass does;
        # its only effect on making an instance (abstract methods left) is checked there.
        if klass in (type, object, abc.ABCMeta):
            continue
        if not is_python_class(klass):
            return f"its metaclass {meta.__qualname__} is not modelled"
        extra = sorted(set(vars(klass)) - _METACLASS_HARMLESS)
        if extra:
            return f"its metaclass {meta.__qualname__} defines {extra[0]}"
    return None


def why_not_modelled(cls, bases=()) -> str | None:
    """Why objects of `cls` cannot be made in the trace (None: they can). `bases`: the C
    classes another model makes such objects of (dict subclasses: dict_subclasses.py)."""
    if not isinstance(cls, type):
        return f"{cls!r} is not a class"
    meta = metaclass_problem(type(cls))
    if meta is not None:
        return meta
    if issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException)):
        return "torch modules, tensors and exceptions are made by their own models"
    for base in cls.__mro__[1:-1]:
        if not is_python_class(base) and base not in bases:
            return f"its base {base.__qualname__} is a builtin type"
    python_classes = [klass for klass in cls.__mro__[:-1] if is_python_class(klass)]
    for klass in python_classes:
        for name in _UNMODELLED:
            if name in vars(klass) and not (name == "__slots__" and not _named_slots(klass)):
                return f"{klass.__qualname__} defines {name}"
    if all("__slots__" in vars(klass) for klass in python_classes):
        return "its instances have no __dict__ (every class in its MRO defines __slots__)"
    hook = own_getattribute(cls)
    if hook is not None and not isinstance(hook, types.FunctionType):
        return f"its __getattribute__ is {hook!r}, which is not traced"
    return None


def _named_slots(klass) -> list:
    """The slots `klass` gives its instances, beyond __dict__/__weakref__ (typing.Generic
    and abc-style bases define `__slots__ = ()`: no slot of their own)."""
    slots = vars(klass)["__slots__"]
    slots = (slots,) if isinstance(slots, str) else tuple(slots)
    return [s for s in slots if s not in ("__dict__", "__weakref__")]


def is_user_class(cls) -> bool:
    return isinstance(cls, type) and cls.__module__ not in ("builtins",) \
        and not cls.__module__.startswith(("torch", "collections", "itertools", "functools", "typing")) \
        and (type(cls) is type or metaclass_problem(type(cls)) is None) \
        and not issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException))


def _class_var(cls) -> ClassVariable:
    """The class as a tracker whose attribute reads are guarded by identity (a class the
    trace made: its own tracker)."""
    made = made_tracker(cls)
    return made if made is not None else ClassVariable(cls, ObjectSource(cls, cls.__qualname__))


def defining_class(cls, name):
    """The class of `cls`'s MRO whose own namespace holds `name`, or None."""
    return next((klass for klass in cls.__mro__ if name in vars(klass)), None)


def python_method(cls, name):
    """`cls`'s `name` where a Python class of its MRO defines it as a function, else None
    (a builtin base's method, or nothing)."""
    owner = defining_class(cls, name)
    if owner is None or not is_python_class(owner):
        return None
    fn = vars(owner)[name]
    return fn if isinstance(fn, types.FunctionType) else None


def class_defines(cls, name) -> bool:
    """Whether a class of `cls`'s MRO holds `name` (what its instances can find there)."""
    return any(name in vars(klass) for klass in cls.__mro__)


@dataclass(frozen=True, eq=False)
class ClassDefinesSource(Source):
    """`class_defines(cls, name)`, asked again by the entry."""

    cls: type
    attr: str

    def expr(self, ns):
        return f"{ns.bind(class_defines, 'class_defines')}({ns.bind(self.cls, 'cls')}, {self.attr!r})"

    def name(self, naming=None):
        return f"{self.cls.__qualname__}.{self.attr} (defined on the class)"

    def __eq__(self, other):
        return isinstance(other, ClassDefinesSource) and other.cls is self.cls and other.attr == self.attr

    def __hash__(self):
        return hash((id(self.cls), self.attr))


def _guard_attr(tx, cls, name, value):
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(ObjectSource(cls, cls.__qualname__), name), value))


class InstanceDictVariable(DictVariable):
    """The `__dict__` of an object made in the trace: its attributes, by name. Rebuilt as
    that object's own `__dict__` (identity kept)."""

    __slots__ = ("owner",)

    def __init__(self, owner):
        super().__init__({})
        self.owner = owner

    def rebuild_new(self, rb) -> str:
        return dict_expr(rb, self.owner.cls, rb.expr(self.owner))


def dict_expr(rb, cls, obj: str) -> str:
    """`obj.__dict__` in rebuilt code; past the class's own `__getattribute__` if it has one."""
    if own_getattribute(cls) is None:
        return f"{obj}.__dict__"
    return f"{rb.ns.bind(object.__getattribute__, 'object_getattribute')}({obj}, '__dict__')"


class InstanceAttributes(VariableTracker):
    """An object of a user class the trace models whole: `cls`, and `instance_dict`, a dict
    tracker of its `__dict__`. Attribute reads and writes, method calls and truth go as
    CPython's do: data descriptors of the class, then the instance dictionary, then the
    class (methods bound, properties called, class attributes guarded by identity).
    Subclasses hold the two slots; one whose class has a builtin base answers for that
    base's attributes (`builtin_attr`)."""

    __slots__ = ()

    @property
    def attrs(self) -> dict:
        """name → tracker, in assignment order (the __dict__'s own items)."""
        return self.instance_dict.items

    def python_type(self):
        return self.cls

    def builtin_attr(self, tx, name, owner):
        """`name` as C class `owner` (a builtin base of the class) defines it."""
        return self._descriptor(tx, name, vars(owner)[name])

    def base_attr(self, tx, klass, name):
        """What `super().name` finds on `klass` where this model answers for it instead of
        the class's code (a module made in the trace: nn.Module's own protocol), or None."""
        return None

    def is_module(self) -> bool:
        return False

    # --- attributes --------------------------------------------------------------
    def var_getattr(self, tx, name):
        hook = own_getattribute(self.cls)
        if hook is not None:  # the class's own __getattribute__ answers (attribute_protocols.py)
            return call_getattribute(tx, self, name, hook)
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """object.__getattribute__: data descriptors of the class, the instance dictionary,
        then the class."""
        if name == "__class__":
            return _class_var(self.cls)
        if name == "__dict__":
            return self.instance_dict
        owner = defining_class(self.cls, name)
        if owner is not None and owner is not object and not is_python_class(owner):
            # dict's methods (the only data descriptor there, __dict__, was answered above)
            return self.attrs[name] if name in self.attrs else self.builtin_attr(tx, name, owner)
        static = class_attribute(self.cls, name)
        if static is not None and hasattr(type(static), "__set__"):  # a data descriptor wins
            return self._descriptor(tx, name, static)
        if name in self.attrs:
            return self.attrs[name]
        if owner is None:  # (a class attribute may be None)
            getattr_hook = class_attribute(self.cls, "__getattr__")
            if isinstance(getattr_hook, types.FunctionType):
                _guard_attr(tx, self.cls, "__getattr__", getattr_hook)
                return function_var(getattr_hook).call_function(tx, [self, ConstantVariable(name)], {})
            # hasattr()/getattr() with a default go on: the class must not gain it later
            for missing in (name,) if getattr_hook is not None else (name, "__getattr__"):
                tx.output.guards.add(Guard("EQUALS_MATCH", ClassDefinesSource(self.cls, missing), False))
            unsupported("exceptions", f"AttributeError: {self.cls.__qualname__!r} object has no attribute {name!r}",
                        raised=AttributeError)
        if isinstance(static, types.FunctionType):
            _guard_attr(tx, self.cls, name, static)
            return UserMethodVariable(function_var(static), self)
        if isinstance(static, (staticmethod, classmethod)) or not hasattr(type(static), "__get__"):
            return _class_var(self.cls).var_getattr(tx, name)
        return self._descriptor(tx, name, static)

    def _descriptor(self, tx, name, static):
        if isinstance(static, property) and static.fget is not None:
            _guard_attr(tx, self.cls, name, static)
            return function_var(static.fget).call_function(tx, [self], {})
        unsupported("construct", f"descriptor {name!r} of {self.cls.__qualname__} is not traced")

    def store_attr(self, tx, name, value):
        setter = class_attribute(self.cls, "__setattr__")
        if setter is not object.__setattr__:  # the class's own __setattr__ decides
            if not isinstance(setter, types.FunctionType):
                unsupported("construct", f"{self.cls.__qualname__}.__setattr__ is not traced")
            _guard_attr(tx, self.cls, "__setattr__", setter)
            # STORE_ATTR lets what it raises through (a frozen dataclass's error): a try may catch it
            tx.call_directly(function_var(setter), [self, ConstantVariable(name), value], {})
            return
        self.set_plain(tx, name, value)

    def set_plain(self, tx, name, value):
        """object.__setattr__: a data descriptor's setter, else the instance dictionary."""
        static = class_attribute(self.cls, name)
        if static is not None and hasattr(type(static), "__set__"):
            if isinstance(static, property) and static.fset is not None:
                _guard_attr(tx, self.cls, name, static)
                function_var(static.fset).call_function(tx, [self, value], {})
                return
            unsupported("construct", f"setting descriptor {name!r} of {self.cls.__qualname__}")
        self.instance_dict.check_mutable("attribute assignment", tx)
        self.attrs[name] = value

    def delete_attr(self, tx, name):
        if class_attribute(self.cls, "__delattr__") is not object.__delattr__:
            unsupported("construct", f"{self.cls.__qualname__}.__delattr__ is not traced")
        if name not in self.attrs:
            if _is_data_descriptor(class_attribute(self.cls, name)):
                unsupported("exceptions", f"AttributeError: {name!r}", raised=AttributeError)
            # object's generic delattr on a missing instance attribute: no name/obj set
            text = name if not PY311 else f"'{self.cls.__name__[:100]}' object has no attribute '{name}'"
            builtin_raises(AttributeError, [ConstantVariable(text)], f"AttributeError: {text}")
        self.instance_dict.check_mutable("attribute deletion", tx)
        del self.attrs[name]

    # --- calls and truth ---------------------------------------------------------
    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs):
        if class_attribute(self.cls, "__call__") is None:
            unsupported("exceptions", f"TypeError: {self.cls.__qualname__!r} object is not callable")
        return self.call_method(tx, "__call__", args, kwargs)

    def truthy(self, tx):
        for name in ("__bool__", "__len__"):
            if class_attribute(self.cls, name) is not None:
                result = self.call_method(tx, name, [], {})
                return result.truthy(tx) if name == "__bool__" else result.as_python_constant() != 0
        return True

    def fill_attrs(self, rb, name) -> list:
        """The statement filling the rebuilt object `name`'s __dict__."""
        if not self.attrs:
            return []
        body = ", ".join(f"{k!r}: {rb.expr(v)}" for k, v in self.attrs.items())
        return [f"{dict_expr(rb, self.cls, name)}.update({{{body}}})"]


class NewObjectVariable(InstanceAttributes):
    """An object of a plain user class made by the trace: its instance attributes."""

    __slots__ = ("cls", "instance_dict")

    def __init__(self, cls):
        super().__init__(None)
        self.cls = cls
        self.instance_dict = InstanceDictVariable(self)

    def describe(self):
        return f"{self.cls.__qualname__} object made in the trace"

    def __repr__(self):
        return f"NewObjectVariable({self.cls.__qualname__}, {list(self.attrs)})"

    # --- rebuilt after the graph (rebuild.py) -------------------------------------
    def rebuild_new(self, rb) -> str:
        return f"{rb.ns.bind(object.__new__, 'object_new')}({class_expr(rb, self.cls)})"

    def rebuild_fill(self, rb, name) -> list:
        return self.fill_attrs(rb, name)


def init_object(tx, cls, obj, args, kwargs) -> None:
    """`cls.__init__(obj, *args, **kwargs)` inlined, where a Python class defines it."""
    init = class_attribute(cls, "__init__")
    if not isinstance(init, types.FunctionType):
        unsupported("call", f"{cls.__qualname__}.__init__ is not a Python function")
    _guard_attr(tx, cls, "__init__", init)
    result = function_var(init).call_function(tx, [obj, *args], kwargs)
    if not (result.is_python_constant() and result.as_python_constant() is None):
        unsupported("exceptions", "TypeError: __init__() should return None")


def _construct(tx, cls, args, kwargs):
    why = why_not_modelled(cls)
    if why is not None:
        unsupported("call", f"creating a {cls.__qualname__} object while tracing: {why}")
    if getattr(cls, "__abstractmethods__", None):
        unsupported("exceptions", f"TypeError: can't instantiate abstract class {cls.__qualname__}")
    obj = NewObjectVariable(cls)
    if class_attribute(cls, "__init__") is object.__init__:
        if args or kwargs:
            unsupported("exceptions", f"TypeError: {cls.__qualname__}() takes no arguments")
        return obj
    init_object(tx, cls, obj, args, kwargs)
    return obj



# --- dunder methods of user objects in operators (interpreter/operators.py) -------------
_COMPARE_DUNDERS = {"<": ("__lt__", "__gt__"), "<=": ("__le__", "__ge__"), "==": ("__eq__", "__eq__"),
                    "!=": ("__ne__", "__ne__"), ">": ("__gt__", "__lt__"), ">=": ("__ge__", "__le__")}


def user_class(v):
    """The class of a user object (made in the trace or passed in), else None."""
    if isinstance(v, InstanceAttributes):
        return v.cls
    if isinstance(v, UserObjectVariable) and not isinstance(v.value, torch.nn.Module):
        return type(v.value)
    return None


def _python_dunder(v, name) -> bool:
    cls = user_class(v)
    return cls is not None and isinstance(class_attribute(cls, name), types.FunctionType)


def _is_not_implemented(v) -> bool:
    return v.is_python_constant() and v.as_python_constant() is NotImplemented


def _try(tx, v, name, other):
    """v.name(other) if v's class defines it in Python, else None; NotImplemented → None."""
    if not _python_dunder(v, name):
        return None
    result = v.call_method(tx, name, [other], {})
    return None if _is_not_implemented(result) else result


def _reflected_first(a, b, reflected) -> bool:
    """CPython tries the right operand's reflected method first when its type is a proper
    subclass of the left's that overrides it."""
    ta, tb = user_class(a) or a.python_type(), user_class(b)
    return tb is not None and tb is not ta and issubclass(tb, ta) and _python_dunder(b, reflected) and \
        class_attribute(tb, reflected) is not class_attribute(ta, reflected)


def user_binary(tx, name: str, a, b, inplace: bool):
    """`a <op> b` when either is a user object: its dunder methods as CPython calls them;
    None when neither is a user object."""
    if user_class(a) is None and user_class(b) is None:
        return None
    base = name.rstrip("_")
    op, rop, iop = f"__{base}__", f"__r{base}__", f"__i{base}__"
    if inplace and (result := _try(tx, a, iop, b)) is not None:
        return result
    order = [(b, rop, a), (a, op, b)] if _reflected_first(a, b, rop) else [(a, op, b), (b, rop, a)]
    for left, dunder, right in order:
        if dunder == rop and user_class(a) is user_class(b) and user_class(a) is not None:
            continue  # the reflected method is not tried for operands of the same type
        result = _try(tx, left, dunder, right)
        if result is not None:
            return result
    unsupported("exceptions", f"TypeError: unsupported operand type(s) for {base}: "
                              f"{a.python_type().__name__!r} and {b.python_type().__name__!r}")


def user_compare(tx, op: str, a, b):
    """`a <op> b` for user objects, by their rich comparison methods (None: neither is one)."""
    if user_class(a) is None and user_class(b) is None:
        return None
    forward, reflected = _COMPARE_DUNDERS[op]
    order = [(b, reflected, a), (a, forward, b)] if _reflected_first(a, b, reflected) else \
        [(a, forward, b), (b, reflected, a)]
    for left, dunder, right in order:
        result = _try(tx, left, dunder, right)
        if result is None and op == "!=" and user_class(left) is not None and not _python_dunder(left, "__ne__"):
            eq = _try(tx, left, "__eq__", right)  # object.__ne__ inverts __eq__
            if eq is not None:
                return ConstantVariable(not eq.truthy(tx))
        if result is not None:
            return result
    if op in ("==", "!=") and isinstance(a, DictVariable) and isinstance(b, DictVariable):
        equal = a.equals(tx, b)  # objects of dict subclasses without an __eq__ of their own
        return ConstantVariable(equal if op == "==" else not equal)
    if op in ("==", "!="):
        same = tx.is_same(a, b)
        if same is None:
            unsupported("construct", f"comparing {a.describe()} {op} {b.describe()}")
        return ConstantVariable(same if op == "==" else not same)
    unsupported("exceptions", f"TypeError: {op!r} not supported between instances of "
                              f"{a.python_type().__name__!r} and {b.python_type().__name__!r}")


# --- with over a user object -------------------------------------------------------------
class UserExitVariable(UserMethodVariable):
    """The bound `__exit__` a with statement over a user object keeps on the stack (a graph
    break looks for it: breaks.py)."""

    def exit_raising(self, tx, exc):
        """`__exit__(type(exc), exc, tb)` for `exc` leaving the block (opcodes/exceptions.py);
        the traceback is an opaque value: anything but passing it around declines."""
        return tx.call_directly(self, [ConstantVariable(exc.exc_type), exc, TracebackVariable()], {})


class TracebackVariable(VariableTracker):
    """The traceback an `__exit__` is given: not modeled, so reading it declines."""

    def python_type(self):
        return types.TracebackType

    def describe(self):
        return "a traceback"


def _is_data_descriptor(attr) -> bool:
    return attr is not None and (hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__"))


def enter_user_context(tx, cm):
    """BEFORE_WITH over a user object whose class defines `__enter__`/`__exit__` in Python:
    (the bound __exit__, the result of __enter__), or None for other values."""
    cls = user_class(cm)
    if cls is None:
        return None
    enter, exit_ = class_attribute(cls, "__enter__"), class_attribute(cls, "__exit__")
    if not (isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType)):
        return None
    exit_method = cm.var_getattr(tx, "__exit__")  # guarded like any method read
    return UserExitVariable(exit_method.func, cm), cm.call_method(tx, "__enter__", [], {})

