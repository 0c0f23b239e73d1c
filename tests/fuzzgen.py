"""Program generator for the differential fuzzer (tests/test_fuzz.py).

`generate(chooser)` writes the Python *source* of a module holding one function,
`fuzz_fn`, over tensors, drawn from the constructs minidynamo traces (arithmetic, tensor
methods and torch functions, tuples/lists/dicts, lambdas, closures, functools.partial,
inlined helpers, constant and shape-based control flow, loops over range/tuples/
enumerate/zip, Triton launches of the kernels in tests/kernels/capture_kernels.py), with
constructs it declines inserted at random (print, data-dependent branches, try/except,
generator expressions, C calls, writes to outside objects, raises, asserts, `with`,
class definitions, `.item()`/`.tolist()`), plus a sequence of calls: input shapes, dtypes
and layouts, and values of the globals/closure cell/object attribute the function reads,
changed between calls so cache hits, recompiles and guards are all exercised.

The choices come from a `Chooser`: `HypothesisChooser` (hypothesis draws: shrinkable) or
`RandomChooser` (a seed: `python tests/fuzzgen.py 17` prints program 17).
"""
from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field

# --- choosers ------------------------------------------------------------------------------


class RandomChooser:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def coin(self, percent: int) -> bool:
        return self.rng.randrange(100) < percent


