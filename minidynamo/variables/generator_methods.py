"""`gen.send(value)`, `gen.throw(exc)` and `gen.close()` on a generator made in the trace
(variables/generators.py), and the step `yield from` takes, as CPython's gen_send_ex,
_gen_throw and gen_close do them.

Each drives the body one step and gets an outcome: it yielded an item, it returned a
value, or an exception left it (one the body raised itself, modeled exactly; it ends the
generator, a StopIteration becoming PEP 479's RuntimeError). The method then gives the
caller what CPython gives: the item; StopIteration(return value), or close()'s result;
the exception, raised at the caller's call instruction so a try there may catch it.

send: the value becomes the result of the yield the body is suspended at; a generator
not started takes only None.

throw: the exception is raised at the yield the body is suspended at (CPython pushes the
sent None first, then unwinds): the body's own handlers run through the translator's
`catch` (a with block whose exit the trace does not call declines there), and the body goes on to its next yield, its
return, or lets the exception out. Into a generator not started or finished it is raised
straight back to the caller (3.10/3.11: a StopIteration thrown into one not started
becomes the RuntimeError). Suspended in `yield from` a generator, the delegate gets the
throw first: its item is the outer's item; its return value is what the `yield from`
evaluates to (the outer runs on); its exception is raised in the outer at the yield. A
delegate without a throw method (an iterator over a container) leaves the exception to
the outer. GeneratorExit closes the delegate and is raised in the outer.

next: send(None), its StopIteration left to the caller (next(gen, default) gives the default).

close: GeneratorExit thrown (see above); a body that yields instead raises eager's
RuntimeError in the caller; one that returns makes close() return None (3.13+: its return
value); a GeneratorExit leaving the body is close()'s normal end, any other exception is
raised in the caller. A generator not started or finished just ends.
"""
from __future__ import annotations

from typing import NamedTuple

from .._compat import PY312, PY313
from ..exc import Raised, unsupported
from .constant import ConstantVariable
from .exceptions import ExceptionVariable, exception_class, make_exception


def _is_none(v) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _check_resumable(gen, what: str) -> None:
    state = gen.state
    if state == "running":
        unsupported("exceptions", f"ValueError: {gen.describe()} already executing")
    if state == "failed":
        unsupported("generator", f"{what} on a {gen.describe()} after a decline inside it")
    if len(gen.items.made) != gen.index:  # an item pulled ahead of the consumer (not by these methods)
        unsupported("generator", f"{what} on a {gen.describe()} read ahead of its consumer")


def _record(gen, item) -> None:
    """An item the body yielded to one of these methods, kept in step with next() (the
    items are read by position)."""
    gen.items.made.append(item)
    gen.index += 1


# What one step of a generator's body came to.
class Outcome(NamedTuple):
    value: object


class Yielded(Outcome):
    """It stopped at a yield with this item."""


class Returned(Outcome):
    """Its body returned this value (None: a finished generator's StopIteration)."""


class Failed(Outcome):
    """This exception left its body."""


def _stop_iteration_error(frame, exc: ExceptionVariable) -> ExceptionVariable:
    """PEP 479: a StopIteration leaving a generator's body becomes a RuntimeError."""
    if not issubclass(exc.exc_type, StopIteration):
        return exc
    error = make_exception(frame, RuntimeError, [ConstantVariable("generator raised StopIteration")], {})
    error.cause = error.context = exc
    error.suppress_context = True
    return error


def _left_body(gen, exc: ExceptionVariable):
    """`exc` left the body: the generator is finished, the caller gets it (PEP 479's)."""
    gen.state = "done"
    return Failed(_stop_iteration_error(gen.frame, exc))


# --- one step of the body ---------------------------------------------------------------

def _run(gen):
    """Run the body from where it stands: Yielded(item), Returned(value) or Failed(the
    exception that left it)."""
    try:
        item = gen.run_body()
    except Raised as e:
        if not e.catchable or e.origin[0] is not gen.frame and (e.through or (None,))[0] is not gen.frame:
            raise  # not modeled exactly: the eager run raises it
        return _left_body(gen, e.value)
    if item is None:
        return Returned(gen.return_value)
    return Yielded(item)


