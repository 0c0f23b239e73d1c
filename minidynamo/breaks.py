"""Graph breaks: where a trace declines one instruction of the function's own frame, the
entry runs the graph of everything before it, rebuilds the value stack and the live
locals, executes that instruction natively, and hands the rest of the frame to a resume
function (resume.py), optimized in its turn.

How a break is made (convert.py drives it):
1. The trace raises Unsupported; the frame's translator marked on it which of its own
   instructions was running (`break_at`: index and the trace's instruction count).
2. `why_no_break` decides whether that instruction can break here (below).
3. The trace restarts from scratch and stops just before that instruction (the count
   says which visit, for loops): trackers cannot be rolled back, a new trace is simple
   and costs milliseconds. Its stack and locals are the state at the break.
4. `BreakTail` renders the rest of the entry: the native instruction in Python source
   (a call, a store, a truth test: the same semantics as the bytecode, version-free),
   as its opcode family renders it (`AT_BREAK`, interpreter/opcodes/at_break.py),
   and one `return` per way out — a resume function for the next instruction, or for
   each side of a conditional jump on a tensor.

The native instruction and everything after it run outside the trace, so each side
effect happens once, in program order: the trace itself never wrote to outside objects.
"""
from __future__ import annotations

import builtins
import types

from .exc import unsupported
from .frame_hook import region, run_plainly
from .interpreter.opcodes import binary, build, calls, jumps, load_store
from .interpreter.opcodes.at_break import AtBreak, Exit, Native
from .liveness import live_names, local_value
from .callees import optimizable_callee, optimized_apply, optimized_function, optimized_module_call
from .regions import Regions, carry, stack_layout, why_not_carried
from .resume import Continue, drive, resume_function, why_cells_not_passed, why_not_resumable
from .side_effects import writeback_lines
from .variables.base import NULL
from .variables.c_callables import OpaqueCallableVariable, UntracedValueVariable
from .variables.autograd import FunctionApplyVariable

# The instructions a graph can break at, each as its opcode family runs it natively.
AT_BREAK = {**binary.AT_BREAK, **build.AT_BREAK, **calls.AT_BREAK, **jumps.AT_BREAK, **load_store.AT_BREAK}
BREAKABLE = frozenset(AT_BREAK)


def why_no_break(tx, index: int, fullgraph: bool) -> str | None:
    """Why the frame cannot break at instruction `index` (None: it can). `tx` is the
    frame's translator stopped before the instruction."""
    why = why_no_break_at(tx.instructions[index], fullgraph)
    if why is not None:
        return why
    rule = AT_BREAK[tx.instructions[index].opname]
    if rule.only_if is not None and not rule.only_if(tx.stack):
        return f"{tx.instructions[index].opname} breaks only on the operands its rule names"
    operands = rule.untraced_operands
    if operands and not _untraced(tx.stack[-operands:]):
        # NOTE: kept narrow: an operator on traced values declines for reasons eager shares
        # (a tensor op that raises), which the whole call reports as before.
        return "an operator breaks only on the result of an untraced C function"
    if tx.exc_info is not None:
        return ("inside an except or finally block entered in the trace (the exception it handles "
                "exists only in the trace)")
    if tx.output.picked_storages:
        return ("min()/max() picked a tensor by a tensor comparison before it: the pick is one of the "
                "candidates in eager, a new tensor here, which a break would hand on as a separate object")
    return why_not_carried(tx)


def why_no_break_at(inst, fullgraph: bool) -> str | None:
    """What the instruction alone says against a break there (checked before a restart)."""
    if fullgraph:
        return "fullgraph=True"
    if inst.opname not in BREAKABLE:
        return f"{inst.opname} is not an instruction a graph can break at"
    if inst.in_try:
        return "inside a try block (the native instruction would run outside its handlers)"
    return None


