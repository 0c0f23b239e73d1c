"""normalize(code): one canonical instruction list for Python 3.10-3.14.

Bytecode is read as the `bytecode` package's item list (jump targets are Labels, CACHE
entries gone, EXTENDED_ARG folded), decoded by decode.py on 3.11+. Then every per-version difference that can be rewritten away
is rewritten here, once, so the opcode handlers see fewer variants:

- jumps: every unconditional jump is `JUMP`; 3.11's directed `POP_JUMP_{FORWARD,BACKWARD}_IF_*`
  lose their direction; targets become instruction indices.
- arithmetic: 3.10's `BINARY_<op>`/`INPLACE_<op>` and 3.11+'s `BINARY_OP` all become
  `BINARY_OP` with arg `(op_name, inplace)`, op_name as in `operator` (add, sub, ...).
- `COMPARE_OP` arg is the operator symbol (`<`, `==`, ...) on every version.
- `LOAD_GLOBAL`/`LOAD_ATTR` arg is `(push_null_or_method, name)` on every version; 3.10/3.11's
  `LOAD_METHOD name` becomes `LOAD_ATTR (True, name)`; `CALL_METHOD n` becomes `CALL n`.
- 3.13/3.14's superinstructions (`LOAD_FAST_LOAD_FAST`, `STORE_FAST_STORE_FAST`,
  `STORE_FAST_LOAD_FAST`, `LOAD_FAST_BORROW_LOAD_FAST_BORROW`) are split into their halves.
- `RETURN_CONST c` becomes `LOAD_CONST c; RETURN_VALUE`; `LOAD_FAST_CHECK` and 3.14's
  `LOAD_FAST_BORROW` become `LOAD_FAST`; `DUP_TOP` becomes `COPY 1`, `DUP_TOP_TWO` two `COPY 2`,
  `ROT_TWO` becomes `SWAP 2`.
- 3.14: `LOAD_SMALL_INT n` becomes `LOAD_CONST n`; `BINARY_OP []` becomes `BINARY_SUBSCR`;
  `POP_ITER` becomes `POP_TOP`; `LOAD_COMMON_CONSTANT` becomes `LOAD_ASSERTION_ERROR` or a
  `LOAD_CONST` of the builtin it names; `CALL_FUNCTION_EX` gets 3.13's arg (`PUSH_NULL;
  CALL_FUNCTION_EX`, no keywords, becomes `CALL_FUNCTION_EX 0`, the plain one `CALL_FUNCTION_EX
  1`); a with statement's `COPY 1; LOAD_SPECIAL __exit__; SWAP 2; SWAP 3; LOAD_SPECIAL __enter__;
  CALL 0` becomes one `BEFORE_WITH`, which leaves CPython's `[__exit__, NULL, __enter__()]`.
- `FOR_ITER` targets the instruction CPython really continues at on exhaustion (past
  3.12's `END_FOR`, 3.13's `END_FOR; POP_TOP` and 3.14's `END_FOR; POP_ITER`).
- A 3.11+ protected region whose handler is a user `except`/`finally` becomes a
  `SETUP_EXCEPT` pseudo-instruction (3.10 keeps its real `SETUP_FINALLY`).
- No-ops for a symbolic interpreter (RESUME, NOP, PRECALL, 3.14's NOT_TAKEN, and the prologue's MAKE_CELL and
  COPY_FREE_VARS: the translator builds a frame's cells itself) go. A MAKE_CELL after RESUME
  stays: 3.12+ inlined comprehensions make a fresh cell for their variable on every run.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import bytecode as bc

from ._compat import PY311, PY312, PY313, PY314
from .decode import INSTR, LABEL, TRY_BEGIN, TRY_END, items as decoded_items


@dataclass(eq=False, slots=True)
class Inst:
    opname: str
    arg: Any = None
    target: int | None = None  # instruction index for jumps
    lineno: int | None = None
    # Where it came from: the index of its `bytecode.Instr` among the items of
    # `bytecode.Bytecode.from_code(code)`, and whether it is the first canonical
    # instruction made from it (only those can be resumed at: see resume.py).
    origin: int | None = None
    first: bool = True
    in_try: bool = False  # inside the body of a user try statement (breaks.py)
    # 3.11+: the exception table's entry covering it, (handler index, stack depth, push
    # lasti), or None: where an exception raised by it goes (interpreter/unwind.py).
    handler: tuple | None = None

    def __repr__(self):
        tgt = f" -> {self.target}" if self.target is not None else ""
        return f"{self.opname} {self.arg!r}{tgt}" if self.arg is not None else f"{self.opname}{tgt}"


# operator-module names for every binary operator, keyed by both spellings.
_BINARY_NAMES = {
    "ADD": "add", "SUBTRACT": "sub", "MULTIPLY": "mul", "TRUE_DIVIDE": "truediv",
    "FLOOR_DIVIDE": "floordiv", "REMAINDER": "mod", "MODULO": "mod", "POWER": "pow",
    "MATRIX_MULTIPLY": "matmul", "LSHIFT": "lshift", "RSHIFT": "rshift", "AND": "and_",
    "OR": "or_", "XOR": "xor",
}
_COMPARE_SYMBOLS = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GT": ">", "GE": ">="}
_UNCONDITIONAL_JUMPS = {
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP_BACKWARD_NO_INTERRUPT",
    "JUMP", "JUMP_NO_INTERRUPT",
}
_DROPPED = {"RESUME", "NOP", "PRECALL", "MAKE_CELL", "COPY_FREE_VARS", "CACHE", "EXTENDED_ARG",
            "NOT_TAKEN"}  # NOT_TAKEN (3.14): a marker after a conditional jump for sys.monitoring
# Superinstructions → their two halves, from CPython's documentation of each (the names of
# 3.14's do not split at "_FAST_"). The BORROW forms only skip a reference count.
_FUSED = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "LOAD_FAST_BORROW_LOAD_FAST_BORROW": ("LOAD_FAST", "LOAD_FAST"),
}
# Opcodes that are another's twin for a symbolic interpreter (same arg, same stack effect).
_SAME_AS = {
    "LOAD_FAST_CHECK": "LOAD_FAST",  # 3.12+: may raise UnboundLocalError, as LOAD_FAST does here
    "LOAD_FAST_BORROW": "LOAD_FAST",  # 3.14: a borrowed reference
    "LOAD_SMALL_INT": "LOAD_CONST",  # 3.14: the arg is the int itself
    "POP_ITER": "POP_TOP",  # 3.14: pops the iterator after a loop (one stack slot here)
}
# 3.14's LOAD_COMMON_CONSTANT (the objects CPython reads from its own table, never from
# builtins, so a shadowed `all` does not change them): by bytecode.CommonConstant name.
_COMMON_CONSTANTS = {"NOT_IMPLEMENTED_ERROR": NotImplementedError, "BUILTIN_TUPLE": tuple,
                     "BUILTIN_ALL": all, "BUILTIN_ANY": any}
# 3.14's entry into a with statement (bytecode.SpecialMethod: ENTER 0, EXIT 1).
_WITH_ENTRY_314 = [("COPY", 1), ("LOAD_SPECIAL", 1), ("SWAP", 2), ("SWAP", 3), ("LOAD_SPECIAL", 0),
                   ("CALL", 0)]

_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _binary_arg(opname: str, arg) -> tuple[str, bool]:
    if opname == "BINARY_OP":  # 3.11+: arg is a bytecode.BinaryOp enum
        name = arg.name
    else:  # 3.10: BINARY_ADD / INPLACE_ADD
        name = opname
    inplace = name.startswith("INPLACE_")
    for prefix in ("INPLACE_", "BINARY_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return _BINARY_NAMES[name], inplace


def _compare_symbol(arg) -> str:
    name = arg.name if hasattr(arg, "name") else str(arg)
    return _COMPARE_SYMBOLS[name.replace("_CAST", "")]


def _special(op: str) -> bool:
    """Whether _rewrite changes instructions named `op` beyond the argument's form."""
    return (op in _DROPPED or op in _UNCONDITIONAL_JUMPS or op.startswith(("POP_JUMP_FORWARD_IF_", "POP_JUMP_BACKWARD_IF_"))
            or op.startswith(("BINARY_", "INPLACE_")) or op in _FUSED or op in _SAME_AS
            or op in ("COMPARE_OP", "LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "CALL_METHOD", "RETURN_CONST",
                      "LOAD_COMMON_CONSTANT", "CALL_FUNCTION_EX", "DUP_TOP", "DUP_TOP_TWO", "ROT_TWO"))


