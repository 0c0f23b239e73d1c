"""Which exceptions a handler may catch, read from its instructions without running them:
each `except` clause's classes (a name, a dotted name, a tuple of them), a bare `except`
(catches everything) or a `finally` (catches nothing: it re-raises). Used to tell whether
an error an aten op raises from its tensors' values (data_checks.py) would be caught where
eager raises it. Unknown forms (a class in a local, a call) may catch. Layer: interpreter
(imports nothing of the package)."""
from __future__ import annotations

import builtins
import inspect
import types

# The classes an aten op's value checks raise: an index out of range, a class past
# num_classes, a matrix that is not positive-definite (torch's own RuntimeError subclasses).
_VALUE_ERRORS = (RuntimeError, IndexError, ValueError)
_NOT_FROM_VALUES = (NotImplementedError, RecursionError)
_UNKNOWN = object()
_MATCHES = ("CHECK_EXC_MATCH", "JUMP_IF_NOT_EXC_MATCH")
# What only an except clause runs: a class match (an except* one too) or its end.
_EXCEPT_ONLY = (*_MATCHES, "CHECK_EG_MATCH", "POP_EXCEPT")


def may_catch_value_error(insts: list, target: int, f_globals: dict) -> bool:
    """Whether the handler starting at instruction `target` may catch what a value check
    of an aten op raises."""
    index = target
    for _ in range(64):  # one step per except clause
        found = _clause(insts, index, f_globals)
        if found is _UNKNOWN or found == "bare":
            return True
        if found == "finally":
            return False
        classes, next_clause = found
        if classes is _UNKNOWN or any(_catches(c) for c in classes):
            return True
        if next_clause is None:
            return True
        index = next_clause
    return True


def _clause(insts, index, f_globals):
    """(classes, index of the next clause) of the except clause at `index`; "bare",
    "finally", or _UNKNOWN."""
    stack: list = []
    for i in range(index, min(len(insts), index + 32)):
        inst = insts[i]
        op = inst.opname
        if op in ("PUSH_EXC_INFO", "COPY", "NOP"):
            continue
        if op == "RERAISE":
            return "finally" if not stack else _UNKNOWN
        if op == "POP_EXCEPT" or (op == "POP_TOP" and not stack):
            return "bare"
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            name = inst.arg[1] if isinstance(inst.arg, tuple) else inst.arg
            stack.append(_global(f_globals, name))
        elif op == "LOAD_ATTR" and stack:
            stack.append(_attribute(stack.pop(), inst.arg[1] if isinstance(inst.arg, tuple) else inst.arg))
        elif op == "BUILD_TUPLE" and len(stack) >= inst.arg:
            items = stack[len(stack) - inst.arg:]
            del stack[len(stack) - inst.arg:]
            stack.append(tuple(items))
        elif op in _MATCHES and len(stack) == 1:
            spec = stack[0]
            classes = spec if isinstance(spec, tuple) else (spec,)
            if op == "JUMP_IF_NOT_EXC_MATCH":  # 3.10: jumps to the next clause
                return classes, inst.target
            after = insts[i + 1] if i + 1 < len(insts) else None
            nxt = after.target if after is not None and after.opname == "POP_JUMP_IF_FALSE" else None
            return classes, nxt
        else:  # a finally's body, or an except clause's class made otherwise (`except self.Error`)
            return _finally_or_unknown(insts, index)
    return _UNKNOWN


def _finally_or_unknown(insts, index):
    """A handler that does not start by loading a class to match: a finally block (its body,
    then a re-raise) or an except clause of another form (unknown: it may catch)."""
    for inst in insts[index:index + 64]:
        if inst.opname in _EXCEPT_ONLY:
            return _UNKNOWN
        if inst.opname == "RERAISE":
            return "finally"
    return _UNKNOWN


def _global(f_globals: dict, name: str):
    if name in f_globals:
        return f_globals[name]
    b = f_globals.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else vars(b)
    return b.get(name, _UNKNOWN)


def _attribute(obj, name: str):
    """A module's or class's attribute read from its dict (no code of anyone's runs)."""
    if isinstance(obj, types.ModuleType):
        return vars(obj).get(name, _UNKNOWN)
    if isinstance(obj, type):
        try:
            return inspect.getattr_static(obj, name)
        except AttributeError:
            return _UNKNOWN
    return _UNKNOWN


def _catches(cls) -> bool:
    """Whether `except cls` may catch an error an aten op raises from the values."""
    if not isinstance(cls, type):
        return True  # unknown, or not a class (eager's own TypeError would follow)
    if any(issubclass(e, cls) for e in _VALUE_ERRORS):
        return True
    return (issubclass(cls, _VALUE_ERRORS) and not issubclass(cls, _NOT_FROM_VALUES)
            and cls.__module__.split(".")[0] == "torch")
