"""The shape-guard printer (minidynamo/shape_guards.py): every sympy function torch's shape
environment emits prints as plain Python whose value, evaluated on real sizes, is sympy's;
symbols print as the input sizes they stand for (through module attributes too); Triton's
`next_power_of_2` prints as itself, and as a size range where it is compared."""
from __future__ import annotations

import math

import pytest
import sympy
import torch
import torch.utils._sympy.functions as F
from kernels.capture_kernels import triton

import minidynamo
from minidynamo.shape_guards import ShapeExpr, SourcePrinter, Term, next_power_of_2, next_power_of_2_arg
from minidynamo.sources import Namespace

s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
TERMS = ((s0, Term(0, "size", 0)), (s1, Term(0, "size", 1)))


class _Input:
    """A stand-in for the entry's source of input 0."""

    def expr(self, ns):
        return "x"

    def name(self, naming=None):
        return "x"


def _as_code(expr):
    ns = Namespace()
    return ShapeExpr(expr, TERMS).render([_Input()], ns), ns


def _evaluate(expr, x):
    code, ns = _as_code(expr)
    return eval(code, dict(ns.values), {"x": x})


# (torch's function, an expression using it). Each is built from the class itself, so the
# case fails if torch folds it into another function.
CASES = [
    ("FloorDiv", lambda: F.FloorDiv(s0, s1)),
    ("CleanDiv", lambda: F.CleanDiv(s0, s1)),
    ("PythonMod", lambda: F.PythonMod(s0, s1)),
    ("Mod", lambda: F.Mod(s0, s1)),
    ("ModularIndexing", lambda: F.ModularIndexing(s0, 2, 3)),
    ("Min", lambda: F.Min(s0, s1)),
    ("Max", lambda: F.Max(s0, s1)),
    ("Where", lambda: F.Where(sympy.Gt(s0, 3), s0, s1)),
    ("PowByNatural", lambda: F.PowByNatural(s0, s1)),
    ("IntTrueDiv", lambda: F.IntTrueDiv(s0, s1)),
    ("FloatTrueDiv", lambda: F.FloatTrueDiv(F.ToFloat(s0), F.ToFloat(s1))),
    ("ToFloat", lambda: F.ToFloat(s0)),
    ("TruncToInt", lambda: F.TruncToInt(F.IntTrueDiv(s0, s1))),
    ("FloorToInt", lambda: F.FloorToInt(F.IntTrueDiv(s0, s1))),
    ("CeilToInt", lambda: F.CeilToInt(F.IntTrueDiv(s0, s1))),
    ("RoundToInt", lambda: F.RoundToInt(F.IntTrueDiv(s0, s1))),
    ("RoundDecimal", lambda: F.RoundDecimal(F.IntTrueDiv(s0, s1), 2)),
    ("TruncToFloat", lambda: F.TruncToFloat(F.IntTrueDiv(s0, s1))),
    ("BitwiseFn_bitwise_and", lambda: F.BitwiseFn_bitwise_and(s0, s1)),
    ("BitwiseFn_bitwise_or", lambda: F.BitwiseFn_bitwise_or(s0, s1)),
    ("BitwiseFn_bitwise_xor", lambda: F.BitwiseFn_bitwise_xor(s0, s1)),
    ("Identity", lambda: F.Identity(s0)),
    ("IsNonOverlappingAndDenseIndicator", lambda: F.IsNonOverlappingAndDenseIndicator(s0, s1, s1, 1)),
    ("floor", lambda: sympy.floor(F.IntTrueDiv(s0, s1))),
    ("ceiling", lambda: sympy.ceiling(F.IntTrueDiv(s0, s1))),
    ("Abs", lambda: sympy.Abs(s0 - s1)),
    *[(f"OpaqueUnaryFn_{f}", lambda f=f: getattr(F, f"OpaqueUnaryFn_{f}")(F.IntTrueDiv(s0, s1 + 10)))
      for f in ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "exp", "log",
                "asinh", "log2")],
    # what the shift helpers become (LShift: a product; RShift: a floor division)
    ("LShift", lambda: F.LShift(s0, s1)),
    ("RShift", lambda: F.RShift(s0, s1)),
    ("CeilDiv", lambda: F.CeilDiv(s0, s1)),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("sizes", [(7, 3), (12, 4), (5, 9)])