_SPECIAL: dict = {}  # opname → _special(opname), filled as names are met
_FUSE_HEADS_314 = ("COPY", "PUSH_NULL")  # where _fuse_314 may match
_CELLS = (bc.CellVar, bc.FreeVar)


def _rewrite(instr) -> list[Inst]:
    """One `bytecode.Instr` → zero or more canonical `Inst`s (targets still as Labels)."""
    op, arg, line = instr.name, instr.arg, instr.lineno
    special = _SPECIAL.get(op)
    if special is None:
        special = _SPECIAL[op] = _special(op)
    if not special:  # most instructions: the tail below, without the chain of tests
        if isinstance(arg, LABEL):
            return [Inst(op, None, arg, line)]
        return [Inst(op, arg.name if isinstance(arg, _CELLS) else arg, None, line)]
    arg = _local_name(arg)
    if op in _DROPPED:
        return []
    if op in _UNCONDITIONAL_JUMPS:
        return [Inst("JUMP", None, arg, line)]
    if op.startswith("POP_JUMP_FORWARD_IF_") or op.startswith("POP_JUMP_BACKWARD_IF_"):
        return [Inst("POP_JUMP_IF_" + op.rsplit("_IF_", 1)[1], None, arg, line)]
    if op == "BINARY_OP" and getattr(arg, "name", None) == "SUBSCR":  # 3.14
        return [Inst("BINARY_SUBSCR", None, None, line)]
    if op == "BINARY_OP" or (op.startswith(("BINARY_", "INPLACE_")) and op != "BINARY_SUBSCR"
                             and op != "BINARY_SLICE"):
        return [Inst("BINARY_OP", _binary_arg(op, arg), None, line)]
    if op == "COMPARE_OP":
        return [Inst("COMPARE_OP", _compare_symbol(arg), None, line)]
    if op == "LOAD_GLOBAL":
        return [Inst(op, arg if isinstance(arg, tuple) else (False, arg), None, line)]
    if op == "LOAD_ATTR":
        return [Inst(op, arg if isinstance(arg, tuple) else (False, arg), None, line)]
    if op == "LOAD_METHOD":
        return [Inst("LOAD_ATTR", (True, arg), None, line)]
    if op == "CALL_METHOD":
        return [Inst("CALL", arg, None, line)]
    if op in _FUSED:
        first, second = _FUSED[op]
        return [Inst(first, _local_name(arg[0]), None, line), Inst(second, _local_name(arg[1]), None, line)]
    if op == "RETURN_CONST":
        return [Inst("LOAD_CONST", arg, None, line), Inst("RETURN_VALUE", None, None, line)]
    if op in _SAME_AS:
        return [Inst(_SAME_AS[op], int(arg) if op == "LOAD_SMALL_INT" else arg, None, line)]
    if op == "LOAD_COMMON_CONSTANT":  # 3.14
        name = getattr(arg, "name", None)
        if name == "ASSERTION_ERROR":
            return [Inst("LOAD_ASSERTION_ERROR", None, None, line)]
        if name in _COMMON_CONSTANTS:
            return [Inst("LOAD_CONST", _COMMON_CONSTANTS[name], None, line)]
    if op == "CALL_FUNCTION_EX" and PY314:  # the kwargs slot is always there (see _fuse_314)
        return [Inst(op, 1, None, line)]
    if op == "DUP_TOP":
        return [Inst("COPY", 1, None, line)]
    if op == "DUP_TOP_TWO":
        return [Inst("COPY", 2, None, line), Inst("COPY", 2, None, line)]
    if op == "ROT_TWO":
        return [Inst("SWAP", 2, None, line)]
    if isinstance(arg, LABEL):
        return [Inst(op, None, arg, line)]
    return [Inst(op, arg, None, line)]


