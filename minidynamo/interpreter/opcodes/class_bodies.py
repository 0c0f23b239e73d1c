"""Class statements: LOAD_BUILD_CLASS, and the instructions of a class body, whose names
live in the namespace `__build_class__` runs it with (`tx.namespace`, a DictVariable;
variables/class_statements.py makes the class from it). Module-level code, the other user
of these name instructions, is never traced.
https://docs.python.org/3.13/library/dis.html#opcode-LOAD_BUILD_CLASS
"""
from __future__ import annotations

import builtins

from ...exc import unsupported
from ...variables.class_statements import BuildClassVariable
from ...variables.constant import ConstantVariable


class ClassBodyOps:
    def LOAD_BUILD_CLASS(self, inst):
        if self.f_builtins.get("__build_class__") is not builtins.__build_class__:
            unsupported("call", "a class statement with a replaced builtins.__build_class__")
        self.push(BuildClassVariable())

    def _class_namespace(self) -> dict:
        if self.namespace is None:
            unsupported("construct", "module-level code is not traced")
        return self.namespace.items

    def LOAD_NAME(self, inst):  # the namespace, then globals and builtins
        names = self._class_namespace()
        self.push(names[inst.arg] if inst.arg in names else self.load_global(inst.arg))

    def STORE_NAME(self, inst):
        self._class_namespace()[inst.arg] = self.pop()

    def DELETE_NAME(self, inst):
        names = self._class_namespace()
        if inst.arg not in names:
            unsupported("exceptions", f"NameError: name {inst.arg!r} is not defined", raised=NameError)
        del names[inst.arg]

    def LOAD_LOCALS(self, inst):  # 3.12+: the namespace itself
        self._class_namespace()
        self.push(self.namespace)

    def LOAD_CLASSDEREF(self, inst):  # 3.10/3.11: a free variable read in a class body
        names = self._class_namespace()
        self.push(names[inst.arg] if inst.arg in names else self.cells[inst.arg].load(self))

    def LOAD_FROM_DICT_OR_DEREF(self, inst):  # 3.12+: the same, the namespace pushed by LOAD_LOCALS
        mapping, name = self.pop(), inst.arg
        key = ConstantVariable(name)
        if mapping.call_method(self, "__contains__", [key], {}).truthy(self):
            self.push(mapping.call_method(self, "__getitem__", [key], {}))
        else:
            self.push(self.cells[name].load(self))

    def SETUP_ANNOTATIONS(self, inst):  # 3.10-3.13: annotations in a class body
        unsupported("construct", "annotations in a class body are not traced")
