"""Dynamic shapes: which sizes a trace keeps symbolic, and the guards that keep it right.

A symbolic size is a `torch.SymInt` of torch's own shape environment (`ShapeEnv`): the
input's fake tensor is made with symbolic dimensions, fake ops compute symbolic result
shapes, and whatever the trace decides about a size (a Python branch `if n > 16`, a
size fixed by a `range(n)`, two sizes found equal) is recorded by the environment as a
guard. At the end of the trace shape_guards.py collects those guards as sympy expressions
and prints them as Python over the entry's parameters (`2 <= x.size(0)`,
`x.stride(0) == y.size(1)`): one SHAPE_ENV guard each, checked after the tensors' own TENSOR_MATCH guards (which then
leave the symbolic dimensions out).

Which dimensions are symbolic (the policy, as torch.compile's `dynamic=`):

* ``dynamic=None`` (default), automatic: every trace records each input tensor's sizes
  by source; a later trace where a size differs from the one recorded traces that
  dimension symbolically (so the second size seen gives the last recompile);
* ``dynamic=True``: every dimension of every input tensor from the first trace;
* ``dynamic=False``: never, except what `mark_dynamic` asks for.

`mark_dynamic(t, dim)` / `mark_static(t, dim)` pin a tensor's dimensions either way
(torch._dynamo's own marks are read too). Sizes 0 and 1 stay specialised, as in
torch.compile: a symbolic dimension that is 0 or 1 when traced is checked for that value.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch._guards import GuardSource
from torch._guards import Source as _TorchSource

from .shape_guards import collect, render  # noqa: F401 - render: guard_kinds, sources

DYNAMIC_ATTR = "_minidynamo_dynamic_dims"
STATIC_ATTR = "_minidynamo_static_dims"
_TORCH_DYNAMIC_ATTR = "_dynamo_dynamic_indices"  # torch._dynamo.mark_dynamic's
_TORCH_STATIC_ATTR = "_dynamo_static_indices"  # torch._dynamo.mark_static's


def mark_dynamic(t: torch.Tensor, dim) -> None:
    """Trace dimension `dim` (an int or several) of `t` symbolically from the first trace."""
    _mark(t, dim, DYNAMIC_ATTR, "mark_dynamic")


def mark_static(t: torch.Tensor, dim) -> None:
    """Never trace dimension `dim` (an int or several) of `t` symbolically."""
    _mark(t, dim, STATIC_ATTR, "mark_static")


def _mark(t, dim, attr: str, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"minidynamo.{what} takes a tensor, got {type(t).__name__}")
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"minidynamo.{what}: a dimension must be an int, got {d!r}")
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"minidynamo.{what}: dimension {d} is out of range for a tensor of "
                             f"{t.dim()} dimensions")
    marked = set(getattr(t, attr, ()))
    marked.update(d % t.dim() for d in dims)
    setattr(t, attr, marked)


def _marks(t, ours: str, torchs: str) -> set:
    return set(getattr(t, ours, ())) | set(getattr(t, torchs, ()) or ())


class DynamicPolicy:
    """Per optimized function (and per resume function): the policy and what it has seen."""

    def __init__(self, mode: bool | None = None):
        self.mode = mode
        self.seen: dict = {}  # source name → sizes seen first ([None] where they varied)
        self.ints: dict = {}  # source name → the int argument seen first (None: it varied)

    def tensor_dims(self, name: str, t: torch.Tensor) -> tuple:
        """Which dimensions of input `t` (reached as `name`) the trace keeps symbolic."""
        ndim = t.dim()
        marked = _marks(t, DYNAMIC_ATTR, _TORCH_DYNAMIC_ATTR)
        static = _marks(t, STATIC_ATTR, _TORCH_STATIC_ATTR)
        if self.mode is True:
            dims = [True] * ndim
        elif self.mode is False:
            dims = [False] * ndim
        else:
            seen = self.seen.get(name)
            if seen is None or len(seen) != ndim:
                self.seen[name] = list(t.shape)
                dims = [False] * ndim
            else:
                for d, size in enumerate(t.shape):
                    if seen[d] is not None and seen[d] != size:
                        seen[d] = None
                dims = [s is None for s in seen]
        return tuple((d in marked or dyn) and d not in static for d, dyn in enumerate(dims))

    def copy(self) -> "DynamicPolicy":
        """The same policy and record, to trace with and leave this one as it is (explain)."""
        new = DynamicPolicy(self.mode)
        new.seen = {k: list(v) for k, v in self.seen.items()}
        new.ints = dict(self.ints)
        return new

    def int_is_symbolic(self, name: str, value) -> bool:
        """Whether int (or float) argument `name` is traced as a symbolic one. Under
        `dynamic=True`, 0 and 1 are not; automatically, one that changed is, whatever its
        value (as torch.compile's ints and floats, which it does not specialise on 0 and 1
        as it does sizes)."""
        if self.mode is False:
            return False
        if self.mode is True:
            return value not in (0, 1)
        seen = self.ints.setdefault(name, value)
        # An argument that was a tensor in an earlier call varies by kind: its int is symbolic
        # at once (as torch.compile's automatic dynamic treats a changed kind).
        if seen is not None and (seen != value or name in self.seen):
            self.ints[name] = seen = None
        return seen is None


@dataclass(frozen=True)
class SymSource(_TorchSource):
    """How the shape environment names input `index` of the trace (its sources must be its
    own Source type; the guards name the input by index: shape_guards.Term)."""

    index: int

    @property
    def name(self) -> str:  # a property in torch's Source
        return f"input{self.index}"

    def guard_source(self):
        return GuardSource.LOCAL

    def reconstruct(self, codegen):  # pragma: no cover - never used by minidynamo
        raise NotImplementedError


def new_shape_env():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    return ShapeEnv(duck_shape=True, specialize_zero_one=True)


def symbolic_fake(mode, t: torch.Tensor, dims: tuple, index: int):
    """A fake of input `t` whose dimensions `dims` are symbols of the mode's environment."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext
    ctx = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dims])
    fake = mode.from_tensor(t, symbolic_context=ctx, source=SymSource(index))
    # NOTE: the trace changes the fake's metadata where the input's own is changed in place
    # (`x.t_()`); the guards are about the input as it comes in: an alias keeps that.
    fake._minidynamo_as_made = fake.detach()
    return fake


