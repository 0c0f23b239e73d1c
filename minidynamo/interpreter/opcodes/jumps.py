"""Jumps, truth tests and for-loops. Every decision must be known at trace time:
a branch on tensor data declines the trace (data_dependent)."""
from __future__ import annotations

from ..._compat import PY313
from ...exc import unsupported
from ...variables.constant import ConstantVariable
from ...variables.lists import IteratorVariable, iterator_of
from ..operators import is_same


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
        self.push(iterator_of(self, self.pop()))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, IteratorVariable):
            unsupported("construct", f"iterating over {it.describe()}")
        item = it.next_item()
        if item is None:
            self.pop()
            self.ip = inst.target  # normalized: past END_FOR (3.12) / END_FOR; POP_TOP (3.13+)
        else:
            self.push(item)

    def END_FOR(self, inst):  # only reached by a jump; 3.12 pops 2, 3.13+ pops 1 (+ POP_TOP)
        self.pop()
        if not PY313:
            self.pop()
