"""LOAD_*/STORE_*/DELETE_* of locals, cells, globals and attributes.

Call-protocol NULLs (https://docs.python.org/3.13/library/dis.html#opcode-LOAD_ATTR):
  <=3.12  LOAD_GLOBAL (True, n) / LOAD_ATTR (True, n):  ... → NULL, value
   3.13   LOAD_GLOBAL (True, n) / LOAD_ATTR (True, n):  ... → value, NULL
The method form always pushes the bound attribute with a NULL beside it (never the
unbound [meth, self] pair): CALL then treats both forms alike.
"""
from __future__ import annotations

import sys

from ..._compat import PY313
from ...exc import unsupported
from ...variables.base import NULL
from ...variables.builder import wrap
from ...variables.functions import CellVariable, RealCellVariable


def _push_with_null(tx, value, push_null: bool):
    if push_null and not PY313:
        tx.push(NULL)
    tx.push(value)
    if push_null and PY313:
        tx.push(NULL)


class LoadStoreOps:
    def LOAD_CONST(self, inst):
        self.push(wrap(self, inst.arg, None) if not hasattr(inst.arg, "co_code") else _CodeConst(inst.arg))

    def LOAD_FAST(self, inst):
        name = inst.arg
        if name in self.cells:  # 3.13: LOAD_FAST of a cell slot pushes the cell itself
            self.push(self.cells[name])
            return
        try:
            self.push(self.f_locals[name])
        except KeyError:
            unsupported("exceptions", f"UnboundLocalError: local variable {name!r} referenced before assignment")

    def LOAD_FAST_AND_CLEAR(self, inst):  # 3.12+ inlined comprehensions save the slot
        name = inst.arg
        if name in self.cells:  # a cell variable's slot holds the cell itself
            self.push(self.cells.pop(name))
            return
        self.push(self.f_locals.pop(name, NULL))

    def MAKE_CELL(self, inst):  # 3.12+: only inside a function (see normalize): a fresh cell
        self.cells[inst.arg] = CellVariable(inst.arg, self.f_locals.pop(inst.arg, None))

    def STORE_FAST(self, inst):
        value = self.pop()
        if value is NULL:  # restoring a slot LOAD_FAST_AND_CLEAR found empty
            self.f_locals.pop(inst.arg, None)
        elif isinstance(value, (CellVariable, RealCellVariable)):  # restoring a saved cell
            self.cells[inst.arg] = value
        else:
            self.f_locals[inst.arg] = value

    def DELETE_FAST(self, inst):
        if inst.arg not in self.f_locals:
            unsupported("exceptions", f"UnboundLocalError: {inst.arg!r}")
        del self.f_locals[inst.arg]

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.arg])

    def LOAD_DEREF(self, inst):
        self.push(self.cells[inst.arg].load(self))

    def STORE_DEREF(self, inst):
        self.cells[inst.arg].store(self, self.pop())

    def LOAD_GLOBAL(self, inst):
        push_null, name = inst.arg
        _push_with_null(self, self.load_global(name), push_null)

    def STORE_GLOBAL(self, inst):
        unsupported("side_effect", f"assigning the global {inst.arg!r}")

    def DELETE_GLOBAL(self, inst):
        unsupported("side_effect", f"deleting the global {inst.arg!r}")

    def LOAD_ATTR(self, inst):
        is_method, name = inst.arg
        obj = self.pop()
        _push_with_null(self, obj.var_getattr(self, name), is_method)

    def STORE_ATTR(self, inst):
        obj = self.pop()
        self.pop()
        unsupported("side_effect", f"setting attribute {inst.arg!r} on {obj.describe()}, which outlives the call")

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        unsupported("side_effect", f"deleting attribute {inst.arg!r} of {obj.describe()}")

    def LOAD_NAME(self, inst):
        unsupported("construct", "module- or class-level code is not traced")

    def IMPORT_NAME(self, inst):
        self.pop()  # fromlist
        level = self.pop().as_python_constant()
        name = inst.arg
        if level != 0 or name not in sys.modules:
            unsupported("side_effect", f"importing {name!r} (a module not yet imported runs its code)")
        top = sys.modules[name.partition(".")[0]]
        self.push(wrap(self, top, None))

    def IMPORT_FROM(self, inst):
        self.push(self.stack[-1].var_getattr(self, inst.arg))


class _CodeConst:
    """A code object constant, consumed by MAKE_FUNCTION."""

    def __init__(self, code):
        self.code = code

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.code
