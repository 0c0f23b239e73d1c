"""Pure stack shuffles. 3.10's DUP_TOP/ROT_TWO were normalized to COPY/SWAP."""
from __future__ import annotations

from ...variables.base import NULL


class StackOps:
    def POP_TOP(self, inst):
        v = self.pop()
        if getattr(v, "loop_owner", None) is self:  # a for loop left early drops its generator
            v.dropped_by_loop(self)

    def PUSH_NULL(self, inst):
        self.push(NULL)

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        s = self.stack
        s[-1], s[-inst.arg] = s[-inst.arg], s[-1]

    def ROT_THREE(self, inst):  # 3.10: [a, b, c] → [c, a, b]
        s = self.stack
        s[-3:] = [s[-1], s[-3], s[-2]]

    def ROT_FOUR(self, inst):  # 3.10: [a, b, c, d] → [d, a, b, c]
        s = self.stack
        s[-4:] = [s[-1], s[-4], s[-3], s[-2]]

    def ROT_N(self, inst):
        s = self.stack
        n = inst.arg
        s[-n:] = [s[-1], *s[-n:-1]]