class HypothesisChooser:
    """Draws through hypothesis, so failing programs shrink."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self._st = st
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(self._st.integers(lo, hi))

    def pick(self, seq):
        return seq[self.draw(self._st.integers(0, len(seq) - 1))]

    def coin(self, percent: int) -> bool:
        return self.draw(self._st.integers(0, 99)) < percent


# --- what a program is ---------------------------------------------------------------------

SHAPES = [(6,), (9,), (16,), (2, 5), (4, 3), (3, 4)]
DTYPES = ["float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "strided", "offset"]


@dataclass
class CallSpec:
    """One call of the sequence: the inputs and the outside state at that moment."""

    shape: tuple
    dtype: str
    layout: str
    requires_grad: bool
    n: int
    scale: float
    seed: int
    # Outside state the function may read, set before the call.
    SCALE: float = 2.0
    CFG_s: float = 1.0
    CFG_mode: str = "a"
    OBJ_s: float = 0.5
    CL: float = 1.0

    def __repr__(self):
        return (f"Call(shape={self.shape}, {self.dtype}, {self.layout}, rg={self.requires_grad}, "
                f"n={self.n}, scale={self.scale}, seed={self.seed}, SCALE={self.SCALE}, "
                f"CFG=({self.CFG_s}, {self.CFG_mode!r}), OBJ.s={self.OBJ_s}, CL={self.CL})")


@dataclass
class Program:
    source: str
    signature: str  # "plain", "defaults", "varargs"
    calls: list
    features: set = field(default_factory=set)

    def __repr__(self):
        numbered = "\n".join(f"{i + 1:3}| {line}" for i, line in enumerate(self.source.splitlines()))
        calls = "\n".join(f"  {c!r}" for c in self.calls)
        return f"Program(signature={self.signature}, features={sorted(self.features)})\n{numbered}\ncalls:\n{calls}"


# --- the generator -------------------------------------------------------------------------

# Unary templates over one tensor expression `{a}` (shape-preserving, finite on finite input).
UNARY = [
    "torch.sin({a})", "({a}).cos()", "torch.tanh({a})", "({a}).relu()", "torch.sigmoid({a})",
    "({a}).abs()", "-({a})", "({a}).clamp(-2.0, 2.0)", "torch.nn.functional.gelu({a})",
    "({a}).flip(0)", "({a}).square()", "({a}).clone()", "({a}).contiguous()",
    "({a}).sum(0, keepdim=True) * 0.25 + ({a})", "({a}) - ({a}).mean()",
    "torch.where(({a}) > 0, ({a}), ({a}) * 0.5)", "({a}).softmax(-1)", "({a}).cumsum(0) * 0.1",
    "({a}).reshape(-1).reshape(({a}).shape)", "torch.nn.functional.relu6({a})",
    "({a}).neg().abs().sqrt()", "({a}).detach()", "abs({a})", "({a}).t().t()",
    "({a})[..., :1] + ({a})", "({a})[None].squeeze(0)", "torch.cat(({a}).chunk(2, 0), 0)",
    "torch.stack(({a}).unbind(0))", "({a}).max(0).values + ({a})", "torch.sort({a}, 0).values",
    "({a}) + torch.arange(({a}).shape[-1], dtype=({a}).dtype)", "torch.full_like({a}, 2) * ({a})",
    "({a}).new_zeros(({a}).shape) + ({a})", "({a}).type_as(x)", "(({a}) > 0).to(({a}).dtype)",
    "({a}) + torch.rand_like({a})", "torch.nn.functional.dropout({a}, 0.5, training=True)",
    "({a}).index_select(0, torch.arange(({a}).shape[0]))", "({a}).topk(1, 0).values + ({a})",
    "torch.max({a}, dim=0)[0] * ({a})",
]
BINARY = [
    "({a}) + ({b})", "({a}) - ({b})", "({a}) * ({b})", "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})", "torch.add({a}, {b}, alpha=2)", "({a}) / (({b}).abs() + 1)",
    "torch.lerp({a}, {b}, 0.25)", "torch.stack([{a}, {b}]).sum(0)",
    "torch.cat([{a}, {b}], 0)[:({a}).shape[0]]", "torch.mul({a}, other={b})",
    "torch.where(({a}) > ({b}), {a}, {b})", "({a}).add({b}).mul(0.5)",
    "(({a}) if n > 1 else ({b}))", "operator.add({a}, {b})", "({a}).addcmul({b}, {a}, value=0.5)",
    "torch.nn.functional.silu({a}) - ({b})",
]
# Scalar expressions (Python numbers during the trace).
SCALARS = ["n", "scale", "x.shape[0]", "x.dim()", "len(x)", "SCALE", "CL", 'CFG["s"]', "OBJ.s",
           "(n + 1) * 0.5", "max(n, 1)", "min(scale, 1.0)", "x.numel() % 5", "abs(scale - 2)",
           "float(n)", "x.ndim", "n // 2", "n ** 2", "divmod(n, 2)[1]", "(n or 2)", "sum(range(n))",
           "len(sorted(CFG))", 'getattr(OBJ, "s")', '(1 if hasattr(OBJ, "zz") else 2)',
           "x.shape[-1] * x.shape[0]", "math.sqrt(n + 1)", "CONSTS[n % 2]", "int(scale * 2)"]
# Conditions on constants, shapes and dtypes (never on tensor data).
CONDS = ["n > 1", "n % 2 == 0", "x.shape[0] > 4", "x.dim() == 2", "x.dtype == torch.float64",
         "SCALE > 2.5", "x.is_contiguous()", "len(x.shape) == 1 and n == 0", "scale < 1.0",
         'CFG["mode"] == "a"', "isinstance(n, int) and n in (1, 3)", "OBJ.s > 0",
         "x.stride()[0] == 1", "y.requires_grad", "not x.shape[-1] % 2", "CL >= 1.0",
         "type(scale) is float", "0 < n < 3", "x.shape[0] in (6, 9)", "x is not y",
         "scale is not None and n != 1", "not CFG", "x.shape == y.shape"]

HELPERS = [
    ("_h_axpy", "def _h_axpy(u, w, k=2.0):\n    return u * k + w\n"),
    ("_h_norm", "def _h_norm(u, w=None, *, eps=1.0):\n    s = u.abs().sum(0, keepdim=True) + eps\n"
                "    return u / s if w is None else (u + w) / s\n"),
    ("_h_pair", "def _h_pair(u, w):\n    return (u + w, u - w)\n"),
    ("_h_scaled", "def _h_scaled(u, w=None):\n    return _h_axpy(u, u if w is None else w, k=SCALE)\n"),
    ("_h_star", "def _h_star(*ts, **kw):\n    acc = ts[0]\n    for t in ts[1:]:\n        acc = acc + t\n"
                "    return acc * kw.get(\"k\", 1.0)\n"),
    ("_h_rec", "def _h_rec(u, depth):\n    if depth <= 0:\n        return u\n"
               "    return _h_rec(u * 0.5 + 1, depth - 1)\n"),
    ("_h_side", "def _h_side(u):\n    SIDE.append(\"helper\")\n    return u + 1\n"),
    ("_h_dict", "def _h_dict(d):\n    return d[\"p\"] * 2 + d.get(\"q\", d[\"p\"])\n"),
    ("_h_grid", "def _h_grid(block, meta):\n    return (triton.cdiv(meta[\"n\"], block),)\n"),
    ("_h_check", "def _h_check(u, n):\n    if n == 3:\n        raise ValueError(f\"bad n {n}\")\n"
                 "    return u * 2\n"),
]

# Constructs that hit bugs already reproduced (xfail) in tests/test_regressions.py. Off by
# default so the suite stays green; MINIDYNAMO_FUZZ_KNOWN_BUGS=1 turns them on, to check a
# fix against the fuzzer (and to check the fuzzer still finds them).
KNOWN_BUGS = os.environ.get("MINIDYNAMO_FUZZ_KNOWN_BUGS", "") not in ("", "0")
# (fixed, so on by default: storage offsets, is_leaf and grad_fn read while tracing)
SCALARS += ["x.storage_offset()"]
CONDS += ["x.is_leaf", "x.grad_fn is None"]
SCALE_VALUES = [0.5, 1.5, 1.0] + ([-0.0, 0.0] if KNOWN_BUGS else [])  # test_negative_zero_is_not_zero

SUPPORTED_KINDS = [
    ("assign", 14), ("aug", 5), ("inplace", 3), ("tuple", 4), ("list", 4), ("dict", 4),
    ("lambda", 4), ("closure", 3), ("nonlocal", 2), ("partial", 4), ("helper", 6), ("if", 6),
    ("for_range", 4), ("for_tuple", 3), ("enumerate", 3), ("zip", 2), ("while", 2),
    ("triton", 6), ("global", 4), ("fstring", 2), ("setitem", 2), ("comprehension", 3),
    ("shape_scalar", 3), ("mutate_input", 1), ("traced_error", 1), ("dict_loop", 2),
    ("method_call", 2), ("late_binding", 2), ("walrus", 1), ("del", 1), ("shape_unpack", 1),
    ("mutate_global", 2), ("push_closure", 2), ("helper_raise", 1), ("alias", 2),
]
UNSUPPORTED_KINDS = [
    ("print", 4), ("side", 4), ("gbox", 2), ("data_branch", 3), ("try", 3), ("genexpr", 3),
    ("c_call", 3), ("item", 2), ("raise", 2), ("assert", 2), ("with", 2), ("classdef", 1),
    ("tolist", 1), ("torch_error", 2), ("helper_side", 1),
]


def _weighted(ch, table):
    total = sum(w for _, w in table)
    r = ch.int(0, total - 1)
    for name, w in table:
        if r < w:
            return name
        r -= w
    return table[-1][0]


class _Gen:
    def __init__(self, ch, unsupported_percent: int, allow_triton: bool):
        self.ch = ch
        self.unsupported_percent = unsupported_percent
        self.allow_triton = allow_triton
        self.counter = 0
        self.features: set = set()
        self.helpers_used: set = set()
        self.uses_cl = False
        self.strings: list = []  # string locals (f-strings) that may be returned
        self.aliases: list = []  # locals that are inputs or views of inputs

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    # --- expressions --------------------------------------------------------------------
    def scalar(self, scope):
        ints = scope.get("ints", [])
        if ints and self.ch.coin(30):
            return self.ch.pick(ints)
        s = self.ch.pick(SCALARS + ["0.5", "3", "-1.25"])
        if s == "CL":
            self.uses_cl = True
        return s

    def texpr(self, scope, depth=0):
        tensors = scope["tensors"]
        r = self.ch.int(0, 9)
        if depth >= 2 or r < 3:
            return self.ch.pick(tensors)
        if r < 6:
            return self.ch.pick(UNARY).format(a=self.texpr(scope, depth + 1))
        if r < 9:
            return self.ch.pick(BINARY).format(a=self.texpr(scope, depth + 1), b=self.texpr(scope, depth + 1))
        op = self.ch.pick(["*", "+", "-"])
        return f"({self.texpr(scope, depth + 1)}) {op} {self.scalar(scope)}"

    # --- statements ---------------------------------------------------------------------
    def block(self, scope, n_stmts, in_block):
        lines = []
        for _ in range(n_stmts):
            lines += self.statement(scope, in_block)
        return lines

    def statement(self, scope, in_block):
        if self.ch.coin(self.unsupported_percent):
            kind = _weighted(self.ch, UNSUPPORTED_KINDS)
            self.features.add("U:" + kind)
            return getattr(self, "u_" + kind)(scope, in_block)
        kind = _weighted(self.ch, SUPPORTED_KINDS)
        if kind == "triton" and not self.allow_triton:
            kind = "assign"
        if in_block and kind in ("if", "for_range", "for_tuple", "enumerate", "zip", "while",
                                 "dict_loop") and scope.get("nest", 0) >= 1:
            kind = "assign"
        self.features.add(kind)
        return getattr(self, "s_" + kind)(scope, in_block)

    def target(self, scope, in_block):
        """A variable to assign: a new one at top level, an existing local in blocks (so
        every name is bound on every path)."""
        locals_ = [t for t in scope["tensors"] if t.startswith("v")]
        if in_block or (locals_ and self.ch.coin(25)):
            if locals_:
                return self.ch.pick(locals_), False
            return None, False
        return self.fresh(), True

    def _assign(self, scope, in_block, expr_lines, expr):
        tgt, new = self.target(scope, in_block)
        if tgt is None:  # a block with no local yet: rebind a copy of x-free expression
            return expr_lines + [f"_ = {expr}"]
        if new:
            scope["tensors"].append(tgt)
        return expr_lines + [f"{tgt} = {expr}"]

    def s_assign(self, scope, in_block):
        return self._assign(scope, in_block, [], self.texpr(scope))

    def s_aug(self, scope, in_block):
        locals_ = [t for t in scope["tensors"] if t.startswith("v")]
        if not locals_:
            return self.s_assign(scope, in_block)
        v = self.ch.pick(locals_)
        op = self.ch.pick(["+=", "-=", "*="])
        rhs = self.texpr(scope) if self.ch.coin(60) else self.scalar(scope)
        # `v += t` rebinds v in place only when v is not an input alias; clone first.
        return [f"{v} = ({v}).clone()", f"{v} {op} {rhs}"]

    def s_inplace(self, scope, in_block):
        tgt, new = self.target(scope, in_block)
        if tgt is None:
            return self.s_assign(scope, in_block)
        m = self.ch.pick(["add_({e})", "mul_(0.5)", "clamp_(-1.5, 1.5)", "sub_({e}, alpha=0.5)",
                          "relu_()", "copy_({e})", "zero_()"])
        lines = [f"{tgt} = ({self.texpr(scope)}).clone()", f"{tgt}.{m.format(e=self.texpr(scope))}"]
        if new:
            scope["tensors"].append(tgt)
        return lines

    def s_tuple(self, scope, in_block):
        t, p, r = self.fresh("t"), self.fresh("p"), self.fresh("r")
        a, b, c = (self.texpr(scope) for _ in range(3))
        form = self.ch.int(0, 2)
        if form == 0:
            lines = [f"{t} = ({a}, {b}, {c})", f"{p}, *{r} = {t}"]
            expr = f"{p} * {r}[-1] + len({t}) + {t}[1]"
        elif form == 1:
            lines = [f"{t} = ({a}, ({b}, {c}))", f"{p}, ({r}, _) = {t}"]
            expr = f"{p} - {r} * {t}[1][1]"
        else:
            lines = [f"{t} = tuple([{a}, {b}])", f"{p} = {t}[::-1]"]
            expr = f"{p}[0] + {t}[-1] * len({p})"
        return self._assign(scope, in_block, lines, expr)

    def s_list(self, scope, in_block):
        lst = self.fresh("l")
        a, b, c = (self.texpr(scope) for _ in range(3))
        lines = [f"{lst} = [{a}, {b}]"]
        ops = self.ch.int(0, 3)
        if ops == 0:
            lines += [f"{lst}.append({c})"]
            expr = f"sum({lst})"
        elif ops == 1:
            lines += [f"{lst}.insert(0, {c})", f"{lst}.extend([{a}])"]
            expr = f"{lst}.pop() + {lst}[0] * len({lst})"
        elif ops == 2:
            lines += [f"{lst}[1] = {c}", f"{lst}.reverse()"]
            expr = f"{lst}[0] - {lst}[-1]"
        else:
            lines += [f"{lst} = {lst} + [{c}]"]
            expr = f"torch.stack({lst}).mean(0)"
        return self._assign(scope, in_block, lines, expr)

    def s_dict(self, scope, in_block):
        d = self.fresh("d")
        a, b, c = (self.texpr(scope) for _ in range(3))
        lines = [f'{d} = {{"p": {a}, "q": {b}}}', f'{d}["r"] = {c}']
        form = self.ch.int(0, 2)
        if form == 0:
            expr = f'{d}["p"] + {d}.get("q", {a}) * len({d})'
        elif form == 1:
            lines += [f'{d}.update({{"p": {c}}})', f'{d}.setdefault("s", {a})']
            expr = f'{d}["p"] - {d}["s"] + {d}.pop("r")'
        else:
            self.helpers_used.add("_h_dict")
            expr = f"_h_dict({d})"
        return self._assign(scope, in_block, lines, expr)

    def s_dict_loop(self, scope, in_block):
        locals_ = [t for t in scope["tensors"] if t.startswith("v")]
        if not locals_:
            return self.s_dict(scope, in_block)
        v = self.ch.pick(locals_)
        d, k, w = self.fresh("d"), self.fresh("k"), self.fresh("w")
        return [f'{d} = {{"p": {self.texpr(scope)}, "qq": {self.texpr(scope)}}}',
                f"for {k}, {w} in {d}.items():",
                f"    {v} = {v} + {w} * len({k})"]

    def s_lambda(self, scope, in_block):
        fn = self.fresh("fn")
        a, b = self.texpr(scope), self.texpr(scope)
        k = self.scalar(scope)
        form = self.ch.int(0, 2)
        if form == 0:
            lines = [f"{fn} = lambda u, k={k}: u * k + {a}"]
            call = f"{fn}({b})" if self.ch.coin(50) else f"{fn}({b}, k=2)"
        elif form == 1:
            lines = [f"{fn} = lambda *us: us[0] - us[-1]"]
            call = f"{fn}({a}, {b})"
        else:
            lines = [f"{fn} = (lambda c: lambda u: u * c)({k})"]
            call = f"{fn}({a}) + {b}"
        return self._assign(scope, in_block, lines, call)

    def s_closure(self, scope, in_block):
        g = self.fresh("g")
        a, b = self.texpr(scope), self.texpr(scope)
        c = self.scalar(scope)
        lines = [f"def {g}(u, *, k={c}):", f"    return u * k + {a}"]
        return self._assign(scope, in_block, lines, f"{g}({b})")

    def s_nonlocal(self, scope, in_block):
        if in_block:
            return self.s_closure(scope, in_block)
        cnt, bump = self.fresh("cnt"), self.fresh("bump")
        a = self.texpr(scope)
        lines = [f"{cnt} = 0", f"def {bump}(u):", f"    nonlocal {cnt}", f"    {cnt} += 1",
                 f"    return u + {cnt}"]
        return self._assign(scope, in_block, lines, f"{bump}({bump}({a})) * {cnt}")

    def s_partial(self, scope, in_block):
        p = self.fresh("pt")
        a, b = self.texpr(scope), self.texpr(scope)
        form = self.ch.int(0, 3)
        if form == 0:
            lines = [f"{p} = functools.partial(torch.add, alpha={self.ch.pick(['2', '0.5', 'n'])})"]
            call = f"{p}({a}, {b})"
        elif form == 1:
            self.helpers_used.add("_h_axpy")
            lines = [f"{p} = functools.partial(_h_axpy, k={self.scalar(scope)})"]
            call = f"{p}({a}, {b})"
        elif form == 2:
            self.helpers_used.add("_h_axpy")
            lines = [f"{p} = functools.partial(functools.partial(_h_axpy, {a}), k=2)"]
            call = f"{p}({b})"
        else:
            lines = [f"{p} = functools.partial(torch.clamp, min=-1.0)"]
            call = f"{p}({a}, max=1.0)"
        return self._assign(scope, in_block, lines, call)

    def s_helper(self, scope, in_block):
        a, b = self.texpr(scope), self.texpr(scope)
        name = self.ch.pick(["_h_axpy", "_h_norm", "_h_pair", "_h_scaled", "_h_star", "_h_rec"])
        self.helpers_used.add(name)
        if name == "_h_scaled":
            self.helpers_used.add("_h_axpy")
        call = {
            "_h_axpy": f"_h_axpy({a}, {b}, k={self.scalar(scope)})",
            "_h_norm": self.ch.pick([f"_h_norm({a})", f"_h_norm({a}, {b}, eps=2.0)"]),
            "_h_pair": f"_h_pair({a}, {b})[{self.ch.int(0, 1)}]",
            "_h_scaled": f"_h_scaled({a})",
            "_h_star": self.ch.pick([f"_h_star({a}, {b}, k=0.5)", f"_h_star(*({a}, {b}, {a}))",
                                     f"_h_star({a}, **{{'k': 3}})"]),
            "_h_rec": f"_h_rec({a}, {self.ch.pick(['n', '2', '0'])})",
        }[name]
        return self._assign(scope, in_block, [], call)

    def s_method_call(self, scope, in_block):
        return self._assign(scope, in_block, [], f"OBJ.apply({self.texpr(scope)})")

    def _sub_scope(self, scope, tensors=(), ints=()):
        return {"tensors": scope["tensors"] + list(tensors), "ints": scope.get("ints", []) + list(ints),
                "nest": scope.get("nest", 0) + 1}

    def _indent(self, lines):
        return ["    " + ln for ln in lines]

    def s_if(self, scope, in_block):
        cond = self.ch.pick(CONDS)
        if "CL" in cond:
            self.uses_cl = True
        sub = self._sub_scope(scope)
        then = self.block(sub, self.ch.int(1, 2), True) or ["pass"]
        lines = [f"if {cond}:"] + self._indent(then)
        if self.ch.coin(60):
            other = self.block(self._sub_scope(scope), self.ch.int(1, 2), True) or ["pass"]
            lines += ["else:"] + self._indent(other)
        return lines

    def s_for_range(self, scope, in_block):
        i = self.fresh("i")
        rng = self.ch.pick(["range(n)", "range(3)", "range(1, x.shape[0], 3)", "range(x.dim())"])
        body = self.block(self._sub_scope(scope, ints=[i]), self.ch.int(1, 2), True) or ["pass"]
        if self.ch.coin(20):
            body = [f"if {i} == 2:", "    break"] + body
        elif self.ch.coin(20):
            body = [f"if {i} == 0:", "    continue"] + body
        return [f"for {i} in {rng}:"] + self._indent(body)

    def s_for_tuple(self, scope, in_block):
        w = self.fresh("w")
        items = ", ".join(self.texpr(scope) for _ in range(self.ch.int(1, 3)))
        seq = self.ch.pick([f"({items},)", f"[{items}]"])
        body = self.block(self._sub_scope(scope, tensors=[w]), self.ch.int(1, 2), True) or ["pass"]
        return [f"for {w} in {seq}:"] + self._indent(body)

    def s_enumerate(self, scope, in_block):
        i, w = self.fresh("i"), self.fresh("w")
        items = ", ".join(self.texpr(scope) for _ in range(self.ch.int(1, 3)))
        body = self.block(self._sub_scope(scope, tensors=[w], ints=[i]), self.ch.int(1, 2), True) or ["pass"]
        return [f"for {i}, {w} in enumerate(({items},), {self.ch.pick(['0', '1'])}):"] + self._indent(body)

    def s_zip(self, scope, in_block):
        w, u = self.fresh("w"), self.fresh("u")
        a, b, c = (self.texpr(scope) for _ in range(3))
        body = self.block(self._sub_scope(scope, tensors=[w, u]), 1, True) or ["pass"]
        return [f"for {w}, {u} in zip(({a}, {b}), [{c}, {a}]):"] + self._indent(body)

    def s_while(self, scope, in_block):
        k = self.fresh("k")
        body = self.block(self._sub_scope(scope, ints=[k]), 1, True) or ["pass"]
        return [f"{k} = 0", f"while {k} < n:"] + self._indent(body + [f"{k} += 1"])

    def s_global(self, scope, in_block):
        a = self.texpr(scope)
        src = self.ch.pick(["SCALE", "CL", 'CFG["s"]', "OBJ.s", "GW", "OBJ.w", "CONSTS[1]"])
        if src == "CL":
            self.uses_cl = True
        return self._assign(scope, in_block, [], f"({a}) * {src}" if src not in ("GW", "OBJ.w")
                            else f"({a}) + {src}.sum(0, keepdim=True)[..., :1]")

    def s_fstring(self, scope, in_block):
        if in_block:
            return self.s_assign(scope, in_block)
        s = self.fresh("tag")
        self.strings.append(s)
        return [f"{s} = f\"{{n}}:{{x.shape[0]}}:{{scale:.2f}}:{{x.dtype}}\" + \"%d\" % len(x.shape)"]

    def s_setitem(self, scope, in_block):
        tgt, new = self.target(scope, in_block)
        if tgt is None:
            return self.s_assign(scope, in_block)
        lines = [f"{tgt} = ({self.texpr(scope)}).clone()",
                 f"{tgt}[0] = {self.ch.pick(['0.0', 'n', 'scale', '-1'])}"]
        if new:
            scope["tensors"].append(tgt)
        return lines

    def s_comprehension(self, scope, in_block):
        a, b = self.texpr(scope), self.texpr(scope)
        form = self.ch.int(0, 2)
        if form == 0:
            return self._assign(scope, in_block, [], f"sum([w * {self.scalar(scope)} for w in ({a}, {b})])")
        if form == 1:
            dc = self.fresh("dc")
            return self._assign(scope, in_block, [f'{dc} = {{k: w for k, w in zip("ab", ({a}, {b}))}}'],
                                f'{dc}["a"] - {dc}["b"]')
        return self._assign(scope, in_block, [], f"torch.stack([w.sum(0) for w in [{a}, {b}] if w is not None]).sum(0) + {a}")

    def s_shape_scalar(self, scope, in_block):
        if in_block:
            return self.s_assign(scope, in_block)
        s = self.fresh("s")
        scope.setdefault("ints", []).append(s)
        return [f"{s} = {self.ch.pick(['x.shape[0] * 2 + n', 'x.size(-1) % 3', 'len(x) - n', 'x.numel() // 4'])}"]

    def s_mutate_input(self, scope, in_block):
        who = self.ch.pick(["x", "y"])
        # an input that requires grad cannot be modified in place: the guard decides
        return [f"if not {who}.requires_grad:",
                f"    {who}.{self.ch.pick(['mul_(1.5)', 'add_(1)', 'clamp_(-1.0, 1.0)'])}"]

    def s_traced_error(self, scope, in_block):
        # a user error the trace meets: a bad index, a shape mismatch
        form = self.ch.int(0, 1)
        if form == 0:
            return self._assign(scope, in_block, [], f"({self.texpr(scope)}, {self.texpr(scope)})[n]")
        return self._assign(scope, in_block, [], f"({self.texpr(scope)}).reshape(4, -1)[0].sum() + {self.texpr(scope)}")

    def s_late_binding(self, scope, in_block):
        fs = self.fresh("fs")
        a = self.texpr(scope)
        if self.ch.coin(50):  # every lambda sees the last i (one cell per comprehension)
            lines = [f"{fs} = [lambda u: u * i for i in range(3)]"]
        else:
            lines = [f"{fs} = [lambda u, i=i: u * i for i in range(3)]"]
        return self._assign(scope, in_block, lines, f"{fs}[0]({a}) + {fs}[1]({a})")

    def s_walrus(self, scope, in_block):
        w = self.fresh("wl")
        return self._assign(scope, in_block, [], f"({w} := {self.texpr(scope)}) * 0.5 + {w}")

    def s_del(self, scope, in_block):
        if in_block:
            return self.s_assign(scope, in_block)
        tmp = self.fresh("tmp")
        return [f"{tmp} = {self.texpr(scope)}", f"del {tmp}"]

    def s_shape_unpack(self, scope, in_block):
        if in_block:
            return self.s_assign(scope, in_block)
        r, rest = self.fresh("rows"), self.fresh("rest")
        scope.setdefault("ints", []).append(r)
        return [f"{r}, *{rest} = x.shape", f"{r} = {r} + len({rest})"]

    def s_mutate_global(self, scope, in_block):
        return [self.ch.pick(["GW.add_(1)", "OBJ.w.mul_(0.5)", "GW[0] = n"])]

    def s_push_closure(self, scope, in_block):
        if in_block:
            return self.s_closure(scope, in_block)
        acc, push = self.fresh("acc"), self.fresh("push")
        a, b = self.texpr(scope), self.texpr(scope)
        lines = [f"{acc} = []", f"def {push}(u):", f"    {acc}.append(u)", "    return u * 2"]
        return self._assign(scope, in_block, lines, f"{push}({a}) + {push}({b}) + len({acc}) + {acc}[0]")

    def s_helper_raise(self, scope, in_block):
        self.helpers_used.add("_h_check")
        return self._assign(scope, in_block, [], f"_h_check({self.texpr(scope)}, n)")

    def s_alias(self, scope, in_block):
        # views and identities the result must keep: a view of an input, an input returned
        if in_block:
            return self.s_assign(scope, in_block)
        al = self.fresh("al")
        self.aliases.append(al)
        return [f"{al} = {self.ch.pick(['x[0]', 'x.view(-1) if x.is_contiguous() else x', 'y.t()', 'x', 'y.detach()', 'x[:, None] if x.dim() == 1 else x[0]'])}"]

    def s_triton(self, scope, in_block):
        a3, b3, o3 = self.fresh("ta"), self.fresh("tb"), self.fresh("to")
        lines = [f"{a3} = ({self.texpr(scope)}).contiguous()", f"{b3} = ({self.texpr(scope)}).contiguous()",
                 f"{o3} = torch.empty_like({a3})"]
        form = self.ch.int(0, 8)
        self.features.add(f"triton{form}")
        numel = f"{a3}.numel()"
        if form == 0:
            lines.append(f"K.add_kernel[(triton.cdiv({numel}, 16),)]({a3}, {b3}, {o3}, {numel}, BLOCK=16)")
        elif form == 1:
            lines.append(f'K.add_kernel[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)]'
                         f"({a3}, {b3}, {o3}, {numel}, BLOCK=32)")
        elif form == 2:
            lines.append(f"K.add_kernel[K.grid_1d]({a3}, {b3}, out_ptr={o3}, n={numel}, BLOCK=16)")
        elif form == 3:
            lines.append(f"K.add_kernel[K.GRID_OBJECT]({a3}, {b3}, {o3}, {numel}, BLOCK=16)")
        elif form == 4:
            lines.append(f'K.add_autotuned[lambda meta: (triton.cdiv({numel}, meta["BLOCK"]),)]'
                         f"({a3}, {b3}, {o3}, {numel})")
        elif form == 5:
            lines.append(f'K.add_heuristic[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)]'
                         f"({a3}, {b3}, {o3}, {numel})")
        elif form == 6:
            lines[-1] = f"{o3} = ({a3}).clone()"
            lines.append(f"K.scale_inplace[(triton.cdiv({numel}, 16),)]({o3}, {self.scalar(scope)}, {numel})")
        elif form == 7:
            self.helpers_used.add("_h_grid")
            lines.append(f"K.add_kernel.run({a3}, {b3}, {o3}, {numel}, BLOCK=16, "
                         f"grid=functools.partial(_h_grid, 16), warmup=False)")
        else:
            lk = self.fresh("lk")
            lines.append(f"{lk} = functools.partial(K.options_kernel[(triton.cdiv({numel}, 16),)], BLOCK=16)")
            lines.append(f"{lk}({a3}, {o3}, {numel}, {self.scalar(scope)}, "
                         f"{self.ch.pick(['True', 'False', 'n > 1'])}, None, NEG={self.ch.pick(['True', 'False'])})")
        return self._assign(scope, in_block, lines, f"({o3}).reshape(({a3}).shape) + 0")

    # --- unsupported constructs ---------------------------------------------------------
    def _some_local(self, scope):
        locals_ = [t for t in scope["tensors"] if t.startswith("v")]
        return self.ch.pick(locals_) if locals_ else None

    def u_print(self, scope, in_block):
        return [self.ch.pick(['print("dbg", n, tuple(x.shape))', 'print(f"scale={scale}", SCALE, sep="|")',
                              'print("x dtype", x.dtype, end=";")'])]

    def u_side(self, scope, in_block):
        return [self.ch.pick(["SIDE.append(n)", 'SIDE.extend(["a", x.shape[0]])', "SIDE.append(scale)"])]

    def u_gbox(self, scope, in_block):
        return ['GBOX["count"] += 1']

    def u_helper_side(self, scope, in_block):
        self.helpers_used.add("_h_side")
        return self._assign(scope, in_block, [], f"_h_side({self.texpr(scope)})")

    def u_data_branch(self, scope, in_block):
        v = self._some_local(scope)
        body = f"{v} = {v} + 1" if v else "SIDE.append(\"pos\")"
        return [f"if ({self.texpr(scope)}).sum() > 0:", f"    {body}"]

    def u_try(self, scope, in_block):
        v = self._some_local(scope)
        if v is None:
            return ["try:", "    SIDE.append(\"try\")", "except RuntimeError:", "    pass"]
        if self.ch.coin(50):
            return ["try:", f"    {v} = {v} + 1", "except RuntimeError:", f"    {v} = {v} - 1"]
        return ["try:", '    raise ValueError("inner")', "except ValueError:", f"    {v} = {v} * 2",
                "finally:", '    SIDE.append("finally")']

    def u_genexpr(self, scope, in_block):
        return self._assign(scope, in_block, [], f"sum(w for w in ({self.texpr(scope)}, {self.texpr(scope)}))")

    def u_c_call(self, scope, in_block):
        t = self.fresh("c")
        call = self.ch.pick(["time.perf_counter()", 'zlib.crc32(b"fuzz")', "os.getpid()"])
        lines = [f"{t} = {call}"]
        v = self._some_local(scope)
        if v and "crc32" in call:
            lines.append(f"{v} = {v} + {t} % 5")
        return lines

    def u_item(self, scope, in_block):
        return self._assign(scope, in_block, [], f"({self.texpr(scope)}) + ({self.texpr(scope)}).sum().item()")

    def u_tolist(self, scope, in_block):
        return self._assign(scope, in_block, [], f"({self.texpr(scope)}) * len(({self.texpr(scope)}).tolist())")

    def u_raise(self, scope, in_block):
        exc = self.ch.pick(['ValueError(f"n is {n}")', 'KeyError("missing")', "RuntimeError(x.shape)"])
        return [f"if n == {self.ch.pick(['3', '2'])}:", f"    raise {exc}"]

    def u_assert(self, scope, in_block):
        return [self.ch.pick(['assert x.shape[0] != 9, "nine rows"', "assert n < 3",
                              "assert x.dtype == torch.float32, f\"dtype {x.dtype}\""])]

    def u_with(self, scope, in_block):
        v = self._some_local(scope)
        body = f"{v} = {v} * 1.0" if v else "pass"
        return ["with torch.no_grad():", f"    {body}"]

    def u_classdef(self, scope, in_block):
        c = self.fresh("C")
        return [f"class {c}:", "    k = 2"] + self._assign(scope, in_block, [], f"({self.texpr(scope)}) * {c}.k")

    def u_torch_error(self, scope, in_block):
        return self._assign(scope, in_block, [], f"({self.texpr(scope)}) + torch.ones(9, dtype=x.dtype)")

    # --- the function -------------------------------------------------------------------
    def returns(self, scope):
        tensors = scope["tensors"]
        last = tensors[-1]
        form = self.ch.int(0, 6)
        if form == 0:
            return f"return {last}"
        if form == 1:
            tag = self.strings[-1] if self.strings else '"none"'
            return f"return ({last}, x.shape[0], {tag})"
        if form == 2:
            return f'return {{"out": {last}, "n": n, "first": {tensors[0]}}}'
        if form == 3:
            return f"return [{last}, {self.ch.pick(tensors)}]"
        if form == 4:
            return f"return {last}, x"  # an input returned unchanged
        if form == 5:
            return f"return ({last}, None, scale)"
        if self.aliases and self.ch.coin(60):
            return f"return ({last}, {self.ch.pick(self.aliases)}, {last})"
        return f"return {self.texpr(scope)}"


PRELUDE = """\
import functools
import math
import operator
import os
import time
import zlib

