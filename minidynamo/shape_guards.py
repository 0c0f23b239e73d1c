"""Shape guards: what the shape environment decided about the inputs' sizes, as sympy
expressions, and the printer that writes them as Python over the entry's inputs.

`collect` reads the environment after a trace the way torch's `ShapeEnv.produce_guards`
does for plain strided tensors and int arguments: each input size, stride and storage
offset equals the expression its fake was made with (duck sizing, specialisations), each
guard the trace added that is not statically true, and each symbol's value range. Each is
a `ShapeExpr`: the sympy expression and, for each symbol it reads, the `Term` (which size of
which input) that symbol stands for.

`SourcePrinter` prints a `ShapeExpr` with every symbol as its term's expression
(`x.size(0)`, `self.buf.stride(1)`) and each sympy function torch's environment uses as
plain Python: `//`, `%`, `min`/`max`, `math.floor`, bit operators, ... The functions it
calls are bound in the entry's namespace when printing code. Triton's
`next_power_of_2(n)` — an or-and-shift ladder the environment keeps expanded, over 1,900
characters when printed — prints as `next_power_of_2(n)`, and its comparison with a power
of two as the size range it means (`9 <= x.size(0) <= 16`), exactly equivalent.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
import torch
from sympy.printing.precedence import PRECEDENCE
from torch.utils._sympy import functions as F
from torch.utils._sympy.printers import PythonPrinter

try:
    from torch.utils._sympy.numbers import int_oo
except ImportError:  # pragma: no cover - older torch
    int_oo = sympy.oo

_PROPS = ("size", "stride", "storage_offset")


@dataclass(frozen=True)
class Term:
    """One int the guards read: size or stride `dim` of input `index`, its storage offset,
    or (`prop` None) the int argument `index` itself."""

    index: int
    prop: str | None = None
    dim: int | None = None

    def render(self, sources, ns=None, naming=None) -> str:
        source = sources[self.index]
        base = source.expr(ns) if ns is not None else source.name(naming)
        if self.prop is None:
            return base
        return f"{base}.{self.prop}({'' if self.dim is None else self.dim})"

    def symbol(self) -> sympy.Symbol:
        """A symbol standing for this term itself (the left side of `x.size(1) == s0`)."""
        return sympy.Symbol(f"term_{self.index}_{self.prop}_{self.dim}", integer=True)


@dataclass(frozen=True)
class ShapeExpr:
    """A guard over the environment's symbols; `terms`: (symbol, Term) for each it reads."""

    expr: sympy.Basic
    terms: tuple

    def render(self, sources, ns=None, naming=None) -> str:
        return SourcePrinter(dict(self.terms), sources, ns, naming).doprint(self.expr)

    def reads(self) -> list:
        return [t for _, t in self.terms]


def render(shape, sources, ns=None, naming=None) -> str:
    """A ShapeExpr or Term over `sources`: as code (with namespace `ns`) or for people
    (the sources named with `naming`, as Source.name)."""
    return shape.render(sources, ns, naming)


def next_power_of_2(n: int) -> int:
    """Triton's `next_power_of_2`, step for step (so a guard calling it is the user's)."""
    n -= 1
    n |= n >> 1
    n |= n >> 2
    n |= n >> 4
    n |= n >> 8
    n |= n >> 16
    n |= n >> 32
    return n + 1


def next_power_of_2_arg(e):
    """`n` where `e` is the environment's form of `next_power_of_2(n)` (`1 + (m | m // 2**32)`
    ... down to `m = n - 1`, shifts as `//` or `>>`), else None."""
    if not isinstance(e, sympy.Add) or len(e.args) != 2 or sympy.S.One not in e.args:
        return None
    m = e.args[1] if e.args[0] == 1 else e.args[0]
    for shift in (32, 16, 8, 4, 2, 1):
        if not isinstance(m, F.BitwiseFn_bitwise_or) or len(m.args) != 2:
            return None
        for low, shifted in (m.args, m.args[::-1]):
            if _is_shift(shifted, low, shift):
                m = low
                break
        else:
            return None
    return m + 1


def _is_shift(e, base, shift: int) -> bool:
    if isinstance(e, F.FloorDiv):
        return e.args == (base, sympy.Integer(2 ** shift))
    return isinstance(e, F.RShift) and e.args == (base, sympy.Integer(shift))