def _local_name(arg):
    """A local's name where `bytecode` gives a CellVar/FreeVar (cell slots), else arg."""
    return arg.name if isinstance(arg, (bc.CellVar, bc.FreeVar)) else arg


def normalize(code) -> list[Inst]:
    """The canonical instruction list of a code object (cached per code object)."""
    try:
        return _cache[code]
    except KeyError:
        pass
    insts: list[Inst] = []
    label_index: dict = {}
    pending_labels: list = []
    try_begins: list[tuple[int, Any]] = []
    try_ranges: list = []  # [start, end or None, handler label] of each protected range
    open_ranges: dict = {}  # id(TryBegin) → its entry in try_ranges
    in_prologue = True  # before RESUME (3.11+)
    items = decoded_items(code)
    skip = 0
    special = _SPECIAL
    for position, item in enumerate(items):
        if skip:
            skip -= 1
            continue
        if isinstance(item, INSTR):
            name = item.name
            plain = special.get(name)
            if plain is None:
                plain = special[name] = _special(name)
            # Most instructions: _rewrite's tail inline (on 3.14, not a fused sequence's head).
            if not plain and not (PY314 and name in _FUSE_HEADS_314):
                arg = item.arg
                if isinstance(arg, LABEL):
                    inst = Inst(name, None, arg, item.lineno, position)
                else:
                    inst = Inst(name, arg.name if isinstance(arg, _CELLS) else arg, None, item.lineno, position)
                if pending_labels:
                    for label in pending_labels:
                        label_index[label] = len(insts)
                    pending_labels.clear()
                insts.append(inst)
                continue
        elif isinstance(item, LABEL):
            pending_labels.append(item)
            continue
        if isinstance(item, TRY_BEGIN):
            try_begins.append((len(insts), item.target))
            open_ranges[id(item)] = [len(insts), None, item.target, item.stack_depth, item.push_lasti]
            try_ranges.append(open_ranges[id(item)])
            continue
        if isinstance(item, TRY_END):
            entry = open_ranges.pop(id(item.entry), None)
            if entry is not None:
                entry[1] = len(insts)
            continue
        if item.name == "RESUME":
            in_prologue = False
        fused = _fuse_314(items, position) if PY314 else None
        if fused is not None:
            new, skip = [fused[0]], fused[1] - 1
        elif item.name == "MAKE_CELL" and not in_prologue:
            new = [Inst("MAKE_CELL", item.arg.name, None, item.lineno)]
        else:
            new = _rewrite(item)
        for k, inst in enumerate(new):
            inst.origin, inst.first = position, k == 0
        if new:
            for label in pending_labels:
                label_index[label] = len(insts)
            pending_labels.clear()
            insts.extend(new)
    for label in pending_labels:  # labels at the very end
        label_index[label] = len(insts)

    for inst in insts:
        if isinstance(inst.target, LABEL):
            inst.target = label_index[inst.target]
    for inst in insts:
        if inst.opname == "FOR_ITER" and PY312:
            # CPython continues past END_FOR (3.12) / END_FOR; POP_TOP (3.13) on exhaustion.
            t = inst.target
            if t < len(insts) and insts[t].opname == "END_FOR":
                t += 1  # 3.14's POP_ITER is POP_TOP by now
                if PY313 and t < len(insts) and insts[t].opname == "POP_TOP":
                    t += 1
            inst.target = t

    # A protected region whose handler starts with PUSH_EXC_INFO is a user try/except/finally
    # (comprehension cleanups on 3.12+ don't push exception info; a with statement's handler
    # goes on with WITH_EXCEPT_START): mark where it begins.
    marks = sorted(
        (pos, label_index[target]) for pos, target in try_begins
        if label_index.get(target) is not None and label_index[target] < len(insts)
        and insts[label_index[target]].opname == "PUSH_EXC_INFO"
        and not _with_cleanup(insts, label_index[target])
    )
    user_handlers = {h for _, h in marks}
    for start, end, target, depth, lasti in try_ranges:
        covered = insts[start:len(insts) if end is None else end]
        if label_index.get(target) in user_handlers:
            for inst in covered:
                inst.in_try = True
        if label_index.get(target) is not None and isinstance(depth, int):
            for inst in covered:
                inst.handler = (label_index[target], depth, bool(lasti))
    if not PY311:
        _mark_try_blocks(insts)
    if marks:
        insts = _insert_setup_except(insts, marks)
    _cache[code] = insts
    return insts


