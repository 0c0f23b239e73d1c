"""InstructionTranslator: symbolic execution of one code object.

A value stack and locals of VariableTrackers, `step()` over the normalized instruction
list, one handler per opcode, looked up in a dispatch table built once at class creation
from the methods named exactly after opcodes. Calls into Python functions are inlined by
a child translator sharing the same OutputGraph.
"""
from __future__ import annotations

import builtins
import sys

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .._compat import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, CO_ITERABLE_COROUTINE, VERSION
from ..exc import Raised, Unsupported, current_location, format_location, unsupported
from ..frame_hook import in_torch_or_stdlib
from ..graph import OutputGraph
from ..guards import Guard
from ..instructions import normalize
from ..logs import get_logger
from ..sources import GlobalSource, LocalSource, ObjectSource
from ..variables.base import NULL
from ..variables.builder import wrap
from ..variables.c_callables import wrap_untraced_result
from ..codegen import code_signature
from ..variables.call_binding import bind_arguments
from ..variables.cells import CellVariable, FrameCellVariable, frame_cells
from ..variables import function_modes
from ..variables.functions import UserFunctionVariable
from ..variables.global_stores import stored_global
from .opcodes.binary import BinaryOps
from .opcodes.build import BuildOps
from .opcodes.calls import CallOps
from .opcodes.class_bodies import ClassBodyOps
from .opcodes.control import ControlOps
from .opcodes.exceptions import ExceptionOps
from .opcodes.generators import GeneratorOps
from .opcodes.jumps import JumpOps
from .opcodes.load_store import LoadStoreOps
from .opcodes.matching import MatchOps
from .opcodes.stack import StackOps
from .run_ends import _Return, _Yield
from .tracker_services import TrackerServices
from ..variables.constant import ConstantVariable
from ..variables.generators import check_at_trace_end, GeneratorVariable

trace_log = get_logger("trace")
bytecode_log = get_logger("bytecode")

MAX_INLINE_DEPTH = 48
MAX_INSTRUCTIONS = 2_000_000
_NOT_PLAIN = CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR


class StoppedForBreak(Exception):
    """Internal: a restarted trace reached the instruction the frame breaks at; the
    translator (`tx`) holds the stack and locals just before it."""

    def __init__(self, tx):
        super().__init__("stopped just before the instruction the graph breaks at")
        self.tx = tx