import torch
import triton
from kernels import capture_kernels as K

SIDE = []
GBOX = {"count": 0}
SCALE = 2.0
CFG = {"s": 1.0, "mode": "a"}
CONSTS = (1, 2.5, "c")
GW = torch.arange(4.0)


class Obj:
    def __init__(self):
        self.s = 0.5
        self.w = torch.linspace(-1, 1, 3)

    def apply(self, u):
        return u * self.s + 1


OBJ = Obj()
"""

SIGNATURES = {
    "plain": ("def fuzz_fn(x, y, n, scale):", []),
    "defaults": ("def fuzz_fn(x, y, n=2, *, scale=1.5):", []),
    "varargs": ("def fuzz_fn(x, *ts, n=1, **kw):", ["y = ts[0]", 'scale = kw.get("scale", 1.0)']),
}


def generate(ch, *, unsupported_percent: int | None = None, allow_triton: bool = True) -> Program:
    if unsupported_percent is None:
        unsupported_percent = ch.pick([0, 0, 5, 12, 25])
    g = _Gen(ch, unsupported_percent, allow_triton)
    signature = ch.pick(list(SIGNATURES))
    header, prologue = SIGNATURES[signature]
    scope = {"tensors": ["x", "y"], "ints": []}
    body = list(prologue)
    for _ in range(ch.int(1, 7)):
        body += g.statement(scope, False)
    body.append(g.returns(scope))
    helpers = "\n\n".join(src for name, src in HELPERS if name in g.helpers_used)
    fn = "\n".join([header] + ["    " + ln for ln in body])
    factory = "def _make():\n    CL = 1.0\n\n" + "\n".join("    " + ln for ln in fn.splitlines()) + \
        "\n\n    def _set_cl(v):\n        nonlocal CL\n        CL = v\n\n    return fuzz_fn, _set_cl\n\n\n" \
        "fuzz_fn, _set_cl = _make()\n"
    source = PRELUDE + "\n\n" + (helpers + "\n\n\n" if helpers else "") + factory
    g.features.add("sig:" + signature)
    calls = gen_calls(ch)
    return Program(source, signature, calls, g.features)


def gen_calls(ch) -> list:
    calls = []
    prev = None
    for _ in range(ch.int(2, 5)):
        if prev is not None and ch.coin(35):
            # the same inputs again (a cache hit), perhaps with one outside value changed
            spec = CallSpec(**{k: getattr(prev, k) for k in prev.__dataclass_fields__})
            spec.seed = ch.int(0, 3)
            what = ch.int(0, 11)
            if what == 8:  # same shape, another layout (strides or storage offset)
                spec.layout = ch.pick(LAYOUTS)
            elif what == 9:
                spec.requires_grad = not spec.requires_grad
            elif what == 10:
                spec.scale = ch.pick(SCALE_VALUES)
            elif what == 11:
                spec.dtype = ch.pick(DTYPES)
            elif what == 0:
                spec.SCALE = ch.pick([2.0, 3.0])
            elif what == 1:
                spec.CFG_s = ch.pick([1.0, -1.0])
            elif what == 2:
                spec.CFG_mode = ch.pick(["a", "b"])
            elif what == 3:
                spec.OBJ_s = ch.pick([0.5, -2.0])
            elif what == 4:
                spec.CL = ch.pick([1.0, 0.25])
            elif what == 5:
                spec.n = ch.int(0, 3)
        else:
            shape = ch.pick(SHAPES)
            layout = ch.pick(LAYOUTS)
            spec = CallSpec(shape=shape, dtype=ch.pick(DTYPES), layout=layout,
                            requires_grad=ch.coin(10), n=ch.int(0, 3), scale=ch.pick(SCALE_VALUES),
                            seed=ch.int(0, 3))
        calls.append(spec)
        prev = spec
    return calls


def make_inputs(spec: CallSpec):
    """(x, y) for a call spec, deterministic in spec.seed."""
    import torch
    gen = torch.Generator().manual_seed(spec.seed)
    dtype = getattr(torch, spec.dtype)
    shape = spec.shape

    def one():
        if spec.layout == "transposed" and len(shape) == 2:
            t = torch.randn(shape[::-1], generator=gen, dtype=dtype).t()
        elif spec.layout == "strided":
            t = torch.randn((shape[0] * 2,) + shape[1:], generator=gen, dtype=dtype)[::2]
        elif spec.layout == "offset":
            t = torch.randn((shape[0] + 1,) + shape[1:], generator=gen, dtype=dtype)[1:]
        else:
            t = torch.randn(shape, generator=gen, dtype=dtype)
        if spec.requires_grad:
            t = t.detach().requires_grad_(True)
        return t
    return one(), one()


if __name__ == "__main__":  # print a program: python tests/fuzzgen.py SEED
    print(generate(RandomChooser(int(sys.argv[1]) if len(sys.argv) > 1 else 0)))
