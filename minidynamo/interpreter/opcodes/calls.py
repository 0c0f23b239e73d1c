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

from dataclasses import dataclass

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
from .at_break import AtBreak, Exit, Rendered, Rule


@dataclass
class CallOperands:
    """A call instruction's operands, read off the value stack (`call_operands`)."""
    fn: object
    args: object  # list; CALL_FUNCTION_EX: the *args tracker
    kwargs: object  # dict; CALL_FUNCTION_EX: the **kwargs tracker, or None
    used: int  # stack slots the call pops
    self_slot: object = NULL  # CALL_FUNCTION_EX's slot for self (NULL as emitted)


def call_operands(stack: list, inst, kw_names) -> CallOperands:
    """The operands of the call `inst` about to run, read off `stack` without popping (the
    layouts above); `kw_names`: 3.11/3.12's KW_NAMES for a CALL. The call opcodes run
    with them, and a graph break at a call renders them."""
    op, n = inst.opname, inst.arg
    if op == "CALL_FUNCTION_EX":
        has_kw = bool(inst.arg & 1)
        kwargs = stack[-1] if has_kw else None
        if kwargs is NULL:  # 3.14: the slot is always there (NULL without keywords)
            kwargs = None
        star = stack[-1 - has_kw]
        if PY313:  # 3.13, 3.14: [f, NULL, args, (kw)]
            fn, self_slot, used = stack[-3 - has_kw], stack[-2 - has_kw], 3 + has_kw
        elif PY311:  # [NULL, f, args, (kw)]
            fn, self_slot, used = stack[-2 - has_kw], stack[-3 - has_kw], 3 + has_kw
        else:
            fn, self_slot, used = stack[-2 - has_kw], NULL, 2 + has_kw
        return CallOperands(fn, star, kwargs, used, self_slot)
    names = None
    if op == "CALL_KW":  # 3.13+
        names = stack[-1].as_python_constant()
        items, used = stack[-(n + 3):-1], n + 3
    elif op == "CALL_FUNCTION_KW":  # 3.10
        names = stack[-1].as_python_constant()
        items, used = [NULL, *stack[-(n + 2):-1]], n + 2
    elif op == "CALL_FUNCTION":  # 3.10
        items, used = [NULL, *stack[-(n + 1):]], n + 1
    else:  # CALL
        names = kw_names
        items, used = stack[-(n + 2):], n + 2
    first, second, args = items[0], items[1], list(items[2:])
    if PY313 and op in ("CALL", "CALL_KW"):
        fn = first
        if second is not NULL:
            args = [second, *args]
    elif first is NULL:
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs = {}
    if names:
        k = len(names)
        args, kwargs = args[:-k], dict(zip(names, args[-k:]))
    return CallOperands(fn, args, kwargs, used)


class CallOps:
    def call(self, fn, args: list, kwargs: dict):
        """`fn(*args, **kwargs)` by a call instruction of this frame."""
        cls = exception_class(fn)
        if cls is not None:  # an exception object (opcodes/exceptions.py raises and catches it)
            return self.made_here(cls, args, kwargs)
        if isinstance(fn, BuiltinVariable) and fn.value is next and len(args) in (1, 2) and not kwargs \
                and isinstance(args[0], IteratorVariable):
            # A generator: an exception leaving its body is raised at this call
            step = getattr(args[0], "next_from", None)
            item = args[0].next_item() if step is None else step(self)
            if item is None and len(args) == 2:
                return args[1]
            if item is None:
                self.throw(self.made_here(StopIteration), "StopIteration from next()")
            return item
        if isinstance(fn, BuiltinVariable) and len(args) == 1 and not kwargs:
            arg = args[0]
            if fn.value in (str, repr) and isinstance(arg, ExceptionVariable):
                return ConstantVariable(arg.text(fn.value))
        if isinstance(fn, (UserFunctionVariable, NestedFunctionVariable, UserMethodVariable)):
            result = self.call_directly(fn, args, kwargs)  # its raises may be caught here
            if getattr(result, "dropped_by_loop", None) is not None and result.made_at is None:
                get_code = getattr(fn.func if isinstance(fn, UserMethodVariable) else fn, "get_code", None)
                if get_code is not None and result.frame.code is get_code():
                    result.made_at = (self, self.ip - 1)  # a generator function's call: a new generator
            return result
        return fn.call_function(self, args, kwargs)

    def KW_NAMES(self, inst):  # 3.11/3.12
        self.kw_names = inst.arg

    def _call_decoded(self, inst, names=None):
        ops = call_operands(self.stack, inst, names)
        self.popn(ops.used)
        self.push(self.call(ops.fn, ops.args, ops.kwargs))

    def CALL(self, inst):
        names, self.kw_names = self.kw_names, None
        self._call_decoded(inst, names)

    def CALL_KW(self, inst):  # 3.13+
        self._call_decoded(inst)

    def CALL_FUNCTION(self, inst):  # 3.10
        self._call_decoded(inst)

    def CALL_FUNCTION_KW(self, inst):  # 3.10
        self._call_decoded(inst)

    def CALL_FUNCTION_EX(self, inst):
        # 3.14 always has the kwargs slot (NULL without keywords); normalize gave it
        # 3.13's arg: 0 where the slot's NULL was pushed right before, else 1.
        ops = call_operands(self.stack, inst, None)
        self.popn(ops.used)
        kw = ops.kwargs if ops.kwargs is not None else DictVariable({})
        if ops.self_slot is not NULL:  # never emitted for *args calls, kept for symmetry
            unsupported("construct", "CALL_FUNCTION_EX with a bound self slot")
        if not isinstance(kw, DictVariable):
            unsupported("construct", f"** of {kw.describe()}")
        args = ops.args.iter_items(self)
        kwargs = {}
        for k, v in kw.items.items():
            if not isinstance(k, str):
                unsupported("exceptions", "TypeError: keywords must be strings")
            kwargs[k] = v
        self.push(self.call(ops.fn, args, kwargs))

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


def _call_at_break(b: AtBreak) -> Rendered:
    """The call as Python: `callee(args..., name=value...)`, `callee(*args, **kwargs)`."""
    ops = call_operands(b.stack, b.inst, b.tx.kw_names)
    star = b.inst.opname == "CALL_FUNCTION_EX"
    b.result.untraced = b.untraced([] if star else [*ops.args, *ops.kwargs.values()], ops.fn)
    callee = b.callee(ops.fn)
    if star:
        parts = [f"*{b.expr(ops.args)}"] + ([f"**{b.expr(ops.kwargs)}"] if ops.kwargs is not None else [])
    else:
        parts = [b.expr(a) for a in ops.args] + [f"{k}={b.expr(v)}" for k, v in ops.kwargs.items()]
    if isinstance(callee, tuple):  # a method: its function optimized, self first
        callee, parts = callee[0], [callee[1], *parts]
    return Rendered(f"{callee}({', '.join(parts)})", True, [Exit(None, b.next, b.stack[:-ops.used] + [b.result])])


AT_BREAK = {op: Rule(_call_at_break)
            for op in ("CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX")}
