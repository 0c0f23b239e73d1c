"""Callables that are inlined into the trace: plain Python functions, lambdas and nested
defs (with closures and defaults), functools.partial objects, bound methods; and what
decorators read of functions (`__code__`, `__name__`, `__defaults__`, `__wrapped__`, ...)."""
from __future__ import annotations

import inspect
import types

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ObjectSource
from .base import BoundMethodVariable, VariableTracker  # noqa: F401 (BoundMethodVariable: imported from here too)
from .cells import RealCellVariable, frame_cells, outer_cell, passed_cell
from .code_objects import CodeVariable, signature_of
from .constant import ConstantVariable, fold
from .dicts import DictVariable
from .lists import TupleVariable
from .made_classes import made_tracker
from .purity import is_checkpoint, is_compiler_disabled, is_disabled_by_torch
from .torch_graph_break import breaks_here


def function_var(fn):
    """A function found on a class: its tracker where the trace made it (a method of a class
    statement's, closing over the frame's cells: class_statements.py), else the function."""
    made = made_tracker(fn)
    return made if made is not None else UserFunctionVariable(fn)


def bound_member(tx, member, obj, cls_var):
    """What reading class member `member` through `obj` gives, where it is a plain Python
    one: a function bound to `obj`, a staticmethod's function, a classmethod's function
    bound to `cls_var`, a property's getter called on `obj`; None for any other member."""
    if isinstance(member, types.FunctionType):
        return UserMethodVariable(function_var(member), obj)
    if isinstance(member, staticmethod):
        return function_var(member.__func__)
    if isinstance(member, classmethod):
        return UserMethodVariable(function_var(member.__func__), cls_var)
    if isinstance(member, property) and member.fget is not None:
        return function_var(member.fget).call_function(tx, [obj], {})
    return None


def _pairs_dict(pairs) -> dict:
    """MAKE_FUNCTION's annotations (name, value, name, value...) as the function's dict."""
    return dict(zip(pairs[::2], pairs[1::2]))


def make_function(code, fn_globals, qualname, defaults, kwdefaults, closure):
    """A function made by MAKE_FUNCTION during the trace, made again for real."""
    fn = types.FunctionType(code, fn_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    return fn


# logging's functions and Logger methods that emit a record (the others read or change the
# configuration: levels, handlers, filters).
_LOG_RECORD_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical",
                                 "fatal", "log", "_log", "handle", "callHandlers"})


def marked_constant(fn) -> bool:
    """`torch.compiler.assume_constant_result(fn)` (also spelled as the attribute it sets):
    the user declares the answer fixed for the process."""
    return getattr(fn, "_dynamo_marked_constant", False) is True


def constant_call(tx, fn, args, kwargs, what: str):
    """A call of a function marked constant, made now on constant arguments; None where an
    argument is not a constant (the function is then traced as any other)."""
    if not all(a.is_python_constant() for a in args) or not all(v.is_python_constant() for v in kwargs.values()):
        return None
    return fold(tx, fn, [a.as_python_constant() for a in args],
                {k: v.as_python_constant() for k, v in kwargs.items()}, what)


class BaseFunctionVariable(VariableTracker):
    """Something with Python bytecode that the translator inlines when called."""

    def get_code(self):
        raise NotImplementedError

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)


