"""A generator made in the trace, started, and returned (live after the trace), made again
for real: suspended at the same yield with the same locals and stack.

CPython cannot make a suspended generator frame, but it can run to one: the generator's
own code with a prologue (resume.py's resume code, from the original code object, so line
numbers, exception tables and cells are the original's) whose parameters are the body's
value stack and locals, pushing them and jumping to the yield instruction it waits at, with
a placeholder as the value to yield. The entry calls that function with the values the
trace left and advances the new generator once: only the prologue runs (no line of the
body), and it stops at that yield, inside the same try blocks, as the original is. The next
`next()`/`send(v)`/`throw()`/`close()` resumes it as CPython would have resumed the
original. Its function keeps the original's name and qualified name (`gi_code` is the
generated code, which has the prologue's parameters as extra locals).

3.10's YIELD_FROM sends the value it is resumed with on to the delegate: there the
prologue stops at a YIELD_VALUE of its own right before it (`yield_first`), so the value
sent next reaches the delegate as it would have.

Declines (`generator`, with the reason): a generator live at a graph break (the frame runs
eagerly, as under torch.compile, which does not split a frame around a started generator
either); a body inside a 3.10 try block (the prologue would not set its block up); a
generator finished, failed, running, or read ahead by a consumer; cells a resume code
cannot pass.
"""
from __future__ import annotations

from .._compat import PY311
from ..exc import unsupported
from .base import NULL
from .cells import RealCellVariable
from .functions import make_function, NestedFunctionVariable, UserFunctionVariable
from ..frame_hook import run_plainly
from ..resume import cell_param, resume_code, why_cells_not_passed, why_not_resumable


def rebuild_started(gen, rb) -> str:
    """The expression making `gen` (suspended at a yield) again; `rebuild_fill` advances it."""
    frame = gen.frame
    code = frame.code
    why = _why_not(gen, rb) or why_cells_not_passed(code)
    target = frame.instructions.index(frame.yield_inst) if why is None else None
    why = why or why_not_resumable(code, target)
    if why is not None:
        unsupported("generator", f"{gen.describe()} is live after the trace after it started and cannot "
                                 f"be made again: {why}",
                    hint="consume the generator inside the optimized function, or build a list")
    stack = list(frame.stack)
    nulls = tuple(v is NULL for v in stack) + (False,)  # the placeholder the prologue yields last
    local_names = tuple(n for n in code.co_varnames if n in frame.f_locals)
    cell_names = tuple(n for n in code.co_cellvars if n in frame.cells)
    # 3.10's YIELD_FROM sends what it is given on to the delegate: stop at a yield before it
    yield_first = frame.yield_inst.opname == "YIELD_FROM"
    new_code = resume_code(code, target, nulls, local_names + tuple(cell_param(n) for n in cell_names),
                           yield_first=yield_first)
    run_plainly(new_code)
    args = [rb.expr(v) for v in stack if v is not NULL] + ["None"]
    args += [rb.expr(frame.f_locals[n]) for n in local_names]
    args += [rb.expr(frame.cells[n]) for n in cell_names]
    qualname, fn_globals, closure = _function_parts(gen.fn_var, rb)
    fn = (f"{rb.ns.bind(make_function, 'make_function')}({rb.ns.bind(new_code, 'code')}, "
          f"{rb.ns.bind(fn_globals, 'G')}, {qualname!r}, None, None, {closure})")
    return f"{fn}({', '.join(args)})"


def advance_lines(rb, name: str) -> list:
    """Run the new generator's prologue to the yield it stops at (its placeholder dropped)."""
    return [f"{rb.ns.bind(next, 'next')}({name})"]


def _why_not(gen, rb) -> str | None:
    frame = gen.frame
    if getattr(rb, "at_break", False):
        # As torch.compile: a frame whose started generator is live at a break (often a
        # break inside the generator's body) runs eagerly rather than splitting around it.
        return "it is live at a graph break"
    if gen.state != "suspended" or frame.yield_inst is None:
        return f"it is {gen.state}"
    if len(gen.items.made) != gen.index:
        return "a consumer read items ahead of it"
    if not PY311:
        if frame.yield_inst.in_try or frame.blocks:
            return "it waits inside a try block (Python 3.10)"
    return None


def _function_parts(fn_var, rb) -> tuple:
    """(qualified name, globals, closure expression) of the generator function."""
    if isinstance(fn_var, UserFunctionVariable):
        fn = fn_var.fn
        closure = rb.ns.bind(fn.__closure__, "closure") if fn.__closure__ else "None"
        if fn_var.by_code and fn.__closure__:  # this call's function's cells, not the traced call's
            closure = f"{rb.expr(fn_var)}.__closure__"
        return fn.__qualname__, fn.__globals__, closure
    if isinstance(fn_var, NestedFunctionVariable) and not fn_var.attrs:
        cells = [rb.ns.bind(c.cell, "cell") if isinstance(c, RealCellVariable) else rb.expr(c)
                 for c in (fn_var.closure.items if fn_var.closure is not None else ())]
        closure = f"({''.join(c + ', ' for c in cells)})" if cells else "None"
        return fn_var.name, fn_var.globals, closure
    unsupported("generator", f"a started generator of {fn_var.describe()} made again after the trace")