# Unary functions of torch's sympy vocabulary: printed name (for people) and the Python
# callable it means (bound in the entry's namespace for code).
_UNARY = {
    "floor": ("math.floor", math.floor), "FloorToInt": ("math.floor", math.floor),
    "ceiling": ("math.ceil", math.ceil), "CeilToInt": ("math.ceil", math.ceil),
    "TruncToInt": ("math.trunc", math.trunc), "RoundToInt": ("round", None), "Abs": ("abs", None),
    "ToFloat": ("float", None), "TruncToFloat": ("float_trunc", lambda v: float(math.trunc(v))),
    **{f"OpaqueUnaryFn_{f}": (f"math.{f}", getattr(math, f))
       for f in ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan",
                 "exp", "log", "asinh", "log2")},
}


class SourcePrinter(PythonPrinter):
    """torch's PythonPrinter with symbols printed as the input sizes they stand for and
    every function a plain Python operator or a callable bound in `ns` (None: for people,
    the sources named with `naming`)."""

    def __init__(self, terms: dict, sources, ns=None, naming=None):
        super().__init__()
        self.terms, self.sources, self.ns, self.naming = terms, sources, ns, naming

    def _ref(self, text: str, fn) -> str:
        """What a call of `fn` (shown as `text`) prints as."""
        if fn is None or self.ns is None:
            return text
        return self.ns.bind(fn, text.rpartition(".")[2])

    def _print_Symbol(self, expr) -> str:
        term = self.terms.get(expr)
        if term is None:
            raise KeyError(f"shape guard symbol {expr} has no input term")
        return term.render(self.sources, self.ns, self.naming)

    def _print_Integer(self, expr) -> str:
        return str(int(expr))

    def _print_Infinity(self, expr) -> str:
        return "math.inf" if self.ns is None else self.ns.bind(math, "math") + ".inf"

    def _print_NegativeInfinity(self, expr) -> str:
        return "-" + self._print_Infinity(expr)

    _print_IntInfinity = _print_Infinity
    _print_NegativeIntInfinity = _print_NegativeInfinity

    def _print_Add(self, expr, order=None) -> str:
        n = next_power_of_2_arg(expr)
        if n is not None:
            return f"{self._ref('next_power_of_2', next_power_of_2)}({self._print(n)})"
        return super()._print_Add(expr)

    def _print_Relational(self, expr) -> str:
        if isinstance(expr, sympy.Eq):
            for side, value in (expr.args, expr.args[::-1]):
                n = next_power_of_2_arg(side)
                if n is not None and value.is_Integer and value >= 2 and int(value) & (int(value) - 1) == 0:
                    # next_power_of_2(n) == 2**k exactly when 2**(k-1) < n <= 2**k (n an int)
                    v = self.parenthesize(n, PRECEDENCE["Relational"] + 0.5)
                    return f"{int(value) // 2 + 1} <= {v} <= {int(value)}"
        if any(next_power_of_2_arg(side) is not None for side in expr.args):  # a call: no parentheses
            lhs, rhs = (self.parenthesize(a, PRECEDENCE["Relational"] + 0.5) for a in expr.args)
            return f"{lhs} {expr.rel_op} {rhs}"
        return super()._print_Relational(expr)

    def _print_And(self, expr) -> str:
        # `2 <= s and s <= 8` (a symbol's range) as `2 <= s <= 8`
        a = expr.args
        if len(a) == 2 and all(isinstance(x, sympy.Le) for x in a):
            lo, hi = (a if a[0].args[1] == a[1].args[0] else a[::-1])
            if lo.args[1] == hi.args[0] and lo.args[0].is_number and hi.args[1].is_number:
                return f"{self._print(lo.args[0])} <= {self._print(lo.args[1])} <= {self._print(hi.args[1])}"
        return super()._print_And(expr)

    def _print_CeilDiv(self, expr) -> str:
        x, div = (self.parenthesize(a, PRECEDENCE["Atom"] - 0.5) for a in expr.args)
        return f"-(-{x} // {div})"

    def _print_LShift(self, expr) -> str:
        return self.stringify(expr.args, " << ", PRECEDENCE["BitwiseAnd"] + 1)

    def _print_RShift(self, expr) -> str:
        return self.stringify(expr.args, " >> ", PRECEDENCE["BitwiseAnd"] + 1)

    def _print_Pow(self, expr) -> str:
        # A symbolic exponent (a shift by a size: older torch folds LShift into x * 2**s)
        # prints as Python's `**`; torch's printer takes only integer exponents before 2.11.
        base, exp = expr.args
        if exp.is_Number:
            return super()._print_Pow(expr)
        b, e = (self.parenthesize(a, PRECEDENCE["Pow"] + 0.5) for a in (base, exp))
        return f"{b} ** {e}"

    def _print_Where(self, expr) -> str:
        c, p, q = (self.parenthesize(a, PRECEDENCE["Atom"] - 0.5) for a in expr.args)
        return f"({p} if {c} else {q})"

    def _print_MinMaxBase(self, expr) -> str:
        return self._print_Max(expr) if isinstance(expr, F.Max) else self._print_Min(expr)

    def _print_IsNonOverlappingAndDenseIndicator(self, expr) -> str:
        from torch.fx.experimental.symbolic_shapes import eval_is_non_overlapping_and_dense
        dim = len(expr.args) // 2
        sizes, strides = ("(" + "".join(self._print(a) + ", " for a in part) + ")"
                          for part in (expr.args[:dim], expr.args[dim:]))
        fn = self._ref("is_non_overlapping_and_dense", eval_is_non_overlapping_and_dense)
        return f"{fn}({sizes}, {strides})"


