"""Data tables of the differential fuzzer's program generator (tests/fuzzgen.py): the
inputs a call may take (shapes, dtype families, layouts, global torch states), the
expression and statement templates a program is built from, the weights of its
statement kinds, and the module text every program starts with.

Some tables depend on MINIDYNAMO_FUZZ_KNOWN_BUGS (see KNOWN_BUGS), read at import.
"""
import os

# --- the calls -----------------------------------------------------------------------------

SHAPES = [(6,), (9,), (16,), (2, 5), (4, 3), (3, 4), (2, 3, 4), (3, 2, 2, 2), (2, 1, 3)]
EMPTY_SHAPES = [(0,), (3, 0), (2, 0, 3)]  # a 0-size dimension
# A program's calls take their dtypes from one family; its ops are valid for that family.
FAMILIES = {"float": ["float32", "float64"], "int": ["int32", "int64"], "half": ["float16", "bfloat16"]}
DTYPES = FAMILIES["float"]
# transposed: dims reversed; strided: every other row; offset: storage offset 1;
# expanded: one row broadcast (stride 0: in-place writes to it raise)
LAYOUTS = ["contiguous", "transposed", "strided", "offset"]
# The global torch state a call runs under (tests/test_fuzz.py sets it for both runs).
STATES = ["default", "no_grad", "inference_mode", "autocast_bf16", "default_float64", "deterministic"]
DICT_KEYS = ["pq", "qp", "pqr"]  # the keys of the argument dict `dd`, in order
# How a call's y relates to its x (tests/fuzzgen.make_inputs): its own tensor, x itself, a
# view of x, or x and y rows of one base tensor, overlapping by all but a row or disjoint.
ALIASINGS = ["none", "same", "view", "overlap", "disjoint"]
# The Python attribute `tag` a call's x carries (None: no such attribute), changed between
# calls: programs read it through getattr/hasattr (TAG_READS).
TAGS = [None, 2.0, 0.5, 3]

# --- the program's expressions and statements ---------------------------------------------

# Unary templates over one tensor expression `{a}` (shape-preserving, finite on finite input).
UNARY = [
    "torch.sin({a})", "({a}).cos()", "torch.tanh({a})", "({a}).relu()", "torch.sigmoid({a})",
    "({a}).abs()", "-({a})", "({a}).clamp(-2.0, 2.0)", "torch.nn.functional.gelu({a})",
    "({a}).flip(0)", "({a}).square()", "({a}).clone()", "({a}).contiguous()",
    "({a}).sum(0, keepdim=True) * 0.25 + ({a})", "({a}) - ({a}).mean()",
    "torch.where(({a}) > 0, ({a}), ({a}) * 0.5)", "({a}).softmax(-1)", "({a}).cumsum(0) * 0.1",
    "({a}).reshape(-1).reshape(({a}).shape)", "torch.nn.functional.relu6({a})",
    "({a}).neg().abs().sqrt()", "({a}).detach()", "abs({a})", "(({a}).t().t() if ({a}).dim() <= 2 else ({a}).mT.mT)",
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
         "scale is not None and n != 1", "not CFG", "x.shape == y.shape",
         # the global torch state, read directly or through what it changes
         "torch.is_grad_enabled()", "torch.zeros(2).dtype == torch.float64", "torch.is_inference_mode_enabled()",
         "(x.reshape(-1)[:2] @ y.reshape(-1)[:2]).dtype == x.dtype", "torch.are_deterministic_algorithms_enabled()",
         "x.numel() == 0", "x.dim() > 2"]

# Templates (and statement choices) that eager rejects for integer tensors (no kernel, or
# a float result written to an int tensor): left out of programs of the int family.
INT_UNSAFE = ["gelu", ".mean(", "softmax", "rand_like", "dropout", "softplus", "leaky_relu", "lerp", "silu",
              "mul_(0.5)", "clamp_(-1.5", "alpha=0.5", "mul_(1.5)"]

