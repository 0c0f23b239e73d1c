"""How an instruction runs natively at a graph break (breaks.py makes the break). Each
opcode family names the instructions a graph can break at in its `AT_BREAK` table
(opname -> `Rule`) and renders them as Python source with the same semantics as the
bytecode, version-free, over the value stack just before the instruction (`AtBreak`).

A renderer returns `Rendered(text, value, exits)`: the instruction as an expression whose
value is the native result (`value` true), or as a statement, or None for a jump (its
exits carry the condition); and its ways out, each an `Exit`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple


class Native:
    """A value the native instruction produced: a variable of the entry, not a tracker."""

    def __init__(self, name: str):
        self.name = name
        self.untraced = False  # the result of a C function the trace does not model


@dataclass
class Exit:
    """One way out of the native instruction: `cond` (a Python condition, or None for
    the last, unconditional one), the instruction to resume at, and the value stack
    there (trackers, NULL, or Native values)."""
    cond: str | None
    target: int
    stack: list


class Rendered(NamedTuple):
    text: str | None
    value: bool
    exits: list


class Rule(NamedTuple):
    render: Callable  # (AtBreak) -> Rendered
    # > 0: the instruction breaks only where one of its top `untraced_operands` stack
    # values is an untraced C function's result (an operator on traced values declines
    # for reasons eager shares: a tensor op that raises)
    untraced_operands: int = 0
    # where given: the instruction breaks only where it answers True for the value stack
    only_if: Callable | None = None


class AtBreak:
    """What a renderer reads: the instruction, the frame's translator stopped just before
    it (`tx`: its stack, globals, pending keyword names), the native result, and breaks.py's
    rendering (`expr`, `bind`, `callee`, `untraced`)."""

    def __init__(self, tx, index: int, result: Native, rb, callee: Callable, untraced: Callable):
        self.tx = tx
        self.inst = tx.instructions[index]
        self.stack = tx.stack
        self.next = index + 1
        self.result = result
        self.rb = rb
        self.callee = callee  # (callable tracker) -> what the native call calls: text, or (text, self's text)
        self.untraced = untraced  # (operands, callable=None) -> whether the result is an untraced value

    def expr(self, v) -> str:
        return self.rb.expr(v)

    def bind(self, value, name: str) -> str:
        return self.rb.ns.bind(value, name)

    def following(self):
        """The instruction after this one, or None."""
        return self.tx.instructions[self.next] if self.next < len(self.tx.instructions) else None