class InstructionTranslator(GeneratorOps, LoadStoreOps, StackOps, BinaryOps, JumpOps, BuildOps, CallOps, MatchOps,
                            ExceptionOps, ControlOps, ClassBodyOps, TrackerServices):
    dispatch: dict = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._build_dispatch()

    @classmethod
    def _build_dispatch(cls):
        cls.dispatch = {name: getattr(cls, name) for name in dir(cls)
                        if name.isupper() and callable(getattr(cls, name))}

    def wrap(self, value, source):
        """The tracker of real `value` reached at `source` (builder.wrap): how trackers, which
        builder imports, reach it without importing it."""
        return wrap(self, value, source)

    def __init__(self, output: OutputGraph, code, f_locals: dict, cells: dict, f_globals: dict,
                 depth: int = 0, counter=None, logs=None):
        self.output = output
        self.code = code
        self.instructions = normalize(code)
        self.f_locals = f_locals
        self.cells = cells
        self.f_globals = f_globals
        self.f_builtins = _builtins_of(f_globals)
        self.stack: list = []
        self.ip = 0
        self.depth = depth
        self.kw_names = None  # 3.11/3.12 KW_NAMES for the next CALL
        self.counter = counter if counter is not None else [0]
        self.logs = logs  # a _TraceLogs while the trace or bytecode log is on, else None
        self.generator = False  # run as a generator's body: YIELD_VALUE suspends the run loop
        self.yield_inst = None  # the yield it is suspended at
        # The frame being optimized (not an inlined call): a decline inside it is marked with
        # the instruction it happened at, and `stop_at` (an instruction count) stops it there.
        self.is_root = False
        self.stop_at = None
        self.exc_info = None  # the exception being handled (an except/finally block), if any
        # 3.10's block stack (blocks.py): TryBlock (SETUP_FINALLY), WithBlock (SETUP_WITH),
        # HandlerBlock (a handler entered in the trace); 3.11+: unused.
        self.blocks: list = []
        self.direct_call = None  # the index of the call instruction inlining a function now
        self.namespace = None  # a class body's names (a DictVariable): opcodes/class_bodies.py

    # --- the run loop --------------------------------------------------------------
    def run(self):
        if self.logs is not None:
            return self.logs.run(self)
        return self._run(self.dispatch)

    def _run(self, dispatch):
        insts = self.instructions
        filename = self.code.co_filename
        last_line = None
        counter = self.counter
        limit = MAX_INSTRUCTIONS if self.stop_at is None else min(MAX_INSTRUCTIONS, self.stop_at - 1)
        token = current_location.set((filename, self.code.co_firstlineno))
        start = self.ip
        step = counter[0]
        frames = self.output.frames
        frames.append(self)
        try:
            while True:
                start = self.ip
                inst = insts[start]
                self.ip += 1
                if inst.lineno is not None and inst.lineno != last_line:
                    last_line = inst.lineno
                    current_location.set((filename, last_line))
                counter[0] += 1
                step = counter[0]
                if step > limit:
                    if counter[0] == self.stop_at:
                        self.ip = start
                        raise StoppedForBreak(self)
                    unsupported("construct", "the trace ran too many instructions (an unbounded loop?)")
                handler = dispatch.get(inst.opname)
                if handler is None:
                    unsupported("opcode", f"opcode {inst.opname} is not supported (Python {VERSION})")
                try:
                    handler(self, inst)
                except Raised as e:
                    if not self.catch(e, start):
                        raise
                except GuardOnDataDependentSymNode as e:
                    # a decision on a value read from a tensor (config.capture_scalar_outputs)
                    unsupported("data_dependent", f"a value read from tensor data decides a branch or a "
                                                  f"constant ({_first_line(e)})")
                except Unsupported as e:
                    if e.raised_args is None or e.raised_at is not None:
                        raise
                    raised = self.builtin_raised(e, start)  # a builtin's own exception (exc.builtin_raises)
                    if not self.catch(raised, start):
                        raise raised from None
        except _Return as r:
            if self.is_root and self.output.function_modes:
                unsupported("call", "the function returns with a torch function mode still entered",
                            no_break=function_modes.NO_BREAK)
            return r.value
        except Unsupported as e:
            if e.no_break is None and self.is_root and self.output.function_modes:
                e.no_break = function_modes.NO_BREAK
            if isinstance(e, Raised) and self.is_root and e.break_at is None:
                made = e.value.made_at  # made by a call of this frame: break there, as before
                if made is not None and made[0] is self:
                    e.break_at = made[1:]
            if e.raised is not None and e.raised_at is None:
                e.raised_at = (self, start)  # the frame the raise is in, innermost first
            if e.no_break is not None:
                pass  # no frame may break for it (exc.READS_FRAME)
            elif not self.is_root:
                e.inside_call = True  # declined inside a call the frame made (breaks.py)
            elif e.break_at is None:
                e.break_at = (start, step)  # where this frame could break (breaks.py)
            raise
        except (_Yield, StoppedForBreak):
            raise
        except Exception as e:
            # Not a decline: a bug of the tracer's. Remember the innermost instruction.
            if getattr(e, "_minidynamo_at", None) is None:
                e._minidynamo_at = (format_location(current_location.get()), inst)
            raise
        finally:
            frames.pop()
            current_location.reset(token)

    # --- stack helpers ---------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # --- inlining ----------------------------------------------------------------
    def call_directly(self, fn_var, args: list, kwargs: dict):
        """`fn_var(*args, **kwargs)` made by the current instruction itself (a call, or a
        protocol method such as `obj[key]`'s __getitem__, which lets what it raises through
        unchanged): an exception its frames raise may be caught by this frame."""
        self.direct_call = self.ip - 1
        try:
            return fn_var.call_function(self, args, kwargs)
        finally:
            self.direct_call = None

    def inline_call(self, fn_var, args: list, kwargs: dict, namespace=None):
        """Inline a call of `fn_var`; with `namespace`, run it as a class body, its names there."""
        flags = fn_var.get_code().co_flags
        if flags & _NOT_PLAIN:
            if (flags & _NOT_PLAIN) == CO_GENERATOR:  # a generator object; its body runs as it is pulled
                return GeneratorVariable(self.start_generator(fn_var, args, kwargs), fn_var, args, kwargs)
            unsupported("generator", f"calling {fn_var.describe()}, a coroutine or async generator function")
        direct, self.direct_call = self.direct_call, None  # only the call instruction's own callee
        child = self._child(fn_var, args, kwargs)
        child.namespace = namespace
        try:
            return child.run()
        except Raised as e:
            e.through = (self, direct) if direct is not None else None
            raise
        except Unsupported as e:
            # A decline inside torch or the standard library: say which line of the user's
            # code led there (the call this frame is making), once, from the outermost such call.
            if e.reached_from is None and in_torch_or_stdlib(child.code.co_filename) \
                    and not in_torch_or_stdlib(self.code.co_filename):
                e.reached_from = format_location((self.code.co_filename, self._line_at(self.ip - 1)))
            raise

    def _line_at(self, index: int) -> int | None:
        """The source line of instruction `index` (the nearest one before it that has one)."""
        for inst in reversed(self.instructions[:index + 1]):
            if inst.lineno is not None:
                return inst.lineno
        return self.code.co_firstlineno

    def start_generator(self, fn_var, args: list, kwargs: dict) -> "InstructionTranslator":
        """A child translator over a generator function's body, not yet run: a
        GeneratorVariable pulls it, `run_to_yield` and `resume` drive a
        @contextlib.contextmanager's setup and teardown."""
        child = self._child(fn_var, args, kwargs)
        child.generator = True
        return child

    def _child(self, fn_var, args: list, kwargs: dict) -> "InstructionTranslator":
        """A translator for a call of `fn_var`, its arguments bound as CPython binds them."""
        code = fn_var.get_code()
        if self.depth + 1 > MAX_INLINE_DEPTH:
            unsupported("construct", f"call depth over {MAX_INLINE_DEPTH} (recursion?) at {fn_var.describe()}")
        f_locals = bind_arguments(fn_var, self, code, list(args), dict(kwargs))
        cells = make_cells(code, f_locals, fn_var.closure_cells(self))
        child = InstructionTranslator(self.output, code, f_locals, cells, fn_var.get_globals(),
                                      self.depth + 1, self.counter, self.logs)
        child.exc_info = self.exc_info  # a bare raise in a callee re-raises the caller's
        return child

    def run_to_yield(self):
        """Run until the generator yields; the yielded value."""
        try:
            self.run()
        except _Yield as y:
            return y.value
        unsupported("exceptions", "RuntimeError: generator didn't yield")

    def resume(self) -> None:
        """Go on after a yield (`next(gen)` sends None) until the generator returns."""
        self.push(ConstantVariable(None))
        try:
            self.run()
        except _Yield:
            unsupported("exceptions", "RuntimeError: generator didn't stop")

    def resume_raising(self, exc) -> bool:
        """contextlib's `__exit__` for `exc` leaving the block: raised in the generator at
        its yield (as `gen.throw(exc)`). True where the body caught it and returned (the
        exit suppresses it), False where it left the body unchanged (it goes on); another
        exception leaving the body is raised from here."""
        if issubclass(exc.exc_type, (StopIteration, GeneratorExit)):
            unsupported("exceptions", f"{exc.exc_type.__name__} leaving a contextmanager block")
        index = self.instructions.index(self.yield_inst)
        if self.exc_info is not None and self.exc_info is not exc:
            exc.context = self.exc_info
        self.push(ConstantVariable(None))  # gen_send_ex pushes the sent None before it unwinds
        raised = Raised(exc, (self, index), f"{exc.exc_type.__qualname__} thrown into a contextmanager")
        if not self.catch(raised, index):
            if not raised.catchable:
                unsupported("exceptions", "an exception thrown into a contextmanager generator suspended "
                                          "inside a with block of its own")
            return False
        try:
            self.run()
        except _Yield:
            unsupported("exceptions", "RuntimeError: generator didn't stop after throw()")
        except Raised as e:
            if e.value is exc:
                return False  # re-raised as it was: the exit answers False
            if not e.catchable or (e.origin[0] is not self and (e.through or (None,))[0] is not self):
                raise
            if issubclass(e.value.exc_type, (StopIteration, RuntimeError)):
                unsupported("exceptions", "a contextmanager raising StopIteration or RuntimeError on exit "
                                          "(contextlib compares it with the exception thrown in)")
            raise  # the with statement's frame may catch it (WITH_EXCEPT_START)
        return True

    def load_global(self, name: str):
        g = self.f_globals
        stored = stored_global(self.output, g, name)  # assigned by the trace
        if stored is not None:
            return stored
        if name in g:
            return wrap(self, g[name], GlobalSource(name, g))
        if name in self.f_builtins:
            # A builtin has no source (nothing to guard) and so no memo in wrap; `super` or
            # `len` read in every inlined call would walk the wrapping rules each time.
            # A global defined later shadows it: guarded, one check per globals dict for all
            # the names read through it (the guard's set grows as the trace reads more).
            names = self.output.builtins_read.get(id(g))
            if names is None:
                names = self.output.builtins_read[id(g)] = set()
                self.output.guards.add(Guard("NOT_IN_GLOBALS", ObjectSource(g, "globals()"), None, {"names": names}))
            names.add(name)
            value = self.f_builtins[name]
            seen = self.output.builtins_wrapped.get(name)
            if seen is not None and seen[0] is value:
                return seen[1]
            var = wrap(self, value, None)
            self.output.builtins_wrapped[name] = (value, var)
            return var
        unsupported("exceptions", f"NameError: name {name!r} is not defined")


