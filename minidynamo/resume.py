"""Resume functions: the rest of a frame after a graph break, as a real function.

A resume function is the original code object with a new signature and a prologue:
its parameters are the value stack at the resume point (`___stack0`, ... with the NULL
slots of the call protocol left out) and the live locals by name; the prologue pushes
the stack back (a NULL slot as `PUSH_NULL`, on 3.10 as a trampoline callable: see
`call_self`) and jumps to the resume instruction. Everything else is the original
bytecode, so line numbers, exception tables and closures stay as they were.

The frame's own cells are handed over by reference: the parameter `___cell_<name>` is the
cell object, and the resume code reads and writes the variable through it (LOAD_DEREF n
becomes `___cell_n.cell_contents`, LOAD_CLOSURE n pushes `___cell_n`), so closures made
before the break, the resume function and a closure that escapes share one variable.
A frame whose cells are also used by slot (3.12+'s inlined comprehensions save and
restore a cell slot) passes them by value instead (`why_cells_not_passed`).

It is generated with the `bytecode` package from the *original* code object (never
from another resume function), so paths that break at the same place share one code
object. When minidynamo traces a resume function it does not read this code: it starts
the translator on the original instructions at the resume index with the stack and
locals bound from the arguments (`ResumeInfo`); the code object runs only natively
(an eager fallback of the resume function).

Resume functions are called in tail position. A break inside one returns a
`Continue(next, args)` instead of calling `next`, and the entry of the optimized
function drives the chain (`drive`): a loop with a break in its body costs no Python
stack per iteration.
"""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass

import bytecode as bc

from ._compat import PY311, PY312
from .frame_hook import run_plainly
from .instructions import normalize

_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08


class _WithExit:
    """A stack-slot kind in `nulls` (falsy: a value, passed as a parameter): Python 3.10, a
    with block's exit, passed in a `WithCarrier` (variables/contexts.py) that the prologue
    enters with the block's own SETUP_WITH, so the block is on the block stack again."""

    __slots__ = ()

    def __bool__(self):
        return False

    def __repr__(self):
        return "WITH_EXIT"


WITH_EXIT = _WithExit()


class _UntracedResult:
    """A stack-slot kind in `nulls` (falsy: a value, passed as a parameter): the result of
    a C function the trace does not model (`time.time()`), which the native instruction of
    the break produced. A float there is not specialized on: the resume trace holds it as
    a value it cannot read (c_callables.UntracedValueVariable), so a clock reading does not
    make a new trace per call."""

    __slots__ = ()

    def __bool__(self):
        return False

    def __repr__(self):
        return "UNTRACED_RESULT"


UNTRACED_RESULT = _UntracedResult()

# A live name `___cell_<name>` is the frame's cell `<name>` itself, passed by reference:
# the resume code reads and writes it through the parameter (`cell.cell_contents`), so the
# closures made before the break and the resume function share one variable.
CELL_PREFIX = "___cell_"


def cell_param(name: str) -> str:
    return CELL_PREFIX + name


def cell_of(param: str) -> str | None:
    """The cell variable's name a parameter passes, or None for a plain local."""
    return param[len(CELL_PREFIX):] if param.startswith(CELL_PREFIX) else None


def call_self(f, *args, **kwargs):
    """3.10 has no PUSH_NULL: a NULL slot under callable `f` is rebuilt as this function
    with `f` as its `self`, so CALL_METHOD calls `call_self(f, *args)` = `f(*args)`."""
    return f(*args, **kwargs)