# Constructors and views taking a size: from .size(), .shape, a tuple, a list, varargs
# (`x.new(tuple)` builds a tensor *of* the sizes, `x.new(torch.Size)` one of that shape).
SIZE_CTORS = [
    "({a}).new_zeros(({b}).size()) + ({a})", "({a}).new_ones(({a}).shape) * ({b})",
    "torch.zeros(({a}).shape, dtype=({a}).dtype) + ({a})", "torch.zeros(({a}).size()) + ({a})",
    "({a}).reshape(({b}).size())", "({a}).contiguous().view(({b}).size())", "({a}).view(({b}).shape)",
    "({a}).contiguous().view(*({b}).shape)", "({a}).new(({a}).size()).zero_() + ({a})",
    "({a}).new(*({a}).shape).fill_(1) * ({a})", "({a}) + ({a}).new(tuple(({a}).shape)).sum()",
    "({a}) + ({a}).new(list(({b}).size())).sum()", "torch.ones(*({a}).shape, dtype=({a}).dtype) * ({a})",
    "torch.full(({a}).size(), 2, dtype=({a}).dtype) + ({a})", "torch.zeros(tuple(({a}).shape)) + ({a})",
    "({a}).new_full(({a}).shape, 3) - ({a})", "({a}).new_empty(({a}).size()).fill_(1) + ({a})",
    "({a}).expand(({b}).size()) + 0", "torch.randn(({a}).shape, dtype=torch.float32) + ({a})",
    "({a}).new_zeros(len({a}), *({a}).shape[1:]) + ({a})", "({a}) + ({a}).new_tensor(({b}).shape).sum()",
    "torch.zeros(len({a}), *({a}).shape[1:], dtype=({a}).dtype) + ({a})", "torch.empty(({a}).shape).fill_(2) * ({a})",
    "torch.zeros_like({a}).view(({b}).size()) + ({b})", "({a}).view(-1).view(({a}).shape)",
]

# Expressions whose value depends on the global torch state (grad mode, default dtype,
# autocast, inference mode, deterministic algorithms).
STATE_READS = [
    "({a}) * torch.is_grad_enabled()", "({a}).to(torch.zeros(2).dtype)", "torch.zeros(({a}).shape) + ({a})",
    "({a}) * (x.reshape(-1)[:2] @ y.reshape(-1)[:2]).to(({a}).dtype)",
    "(({a}) + 1 if (x.reshape(-1)[:2] @ y.reshape(-1)[:2]).dtype == x.dtype else ({a}) - 1)",
    "(({a}) * 2 if ({a}).requires_grad else ({a}))", "({a}) * (torch.ones(2).dtype == torch.float64)",
    "({a}) + torch.is_inference_mode_enabled()", "(({a}) * 3 if torch.are_deterministic_algorithms_enabled() else ({a}))",
    '({a}) * torch.is_autocast_enabled("cpu")', "torch.full(({a}).shape, 0.5) + ({a})",
    "torch.matmul(({a}).reshape(-1, 1).float(), ({a}).reshape(1, -1).float()).sum(-1).reshape(({a}).shape)",
    "torch.tensor(1.5) * ({a})", "(({a}) if y.requires_grad else ({a}) * 2)", "({a}) + torch.arange(({a}).shape[-1])",
    # every state a trace may have folded, at once
    "({a}) * (torch.is_grad_enabled() + 2 * (torch.zeros(1).dtype == torch.float64) + "
    "4 * torch.are_deterministic_algorithms_enabled() + 8 * torch.is_inference_mode_enabled())",
]

# Reads of x's Python attribute `tag` ({a}: a tensor expression).
TAG_READS = [
    '({a}) * getattr(x, "tag", 1.0)', '(({a}) * x.tag if hasattr(x, "tag") else ({a}) - 1)',
    '(({a}) + 1 if getattr(x, "tag", None) is None else ({a}) * 2)',
    '({a}) * (2 if isinstance(getattr(x, "tag", 0), int) else 3)', '({a}) + len(x.__dict__)',
    '(({a}) * y.tag if hasattr(y, "tag") else ({a}))',
]

# C functions consuming a generator or a lazy iterator that reads (or writes) what they fill
# (CPython pulls one item, acts on it, then pulls the next): (statements, expression)
# over a fresh container {d} and tensor expressions {a}, {b} of one shape.
LAZY_CONSUMERS = [
    ("{d} = collections.deque([{a}], maxlen=3)\n{d}.extend({d}[-1] * 0.5 + k for k in range(n + 1))",
     "sum({d})"),
    ("{d} = collections.deque([{a}])\n{d}.extendleft({d}[0] + ({b}) * len({d}) for _ in range(2))",
     "{d}[0] - {d}[-1]"),
    ("{d} = [{a}]\n{d}.extend(map(lambda k: {d}[-1] * 0.5 + k, range(n + 1)))", "{d}[-1]"),
    ("{d} = [{a}]\n{d} += ({d}[-1] + len({d}) for _ in range(2))", "sum({d})"),
    ("{d} = {{0: {a}}}\n{d}.update((k, {d}[k - 1] * 2 + ({b})) for k in range(1, n + 2))", "{d}[len({d}) - 1]"),
    ("{d} = collections.Counter()\n{d}.update(str(len({d})) for _ in range(n + 1))", "({a}) * len({d})"),
    ("{d} = {{0}}\n{d}.update(len({d}) for _ in range(n + 1))", "({a}) * len({d})"),
    ("{d} = []", "sum(({d}.append(k) or ({a}) * len({d}) for k in range(n + 1)), {b})"),
    ("{d} = [{a}]\n{d}.extend(itertools.chain(({d}[-1] * 2 for _ in range(1)), map(lambda t: t + {d}[-1], ({b},))))",
     "{d}[-1]"),
    ("{d} = collections.deque([{a}, {b}], maxlen=2)\n"
     "{d}.extend(itertools.islice(({d}[0] + {d}[-1] for _ in itertools.count()), n + 1))", "{d}[0]"),
    ("{d} = []\nfor _u, _w in zip((({a}) * len({d}) for _ in range(2)), ({b}, {b}), strict=True):\n"
     "    {d}.append(_u + _w)", "{d}[-1]"),
    ("{d} = [{a}]\n{d}.extend(({d}[-1] + 1) if len({d}) < 3 else ({b}) for _ in range(n + 2))",
     "{d}[-1] + len({d})"),
]

