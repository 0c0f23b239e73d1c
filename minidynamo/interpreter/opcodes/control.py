"""Return, assert, try-block markers, with. Raising and catching: opcodes/exceptions.py;
generator bodies: opcodes/generators.py."""
from __future__ import annotations

from ..._compat import PY314
from ...exc import unsupported
from ...variables.base import NULL
from ...variables.contexts import ContextManagerVariable
from ...variables.user_objects import enter_user_context
from ..blocks import TryBlock, WithBlock
from ..run_ends import _Return


class ControlOps:
    def RETURN_VALUE(self, inst):
        raise _Return(self.pop())

    def LOAD_ASSERTION_ERROR(self, inst):
        unsupported("exceptions", "a failing assert (the AssertionError is raised by the eager run)")

    # A try body is traced as straight-line code; a raise jumps to its handler through the
    # instructions' exception-table entries (opcodes/exceptions.py), not through these.
    def SETUP_EXCEPT(self, inst):  # pseudo-instruction from normalize() (3.11+)
        pass

    def SETUP_FINALLY(self, inst):  # 3.10: a try block; a raise in it goes to its handler
        self.blocks.append(TryBlock(inst.target, len(self.stack)))

    def BEFORE_WITH(self, inst):  # 3.11+: ... cm → ..., cm.__exit__, cm.__enter__()
        # 3.14 (normalized from LOAD_SPECIAL ... CALL 0): ... cm → ..., cm.__exit__, NULL,
        # cm.__enter__(), the bound __exit__ with an empty self slot, as LOAD_SPECIAL leaves
        # a non-method; the exit's `CALL 3` then calls it with (None, None, None).
        cm = self.pop()
        entered = enter_user_context(self, cm)  # a class with __enter__/__exit__ in Python
        if entered is not None:
            self._push_exit(entered[0])
            self.push(entered[1])
            return
        if not isinstance(cm, ContextManagerVariable):
            unsupported("exceptions", f"a with statement over {cm.describe()} is not traced",
                        hint="supported here: torch.no_grad, enable_grad, set_grad_enabled, autocast, "
                             "contextlib.nullcontext; enter others around the optimized call")
        self._push_exit(cm.var_getattr(self, "__exit__"))
        self.push(cm.enter(self))

    def _push_exit(self, exit_method):
        self.push(exit_method)
        if PY314:
            self.push(NULL)

    def LOAD_SPECIAL(self, inst):  # 3.14: a with statement's entry is BEFORE_WITH by now
        name = getattr(inst.arg, "name", inst.arg)
        if name in ("AENTER", "AEXIT"):
            unsupported("generator", "async with")
        unsupported("opcode", f"LOAD_SPECIAL {name} outside a with statement's entry sequence")

    def SETUP_WITH(self, inst):  # 3.10: the same, plus a block the normal path pops
        self.BEFORE_WITH(inst)
        # The block is set up above __enter__'s result, as CPython does: a raise reaching it
        # declines (opcodes/exceptions.py), its __exit__ handler is not modeled.
        self.blocks.append(WithBlock(inst.target, len(self.stack) - 1))

    def POP_BLOCK(self, inst):  # 3.10: the end of a try or with block's body
        if self.blocks:
            self.blocks.pop()

    def SETUP_ASYNC_WITH(self, inst):
        unsupported("generator", "async with")

    def LOAD_SUPER_ATTR(self, inst):
        unsupported("construct", "super() is not traced")
