"""VariableTracker: the symbolic value of one Python object during a trace.

Queries (`python_type`, `as_python_constant`, `is_python_constant`) and operations
(`var_getattr`, `call_function`, `call_method`, `unpack_sequence`, `iter_items`) —
anything a subclass does not implement declines through Unsupported.
"""
from __future__ import annotations

import keyword

from ..exc import unsupported


class VariableTracker:
    __slots__ = ("source",)

    def __init__(self, source=None):
        self.source = source

    # --- queries -----------------------------------------------------------------
    def python_type(self) -> type:
        unsupported("construct", f"the type of {self.describe()} is not known while tracing")

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self):
        unsupported("construct", f"{self.describe()} is not a Python constant")

    def describe(self) -> str:
        return type(self).__name__.replace("Variable", "").lower() or "value"

    def truthy(self, tx) -> bool:
        """The value of `bool(self)`, when it can be decided without data."""
        if self.is_python_constant():
            return bool(self.as_python_constant())
        unsupported("data_dependent", f"cannot decide the truth value of {self.describe()}")

    def as_fx_arg(self):
        """This value as an fx node argument (a node for tensors, a plain value otherwise)."""
        unsupported("torch_op", f"{self.describe()} cannot be passed to a torch operation")

    def as_fake(self):
        """This value with fake tensors in place of tensors, to run an op at trace time."""
        unsupported("torch_op", f"{self.describe()} cannot be passed to a torch operation")

    # --- operations --------------------------------------------------------------
    def var_getattr(self, tx, name: str) -> "VariableTracker":
        unsupported("construct", f"attribute {name!r} of {self.describe()}")

    def method_getattr(self, tx, name: str) -> "VariableTracker":
        """`obj.name` for a tracker that implements its type's methods in `call_method`
        (lists, dicts, sets): a bound method, or the AttributeError Python would raise."""
        t = self.python_type()
        if not hasattr(t, name):
            unsupported("exceptions", f"AttributeError: {t.__name__!r} object has no attribute {name!r}",
                        raised=AttributeError)
        if not callable(getattr(t, name)):
            unsupported("construct", f"attribute {name!r} of {self.describe()}")
        return BoundMethodVariable(self, name)

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        unsupported("call", f"calling {self.describe()}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        unsupported("call", f"method {name!r} of {self.describe()}")

    def iter_items(self, tx) -> list:
        """The items iterating over this value yields, as VariableTrackers."""
        it = tx.user_iterator(self)  # an object of a user class: its __iter__
        if it is not None:
            return tx.drain(it)
        if self.is_python_constant():
            t = type(self.as_python_constant())
            if not hasattr(t, "__iter__") and not hasattr(t, "__getitem__"):  # iter() raises, as in eager
                unsupported("exceptions", f"TypeError: {t.__name__!r} object is not iterable", raised=TypeError)
        unsupported("construct", f"iterating over {self.describe()}")

    def unpack_sequence(self, tx) -> list:
        return self.iter_items(tx)

    # --- after the graph ---------------------------------------------------------
    # An object made in the trace that must stay one object however often it is named
    # (containers, functions, cells, user objects): `rebuild_new(rb)` is the expression
    # making it, `rebuild_fill(rb, name)` the statements filling it once bound to `name`
    # (what it holds may refer back to it). Rebuilder.built_once makes it once.
    rebuild_new = None
    # An object from outside the trace that the trace changed (side_effects.py):
    # `writeback(rb, target, temp)` gives (its final contents, the statement putting them
    # into `target`) where the write-back of a list, a dict or an object's attributes does
    # not fit (a deque, a cell); `replaces(source, var)` says whether that write-back makes
    # `source` name another object than `var`. None: the ordinary write-back.
    writeback = None
    replaces = None

    def rebuild_fill(self, rb, name: str) -> list:
        return []

    def fills_cell(self, cell) -> bool:
        """Whether making this object for real fills closure cell `cell` (a class statement's
        `__class__` cell, which type() fills)."""
        return False

    def rebuild(self, rb) -> str:
        """The expression that gives this value for real after the graph (rebuild.py's
        Rebuilder asks every tracker through this one method). By default an object from
        outside is read back from its source (the same object) and one made in the trace is
        built once; a tracker with neither cannot outlive the trace."""
        if self.source is not None:
            return self.source.expr(rb.ns)
        if self.rebuild_new is not None:
            return rb.built_once(self)
        unsupported("construct", f"{self.describe()}, which exists only inside the trace, would have to "
                                 "outlive it")

    def __repr__(self):
        return f"{type(self).__name__}()"


class RealValueVariable(VariableTracker):
    """A tracker standing for one real object (`value`) the trace does not change: its type
    is the object's; subclasses say what can be done with it."""

    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def rebuild_as_itself(self, rb) -> str:
        """`rebuild` for a fixed object (a module, class, builtin, torch function, C callable)
        reached without a source: the object itself, bound into the generated code."""
        if self.source is not None or self.rebuild_new is not None:
            return VariableTracker.rebuild(self, rb)
        return rb.ns.bind(self.value, "c")


class ObjectConstantVariable(RealValueVariable):
    """A fixed Python object the trace uses as a value — a module, a class, a builtin, a
    torch function: it is its own constant; subclasses say what can be done with it."""

    __slots__ = ()

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.value

    def real_attr(self, name: str):
        """`getattr(value, name)` of the real object (a read of a module, class or constant:
        pure); an AttributeError declines as the one eager raises."""
        try:
            return getattr(self.value, name)
        except AttributeError as e:
            unsupported("exceptions", f"AttributeError: {e}", raised=AttributeError)


class NullVariable(VariableTracker):
    """The NULL that CPython's call protocol pushes beside a callable."""

    def __repr__(self):
        return "NULL"


NULL = NullVariable()


class BoundMethodVariable(VariableTracker):
    """`obj.name` of a tracked object whose methods it implements itself (`x.sum`,
    `lst.append`, `"{}".format`): calling it is `obj.call_method(name, ...)`."""

    __slots__ = ("obj", "name")

    def __init__(self, obj, name):
        super().__init__(None)
        self.obj = obj
        self.name = name

    def describe(self):
        return f"method {self.name!r} of {self.obj.describe()}"

    def rebuild(self, rb) -> str:  # x.item, lst.append: looked up again on the object
        if self.source is not None:
            return self.source.expr(rb.ns)
        if self.name.isidentifier() and not keyword.iskeyword(self.name):
            return f"{rb.expr(self.obj)}.{self.name}"
        return f"{rb.ns.bind(getattr, 'getattr')}({rb.expr(self.obj)}, {self.name!r})"

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)
