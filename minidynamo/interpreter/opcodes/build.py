"""Building containers and strings, unpacking, comprehension appends, f-strings."""
from __future__ import annotations

import builtins

from ...exc import raising, unsupported
from ...variables.constant import ConstantVariable, fold
from ...variables.dicts import DictVariable, has_keys
from ...variables.sets import SetVariable
from ...variables.exceptions import ExceptionVariable
from ...variables.lists import ListVariable, TupleVariable
from .at_break import AtBreak, Exit, Rendered, Rule

_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


def _constant_for_format(tx, v, what):
    if isinstance(v, ExceptionVariable):  # f"{e}": formatted as CPython formats it
        return v.real_for_format()
    if not v.is_python_constant():
        unsupported("data_dependent" if "tensor" in v.describe() else "construct",
                    f"formatting {v.describe()} in {what}")
    return v.as_python_constant()


class BuildOps:
    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        s = SetVariable()
        for item in self.popn(inst.arg):
            s.add(self, item)
        self.push(s)

    def BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        d = DictVariable({})
        for k, v in zip(flat[::2], flat[1::2]):
            d.setitem(self, k, v)
        self.push(d)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values))))

    def BUILD_STRING(self, inst):
        parts = [_constant_for_format(self, p, "an f-string") for p in self.popn(inst.arg)]
        self.push(ConstantVariable("".join(parts)))

    def LIST_APPEND(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        target.check_mutable("list.append", self)  # a comprehension's list handed over a break
        target.items.append(v)

    def SET_ADD(self, inst):
        v = self.pop()
        self.stack[-inst.arg].add(self, v)

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        self.stack[-inst.arg].setitem(self, k, v)

    def LIST_EXTEND(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        target.check_mutable("list.extend", self)
        target.items.extend(v.iter_items(self))

    def SET_UPDATE(self, inst):
        v = self.pop()
        self.stack[-inst.arg].update_with(self, "update", [v])  # a frozenset constant: merged whole

    def DICT_UPDATE(self, inst):  # {**v}: a mapping only (update_from declines other mappings)
        v = self.pop()
        if not isinstance(v, DictVariable) and not has_keys(v):
            raising(TypeError, f"TypeError: {v.describe()} is not a mapping")
        self.stack[-inst.arg].update_from(self, v)

    def DICT_MERGE(self, inst):  # f(**a, **b): a repeated keyword is the user's TypeError
        v = self.pop()
        target = self.stack[-inst.arg]
        if not isinstance(v, DictVariable):
            if not has_keys(v):
                unsupported("construct", f"** of {v.describe()}")
            # a mapping of a user class (collections.abc.Mapping): CPython's keys(), then [k]
            # for each, traced (dicts.py `_update_from_mapping`)
            read = DictVariable({})
            read.update_from(self, v)
            v = read
        for k in v.items:
            if k in target.items:
                unsupported("exceptions", f"TypeError: got multiple values for keyword argument {k!r}")
        target.update_from(self, v)

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().items))

    def UNPACK_SEQUENCE(self, inst):
        items = self.pop().unpack_sequence(self)
        if len(items) != inst.arg:
            unsupported("exceptions", f"ValueError: expected {inst.arg} values to unpack, got {len(items)}")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst):
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack_sequence(self)
        if len(items) < before + after:
            unsupported("exceptions", f"ValueError: not enough values to unpack (expected at least "
                                      f"{before + after}, got {len(items)})")
        middle = ListVariable(items[before:len(items) - after])
        out = items[:before] + [middle] + items[len(items) - after:]
        self.stack.extend(reversed(out))

    # --- f-strings: 3.10-3.12 FORMAT_VALUE; 3.13+ CONVERT_VALUE/FORMAT_SIMPLE/FORMAT_WITH_SPEC
    def FORMAT_VALUE(self, inst):
        flags = inst.arg
        spec = _constant_for_format(self, self.pop(), "an f-string") if flags & 0x04 else ""
        value = _constant_for_format(self, self.pop(), "an f-string")
        conv = _CONVERSIONS[flags & 0x03]
        if conv is not None:
            value = conv(value)
        self.push(fold(self, format, [value, spec], {}, "an f-string"))

    def CONVERT_VALUE(self, inst):
        value = _constant_for_format(self, self.pop(), "an f-string")
        conv = _CONVERSIONS[int(inst.arg)]
        self.push(ConstantVariable(conv(value)))

    def FORMAT_SIMPLE(self, inst):
        value = _constant_for_format(self, self.pop(), "an f-string")
        self.push(fold(self, format, [value, ""], {}, "an f-string"))

    def FORMAT_WITH_SPEC(self, inst):
        spec = _constant_for_format(self, self.pop(), "an f-string")
        value = _constant_for_format(self, self.pop(), "an f-string")
        self.push(fold(self, format, [value, spec], {}, "an f-string"))


# --- natively at a graph break --------------------------------------------------------------
def _format_at_break(b: AtBreak) -> Rendered:
    """An f-string's format instruction as `format(value, spec)`."""
    st, e, inst = b.stack, b.expr, b.inst
    fmt = b.bind(format, "format")
    if inst.opname == "FORMAT_SIMPLE":
        text, used = f"{fmt}({e(st[-1])}, '')", 1
    elif inst.opname == "FORMAT_WITH_SPEC":
        text, used = f"{fmt}({e(st[-2])}, {e(st[-1])})", 2
    else:  # FORMAT_VALUE (3.10-3.12): flags say the conversion and whether a spec is on top
        has_spec = bool(inst.arg & 0x04)
        value = e(st[-2] if has_spec else st[-1])
        conv = {0: None, 1: "str", 2: "repr", 3: "ascii"}[inst.arg & 0x03]
        if conv is not None:
            value = f"{b.bind(getattr(builtins, conv), conv)}({value})"
        text, used = f"{fmt}({value}, {e(st[-1]) if has_spec else repr('')})", 2 if has_spec else 1
    return Rendered(text, True, [Exit(None, b.next, st[:-used] + [b.result])])


AT_BREAK = {op: Rule(_format_at_break) for op in ("FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC")}