def symbolic_int(shape_env, value: int, index: int):
    """A SymInt of the environment for an int argument, or None where it specialises it."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    expr = shape_env.create_symbol(value, SymSource(index), dynamic_dim=DimDynamic.DYNAMIC, positive=None,
                                   do_not_specialize_zero_one=True)
    sym = shape_env.create_symintnode(expr, hint=value, source=SymSource(index))
    return sym if is_symbolic(sym) else None


def symbolic_float(shape_env, value: float, index: int):
    """A SymFloat of the environment for a float argument, or None where it specialises
    it: an infinity or a NaN (no symbol stands for those), a zero (the environment's
    numbers lose the sign of -0.0)."""
    import math
    if not math.isfinite(value) or value == 0.0:
        return None
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    expr = shape_env.create_unspecified_symbol(value, SymSource(index), dynamic_dim=DimDynamic.DYNAMIC)
    sym = shape_env.create_symfloatnode(expr, hint=value, source=SymSource(index))
    return sym if is_symbolic(sym) else None


def is_symbolic(v) -> bool:
    """A SymInt/SymFloat/SymBool that is not a constant of the environment."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = v.node
        return node.maybe_as_int() is None if isinstance(v, torch.SymInt) else not node.is_constant()
    return False


def has_symbolic(v) -> bool:
    if isinstance(v, (tuple, list)):
        return any(has_symbolic(x) for x in v)
    return is_symbolic(v)


def hint(v) -> int:
    """The value a possibly symbolic int had where the trace made it (its input's size)."""
    return v.node.hint if is_symbolic(v) else int(v)


def static_or_none(values) -> tuple:
    """Per item: the int, or None where it is symbolic."""
    return tuple(None if is_symbolic(v) else int(v) for v in values)


def shape_guard_exprs(shape_env, fakes: list, static: list) -> list:
    """The environment's guards over the symbolic inputs (shape_guards.ShapeExpr), less
    those pinning a size or stride that was static when its input was made (TENSOR_MATCH
    checks it) or a storage offset (no entry checks that: the graph's ops do not depend
    on it). A size made symbolic and specialised since (`range(n)`) keeps its guard."""
    if shape_env is None or not fakes:
        return []
    # NOTE: the trace changes a fake's metadata where the input's own is changed in place
    # (`x.t_()`); the guards are about the input as it comes in.
    fakes = [getattr(f, "_minidynamo_as_made", f) for f in fakes]
    out = []
    for expr, pins_int in collect(shape_env, fakes):
        if pins_int:
            term = expr.reads()[0]
            if term.prop == "storage_offset":
                continue
            if term.prop is not None:
                sizes, strides = static[term.index]
                if (sizes if term.prop == "size" else strides)[term.dim]:
                    continue
        out.append(expr)
    return out
