"""Operators, comparisons, subscripts and slices."""
from __future__ import annotations

import operator

from ...exc import unsupported
from ...variables.symbolic import SymNodeVariable, SymSliceVariable
from ...variables.constant import ConstantVariable
from ...variables.tensor import TensorVariable
from ..operators import binary_op, compare, contains, getitem, is_same, setitem, unary_op
from .at_break import AtBreak, Exit, Rendered, Rule


def _slice(tx, start, stop, step=None):
    parts = [start, stop] + ([step] if step is not None else [])
    if any(isinstance(p, SymNodeVariable) for p in parts):
        return SymSliceVariable(parts)  # a bound that is a symbolic size
    if not all(p.is_python_constant() for p in parts):
        unsupported("data_dependent", "a slice bound that is not a Python constant")
    return ConstantVariable(slice(*[p.as_python_constant() for p in parts]))


class BinaryOps:
    def BINARY_OP(self, inst):
        name, inplace = inst.arg
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, name, a, b, inplace))

    def UNARY_NEGATIVE(self, inst):
        self.push(unary_op(self, "neg", self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(unary_op(self, "pos", self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(unary_op(self, "invert", self.pop()))

    def UNARY_NOT(self, inst):
        self.push(ConstantVariable(not self.pop().truthy(self)))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(compare(self, inst.arg, a, b))

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        same = is_same(a, b, self)
        if same is None:
            unsupported("construct", f"cannot decide `{a.describe()} is {b.describe()}` while tracing")
        self.push(ConstantVariable(same != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        result = contains(self, container, item)
        self.push(ConstantVariable(result.truthy(self) != bool(inst.arg)))

    def BINARY_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        self.push(getitem(self, obj, key))

    def STORE_SUBSCR(self, inst):  # [value, obj, key]
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        setitem(self, obj, key, value)

    def DELETE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        if not hasattr(obj, "delitem"):
            unsupported("side_effect", f"deleting an item of {obj.describe()}")
        obj.delitem(self, key)

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        self.push(_slice(self, *parts))

    def BINARY_SLICE(self, inst):  # 3.12+: [container, start, stop]
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(getitem(self, obj, _slice(self, start, stop)))

    def STORE_SLICE(self, inst):  # 3.12+: [value, container, start, stop]
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        value = self.pop()
        setitem(self, obj, _slice(self, start, stop), value)


# --- natively at a graph break --------------------------------------------------------------
def _binary_op_at_break(b: AtBreak) -> Rendered:  # normalized: (operator's name, in place), as `operator.iadd`
    st = b.stack
    name, inplace = b.inst.arg
    b.result.untraced = b.untraced(st[-2:])
    fn = getattr(operator, ("i" + name.rstrip("_")) if inplace else name)
    return Rendered(f"{b.bind(fn, name)}({b.expr(st[-2])}, {b.expr(st[-1])})", True,
                    [Exit(None, b.next, st[:-2] + [b.result])])


def _compare_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    return Rendered(f"{b.expr(st[-2])} {b.inst.arg} {b.expr(st[-1])}", True, [Exit(None, b.next, st[:-2] + [b.result])])


def _not_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    return Rendered(f"not {b.expr(st[-1])}", True, [Exit(None, b.next, st[:-1] + [b.result])])


def _subscr_at_break(b: AtBreak) -> Rendered:  # a tensor indexed by its data (a bool mask)
    st, e = b.stack, b.expr
    return Rendered(f"{e(st[-2])}[{e(st[-1])}]", True, [Exit(None, b.next, st[:-2] + [b.result])])


def _store_subscr_at_break(b: AtBreak) -> Rendered:
    st, e = b.stack, b.expr
    return Rendered(f"{e(st[-2])}[{e(st[-1])}] = {e(st[-3])}", False, [Exit(None, b.next, st[:-3])])


def _delete_subscr_at_break(b: AtBreak) -> Rendered:
    st, e = b.stack, b.expr
    return Rendered(f"del {e(st[-2])}[{e(st[-1])}]", False, [Exit(None, b.next, st[:-2])])


AT_BREAK = {
    # an operator breaks only on an untraced C function's result (Rule)
    "BINARY_OP": Rule(_binary_op_at_break, untraced_operands=2),
    "COMPARE_OP": Rule(_compare_at_break, untraced_operands=2),
    "UNARY_NOT": Rule(_not_at_break),
    "STORE_SUBSCR": Rule(_store_subscr_at_break), "DELETE_SUBSCR": Rule(_delete_subscr_at_break),
    # a read whose result's shape depends on the data (`x[mask]`), as torch.compile breaks there
    "BINARY_SUBSCR": Rule(_subscr_at_break, only_if=lambda stack: isinstance(stack[-2], TensorVariable)),
}