InstructionTranslator._build_dispatch()


def _builtins_of(f_globals: dict) -> dict:
    b = f_globals.get("__builtins__", builtins)
    return b if isinstance(b, dict) else vars(b)


def make_cells(code, f_locals: dict, free_cells: dict) -> dict:
    """Cells of a frame: its own cellvars (an argument's cell starts with its value) and
    the free variables it closes over."""
    cells = {}
    for name in code.co_cellvars:
        cells[name] = CellVariable(name, f_locals.pop(name, None))
    cells.update(free_cells)
    return cells


def trace(output: OutputGraph, fn, args: tuple, kwargs: dict, stop_at: int | None = None):
    """Trace a call of the plain function `fn`; returns the tracker of its return value.
    With `stop_at` (the instruction count a decline happened at), raise StoppedForBreak
    just before that instruction instead. A resume function (resume.py) is traced as its
    original code from the resume point, its stack and locals bound from the arguments."""
    info = getattr(fn, "_minidynamo_resume", None)
    code = fn.__code__ if info is None else info.code
    if code.co_flags & _NOT_PLAIN:
        unsupported("generator", f"{fn.__qualname__} is a generator or coroutine function")
    try:
        bound = code_signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        unsupported("exceptions", f"TypeError: {fn.__name__}() {e}")
    bound.apply_defaults()
    logs = _TraceLogs.if_enabled()
    tx = InstructionTranslator(output, code, {}, {}, fn.__globals__, logs=logs)
    tx.is_root, tx.stop_at = True, stop_at
    untraced = info.untraced_results if info is not None else ()
    passed = {}  # the frame's cells handed over by reference: original name → tracker
    if info is not None:
        shared = frame_cells(output)
        for param, name in info.cells.items():
            cell = bound.arguments.pop(param)
            passed[name] = shared[id(cell)] = FrameCellVariable(cell, name, LocalSource(param))

    def bind(name, value):
        if name in untraced:
            return wrap_untraced_result(tx, value, LocalSource(name))
        return wrap(tx, value, LocalSource(name))  # a closure over passed cells: by its code (builder.py)

    f_locals = {name: bind(name, value) for name, value in bound.arguments.items()}
    if info is not None:
        stack = iter([f_locals.pop(name) for name in info.stack_names])
        tx.stack = [NULL if null else next(stack) for null in info.nulls]
        tx.ip = info.target
        f_locals = {original: f_locals[param] for param, original in zip(info.params, info.originals)
                    if param in f_locals}
    tx.f_locals = f_locals
    tx.cells = make_cells(code, f_locals, UserFunctionVariable(fn).closure_cells(tx))
    tx.cells.update(passed)
    try:
        result = tx.run()
    except StoppedForBreak:
        check_at_trace_end(output, "at the graph break")
        raise
    check_at_trace_end(output, "when the function returns")
    return result


