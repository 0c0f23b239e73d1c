"""items(code): a code object's instructions, jump labels and protected-range edges, in the
layout of `bytecode.Bytecode.from_code(code, conserve_exception_block_stackdepth=True)`.

normalize() (instructions.py) reads every code object a trace enters, and the `bytecode`
library's decoding was a fifth of a model's first call. On 3.11+ this module decodes
`co_code` directly (about 5x faster): one pass folds EXTENDED_ARG and steps over CACHE
units, a second emits the items; line numbers come from `co_lines()`, the exception table
from its varints. It reproduces the library's list item for item (the same Label, TryBegin, TryEnd
and Instr positions, names, arguments and line numbers), because an Inst's `origin` is a
position in that list and resume.py edits the library's own list at that position; the
argument tables (which opcodes take constants, names, cells, enums) are the library's.
tests/test_decode.py compares both lists over thousands of code objects. 3.10 keeps the
library's decoding (its line table and block setup differ; no model runs there).
"""
from __future__ import annotations

import dis
import opcode as _opcode

import bytecode as bc
from bytecode import instr as _bi

from ._compat import PY311, PY312, PY313


class Label:
    __slots__ = ()


class TryBegin:
    __slots__ = ("target", "push_lasti", "stack_depth")

    def __init__(self, push_lasti: bool, stack_depth: int):
        self.target = None
        self.push_lasti = push_lasti
        self.stack_depth = stack_depth


class TryEnd:
    __slots__ = ("entry",)

    def __init__(self, entry: TryBegin):
        self.entry = entry


class Instr:
    __slots__ = ("name", "arg", "lineno")

    def __init__(self, name: str, arg, lineno):
        self.name, self.arg, self.lineno = name, arg, lineno

    def __repr__(self):
        return f"<{self.name} {self.arg!r} line {self.lineno}>"


# What normalize() tests items against: this module's classes and the library's (3.10).
LABEL = (Label, bc.Label)
TRY_BEGIN = (TryBegin, bc.TryBegin)
TRY_END = (TryEnd, bc.TryEnd)
INSTR = (Instr, bc.Instr)

# How each opcode's argument is read (the library's tables, bytecode/concrete.py).
_PLAIN, _CONST, _LOCAL, _LOCAL2, _NAME, _NAME1, _NAME2, _FREE, _COMPARE, _ENUM, _FORMAT1 = range(11)


def _arg_kinds() -> tuple[list, list]:
    kinds, enums = [_PLAIN] * 256, [None] * 256
    for op in range(256):
        if op in _opcode.hasconst:
            kinds[op] = _CONST
        elif op in _opcode.haslocal:
            kinds[op] = _LOCAL2 if op in _bi.DUAL_ARG_OPCODES else _LOCAL
        elif op in _opcode.hasname:
            kinds[op] = (_NAME1 if op in _bi.BITFLAG_OPCODES else
                         _NAME2 if op in _bi.BITFLAG2_OPCODES else _NAME)
        elif op in _opcode.hasfree:
            kinds[op] = _FREE
        elif op in _opcode.hascompare:
            kinds[op] = _COMPARE
        else:
            for ops, enum in ((_bi.INTRINSIC_1OP, _bi.Intrinsic1Op), (_bi.INTRINSIC_2OP, _bi.Intrinsic2Op),
                              (_bi.BINARY_OPS, _bi.BinaryOp), (_bi.COMMON_CONSTANT_OPS, _bi.CommonConstant),
                              (_bi.SPECIAL_OPS, _bi.SpecialMethod), (_bi.FORMAT_VALUE_OPS, _bi.FormatValue)):
                if op in ops:
                    kinds[op], enums[op] = _ENUM, enum
                    if ops is _bi.FORMAT_VALUE_OPS and op in _bi.BITFLAG_OPCODES:
                        kinds[op] = _FORMAT1
                    break
    return kinds, enums


def _caches(op: int) -> int:
    table = getattr(dis, "_inline_cache_entries", None)
    if isinstance(table, dict):  # 3.13+: by name
        return table.get(_opcode.opname[op], 0)
    return table[op] if table is not None else 0


if PY311:
    _KINDS, _ENUMS = _arg_kinds()
    _HAS_ARG = [_bi.opcode_has_argument(op) for op in range(256)]
    _CACHES = [_caches(op) for op in range(256)]
    # Where a jump goes: +1 forward, -1 backward, 0 absolute, None no jump.
    _JUMP = [1 if op in _bi.HAS_FORWARD_RELATIVE_JUMP else -1 if op in _bi.HAS_BACKWARD_RELATIVE_JUMP
             else 0 if op in _bi.HAS_ABSOLUTE_JUMP else None for op in range(256)]
    _EXTENDED_ARG = _opcode.opmap["EXTENDED_ARG"]
    _NOP = _opcode.opmap["NOP"]
    _CACHE = _opcode.opmap["CACHE"]
    _OPNAME = _opcode.opname


