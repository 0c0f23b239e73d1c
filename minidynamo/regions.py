"""With regions a graph break splits: `with torch.autocast(...): ... print(x) ...`.

Inside a `with` block the frame's value stack holds the block's exit (what BEFORE_WITH,
3.10's SETUP_WITH, pushed: a tracker of the manager's bound `__exit__`). A break there
carries each open region across (`Regions`):

1. The graph ends outside every region the trace entered (`close_at_break` of each,
   innermost first), so a graph leaves the state as it found it: a backend may run it at
   compile time, and a real manager entered after it must find the state from before.
2. After the graph the entry enters each region again for real, outermost first
   (`reenter` of each): torch's own manager for autocast, inference mode and the CUDA
   device (`EnteredManager`), a stateless exit for grad mode and nullcontext, a
   generator made again at its yield under contextlib's manager for a @contextmanager
   (the regions its body entered first); a user class's object is rebuilt as the trace
   left it. Then grad mode as the trace had it. The native instruction runs in the
   state eager has there.
3. The exits stand in the stack slots the resume function gets, under the original
   exception table (3.10: its prologue puts the blocks back with SETUP_WITH, see
   `stack_layout`): its normal end, a return or an exception leaves them once, through
   the real `__exit__`. A resume trace sees a real manager's exit as entered before it
   (the state it starts in, guarded); calling it declines, so that call runs natively at
   a break of its own (`CarriedExitVariable`). Grad mode's and nullcontext's stateless
   exits are traced.
4. An exception from the native instruction is raised again, in a function generated
   from the original code, right where the instruction was (breaks.py): the original
   handlers call the exits with it, a suppressing exit goes on after its block, and the
   rest of the frame runs eagerly in that function.
"""
from __future__ import annotations

import weakref

import bytecode as bc
import torch

from ._compat import PY311
from .exc import unsupported
from .guards import Guard
from .instructions import normalize
from .liveness import open_with_blocks
from .resume import UNTRACED_RESULT, WITH_EXIT
from .sources import AttrSource
from .variables.base import NULL, VariableTracker
from .variables.contexts import (ContextManagerVariable, EnteredManager, GeneratorContextVariable, WithCarrier,
                                 _Method, grad_at_break)
from .variables.user_objects import UserExitVariable
from .variables.functions import UserMethodVariable


class CarriedExitVariable(VariableTracker):
    """A resume function's stack slot holding the exit of a real manager entered before it
    (`EnteredManager`). The region is the trace's starting state; leaving it declines, so
    the frame breaks there and the real exit runs natively."""

    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return EnteredManager

    def describe(self):
        return f"the exit of {type(self.value.manager).__qualname__} (entered before a graph break)"

    def call_function(self, tx, args, kwargs):
        unsupported("exceptions", f"leaving {type(self.value.manager).__qualname__}, entered before a graph "
                                  "break: its exit runs natively",
                    hint="the region an earlier graph break split ends here, left by the real manager")


def _wrap_entered(tx, value, source):
    if source is not None:
        tx.output.guards.add(Guard("TYPE_MATCH", source, EnteredManager, {}))
        tx.output.guards.add(Guard("TYPE_MATCH", AttrSource(source, "manager"), type(value.manager), {}))
    return CarriedExitVariable(value, source)



def _wrap_carrier(tx, value, source):
    """3.10: the stack slot holds the exit the carrier hands to SETUP_WITH."""
    if source is not None:
        tx.output.guards.add(Guard("TYPE_MATCH", source, WithCarrier, {}))
    exit_ = tx.wrap(value.exit, AttrSource(source, "exit") if source is not None else None)
    if type(exit_) is UserMethodVariable:  # a user class's: still a with block's exit
        return UserExitVariable(exit_.func, exit_.obj, exit_.source)
    return exit_



def stack_layout(code, target: int, stack: list) -> tuple[tuple, set]:
    """(nulls, positions): the kinds of a resume function's stack slots at `target` (NULL,
    a value, the result of an untraced C function: UNTRACED_RESULT, or on 3.10 a with block's exit that its prologue enters again: WITH_EXIT),
    and the positions of those exits, passed in a WithCarrier."""
    nulls = [UNTRACED_RESULT if getattr(v, "untraced", False) else v is NULL for v in stack]
    if PY311:
        return tuple(nulls), set()
    blocks = open_with_blocks(code, target)
    if blocks is None:
        unsupported("exceptions", "inside a try block (Python 3.10)")
    exits = [i for i, v in enumerate(stack) if is_exit_slot(v)]
    if len(exits) < len(blocks):
        unsupported("exceptions", "a with block whose exit is not on the stack (Python 3.10)")
    carried = set(exits[:len(blocks)])  # an exit being called has left its block already
    return tuple(WITH_EXIT if i in carried else null for i, null in enumerate(nulls)), carried