class _TraceLogs:
    """What the `trace` and `bytecode` logs want, decided once per trace: when both are
    off, the translator gets None and its run loop is the plain one.

    trace (info): each traced or inlined call, and a summary when it returns.
    +trace (debug): every instruction with the top of the value stack.
    +bytecode (debug): each code object's normalized instruction list, once per trace."""

    def __init__(self, calls: bool, instructions: bool, bytecode: bool):
        self.calls = calls
        self.instructions = instructions
        self.bytecode = bytecode
        self.shown: set = set()  # code objects whose bytecode this trace has logged

    @classmethod
    def if_enabled(cls):
        calls = trace_log.isEnabledFor(20)
        bytecode = bytecode_log.isEnabledFor(10)
        if not (calls or bytecode):
            return None
        return cls(calls, trace_log.isEnabledFor(10), bytecode)

    def run(self, tx):
        code = tx.code
        where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        indent = "  " * tx.depth
        if self.bytecode and code not in self.shown:
            self.shown.add(code)
            bytecode_log.debug("%s, normalized:\n%s", where, "\n".join(
                f"  {i:4d} {'' if inst.lineno is None else inst.lineno:>5} {inst!r}"
                for i, inst in enumerate(tx.instructions)))
        if not self.calls:
            return tx._run(tx.dispatch)
        trace_log.info("%s%s %s, %d instructions", indent, "inline" if tx.depth else "trace",
                       where, len(tx.instructions))
        start = tx.counter[0]
        dispatch = _logged_dispatch(type(tx)) if self.instructions else tx.dispatch
        try:
            result = tx._run(dispatch)
        except _Yield as y:
            trace_log.info("%s%s yielded %s after %d instructions", indent, code.co_name, _short(y.value),
                           tx.counter[0] - start)
            raise
        except BaseException as e:
            trace_log.info("%s%s stopped after %d instructions: %s", indent, code.co_name,
                           tx.counter[0] - start, e)
            raise
        trace_log.info("%s%s returned %s after %d instructions (graph: %d ops)", indent, code.co_name,
                       _short(result), tx.counter[0] - start, tx.output.op_count)
        return result


_LOGGED: dict = {}


def _logged_dispatch(cls) -> dict:
    """cls.dispatch with every handler logging its instruction first (+trace only)."""
    table = _LOGGED.get(cls)
    if table is None:
        def logged(name, handler):
            def run(tx, inst):
                top = ", ".join(_short(v) for v in tx.stack[-3:])
                more = "..., " if len(tx.stack) > 3 else ""
                trace_log.debug("%s%s:%s %r  stack [%s%s]", "  " * tx.depth, tx.code.co_name,
                                inst.lineno, inst, more, top)
                return handler(tx, inst)
            return run
        table = _LOGGED[cls] = {name: logged(name, h) for name, h in cls.dispatch.items()}
    return table


def _short(v) -> str:
    try:
        text = v.describe() if hasattr(v, "describe") else repr(v)
    except Exception:
        text = type(v).__name__
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["InstructionTranslator", "trace", "NULL", "sys"]


def _first_line(e) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
