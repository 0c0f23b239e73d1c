"""Names in the user's terms for what minidynamo reports about generated functions.

Two kinds of function that minidynamo calls are not the user's: the resume function of a
graph break (`resume_in_f_at_4`, whose parameters `___stack0`, ... are the value stack at
the resume point) and the wrapper `optimize(module)` calls (`forward(*args, **kwargs)`,
holding the module in a closure cell `mod`). A `Naming` says how their names read in the
user's terms — the user's function and line, `the value of float(x.max()) at line 4`,
`self.scale`, `tokens` — by naming the roots of the sources its messages name (guard
failures, warnings, explain's guards): `Source.name(naming)` reads a root (a parameter, a
parameter's item, a closure cell) through the Naming and composes the rest on it. Guards
themselves keep the names they run with.
"""
from __future__ import annotations

import inspect
import linecache
import os
from dataclasses import dataclass, field, replace

import bytecode as bc

from ._compat import PY311
from .instructions import normalize

# Instructions that only move values around: the stack value is not theirs.
_MOVES = ("SWAP", "COPY", "DUP_TOP", "DUP_TOP_TWO", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N")
_LONGEST = 60  # characters of an expression shown before it is cut


@dataclass
class Naming:
    """How a cached function reads to the user: `function` (its name), `where` (file:line),
    `resume` ("after the graph break at line 4", or "") and how the roots of its sources
    read (Source.name): `locals`, a parameter's words (`___stack0` → `the value of ...`);
    `items`, the words of an item of a parameter in `collections` (`("args", 0)` →
    `tokens`; other items read as written: `args[3]`), `keywords` the one of those whose
    string keys name themselves (`kwargs['mask']` → `mask`); `cells`, (cell, words) for
    closure cells (the module's: `self`)."""
    function: str
    where: str
    resume: str = ""
    locals: dict = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    collections: frozenset = frozenset()
    keywords: str | None = None
    cells: tuple = ()

    def local(self, name: str) -> str:
        return self.locals.get(name, name)

    def item(self, local: str, key) -> str | None:
        """How item `key` of parameter `local` reads; None: as the item of its name."""
        if local not in self.collections:
            return None
        named = self.items.get((local, key))
        if named is None and local == self.keywords and type(key) is str and key.isidentifier():
            named = key
        return named if named is not None else f"{local}[{key!r}]"

    def cell(self, cell) -> str | None:
        return next((words for c, words in self.cells if c is cell), None)

    def label(self) -> str:
        """`f (file:line)`, or `f after the graph break at line 4 (file:4)`."""
        return f"{self.function}{' ' + self.resume if self.resume else ''} ({self.where})"


def plain(name: str, where: str) -> Naming:
    return Naming(name, where)


# optimize(module) calls the module from a function of api.py; a break in the module's hooks
# (or Module.__call__) resumes in that function, which is no code of the user's.
_OWN_CALL_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api.py")


def for_resume(fn, root: Naming) -> Naming:
    """The Naming of resume function `fn` (resume.py) of the function `root` names."""
    info = getattr(fn, "_minidynamo_resume", None)
    if info is None:
        return root
    code = info.code
    if code.co_filename == _OWN_CALL_FILE:  # optimize(module)'s call of the module: no line of the user's
        return replace(root, resume="after a graph break in the module's call (its hooks)")
    line = normalize(code)[info.target].lineno if info.target < len(normalize(code)) else None
    names = dict(root.locals)
    for param, original in zip(info.params, info.originals):
        if param.startswith("___stack"):
            index = int(param[len("___stack"):])
            names[param] = _stack_words(code, info, index, line)
        elif param != original:  # a local renamed because its name was no identifier
            names[param] = original
    file = code.co_filename
    where = f"{file}:{line}" if line is not None else root.where
    resume = f"after the graph break at line {line}" if line is not None else "after a graph break"
    return replace(root, where=where, resume=resume, locals=names)


def _stack_words(code, info, index: int, line) -> str:
    """`the value of `float(x.max())` at line 4` for the stack value that parameter
    `___stack<index>` carries, or `the value on the stack at line 4 (slot 0)` where the
    instruction that made it cannot be told."""
    # The slot's depth from the top at the resume point (1: the top), NULL slots counted.
    slots = [i for i, null in enumerate(info.nulls) if not null]
    depth = len(info.nulls) - slots[index]
    expr = _producer_text(code, info.target, depth) if PY311 else None
    at = f" at line {line}" if line is not None else ""
    if expr is None:
        return f"the value on the stack{at} (stack slot {index})"
    return f"the value of `{expr}`{at}"


def _producer_text(code, target: int, depth: int) -> str | None:
    """The source text of the instruction that pushed the value `depth` from the top of
    the stack at normalized index `target`, walking back over straight-line code; None
    where that cannot be told for sure."""
    insts = normalize(code)
    if target >= len(insts) or target == 0:
        return None
    items = list(bc.Bytecode.from_code(code))
    origin = insts[target].origin
    for item in reversed(items[:origin]):
        if not isinstance(item, bc.Instr):
            continue  # a label: the linear predecessor still falls through (checked below)
        if item.name in _MOVES or item.is_uncond_jump() or item.name.startswith("RETURN") \
                or item.name in ("RAISE_VARARGS", "RERAISE"):
            return None  # a value moved, or code that does not fall through to here
        try:
            pre, post = item.pre_and_post_stack_effect()
        except Exception:  # noqa: BLE001 - an opcode the bytecode package cannot size
            return None
        # (pre, post): a pure push reads (n, 0); otherwise pre is what it pops (negative).
        pops, pushes = (0, pre + post) if pre > 0 else (-pre, post)
        if depth <= pushes:
            return _source_text(code.co_filename, item.location) if depth == 1 else None
        if item.name.startswith("CALL"):
            return None  # on 3.11 a CALL pops one more than the package's estimate
        depth = depth - pushes + pops
    return None


def _source_text(filename: str, loc) -> str | None:
    if loc is None or loc.lineno is None or loc.col_offset is None or loc.end_col_offset is None:
        return None
    lines = [linecache.getline(filename, n) for n in range(loc.lineno, (loc.end_lineno or loc.lineno) + 1)]
    if not all(lines):
        return None
    data = [ln.encode() for ln in lines]  # columns are UTF-8 byte offsets
    if len(data) == 1:
        text = data[0][loc.col_offset:loc.end_col_offset].decode(errors="replace")
    else:
        text = " ".join([data[0][loc.col_offset:].decode(errors="replace").strip()]
                        + [d.decode(errors="replace").strip() for d in data[1:-1]]
                        + [data[-1][:loc.end_col_offset].decode(errors="replace").strip()])
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= _LONGEST else text[:_LONGEST - 1] + "…"


def for_module(mod, forward) -> Naming:
    """The Naming of `forward`, the call `optimize(module)` runs (api.py): named and placed
    as the module's forward, the closure cell holding the module read as `self`, positional
    arguments by the forward's parameter names, keyword arguments by their keys."""
    code = getattr(type(mod).forward, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    cells = dict(zip(forward.__code__.co_freevars, forward.__closure__ or ()))
    try:
        params = list(inspect.signature(mod.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    items = {}
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        items[("args", i)] = p.name
    return Naming(forward.__qualname__, where, "",
                  {"args": "the positional arguments", "kwargs": "the keyword arguments"}, items,
                  frozenset({"args", "kwargs"}), "kwargs", ((cells["mod"], "self"),))
