"""Closure cells as the trace sees them: one tracker per real cell per trace, so a write
through one function is what another reads.

* CellVariable: a cell the traced code made itself (it lives only inside the call);
* FrameCellVariable: a cell of the frame handed to its resume function by reference;
* PassedCellVariable: a cell of a closure passed in and guarded by its code (builder.py),
  reached through that function (`g.__closure__[0]`), so each call's own cell is used;
* RealCellVariable: a fixed cell (the optimized function's own closure, or the closure of
  a function pinned by identity), reached as that object.

A cell reached again through another function is the tracker it already has, the sharing
guarded; a cell the trace writes is guarded not to be any other cell it holds that a call
could share (`cell_alias_guards`).
"""
from __future__ import annotations

import types
import weakref

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ClosureSource, ItemSource, ObjectSource
from .base import VariableTracker


class CellVariable(VariableTracker):
    """A closure cell created by the traced code itself (lives only inside the call)."""

    __slots__ = ("contents", "name")

    def __init__(self, name: str, contents: VariableTracker | None = None):
        super().__init__(None)
        self.name = name
        self.contents = contents

    def load(self, tx):
        if self.contents is None:
            unsupported("exceptions", f"NameError: free variable {self.name!r} referenced before assignment")
        return self.contents

    def store(self, tx, value):
        self.contents = value

    # A closure made in the trace over this cell outlives it (returned, or live at a graph
    # break), or the cell itself is handed to a resume function: a real cell, made once.
    def rebuild_new(self, rb) -> str:
        return f"{rb.ns.bind(types.CellType, 'CellType')}()"

    def rebuild_fill(self, rb, name: str) -> list:
        if self.contents is None or rb.is_building(self.contents) and self.contents.fills_cell(self):
            return []  # (a class's __class__ cell, filled by type() as the class is made)
        return [f"{name}.cell_contents = {rb.expr(self.contents)}"]


class _OutsideCell:
    """A real cell read and written through a tracker: its contents read on first use (from
    `contents_source()`, guarded as any value read there); a store recorded once as a
    mutation (`store_wording`) and written back after the graph, before a break's native
    instruction or the return (side_effects.py)."""

    __slots__ = ()
    store_wording = "assigning the closure variable {!r}"
    guard_after_store = True  # registered so mutation_guards finds the cell again

    def contents_source(self):
        raise NotImplementedError

    def load(self, tx):
        if not self.loaded:
            try:
                value = self.cell.cell_contents
            except ValueError:
                unsupported("exceptions", f"NameError: free variable {self.name!r} referenced before assignment")
            self.contents = tx.wrap(value, self.contents_source())
            self.loaded = True
        return self.contents

    def store(self, tx, value):
        output = tx.output
        if id(self) not in output.mutated:
            output.mutated[id(self)] = (self, self.store_wording.format(self.name))
            if self.guard_after_store:
                output.wrapped.setdefault(self.source, (self.cell, self))
        self.contents = value
        self.loaded = True

    def writeback(self, rb, target: str, temp: str) -> tuple[str, str]:
        """(the final contents, how to put them in): side_effects.py."""
        return rb.expr(self.contents), f"{target}.cell_contents = {temp}"


class FrameCellVariable(_OutsideCell, CellVariable):
    """A cell of the frame handed to its resume function by reference (a parameter,
    `source`): closures made before the break share it; its contents are read through the
    parameter."""

    __slots__ = ("cell", "loaded")
    store_wording = "assigning the variable {!r} closures share"

    def __init__(self, cell, name: str, source):
        super().__init__(name)
        self.cell = cell
        self.source = source
        self.loaded = False

    def contents_source(self):
        return AttrSource(self.source, "cell_contents")

    def replaces(self, source, var) -> bool:
        """Whether the writeback makes `source` name another object than `var`."""
        return isinstance(source, AttrSource) and source.attr == "cell_contents" and self.contents is not var


# id(real cell) → its FrameCellVariable, per trace: a closure the resume function holds
# reaches the frame's variable through the same tracker (its writes are the frame's).
_frame_cells: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def frame_cells(output) -> dict:
    found = _frame_cells.get(output)
    if found is None:
        found = _frame_cells[output] = {}
    return found