def _fuse_314(items: list, position: int):
    """(one canonical Inst, how many items it replaces) for a 3.14 instruction sequence
    starting at `position` that is one instruction of 3.13's, else None."""
    window = items[position:position + len(_WITH_ENTRY_314)]
    if not all(isinstance(it, INSTR) for it in window):
        return None  # a label or a protected-range edge inside: not the compiler's sequence
    shape = [(it.name, int(it.arg) if isinstance(it.arg, int) and it.arg is not bc.UNSET else None)
             for it in window]
    first = window[0]
    if shape == _WITH_ENTRY_314:
        return Inst("BEFORE_WITH", None, None, first.lineno), len(window)
    if shape[:2] == [("PUSH_NULL", None), ("CALL_FUNCTION_EX", None)]:
        # The NULL is the empty kwargs slot: a call without keywords, as 3.13's arg 0.
        return Inst("CALL_FUNCTION_EX", 0, None, window[1].lineno), 2
    return None


def _mark_try_blocks(insts: list[Inst]) -> None:
    """3.10: the instructions between a SETUP_FINALLY and its POP_BLOCK are a try body."""
    blocks: list[bool] = []  # per open block: whether it is a try block (else a with block)
    for inst in insts:
        if inst.opname == "POP_BLOCK":
            if blocks:
                blocks.pop()
            continue
        if any(blocks):
            inst.in_try = True
        if inst.opname == "SETUP_FINALLY":
            blocks.append(True)
        elif inst.opname in ("SETUP_WITH", "SETUP_ASYNC_WITH"):
            blocks.append(False)


