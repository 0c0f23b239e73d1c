"""Calls and function creation.

Stack before a call of n arguments (k of them keywords), per version
(https://docs.python.org/3.13/library/dis.html#opcode-CALL):
  3.10  CALL_FUNCTION n:       [f, args...]            CALL_FUNCTION_KW n: [f, args..., names]
        CALL n (was CALL_METHOD, after LOAD_ATTR (True, m)): [NULL, f, args...]
  3.11/3.12  CALL n:           [NULL|f, f|self, args...]  (KW_NAMES set the names before)
  3.13+ CALL n / CALL_KW n:    [f, NULL|self, args...] (CALL_KW: names tuple on top)
A non-NULL slot where the NULL would be is `self` (3.11/3.12: the slot below; 3.13+: above).
"""
from __future__ import annotations

from ..._compat import PY311, PY313
from ...exc import unsupported
from ...variables.base import NULL
from ...variables.builtins import BuiltinVariable
from ...variables.constant import ConstantVariable
from ...variables.dicts import DictVariable
from ...variables.exceptions import ExceptionVariable, exception_class
from ...variables.functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable
from ...variables.lists import IteratorVariable, TupleVariable
from ..operators import unary_op


def _split_kwargs(args: list, names) -> tuple[list, dict]:
    if not names:
        return args, {}
    n = len(names)
    return args[:-n], dict(zip(names, args[-n:]))


class CallOps:
    def call(self, fn, args: list, kwargs: dict):
        """`fn(*args, **kwargs)` by a call instruction of this frame."""
        cls = exception_class(fn)
        if cls is not None:  # an exception object (opcodes/exceptions.py raises and catches it)
            return self.made_here(cls, args, kwargs)
        if isinstance(fn, BuiltinVariable) and len(args) == 1 and not kwargs:
            arg = args[0]
            if fn.value is next and isinstance(arg, IteratorVariable):
                # A generator: an exception leaving its body is raised at this call
                step = getattr(arg, "next_from", None)
                item = arg.next_item() if step is None else step(self)
                if item is None:
                    self.throw(self.made_here(StopIteration), "StopIteration from next()")
                return item
            if fn.value in (str, repr) and isinstance(arg, ExceptionVariable):
                return ConstantVariable(arg.text(fn.value))
        if isinstance(fn, (UserFunctionVariable, NestedFunctionVariable, UserMethodVariable)):
            # Inlined directly: an exception its frames raise may be caught by this frame.
            self.direct_call = self.ip - 1
            try:
                return fn.call_function(self, args, kwargs)
            finally:
                self.direct_call = None
        return fn.call_function(self, args, kwargs)

    def KW_NAMES(self, inst):  # 3.11/3.12
        self.kw_names = inst.arg

    def _call_with_null_slot(self, nargs: int, names):
        args = self.popn(nargs)
        if PY313:
            self_or_null = self.pop()
            fn = self.pop()
            if self_or_null is not NULL:
                args = [self_or_null, *args]
        else:
            upper = self.pop()
            lower = self.pop()
            if lower is NULL:
                fn = upper
            else:
                fn, args = lower, [upper, *args]
        args, kwargs = _split_kwargs(args, names)
        self.push(self.call(fn, args, kwargs))

    def CALL(self, inst):
        names, self.kw_names = self.kw_names, None
        self._call_with_null_slot(inst.arg, names)

    def CALL_KW(self, inst):  # 3.13+
        names = self.pop().as_python_constant()
        self._call_with_null_slot(inst.arg, names)

    def CALL_FUNCTION(self, inst):  # 3.10
        args = self.popn(inst.arg)
        fn = self.pop()
        self.push(self.call(fn, args, {}))

    def CALL_FUNCTION_KW(self, inst):  # 3.10
        names = self.pop().as_python_constant()
        args, kwargs = _split_kwargs(self.popn(inst.arg), names)
        fn = self.pop()
        self.push(self.call(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        # 3.14 always has the kwargs slot (NULL without keywords); normalize gave it
        # 3.13's arg: 0 where the slot's NULL was pushed right before, else 1.
        kw = self.pop() if inst.arg & 1 else DictVariable({})
        if kw is NULL:
            kw = DictVariable({})
        star = self.pop()
        if PY313:  # 3.13, 3.14: [f, NULL, args, (kw)]
            null = self.pop()
            fn = self.pop()
        else:
            fn = self.pop()
            null = self.pop() if PY311 else NULL
        if null is not NULL:  # a non-NULL slot is self (never emitted for *args calls, kept for symmetry)
            unsupported("construct", "CALL_FUNCTION_EX with a bound self slot")
        if not isinstance(kw, DictVariable):
            unsupported("construct", f"** of {kw.describe()}")
        args = star.iter_items(self)
        kwargs = {}
        for k, v in kw.items.items():
            if not isinstance(k, str):
                unsupported("exceptions", "TypeError: keywords must be strings")
            kwargs[k] = v
        self.push(self.call(fn, args, kwargs))

    def CALL_INTRINSIC_1(self, inst):  # 3.12+
        name = getattr(inst.arg, "name", str(inst.arg))
        if name == "INTRINSIC_LIST_TO_TUPLE":
            self.push(TupleVariable(self.pop().items))
        elif name == "INTRINSIC_UNARY_POSITIVE":
            self.push(unary_op(self, "pos", self.pop()))
        elif name == "INTRINSIC_STOPITERATION_ERROR":
            unsupported("generator", "generator cleanup")
        else:
            unsupported("opcode", f"CALL_INTRINSIC_1 {name} is not supported")

    # --- function creation ----------------------------------------------------------
    def MAKE_FUNCTION(self, inst):
        # 3.10 pushes the qualified name; 3.11+ reads co_qualname
        qualname = self.pop().as_python_constant() if not PY311 else None
        code = self.pop().as_python_constant()
        flags = inst.arg if not PY313 else 0  # 3.13+: SET_FUNCTION_ATTRIBUTE follows
        closure = self.pop() if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None  # not needed to run; kept for a real one
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        name = qualname if qualname is not None else code.co_qualname
        fn = NestedFunctionVariable(code, self.f_globals, name, defaults, kwdefaults, closure)
        if annotations is not None:
            fn.set_annotations(0x04, annotations)
        self.push(fn)

    def SET_FUNCTION_ATTRIBUTE(self, inst):  # 3.13+: [value, func] → func
        # Annotations (0x04) and 3.14's lazy __annotate__ function (0x10, PEP 649) are
        # not needed to run the function: kept for the function made for real, if it escapes.
        fn = self.pop()
        value = self.pop()
        flag = int(inst.arg)
        if flag in (0x04, 0x10):
            fn.set_annotations(flag, value)
        elif flag == 0x08:
            fn.closure = value
        elif flag == 0x02:
            fn.kwdefaults_var = value
        elif flag == 0x01:
            fn.defaults_var = value
        self.push(fn)