class RealCellVariable(_OutsideCell, VariableTracker):
    """A closure cell of a function that exists outside the trace (the optimized function's
    own, or one an inlined function from outside closes over): one tracker per cell per trace
    (`outer_cells`), so a write through one function is what another reads; its contents are
    read through the cell."""

    __slots__ = ("cell", "name", "contents", "loaded")

    def __init__(self, cell, name: str):
        super().__init__(ObjectSource(cell, f"the cell of closure {name!r}"))
        self.cell = cell
        self.name = name
        self.contents = None
        self.loaded = False

    def contents_source(self):
        return ClosureSource(self.cell, self.name)

    def replaced_sources(self, output) -> set:
        """The contents read before a store, which the writeback replaces: read first."""
        read = ClosureSource(self.cell, self.name)
        hit = output.wrapped.get(read)
        return {read} if hit is not None and hit[1] is not self.contents else set()


# id(real cell) → its RealCellVariable, per trace.
_outer_cells: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def outer_cell(tx, cell, name: str) -> RealCellVariable:
    if tx is None:
        return RealCellVariable(cell, name)
    found = _outer_cells.get(tx.output)
    if found is None:
        found = _outer_cells[tx.output] = {}
    var = found.get(id(cell))
    if var is None:
        passed = (_passed_cells.get(tx.output) or {}).get(id(cell))
        if passed is not None and passed.cell is cell:
            fixed = ObjectSource(cell, f"the cell of closure {name!r}")
            tx.output.guards.add(Guard("ALIAS_MATCH", fixed, True, {"other": passed.source}))
            return passed
        var = found[id(cell)] = RealCellVariable(cell, name)
    return var


class PassedCellVariable(FrameCellVariable):
    """A cell of a closure passed in (an argument, an attribute, an item, a global) that is
    guarded by its code: read and written through the function's source, so the contents
    are this call's (guarded as any value read there) and a store goes to this call's cell."""

    __slots__ = ()

    store_wording = "assigning the closure variable {!r}"
    guard_after_store = False  # its source is the function's: guarded as any read there


# id(real cell) -> its PassedCellVariable, per trace.
_passed_cells: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _per_trace(table, output) -> dict:
    found = table.get(output)
    if found is None:
        found = table[output] = {}
    return found


def _known(output, cell):
    """The tracker this trace already has for `cell`, of any kind, or None."""
    for table in (_frame_cells, _outer_cells, _passed_cells):
        found = table.get(output)
        var = found.get(id(cell)) if found is not None else None
        if var is not None and var.cell is cell:
            return var
    return None


def passed_cell(tx, fn_source, index: int, cell, name: str):
    """Cell `index` of a closure passed in and guarded by its code, read at `fn_source`: the
    tracker the trace has for that cell already (the sharing guarded), else a new one."""
    source = ItemSource(AttrSource(fn_source, "__closure__"), index)
    known = _known(tx.output, cell)
    if known is not None:
        if known.source != source:
            tx.output.guards.add(Guard("ALIAS_MATCH", source, True, {"other": known.source}))
        return known
    var = _per_trace(_passed_cells, tx.output)[id(cell)] = PassedCellVariable(cell, name, source)
    tx.output.wrapped.setdefault(source, (cell, var))  # read before the writes, if those replace it
    return var


def cell_alias_guards(output) -> None:
    """Each cell the trace assigned is not any other cell it holds (where one of the two is
    reached through a call's values, so a later call could make them one cell)."""
    cells = [var for table in (_frame_cells, _outer_cells, _passed_cells)
             for var in (table.get(output) or {}).values()]
    if not any(isinstance(v, PassedCellVariable) for v in cells):
        return
    for var in cells:
        if id(var) not in output.mutated:
            continue
        for other in cells:
            if other is not var and (isinstance(var, PassedCellVariable) or isinstance(other, PassedCellVariable)):
                output.guards.add(Guard("ALIAS_MATCH", var.source, False, {"other": other.source}))
