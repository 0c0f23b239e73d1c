"""Jumps, truth tests and for-loops. Every decision must be known at trace time:
a branch on tensor data declines the trace (data_dependent)."""
from __future__ import annotations

from ..._compat import PY313
from ...exc import unsupported
from ...variables.constant import ConstantVariable
from ...variables.lists import IteratorVariable, iterator_of
from ..operators import is_same
from .at_break import AtBreak, Exit, Rendered, Rule


def _is_none(tx, v):
    same = is_same(v, ConstantVariable(None))
    if same is None:
        unsupported("construct", f"cannot decide whether {v.describe()} is None")
    return same


class JumpOps:
    def JUMP(self, inst):
        self.ip = inst.target

    def POP_JUMP_IF_TRUE(self, inst):
        if self.pop().truthy(self):
            self.ip = inst.target

    def POP_JUMP_IF_FALSE(self, inst):
        if not self.pop().truthy(self):
            self.ip = inst.target

    def POP_JUMP_IF_NONE(self, inst):
        if _is_none(self, self.pop()):
            self.ip = inst.target

    def POP_JUMP_IF_NOT_NONE(self, inst):
        if not _is_none(self, self.pop()):
            self.ip = inst.target

    def JUMP_IF_TRUE_OR_POP(self, inst):  # 3.10/3.11
        if self.stack[-1].truthy(self):
            self.ip = inst.target
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truthy(self):
            self.ip = inst.target
        else:
            self.pop()

    def TO_BOOL(self, inst):  # 3.13+: the truth test happens here
        self.push(ConstantVariable(self.pop().truthy(self)))

    def GET_ITER(self, inst):
        it = iterator_of(self, self.pop())
        if getattr(it, "made_at", None) == (self, self.ip - 2) and self.instructions[self.ip].opname == "FOR_ITER":
            it.loop_owner = self  # `for y in gen(...)`: the loop's stack slot is its only reference
        self.push(it)

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, IteratorVariable):
            unsupported("construct", f"iterating over {it.describe()}")
        # a generator's body raising reaches the loop here, where a handler may catch it
        next_from = getattr(it, "next_from", None)
        item = next_from(self) if next_from is not None else it.next_item()
        if item is None:
            self.pop()
            self.ip = inst.target  # normalized: past END_FOR (3.12) / END_FOR; POP_TOP (3.13+)
        else:
            self.push(item)

    def END_FOR(self, inst):  # only reached by a jump; 3.12 pops 2, 3.13+ pops 1 (+ POP_TOP)
        self.pop()
        if not PY313:
            self.pop()


# --- natively at a graph break: the truth test runs natively, one exit per side ---------
def _jump_after(b: AtBreak):
    """The conditional jump consuming a TO_BOOL's value, or None."""
    nxt = b.following()
    return nxt if nxt is not None and nxt.opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE") else None


def _truth_at_break(b: AtBreak) -> Rendered:
    st, e, op = b.stack, b.expr, b.inst.opname
    jump = b.inst if op != "TO_BOOL" else _jump_after(b)
    if jump is None:  # a truth value used as a value
        return Rendered(f"{b.bind(bool, 'bool')}({e(st[-1])})", True, [Exit(None, b.next, st[:-1] + [b.result])])
    after = b.next if op != "TO_BOOL" else b.next + 1
    taken, other = (jump.target, after) if jump.opname == "POP_JUMP_IF_TRUE" else (after, jump.target)
    return Rendered(None, False, [Exit(e(st[-1]), taken, st[:-1]), Exit(None, other, st[:-1])])


def _none_test_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    cond = f"{b.expr(st[-1])} is {'not ' if 'NOT' in b.inst.opname else ''}None"
    return Rendered(None, False, [Exit(cond, b.inst.target, st[:-1]), Exit(None, b.next, st[:-1])])


def _or_pop_at_break(b: AtBreak) -> Rendered:  # 3.10: the value stays on the stack where it jumps
    st = b.stack
    cond = b.expr(st[-1]) if b.inst.opname == "JUMP_IF_TRUE_OR_POP" else f"not {b.expr(st[-1])}"
    return Rendered(None, False, [Exit(cond, b.inst.target, list(st)), Exit(None, b.next, st[:-1])])


AT_BREAK = {
    "TO_BOOL": Rule(_truth_at_break), "POP_JUMP_IF_TRUE": Rule(_truth_at_break),
    "POP_JUMP_IF_FALSE": Rule(_truth_at_break),
    "POP_JUMP_IF_NONE": Rule(_none_test_at_break), "POP_JUMP_IF_NOT_NONE": Rule(_none_test_at_break),
    "JUMP_IF_TRUE_OR_POP": Rule(_or_pop_at_break), "JUMP_IF_FALSE_OR_POP": Rule(_or_pop_at_break),
}
