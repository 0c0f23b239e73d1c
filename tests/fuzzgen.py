"""Program generator for the differential fuzzer (tests/test_fuzz.py).

`generate(chooser)` writes the Python *source* of a module holding one function,
`fuzz_fn`, over tensors, drawn from the constructs minidynamo traces (arithmetic, tensor
methods and torch functions, tuples/lists/dicts, lambdas, closures, functools.partial,
inlined helpers, constant and shape-based control flow, loops over range/tuples/
enumerate/zip, Triton launches of the kernels in tests/kernels/capture_kernels.py, calls
of an nn.Module argument `m`, dict views taken before their dict changes, on local dicts
and on a dict argument `dd`, imports inside the function, constructors taking sizes from
`.size()`/`.shape`/tuples/varargs, reads of the global torch state), with constructs it
declines inserted at random (print, data-dependent branches, try/except, generator
expressions, writes to outside objects, raises, asserts, `with`, class
definitions, `.item()`/`.tolist()`, writes to the argument dict), graph-break points
inserted at random (`print` of shapes, numbers and strings, `minidynamo.graph_break()`,
`.item()` whose value is used after, branches and loops on tensor data, C calls such as
`time.time()`, and loops whose body breaks; features "B:..."), generators driven with
next/send/throw/close and exceptions raised and caught in the function (tests/fuzz_flow.py),
plus a sequence of
calls: input shapes (1-D to 4-D, some empty), dtypes (a program's calls stay within one
family: float32/64, int32/64 or float16/bfloat16, the op choice depends on it), layouts,
the global torch state a call runs under (no_grad, inference_mode, autocast, default
dtype, deterministic algorithms), module hooks present, and values of the globals/closure
cell/object attribute the function reads, changed between calls so cache hits,
recompiles and guards are all exercised.

The choices come from a `Chooser`: `HypothesisChooser` (hypothesis draws: shrinkable) or
`RandomChooser` (a seed: `python tests/fuzzgen.py 17` prints program 17). The tables it
draws from (shapes, dtypes, states, templates, statement weights) are in tests/fuzz_tables.py.
"""
from __future__ import annotations

import dataclasses
import random
import sys
from dataclasses import dataclass, field

from fuzz_flow import FlowStatements
from fuzz_tables import (ALIASINGS, BINARY, BREAK_KINDS, CONDS, DATA_CONDS, DICT_KEYS, EMPTY_SHAPES, FAMILIES,
                         HELPERS, INT_UNSAFE, ITEM_SOURCES, KNOWN_BUGS, LAYOUTS, LAZY_CONSUMERS, PARAM_USES,
                         PRELUDE, PRINTS, SCALARS, SCALE_VALUES, SHAPES, SIGNATURES, SIZE_CTORS, STATE_READS, STATES,
                         SUPPORTED_KINDS, TAG_READS, TAGS, UNARY, UNSUPPORTED_KINDS)

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
    state: str = "default"  # one of STATES
    hooks: tuple = ()  # tests/fuzz_modules.HOOKS present during the call
    module: int = 0  # which module instance is passed as `m`
    dkeys: str = "pq"  # the keys of `dd`
    alias: str = "none"  # how y relates to x (ALIASINGS)
    tag: object = None  # x's Python attribute `tag` (None: absent)

    def __repr__(self):
        return (f"Call(shape={self.shape}, {self.dtype}, {self.layout}, rg={self.requires_grad}, "
                f"n={self.n}, scale={self.scale}, seed={self.seed}, SCALE={self.SCALE}, "
                f"CFG=({self.CFG_s}, {self.CFG_mode!r}), OBJ.s={self.OBJ_s}, CL={self.CL}, "
                f"state={self.state}, hooks={self.hooks}, module={self.module}, dkeys={self.dkeys!r}, "
                f"alias={self.alias}, tag={self.tag!r})")


@dataclass
class Program:
    source: str
    signature: str  # "plain", "defaults", "varargs"
    calls: list
    features: set = field(default_factory=set)
    family: str = "float"  # the dtype family of its calls (FAMILIES)
    module_kind: str | None = None  # the kind of `m` (fuzz_modules.MODULE_KINDS) if it takes one
    uses_dd: bool = False  # whether it takes the dict argument `dd`
    backward: bool = False  # whether each call's results are also back-propagated (and compared)

    def __repr__(self):
        numbered = "\n".join(f"{i + 1:3}| {line}" for i, line in enumerate(self.source.splitlines()))
        calls = "\n".join(f"  {c!r}" for c in self.calls)
        return (f"Program(signature={self.signature}, family={self.family}, module={self.module_kind}, "
                f"dd={self.uses_dd}, backward={self.backward}, features={sorted(self.features)})\n"
                f"{numbered}\ncalls:\n{calls}")


# --- the generator -------------------------------------------------------------------------