def _unary_printer(text: str, fn):
    def print_unary(self, expr) -> str:
        return f"{self._ref(text, fn)}({self._print(expr.args[0])})"
    return print_unary


for _name, (_text, _fn) in _UNARY.items():
    setattr(SourcePrinter, f"_print_{_name}", _unary_printer(_text, _fn))


def _term_of(source):
    """The Term of one of the environment's sources (an input, or a size of one)."""
    base = getattr(source, "base", None)
    if base is None:
        return Term(source.index)
    prop = str(getattr(source.prop, "name", source.prop)).lower()
    return Term(base.index, prop, getattr(source, "idx", None))


def collect(shape_env, fakes: list) -> list[tuple[ShapeExpr, bool]]:
    """The environment's guards over the inputs whose fakes are `fakes` (input i is
    `Term(i, ...)`), in torch's order. Each with whether it only pins a term of an input to
    an int (`x.size(1) == 3`), which the tensors' own checks may cover."""
    symbols: dict = {}  # symbol → the first term made from it
    pinned = []  # (term, expression it must equal)
    for i, fake in enumerate(fakes):
        if isinstance(fake, torch.Tensor):
            items = [(Term(i, "size", d), s) for d, s in enumerate(fake.shape)]
            items += [(Term(i, "stride", d), s) for d, s in enumerate(fake.stride())]
            items.append((Term(i, "storage_offset"), fake.storage_offset()))
        else:
            items = [(Term(i), fake)]
        for term, v in items:
            if isinstance(v, torch.SymInt) and v.node.maybe_as_int() is None:
                e = v.node.expr
            elif isinstance(v, torch.SymFloat) and not v.node.is_constant():  # a float argument's
                e = v.node.expr
            else:
                e = sympy.Integer(int(v))
            if isinstance(e, sympy.Symbol) and e not in symbols:
                symbols[e] = term
            else:
                pinned.append((term, e))
    out = [(_make(sympy.Eq(t.symbol(), e, evaluate=False), symbols, shape_env, {t.symbol(): t}),
            bool(e.is_number)) for t, e in pinned]
    seen = set()
    for e in shape_env.get_nontrivial_guards():
        if e not in seen:
            seen.add(e)
            out.append((_make(e, symbols, shape_env), False))
    for sym in symbols:
        r = shape_env.var_to_range.get(sym)
        if r is None:
            continue
        bounds = []
        if r.lower not in (-sympy.oo, -int_oo):
            bounds.append(sympy.Le(r.lower, sym, evaluate=False))
        if r.upper not in (sympy.oo, int_oo):
            bounds.append(sympy.Le(sym, r.upper, evaluate=False))
        if bounds:
            out.append((_make(sympy.And(*bounds, evaluate=False), symbols, shape_env), False))
    return out


def _make(e, symbols: dict, shape_env, extra=None) -> ShapeExpr:
    terms = dict(extra or {})
    for s in sorted(e.free_symbols, key=str):
        if s in terms:
            continue
        if s in symbols:
            terms[s] = symbols[s]
        else:  # a symbol replaced since the inputs were made: the environment knows its source
            terms[s] = _term_of(shape_env.var_to_sources[s][0])
    order = {t: n for n, t in enumerate(symbols.values())}
    return ShapeExpr(e, tuple(sorted(terms.items(), key=lambda kv: order.get(kv[1], -1))))