class UserFunctionVariable(BaseFunctionVariable):
    """A real Python function object reached from the frame (a global, an attribute...)."""

    __slots__ = ("fn", "by_code")

    def __init__(self, fn, source=None, by_code=False):
        super().__init__(source)
        self.fn = fn
        # Guarded by its code, globals, defaults and empty __dict__, not its identity (a
        # function made per call, builder.py): its cells are read through `source`.
        self.by_code = by_code

    def get_code(self):
        return self.fn.__code__

    def rebuild(self, rb) -> str:
        return self.source.expr(rb.ns) if self.source is not None else rb.ns.bind(self.fn, "fn")

    def get_globals(self):
        return self.fn.__globals__

    def get_name(self):
        return self.fn.__name__

    def closure_cells(self, tx):
        code = self.fn.__code__
        cells = self.fn.__closure__ or ()
        if self.by_code and tx is not None:
            return {name: passed_cell(tx, self.source, i, cell, name)
                    for i, (name, cell) in enumerate(zip(code.co_freevars, cells))}
        shared = frame_cells(tx.output) if tx is not None else {}
        return {name: shared.get(id(cell)) or outer_cell(tx, cell, name)
                for name, cell in zip(code.co_freevars, cells)}

    def guard_source(self):
        """Where guards read this function: its source, else the function object itself (a
        method found on its class, whose lookup pinned it by identity)."""
        return self.source if self.source is not None else ObjectSource(self.fn, f"function {self.fn.__qualname__!r}")

    def guard_code(self, tx):
        """The trace runs this function's code: pin it (`f.__code__` can be reassigned
        while `f` stays the same object)."""
        tx.output.guards.add(Guard("ID_MATCH", AttrSource(self.guard_source(), "__code__"), self.fn.__code__))

    def defaults(self, tx):
        """The defaults as the trace uses them, guarded as values read from the function
        (`f.__defaults__` can be reassigned)."""
        return list(self._wrap_defaults(tx, "__defaults__", tuple).items) if self.fn.__defaults__ else []

    def kwdefaults(self, tx):
        return dict(self._wrap_defaults(tx, "__kwdefaults__", dict).items) if self.fn.__kwdefaults__ else {}

    def _wrap_defaults(self, tx, attr, kind):
        value = getattr(self.fn, attr)
        if type(value) is not kind:
            unsupported("construct", f"{attr} of {self.describe()} is a {type(value).__name__}")
        return tx.wrap(value, AttrSource(self.guard_source(), attr))

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.fn

    def describe(self):
        return f"function {self.fn.__qualname__!r}"

    def call_function(self, tx, args, kwargs):
        if getattr(self.fn, "_minidynamo_allow_in_graph", False):  # minidynamo.allow_in_graph
            return tx.output.call("call_function", self.fn, args, kwargs, what=f"{self.fn.__qualname__}()")
        if getattr(self.fn, "_minidynamo_graph_break", False):
            unsupported("graph_break", "minidynamo.graph_break()")
        if breaks_here(self.fn):  # torch._dynamo.graph_break(): torch.compile breaks here too
            unsupported("graph_break", "torch._dynamo.graph_break()")
        if is_checkpoint(self.fn):
            return tx.capture_checkpoint(list(args), dict(kwargs))
        modelled = tx.function_mode_call(self.fn, args, kwargs)  # TorchFunctionMode.__enter__/__exit__
        if modelled is None:
            modelled = tx.library_call(self.fn, args, kwargs)  # torch.utils._pytree.tree_flatten, torch.vmap, ...
        if modelled is not None:
            return modelled
        if is_compiler_disabled(self.fn):  # runs eagerly (torch's wrapper switches the eval-frame hook off)
            which = "minidynamo.disable" if getattr(self.fn, "_minidynamo_disable", False) \
                else "torch's own torch._disable_dynamo (torch.compile breaks here too)" \
                if is_disabled_by_torch(self.fn) else "torch.compiler.disable"
            unsupported("call", f"{self.fn.__qualname__} is wrapped by {which}: it runs eagerly",
                        hint="the disabled function always runs eagerly; call it outside the optimized "
                             "function if the rest should be captured")
        from .contexts import GeneratorContextVariable, is_contextmanager_function  # a cycle: contexts imports this module
        if is_contextmanager_function(self.fn):  # @contextlib.contextmanager
            return GeneratorContextVariable(UserFunctionVariable(self.fn.__wrapped__), args, kwargs)
        if self.fn is inspect.signature:
            return _signature_call(tx, args, kwargs)
        if marked_constant(self.fn):
            answer = constant_call(tx, self.fn, args, kwargs, f"{self.fn.__qualname__}()")
            if answer is not None:
                return answer
        if getattr(self.fn, "__module__", None) == "logging":
            if self.fn.__name__ in _LOG_RECORD_METHODS:
                unsupported("side_effect", f"logging.{self.fn.__qualname__}() emits a log record",
                            hint="logging is output: log before or after the optimized call (for example "
                                 "what it returns)")
            unsupported("call", f"logging.{self.fn.__qualname__}() reads or changes logging's "
                                "configuration, which is not traced")
        return tx.inline_call(self, args, kwargs)

    def var_getattr(self, tx, name):
        """What a function holds, as a decorator reads it: the code (pinned by identity;
        its co_* attributes are then constants), name, qualname, module, doc, defaults,
        `__dict__` and its entries (`__wrapped__`, flags), each guarded as a value read from
        the function; an attribute it lacks raises AttributeError, its absence guarded."""
        fn = self.fn
        if name == "__class__":  # a function's class cannot be assigned
            return tx.wrap(type(fn), None)
        source = AttrSource(self.guard_source(), name)
        if name == "__code__":
            tx.output.guards.add(Guard("ID_MATCH", source, fn.__code__))
            return CodeVariable(fn.__code__, source)
        if name == "__annotations__" and getattr(fn, "__annotate__", None) is not None:
            # 3.14 (PEP 649): the first read runs the function's __annotate__ code
            unsupported("construct", f"the annotations of {self.describe()} (reading them runs code)")
        if name in _FUNCTION_VALUES and hasattr(fn, name) or (name in fn.__dict__ and name not in _FUNCTION_DATA):
            return tx.wrap(getattr(fn, name), source)
        if hasattr(types.FunctionType, name):  # __globals__, __closure__, methods
            return super().var_getattr(tx, name)
        tx.output.guards.add(Guard("HASATTR", self.guard_source(), False, {"attr": name}))
        unsupported("exceptions", f"AttributeError: 'function' object has no attribute {name!r}",
                    raised=AttributeError)


