"""Code objects and signatures read from functions, as decorators read them
(`func.__code__.co_varnames[:func.__code__.co_argcount]`, `inspect.signature(func)`).

A code object is immutable: once its identity is pinned (the function's `__code__` is
guarded by identity where it is read) every `co_*` attribute is a constant. A signature
is computed from the function at trace time, under guards on everything `inspect`
reads of it (see `signature_of`)."""
from __future__ import annotations

import inspect
import types

from .._compat import PY312, PY314
from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .lists import ListVariable, TupleVariable, IteratorVariable


class CodeVariable(ObjectConstantVariable):
    """`f.__code__`: its `co_*` attributes are constants."""

    def describe(self):
        return f"code object {self.value.co_name!r}"

    def var_getattr(self, tx, name):
        if name == "__class__":
            return tx.wrap_constant_result(types.CodeType, "code.__class__")
        if not name.startswith("co_") or name in ("co_lines", "co_positions"):
            # replace() and the line-table iterators are methods; _co_code_adaptive changes
            # as the interpreter specialises the code
            unsupported("construct", f"attribute {name!r} of {self.describe()}")
        if name == "co_lnotab" and PY312:
            unsupported("construct", "code.co_lnotab (deprecated since 3.12: reading it warns)")
        value = self.real_attr(name)  # co_qualname, co_exceptiontable: 3.11+ (AttributeError before)
        if isinstance(value, tuple) and any(isinstance(c, types.CodeType) for c in value):
            unsupported("construct", f"{name} of {self.describe()} holds code objects")
        return tx.wrap_constant_result(value, f"code.{name}")


class SignatureVariable(ObjectConstantVariable):
    """`inspect.signature(f)` of a plain function: the real Signature, computed at trace
    time from what `signature_of` guards. `parameters` is a mapping of ParameterVariables;
    `bind` and the annotations are not traced."""

    def __init__(self, value, source=None, exact: bool = True):
        super().__init__(value, source)
        self.exact = exact  # False: made without the annotations (3.14), so not the real one

    def describe(self):
        return f"signature {self.value}" if self.exact else "signature"

    def is_python_constant(self):
        return self.exact

    def as_python_constant(self):
        if not self.exact:
            unsupported("construct", "a signature whose annotations were not kept (str(), ==) is not traced")
        return self.value

    def var_getattr(self, tx, name):
        if name == "parameters":
            return ParametersVariable(self.value.parameters)
        if name == "__class__":
            return tx.wrap_constant_result(inspect.Signature, "Signature.__class__")
        unsupported("construct", f"attribute {name!r} of {self.describe()}")


class ParameterVariable(ObjectConstantVariable):
    """One `inspect.Parameter` of a SignatureVariable: its name, kind and default (a
    constant, guarded with the function's defaults). Annotations are not guarded: not read."""

    def describe(self):
        return f"parameter {self.value.name!r}"

    def var_getattr(self, tx, name):
        if name in ("name", "kind", "default", "empty", "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD",
                    "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"):
            return tx.wrap_constant_result(getattr(self.value, name), f"Parameter.{name}")
        unsupported("construct", f"attribute {name!r} of {self.describe()} (annotations are not traced)")


class ParametersVariable(VariableTracker):
    """`Signature.parameters`: a read-only mapping (a mappingproxy) from names to
    ParameterVariables, in order."""

    __slots__ = ("params",)

    def __init__(self, params):
        super().__init__(None)
        self.params = params  # the real mappingproxy

    def python_type(self):
        return types.MappingProxyType

    def describe(self):
        return "signature parameters"

    def _names(self):
        return [ConstantVariable(n) for n in self.params]

    def iter_items(self, tx):
        return self._names()

    def truthy(self, tx):
        return bool(self.params)

    def getitem(self, tx, key):
        if not key.is_python_constant():
            unsupported("construct", f"indexing {self.describe()} with {key.describe()}")
        k = key.as_python_constant()
        if k not in self.params:
            unsupported("exceptions", f"KeyError: {k!r}")
        return ParameterVariable(self.params[k])

    def var_getattr(self, tx, name):
        return self.method_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            unsupported("call", f"{name}() of {self.describe()} with keywords")
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2:
            k = args[0].as_python_constant() if args[0].is_python_constant() else None
            if k in self.params:
                return ParameterVariable(self.params[k])
            return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__len__" and not args:
            return ConstantVariable(len(self.params))
        if name == "__contains__" and len(args) == 1 and args[0].is_python_constant():
            return ConstantVariable(args[0].as_python_constant() in self.params)
        if not args and name in ("keys", "__iter__"):
            return IteratorVariable(self._names()) if name == "__iter__" else ListVariable(self._names())
        if not args and name == "values":
            return ListVariable([ParameterVariable(p) for p in self.params.values()])
        if not args and name == "items":
            return ListVariable([TupleVariable([ConstantVariable(k), ParameterVariable(p)])
                                 for k, p in self.params.items()])
        unsupported("call", f"method {name!r} of {self.describe()}")


# What inspect.signature reads from a function's __dict__ besides the function itself.
_SIGNATURE_OVERRIDES = ("__signature__", "__wrapped__", "_partialmethod", "__partialmethod__")


def signature_of(tx, fn_var, bound: bool = False):
    """`inspect.signature(f)` (`bound`: of a method bound to an object, its first parameter
    dropped) for a plain Python function that has none of the attributes inspect looks for
    first (`__wrapped__`, `__signature__`, ...) and defaults that are constants; guarded
    on what the signature is made of: the code (names, kinds), the defaults (by identity,
    keyword-only ones also by value) and those attributes' absence."""
    fn = fn_var.fn
    base = fn_var.guard_source()
    for attr in _SIGNATURE_OVERRIDES:
        if attr in fn.__dict__:
            unsupported("call", f"inspect.signature of a function with {attr} (not traced)")
        tx.output.guards.add(Guard("NOT_IN_DICT", base, None, {"attr": attr}))
    exact = True
    if PY314 and fn.__annotate__ is not None:
        # inspect evaluates the annotations (PEP 649: the function's __annotate__ code run with
        # Format.VALUE): traced as that call, so its reads are guarded and anything else in it
        # breaks; the signature is then made without them (its model never shows them).
        fn_var.var_getattr(tx, "__annotate__").call_function(tx, [ConstantVariable(1)], {})
        fn, exact = _without_annotations(fn), False
    defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
    if not all(is_constant_value(v) for v in (*(defaults or ()), *(kwdefaults or {}).values())):
        unsupported("call", "inspect.signature of a function whose defaults are not constants")
    fn_var.var_getattr(tx, "__code__")  # pins the code: the parameters' names and kinds
    tx.output.guards.add(Guard("ID_MATCH", AttrSource(base, "__defaults__"), defaults))
    tx.output.guards.add(Guard("EQUALS_MATCH", AttrSource(base, "__kwdefaults__"), kwdefaults))
    sig = inspect.signature(fn, follow_wrapped=False)
    if bound:  # as inspect's _signature_bound_method
        params = tuple(sig.parameters.values())
        if not params or params[0].kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            unsupported("exceptions", "ValueError: invalid method signature")
        if params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
            sig = sig.replace(parameters=params[1:])
    return SignatureVariable(sig, exact=exact)


def _without_annotations(fn):
    """A copy of `fn` with no annotations: its signature's parameters, as inspect makes them,
    without evaluating anything."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy
