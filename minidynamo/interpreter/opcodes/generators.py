"""Generator bodies: yield, yield from, and the generator prologue.

A translator runs a generator's body only when `generator` is set (variables/generators.py
drives it, and contexts.py a @contextmanager's). YIELD_VALUE suspends the run loop with the
value (`_Yield`); the stack and ip stay, and the driver pushes the value next() sends (None)
before running it again. `yield from` pulls its iterator, one item per resume:
  3.10        GET_YIELD_FROM_ITER; LOAD_CONST None; YIELD_FROM (re-run after each yield)
  3.11        ...; SEND target; YIELD_VALUE; RESUME; JUMP back to SEND
              (exhausted: SEND pops both and pushes the return value, then jumps)
  3.12-3.14   the same, SEND's target is END_SEND (SEND replaces the sent value with the
              return value, END_SEND pops the iterator below it)
The value sent goes on to a generator delegated to (variables/generator_methods.py,
`delegate_step`); an exception leaving it is raised at the SEND. `throw` at a `yield from`'s
yield goes to CLEANUP_THROW (3.12+).
"""
from __future__ import annotations

from ..._compat import PY312
from ...exc import unsupported
from ...variables.constant import ConstantVariable
from ...variables.exceptions import ExceptionVariable
from ...variables.generator_methods import delegate_step
from ...variables.generators import GeneratorVariable
from ...variables.lists import IteratorVariable, iterator_of
from ..run_ends import _Yield


def _pull(tx, receiver, sent):
    """The next item of the iterator `yield from` delegates to, `sent` sent to it (None:
    exhausted)."""
    if isinstance(receiver, GeneratorVariable):
        return delegate_step(tx, receiver, sent)
    if not isinstance(receiver, IteratorVariable):
        unsupported("generator", f"yield from {receiver.describe()}")
    if not (isinstance(sent, ConstantVariable) and sent.value is None):
        unsupported("generator", f"send() of a value through yield from {receiver.describe()}")
    return receiver.next_item()


def _returned(receiver):
    """What `yield from receiver` evaluates to: a generator's return value, else None."""
    value = getattr(receiver, "return_value", None)
    return ConstantVariable(None) if value is None else value


class GeneratorOps:
    def _suspend(self, inst, value):
        self.yield_inst = inst  # where it waits (the generator checks try/with around it)
        raise _Yield(value)

    def YIELD_VALUE(self, inst):
        if not self.generator:
            unsupported("generator", "yield")
        self._suspend(inst, self.pop())

    def RETURN_GENERATOR(self, inst):  # 3.11+: the first next() sends None, which POP_TOP drops
        if not self.generator:
            unsupported("generator", "a generator")
        self.push(ConstantVariable(None))

    def GEN_START(self, inst):  # 3.10: pops the None the first next() sends (never pushed here)
        if not self.generator:
            unsupported("generator", "a generator")

    def GET_YIELD_FROM_ITER(self, inst):
        if not self.generator:
            unsupported("generator", "yield from")
        self.push(iterator_of(self, self.pop()))  # a generator or iterator is its own

    def SEND(self, inst):  # 3.11+: [receiver, sent] → [receiver, item] or the return value
        receiver = self.stack[-2]
        item = _pull(self, receiver, self.stack[-1])
        if item is not None:
            self.stack[-1] = item  # YIELD_VALUE follows
            return
        if PY312:
            self.stack[-1] = _returned(receiver)  # END_SEND drops the receiver
        else:
            self.pop()
            self.pop()
            self.push(_returned(receiver))
        self.ip = inst.target

    def CLEANUP_THROW(self, inst):  # 3.12+: [receiver, last sent, exc] → [None, value], or exc raised again
        # The handler of an exception thrown in at a `yield from`'s yield: a StopIteration
        # ends the `yield from` with its value.
        exc = self.pop()
        if not isinstance(exc, ExceptionVariable):
            unsupported("exceptions", f"re-raising {exc.describe()}")
        if not issubclass(exc.exc_type, StopIteration):
            self.throw(exc)
        del self.stack[-2:]
        self.push(ConstantVariable(None))
        self.push(exc.var_getattr(self, "value"))

    def END_SEND(self, inst):  # 3.12+: [receiver, value] → [value]
        value = self.pop()
        self.pop()
        self.push(value)

    def YIELD_FROM(self, inst):  # 3.10: [receiver, sent] → yields, or [return value]
        if not self.generator:
            unsupported("generator", "yield from")
        sent = self.pop()
        receiver = self.stack[-1]
        item = _pull(self, receiver, sent)
        if item is not None:
            self.ip -= 1  # CPython runs YIELD_FROM again with the next value sent
            self._suspend(inst, item)
        self.pop()
        self.push(_returned(receiver))