# A Parameter made in the function ({p}) and what is done with it ({a}, {b}: tensor
# expressions of one shape).
PARAM_USES = [
    "{p} * 2", "{p} + (1 if isinstance({p}, torch.nn.Parameter) else 0)", "{p}.data * 2 + ({b})",
    "(({a}) * 3 if {p}.requires_grad else {p} + 1)", "{p} * len(type({p}).__name__)",
    "({b}) * (1 if {p}.is_leaf and {p}.grad is None else 2)", "torch.add({p}, {b})",
]

# Bugs the generators of aliased inputs, tensor attributes, Parameters and autograd.Functions
# with side effects found in areas other changes were fixing when they were added: programs
# are written to avoid one while its name is here; remove the name once the fix is in.
# MINIDYNAMO_FUZZ_KNOWN_BUGS=1 turns them all on.
# (fixed: "function_global_hooks", a global module forward hook ran on the autograd.Function's
# forward body `F_fwd_body`, which eager never calls as a module; "function_backward_side_effect",
# a backward appending to a global list the frame appends to after the apply: the backward's
# declined trace left its append on the list's tracker, written at the forward.)
PENDING: set = set()
BACKWARD_LOG = "BWD" if "function_backward_side_effect" in PENDING else "SIDE"

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
    ("_h_raise", "def _h_raise(u, k):\n    if k % 2:\n        raise KeyError(f\"odd {k}\")\n    return u * 2\n"),
    ("_h_reraise", "def _h_reraise(u, k):\n    try:\n        return _h_raise(u, k + 1)\n    except KeyError as e:\n"
                   "        raise ValueError(\"again\") from e\n"),
    ("_h_check", "def _h_check(u, n):\n    if n == 3:\n        raise ValueError(f\"bad n {n}\")\n"
                 "    return u * 2\n"),
    # autograd.Functions with side effects: on a list passed in, on SIDE in backward, ctx attributes
    ("_F_log", "class _F_log(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, u, log, k):\n"
               "        log.append(\"fwd\")\n        ctx.k = k\n        ctx.note = \"k\" if k > 1 else \"small\"\n"
               "        ctx.save_for_backward(u)\n        return u * k\n\n"
               "    @staticmethod\n    def backward(ctx, g):\n        (u,) = ctx.saved_tensors\n"
               f"        {BACKWARD_LOG}.append((\"bwd\", ctx.note))\n"
               "        return g * ctx.k + u * 0, None, None\n"),
    ("_F_pair", "class _F_pair(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, u, w):\n"
                "        ctx.shape = u.shape\n        ctx.scale = float(len(u.shape))\n"
                "        ctx.save_for_backward(w)\n        return u * w, u + w\n\n"
                "    @staticmethod\n    def backward(ctx, ga, gb):\n        (w,) = ctx.saved_tensors\n"
                f"        {BACKWARD_LOG}.append(len(ctx.shape))\n"
                "        return ga * w + gb * ctx.scale, gb\n"),
]