class BreakTail:
    """The part of a break entry after the graph. `lines(rebuilder)` renders it, once
    (convert.py: the graph values it uses become the graph's outputs)."""

    def __init__(self, tx, index: int, resumes, continuation: bool, inside_call: bool = False,
                 backend=None, dynamic=None):
        self.tx = tx
        self.inside_call = inside_call  # the decline happened inside the function this call calls
        self.backend = backend
        self.dynamic = dynamic  # the dynamic-shape mode the callees optimized at the break get
        self.index = index
        self.resumes = resumes  # makes the optimized resume functions: see cache.FunctionCache
        self.continuation = continuation  # a resume function's entry: return Continue
        self.functions = []  # the resume functions, per exit
        # The with regions open here: the graph leaves them, the entry enters them again.
        self.regions = Regions(tx, index)

    def roots(self) -> list:
        return [v for v in self.tx.stack if v is not NULL] + list(self.tx.f_locals.values())

    def lines(self, rb) -> list[str]:
        inst = self.tx.instructions[self.index]
        rb.at_break = True  # a started generator is not made again here (generator_rebuild.py)
        # Outside containers get their new contents first: what is rebuilt next may read
        # them (an iterator over an outside list resumes at its position in the new list).
        writeback = writeback_lines(rb, self.tx.output)
        before = len(rb.prelude)
        result = Native(f"{rb.ns.prefix}r")
        rb.ns.reserve(result.name)
        reentry = self.regions.reentry_lines(rb) if self.regions else []
        at = AtBreak(self.tx, self.index, result, rb, lambda fn: self._callee(rb, fn), _untraced)
        text, value, exits = AT_BREAK[inst.opname].render(at)
        native = []
        if text is not None:  # the instruction itself (a jump has only its truth test)
            call = self._at_user_line(rb, text, value)
            native.append(f"{result.name} = {call}" if value else call)
        if exits[0].cond is not None:  # the truth test runs natively too
            cond = rb.ns.prefix + "cond"
            rb.ns.reserve(cond)
            truth = f"{rb.ns.bind(bool, 'bool')}({exits[0].cond})"
            native.append(f"{cond} = {self._at_user_line(rb, truth, True)}")
        self.functions = []
        out = []
        for ex in exits:
            args, fn = self._resume_call(rb, ex)
            call = (f"{rb.ns.bind(Continue, 'Continue')}({fn}, ({args}))" if self.continuation
                    else f"{rb.ns.bind(drive, 'drive')}({fn}, ({args}))")
            out += [f"return {call}"] if ex.cond is None else [f"if {cond}:", f"    return {call}"]
        hooked = region(self.backend, self.dynamic)
        if hooked is not None and native:  # what the instruction calls is optimized frame by frame
            native = [f"with {rb.ns.bind(hooked, 'hooked')}:", *("    " + line for line in native)]
        if self.regions.raising:
            native = self._raising_into_regions(rb, native)
        # The prelude (containers rebuilt for the operands, stack and locals: their state
        # at the break) runs before the native instruction, which may change them.
        where = f"# {self.tx.code.co_filename}:{inst.lineno}: {inst.opname} runs natively"
        return [*rb.prelude[:before], *writeback, *rb.prelude[before:], *reentry, where, *native, *out]

    def _raising_into_regions(self, rb, native: list[str]) -> list[str]:
        """The native instruction inside open with regions: an exception it raises is
        raised again where the instruction was, in a function generated from the original
        code (`raising` resume code), so the blocks' handlers call the real exits with it
        as eager's do; a suppressing exit goes on after its block there. The call is made
        after the except clause: what runs after a suppression must not see the exception
        as being handled."""
        tx, index = self.tx, self.index
        why = why_not_resumable(tx.code, index)
        if why is not None:
            unsupported("construct", f"cannot raise again where the native instruction was: {why}")
        nulls, carried = stack_layout(tx.code, index, tx.stack)
        names = _live_names(tx, index)
        fn = rb.ns.bind(resume_function(_frame_function(tx), tx.code, index, nulls, names, raising=True),
                        "raise_in")
        values = [carry(rb, i, carried, rb.expr(v)) for i, v in enumerate(tx.stack) if v is not NULL]
        values += [rb.expr(local_value(tx, n)) for n in names]
        exc, caught = rb.ns.prefix + "exc", rb.ns.prefix + "e"
        rb.ns.reserve(exc)
        rb.ns.reserve(caught)
        return ["try:", *("    " + line for line in native),
                f"except BaseException as {caught}:", f"    {exc} = [{caught}]",
                "else:", f"    {exc} = None",
                f"if {exc} is not None:",  # the list, emptied: no frame keeps the exception
                f"    return {fn}({''.join(v + ', ' for v in values)}{exc}.pop())"]

    def _at_user_line(self, rb, text: str, value: bool) -> str:
        """A call running `text` (an expression with `value`, else a statement) in a function
        compiled at the user's file and line, named as the user's function: a traceback
        through the native instruction shows where the user wrote it."""
        import ast
        lineno = self.tx.instructions[self.index].lineno
        if not lineno or lineno < 2:
            return text
        tree = ast.parse(text, mode="eval" if value else "exec")
        names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(rb.ns.values))
        name = self.tx.code.co_name if self.tx.code.co_name.isidentifier() else "native"
        body = f"return {text}" if value else text
        src = "\n" * (lineno - 2) + f"def {name}({', '.join(names)}):\n    {body}\n"
        scope = dict(rb.ns.values)
        scope["__builtins__"] = builtins
        exec(compile(src, self.tx.code.co_filename, "exec"), scope)
        run_plainly(scope[name].__code__)
        return f"{rb.ns.bind(scope[name], 'at_user_line')}({', '.join(names)})"

    def _resume_call(self, rb, ex: Exit):
        tx = self.tx
        nulls, carried = stack_layout(tx.code, ex.target, ex.stack)
        names = _live_names(tx, ex.target)
        why = why_not_resumable(tx.code, ex.target)
        if why is not None:
            unsupported("construct", f"cannot resume after a graph break here: {why}")
        fn = self.resumes(ex.target, nulls, names)
        self.functions.append(fn)
        values = [carry(rb, i, carried, v.name if isinstance(v, Native) else rb.expr(v))
                  for i, v in enumerate(ex.stack) if v is not NULL]
        values += [rb.expr(local_value(tx, n)) for n in names]
        return "".join(v + ", " for v in values), rb.ns.bind(fn, "resume")

    # --- the native instruction (rendered by its opcode family: interpreter/opcodes/at_break.py)
    def _callee(self, rb, fn):
        """What the native call calls. When the decline happened inside a Python function
        this call runs, that function is optimized on its own (it breaks where it must and
        its other code is captured), as a frame would be; else the callable itself."""
        if not self.inside_call or self.backend is None:
            return rb.expr(fn)
        if isinstance(fn, FunctionApplyVariable):  # its forward declined: run it as a frame of its own
            rb.expr(fn)  # reachable (else no break)
            return rb.ns.bind(optimized_apply(fn.fn_cls, self.backend, self.dynamic), "apply")
        module_call = optimized_module_call(fn, self.backend, self.dynamic)
        if module_call is not None:
            return rb.ns.bind(module_call, "module_call"), rb.expr(fn)
        target = optimizable_callee(fn)
        if target is None:
            return rb.expr(fn)
        func, obj = target
        optimized = rb.ns.bind(optimized_function(func, self.backend, self.dynamic), "optimized")
        return optimized if obj is None else (optimized, rb.expr(obj))


def _untraced(operands, fn=None) -> bool:
    """An operand is a value the trace holds without reading (a clock reading), or the
    callable is a C function the trace does not model: the native result is an untraced
    value too (resume.UNTRACED_RESULT)."""
    return isinstance(fn, OpaqueCallableVariable) or any(isinstance(v, UntracedValueVariable) for v in operands)


def _live_names(tx, target: int) -> tuple:
    """The resume function's locals: the frame's cells by reference where the resume code
    can read them through parameters, else by value (liveness.live_names)."""
    return live_names(tx, target, cells_by_reference=bool(tx.code.co_cellvars)
                      and why_cells_not_passed(tx.code) is None)


def _frame_function(tx):
    """A function over the frame's code with its globals and closure (what a function
    generated from that code needs of the original)."""
    closure = tuple(tx.cells[n].cell for n in tx.code.co_freevars)
    return types.FunctionType(tx.code, tx.f_globals, tx.code.co_name, None, closure or None)
