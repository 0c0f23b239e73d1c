"""Raising and catching exceptions in the trace (3.11+'s exception table).

`raise` makes an `exc.Raised` carrying the exception's tracker (variables/exceptions.py).
The run loop hands it to `catch` for the instruction it came from: where the table covers
that instruction, the stack is cut to the entry's depth, lasti (an int, unused by the
handlers' RERAISE here) and the exception are pushed, and the trace goes on at the handler,
as CPython's exception_unwind does (https://docs.python.org/3.11/library/dis.html,
"exception table"). Handlers then run as ordinary code: PUSH_EXC_INFO, CHECK_EXC_MATCH,
POP_EXCEPT, RERAISE; `except E as e` clears `e` with its own STORE_FAST/DELETE_FAST.

A frame catches only an exception it models exactly: raised by its own instruction, or
left by a Python function its call instruction inlined directly (the frames between ran
nothing but their bytecode). A generator's body catches its own the same way; one leaving
it reaches its caller only through send/throw/close/`yield from`
(variables/generator_methods.py). One that came out of a model of a builtin (a map's
function, a generator pulled by list()), or that reaches the exit of a with statement
whose exit the trace does not call with it (`_traced_exit`), is caught by no frame any
more: it declines as before, so the eager run raises and handles it.

3.10 has no exception table: the translator keeps CPython's block stack (`tx.blocks`:
SETUP_FINALLY and SETUP_WITH push, POP_BLOCK pops). A raise unwinds it as ceval's
exception_unwind does: an except-handler block on the way is left (the stack cut to its
depth plus the 3 values of the exception it saved, which are popped and restored); at the
innermost try block the stack is cut to its depth, an except-handler block is pushed, then
the previous exception as 3 values and the new one as (tb, value, type), and the trace goes
on at the handler. A type slot holds the exception's tracker (read only by
JUMP_IF_NOT_EXC_MATCH), a traceback slot a None (never read by compiled handlers: a
RERAISE reads the value slot). A with block reached first is entered as on 3.11+.
Where an exception made in the optimized frame itself leaves it uncaught, the frame breaks
at the call that made it, as it did when making one declined.
"""
from __future__ import annotations

from ..._compat import PY311, PY314
from ...exc import Raised, Unsupported, raising, unsupported
from ...variables.constant import ConstantVariable
from ...variables.exceptions import ExceptionVariable, exception_class, make_exception, matches
from ..blocks import HandlerBlock, TryBlock, WithBlock
from ..except_clauses import may_catch_value_error

_RAISE_DETAIL = "a raise statement (the exception is raised by the eager run)"


def _raise_detail(exc) -> str:
    return f"raising {exc.exc_type.__qualname__} (the eager run raises it)"


def _none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def _traced_exit(v) -> bool:
    """Whether the trace calls the with-exit `v` with an exception: a quiet manager's, a
    user class's Python `__exit__`, a @contextlib.contextmanager generator's."""
    return _quiet_exit(v) is not None or getattr(v, "exit_raising", None) is not None


def _quiet_exit(v):
    """The manager whose bound `__exit__` `v` is, where that exit lets an exception through
    doing what it does on the normal way out (contexts.py's `exits_quietly`), else None."""
    cm = getattr(v, "cm", None)
    if getattr(v, "name", None) == "__exit__" and not getattr(v, "carried", True) and \
            getattr(cm, "exits_quietly", False):
        return cm
    return None


