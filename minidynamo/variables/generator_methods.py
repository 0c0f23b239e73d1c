"""`gen.send(value)` and `gen.close()` on a generator made in the trace
(variables/generators.py), as CPython's gen_send_ex and gen_close do them.

send: the value becomes the result of the yield the body is suspended at and the body runs
to its next yield, whose value send returns; a generator not started takes only None; one
that returns raises StopIteration(return value) in the caller (a modeled exception, so the
caller's `except StopIteration as e: e.value` is traced on 3.11+).

close: a generator not started or finished just ends. One suspended outside any try or
with block ends without running a line. One suspended inside a try (3.11+) gets a
GeneratorExit raised at its yield: the handlers of the exception table covering the yield
run (a `finally` once, an `except GeneratorExit`), each re-raise going to the next handler
out, as the exception unwinds in CPython; the GeneratorExit leaving the body ends close()
(3.13+: a body that returns instead makes that value close()'s result); a body that yields
instead raises eager's RuntimeError in the caller. A with block around the yield (its
__exit__ would get the exception), a `yield from` (the delegate is closed first) and
Python 3.10 (no exception table) decline.
"""
from __future__ import annotations

from .._compat import PY311, PY313
from ..exc import Raised, unsupported
from .constant import ConstantVariable
from .exceptions import make_exception


def _is_none(v) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _raise_in_caller(tx, cls, args=()):
    """Raise `cls(*args)` at the caller's current instruction (the call of send/close)."""
    tx.throw(tx.made_here(cls, list(args)))


def send(tx, gen, value):
    """`gen.send(value)`."""
    if gen.state == "created" and not _is_none(value):
        _raise_in_caller(tx, TypeError, [ConstantVariable("can't send non-None value to a just-started generator")])
    was_done = gen.state == "done"
    items = gen.items
    if len(items.made) != gen.index:  # an item pulled ahead of the consumer (not by these methods)
        unsupported("generator", f"send() on a {gen.describe()} read ahead of its consumer")
    item = gen.pull(value)
    if item is None:
        _raise_in_caller(tx, StopIteration, [] if was_done else [gen.return_value])
    items.made.append(item)  # kept in step with next() (the items are read by position)
    gen.index += 1
    return item


def close(tx, gen):
    """`gen.close()`."""
    state = gen.state
    if state == "running":
        unsupported("exceptions", f"ValueError: {gen.describe()} already executing")
    if state == "failed":
        unsupported("generator", f"{gen.describe()} closed after a decline inside it")
    if state in ("created", "done") or not gen.suspended_in_cleanup():
        gen.state = "done"  # nothing runs: no handler covers the yield
        return ConstantVariable(None)
    frame = gen.frame
    yield_inst = frame.yield_inst
    if not PY311:
        unsupported("generator", f"close() of a {gen.describe()} suspended inside a try or with block "
                                 "(Python 3.10: the block stack is not modeled)")
    index = frame.instructions.index(yield_inst)
    if yield_inst.opname != "YIELD_VALUE" or index and frame.instructions[index - 1].opname == "SEND":
        unsupported("generator", f"close() of a {gen.describe()} suspended in a yield from")
    exc = make_exception(frame, GeneratorExit, [], {})
    while True:
        entry = frame.instructions[index].handler
        if entry is None or _leaves_body(frame, entry[0]):
            gen.state = "done"  # the GeneratorExit left the body: close() returns
            return ConstantVariable(None)
        target, depth, lasti = entry
        if frame._with_exit(target):
            gen.state = "failed"
            unsupported("generator", f"close() of a {gen.describe()} suspended inside a with block (its "
                                     "__exit__ would get the GeneratorExit)")
        if depth > len(frame.stack):
            gen.state = "failed"
            unsupported("generator", f"close() of a {gen.describe()}: unexpected stack at its handler")
        del frame.stack[depth:]
        if lasti:
            frame.push(ConstantVariable(index))
        frame.push(exc)
        frame.ip = target
        index = _run_handler(tx, gen, exc)
        if index is None:
            return ConstantVariable(None) if not PY313 else gen.return_value


def _leaves_body(frame, target: int) -> bool:
    """3.12+: the handler around a whole generator body (StopIteration → RuntimeError)
    re-raises anything else unchanged: the exception leaves the body."""
    return frame.instructions[target].opname == "CALL_INTRINSIC_1"


def _run_handler(tx, gen, exc):
    """Run the body from the handler: None when it returned; the index of the
    instruction that re-raised `exc` (its next handler runs next)."""
    from ..interpreter.translator import _Yield
    registry = gen.registry
    gen.state = "running"
    registry.pulling += 1
    try:
        value = gen.frame.run()
    except _Yield:
        gen.state = "suspended"
        _raise_in_caller(tx, RuntimeError, [ConstantVariable("generator ignored GeneratorExit")])
    except Raised as e:
        if e.value is not exc or e.origin[0] is not gen.frame:
            gen.state = "failed"
            raise
        gen.state = "suspended"
        return e.origin[1]
    except BaseException:
        gen.state = "failed"
        raise
    finally:
        registry.pulling -= 1
    gen.state = "done"
    gen.return_value = value
    return None
