"""SymNodeVariable: a symbolic size during the trace — a graph node computing it plus the
shape environment's `SymInt` (or SymFloat/SymBool) standing for its value.

Sizes of symbolic dimensions, `numel()`, and arithmetic on them stay symbolic: each is
a node of the graph (`x.size(0)`, `operator.mul`), so the graph computes them per call,
and the SymInt goes into fake ops (a `view(n, -1)` gets a symbolic shape). Deciding
something about one — a branch, a comparison used as a bool — asks the environment,
which records the answer as a guard. Where plain Python needs the number itself (a
`range`, a list length, a constexpr, a dict key), `as_python_constant` specialises:
the environment records `size == value` as a guard, which is always right, just no
longer general in that size.
"""
from __future__ import annotations

import operator

import torch

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from ..dynamic import is_symbolic

_BINARY = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor")}
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
            ">": operator.gt, ">=": operator.ge}
_UNARY = {"neg": operator.neg, "pos": operator.pos}
_PY = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


class SymNodeVariable(VariableTracker):
    __slots__ = ("node", "sym")
    owns_operators = True  # operators.py hands it every operator it is an operand of

    def __init__(self, node, sym, source=None):
        super().__init__(source)
        self.node = node
        self.sym = sym

    def rebuild(self, rb) -> str:
        return rb.graph_value(self)

    def python_type(self):
        return _PY[type(self.sym)]

    def is_python_constant(self):
        return True  # by specialising (see the module docstring)

    def as_python_constant(self):
        return specialise(self.sym)

    def as_fx_arg(self):
        return self.node

    def as_fake(self):
        return self.sym

    def describe(self):
        return f"symbolic {self.python_type().__name__} {self.sym}"

    def truthy(self, tx):
        return bool(self.sym)  # the environment guards the answer

    def var_getattr(self, tx, name):
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in ("__index__", "__int__") and not args and self.python_type() is int:
            return self
        return ConstantVariable(self.as_python_constant()).call_method(tx, name, args, kwargs)

    def apply_operator(self, tx, name: str, operands: list, inplace: bool = False):
        """`a <op> b` (or `<op> a`) with at least one symbolic operand."""
        fn = _BINARY.get(name) or _COMPARE.get(name) or _UNARY.get(name)
        values = [_operand(v) for v in operands]
        if fn is None or any(v is None for v in values):
            if any(_is_tensor(v) for v in operands) and fn is not None:
                # A tensor with a symbolic scalar: a tensor op taking the size node.
                return tx.output.call("call_function", fn, list(operands), {}, what=f"tensor {name}")
            return _specialised(tx, name, operands, inplace)
        try:
            result = fn(*values)
        except ZeroDivisionError as e:
            unsupported("exceptions", f"ZeroDivisionError: {e}")
        except TypeError:  # an operator SymInt does not have (>>, &): on the values, guarded
            return _specialised(tx, name, operands, inplace)
        if _saturated(result):  # beyond int64 the environment's constants are int_oo
            return _specialised(tx, name, operands, inplace)
        return symbolic_result(tx, "call_function", fn, [v.as_fx_arg() for v in operands], result)

    def __repr__(self):
        return f"SymNodeVariable({self.sym})"


def _is_tensor(v) -> bool:
    from .tensor import TensorVariable  # a cycle: tensor imports this module
    return isinstance(v, TensorVariable)


def _saturated(result) -> bool:
    """A result the environment folded to an infinity: `2 ** 80` of a specialised size is
    int_oo there, a bound and not the number Python computes."""
    if isinstance(result, (torch.SymInt, torch.SymFloat)):
        from torch.utils._sympy.numbers import int_oo
        expr = result.node.expr
        return bool(expr.is_number) and (expr in (int_oo, -int_oo) or bool(expr.is_infinite))
    return False


def _operand(v):
    """A symbolic operand's SymInt, a plain number's value, else None."""
    if isinstance(v, SymNodeVariable):
        return v.sym
    if isinstance(v, ConstantVariable) and type(v.value) in (int, float, bool):
        return v.value
    return None


def _specialised(tx, name: str, operands: list, inplace: bool):
    """The operator on the sizes' values (guarded): `n * [0]`, a size with a string."""
    plain = [ConstantVariable(v.as_python_constant()) if isinstance(v, SymNodeVariable) else v
             for v in operands]
    if name in _COMPARE:
        return tx.compare(name, *plain)
    if len(plain) == 1:
        return tx.unary_op(name, plain[0])
    return tx.binary_op(name, *plain, inplace=inplace)


def specialise(sym):
    """The value of a symbolic scalar, the environment guarding that it stays so."""
    if isinstance(sym, torch.SymBool):
        return bool(sym)
    if isinstance(sym, torch.SymFloat):
        return float(sym)
    return int(sym)


def symbolic_result(tx, kind: str, target, fx_args: list, result):
    """A tracker for an operation's symbolic result: a node when it is still symbolic, a
    constant when the environment knows its value (`n * 0`, a specialised size)."""
    if not is_symbolic(result):
        if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            result = specialise(result)
        return ConstantVariable(result)
    node = tx.output.sym_node(kind, target, tuple(fx_args), result)
    return SymNodeVariable(node, result)



class SymSliceVariable(VariableTracker):
    """`x[a:b]` with a symbolic bound: the slice holds graph values (fx keeps slices of
    nodes), so `x[: n // 2]` stays symbolic in a tensor op; elsewhere it specialises."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        super().__init__(None)
        self.parts = parts

    def python_type(self):
        return slice

    def is_python_constant(self):
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self):
        return slice(*[p.as_python_constant() for p in self.parts])

    def as_fx_arg(self):
        return slice(*[p.as_fx_arg() for p in self.parts])

    def as_fake(self):
        return slice(*[p.as_fake() for p in self.parts])

    def describe(self):
        return "slice with a symbolic bound"