# Constructs that hit bugs already reproduced (xfail) in tests/test_regressions.py. Off by
# default so the suite stays green; MINIDYNAMO_FUZZ_KNOWN_BUGS=1 turns them on, to check a
# fix against the fuzzer (and to check the fuzzer still finds them).
KNOWN_BUGS = os.environ.get("MINIDYNAMO_FUZZ_KNOWN_BUGS", "") not in ("", "0")
# (fixed, so on by default: storage offsets, is_leaf and grad_fn read while tracing)
SCALARS += ["x.storage_offset()"]
CONDS += ["x.is_leaf", "x.grad_fn is None"]
SCALE_VALUES = [0.5, 1.5, 1.0] + ([-0.0, 0.0] if KNOWN_BUGS else [])  # test_negative_zero_is_not_zero
# Errors that only the real kernels detect (the trace's fake tensors accept the op) are
# raised by the graph, without the user's line in the traceback (test_fuzz.py:
# test_known_error_raised_by_the_graph). Off by default: ops without an integer kernel
# called on ints, an int tensor updated in place with a float result, a module called on
# another dtype than its parameters', a reduction over a 0-size dimension, writes into an
# expanded input, `.view` of a non-contiguous tensor with a size-1 dimension. Also off:
# `requires_grad` of a `reshape` read under inference mode (test_fuzz.py:
# test_requires_grad_of_a_reshape_under_inference_mode).

SUPPORTED_KINDS = [
    ("assign", 14), ("aug", 5), ("inplace", 3), ("tuple", 4), ("list", 4), ("dict", 4),
    ("lambda", 4), ("closure", 3), ("nonlocal", 2), ("partial", 4), ("helper", 6), ("if", 6),
    ("for_range", 4), ("for_tuple", 3), ("enumerate", 3), ("zip", 2), ("while", 2),
    ("triton", 6), ("global", 4), ("fstring", 2), ("setitem", 2), ("comprehension", 3),
    ("shape_scalar", 3), ("mutate_input", 1), ("traced_error", 1), ("dict_loop", 2),
    ("method_call", 2), ("late_binding", 2), ("walrus", 1), ("del", 1), ("shape_unpack", 1),
    ("mutate_global", 2), ("push_closure", 2), ("helper_raise", 1), ("alias", 2),
    ("module", 5), ("dict_view", 4), ("arg_dict", 3), ("import", 3), ("size_ctor", 5), ("state_read", 5),
    ("tag_read", 3), ("inplace_alias", 2), ("lazy_consumer", 4), ("param", 3), ("autograd_fn", 3),
    ("gen_drive", 4), ("raise_catch", 4),
]
UNSUPPORTED_KINDS = [
    ("print", 4), ("side", 4), ("gbox", 2), ("data_branch", 3), ("try", 3), ("genexpr", 3),
    ("item", 2), ("raise", 2), ("assert", 2), ("with", 2), ("classdef", 1),
    ("tolist", 1), ("torch_error", 2), ("helper_side", 1), ("arg_dict_write", 2), ("view_iter_mutate", 1),
]
# Graph-break points (tests/fuzzgen.py `b_*`, tests/fuzz_flow.py `b_c_call`): each is an instruction of the function's own
# frame that the trace declines and that a graph can break at (the graph before it runs,
# the instruction natively, the rest in a resume function). "loop" is a loop whose body
# holds one of the others.
BREAK_KINDS = [
    ("print", 5), ("graph_break", 4), ("item", 5), ("data_branch", 5), ("loop", 4), ("c_call", 4),
]
# How a traced value is printed: {t} a tensor, {s} a Python number, {i} an int local.
PRINTS = [
    'print("b", tuple({t}.shape), n)', 'print({t}.shape, {t}.dtype, sep="|")', 'print({s}, {t}.dim(), end=";")',
    'print(f"{{n}}:{{{t}.shape[0]}}:{{scale:.3f}}")', 'print("rg", {t}.requires_grad, {t}.is_contiguous())',
    'print({s}, flush=True)', 'print("len", len({t}), {t}.ndim, sep="")', 'print()',
]
# One-element tensors whose `.item()` is read ({a}: a tensor expression): 0-d and (1,).
ITEM_SOURCES = ["({a}).sum()", "({a}).sum().reshape(1)", "({a}).abs().sum()", "({a}).reshape(-1)[:1].sum()",
                "({a}).sum(dtype=torch.float64)"]
# Conditions on tensor data ({a}, {b}: tensor expressions): a graph break at the jump.
DATA_CONDS = ["({a}).sum() > 0", "(({a}) > 0).any()", "({a}).sum()", "not (({a}) < 1).all()",
              "({a}).sum() > ({b}).sum()", "({a}).sum() > 0 and n > 1", "n > 1 or (({a}) > 0).any()",
              "torch.all(({a}) >= ({b}))"]

# --- the module around the function ------------------------------------------------------

PRELUDE = """\
import collections
import functools
import itertools
import math
import operator
import os
import time
import zlib

import minidynamo
import torch
import triton
from kernels import capture_kernels as K

SIDE = []
BWD = []
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
