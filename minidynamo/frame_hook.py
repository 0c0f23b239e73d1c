"""Every frame optimized: while code runs eagerly under an optimized call — an eager
fallback, the native instruction of a graph break, a resume function past its limit —
each Python function it calls is offered to the optimizer as a frame of its own, as
TorchDynamo's frame hook does. A decline then costs that one frame, never what it calls.

The mechanism is torch's frame-evaluation hook (`torch._C._dynamo.eval_frame`, a PEP 523
callback with a per-code cache; docs/architecture.md says why this and not a rewrite of
the eager code). It is on only inside those eager regions (`region(backend)`), restored on
the way out. The callback decides once per code object:

- torch's internals (torch.nn's containers excepted), the standard library, minidynamo,
  generated code, generators, and packages in `SKIPPED_PACKAGES` run plainly; the code
  is marked so the callback never sees it again, and the frames it calls are still offered;
- minidynamo's own code and generated entries run with the hook off under them (tracing,
  backends, graphs; what runs eagerly inside an entry opens a region of its own), and so
  does a `minidynamo.disable`d function's whole subtree;
- any other code (the user's, transformers', timm's, torchvision's) gets a trampoline in
  torch's cache: a code object with the original's parameters, cells and free variables
  whose body hands the arguments to a `HookedCode`, which calls the function optimized
  (callees.optimized_function, through optimizing.py: its own entries, guards, breaks). Its eager entries call a
  copy of the function whose code is marked to run plainly (`plain_function`), so a
  frame never reaches its own trampoline again.

A code whose first optimized call made no graph (no tensor work, or an eager fallback
of the whole frame) runs plainly from then on, its callees still offered, as
TorchDynamo skips a frame with nothing to compile. Without torch's hook (a torch whose
protocol differs, checked once by a self-test) eager regions run plainly, as before.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
import types
import warnings
from types import SimpleNamespace

from ._compat import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, CO_ITERABLE_COROUTINE, CO_VARARGS, \
    CO_VARKEYWORDS, PY311
from .logs import get_logger
from . import optimizing

log = get_logger("frames")

# Site-packages that hold no model code: their frames run plainly (their callees are
# still offered). Data, not logic: extend it where a package's frames only cost guards.
SKIPPED_PACKAGES = (
    "torch", "numpy", "sympy", "bytecode", "_pytest", "pytest", "pluggy", "hypothesis",
    "typing_extensions", "tqdm", "huggingface_hub", "safetensors", "tokenizers", "regex",
    "packaging", "filelock", "fsspec", "jinja2", "networkx", "yaml", "requests", "urllib3",
    "mpmath", "functorch", "torchgen", "pytest_benchmark", "coverage", "IPython", "setuptools",
    "pkg_resources", "importlib_metadata", "zipp", "markupsafe", "certifi", "idna", "charset_normalizer",
)
# Site-packages whose frames run plainly with everything under them: Triton's interpreter
# runs kernels' bodies (the user's code) as Python, which are kernels, not frames.
SKIPPED_TREES = ("triton",)
# torch's own Python optimized like the user's (by file, under torch/, and function name).
TORCH_OPTIMIZED = {os.path.join("nn", "modules", "container.py"): ("forward",)}

# Class bodies and modules (no CO_OPTIMIZED) run in a namespace, not as a function's call.
_CO_OPTIMIZED = 0x1
# A function reading its caller's frame must run where it was called, not under an entry.
_FRAME_READERS = frozenset({"currentframe", "_getframe", "f_back", "stack", "getouterframes"})
_UNSTARTED_ONLY = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE
_PLACEHOLDER = 1.2345678901234e-300  # stands for the HookedCode in a trampoline's constants

_tls = threading.local()
_ISOLATE_ID = 1 << 30  # torch.compile numbers its regions from 0 (-1: none)


# --- torch's hook, probed once --------------------------------------------------------------
class _Torch:
    """torch's eval-frame API, or None where it is missing or behaves otherwise."""
    api = None
    probed = False