class Continue:
    """What a resume function's entry returns at a break: call `fn(*args)` next."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, args: tuple):
        self.fn = fn
        self.args = args


def drive(fn, args: tuple):
    """Call `fn(*args)` and every continuation it hands back; the final value."""
    result = fn(*args)
    while type(result) is Continue:
        result = result.fn(*result.args)
    return result


@dataclass(frozen=True)
class ResumeInfo:
    """How to trace a resume function: the original code and function, the index (in
    normalize(code)) to start at, which stack slots are NULL, and the parameter names
    (the non-NULL stack slots first, then the live locals)."""
    code: types.CodeType
    fn: types.FunctionType
    target: int
    nulls: tuple
    params: tuple
    originals: tuple  # the original code's name of each parameter (a local renamed if needed)

    @property
    def stack_names(self) -> tuple:
        return self.params[:sum(1 for n in self.nulls if not n)]

    @property
    def untraced_results(self) -> frozenset:
        """The stack parameters holding an untraced C function's result (UNTRACED_RESULT)."""
        values = [n for n in self.nulls if not n]
        return frozenset(p for p, kind in zip(self.stack_names, values) if kind is UNTRACED_RESULT)

    @property
    def live(self) -> tuple:
        return self.params[len(self.stack_names):]

    @property
    def cells(self) -> dict:
        """Parameter → the frame's cell variable it passes by reference."""
        return {p: cell_of(p) for p in self.live if cell_of(p) is not None}


def resume_name(code, target: int) -> str:
    inst = normalize(code)[target]
    return f"resume_in_{code.co_name}_at_{inst.lineno}".replace("<", "").replace(">", "")


def why_not_resumable(code, target: int) -> str | None:
    """Why the frame cannot be resumed at `target`, or None when it can."""
    insts = normalize(code)
    if target >= len(insts):
        return "the resume point is past the end of the code"
    if not insts[target].first:
        return f"the resume point {insts[target]!r} is the second half of a fused instruction"
    if "__class__" in code.co_freevars and "super" in code.co_names:
        # CPython's super() reads the frame's first argument: a resume function's first
        # parameter is a stack value or another local.
        return "the frame calls super() without arguments, which needs the frame's own first argument"
    return None


def why_cells_not_passed(code) -> str | None:
    """Why the frame's cells cannot be handed to a resume function by reference (None:
    they can): every use of one must be a cell instruction the resume code can read
    through its parameter."""
    per_code = _per_code(code)
    if "cells" not in per_code:
        per_code["cells"] = _why_cells_not_passed(code)
    return per_code["cells"]


def _why_cells_not_passed(code) -> str | None:
    if any(cell_of(n) is not None for n in code.co_varnames):
        return "a local's name is reserved for passed cells"
    cells = set(code.co_cellvars)
    for item in bc.Bytecode.from_code(code):
        used = [n for n in _slot_names(item) if n in cells]
        if used and item.name not in _CELL_OPS and item.name not in _PAIRED_LOADS:
            return f"{item.name} of the cell {used[0]!r} (a comprehension's variable)"
    return None


# Keyed by the code object's identity: equal code objects of two functions (the same text
# in two files compares equal) must not share resume code, which carries its filename.
_codes: dict = {}  # id(code) → (weak reference to it, {layout: resume code, "cells": why not})


def _per_code(code) -> dict:
    key = id(code)
    found = _codes.get(key)
    if found is None or found[0]() is not code:
        def forget(ref, key=key):
            if _codes.get(key, (None,))[0] is ref:
                del _codes[key]
        found = _codes[key] = (weakref.ref(code, forget), {})
    return found[1]


def resume_code(code, target: int, nulls: tuple, live: tuple, raising: bool = False,
                yield_first: bool = False) -> types.CodeType:
    """The code object of the resume function of `code` at normalized index `target`
    (cached per code object and layout). `raising`: it takes one more parameter,
    `___exc`, and raises it right before that instruction (regions.py). `yield_first`: the
    prologue jumps to a YIELD_VALUE put right before that instruction, which the original
    path skips (3.10: a generator made again waiting in YIELD_FROM, generator_rebuild.py)."""
    per_code = _per_code(code)
    key = (target, nulls, live, raising, yield_first)
    found = per_code.get(key)
    if found is None:
        found = per_code[key] = _generate(code, target, nulls, live, raising, yield_first)
    return found


