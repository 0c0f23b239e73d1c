"""LOAD_*/STORE_*/DELETE_* of locals, cells, globals and attributes; IMPORT_NAME/IMPORT_FROM.

Call-protocol NULLs (https://docs.python.org/3.13/library/dis.html#opcode-LOAD_ATTR):
  <=3.12  LOAD_GLOBAL (True, n) / LOAD_ATTR (True, n):  ... → NULL, value
   3.13+  LOAD_GLOBAL (True, n) / LOAD_ATTR (True, n):  ... → value, NULL
The method form always pushes the bound attribute with a NULL beside it (never the
unbound [meth, self] pair): CALL then treats both forms alike.
"""
from __future__ import annotations

import builtins
import sys
import types

from ...variables.global_stores import delete_global, store_global
from ..._compat import PY313
from ...exc import unsupported
from ...guards import Guard
from ...sources import AttrSource, GlobalSource, ItemSource, ObjectSource
from ...variables.base import NULL
from ...variables.builder import wrap
from ...variables.constant import ConstantVariable
from ...variables.cells import CellVariable, RealCellVariable
from ...variables.super_calls import call_super
from .at_break import AtBreak, Exit, Rendered, Rule


def _push_with_null(tx, value, push_null: bool):
    if push_null and not PY313:
        tx.push(NULL)
    tx.push(value)
    if push_null and PY313:
        tx.push(NULL)


class LoadStoreOps:
    def LOAD_CONST(self, inst):
        arg = inst.arg
        if type(arg) in _PLAIN_CONSTANTS:  # most constants: what wrap would make of them
            self.push(ConstantVariable(arg))
        else:
            self.push(wrap(self, arg, None) if not hasattr(arg, "co_code") else _CodeConst(arg))

    def LOAD_FAST(self, inst):
        name = inst.arg
        if name in self.cells:  # 3.13+: LOAD_FAST of a cell slot pushes the cell itself
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

    def LOAD_FROM_DICT_OR_GLOBALS(self, inst):  # 3.12+: a class scope's name (an annotation of a method)
        # (the class's namespace, passed in: read one key at a time, dicts.py)
        mapping, name = self.pop(), inst.arg
        key = ConstantVariable(name)
        if mapping.call_method(self, "__contains__", [key], {}).truthy(self):
            self.push(mapping.call_method(self, "__getitem__", [key], {}))
        else:
            self.push(self.load_global(name))

    def STORE_GLOBAL(self, inst):
        store_global(self, inst.arg, self.pop())

    def DELETE_GLOBAL(self, inst):
        delete_global(self, inst.arg)

    def LOAD_ATTR(self, inst):
        is_method, name = inst.arg
        obj = self.pop()
        _push_with_null(self, obj.var_getattr(self, name), is_method)

    def LOAD_SUPER_ATTR(self, inst):  # 3.12+: super, cls, self → super(cls, self).name
        load_method, _two_args, name = inst.arg
        obj, cls, fn = self.pop(), self.pop(), self.pop()
        sup = call_super(self, [cls, obj], {}) if fn.is_python_constant() and fn.as_python_constant() is super \
            else None
        if sup is None:
            unsupported("construct", f"super() over {obj.describe()} is not traced")
        _push_with_null(self, sup.var_getattr(self, name), load_method)

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        store = getattr(obj, "store_attr", None)  # an object made inside the trace (a ctx)
        if store is not None:
            store(self, inst.arg, value)
            return
        unsupported("side_effect", f"setting attribute {inst.arg!r} on {obj.describe()}, which outlives the call")

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        delete = getattr(obj, "delete_attr", None)  # an object made inside the trace
        if delete is not None:
            delete(self, inst.arg)
            return
        unsupported("side_effect", f"deleting attribute {inst.arg!r} of {obj.describe()}")

    def IMPORT_NAME(self, inst):
        # __import__(name, globals, locals, fromlist, level) on modules already in
        # sys.modules (importing one that is not runs its code: declined).
        fromlist = self.pop().as_python_constant()
        level = self.pop().as_python_constant()
        if self.f_builtins.get("__import__") is not builtins.__import__:
            unsupported("call", "import statement with a replaced builtins.__import__")
        name = _absolute_name(self, inst.arg, level)
        module, var = _loaded(self, name)
        if fromlist:
            if _peek(module, "__path__") is not _MISSING:
                # A package: a name it does not bind is a submodule, imported here.
                for attr in fromlist:
                    if _peek(module, attr) is _MISSING:
                        _loaded(self, f"{_name_of(module)}.{attr}", shadowed_by=var, attr=attr)
            self.push(var)  # the module `name` itself; IMPORT_FROM reads the names
        elif "." not in inst.arg:
            self.push(var)
        elif level == 0:  # `import a.b` binds the top package `a`
            self.push(_loaded(self, inst.arg.partition(".")[0])[1])
        else:
            cut = len(inst.arg) - inst.arg.index(".")
            self.push(_loaded(self, name[:len(name) - cut])[1])

    def IMPORT_FROM(self, inst):
        # getattr(module, attr), else sys.modules[f"{module.__name__}.{attr}"], as CPython.
        var = self.stack[-1]
        module = getattr(var, "value", None)
        if type(module) is not types.ModuleType or var.source is None:
            self.push(var.var_getattr(self, inst.arg))
            return
        attr = inst.arg
        value = _peek(module, attr)
        if value is not _MISSING:
            self.push(wrap(self, value, AttrSource(var.source, attr)))
            return
        full = f"{_name_of(module)}.{attr}"
        if sys.modules.get(full) is None:
            unsupported("exceptions", f"ImportError: cannot import name {attr!r} from {_name_of(module)!r}")
        self.push(_loaded(self, full, shadowed_by=var, attr=attr)[1])