def _with_cleanup(insts: list[Inst], handler: int) -> bool:
    """A with statement's own handler (PUSH_EXC_INFO; WITH_EXCEPT_START), not a user's try."""
    return handler + 1 < len(insts) and insts[handler + 1].opname == "WITH_EXCEPT_START"


def _insert_setup_except(insts: list[Inst], marks: list[tuple[int, int]]) -> list[Inst]:
    """Insert SETUP_EXCEPT pseudo-instructions, shifting jump targets to match."""
    positions = sorted({pos for pos, _ in marks})
    shift = [0] * (len(insts) + 1)
    k = 0
    for i in range(len(insts) + 1):
        while k < len(positions) and positions[k] <= i:
            k += 1
        shift[i] = k
    out: list[Inst] = []
    mark_set = set(positions)
    for i, inst in enumerate(insts):
        if i in mark_set:
            # Jumps to position i land on the SETUP_EXCEPT (shift counts it before i).
            out.append(Inst("SETUP_EXCEPT", None, None, inst.lineno, inst.origin))
        out.append(inst)
    for inst in out:
        if inst.target is not None and inst.opname != "SETUP_EXCEPT":
            inst.target = inst.target + shift[inst.target] - (1 if inst.target in mark_set else 0)
    for inst in out:
        if inst.handler is not None:
            h = inst.handler[0]
            inst.handler = (h + shift[h] - (1 if h in mark_set else 0),) + inst.handler[1:]
    for i, inst in enumerate(out):
        if inst.opname == "SETUP_EXCEPT":
            inst.handler = out[i + 1].handler  # covered as the instruction it stands before
    return out