def _generate(code, target: int, nulls: tuple, live: tuple, raising: bool = False,
              yield_first: bool = False) -> types.CodeType:
    origin = normalize(code)[target].origin
    b = bc.Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    items = list(b)
    at = items[origin]
    line = at.lineno if isinstance(at, bc.Instr) else None
    handlers = iter(_with_handlers(code, target, items))
    label = bc.Label()
    items.insert(origin, label)
    if yield_first:  # [..., label, YIELD_VALUE, after] + the instruction; the original jumps over
        after = bc.Label()
        items[origin:origin] = [bc.Instr("JUMP_FORWARD", after, lineno=line)]
        items[origin + 2:origin + 2] = [bc.Instr("YIELD_VALUE", lineno=line), after]
    if raising:  # between the label and the instruction: inside the same protected regions
        items[origin + 1:origin + 1] = [bc.Instr("LOAD_FAST", "___exc", lineno=line),
                                        bc.Instr("DELETE_FAST", "___exc", lineno=line),
                                        bc.Instr("RAISE_VARARGS", 1, lineno=line)]
    cells = {cell_of(n) for n in live if cell_of(n) is not None}
    if cells:
        items = [new for it in items for new in _through_cell(it, cells)]
        b.cellvars = [n for n in b.cellvars if n not in cells]
    start = 0
    if PY311:  # MAKE_CELL / COPY_FREE_VARS / RESUME stay first
        start = next(i for i, it in enumerate(items) if isinstance(it, bc.Instr) and it.name == "RESUME") + 1
    names, prologue = [], []
    for null in nulls:
        if not null:
            names.append(f"___stack{len(names)}")
            prologue.append(bc.Instr("LOAD_FAST", names[-1], lineno=line))
            if null is WITH_EXIT:  # [carrier] -> [exit], the block set up again
                prologue += [bc.Instr("SETUP_WITH", next(handlers), lineno=line), bc.Instr("POP_TOP", lineno=line)]
        elif PY311:
            prologue.append(bc.Instr("PUSH_NULL", lineno=line))
        else:
            prologue.append(bc.Instr("LOAD_CONST", call_self, lineno=line))
    prologue.append(bc.Instr("JUMP_FORWARD", label, lineno=line))
    # A local whose name is no identifier (pytest's rewritten asserts make `@py_assert1`)
    # cannot be a parameter of generated Python code: it gets a name that can.
    renamed = {n: f"___local{i}" for i, n in enumerate(live) if not _is_identifier(n)}
    body = items[start:]
    if renamed:
        body = [_rename(it, renamed) for it in body]
    b.clear()
    b.extend(items[:start] + prologue + body)
    b.argnames = names + [renamed.get(n, n) for n in live] + (["___exc"] if raising else [])
    b.argcount = len(b.argnames)
    b.posonlyargcount = 0
    b.kwonlyargcount = 0
    b.flags = b.flags & ~(_CO_VARARGS | _CO_VARKEYWORDS)
    # The code keeps the frame's own name: a traceback through the resume function names the
    # user's function (`f`, not `resume_in_f_at_4`); the function object carries the resume name.
    b.name = code.co_name
    if PY311:
        b.qualname = code.co_qualname
    # The stack never grows past the original's: the prologue rebuilds a stack the original
    # code had at that point. The exception table keeps the depths read from the original.
    return b.to_code(stacksize=code.co_stacksize + raising, compute_exception_stack_depths=False)


_LOCAL_OPS = {"LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
              "STORE_FAST_MAYBE_NULL", "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
              "STORE_FAST_LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"}

# What may touch a passed cell's slot: the cell operations, and a plain load of the slot
# (3.13+ pushes a cell for a closure with LOAD_FAST). A store or clear of the slot (an
# inlined comprehension saving and restoring its variable's cell) swaps the cell itself.
_CELL_OPS = {"MAKE_CELL", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "LOAD_FAST",
             "LOAD_FAST_BORROW"}