_SYS_MODULES = ObjectSource(sys.modules, "sys.modules")
_PLAIN_CONSTANTS = frozenset((int, float, bool, complex, str, bytes, type(None)))
_MISSING = object()


def _loaded(tx, name: str, shadowed_by=None, attr=None):
    """(module, tracker) for sys.modules[name], guarded by identity: a module removed or
    replaced there misses the entry, whose next trace sees what the import does then.
    With `shadowed_by`, the module is used because `shadowed_by` has no attribute `attr`
    (else that attribute is what Python binds): that absence is guarded too."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        unsupported("side_effect", f"importing {name!r} (a module not yet imported runs its code)")
    if type(module) is not types.ModuleType:
        unsupported("construct", f"importing {name!r}: sys.modules holds a {type(module).__qualname__}, "
                                 "whose attribute lookups may run code")
    if shadowed_by is not None:
        tx.output.guards.add(Guard("NOT_IN_DICT", shadowed_by.source, None, {"attr": attr}))
    return module, wrap(tx, module, ItemSource(_SYS_MODULES, name))


def _peek(module, attr: str):
    """`module.attr` without running code: its __dict__ entry or _MISSING; declines where
    a module-level __getattr__ (or an attribute of the module type) would answer."""
    d = vars(module)
    if attr in d:
        return d[attr]
    if "__getattr__" in d or hasattr(types.ModuleType, attr):
        unsupported("construct", f"reading {attr!r} of module {d.get('__name__')!r} calls its __getattr__")
    return _MISSING


def _name_of(module) -> str:
    name = _peek(module, "__name__")
    if not isinstance(name, str):
        unsupported("construct", "importing from a module without a __name__")
    return name


def _absolute_name(tx, name: str, level: int) -> str:
    """importlib's resolution of a relative import against the function's module's
    __package__ (guarded: it names the module that is bound)."""
    if level == 0:
        return name
    g = tx.f_globals
    package, spec = g.get("__package__"), g.get("__spec__")
    if not isinstance(package, str) or spec is not None and getattr(spec, "parent", None) != package:
        unsupported("construct", "relative import in a module whose __package__ is unset or differs "
                                 "from __spec__.parent (CPython warns and falls back on __name__)")
    wrap(tx, package, GlobalSource("__package__", g))
    bits = package.rsplit(".", level - 1)
    if not package or len(bits) < level:
        unsupported("exceptions", "ImportError: attempted relative import "
                    + ("with no known parent package" if not package else "beyond top-level package"))
    return f"{bits[0]}.{name}" if name else bits[0]


class _CodeConst:
    """A code object constant, consumed by MAKE_FUNCTION."""

    def __init__(self, code):
        self.code = code

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.code


# --- natively at a graph break --------------------------------------------------------------
def _load_attr_at_break(b: AtBreak) -> Rendered:  # an attribute the trace cannot read (ctx.saved_tensors, a C property)
    st = b.stack
    is_method, name = b.inst.arg
    pushed = [b.result] if not is_method else [b.result, NULL] if PY313 else [NULL, b.result]
    return Rendered(f"{b.bind(getattr, 'getattr')}({b.expr(st[-1])}, {name!r})", True,
                    [Exit(None, b.next, st[:-1] + pushed)])


def _store_attr_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    return Rendered(f"{b.expr(st[-1])}.{b.inst.arg} = {b.expr(st[-2])}", False, [Exit(None, b.next, st[:-2])])


def _delete_attr_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    return Rendered(f"del {b.expr(st[-1])}.{b.inst.arg}", False, [Exit(None, b.next, st[:-1])])


def _store_global_at_break(b: AtBreak) -> Rendered:
    st = b.stack
    g = b.bind(b.tx.f_globals, "G")
    return Rendered(f"{g}[{b.inst.arg!r}] = {b.expr(st[-1])}", False, [Exit(None, b.next, st[:-1])])


AT_BREAK = {"LOAD_ATTR": Rule(_load_attr_at_break), "STORE_ATTR": Rule(_store_attr_at_break),
            "DELETE_ATTR": Rule(_delete_attr_at_break), "STORE_GLOBAL": Rule(_store_global_at_break)}