def _load():
    if _Torch.probed:
        return _Torch.api
    _Torch.probed = True
    try:
        from torch._C._dynamo import eval_frame as ef
        from torch._C._dynamo.guards import RootGuardManager
        api = SimpleNamespace(set=ef.set_eval_frame, get=ef.get_eval_frame_callback,
                              set_strategy=ef.set_code_exec_strategy, Strategy=ef._FrameExecStrategy,
                              Action=ef._FrameAction, RootGuardManager=RootGuardManager)
        # torch.compile reads every cache entry of a code it compiles (recompile counts and
        # reasons): ours go into a region of their own where torch has regions.
        api.isolate = getattr(ef, "set_eval_frame_isolate_recompiles_id", None)
        api.guard_manager = _GuardManager
        if api.isolate is None:
            # It sees them then, and runs them too: an entry that passes only inside our
            # regions, and that it skips when it explains its recompiles.
            from torch._dynamo.guards import DeletedGuardManagerWrapper

            def foreign():
                manager = DeletedGuardManagerWrapper("an entry of minidynamo's frame hook")
                manager.root.add_lambda_guard(_in_our_region, ["inside a region of minidynamo's frame hook"])
                return manager
            api.guard_manager = foreign
        api.run = api.Strategy(api.Action.DEFAULT, api.Action.DEFAULT)
        api.skip = api.Strategy(api.Action.SKIP, api.Action.DEFAULT)
        api.skip_tree = api.Strategy(api.Action.SKIP, api.Action.SKIP)
        _Torch.api = api
        # Entering and leaving a region set the callback themselves: they run plainly, so
        # torch does not put back, after them, the callback it found.
        for method in (Region.__enter__, Region.__exit__):
            api.set_strategy(method.__code__, api.skip)
        if not _self_test():
            raise RuntimeError("the self-test's frame did not run its substitute")
    except Exception as e:  # noqa: BLE001 - any mismatch means: no hook, eager regions run plainly
        _Torch.api = None
        log.info("torch's frame hook is not usable here (%s: %s): eagerly run code is not re-entered",
                 type(e).__name__, e)
    return _Torch.api


def available() -> bool:
    """Whether eagerly run code is re-entered (torch's hook works in this process)."""
    return _load() is not None


# --- regions -------------------------------------------------------------------------------
class Region:
    """A `with` block in which frames started are offered to the optimizer under `backend`
    and the dynamic-shape mode of the optimized function whose eager run it is (`dynamic=False`
    means static everywhere, as torch.compile's). Inside a region of torch.compile's
    (another callback is set), it leaves that one be."""
    __slots__ = ("backend", "dynamic")

    def __init__(self, backend, dynamic=None):
        self.backend = backend
        self.dynamic = dynamic

    def __enter__(self):
        api = _Torch.api
        stack = _stack()
        prior = api.get()
        if prior is not None and prior is not _callback:
            stack.append(None)  # someone else's hook: not ours to replace
            return
        isolated = api.isolate(_ISOLATE_ID) if api.isolate is not None else None
        stack.append((prior, self.backend, isolated, self.dynamic))
        api.set(_callback)

    def __exit__(self, *exc):
        top = _tls.stack.pop()
        if top is not None:
            api = _Torch.api
            api.set(top[0])
            if top[2] is not None:
                api.isolate(top[2])


def _in_our_region(f_locals) -> bool:
    stack = getattr(_tls, "stack", None)
    return bool(stack) and stack[-1] is not None


def _stack() -> list:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def region(backend, dynamic=None):
    """The context manager of an eager region under `backend`, or None without the hook."""
    return Region(backend, dynamic) if available() else None


def eager_call(fn, backend, dynamic=None):
    """(what an eager entry calls for `fn`, the region to call it in): `fn` run plainly with
    the frames it calls offered to the optimizer under `backend`; (fn, None) without the
    hook."""
    if not available() or not isinstance(fn, types.FunctionType):
        return fn, None
    return plain_function(fn), Region(backend, dynamic)


# id(code) -> (code, its plain copy). By identity: equal code objects of two files compare
# equal, and each copy must keep its own file for tracebacks.
_plain_codes: dict = {}


def plain_code(code):
    """A copy of `code` marked to run plainly (the callback never sees it; its callees
    are offered)."""
    found = _plain_codes.get(id(code))
    if found is None:
        copy = code.replace()
        run_plainly(copy)
        found = _plain_codes[id(code)] = (code, copy)
    return found[1]