_PAIRED_LOADS = {"LOAD_FAST_LOAD_FAST": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_BORROW"}
_SLOT_OPS = _CELL_OPS | _LOCAL_OPS | {"LOAD_FROM_DICT_OR_DEREF"}  # the operations whose argument is a slot


def _slot_names(item) -> tuple:
    """The local or cell slots an instruction names. `bytecode` gives a cell slot as a
    CellVar or, for some operations on some Pythons (3.14's LOAD_DEREF), as a plain name:
    both name the same slot, so cells are found by name."""
    if not (isinstance(item, bc.Instr) and (item.name in _SLOT_OPS or isinstance(item.arg, (bc.CellVar, bc.FreeVar)))):
        return ()
    slots = (str, bc.CellVar, bc.FreeVar)
    args = item.arg if isinstance(item.arg, tuple) else (item.arg,)
    return tuple(a if isinstance(a, str) else a.name for a in args if isinstance(a, slots))


def _through_cell(item, cells: set) -> list:
    """One instruction of the resume code with a passed cell's variable read through its
    parameter: LOAD_DEREF n -> LOAD_FAST ___cell_n; LOAD_ATTR cell_contents, and so on.
    (3.13+ pushes a cell for a closure with LOAD_FAST of the cell slot, alone or paired.)"""
    if not any(n in cells for n in _slot_names(item)):
        return [item]
    op, at = item.name, item.location
    if op in _PAIRED_LOADS:
        return [new for name in item.arg
                for new in _through_cell(bc.Instr(_PAIRED_LOADS[op], name, location=at), cells)]
    (name,) = _slot_names(item)
    cell = bc.Instr("LOAD_FAST", cell_param(name), location=at)
    if op == "MAKE_CELL":
        return []
    if op in ("LOAD_CLOSURE", "LOAD_FAST", "LOAD_FAST_BORROW"):
        return [cell]
    if op == "LOAD_DEREF":
        return [cell, bc.Instr("LOAD_ATTR", (False, "cell_contents") if PY312 else "cell_contents", location=at)]
    if op == "STORE_DEREF":
        return [cell, bc.Instr("STORE_ATTR", "cell_contents", location=at)]
    if op == "DELETE_DEREF":
        return [cell, bc.Instr("DELETE_ATTR", "cell_contents", location=at)]
    raise AssertionError(op)  # why_cells_not_passed admits only _CELL_OPS and _PAIRED_LOADS


def _with_handlers(code, target: int, items: list) -> list:
    """3.10: the handler labels of the with blocks open at `target`, outermost first."""
    if PY311:
        return []
    from .liveness import open_with_blocks  # a cycle: liveness imports this module
    insts = normalize(code)
    return [items[insts[i].origin].arg for i in open_with_blocks(code, target) or ()]


def _is_identifier(name: str) -> bool:
    import keyword
    return name.isidentifier() and not keyword.iskeyword(name)



def _rename(item, renamed: dict):
    if not isinstance(item, bc.Instr) or item.name not in _LOCAL_OPS:
        return item
    arg = item.arg

    def one(a):  # a cell slot's arg is a CellVar/FreeVar, never renamed (it is no parameter)
        return renamed.get(a, a) if isinstance(a, str) else a

    new = tuple(one(a) for a in arg) if isinstance(arg, tuple) else one(arg)
    return item if new == arg else bc.Instr(item.name, new, location=item.location)


def resume_function(fn: types.FunctionType, code, target: int, nulls: tuple, live: tuple,
                    raising: bool = False):
    """A plain function running `code` (fn's original code) from `target`, with fn's
    globals and closure, carrying the ResumeInfo the tracer reads."""
    new_code = resume_code(code, target, nulls, live, raising)
    run_plainly(new_code)  # under the frame hook: it runs as the entries call it
    name = resume_name(code, target)
    resumed = types.FunctionType(new_code, fn.__globals__, name, None, fn.__closure__)
    resumed.__qualname__ = f"{getattr(code, 'co_qualname', code.co_name)}.<{name}>"
    params = tuple(new_code.co_varnames[:new_code.co_argcount - raising])  # ___exc last
    stack = params[:len(params) - len(live)]
    resumed._minidynamo_resume = ResumeInfo(code, fn, target, nulls, params, stack + tuple(live))
    return resumed
