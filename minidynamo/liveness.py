"""Which locals a resume function needs: those some path from the resume point reads
before writing them (backward dataflow over normalize(code)).

Exception handlers are reached from anywhere in their protected region; the regions are
not kept by normalize, so every handler counts as a successor of every instruction: a
local an `except` block reads stays live wherever the block could start. Code that can
read its frame by name (`locals()`, `vars()`, `eval`, `exec`) keeps every local.
"""
from __future__ import annotations

import weakref

from .instructions import normalize
from .resume import cell_of, cell_param
from .interpreter.blocks import HandlerBlock, TryBlock, WithBlock

_READS = {"LOAD_FAST", "LOAD_FAST_AND_CLEAR", "DELETE_FAST", "LOAD_FAST_CHECK"}
_WRITES = {"STORE_FAST"}
_NO_FALLTHROUGH = {"JUMP", "RETURN_VALUE", "RAISE_VARARGS", "RERAISE"}
# Handler entries: 3.11+ handlers start with PUSH_EXC_INFO; 3.10 blocks name them.
_HANDLER_SETUPS = {"SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH"}
_FRAME_READERS = {"locals", "vars", "eval", "exec"}

_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def live_locals(code, index: int) -> frozenset | None:
    """Locals read before written on some path from instruction `index`; None when any
    local may be read (the frame is read by name)."""
    table = _cache.get(code)
    if table is None:
        table = _cache[code] = _analyse(code)
    return None if table is _ALL else table[index]


_ALL = object()


def _analyse(code):
    if _FRAME_READERS & set(code.co_names):
        return _ALL
    insts = normalize(code)
    n = len(insts)
    handlers = [i for i, inst in enumerate(insts) if inst.opname == "PUSH_EXC_INFO"]
    handlers += [inst.target for inst in insts if inst.opname in _HANDLER_SETUPS and inst.target is not None]
    succ = []
    for i, inst in enumerate(insts):
        s = []
        if inst.opname not in _NO_FALLTHROUGH and i + 1 < n:
            s.append(i + 1)
        if inst.target is not None:
            s.append(inst.target)
        succ.append([t for t in s if t < n])
    live = [frozenset()] * (n + 1)
    changed = True
    while changed:
        changed = False
        from_handlers = frozenset().union(*(live[h] for h in handlers)) if handlers else frozenset()
        for i in range(n - 1, -1, -1):
            inst = insts[i]
            out = from_handlers.union(*(live[t] for t in succ[i])) if succ[i] else from_handlers
            if inst.opname in _WRITES:
                out = out - {inst.arg}
            if inst.opname in _READS:
                out = out | {inst.arg}
            if out != live[i]:
                live[i] = out
                changed = True
    return live


def live_names(tx, target: int, cells_by_reference: bool = False) -> tuple:
    """The locals of the frame `tx` (a translator) a resume function at `target` takes, by
    name: its bound locals live there, then its own cells.

    `cells_by_reference` (a graph break of the frame): each cell itself, as the parameter
    `___cell_<name>` (resume.cell_param), so the closures made before the break, the
    resume function and a closure that escapes share one variable, as in eager.
    Otherwise (a generator made again from its code) the cells with a value go by value:
    the function makes fresh cells for them, which is sound there because no closure over
    them can be rebuilt."""
    live = live_locals(tx.code, target)
    bound = [n for n in tx.code.co_varnames if n in tx.f_locals]
    names = tuple(n for n in bound if live is None or n in live)
    if cells_by_reference:
        return names + tuple(cell_param(n) for n in tx.code.co_cellvars if n in tx.cells)
    cells = tuple(n for n in tx.code.co_cellvars
                  if n in tx.cells and getattr(tx.cells[n], "contents", None) is not None)
    return names + tuple(n for n in cells if n not in names)


def local_value(tx, name: str):
    """The tracker of local or own cell `name` of the frame `tx` (see live_names): a
    passed cell's parameter stands for the cell tracker itself."""
    cell = cell_of(name)
    if cell is not None:
        return tx.cells[cell]
    return tx.f_locals[name] if name in tx.f_locals else tx.cells[name].contents


_WITH_SETUPS = {"SETUP_WITH", "SETUP_ASYNC_WITH"}
_BLOCK_SETUPS = _WITH_SETUPS | {"SETUP_FINALLY"}
_blocks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def open_with_blocks(code, index: int) -> tuple:
    """Python 3.10: the SETUP_WITH instructions (normalized indices, outermost first) whose
    blocks are on the block stack at instruction `index`, or None when `index` is inside a
    try block or unreachable. The block stack at an instruction is the same on every path
    to it (CPython's compiler keeps it so): one pass along the control flow finds it."""
    table = _blocks.get(code)
    if table is None:
        table = _blocks[code] = _block_stacks(normalize(code))
    found = table[index]
    if found is None or any(block is not WithBlock for block, _ in found):
        return None
    return tuple(at for _, at in found)


def _block_stacks(insts) -> list:
    n = len(insts)
    stacks: list = [None] * n
    stacks[0] = ()
    todo = [0]
    while todo:
        i = todo.pop()
        blocks, inst = stacks[i], insts[i]
        op = inst.opname
        nxt = []
        if op in _BLOCK_SETUPS:
            block = WithBlock if op in _WITH_SETUPS else TryBlock
            nxt += [(i + 1, blocks + ((block, i),)), (inst.target, blocks + ((HandlerBlock, i),))]
        elif op == "POP_BLOCK" or op == "POP_EXCEPT":
            nxt.append((i + 1, blocks[:-1]))
        else:
            if op not in _NO_FALLTHROUGH:
                nxt.append((i + 1, blocks))
            if inst.target is not None:
                nxt.append((inst.target, blocks))
        for j, b in nxt:
            if j is not None and j < n and stacks[j] is None:
                stacks[j] = b
                todo.append(j)
    return stacks