def plain_function(fn):
    """`fn` with its code replaced by `plain_code`: the same globals, defaults, closure."""
    copy = types.FunctionType(plain_code(fn.__code__), fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__, copy.__module__ = fn.__kwdefaults__, fn.__qualname__, fn.__module__
    copy.__dict__.update(fn.__dict__)
    return copy


def run_plainly(code):
    """Mark a code object minidynamo made (a resume function, a break's native call) to run
    plainly under the hook, its callees offered."""
    if available():
        _mark(code, _Torch.api.skip)


def _mark(code, strategy):
    _Torch.api.set_strategy(code, strategy)


# --- the callback ----------------------------------------------------------------------------
def _callback(frame, cache_entry, frame_state):
    api = _Torch.api
    code = frame.f_code
    try:
        decision = _decide(code)
        if decision in ("optimize", "plain"):
            trampoline = _trampoline(code, HookedCode(code, "generated code" if code.co_filename.startswith("<")
                                                      else "a closure" if decision == "plain" else None))
            if trampoline is not None:
                return SimpleNamespace(frame_exec_strategy=api.run, apply_to_code=False,
                                       guarded_code=_Guarded(trampoline, code))
            decision = "skip"
        return SimpleNamespace(frame_exec_strategy=api.skip_tree if decision == "skip_tree" else api.skip,
                               apply_to_code=True, guarded_code=None)
    except Exception as e:  # noqa: BLE001 - the hook must never break the user's call
        log.warning("minidynamo's frame hook failed on %s (%s:%s): %s: %s; it runs plainly",
                    code.co_name, code.co_filename, code.co_firstlineno, type(e).__name__, e)
        return SimpleNamespace(frame_exec_strategy=api.skip, apply_to_code=True, guarded_code=None)


class _GuardManager:
    """torch's cache entry reads `.root` (no guards: the trampoline's target checks its
    own) and `.diff_guard_root`; the rest is what torch.compile would read of an entry it
    saw (it does not: ours are in a region of their own)."""

    def __init__(self):
        self.root, self.diff_guard_root = _Torch.api.RootGuardManager(), None
        self.id_matched_objs, self.closure_vars, self.global_scope = {}, {}, {"G": {}}
        self.cache_entry, self.diff_guard_sources = None, set()

    def check_verbose(self, f_locals):
        return self.root.check_verbose(f_locals)

    def populate_diff_guard_manager(self):
        pass


class _Guarded:
    def __init__(self, code, original):
        self.code, self.guard_manager, self.compile_id = code, _Torch.api.guard_manager(), None
        self.trace_annotation = f"minidynamo {original.co_name}"


_own_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
_torch_dir = None
_stdlib_dirs = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_site_dirs = None


def torch_code_optimized(code) -> bool:
    """Whether `code`, torch's own, is optimized like the user's (`TORCH_OPTIMIZED`)."""
    _paths()
    path = os.path.abspath(code.co_filename)
    return path.startswith(_torch_dir) and code.co_name in TORCH_OPTIMIZED.get(path[len(_torch_dir):], ())


def in_torch_or_stdlib(filename: str) -> bool:
    """Whether code from `filename` is torch's or the standard library's (not the user's, nor
    another installed package's, which the user may read as their model's code)."""
    _paths()
    path = os.path.abspath(filename)
    if path.startswith(_torch_dir):
        return True
    return path.startswith(_stdlib_dirs) and not path.startswith(_site_dirs)


def _paths():
    global _torch_dir, _site_dirs
    if _torch_dir is None:
        import torch
        _torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        _site_dirs = tuple({os.path.abspath(p) + os.sep for p in sys.path if p.endswith("-packages")})


def _decide(code) -> str:
    """'optimize'; 'plain' (a trampoline to the plain copy: the user's code is never marked,
    torch.compile shares the marks); 'skip' (marked: this frame plainly, callees offered);
    or 'skip_tree'."""
    filename = code.co_filename
    if filename.startswith("<minidynamo") or filename.startswith(_own_dir):
        return "skip_tree"
    if not code.co_flags & _CO_OPTIMIZED or code.co_flags & _UNSTARTED_ONLY or filename.startswith("<frozen") \
            or code.co_name.startswith("<") and code.co_name != "<lambda>" or _FRAME_READERS & set(code.co_names):
        return "skip"  # not a call to redirect: a class body, a generator resumed, a frame reader
    if filename.startswith("<"):
        return "plain"  # exec'd code (fx's, the user's): never marked, torch.compile may want it
    where = _by_place(code, filename)
    # A closure runs plainly (but for `__class__`, a method's cell for `super()`): its
    # function is often made per call, and an optimized function kept per closure would
    # keep the cells' values (activations) alive. What it calls is still offered: a
    # decorator's wrapper runs plainly, the function it wraps optimized.
    if where == "optimize" and any(name != "__class__" for name in code.co_freevars):
        return "plain"
    return where


def _by_place(code, filename) -> str:
    _paths()
    path = os.path.abspath(filename)
    if path.startswith(_torch_dir):
        return "optimize" if torch_code_optimized(code) else "skip"
    for site in _site_dirs:
        if path.startswith(site):
            top = path[len(site):].split(os.sep, 1)[0].split(".")[0]
            return "skip_tree" if top in SKIPPED_TREES else "skip" if top in SKIPPED_PACKAGES else "optimize"
    if path.startswith(_stdlib_dirs):
        return "skip"
    return "optimize"


# --- trampolines -----------------------------------------------------------------------------
class HookedCode:
    """The target of one code object's trampoline: the function the frame is a call of
    (rebuilt from the code, the frame's globals and closure), optimized."""

    def __init__(self, code, plain=None):
        self.code = code
        self.qualname = getattr(code, "co_qualname", code.co_name)
        self.where = f"{code.co_filename}:{code.co_firstlineno}"
        self.functions: dict = {}  # (globals id, cell ids, backend key) -> optimized function
        self.plain = plain  # set once the code runs plainly: why
        _hooked.append(self)

    def __call__(self, cells, args, kwargs):
        globals_ = sys._getframe(1).f_globals
        stack = getattr(_tls, "stack", None)
        backend, dynamic = stack[-1][1::2] if stack and stack[-1] is not None else ("eager", None)
        key = (id(globals_), cells and tuple(map(id, cells)), backend if isinstance(backend, str) else id(backend),
               dynamic)
        found = self.functions.get(key)
        if found is None:
            found = self._optimized(globals_, cells, backend, dynamic, key)
        return found(*args, **kwargs)

    def _optimized(self, globals_, cells, backend, dynamic, key):
        code = self.code
        fn = types.FunctionType(plain_code(code), globals_, code.co_name, None, cells)
        fn.__qualname__ = self.qualname
        fn.__module__ = globals_.get("__name__")
        if self.plain in ("a closure", "generated code"):  # kept nowhere (nor its cells' values)
            return _PlainCall(fn, backend, dynamic)
        if self.plain is not None or len(self.functions) >= _VARIANT_LIMIT:
            self.plain = self.plain or f"more than {_VARIANT_LIMIT} globals or classes"
            found = self.functions[key] = _PlainCall(fn, backend, dynamic)
            return found
        optimized = optimizing.optimized_function(fn, backend, dynamic)
        self.functions[key] = _FirstCall(self, key, fn, optimized)
        return self.functions[key]


_VARIANT_LIMIT = 8  # functions per code: globals dicts, `__class__` cells
_hooked: list = []  # every HookedCode made, in order


def report() -> list:
    """The code objects the hook has offered to the optimizer: `.qualname`, `.where`, and
    `.plain`, why the code now runs plainly (None while it is optimized)."""
    return list(_hooked)


class _FirstCall:
    """The first call through a trampoline: the optimized function, then the decision
    whether the code stays optimized (it made a graph) or runs plainly from now on."""

    def __init__(self, hooked, key, fn, optimized):
        self.hooked, self.key, self.fn, self.optimized = hooked, key, fn, optimized

    def __call__(self, *args, **kwargs):
        hooked = self.hooked
        try:
            return self.optimized(*args, **kwargs)
        finally:
            entries = self.optimized.cache_entries()
            if entries and all(e.plain_reason is not None for e in entries):
                hooked.plain = entries[0].plain_reason
                cache = self.optimized._cache
                hooked.functions[self.key] = _PlainCall(self.fn, cache.backend, cache.dynamic.mode)
                log.info("%s (%s:%s) runs plainly from now on (%s); the frames it calls are still optimized",
                         self.fn.__qualname__, hooked.code.co_filename, hooked.code.co_firstlineno, hooked.plain)
            elif entries:
                hooked.functions[self.key] = self.optimized


class _PlainCall:
    """A function run plainly from a trampoline, the frames it calls offered (the hook is
    off under minidynamo's own frames: the region sets it again)."""
    __slots__ = ("fn", "region")

    def __init__(self, fn, backend, dynamic=None):
        self.fn, self.region = fn, Region(backend, dynamic)

    def __call__(self, *args, **kwargs):
        with self.region:
            return self.fn(*args, **kwargs)


def _trampoline(code, target):
    """A code object with `code`'s parameters, local names, cells and free variables (torch
    copies the frame's slots into it by index) whose body calls `target(cells, args,
    kwargs)`; None where the layout cannot be matched."""
    nargs = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames
    if not all(n.isidentifier() for n in (*names, *code.co_cellvars, *code.co_freevars)):
        return None
    pos, kwonly = names[:code.co_argcount], names[code.co_argcount:nargs]
    params, i = list(pos), nargs
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    star = kw = None
    if code.co_flags & CO_VARARGS:
        star = names[i]
        params.append("*" + star)
        i += 1
    elif kwonly:
        params.append("*")
    params += kwonly
    if code.co_flags & CO_VARKEYWORDS:
        kw = names[i]
        params.append("**" + kw)
        i += 1
    frees = code.co_freevars
    cells = f"(lambda: ({', '.join(frees)},)).__closure__" if frees else "None"
    args = f"({''.join(p + ', ' for p in pos)})" + (f" + {star}" if star else "")
    kwargs = "{" + ", ".join(f"{k!r}: {k}" for k in kwonly) + "}" + (f" | {kw}" if kw else "")
    # The other locals and the cells, named where they are never run: same slots as the original.
    keep = "".join(f"        {n} = None\n" for n in names[i:])
    if code.co_cellvars:
        keep += f"        (lambda: ({', '.join(code.co_cellvars)},))\n"
    src = ("def _md_outer():\n" + "".join(f"    {f} = None\n" for f in frees)
           + f"    def _md_trampoline({', '.join(params)}):\n"
           + f"        return ({_PLACEHOLDER!r})({cells}, {args}, {kwargs})\n"
           + ("        if False:\n" + keep.replace("        ", "            ") if keep else "")
           + "    return _md_trampoline\n")
    scope: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'float' object is not callable"
        exec(compile(src, code.co_filename, "exec"), scope)  # noqa: S102
    made = scope["_md_outer"]().__code__
    if (made.co_varnames, made.co_cellvars, made.co_freevars, made.co_argcount, made.co_kwonlyargcount,
            made.co_posonlyargcount, made.co_flags & (CO_VARARGS | CO_VARKEYWORDS)) != \
            (names, code.co_cellvars, frees, code.co_argcount, code.co_kwonlyargcount,
             code.co_posonlyargcount, code.co_flags & (CO_VARARGS | CO_VARKEYWORDS)):
        return None
    consts = tuple(target if type(c) is float and c == _PLACEHOLDER else c for c in made.co_consts)
    extra = {"co_qualname": code.co_qualname} if PY311 else {}
    return made.replace(co_consts=consts, co_name=code.co_name, co_firstlineno=code.co_firstlineno, **extra)


# --- the self-test ---------------------------------------------------------------------------
def _self_test() -> bool:
    """Substitute a trampoline for one function under the hook and check it ran."""
    api = _Torch.api
    seen = []

    def probe(x, *rest, k=1, **kw):
        return ("plain", x)

    def target(cells, args, kwargs):
        seen.append((args, kwargs))
        return ("substituted", args[0])

    def callback(frame, cache_entry, frame_state):
        if frame.f_code is probe.__code__:
            return SimpleNamespace(frame_exec_strategy=api.run, apply_to_code=False,
                                   guarded_code=_Guarded(_trampoline(probe.__code__, target), probe.__code__))
        return SimpleNamespace(frame_exec_strategy=api.skip, apply_to_code=True, guarded_code=None)

    prior = api.set(callback)
    try:
        out = probe(3, k=2)
    finally:
        api.set(prior)
    from torch._C._dynamo.eval_frame import reset_code
    reset_code(probe.__code__)
    return out == ("substituted", 3) and seen == [((3,), {"k": 2})]