def _send(gen, value):
    """The outcome of sending `value` (None: next()); a finished generator returns None
    again (StopIteration without a value)."""
    if gen.state == "done":
        return Returned(None)
    if gen.state == "suspended":
        gen.frame.push(ConstantVariable(None) if value is None else value)  # the value of the yield
    return _run(gen)


def _throw_in(gen, exc: ExceptionVariable):
    """The outcome of raising `exc` in the body at its yield (CPython's _gen_throw)."""
    state = gen.state
    if state in ("created", "done"):
        if state == "created" and not PY312:  # 3.10/3.11 convert it in gen_send_ex
            return _left_body(gen, exc)
        gen.state = "done"
        return Failed(exc)
    delegate = _delegate(gen)
    if delegate is not None:
        outcome = _throw_to_delegate(gen, delegate, exc)
        if outcome is not None:
            return outcome
        # the delegate has no throw: the exception is the outer body's
    return _raise_at_yield(gen, exc)


def _raise_at_yield(gen, exc: ExceptionVariable):
    frame = gen.frame
    index = frame.instructions.index(frame.yield_inst)
    if frame.exc_info is not None and frame.exc_info is not exc:
        exc.context = frame.exc_info  # thrown into a generator handling an exception of its own
    frame.push(ConstantVariable(None))  # gen_send_ex pushes the sent None before it unwinds
    raised = Raised(exc, (frame, index), f"{exc.exc_type.__qualname__} thrown into a {gen.describe()}")
    if not frame.catch(raised, index):
        if not raised.catchable:
            gen.state = "failed"
            unsupported("generator", f"an exception thrown into a {gen.describe()} suspended inside a "
                                     "with block (its __exit__ would get it)")
        return _left_body(gen, exc)  # no handler of the body covers the yield
    return _run(gen)


def _delegate(gen):
    """The iterator a generator suspended in `yield from` delegates to, else None."""
    frame = gen.frame
    inst = frame.yield_inst
    if inst is None:
        return None
    if inst.opname == "YIELD_FROM":  # 3.10
        return frame.stack[-1]
    index = frame.instructions.index(inst)
    if index and frame.instructions[index - 1].opname == "SEND":  # 3.11+: SEND; YIELD_VALUE
        return frame.stack[-1]
    return None


def _throw_to_delegate(gen, delegate, exc):
    """`exc` thrown into `gen`'s delegate first (None: the delegate has no throw, the outer
    body gets the exception itself)."""
    from .generators import GeneratorVariable  # a cycle: generators.py imports these methods
    is_gen = isinstance(delegate, GeneratorVariable)
    if not is_gen and hasattr(delegate.python_type(), "throw"):
        unsupported("generator", f"throw() into a yield from {delegate.describe()}")
    if issubclass(exc.exc_type, GeneratorExit):  # the delegate is closed, then the outer gets it
        if is_gen:
            outcome = _as_delegate(gen, lambda: close_outcome(delegate))
            if type(outcome) is Failed:
                return _raise_at_yield(gen, outcome.value)
        elif hasattr(delegate.python_type(), "close"):
            unsupported("generator", f"closing a yield from {delegate.describe()}")
        return _raise_at_yield(gen, exc)
    if not is_gen:
        return None
    _check_resumable(delegate, "throw()")
    outcome = _as_delegate(gen, lambda: _throw_in(delegate, exc))
    if type(outcome) is Yielded:
        _record(delegate, outcome.value)
        return outcome
    if type(outcome) is Returned:  # the yield from ends with that value: SEND finds the delegate finished
        return _send(gen, ConstantVariable(None))
    return _raise_at_yield(gen, outcome.value)


def _as_delegate(gen, step):
    """Run `step` of the delegate while the outer generator is running (CPython marks it
    executing: the delegate's body cannot resume it)."""
    gen.state = "running"
    try:
        return step()
    finally:
        if gen.state == "running":
            gen.state = "suspended"


def close_outcome(gen):
    """The outcome of close(): Returned(close()'s result) or Failed(exception)."""
    if gen.state in ("created", "done"):
        gen.state = "done"
        return Returned(ConstantVariable(None))
    _check_resumable(gen, "close()")
    outcome = _throw_in(gen, make_exception(gen.frame, GeneratorExit, [], {}))
    if type(outcome) is Yielded:
        gen.state = "suspended"
        return Failed(make_exception(gen.frame, RuntimeError, [ConstantVariable("generator ignored GeneratorExit")], {}))
    if type(outcome) is Returned:
        return outcome if PY313 else Returned(ConstantVariable(None))
    if issubclass(outcome.value.exc_type, GeneratorExit):
        return Returned(ConstantVariable(None))
    return outcome