# Attributes of every function whose values the trace reads as values (the type's own data
# descriptors: an entry of the function's __dict__ cannot shadow them).
_FUNCTION_VALUES = ("__name__", "__qualname__", "__module__", "__doc__", "__defaults__", "__kwdefaults__",
                    "__dict__", "__type_params__", "__annotate__", "__annotations__")
_FUNCTION_DATA = tuple(k for k, v in vars(types.FunctionType).items() if hasattr(type(v), "__set__"))


def _signature_call(tx, args, kwargs):
    """inspect.signature(f) or (obj.method) of a plain Python function (code_objects.py)."""
    if len(args) != 1 or kwargs:
        unsupported("call", "inspect.signature with options is not traced")
    target = args[0]
    if isinstance(target, UserFunctionVariable):
        return signature_of(tx, target)
    if isinstance(target, UserMethodVariable) and isinstance(target.func, UserFunctionVariable):
        return signature_of(tx, target.func, bound=True)
    unsupported("call", f"inspect.signature of {target.describe()}")


class NestedFunctionVariable(BaseFunctionVariable):
    """A lambda or inner def created by MAKE_FUNCTION during the trace."""

    __slots__ = ("code", "globals", "name", "defaults_var", "kwdefaults_var", "closure", "annotated",
                 "annotations", "attrs", "dict_var")

    def __init__(self, code, fn_globals, name, defaults=None, kwdefaults=None, closure=None):
        super().__init__(None)
        self.code = code
        self.globals = fn_globals
        self.name = name
        self.defaults_var = defaults  # TupleVariable or None
        self.kwdefaults_var = kwdefaults  # DictVariable or None
        self.closure = closure  # TupleVariable of cell trackers, or None
        self.annotated = False  # made with annotations (not traced: reading them declines)
        # (flag, tracker): MAKE_FUNCTION's annotations (0x04: name, value pairs) or 3.14's
        # __annotate__ function (0x10), set on the function made for real (rebuild_fill)
        self.annotations = None
        # What the trace set on it (functools.wraps: __name__, __doc__, __wrapped__...): the
        # function's own attributes by name, the rest in its __dict__ (a DictVariable).
        self.attrs: dict = {}
        self.dict_var = None

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.globals

    def get_name(self):
        return self.name

    def closure_cells(self, tx):
        if self.closure is None:
            return {}
        return dict(zip(self.code.co_freevars, self.closure.items))

    def defaults(self, tx):
        return list(self.defaults_var.items) if self.defaults_var is not None else []

    def kwdefaults(self, tx):
        return dict(self.kwdefaults_var.items) if self.kwdefaults_var is not None else {}

    def describe(self):
        return f"function {self.name!r}"

    # Attributes of a function object that change how it runs, or that it cannot hold.
    _FIXED = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__",
                        "__builtins__", "__dict__", "__class__", "__call__", "__get__"})
    _OWN = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__annotations__",
                      "__type_params__", "__annotate__"})

    def _dict(self):
        if self.dict_var is None:
            self.dict_var = DictVariable({})
        return self.dict_var

    def store_attr(self, tx, name, value):
        """`fn.name = value` (functools.wraps, a decorator's marks) on a function made in
        the trace: kept on the tracker, set on the function made for real if it escapes."""
        if name in self._FIXED:
            unsupported("side_effect", f"setting {name} of {self.describe()}")
        if name in ("__name__", "__qualname__") and not (value.is_python_constant()
                                                        and isinstance(value.as_python_constant(), str)):
            unsupported("exceptions", f"TypeError: {name} must be set to a string object", raised=TypeError)
        if name in self._OWN:
            self.attrs[name] = value
        else:
            self._dict().items[name] = value

    def delete_attr(self, tx, name):
        if self.dict_var is not None and name in self.dict_var.items:
            del self.dict_var.items[name]
            return
        unsupported("side_effect", f"deleting {name} of {self.describe()}")

    def rebuild_new(self, rb) -> str:
        cells = []
        for cell in (self.closure.items if self.closure is not None else ()):
            # A fixed cell from outside is that cell; a cell of a frame in the trace is made
            # once for real (CellVariable) or passed on, as a cell of a closure passed in is
            # read from this call's function (its source).
            cells.append(rb.ns.bind(cell.cell, "cell") if isinstance(cell, RealCellVariable) else rb.expr(cell))
        closure = f"({''.join(c + ', ' for c in cells)})" if cells else "None"
        defaults = rb.expr(self.defaults_var) if self.defaults_var is not None else "None"
        kwdefaults = rb.expr(self.kwdefaults_var) if self.kwdefaults_var is not None else "None"
        return (f"{rb.ns.bind(make_function, 'make_function')}({rb.ns.bind(self.code, 'code')}, "
                f"{rb.ns.bind(self.globals, 'G')}, {self.name!r}, {defaults}, {kwdefaults}, {closure})")

    def set_annotations(self, flag: int, value) -> None:
        self.annotated = True
        self.annotations = (flag, value)

    def rebuild_fill(self, rb, name: str) -> list:
        """The attributes the trace set, on the function made for real (`name`), after its
        annotations, as MAKE_FUNCTION gave them."""
        setattr_ = rb.ns.bind(setattr, "setattr")
        lines = []
        if self.annotations is not None:
            flag, value = self.annotations
            if flag == 0x10:  # 3.14: the lazily evaluated __annotate__ function
                lines.append(f"{name}.__annotate__ = {rb.expr(value)}")
            else:  # a tuple of name, value pairs
                lines.append(f"{name}.__annotations__ = {rb.ns.bind(_pairs_dict, 'pairs_dict')}({rb.expr(value)})")
        lines += [f"{setattr_}({name}, {attr!r}, {rb.expr(value)})" for attr, value in self.attrs.items()]
        if self.dict_var is not None and self.dict_var.items:
            lines.append(f"{name}.__dict__.update({rb.expr(self.dict_var)})")
        return lines

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if self.dict_var is not None and name in self.dict_var.items:
            return self.dict_var.items[name]
        if name == "__dict__":
            return self._dict()
        if name == "__annotations__":
            if self.annotated:
                unsupported("construct", f"the annotations of {self.describe()} (made in the trace)")
            self.attrs[name] = DictVariable({})  # a new, empty dict, kept (as CPython caches it)
            return self.attrs[name]
        if name == "__type_params__" and not self.annotated:
            return TupleVariable([])
        if name == "__annotate__" and not self.annotated and name in vars(types.FunctionType):  # 3.14
            return ConstantVariable(None)
        if name == "__name__":
            return ConstantVariable(self.code.co_name)
        if name == "__qualname__":  # what MAKE_FUNCTION was given
            return ConstantVariable(self.name)
        if name == "__module__":
            return ConstantVariable(self.globals.get("__name__"))
        if name == "__code__":  # a constant of the code that made it
            return CodeVariable(self.code)
        if name == "__defaults__":
            return self.defaults_var if self.defaults_var is not None else ConstantVariable(None)
        if name == "__kwdefaults__":
            return self.kwdefaults_var if self.kwdefaults_var is not None else ConstantVariable(None)
        if name == "__doc__":  # what MAKE_FUNCTION takes from the code (a rule that varies by version)
            cells = tuple(types.CellType() for _ in self.code.co_freevars) or None
            return ConstantVariable(types.FunctionType(self.code, {}, None, None, cells).__doc__)
        if name == "__class__":
            return tx.wrap(types.FunctionType, None)
        if not hasattr(types.FunctionType, name):  # made here: its __dict__ is empty
            unsupported("exceptions", f"AttributeError: 'function' object has no attribute {name!r}",
                        raised=AttributeError)
        return super().var_getattr(tx, name)