def _weighted(ch, table):
    total = sum(w for _, w in table)
    r = ch.int(0, total - 1)
    for name, w in table:
        if r < w:
            return name
        r -= w
    return table[-1][0]


class _Gen(FlowStatements):
    def __init__(self, ch, unsupported_percent: int, allow_triton: bool, family: str = "float",
                 break_percent: int = 0):
        self.ch = ch
        self.unsupported_percent = unsupported_percent
        self.break_percent = break_percent
        self.allow_triton = allow_triton
        self.family = family
        self.counter = 0
        self.features: set = set()
        self.helpers_used: set = set()
        self.uses_cl = False
        self.strings: list = []  # string locals (f-strings) that may be returned
        self.aliases: list = []  # locals that are inputs or views of inputs
        self.module_kind = None  # set by the first statement that calls `m`
        self.uses_dd = False
        self.top_imports: list = []  # imports that bind a name used all over (torch, math): first line
        self.backward = False  # the program makes Parameters or calls autograd.Functions
        self.unary = [t for t in UNARY if self.ok(t)]
        self.binary = [t for t in BINARY if self.ok(t)]

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ok(self, template: str) -> bool:
        """Whether eager runs `template` on tensors of this program's dtype family."""
        return self.family != "int" or not any(bad in template for bad in INT_UNSAFE)

    def pick_ok(self, options):
        return self.ch.pick([o for o in options if self.ok(o)] or options)

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
            return self.ch.pick(self.unary).format(a=self.texpr(scope, depth + 1))
        if r < 9:
            return self.ch.pick(self.binary).format(a=self.texpr(scope, depth + 1), b=self.texpr(scope, depth + 1))
        op = self.ch.pick(["*", "+", "-"])
        return f"({self.texpr(scope, depth + 1)}) {op} {self.scalar(scope)}"

    # --- statements ---------------------------------------------------------------------
    def block(self, scope, n_stmts, in_block):
        lines = []
        for _ in range(n_stmts):
            lines += self.statement(scope, in_block)
        return lines

    def statement(self, scope, in_block):
        if self.ch.coin(self.break_percent):
            return self.break_point(scope, in_block)
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
        if self.family == "int" and not KNOWN_BUGS:  # an int local may not take a float result
            rhs = self.ch.pick(["n", "2", "x.shape[0]"])
        else:
            rhs = self.texpr(scope) if self.ch.coin(60) else self.scalar(scope)
        # `v += t` rebinds v in place only when v is not an input alias; clone first.
        return [f"{v} = ({v}).clone()", f"{v} {op} {rhs}"]

    def s_inplace(self, scope, in_block):
        tgt, new = self.target(scope, in_block)
        if tgt is None:
            return self.s_assign(scope, in_block)
        if self.family == "int" and not KNOWN_BUGS:  # an int local may not take a float result
            m = self.ch.pick(["add_(n)", "mul_(2)", "clamp_(-1, 1)", "relu_()", "copy_({e})", "zero_()"])
        else:
            m = self.pick_ok(["add_({e})", "mul_(0.5)", "clamp_(-1.5, 1.5)", "sub_({e}, alpha=0.5)",
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
            expr = f"torch.stack({lst}).{'mean' if self.family != 'int' else 'sum'}(0)"
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
            lines = [f"{p} = functools.partial(torch.add, alpha={self.ch.pick(['2', 'n'] + (['0.5'] if self.family != 'int' else []))})"]
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

    def _sub_scope(self, scope, tensors=(), ints=(), loop=False):
        return {"tensors": scope["tensors"] + list(tensors), "ints": scope.get("ints", []) + list(ints),
                "nest": scope.get("nest", 0) + 1, "loop": loop or scope.get("loop", False)}

    def _indent(self, lines):
        return ["    " + ln for ln in lines]

    def s_if(self, scope, in_block):
        cond = self.ch.pick(CONDS)
        if "CL" in cond:
            self.uses_cl = True
        if "is_leaf" in cond or "grad_fn" in cond:  # declined: neither is guarded
            self.features.add("U:autograd_attr")
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
        body = self.block(self._sub_scope(scope, ints=[i], loop=True), self.ch.int(1, 2), True) or ["pass"]
        if self.ch.coin(20):
            body = [f"if {i} == 2:", "    break"] + body
        elif self.ch.coin(20):
            body = [f"if {i} == 0:", "    continue"] + body
        return [f"for {i} in {rng}:"] + self._indent(body)

    def s_for_tuple(self, scope, in_block):
        w = self.fresh("w")
        items = ", ".join(self.texpr(scope) for _ in range(self.ch.int(1, 3)))
        seq = self.ch.pick([f"({items},)", f"[{items}]"])
        body = self.block(self._sub_scope(scope, tensors=[w], loop=True), self.ch.int(1, 2), True) or ["pass"]
        return [f"for {w} in {seq}:"] + self._indent(body)

    def s_enumerate(self, scope, in_block):
        i, w = self.fresh("i"), self.fresh("w")
        items = ", ".join(self.texpr(scope) for _ in range(self.ch.int(1, 3)))
        body = self.block(self._sub_scope(scope, tensors=[w], ints=[i], loop=True), self.ch.int(1, 2), True) or ["pass"]
        return [f"for {i}, {w} in enumerate(({items},), {self.ch.pick(['0', '1'])}):"] + self._indent(body)

    def s_zip(self, scope, in_block):
        w, u = self.fresh("w"), self.fresh("u")
        a, b, c = (self.texpr(scope) for _ in range(3))
        body = self.block(self._sub_scope(scope, tensors=[w, u], loop=True), 1, True) or ["pass"]
        return [f"for {w}, {u} in zip(({a}, {b}), [{c}, {a}]):"] + self._indent(body)

    def s_while(self, scope, in_block):
        k = self.fresh("k")
        body = self.block(self._sub_scope(scope, ints=[k], loop=True), 1, True) or ["pass"]
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
                f"    {who}.{self.pick_ok(['mul_(1.5)', 'add_(1)', 'clamp_(-1, 1)'])}"]

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
            flag = self.ch.pick(['True', 'False', 'n > 1'])
            from kernels.capture_kernels import BOOL_ARGS  # here: the generator itself needs no triton
            if not BOOL_ARGS:  # an interpreter that takes no bool arguments
                flag = f"int({flag})"
            lines.append(f"{lk}({a3}, {o3}, {numel}, {self.scalar(scope)}, "
                         f"{flag}, None, NEG={self.ch.pick(['True', 'False'])})")
        return self._assign(scope, in_block, lines, f"({o3}).reshape(({a3}).shape) + 0")

    # --- modules, dict views, imports, sizes, global state --------------------------------
    def s_module(self, scope, in_block):
        """A call of the module argument `m` (shape-preserving, float32 parameters)."""
        from fuzz_modules import MODULE_KINDS, submodule_expr
        if self.module_kind is None:
            self.module_kind = self.ch.pick(list(MODULE_KINDS))
            self.features.add("module:" + self.module_kind)
            if self.module_kind == "seq":  # constructs minidynamo declines are marked "U:"
                self.features.add("U:sequential_call")
        a = self.texpr(scope)
        # float32 input, as the parameters; sometimes as it is (eager raises on other dtypes)
        u = f"({a}).float()" if self.ch.coin(90) or not KNOWN_BUGS else f"({a})"
        sub = submodule_expr(self.module_kind)
        form = self.ch.int(0, 5)
        self.features.add(f"module{form}")
        if form == 5:  # each child in turn (every child keeps the shape)
            self.features.add("U:children_loop")
            h, layer = self.fresh("h"), self.fresh("layer")
            lines = [f"{h} = {u}", f"for {layer} in m.children():", f"    {h} = {layer}({h})"]
            return self._assign(scope, in_block, lines, f"{h} + 0")
        expr = [f"m({u})", f"m.forward({u})", f"{sub}({u})", f"(m({u}) if m.training else {a})",
                f"m({u}) - {sub}({u}) * 0.5"][form]
        return self._assign(scope, in_block, [], expr)

    def s_dict_view(self, scope, in_block):
        """A view of a local dict taken, the dict changed, then the view used: it is live."""
        d, view, acc, kk = self.fresh("d"), self.fresh("dv"), self.fresh("acc"), self.fresh("kk")
        a, b, c = (self.texpr(scope) for _ in range(3))
        which = self.ch.pick(["keys", "values", "items"])
        lines = [f'{d} = {{"p": {a}, "q": {b}}}', f"{view} = {d}.{which}()"]
        mutation = self.ch.int(0, 7)
        lines.append([f'{d}["r"] = {c}', f'del {d}["p"]', f'{d}.pop("q")', f'{d}.update({{"s": {a}, "p": {c}}})',
                      f'{d}.setdefault("t", {c})', f'{d}["q"] = {c}', f"{d}.clear()", f"{d}.popitem()"][mutation])
        self.features |= {"view:" + which, f"view_mutation{mutation}"} | ({"U:popitem"} if mutation == 7 else set())
        loop = None
        if which == "keys":
            expr = self.ch.pick([f"({a}) * len({view})", f'({a}) * ("r" in {view}) + ({b}) * ("p" not in {view})',
                                 f"({a}) + len(list({view}))", f'({a}) * ({view} == {{"q", "r"}})',
                                 f'({a}) * ({view} == {{"p": 0, "q": 1}}.keys())', f'({a}) * len({view} & {{"p", "s"}})',
                                 f'({a}) - len({view} | {{"z"}})', None])
            loop = [f"for {kk} in {view}:", f"    {acc} = {acc} + {d}[{kk}] * len({kk})"]
        elif which == "values":
            expr = self.ch.pick([f"({a}) * len({view})", f"sum({view}) + ({a})", f"list({view})[-1] + ({a})",
                                 f"({a}) * ({view} == {view})", None])
            loop = [f"for {kk} in {view}:", f"    {acc} = {acc} + {kk}"]
        else:
            expr = self.ch.pick([f"({a}) * len({view})", f'({a}) * (("p", {d}.get("p")) in {view})',
                                 f"[w for _, w in {view}][0] + ({a})", f"({a}) * ({view} == {d}.items())",
                                 f'({a}) * len({view} - {{("zz", 1)}})', None])
            loop = [f"for {kk}, w in {view}:", f"    {acc} = {acc} + w * len({kk})"]
            if expr is not None and (f"{view} == " in expr or f"{view} - " in expr):
                self.features.add("U:items_set_op")
        if expr is None:  # iterate the view after the change
            lines += [f"{acc} = ({a}) * 0"] + loop
            expr = f"{acc}"
        return self._assign(scope, in_block, lines, expr)

    def s_arg_dict(self, scope, in_block):
        """Reads of the dict argument `dd` (tensors like x under DICT_KEYS) and its views."""
        self.uses_dd = True
        a = self.texpr(scope)
        kv, acc, kk, d2 = self.fresh("kd"), self.fresh("acc"), self.fresh("kk"), self.fresh("d")
        form = self.ch.int(0, 6)
        self.features.add(f"arg_dict{form}")
        if form == 0:
            return self._assign(scope, in_block, [f"{kv} = dd.keys()"],
                                f'({a}) * len({kv}) + ({a}) * ("r" in {kv})')
        if form == 1:
            return self._assign(scope, in_block, [], f'({a}) * (dd.keys() == {{"p", "q"}}) + dd["p"]')
        if form == 2:
            return self._assign(scope, in_block, [f"{acc} = ({a}) * 0", f"for {kk} in dd.values():",
                                                  f"    {acc} = {acc} + {kk}"], acc)
        if form == 3:
            return self._assign(scope, in_block, [f"{acc} = ({a}) * 0", f"for {kk}, w in dd.items():",
                                                  f"    {acc} = {acc} + w * len({kk})"], acc)
        if form == 4:  # a local copy, changed after its view was taken
            return self._assign(scope, in_block, [f"{d2} = dict(dd)", f"{kv} = {d2}.keys()", f'{d2}["z"] = {a}',
                                                  f'{d2}.pop("p", None)'],
                                f'({a}) * len({kv}) + ("z" in {kv}) + {d2}["q"]')
        if form == 5:
            return self._assign(scope, in_block, [], f'dd.get("r", {a}) * 2 + ({a})')
        return self._assign(scope, in_block, [f"{kv} = list(dd.items())"], f"{kv}[-1][1] + len({kv}[0][0])")

    def s_import(self, scope, in_block):
        a = self.texpr(scope)
        form = self.ch.int(0, 6)
        self.features.add(f"import{form}")
        if form == 3 or form == 5:
            # `import math` / `import torch.nn` make the name local to the whole function: first line
            line = "import math" if form == 3 else "import torch.nn"
            if line not in self.top_imports:
                self.top_imports.append(line)
            return self._assign(scope, in_block, [], f"({a}) * math.sqrt(n + 1)" if form == 3
                                else f"torch.nn.functional.relu6({a})")
        line, expr = [("import torch.nn.functional as F", f"F.relu({a})"),
                      ("from torch.nn import functional", f"functional.hardtanh({a})"),
                      ("from torch.linalg import norm", f"({a}) / (norm(({a}).float()) + 1)"),
                      None,
                      ("from math import sqrt", f"({a}) * sqrt(abs(scale) + 1)"),
                      None,
                      ("import torch.nn as nn", f"nn.functional.relu({a})")][form]
        return self._assign(scope, in_block, [line], expr)

    def s_size_ctor(self, scope, in_block):
        t = self.ch.pick(SIZE_CTORS)
        self.features.add(f"size{SIZE_CTORS.index(t)}")
        return self._assign(scope, in_block, [], t.format(a=self.texpr(scope), b=self.ch.pick(scope["tensors"])))

    def s_state_read(self, scope, in_block):
        t = self.ch.pick(STATE_READS)
        self.features.add(f"state_read{STATE_READS.index(t)}")
        return self._assign(scope, in_block, [], t.format(a=self.texpr(scope)))

    # --- unsupported constructs ---------------------------------------------------------
    def s_tag_read(self, scope, in_block):
        # x's Python attribute, present or not, changed between calls (CallSpec.tag)
        form = self.ch.int(0, len(TAG_READS) - 1)
        self.features.add(f"tag_read{form}")
        return self._assign(scope, in_block, [], TAG_READS[form].format(a=self.texpr(scope)))

    def s_inplace_alias(self, scope, in_block):
        # a write through one input read through the other (the same tensor, or views of
        # one base in some calls: CallSpec.alias)
        who, other = self.ch.pick([("x", "y"), ("y", "x")])
        op = self.pick_ok(["add_(1)", "mul_(2)", "sub_(0.5)", "clamp_(-1.5, 1.5)", "neg_()"])
        lines = [f"if not ({who}.requires_grad or {other}.requires_grad):", f"    {who}.{op}"]
        return self._assign(scope, in_block, lines, f"{other} * 2 + {who}")

    def s_lazy_consumer(self, scope, in_block):
        # a C function pulling a generator / map / chain that reads the container it fills
        form = self.ch.int(0, len(LAZY_CONSUMERS) - 1)
        self.features.add(f"lazy{form}")
        d = self.fresh("cn")
        fill, expr = LAZY_CONSUMERS[form]
        a, b = self.texpr(scope), self.texpr(scope)
        lines = fill.format(d=d, a=a, b=b).split("\n")
        return self._assign(scope, in_block, lines, expr.format(d=d, a=a, b=b))

    def s_param(self, scope, in_block):
        # nn.Parameter made in the function: its type, flags, ops, returned
        self.backward = True
        p = self.fresh("prm")
        a, b = self.texpr(scope), self.texpr(scope)
        grad = "False" if self.family == "int" else self.ch.pick(["True", "False", None])
        self.features.add(f"param_rg{grad}")
        made = f"torch.nn.Parameter({a})" if grad is None else f"torch.nn.Parameter({a}, requires_grad={grad})"
        form = self.ch.int(0, len(PARAM_USES) - 1)
        self.features.add(f"param{form}")
        lines = self._assign(scope, in_block, [f"{p} = {made}"], PARAM_USES[form].format(p=p, a=a, b=b))
        if not in_block:
            scope["tensors"].append(p)  # returned (a Parameter) or used later
        return lines

    def s_autograd_fn(self, scope, in_block):
        # an autograd.Function with side effects: on a list passed in (forward), on SIDE
        # (backward: the calls' results are back-propagated), ctx attributes
        self.backward = True
        form = self.ch.int(0, 2)
        self.features.add(f"autograd_fn{form}")
        a, b = self.texpr(scope), self.texpr(scope)
        if form == 2:
            self.helpers_used.add("_F_pair")
            return self._assign(scope, in_block, [], f"sum(_F_pair.apply({a}, {b}))")
        self.helpers_used.add("_F_log")
        if form == 0:
            return self._assign(scope, in_block, [], f"_F_log.apply({a}, SIDE, scale)")
        lg = self.fresh("lg")
        return self._assign(scope, in_block, [f"{lg} = []"], f"_F_log.apply({a}, {lg}, 2.0) * len({lg})")

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

    def u_arg_dict_write(self, scope, in_block):
        # the caller's dict outlives the call: writing it is a side effect (its views see it)
        self.uses_dd = True
        kv = self.fresh("kd")
        a = self.texpr(scope)
        write = self.ch.pick([f'dd["z"] = {a}', 'dd.pop("q")', f'dd.update({{"p": {a}}})', "dd.clear()"])
        return self._assign(scope, in_block, [f"{kv} = dd.keys()", write], f'({a}) * len({kv}) + ("z" in {kv})')

    def u_view_iter_mutate(self, scope, in_block):
        # the dict grows while a view of it is iterated: eager raises RuntimeError
        d, kk = self.fresh("d"), self.fresh("kk")
        a = self.texpr(scope)
        return self._assign(scope, in_block, [f'{d} = {{"p": {a}}}', f"for {kk} in {d}.keys():",
                                              f'    {d}[{kk} + "x"] = {a}'], f'{d}["p"]')

    # --- graph-break points -------------------------------------------------------------
    def break_point(self, scope, in_block):
        """An instruction the trace declines and a graph breaks at (BREAK_KINDS): output,
        `minidynamo.graph_break()`, `.item()` whose value is used after, a branch on tensor
        data, or a loop holding one of these."""
        kinds = BREAK_KINDS if scope.get("nest", 0) == 0 else [(k, w) for k, w in BREAK_KINDS if k != "loop"]
        kind = _weighted(self.ch, kinds)
        self.features.add("B:" + kind)
        if scope.get("loop"):
            self.features.add("B:in_loop")
        return getattr(self, "b_" + kind)(scope, in_block)

    def b_print(self, scope, in_block):
        t = self.ch.pick(scope["tensors"])
        form = self.ch.int(0, 5)
        if form == 0 and self.strings:  # a string local
            return [f"print({self.ch.pick(self.strings)}, sep=\"\")"]
        if form == 1:  # inside an expression: the value stack holds the tensor on the left
            return self._assign(scope, in_block, [],
                                f"({self.texpr(scope)}) * (print(\"mid\", {self.scalar(scope)}) is None)")
        if form == 2 and scope.get("ints"):  # a loop counter or a shape number
            return [f"print(\"i\", {self.ch.pick(scope['ints'])}, {t}.shape[-1])"]
        return [self.ch.pick(PRINTS).format(t=t, s=self.scalar(scope))]

    def b_graph_break(self, scope, in_block):
        if self.ch.coin(25):  # inside an expression
            return self._assign(scope, in_block, [],
                                f"({self.texpr(scope)}) + (minidynamo.graph_break() is None)")
        return ["minidynamo.graph_break()"]

    def b_item(self, scope, in_block):
        it = self.fresh("it")
        src = self.ch.pick(ITEM_SOURCES).format(a=self.texpr(scope))
        lines = [f"{it} = {src}.item()"]
        num = f"int({it})" if self.family == "int" else it  # an int tensor keeps its dtype
        use = self.ch.int(0, 5)
        if use == 0:  # arithmetic with a tensor
            return self._assign(scope, in_block, lines, f"({self.texpr(scope)}) * ({num} % 3 + 1)")
        if use == 1:  # inside an expression, the value stack holding a tensor
            return self._assign(scope, in_block, [],
                                f"({self.texpr(scope)}) * 2 + {src}.item() * ({self.texpr(scope)})")
        if use == 2:  # a Python branch
            sub = self._sub_scope(scope)
            then = self.block(sub, self.ch.int(1, 2), True) or ["pass"]
            other = self.block(self._sub_scope(scope), 1, True) or ["pass"]
            return lines + [f"if {it} > {self.ch.pick(['0', '1.5', 'n'])}:"] + self._indent(then) + \
                ["else:"] + self._indent(other)
        if use == 3:  # a trip count
            i = self.fresh("i")
            v = self._some_local(scope)
            body = [f"{v} = {v} + {i}"] if v else [f"SIDE.append({i})"]
            return lines + [f"for {i} in range(int(abs({it})) % 3):"] + self._indent(body)
        if use == 4:  # printed (rounded: the sum is computed by the same kernel either way)
            return lines + [f"print(\"item\", round({it}, 2), {it} > 0)"]
        return self._assign(scope, in_block, lines, f"({self.texpr(scope)}) + {num} // 2")

    def b_data_branch(self, scope, in_block):
        a, b = self.texpr(scope), self.texpr(scope)
        cond = self.ch.pick(DATA_CONDS).format(a=a, b=b)
        form = self.ch.int(0, 4)
        if form == 0:  # a conditional expression inside a larger one
            return self._assign(scope, in_block, [], f"({self.texpr(scope)}) * 2 + "
                                f"(({self.texpr(scope)}) if {cond} else ({self.texpr(scope)}))")
        v = self._some_local(scope)
        if form == 1 and v is not None:  # a loop on a data condition: a break per iteration
            k = self.fresh("k")
            return [f"{k} = 0", f"while {k} < 3 and ({v}).sum() > {k}:", f"    {v} = {v} - 1", f"    {k} += 1"]
        then = self.block(self._sub_scope(scope), self.ch.int(1, 2), True) or ["pass"]
        lines = [f"if {cond}:"] + self._indent(then)
        if self.ch.coin(30):
            cond2 = self.ch.pick(DATA_CONDS).format(a=self.texpr(scope), b=self.texpr(scope))
            lines += [f"elif {cond2}:"] + self._indent(self.block(self._sub_scope(scope), 1, True) or ["pass"])
        if self.ch.coin(50):
            lines += ["else:"] + self._indent(self.block(self._sub_scope(scope), 1, True) or ["pass"])
        return lines

    def b_loop(self, scope, in_block):
        """A loop whose body breaks (once per iteration, or on some iterations only)."""
        i, w, k = self.fresh("i"), self.fresh("w"), self.fresh("k")
        form = self.ch.int(0, 3)
        ints, tensors = ([i] if form in (0, 2) else []) + ([k] if form == 3 else []), [w] if form in (1, 2) else []
        sub = self._sub_scope(scope, tensors=tensors, ints=ints, loop=True)
        other = self.block(sub, self.ch.int(0, 1), True)  # one statement or none
        point = self.break_point(sub, True)
        body = point + other if self.ch.coin(50) else other + point
        if self.ch.coin(25):  # leave the loop (or skip the rest) on a data condition
            cond = self.ch.pick(DATA_CONDS[:4]).format(a=self.texpr(sub), b=self.texpr(sub))
            body = [f"if {cond}:", f"    {self.ch.pick(['break', 'continue'])}"] + body
        a, b = self.texpr(scope), self.texpr(scope)
        if form == 0:
            head = [f"for {i} in {self.ch.pick(['range(n)', 'range(2)', 'range(1, x.shape[0], 3)'])}:"]
        elif form == 1:
            head = [f"for {w} in ({a}, {b}):"]
        elif form == 2:
            head = [f"for {i}, {w} in enumerate([{a}, {b}]):"]
        else:
            # the count first: a `continue` in the body must not skip it
            return [f"{k} = 0", f"while {k} < n:"] + self._indent([f"{k} += 1"] + body)
        return head + self._indent(body)

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


def assemble(body: list, signature: str = "plain", helpers_used=(), takes_module=False, takes_dict=False,
             first=()) -> str:
    """The module source: the prelude, the helpers used, and `fuzz_fn` (`first` lines, the
    signature's prologue, `body`) made inside a factory, so it has a closure cell CL (set
    through `_set_cl`)."""
    header, prologue = SIGNATURES[signature]
    extra = [name for name, used in (("m", takes_module), ("dd", takes_dict)) if used]
    if signature == "varargs":
        prologue = prologue + [f'{name} = kw["{name}"]' for name in extra]
    elif extra:
        header = header[:-2] + "".join(f", {name}" for name in extra) + "):"
    body = list(first) + list(prologue) + list(body)
    helpers = "\n\n".join(src for name, src in HELPERS if name in helpers_used)
    fn = "\n".join([header] + ["    " + ln for ln in body])
    factory = "def _make():\n    CL = 1.0\n\n" + "\n".join("    " + ln for ln in fn.splitlines()) + \
        "\n\n    def _set_cl(v):\n        nonlocal CL\n        CL = v\n\n    return fuzz_fn, _set_cl\n\n\n" \
        "fuzz_fn, _set_cl = _make()\n"
    return PRELUDE + "\n\n" + (helpers + "\n\n\n" if helpers else "") + factory


def generate(ch, *, unsupported_percent: int | None = None, allow_triton: bool = True,
             break_percent: int | None = None) -> Program:
    if unsupported_percent is None:
        unsupported_percent = ch.pick([0, 0, 5, 12, 25])
    if break_percent is None:  # per statement: about half the programs break once or more
        break_percent = ch.pick([0, 10, 20, 30])
    family = _weighted(ch, [("float", 14), ("int", 3), ("half", 3)])
    # Triton kernels only on float32/float64: the kernels are written for them
    g = _Gen(ch, unsupported_percent, allow_triton and family == "float", family, break_percent)
    signature = ch.pick(list(SIGNATURES))
    scope = {"tensors": ["x", "y"], "ints": []}
    body = []
    for _ in range(ch.int(1, 7)):
        body += g.statement(scope, False)
    body.append(g.returns(scope))
    source = assemble(body, signature, g.helpers_used, g.module_kind is not None, g.uses_dd, g.top_imports)
    g.features |= {"sig:" + signature, "family:" + family}
    calls = gen_calls(ch, family, g.module_kind is not None, g.uses_dd,
                      tags="tag_read" in g.features or ch.coin(10))
    if not KNOWN_BUGS:
        _avoid_known_bugs(calls, family, "\n".join(body), g.features)
    for c in calls:
        g.features |= {"dtype:" + c.dtype, "state:" + c.state, "layout:" + c.layout, f"dim:{len(c.shape)}"}
        g.features |= {"hook:" + h for h in c.hooks}
        if 0 in c.shape:
            g.features.add("empty")
        if c.alias != "none":
            g.features.add("alias:" + c.alias)
        if c.tag is not None:
            g.features.add("tag")
    return Program(source, signature, calls, g.features, family, g.module_kind, g.uses_dd, g.backward)


def _avoid_known_bugs(calls, family, text, features):
    """Calls changed so they do not meet the errors the graph raises without the user's
    line (see KNOWN_BUGS); identical calls stay identical."""
    for spec in calls:
        if family != "int" and spec.dtype.startswith("int"):  # ops of other families on ints
            spec.dtype = FAMILIES[family][0]
        if ("mutate_input" in features or "inplace_alias" in features) and spec.layout == "expanded":
            spec.layout = "strided"
        if ".view(" in text and spec.layout not in ("contiguous", "offset") and 1 in spec.shape:
            spec.layout = "contiguous"
        if "max(" in text and 0 in spec.shape:
            spec.shape = SHAPES[0]
        # test_fuzz.py: test_requires_grad_of_a_reshape_under_inference_mode
        if "requires_grad" in text and "reshape(" in text and spec.state == "inference_mode":
            spec.state = "no_grad"


def _toggle_hook(ch, hooks: tuple) -> tuple:
    """One hook added (or, if present, removed): between two calls, as a user would."""
    from fuzz_modules import HOOKS
    h = ch.pick(HOOKS)
    return tuple(x for x in hooks if x != h) if h in hooks else hooks + (h,)


def gen_calls(ch, family: str = "float", uses_module: bool = False, uses_dd: bool = False,
              tags: bool = False) -> list:
    dtypes = FAMILIES[family]

    def dtype():  # now and then one of another family: eager may raise, and so must the optimized call
        return ch.pick(dtypes) if ch.coin(96) else ch.pick(FAMILIES[ch.pick(list(FAMILIES))])

    def layout():
        return ch.pick(LAYOUTS) if ch.coin(94) else "expanded"

    def new_call(prev):
        shape = ch.pick(SHAPES) if ch.coin(92) else ch.pick(EMPTY_SHAPES)
        spec = CallSpec(shape=shape, dtype=dtype(), layout=layout(),
                        requires_grad=ch.coin(10), n=ch.int(0, 3), scale=ch.pick(SCALE_VALUES),
                        seed=ch.int(0, 3))
        if ch.coin(40):
            spec.state = ch.pick(STATES[1:])
        if uses_module and ch.coin(50):
            spec.hooks = _toggle_hook(ch, prev.hooks if prev is not None else ())
        if uses_dd:
            spec.dkeys = ch.pick(DICT_KEYS)
        if ch.coin(15):
            spec.alias = ch.pick(ALIASINGS[1:])
        if tags and ch.coin(60):
            spec.tag = ch.pick(TAGS[1:])
        return spec

    if ch.coin(8):  # one call under one state after another: a stale entry shows at once
        first = new_call(None)
        return [dataclasses.replace(first, state=ch.pick(STATES)) for _ in range(ch.int(3, 5))]
    calls = []
    prev = None
    for _ in range(ch.int(2, 5)):
        if prev is not None and ch.coin(35):
            # the same inputs again (a cache hit), perhaps with one outside value changed
            spec = CallSpec(**{k: getattr(prev, k) for k in prev.__dataclass_fields__})
            spec.seed = ch.int(0, 3)
            what = ch.int(0, 15)  # 6, 7, 12, 13: no change here
            if what == 8:  # same shape, another layout (strides or storage offset)
                spec.layout = layout()
            elif what == 9:
                spec.requires_grad = not spec.requires_grad
            elif what == 10:
                spec.scale = ch.pick(SCALE_VALUES)
            elif what == 11:
                spec.dtype = dtype()
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
            elif what == 14 and uses_module:
                spec.module = 1 - spec.module  # another instance: same class, its own parameters
            elif what == 15 and uses_dd:
                spec.dkeys = ch.pick(DICT_KEYS)
            if ch.coin(15):  # y another alias of x, x another (or no) tag: guards must see it
                spec.alias = ch.pick(ALIASINGS)
            if tags and ch.coin(30):
                spec.tag = ch.pick(TAGS)
            # the same inputs under another state or with a hook added or removed: only
            # the global-state check and the hook guards tell the cached entry is stale
            if ch.coin(35):
                spec.state = ch.pick(STATES)
            if uses_module and ch.coin(30):
                spec.hooks = _toggle_hook(ch, spec.hooks)
        else:
            spec = new_call(prev)
        calls.append(spec)
        prev = spec
    return calls


def make_inputs(spec: CallSpec):
    """(x, y, dd) for a call spec, deterministic in spec.seed: dd holds tensors like x under
    the keys spec.dkeys. Integer tensors hold small integers and never require grad."""
    import torch
    gen = torch.Generator().manual_seed(spec.seed)
    dtype = getattr(torch, spec.dtype)
    shape = spec.shape

    def draw(size):
        if dtype.is_floating_point:
            return torch.randn(size, generator=gen, dtype=dtype)
        return torch.randint(-4, 5, size, generator=gen, dtype=dtype)

    def one():
        if spec.layout == "transposed" and len(shape) >= 2:
            t = draw(shape[::-1]).permute(*reversed(range(len(shape))))
        elif spec.layout == "strided":
            t = draw((shape[0] * 2,) + shape[1:])[::2]
        elif spec.layout == "offset":
            t = draw((shape[0] + 1,) + shape[1:])[1:]
        elif spec.layout == "expanded":
            t = draw((1,) + shape[1:]).expand(shape)
        else:
            t = draw(shape)
        if spec.requires_grad and dtype.is_floating_point:
            t = t.detach().requires_grad_(True)
        return t
    x, y = one(), one()
    if spec.alias == "same":
        y = x
    elif spec.alias == "view":
        y = x.view_as(x)
    elif spec.alias in ("overlap", "disjoint") and shape[0] > 0:
        rows = shape[0]
        base = draw((2 * rows,) + shape[1:])
        if spec.requires_grad and dtype.is_floating_point:
            base.requires_grad_(True)
        x = base[:rows]
        y = base[1:rows + 1] if spec.alias == "overlap" else base[rows:]
    if spec.tag is not None:
        x.tag = spec.tag
    return x, y, {k: one() for k in spec.dkeys}


if __name__ == "__main__":  # print a program: python tests/fuzzgen.py SEED
    print(generate(RandomChooser(int(sys.argv[1]) if len(sys.argv) > 1 else 0)))