def test_each_function_prints_as_python_with_sympys_value(name, make, sizes):
    expr = make()
    if not name.endswith("Shift") and name != "CeilDiv":
        assert any(type(a).__name__ == name for a in sympy.preorder_traversal(expr)), expr
    x = torch.empty(sizes)
    want = expr.xreplace({s0: sympy.Integer(sizes[0]), s1: sympy.Integer(sizes[1])})
    got = _evaluate(expr, x)
    if want.is_Integer or want in (sympy.true, sympy.false):
        assert got == want and type(got) in (int, bool), (name, got, want)
    else:
        assert math.isclose(got, float(want), rel_tol=1e-12), (name, got, want)
    text = ShapeExpr(expr, TERMS).render([_Input()])
    assert "x.size(0)" in text and (name[0].islower() or name not in text), text


def test_relations_and_ranges_print_chained():
    e = sympy.And(sympy.Le(2, s0, evaluate=False), sympy.Le(s0, 8, evaluate=False), evaluate=False)
    assert ShapeExpr(e, TERMS).render([_Input()]) == "2 <= x.size(0) <= 8"
    e = sympy.Eq(F.FloorDiv(s0, 2), s1)
    assert ShapeExpr(e, TERMS).render([_Input()]).replace("(", "").replace(")", "") == "x.size0 // 2 == x.size1"


def _np2_expr():
    """next_power_of_2 run on a SymInt: the environment's own expression for it."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
    from minidynamo.dynamic import SymSource
    env = ShapeEnv()
    sym = env.create_symbol(11, SymSource(0), dynamic_dim=DimDynamic.DYNAMIC)
    n = env.create_symintnode(sym, hint=11, source=SymSource(0))
    return triton.next_power_of_2(n).node.expr, sym


def test_next_power_of_2_prints_as_the_call_and_its_comparison_as_a_range():
    expr, sym = _np2_expr()
    terms = ((sym, Term(0, "size", 0)),)
    assert next_power_of_2_arg(expr) == sym
    assert len(SourcePrinter.__mro__[1]().doprint(expr)) > 500  # torch's own printer
    assert ShapeExpr(expr, terms).render([_Input()]) == "next_power_of_2(x.size(0))"
    assert ShapeExpr(sympy.Eq(expr, 16), terms).render([_Input()]) == "9 <= x.size(0) <= 16"
    assert ShapeExpr(sympy.Eq(expr, 1), terms).render([_Input()]) == "next_power_of_2(x.size(0)) == 1"
    # exactly equivalent, as code, to the expression it stands for
    for value in (1, 16, 12):
        ns = Namespace()
        code = ShapeExpr(sympy.Eq(expr, value), terms).render([_Input()], ns)
        for n in range(0, 40):
            x = torch.empty(n)
            assert eval(code, dict(ns.values), {"x": x}) == bool(sympy.Eq(expr, value).xreplace({sym: n})), (code, n)
            assert next_power_of_2(n) == triton.next_power_of_2(n)


def test_next_power_of_2_guard_reads_short_in_entries_and_failures():
    from kernels.capture_kernels import add_kernel

    def f(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(1,)](x, y, out, n, BLOCK=triton.next_power_of_2(n))
        return out

    opt = minidynamo.optimize(f)
    for n in (5, 7, 9, 6, 16, 11):
        x = torch.randn(n)
        torch.testing.assert_close(opt(x, x), x + x)
    entries = opt.cache_entries()
    assert "5 <= x.size(0) <= 8" in entries[1].guard_text()
    assert "9 <= x.size(0) <= 16" in entries[2].guard_text()
    shape = [g for g in opt.guard_failures() if g.kind == "SHAPE_ENV"]
    assert shape and all(len(g.guard) < 80 for g in shape), shape
    assert shape[0].reason == "x.size(0) = 9: the entry needs 5 <= x.size(0) <= 8", shape[0].reason


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(6.0))

    def forward(self, x):
        if self.table.shape[0] > 4:
            return x + self.table.sum()
        return x - 1


def test_a_guard_reads_a_size_through_a_module_attribute():
    def f(holder, x):
        return holder(x) * 2

    holder = Holder()
    minidynamo.mark_dynamic(holder.table, 0)
    opt = minidynamo.optimize(f)
    x = torch.ones(3)
    assert torch.equal(opt(holder, x), f(holder, x))
    text = opt.cache_entries()[0].guard_text()
    assert "holder.table.size(0)" in text and "5 <= holder.table.size(0)" in text, text
    holder.table = torch.arange(3.0)  # now the other branch: the guard fails, a new entry
    assert torch.equal(opt(holder, x), f(holder, x))
    failures = [g for g in opt.guard_failures() if g.kind == "SHAPE_ENV"]
    assert failures and "holder.table.size(0) = 3" in failures[-1].reason, opt.guard_failures()