def carry(rb, position: int, carried: set, expr: str) -> str:
    """The argument for stack slot `position` (see stack_layout)."""
    return f"{rb.ns.bind(WithCarrier, 'WithCarrier')}({expr})" if position in carried else expr


def is_exit_slot(v) -> bool:
    """A with block's exit on the value stack."""
    return ((isinstance(v, _Method) and v.name == "__exit__") or isinstance(v, (UserExitVariable,
                                                                                CarriedExitVariable)))


def region_exits(tx) -> list:
    """The exits of the with blocks open at the frame's current instruction, outermost first."""
    return [v for v in tx.stack if is_exit_slot(v)]


def opened_regions(exits) -> list:
    """The regions among `exits` the trace entered, outermost first; a @contextmanager's
    are preceded by those its generator's body entered before its yield (still open in it)."""
    out = []
    for v in exits:
        if isinstance(v, _Method) and not v.carried:
            if isinstance(v.cm, GeneratorContextVariable) and v.cm.gen is not None:
                out += opened_regions(region_exits(v.cm.gen))
            out.append(v)
    return out


def why_not_carried(tx) -> str | None:
    """Why a break at the frame's current instruction cannot carry its with regions across
    (None: it can, or there are none)."""
    for v in tx.stack:
        if isinstance(v, ContextManagerVariable) or (isinstance(v, _Method) and v.name != "__exit__"):
            return "inside a with statement's own setup"
        if not is_exit_slot(v):
            continue
        if isinstance(v, _Method) and not v.carried:
            why = v.cm.why_not_across_break()
            if why is not None:
                return f"inside a with block over {v.cm.describe()}: {why}"
            if isinstance(v.cm, GeneratorContextVariable):
                why = why_not_carried(v.cm.gen)
                if why is not None:
                    return f"inside {v.cm.describe()}, whose generator is {why}"
    return None


class Regions:
    """The with regions open at a break: their exits on the stack (outermost first), those
    the trace entered (the graph leaves them, the entry enters them again), whether an
    exception raised there meets a handler, and the grad mode the trace had there."""

    def __init__(self, tx, index: int):
        self.exits = region_exits(tx)
        self.opened = opened_regions(self.exits)
        # A resume function's stack holds its regions' exits as plain values: what says it
        # is inside one is the code's exception table.
        self.raising = covered_by_handler(tx.code, index)
        self.grad = grad_at_break(tx.output.graph)
        for v in reversed(self.opened):  # innermost first, as their exits would run
            v.cm.close_at_break(tx.output.graph)

    def __bool__(self):
        return bool(self.exits) or self.raising

    def reentry_lines(self, rb) -> list[str]:
        """Statements entering the regions again after the graph, outermost first; each
        exit's expression is registered with `rb` for the stack it stands in. Then grad
        mode as the trace had it (a region, or a statement inside one, may have set it)."""
        lines = []
        for v in self.opened:
            more, expr = v.cm.reenter(rb)
            lines += more
            rb.exits[id(v)] = expr
            rb.keep(v)
        lines.append(f"{rb.ns.bind(torch._C._set_grad_enabled, 'set_grad_enabled')}({self.grad!r})")
        return lines


_covered: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def covered_by_handler(code, index: int) -> bool:
    """Whether an exception raised at normalized instruction `index` of `code` meets a
    handler of the frame (inside a try body breaks are refused: a with block's, or a 3.12+
    inlined comprehension's; 3.10: a with block on the block stack)."""
    if not PY311:
        return bool(open_with_blocks(code, index))
    origins = _covered.get(code)
    if origins is None:
        origins = set()
        inside = False
        for i, item in enumerate(bc.Bytecode.from_code(code)):
            if isinstance(item, bc.TryBegin):
                inside = True
            elif isinstance(item, bc.TryEnd):
                inside = False
            elif inside:
                origins.add(i)
        _covered[code] = origins
    return normalize(code)[index].origin in origins
