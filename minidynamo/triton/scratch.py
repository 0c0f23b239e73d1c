"""Scratch memory of a launch program: values only launches use live in one uint8 buffer per
call, laid out by lifetime so values not live at the same time share memory.

With static sizes the layout is fixed when the program is built (`layout`: best fit, byte
offsets as constants). With symbolic sizes (one graph for every size) each value's size
is computed per call from the entry's inputs (`SizeExprs`), values that never live at
the same time share a slot (`slot_layout`), and slot offsets are sums computed per call.

Nothing here may decide a symbolic size (that would add a guard the entry never checks):
only `statically_known_true` and reading constants.
"""
from __future__ import annotations

import torch

SCRATCH_ALIGN = 256  # bytes: more than any alignment Triton specialises on


def scratch_view(buf, offset: int, nbytes: int, dtype, shape):
    """A scratch value as a tensor, for a launch that leaves the direct path."""
    return buf[offset:offset + nbytes].view(dtype).view(shape)


def as_int(v):
    """An int for a plain or constant symbolic int, else None."""
    if isinstance(v, int):
        return v
    if isinstance(v, torch.SymInt):
        return v.node.maybe_as_int()
    return None


def known_true(cond) -> bool:
    if isinstance(cond, bool):
        return cond
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    return statically_known_true(cond)


def definitely_contiguous(val) -> bool:
    """Contiguous for every size the entry's guards allow (dimensions of size 1 skipped)."""
    expected = 1
    for size, stride in reversed(list(zip(val.shape, val.stride()))):
        if known_true(size == 1):
            continue
        if not known_true(stride == expected):
            return False
        expected = expected * size
    return True


def layout(intervals: dict) -> tuple[dict, int]:
    """(node -> byte offset, total bytes): values whose lifetimes do not overlap share
    memory (best fit over freed blocks, else the end of the buffer)."""
    offsets, live, free, top = {}, [], [], 0
    for node, (start, end, size) in sorted(intervals.items(), key=lambda kv: kv[1][0]):
        size = max(SCRATCH_ALIGN, -(-size // SCRATCH_ALIGN) * SCRATCH_ALIGN)
        for blk in [b for b in live if b[0] < start]:
            live.remove(blk)
            free.append((blk[1], blk[2]))
        fits = [b for b in free if b[1] >= size]
        if fits:
            off, have = min(fits, key=lambda b: b[1])
            free.remove((off, have))
            if have > size:
                free.append((off + size, have - size))
        else:
            off, top = top, top + size
        live.append((end, off, size))
        offsets[node] = off
    return offsets, top


def slot_layout(intervals: dict) -> tuple[dict, int]:
    """(node -> slot, number of slots): values whose lifetimes do not overlap may share a
    slot (its size per call: the largest of its values)."""
    slots, ends = {}, []  # ends[j]: last use of slot j's latest value
    for node, (start, end, _) in sorted(intervals.items(), key=lambda kv: kv[1][0]):
        free = [j for j, e in enumerate(ends) if e < start]
        j = free[0] if free else len(ends)
        if j == len(ends):
            ends.append(end)
        else:
            ends[j] = end
        slots[node] = j
    return slots, len(ends)


class SizeExprs:
    """Python expressions for symbolic sizes, over the entry's inputs: each symbol of the
    shape environment is read from an input's size, stride or value that carries it."""

    def __init__(self, nodes, input_exprs: dict):
        self.symbols: dict = {}
        for n in nodes:
            if n.op != "placeholder" or n not in input_exprs:
                continue
            val, expr = n.meta.get("val"), input_exprs[n]
            if isinstance(val, torch.Tensor):
                for what, items in (("size", val.shape), ("stride", val.stride())):
                    for d, s in enumerate(items):
                        self._add(s, f"{expr}.{what}({d})")
            else:
                self._add(val, expr)

    def _add(self, s, expr: str) -> None:
        import sympy
        if isinstance(s, torch.SymInt):
            e = s.node.expr
            if isinstance(e, sympy.Symbol) and e not in self.symbols:
                self.symbols[e] = f"({expr})"

    def render(self, v) -> str:
        """Code for int `v`; ValueError when a symbol is not read from an input."""
        c = as_int(v)
        if c is not None:
            return str(c)
        import sympy
        from torch.utils._sympy.printers import PythonPrinter
        e = v.node.expr
        tokens = {}
        for sym in e.free_symbols:
            if sym not in self.symbols:
                raise ValueError(f"size {e} is not computed from the inputs")
            tokens[sym] = sympy.Symbol(f"SIZETOKEN{len(tokens)}", integer=True)
        try:
            text = PythonPrinter().doprint(e.xreplace(tokens))
        except Exception as exc:  # a function the printer does not know
            raise ValueError(f"size {e} has no Python form: {exc}") from None
        for sym, token in sorted(tokens.items(), key=lambda kv: -len(kv[1].name)):
            text = text.replace(token.name, self.symbols[sym])
        return f"({text})"