class PartialVariable(VariableTracker):
    """functools.partial: stored args are prepended, keywords merged (call's win). The
    keywords are one dict tracker, what `p.keywords` gives: a write to it changes later
    calls, as CPython's partial reads its dict at each call (a partial passed in holds
    the real dict's tracker, whose writes go back to it)."""

    __slots__ = ("func", "args", "keywords", "real")

    def __init__(self, func, args, keywords, source=None, real=None):
        super().__init__(source)
        self.func = func
        self.args = list(args)
        self.keywords = keywords if isinstance(keywords, DictVariable) else DictVariable(dict(keywords))
        self.real = real  # the partial passed in (its __dict__ read), None for one made here

    def python_type(self):
        import functools
        return functools.partial

    def describe(self):
        return f"functools.partial of {self.func.describe()}"

    def call_function(self, tx, args, kwargs):
        return self.func.call_function(tx, self.args + list(args), {**self.keywords.items, **kwargs})

    def var_getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return self.keywords
        return _partial_attribute(tx, self, name)


def _partial_attribute(tx, p, name):
    """Any other attribute of a partial: an entry of its `__dict__` (one passed in: the
    entry's presence guarded, the value guarded as read), else the class's constant
    (`__module__`, `__doc__`), else the AttributeError CPython raises (`__name__`: a
    partial has none, so hasattr() is False and getattr() gives its default)."""
    import functools
    inst = p.real.__dict__ if p.real is not None else {}
    if name == "__class__":
        return tx.wrap(functools.partial, None)
    if name == "__dict__":
        if p.source is None:  # made here: what it holds is not modelled
            unsupported("construct", f"the __dict__ of {p.describe()}")
        return tx.wrap(inst, AttrSource(p.source, "__dict__"))
    if p.source is not None:
        present = name in inst
        tx.output.guards.add(Guard("HASATTR", p.source, None, {"attr": name}) if present
                             else Guard("NOT_IN_DICT", p.source, None, {"attr": name}))
        if present:
            return tx.wrap(inst[name], AttrSource(p.source, name))
    # the class's own members (not type's: `functools.partial.__name__` is the class's name)
    on_class = next((vars(k)[name] for k in functools.partial.__mro__ if name in vars(k)), _MISSING)
    if on_class is _MISSING:
        unsupported("exceptions", f"AttributeError: 'functools.partial' object has no attribute {name!r}",
                    raised=AttributeError)
    if isinstance(on_class, (str, type(None))):  # __module__, __doc__: the C type's, fixed
        return ConstantVariable(on_class)
    unsupported("construct", f"attribute {name!r} of {p.describe()}")


_MISSING = object()


class UserMethodVariable(VariableTracker):
    """A Python function bound to an object: `obj.method`."""

    __slots__ = ("func", "obj")

    def __init__(self, func, obj, source=None):
        super().__init__(source)
        self.func = func
        self.obj = obj

    def python_type(self):
        return types.MethodType

    def describe(self):
        return f"method {self.func.describe()}"

    def rebuild(self, rb) -> str:
        if self.source is not None:
            return self.source.expr(rb.ns)
        return f"{rb.ns.bind(types.MethodType, 'MethodType')}({rb.expr(self.func)}, {rb.expr(self.obj)})"

    def call_function(self, tx, args, kwargs):
        return self.func.call_function(tx, [self.obj, *args], kwargs)

    def var_getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return self.func
        if name == "__class__":
            return tx.wrap(types.MethodType, None)
        return self.func.var_getattr(tx, name)  # a method reads the rest from its function