# --- the methods ------------------------------------------------------------------------

def _deliver(tx, gen, outcome, returned):
    """What the caller of send/throw gets: the item; `returned(value)`'s exception; the
    exception that left the body, raised at the caller's call instruction."""
    value = outcome.value
    if type(outcome) is Yielded:
        _record(gen, value)
        return value
    if type(outcome) is Returned:
        value = returned(value)
    tx.throw(value)


def _stop_iteration(tx, value):
    """The StopIteration a generator's return raises (`return None`: no args, as CPython)."""
    return tx.made_here(StopIteration, [] if value is None or _is_none(value) else [value])


def send(tx, gen, value):
    """`gen.send(value)`."""
    if gen.state == "created" and not _is_none(value):
        tx.throw(tx.made_here(TypeError, [ConstantVariable("can't send non-None value to a just-started generator")]))
    _check_resumable(gen, "send()")
    return _deliver(tx, gen, _send(gen, value), lambda v: _stop_iteration(tx, v))


def throw(tx, gen, args: list, kwargs: dict):
    """`gen.throw(exc)`: an exception object or class."""
    if len(args) != 1 or kwargs:
        unsupported("generator", f"throw() on a {gen.describe()} with {len(args)} arguments (only "
                                 "throw(exception) is traced; the (type, value, traceback) form is deprecated)")
    value = args[0]
    if isinstance(value, ExceptionVariable):
        exc = value
    elif (cls := exception_class(value)) is not None:
        exc = tx.made_here(cls)
    elif value.is_python_constant() and not isinstance(value.as_python_constant(), type):
        name = type(value.as_python_constant()).__name__
        tx.throw(tx.made_here(TypeError, [ConstantVariable("exceptions must be classes or instances deriving "
                                                           f"from BaseException, not {name}")]))
    else:
        unsupported("generator", f"throw() of {value.describe()} into a {gen.describe()}")
    if gen.state not in ("created", "done"):
        _check_resumable(gen, "throw()")
    return _deliver(tx, gen, _throw_in(gen, exc), lambda v: _stop_iteration(tx, v))


def close(tx, gen):
    """`gen.close()`."""
    outcome = close_outcome(gen)
    if type(outcome) is Failed:
        tx.throw(outcome.value)
    return outcome.value


def next_step(tx, gen):
    """`next(gen)` made by `tx`'s current call instruction: the item, or None once the body
    returned; an exception leaving the body (PEP 479's RuntimeError for a StopIteration) is
    raised at that instruction, where `tx`'s handlers may catch it, as CPython raises it."""
    if gen.state == "done" or len(gen.items.made) != gen.index:
        return gen.next_item()  # finished, or an item already pulled ahead (by a zip over it)
    _check_resumable(gen, "next()")
    return _step_item(tx, gen, _send(gen, None))


def delegate_step(tx, gen, sent):
    """One step of `yield from gen` (SEND, 3.10's YIELD_FROM): the value sent goes on to
    `gen`; its item, or None once it returned (its `return_value` is the result); an
    exception leaving its body is raised at the delegating instruction, where the
    delegating body's handlers may catch it."""
    if gen.state == "created" and not _is_none(sent):
        tx.throw(tx.made_here(TypeError, [ConstantVariable("can't send non-None value to a just-started generator")]))
    if gen.state == "done":
        return None
    if len(gen.items.made) != gen.index and _is_none(sent):
        return gen.next_item()  # an item already pulled ahead (by a zip over it, say)
    _check_resumable(gen, "yield from")
    return _step_item(tx, gen, _send(gen, sent))


def _step_item(tx, gen, outcome):
    """The item a step yielded, None once the body returned; an exception that left the
    body is raised at `tx`'s current instruction."""
    if type(outcome) is Yielded:
        _record(gen, outcome.value)
        return outcome.value
    if type(outcome) is Returned:
        return None
    tx.throw(outcome.value)
