"""Which pointer arguments a user-written Triton kernel may write, read from its source.

Graph capture models a kernel launch as an op that mutates only the tensors the
kernel writes; this module answers that question statically.  It runs a may-analysis
of pointer provenance over the kernel's AST: every parameter that may be a pointer is
a root, each value carries the set of roots it may point into (through assignments,
``+``/``-``, block pointers, descriptors, casts, shape wrappers, branches and loops
iterated to a fixpoint), and stores, atomics and descriptor stores record the roots of
their pointer operand.  Calls to other ``@triton.jit`` functions are summarised
recursively.  Anything it cannot model yields ``unknown=True`` with a reason; callers
must then treat every tensor argument as written.  ``written`` may name non-tensor
parameters (an int mixed into pointer arithmetic, a host tensor descriptor): callers
keep only the tensor arguments they pass.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
import weakref
from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache

from .kernels import kernel_chain


@dataclass(frozen=True)
class MutationAnalysis:
    """``written``: parameters whose memory a launch may write.  ``unknown``: the
    analysis gave up (``reason`` says where and why); every argument may be written."""

    written: frozenset[str]
    unknown: bool
    reason: str | None = None

    def is_written(self, name: str) -> bool:
        return self.unknown or name in self.written


_E = frozenset()
_WRITES = set("""store atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or
atomic_xchg atomic_xor atomic_store store_tensor_descriptor scatter""".split())
# triton.language operations whose result is a loaded/computed value, never a pointer.
_VALUE = set("""abs arange argmax argmin assume atomic_load atomic_poll bitonic_merge cdiv ceil
clamp cos cumprod cumsum debug_barrier device_assert device_print div_rn dot dot_scaled erf exp
exp2 expect_zero fdiv floor fma full histogram load load_tensor_descriptor log log2 max maximum
min minimum mul num_programs pair_uniform_to_normal philox philox_impl program_id rand rand4x
randint randint4x randn randn4x reduce_or rsqrt sigmoid sin softmax sort sqrt sqrt_rn
static_assert static_print sum topk uint_to_uniform_float umulhi xor_sum zeros zeros_like
str_to_ty range static_range pointer_type constexpr logical_and logical_or""".split())
# ... whose result points where the first operand points (shape/dtype wrappers).
_FIRST = set("""to cast reshape view broadcast_to expand_dims permute trans ravel split squeeze
unsqueeze multiple_of max_contiguous max_constancy advance make_block_ptr make_tensor_descriptor
flip gather item to_tensor""".split())
# ... whose result may point where any operand points.
_ALL = set("add sub where broadcast cat join interleave tuple swizzle2d aggregate_replace".split())
_FIRST_KW = ("pointer", "base", "desc", "input", "x", "src")
_PY_TYPES = (range, int, float, bool, str, tuple, list, zip, enumerate, reversed, type)
_PY_VALUE = set("range len isinstance int float bool print abs str type hasattr round".split())
_PY_ALL = set("min max getattr tuple list zip enumerate reversed".split())
_PY_FORBIDDEN = set("exec eval compile locals vars globals __import__ setattr delattr".split())
_NONPTR_ATTRS = {"dtype", "shape", "type", "numel", "element_ty", "block_shape", "ndim"}
_SCALAR_OPS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
               ast.BitAnd, ast.BitOr, ast.BitXor, ast.MatMult)
_MISSING = object()
# Python function -> (JITFunction.src it was analysed from, _Summary); weak so dead
# kernels drop out.
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# written / returns: own parameter names stored through / the return value may point into
_Summary = namedtuple("_Summary", "written returns reason", defaults=(None,))


class _Unknown(Exception):
    pass


@lru_cache(maxsize=None)
def _triton_types(*paths):
    out = []
    for mod, name in (p.rsplit(".", 1) for p in paths):
        try:
            out.append(getattr(__import__(mod, fromlist=[name]), name))
        except Exception:  # not every triton version has every class
            pass
    return tuple(out)


def _jit_fn(obj):
    """The Python function behind a device-callable jit object, else None."""
    if isinstance(obj, _triton_types("triton.runtime.jit.ConstexprFunction")):
        return None  # plain host code run at compile time on constexprs
    jit_types = _triton_types("triton.runtime.jit.JITCallable", "triton.runtime.jit.JITFunction",
                              "triton.runtime.interpreter.InterpretedFunction")
    fn = getattr(obj, "fn", None) if isinstance(obj, jit_types) else None
    return fn if isinstance(fn, types.FunctionType) else None


def _builtin_name(obj):
    """Name of a triton.language object (function, jit'd stdlib helper, class), else None.
    Matching on the defining module (not the text ``tl.``) covers any import alias."""
    target = _jit_fn(obj) or obj
    mod = getattr(target, "__module__", None)
    if isinstance(mod, str) and mod.startswith("triton.language"):
        name = getattr(target, "__name__", "?")
        return "__math__" if "libdevice" in mod or mod == "triton.language.math" else name
    if callable(obj):
        # Triton's interpreter swaps triton.language functions for its own while a kernel
        # runs, and leaves them swapped if that kernel raised: find the name it stands in for.
        import triton.language as tl
        for name, value in vars(tl).items():
            if value is obj:
                return name
    return None


def _source(fn, wrapper):
    src, line = getattr(wrapper, "src", None), getattr(wrapper, "def_file_line_number", None)
    if isinstance(src, str) and isinstance(line, int):  # JITFunction.src starts at `def`
        return textwrap.dedent(src), line - 1
    lines, start = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines)), start - 1


def _summarize(fn, wrapper, stack):
    name = fn.__name__
    live_src = getattr(wrapper, "src", None)  # JITFunction.src may be reassigned
    hit = _CACHE.get(fn)
    if hit is not None and hit[0] == live_src:
        return hit[1]
    if fn in stack:  # every function on a call cycle ends up unknown
        return _Summary(_E, _E, f"kernel '{name}': recursive call cycle through '{name}'")
    try:
        src, offset = _source(fn, wrapper)
    except (OSError, TypeError) as e:
        return _Summary(_E, _E, f"kernel '{name}': source code is not available ({e})")
    try:
        tree = next((n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)), None)
        if tree is None:
            raise _Unknown(f"kernel '{name}': no function definition in its source")
        summary = _Analyzer(fn, tree, offset, stack + (fn,)).run()
    except _Unknown as e:
        summary = _Summary(_E, _E, str(e))
    except Exception as e:  # never let an analysis bug escape to graph capture
        summary = _Summary(_E, _E, f"kernel '{name}': analysis failed ({type(e).__name__}: {e})")
    _CACHE[fn] = (live_src, summary)
    return summary


def _join(*envs):
    envs = [e for e in envs if e is not None]
    if not envs:
        return None
    out = dict(envs[0])
    for e in envs[1:]:
        for k, v in e.items():
            out[k] = out.get(k, _E) | v
    return out


def _union(items):
    return frozenset().union(*items)


class _Analyzer:
    """One function's analysis.  Environments map local names to root sets; ``None``
    stands for "this point is never reached" (after return/break/continue/raise)."""

    def __init__(self, fn, tree, offset, stack):
        self.fn, self.tree, self.offset, self.stack = fn, tree, offset, stack
        self.name = fn.__name__
        self.written, self.returns, self.loops = set(), set(), []
        a = tree.args
        self.args = a.posonlyargs + a.args + a.kwonlyargs
        self.params = [x.arg for x in self.args + [a.vararg, a.kwarg] if x is not None]
        self.stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                       and isinstance(n.ctx, (ast.Store, ast.Del))}
        self.locals = set(self.params) | self.stored

    def fail(self, node, msg):
        raise _Unknown(f"kernel '{self.name}': line {getattr(node, 'lineno', 1) + self.offset}: "
                       f"{msg}")

    def run(self):
        scalar = self._scalar_params()
        env = {p: frozenset([p]) for p in self.params if p not in scalar}
        for d in self.tree.args.defaults + self.tree.args.kw_defaults:
            if d is not None:
                self.ev(d, env)
        self.block(self.tree.body, env)
        return _Summary(frozenset(self.written), frozenset(self.returns))

    def _scalar_params(self):
        """Parameters that cannot hold a pointer, so never become roots."""
        import triton.language as tl

        out = set()
        for arg in self.args:
            ann = arg.annotation
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                obj = tl.constexpr if ann.value.endswith("constexpr") else None
            else:
                obj = self.resolve(ann) if ann is not None else None
            if obj is tl.constexpr or any(obj is t for t in (int, float, bool)) or (
                    isinstance(obj, tl.dtype) and not isinstance(obj, tl.pointer_type)):
                out.add(arg.arg)
        # A parameter never rebound and used as an operand of `*`, `//`, `%`, ... or as a
        # range bound is an integer: Triton rejects such arithmetic on pointers.  Uses under
        # `if` are skipped because constexpr-pruned branches are never type-checked.
        uses, todo = [], list(self.tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.If, ast.IfExp)):
                todo.append(node.test)
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, _SCALAR_OPS):
                uses += [node.left, node.right]
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, _SCALAR_OPS):
                uses.append(node.value)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
                uses.append(node.operand)
            elif isinstance(node, ast.Call):
                obj = self.resolve(node.func)
                if obj is builtins.range or _builtin_name(obj) in ("range", "static_range"):
                    uses += node.args
            todo.extend(ast.iter_child_nodes(node))
        return out | {u.id for u in uses if isinstance(u, ast.Name) and u.id in self.params
                      and u.id not in self.stored}

    def resolve(self, node):
        """The object a non-local name/attribute chain denotes (closure, globals,
        builtins), or _MISSING."""
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return _MISSING
            code, cells = self.fn.__code__, self.fn.__closure__ or ()
            if node.id in code.co_freevars:
                try:
                    return cells[code.co_freevars.index(node.id)].cell_contents
                except ValueError:  # empty cell
                    return _MISSING
            if node.id in self.fn.__globals__:
                return self.fn.__globals__[node.id]
            return getattr(builtins, node.id, _MISSING)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            try:
                return _MISSING if base is _MISSING else getattr(base, node.attr)
            except Exception:
                return _MISSING
        return _MISSING

    # -- statements --------------------------------------------------------------------
    def block(self, stmts, env):
        for s in stmts:
            if env is None:
                break
            env = self.stmt(s, env)
        return env

    def stmt(self, s, env):
        if isinstance(s, ast.Expr):
            self.ev(s.value, env)
            return env
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            if s.value is None:
                return env
            elts = None
            if isinstance(s.value, (ast.Tuple, ast.List)) and not any(
                    isinstance(e, ast.Starred) for e in s.value.elts):
                elts = [self.ev(e, env) for e in s.value.elts]  # keeps `a, b = b, a` exact
            roots = _union(elts) if elts is not None else self.ev(s.value, env)
            for t in s.targets if isinstance(s, ast.Assign) else [s.target]:
                env = self.bind(t, roots, elts, env)
            return env
        if isinstance(s, ast.AugAssign):
            roots = self.ev(s.target, env) | self.ev(s.value, env)
            return self.bind(s.target, roots if isinstance(s.op, (ast.Add, ast.Sub)) else _E,
                             None, env)
        if isinstance(s, ast.If):
            self.ev(s.test, env)
            return _join(self.block(s.body, env), self.block(s.orelse, env))
        if isinstance(s, ast.For):
            it = self.ev(s.iter, env)
            return self.loop(env, lambda h: self.block(s.body, self.bind(s.target, it, None, h)),
                             s.orelse)
        if isinstance(s, ast.While):
            return self.loop(env, lambda h: self.block(s.body, h), s.orelse, s.test)
        if isinstance(s, ast.Return):
            if s.value is not None:
                self.returns |= self.ev(s.value, env)
            return None
        if isinstance(s, (ast.Break, ast.Continue)):  # parked until the loop joins them
            self.loops[-1][isinstance(s, ast.Continue)].append(env)
            return None
        if isinstance(s, (ast.Pass, ast.Assert, ast.Raise)):
            for child in ast.iter_child_nodes(s):
                self.ev(child, env)
            return None if isinstance(s, ast.Raise) else env
        # global/nonlocal rebinding, imports, nested defs, with, try, ... could hide writes
        self.fail(s, f"unsupported statement '{type(s).__name__}'")

    def loop(self, env, body, orelse, test=None):
        head = env
        while True:  # root sets only grow, so this reaches a fixpoint
            self.loops.append(([], []))
            if test is not None:
                self.ev(test, head)
            out = body(head)
            breaks, conts = self.loops.pop()
            new = _join(head, out, *conts)
            if new == head:
                break
            head = new
        return _join(self.block(orelse, head), *breaks)

    def bind(self, target, roots, elts, env):
        if isinstance(target, ast.Name):
            return {**env, target.id: roots}
        if isinstance(target, (ast.Tuple, ast.List)):
            exact = elts is not None and len(elts) == len(target.elts) and not any(
                isinstance(t, ast.Starred) for t in target.elts)
            for i, t in enumerate(target.elts):
                env = self.bind(t, elts[i] if exact else roots, None, env)
            return env
        if isinstance(target, ast.Starred):
            return self.bind(target.value, roots, None, env)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and target.value.id in self.locals:
            self.ev(target.slice, env)  # a local container now may hold these roots too
            return {**env, target.value.id: env.get(target.value.id, _E) | roots}
        self.fail(target, f"assignment to '{ast.unparse(target)}' (not a local variable)")

    # -- expressions: the roots a value may point into ----------------------------------
    def ev(self, node, env):
        if isinstance(node, ast.Name):
            return env.get(node.id, _E) if node.id in self.locals else _E
        if isinstance(node, ast.Constant):
            return _E
        if isinstance(node, ast.Attribute):
            roots = self.ev(node.value, env)
            return _E if node.attr in _NONPTR_ATTRS else roots
        if isinstance(node, ast.Subscript):
            self.ev(node.slice, env)
            return self.ev(node.value, env)
        if isinstance(node, ast.Starred):
            return self.ev(node.value, env)
        if isinstance(node, ast.BinOp):  # only ptr +/- int yields a pointer
            roots = self.ev(node.left, env) | self.ev(node.right, env)
            return roots if isinstance(node.op, (ast.Add, ast.Sub)) else _E
        if isinstance(node, ast.UnaryOp):
            roots = self.ev(node.operand, env)
            return roots if isinstance(node.op, ast.UAdd) else _E
        if isinstance(node, ast.IfExp):
            self.ev(node.test, env)
            return self.ev(node.body, env) | self.ev(node.orelse, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        kids = [self.ev(c, env) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        if isinstance(node, (ast.BoolOp, ast.Tuple, ast.List, ast.Set, ast.Dict)):
            return _union(kids)
        if isinstance(node, (ast.Compare, ast.JoinedStr, ast.FormattedValue, ast.Slice)):
            return _E
        self.fail(node, f"unsupported expression '{type(node).__name__}'")

    def call(self, node, env):
        args = [self.ev(a, env) for a in node.args]
        kws = {}
        for kw in node.keywords:
            kws[kw.arg] = kws.get(kw.arg, _E) | self.ev(kw.value, env)
        allr = _union(args + list(kws.values()))
        desc = ast.unparse(node.func)
        obj = self.resolve(node.func)
        if obj is _MISSING and isinstance(node.func, ast.Attribute):
            # method on a kernel value: ptr.store(v), desc.store(offs, v), x.to(tl.int64)
            recv = self.ev(node.func.value, env)
            dtype = node.args[0] if node.args else None
            return self.builtin(node, node.func.attr, recv, recv | allr, desc, dtype)
        if obj is _MISSING:
            if allr or self.ev(node.func, env):
                self.fail(node, f"call to '{desc}' with a pointer argument cannot be resolved "
                                "statically")
            return _E
        name = _builtin_name(obj)
        if name is not None:
            first = args[0] if args else next((kws[k] for k in _FIRST_KW if k in kws), allr)
            dtype = node.args[1] if len(node.args) > 1 else None
            return self.builtin(node, name, first, allr, desc, dtype)
        fn = _jit_fn(obj)
        if fn is not None:
            return self.call_jit(node, fn, obj, args, kws, allr, desc)
        if isinstance(obj, types.BuiltinFunctionType) or any(obj is t for t in _PY_TYPES):
            pyname = getattr(obj, "__name__", "")
            if pyname in _PY_FORBIDDEN:
                self.fail(node, f"call to '{desc}' can access the kernel's locals")
            if pyname in _PY_VALUE:
                return _E
            if pyname in _PY_ALL:
                return allr
        if allr:
            self.fail(node, f"'{desc}' is neither a Triton builtin nor a @triton.jit function "
                            "and receives a pointer argument")
        return _E

    def builtin(self, node, name, first, allr, desc, dtype=None):
        if name in _WRITES:
            self.write(node, first, f"'{desc}'")
            return _E
        if name == "inline_asm_elementwise":
            pure = node.args[4] if len(node.args) > 4 else next(
                (k.value for k in node.keywords if k.arg == "is_pure"), None)
            if allr and not (isinstance(pure, ast.Constant) and pure.value is True):
                self.fail(node, f"'{desc}' with is_pure not True receives pointer-derived "
                                "operands")
            return allr
        if name in _VALUE or name == "__math__":
            return _E
        if name in _FIRST:
            dtype = dtype or next((k.value for k in node.keywords if k.arg == "dtype"), None)
            if name in ("to", "cast") and not first and self.is_ptr_type(dtype):
                # an address made from an integer (e.g. a loaded pointer table)
                self.fail(node, f"'{desc}' casts a non-pointer value to a pointer type")
            return first
        if name in _ALL:
            return allr
        if allr:
            self.fail(node, f"'{desc}' is not a modelled Triton operation and receives a "
                            "pointer argument")
        return _E

    def is_ptr_type(self, node):
        import triton.language as tl

        for n in ast.walk(node) if node is not None else ():
            obj = self.resolve(n.func if isinstance(n, ast.Call) else n)
            if obj is tl.pointer_type or isinstance(obj, tl.pointer_type):
                return True
        return False

    def write(self, node, roots, what):
        if not roots:
            self.fail(node, f"{what} writes through a pointer not derived from any kernel "
                            "argument")
        self.written |= roots

    def call_jit(self, node, fn, obj, args, kws, allr, desc):
        summary = _summarize(fn, obj, self.stack)
        if summary.reason:
            self.fail(node, f"call to @triton.jit function '{desc}' cannot be analysed "
                            f"({summary.reason})")
        sig = inspect.signature(fn)
        if any(isinstance(a, ast.Starred) for a in node.args) or None in kws:
            bound = {p: allr for p in sig.parameters}  # cannot match statically: any may bind
        else:
            try:  # bind the argument root sets themselves to the callee's parameters
                bound = sig.bind(*args, **kws).arguments
            except TypeError as e:
                self.fail(node, f"arguments do not match '{desc}' ({e})")
            bound = {p: _union(v.values()) if isinstance(v, dict) else _union(v)
                     if isinstance(v, tuple) else v for p, v in bound.items()}
        consts = {k.arg for k in node.keywords if isinstance(k.value, ast.Constant)}
        consts |= {p for p, a in zip(sig.parameters, node.args) if isinstance(a, ast.Constant)}
        for p in sorted(summary.written):
            # a constant (e.g. None) or defaulted argument can only reach stores in branches
            # that Triton prunes for it, so it adds nothing; any other rootless pointer fails
            if p in bound and p not in consts or bound.get(p):
                self.write(node, bound.get(p, _E), f"call to '{desc}' (its parameter '{p}')")
        return _union(bound.get(p, _E) for p in summary.returns)


def _unwrap(kernel):
    """(the Python function, the layers above it) of an autotune/heuristics/jit kernel."""
    from triton.runtime.jit import KernelInterface  # triton is optional: imported once a kernel is seen
    *chain, fn = kernel_chain(kernel, function=True)
    if isinstance(fn, types.FunctionType) and all(isinstance(k, KernelInterface) for k in chain):  # library subclasses too
        return fn, chain
    raise TypeError("analyze_mutations() expects a @triton.jit kernel (optionally wrapped by "
                    f"@triton.autotune/@triton.heuristics), got {type(kernel).__name__}")


def analyze_mutations(kernel) -> MutationAnalysis:
    """Which parameters of ``kernel`` may have their memory written by a launch.
    Never raises for kernels it cannot analyse (those come back unknown); raises
    TypeError only when ``kernel`` is not a kernel at all."""
    fn, chain = _unwrap(kernel)
    summary = _summarize(fn, chain[-1] if chain else None, ())
    if summary.reason:
        return MutationAnalysis(frozenset(), True, summary.reason)
    written = set(summary.written)
    for w in chain:  # the autotuner's host-side hooks run around the launch
        written |= set(getattr(w, "reset_to_zero", None) or ())
        hooks = [getattr(w, "user_defined_pre_hook", False),
                 getattr(w, "user_defined_post_hook", False)]
        hooks += [getattr(c, "pre_hook", None) for c in getattr(w, "configs", None) or ()]
        if any(hooks):
            return MutationAnalysis(frozenset(), True, f"kernel '{fn.__name__}': "
                                    "@triton.autotune has a user pre_hook/post_hook that may "
                                    "write any argument")
    return MutationAnalysis(frozenset(written), False)