def items(code) -> list:
    """The library's item list of `code` (see the module docstring)."""
    if not PY311:
        return list(bc.Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    raw = code.co_code
    # Code units → instructions, EXTENDED_ARG folded in, CACHE units stepped over (the
    # library keeps them until the end, where only a range's end can fall on one):
    # (start unit, unit of the opcode, opcode, arg, jump target).
    units = []
    targets = set()
    ext = None
    start = off = 0
    n = len(raw) // 2
    while off < n:
        op, byte = raw[2 * off], raw[2 * off + 1]
        if op == _EXTENDED_ARG:
            if ext is None:
                start, ext = off, byte
            else:
                ext = (ext << 8) + byte
            off += 1
            continue
        if ext is not None:
            arg = bc.UNSET if op == _NOP else (ext << 8) + byte
            ext = None
        else:
            start = off
            arg = byte if _HAS_ARG[op] else bc.UNSET
        caches = _CACHES[op]
        direction = _JUMP[op]
        target = None
        if direction is not None:
            target = off + 1 + caches + arg if direction > 0 else (off + 1 + caches - arg if direction < 0 else arg)
            targets.add(target)
        units.append((start, off, op, arg, target))
        off += 1 + caches
    if ext is not None:
        raise ValueError("EXTENDED_ARG at the end of the code")

    table = _exception_table(code.co_exceptiontable)
    ex_start, ex_end = {}, {}
    for entry in table:
        targets.add(entry[2])
        ex_start[entry[0]] = entry
        ex_end.setdefault(entry[1], []).append(entry)

    varnames, freevars = code.co_varnames, code.co_freevars
    cells = list(varnames) + [bc.CellVar(n) for n in code.co_cellvars if n not in varnames]
    ncells = len(cells)
    local_names = (cells + [bc.FreeVar(n) for n in freevars if n not in varnames]) if PY313 else varnames
    consts, names = code.co_consts, code.co_names

    ranges = list(code.co_lines())  # (start byte, end byte, line): as co_positions' lines
    r = 0
    out: list = []
    labels: dict = {}
    jumps: list = []
    begins: dict = {}
    for start, off, op, arg, target in units:
        if start in targets:
            labels[start] = label = Label()
            out.append(label)
        entry = ex_start.get(start)
        if entry is not None and entry not in begins:
            begins[entry] = begin = TryBegin(entry[4], entry[3])
            out.append(begin)
        if op != _CACHE:
            kind = _KINDS[op]
            if kind == _PLAIN or arg is bc.UNSET:
                pass
            elif kind == _CONST:
                arg = consts[arg]
            elif kind == _LOCAL:
                arg = local_names[arg]
            elif kind == _NAME:
                arg = names[arg]
            elif kind == _NAME1:
                arg = (bool(arg & 1), names[arg >> 1])
            elif kind == _FREE:
                if arg < ncells:
                    cell = cells[arg]
                    arg = cell if isinstance(cell, bc.CellVar) else bc.CellVar(cell)
                else:
                    arg = bc.FreeVar(freevars[arg - ncells])
            elif kind == _LOCAL2:
                arg = (local_names[arg >> 4], local_names[arg & 15])
            elif kind == _NAME2:
                arg = (bool(arg & 1), bool(arg & 2), names[arg >> 2])
            elif kind == _COMPARE:
                arg = _bi.Compare((arg >> 5) + (16 if arg & 16 else 0) if PY313 else
                                 (arg >> 4) if PY312 else arg)
            elif kind == _ENUM:
                arg = _ENUMS[op](arg)
            else:  # _FORMAT1
                arg = (bool(arg & 1), _ENUMS[op](arg >> 1))
            if target is not None:
                jumps.append((len(out), target))
            byte = 2 * off
            while r < len(ranges) and ranges[r][1] <= byte:
                r += 1
            line = ranges[r][2] if r < len(ranges) and ranges[r][0] <= byte else None
            out.append(Instr(_OPNAME[op], arg, line))
        if not ex_end:
            continue
        for unit in range(off, off + 1 + _CACHES[op]):
            for entry in reversed(ex_end.get(unit, ())):
                begin = begins.get(entry)
                if begin is None:  # a range ending before it starts: the library makes both here
                    begins[entry] = begin = TryBegin(entry[4], entry[3])
                    out.append(begin)
                out.append(TryEnd(begin))
    for index, target in jumps:
        out[index].arg = labels[target]
    for entry, begin in begins.items():
        begin.target = labels[entry[2]]
    return out


def _exception_table(raw: bytes) -> list:
    """3.11+'s exception table: (start, last unit covered, handler, depth, lasti) per range."""
    out = []
    i, n = 0, len(raw)
    while i < n:
        fields = []
        for _ in range(4):
            b = raw[i]
            i += 1
            value = b & 63
            while b & 64:
                b = raw[i]
                i += 1
                value = (value << 6) | (b & 63)
            fields.append(value)
        start, length, handler, depth_lasti = fields
        out.append((start, start + length - 1, handler, depth_lasti >> 1, bool(depth_lasti & 1)))
    return out