class ExceptionOps:
    # --- raising -------------------------------------------------------------------
    def throw(self, exc: ExceptionVariable, detail: str | None = None):
        """Raise `exc` at the current instruction."""
        raise Raised(exc, (self, self.ip - 1), detail or _raise_detail(exc))

    def made_here(self, cls, args=(), kwargs=None) -> ExceptionVariable:
        """`cls(*args)` made by the current instruction."""
        return make_exception(self, cls, list(args), kwargs or {}, (self, self.ip - 1, self.counter[0]))

    def builtin_raised(self, e, index: int) -> Raised:
        """The exception a model of a builtin raised at instruction `index`
        (exc.builtin_raises), raised in the trace; `e` itself where it is not modeled."""
        try:
            exc = make_exception(self, e.raised, e.raised_args, {})
        except Unsupported:
            raise e from None
        if self.exc_info is not None:
            exc.context = self.exc_info  # raised while handling another
        return Raised(exc, (self, index), e.detail)

    def _as_exception(self, value):
        """What `raise value` raises: an instance, or a class called without arguments."""
        if isinstance(value, ExceptionVariable):
            return value
        cls = exception_class(value)
        if cls is not None:
            return self.made_here(cls)
        return None

    def RAISE_VARARGS(self, inst):
        cause = self.pop() if inst.arg == 2 else None
        if inst.arg == 0:  # bare `raise`: the exception being handled
            if self.exc_info is None:
                unsupported("exceptions", "a bare raise outside a handler the trace entered "
                                          "(the eager run re-raises the caller's exception)")
            self.throw(self.exc_info)
        value = self.pop()
        exc = self._as_exception(value)
        if exc is None:
            cls = value.as_python_constant() if value.is_python_constant() else None
            if isinstance(cls, type) and issubclass(cls, BaseException):
                raising(cls, _RAISE_DETAIL)
            unsupported("exceptions", _RAISE_DETAIL)
        if cause is not None:  # raise ... from cause
            if _none(cause):
                exc.cause = None
            else:
                cause_exc = self._as_exception(cause)
                if cause_exc is None:
                    unsupported("exceptions", "TypeError: exception causes must derive from BaseException")
                exc.cause = cause_exc
            exc.suppress_context = True
        if self.exc_info is not None and self.exc_info is not exc:
            exc.context = self.exc_info  # raised while handling another
        self.throw(exc)

    # --- catching ------------------------------------------------------------------
    def catch(self, e: Raised, index: int) -> bool:
        """Go on at the handler covering instruction `index` for `e`, raised by it or by
        the call it made: False where this frame does not catch it (it propagates)."""
        if not e.catchable or not (e.origin == (self, index) or e.through == (self, index)):
            e.catchable = False
            if self._covered(index):
                e.may_be_caught = True
            return False
        if not PY311:
            return self._catch_310(e)
        entry = self.instructions[index].handler
        if entry is None:
            return False  # the frame's caller may catch it
        if self.generator and self.instructions[entry[0]].opname == "CALL_INTRINSIC_1":
            # A generator's body (3.12+: inside the handler that turns StopIteration into
            # RuntimeError): its driver sees it leave the body (variables/generator_methods.py).
            e.may_be_caught = True
            return False
        target, depth, lasti = entry
        if self._with_exit(target) and not _traced_exit(self.stack[depth - (2 if PY314 else 1)]):
            e.catchable = False  # a with statement's __exit__ would get it: not modeled
            e.may_be_caught = True
            return False
        assert depth <= len(self.stack), (depth, len(self.stack))
        del self.stack[depth:]
        if lasti:
            self.push(ConstantVariable(index))
        self.push(e.value)
        self.ip = target
        return True

    def _catch_310(self, e: Raised) -> bool:
        """3.10: unwind the block stack to the innermost try block's handler."""
        blocks = self.blocks
        if not any(type(b) is TryBlock or type(b) is WithBlock and _traced_exit(self.stack[b.depth - 1])
                   for b in blocks):
            if any(type(b) is WithBlock for b in blocks):
                e.catchable = False  # a with statement's __exit__ would get it on the way out
                e.may_be_caught = True
            return False  # nothing here catches it; the frame's caller may
        while blocks:
            block = blocks.pop()
            depth = block.depth
            if type(block) is HandlerBlock:  # leaving a handler: the exception it saved comes back
                del self.stack[depth + 3:]
                self._restore_exc_info()
                continue
            if type(block) is not TryBlock and not _traced_exit(self.stack[depth - 1]):
                e.catchable = False  # a with statement's __exit__ would get it: not modeled
                e.may_be_caught = True
                return False
            assert depth <= len(self.stack), (depth, len(self.stack))
            del self.stack[depth:]
            blocks.append(HandlerBlock(None, depth))
            none = ConstantVariable(None)
            prev = none if self.exc_info is None else self.exc_info
            self.stack += [none, prev, prev]  # the previous exception: tb, value, type
            self.exc_info = e.value
            self.stack += [none, e.value, e.value]  # this one: tb, value, type (its tracker)
            self.ip = block.target
            return True
        return False

    def _covered(self, index: int) -> bool:
        """Whether a try or with block of this frame is around instruction `index`."""
        if PY311:
            return self.instructions[index].handler is not None
        return any(type(b) in (TryBlock, WithBlock) for b in self.blocks)

    def in_try_block(self) -> bool:
        """Whether the instruction running now (a call, in a caller's frame) is inside a try
        statement of this frame whose handler may catch what an aten op raises from its
        tensors' values (except_clauses.py: `except NotImplementedError` does not); a
        `finally` and a with statement's exit, which let the exception through, are looked
        past to the handler around them."""
        if not PY311:
            return any(type(b) is TryBlock and self._catches(b.target) for b in self.blocks)
        insts, index = self.instructions, self.ip - 1
        for _ in range(len(insts)):  # each step moves to an enclosing handler
            entry = insts[index].handler
            if entry is None:
                return False
            target = entry[0]
            passes = self._with_exit(target) or (insts[target].opname == "COPY"
                                                 and insts[target + 1].opname == "POP_EXCEPT")
            if not passes and self._catches(target):
                return True
            index = target  # a with's exit, a finally, or the cleanup that re-raises: where it goes next
        return True

    def _catches(self, target: int) -> bool:
        return may_catch_value_error(self.instructions, target, self.f_globals)

    def _restore_exc_info(self):
        """3.10: pop an except-handler block's 3 saved values (type, value, tb), restored."""
        _type, value, _tb = self.pop(), self.pop(), self.pop()
        self.exc_info = None if _none(value) else value

    def _with_exit(self, target: int) -> bool:
        insts = self.instructions
        while insts[target].opname == "SETUP_EXCEPT":
            target += 1
        return insts[target].opname == "PUSH_EXC_INFO" and insts[target + 1].opname == "WITH_EXCEPT_START"

    # --- handlers ------------------------------------------------------------------
    def PUSH_EXC_INFO(self, inst):  # 3.11+: exc → previous exc_info, exc
        exc = self.pop()
        self.push(ConstantVariable(None) if self.exc_info is None else self.exc_info)
        self.exc_info = exc
        self.push(exc)

    def POP_EXCEPT(self, inst):  # 3.11+: previous exc_info →, restored
        if not PY311:  # 3.10: the except-handler block goes, its 3 saved values restored
            if not self.blocks or type(self.blocks[-1]) is not HandlerBlock:
                unsupported("exceptions", "POP_EXCEPT outside a handler the trace entered")
            self.blocks.pop()
            self._restore_exc_info()
            return
        prev = self.pop()
        self.exc_info = None if _none(prev) else prev

    def CHECK_EXC_MATCH(self, inst):  # 3.11+: exc, type → exc, bool
        spec = self.pop()
        exc = self.stack[-1]
        if not isinstance(exc, ExceptionVariable):
            unsupported("exceptions", f"matching {exc.describe()} against an except clause")
        self.push(ConstantVariable(matches(exc, spec)))

    def JUMP_IF_NOT_EXC_MATCH(self, inst):  # 3.10: type, spec → ; jump unless it matches
        spec = self.pop()
        exc = self.pop()
        if not isinstance(exc, ExceptionVariable):
            unsupported("exceptions", f"matching {exc.describe()} against an except clause")
        if not matches(exc, spec):
            self.ip = inst.target

    def RERAISE(self, inst):  # 3.11+: [lasti,] exc → raised again from here
        if not PY311:  # 3.10: tb, value, type → the value raised again
            self.pop()
            exc = self.pop()
            self.pop()
        else:
            exc = self.pop()
        if not isinstance(exc, ExceptionVariable):
            unsupported("exceptions", f"re-raising {exc.describe()}")
        self.throw(exc)

    def WITH_EXCEPT_START(self, inst):  # ..., exit, [3.14: NULL,] lasti, prev exc, exc → ..., exit's answer
        # (3.10: ..., exit, 3 values of the previous exception, tb, value, type). `catch`
        # enters a with's cleanup only for an exit the trace calls with the exception: a
        # quiet manager is left as on the normal way out, its answer falsy; a Python exit
        # answers for itself (a true answer suppresses it, else RERAISE raises it on).
        exit_ = self.stack[-7 if not PY311 else -5 if PY314 else -4]
        cm = _quiet_exit(exit_)
        if cm is not None:
            cm.exit(self)
            self.push(ConstantVariable(None))
            return
        exit_raising = getattr(exit_, "exit_raising", None)
        exc = self.stack[-2 if not PY311 else -1]
        if exit_raising is None or not isinstance(exc, ExceptionVariable):
            unsupported("exceptions", "an exception leaving a with block")
        try:
            answer = exit_raising(self, exc)
        except Raised as e:
            if e.catchable and e.origin[0] is not self:
                e.through = (self, self.ip - 1)  # left the exit's own frame: caught here or above
            raise
        if not answer.is_python_constant():
            unsupported("exceptions", f"the truth of {answer.describe()}, a with statement's __exit__ answer")
        self.push(answer)
