"""Fast replay of one captured Triton kernel launch.

`make_launcher(kernel, grid, constant_kwargs, dynamic_names)` returns a callable
that behaves exactly like ``kernel[grid](**constant_kwargs, **dict(zip(dynamic_names,
values)))`` (and returns None), but costs less host time on a GPU:

* The first call takes the ordinary path, so the autotuner benchmarks, heuristics
  run and the kernel compiles.  A grid recorder captures the final bound
  arguments (the ``meta`` Triton hands to a grid callable) and the grid, and the
  ``CompiledKernel`` that ``JITFunction.run`` returns is kept.
* Later calls run a small generated function ("variant") that re-checks what
  Triton specialises on and the caller does not pin (current device, each
  tensor's device, dtype and 16-byte alignment, dynamic scalars' specialisation
  key, the autotuner's chosen config still being cached, launch hooks, globals
  the kernel read) and then calls the compiled kernel's launch entry
  ``CompiledKernel.run(gx, gy, gz, stream, function, packed_metadata,
  launch_metadata, enter_hook, exit_hook, *all_params)`` with raw data pointers —
  or, where ``_direct_call`` recognises how that object calls its C entry, the
  C entry itself with the same arguments.
* Any mismatch falls through to older variants, then to the ordinary path,
  which may resolve one more variant (at most ``_MAX_VARIANTS`` live).  The
  newest variant is installed as ``__call__`` of a per-launcher subclass, so a
  call costs one Python frame on top of the launch entry.

The launch convention is feature-detected from the installed Triton's
``JITFunction.run`` source (same in 3.6 and 3.9).  If detection fails, or
under ``TRITON_INTERPRET=1``, every call takes the ordinary path; the reason is
logged once and kept in ``fallback_reason``.

Assumed pinned by the caller's guards (not re-checked per call): tensor shapes
and strides (a callable grid or heuristic may read them), the identity of the
kernel object, Triton compile knobs read from the environment
(``TRITON_DEBUG`` is re-checked since it is a plain attribute).
"""
from __future__ import annotations

import functools
import logging
import operator
import re
import threading

log = logging.getLogger("minidynamo.launcher")

_MAX_VARIANTS = 4      # live specialisations per launcher
_MAX_RESOLVES = 16     # stop resolving after this many attempts (thrashing guard)
_MISSING = object()
_RESOLVE_LOCK = threading.RLock()
_logged: set = set()


def _log_once(msg: str, level: int = logging.INFO) -> None:
    if msg not in _logged:
        _logged.add(msg)
        log.log(level, msg)


class _Decline(Exception):
    """Fast path not possible; `permanent` ones stop further resolve attempts."""

    def __init__(self, reason: str, permanent: bool = True):
        super().__init__(reason)
        self.permanent = permanent


class _GridRecorder:
    """Stands in for the user's grid for one ordinary launch and keeps the meta
    (= Triton's bound_args, all params in signature order) and the grid of the
    last call, which is the real launch (autotune benchmarking calls come first)."""

    __slots__ = ("grid", "meta", "result")

    def __init__(self, grid):
        self.grid, self.meta, self.result = grid, None, None

    def __call__(self, meta):
        g = self.grid(meta) if callable(self.grid) else self.grid
        self.meta, self.result = dict(meta), g
        return g


# Triton's own call, in 3.x: kernel.run(grid_0, grid_1, grid_2, stream, kernel.function,
# kernel.packed_metadata, launch_metadata, <enter hook>, <exit hook>, *bound_args.values())
_RUN_CALL = re.compile(
    r"kernel\.run\(\s*grid_0\s*,\s*grid_1\s*,\s*grid_2\s*,\s*stream\s*,\s*kernel\.function\s*,"
    r"\s*kernel\.packed_metadata\s*,\s*launch_metadata\s*,\s*[\w.]*launch_enter_hook\s*,"
    r"\s*[\w.]*launch_exit_hook\s*,\s*\*bound_args\.values\(\)\s*\)")
_probe_cache: dict = {}


def _probe() -> dict:
    """Feature-detect the Triton internals the fast path needs (once per process)."""
    if _probe_cache:
        return _probe_cache
    info: dict = {"error": None}
    try:
        import inspect

        import torch
        import triton
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.driver import driver
        from triton.runtime.jit import JITFunction
        info.update(JITFunction=JITFunction, Autotuner=Autotuner, Heuristics=Heuristics,
                    version=getattr(triton, "__version__", "?"))
        src = inspect.getsource(JITFunction.run)
        if not _RUN_CALL.search(src):
            raise _Decline("unrecognised CompiledKernel.run call in JITFunction.run")
        if "get_current_stream(device)" not in src:
            raise _Decline("JITFunction.run does not take the stream from the driver")
        try:
            from triton import knobs
            rt = knobs.runtime
            if not hasattr(rt, "launch_enter_hook"):
                raise ImportError
        except ImportError:  # pre-knobs Triton kept the hooks on CompiledKernel
            from triton.compiler.compiler import CompiledKernel as rt
            if not hasattr(rt, "launch_enter_hook"):
                raise _Decline("cannot find launch hooks")
        info["RT"] = rt
        active = driver.active
        info["STREAM"] = active.get_current_stream
        # torch.cuda.current_device() is what Triton uses; the raw getter skips _lazy_init.
        info["GETDEV"] = getattr(torch._C, "_cuda_getDevice", None) or active.get_current_device
    except _Decline as e:
        info["error"] = str(e)
    except Exception as e:  # any drift in internals: ordinary path, correct but slower
        info["error"] = f"triton internals not recognised: {e!r}"
    _probe_cache.update(info)
    return _probe_cache


_SCRATCH_LOCALS = ("global_scratch", "profile_scratch")


def _direct_call(run):
    """(render, None) or (None, why): how the compiled kernel's launcher object hands its
    arguments to its C entry, read from the source of its ``__call__`` (Triton 3.6 and 3.9
    differ), so a call can go to the C entry directly, skipping a Python frame that only
    allocates scratch memory this kernel does not need. ``render(call_args, bind)`` turns
    the argument expressions of a ``run(...)`` call into the equivalent C-entry call."""
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None, "the kernel uses scratch memory"
    if getattr(run, "gsan_enabled", False):
        return None, "the kernel is instrumented (gsan)"
    launch = getattr(run, "launch", None)
    if not callable(launch):
        return None, "no launch entry on the launcher object"
    convention = _launch_convention(type(run))
    if isinstance(convention, str):
        return None, convention
    n_params, items = convention

    def render(call_args: list, bind) -> str:
        fixed, rest = call_args[:n_params], call_args[n_params:]
        out = []
        for kind, x in items:
            if kind == "param":
                out.append(fixed[x])
            elif kind == "star":
                out.extend(rest)
            elif kind == "tuple":
                out.append("(" + "".join(r + ", " for r in rest) + ")")
            elif kind == "attr":
                out.append(bind(getattr(run, x)))
            else:
                out.append("None")
        return f"{bind(launch)}({', '.join(out)})"
    return render, None


@functools.lru_cache(maxsize=None)
def _launch_convention(cls):
    """(number of fixed parameters, [(kind, detail)] per argument of its ``self.launch``
    call) for a launcher class's ``__call__``, or why it is not recognised. Read once per
    class: parsing the source costs milliseconds, and every kernel shares the class."""
    import ast
    import inspect
    import textwrap
    try:
        fdef = ast.parse(textwrap.dedent(inspect.getsource(cls.__call__))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError) as e:
        return f"cannot read the launcher's source: {e!r}"
    a = fdef.args
    params = [x.arg for x in a.args][1:]
    vararg = a.vararg.arg if a.vararg else None
    launches = [st for st in fdef.body if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                and ast.unparse(st.value.func) == "self.launch"]
    if a.kwonlyargs or a.kwarg or len(launches) != 1 or launches[0].value.keywords:
        return "the launcher's __call__ does not call self.launch(...) once"
    # Everything else may only prepare what the launch call takes (or is for gsan, off).
    for stmt in fdef.body:
        if stmt is launches[0] or isinstance(stmt, ast.FunctionDef):
            continue
        if isinstance(stmt, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id in (*_SCRATCH_LOCALS, "kernel_args", "active_driver")
                for t in stmt.targets):
            continue
        if isinstance(stmt, ast.If) and any(k in ast.unparse(stmt.test)
                                            for k in ("gsan_enabled", "has_profile_allocator")):
            continue
        return f"unrecognised statement in the launcher: {ast.unparse(stmt)[:60]!r}"
    items = []
    for arg in launches[0].value.args:
        name = arg.id if isinstance(arg, ast.Name) else None
        if isinstance(arg, ast.Starred) and getattr(arg.value, "id", None) == vararg:
            items.append(("star", None))
        elif name in params:
            items.append(("param", params.index(name)))
        elif name is not None and name in (vararg, "kernel_args"):
            items.append(("tuple", None))  # kernel_args is args unless gsan (declined above)
        elif name in _SCRATCH_LOCALS:
            items.append(("none", None))  # no scratch memory: None
        elif isinstance(arg, ast.Attribute) and getattr(arg.value, "id", None) == "self":
            items.append(("attr", arg.attr))
        else:
            return f"unrecognised launch argument {ast.unparse(arg)!r}"
    return len(params), tuple(items)


def _scalar_key(v):
    """Everything Triton 3.x specialises a non-constexpr scalar on (conservative:
    int ==1, %16, i32/i64/u64 range; floats/bools/None only by type)."""
    t = type(v)
    if t is int:
        return (t, v == 1, v % 16 == 0, -2**31 <= v < 2**31, -2**63 <= v < 2**63)
    return (t,)


def _norm_grid(g):
    n = len(g)
    return (operator.index(g[0]), operator.index(g[1]) if n > 1 else 1,
            operator.index(g[2]) if n > 2 else 1)


def _kernel_name(kernel) -> str:
    k = kernel
    for _ in range(8):
        inner = getattr(k, "fn", None)
        if inner is None:
            break
        k = inner
    return getattr(k, "__name__", type(kernel).__name__)


def _device_count() -> int:
    import torch
    return torch.cuda.device_count()


def _is_tensor(v) -> bool:
    import torch
    return isinstance(v, torch.Tensor)


def _param_order(kernel) -> tuple:
    import inspect
    k = kernel
    for _ in range(8):
        inner = getattr(k, "fn", None)
        if inner is None:
            break
        k = inner
    try:
        return tuple(inspect.signature(k).parameters)
    except (TypeError, ValueError):
        return ()


class Launcher:
    """Callable replay of ``kernel[grid](**constant_kwargs, **dynamic)``."""

    def __init__(self, kernel, grid, constant_kwargs: dict, dynamic_names: tuple):
        self.kernel = kernel
        # Triton indexes a grid sequence, but its interpreter only takes tuples: a list
        # grid is normalised so it works in both (same launch either way).
        self.grid = tuple(grid) if type(grid) is list else grid
        self.constant_kwargs = dict(constant_kwargs)
        self.dynamic_names = tuple(dynamic_names)
        self.name = _kernel_name(kernel)
        self._param_order = _param_order(kernel)
        self.fallback_reason: str | None = None
        self.ordinary_calls = 0          # how often the ordinary path ran (for tests/inspection)
        self._variants: list = []        # (fast function, its namespace), newest first
        self._resolves = 0
        self._enabled = True
        # A class per launcher, so a variant can be installed as its __call__: calling the
        # instance then runs the generated function directly (no extra *args frame).
        self.__class__ = type(Launcher.__name__, (Launcher,), {"__module__": __name__})
        reason = self._static_reason()
        if reason:
            self._disable(reason)

    # -- public ---------------------------------------------------------------
    def __call__(self, *values):  # replaced per instance by the newest fast variant
        return self._ordinary(*values)

    @property
    def fast_path(self) -> bool:
        return bool(self._variants)

    def describe(self) -> str:
        g = "callable" if callable(self.grid) else tuple(self.grid)
        if self._variants:
            ns = self._variants[0][1]
            entry = "C entry" if ns["DIRECT"] is None else f"CompiledKernel.run: {ns['DIRECT']}"
            how = f"fast path ({len(self._variants)} variant(s), grid {ns['GRID_DESC']}, {entry})"
        elif self._enabled:
            how = "ordinary path (not resolved yet" + (f": {self.fallback_reason})" if self.fallback_reason else ")")
        else:
            how = f"ordinary path ({self.fallback_reason})"
        return f"{self.name}[grid={g}] dynamic={self.dynamic_names}: {how}"

    def __repr__(self):
        return f"<Launcher {self.describe()}>"

    # -- ordinary path --------------------------------------------------------
    def _static_reason(self) -> str | None:
        import os
        k = self.kernel
        for _ in range(8):
            if type(k).__name__ == "InterpretedFunction":
                return "interpreter mode (TRITON_INTERPRET=1)"
            k = getattr(k, "fn", None)
            if k is None:
                break
        if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            return "interpreter mode (TRITON_INTERPRET=1)"
        try:
            import torch
            if not torch.cuda.is_available():
                return "no CUDA device"
        except Exception as e:
            return f"torch unavailable: {e!r}"
        return None

    def _disable(self, reason: str) -> None:
        self._enabled = False
        self.fallback_reason = reason
        # Expected set-ups (interpreter, no GPU) are info; anything else means lost speed.
        expected = reason.startswith(("interpreter", "no CUDA"))
        _log_once(f"minidynamo launcher for {self.name}: ordinary path: {reason}",
                  logging.INFO if expected else logging.WARNING)

    def _ordinary(self, *values):
        self.ordinary_calls += 1
        kw = dict(self.constant_kwargs)
        kw.update(zip(self.dynamic_names, values))
        if not self._enabled or self._resolves >= _MAX_RESOLVES:
            self._launch(self.grid, kw)
            return None
        with _RESOLVE_LOCK:  # one resolution at a time: Triton's compile/load path is shared state
            return self._launch_and_resolve(kw, values)

    def _launch_and_resolve(self, kw: dict, values: tuple):
        rec = _GridRecorder(self.grid)
        ret = self._launch(rec, kw)
        self._resolves += 1
        try:
            self._add_variant(self._resolve(ret, rec, kw, values))
        except _Decline as e:
            if e.permanent:
                self._disable(str(e))
            else:
                self.fallback_reason = str(e)
        except Exception as e:  # never let resolution break a launch that already happened
            self._disable(f"could not resolve compiled kernel: {e!r}")
        return None

    def _launch(self, grid, kw: dict):
        # By keyword, as Triton's own checks expect (e.g. "Conflicting meta-parameters");
        # but a kernel parameter named `grid` or `warmup` would collide with Triton's launch
        # keywords, so then the leading parameters go positionally.
        if "grid" not in kw and "warmup" not in kw:
            return self.kernel[grid](**kw)
        kw = dict(kw)
        pos = []
        for name in self._param_order:
            if name not in kw:
                break
            pos.append(kw.pop(name))
        return self.kernel[grid](*pos, **kw)

    # -- resolution -------------------------------------------------------------
    def _resolve(self, ret, rec: _GridRecorder, kw: dict, values: tuple) -> dict:
        """Build the namespace of one fast variant from the launch that just ran."""
        P = _probe()
        if P["error"]:
            raise _Decline(P["error"])
        rt = P["RT"]
        ns: dict = {"__builtins__": __builtins__, "MISSING": _MISSING, "SKEY": _scalar_key,
                    "NORM": _norm_grid, "RT": rt, "GETDEV": P["GETDEV"], "STREAM": P["STREAM"]}
        if getattr(rt, "add_stages_inspection_hook", None) is not None:
            raise _Decline("add_stages_inspection_hook is set", permanent=False)
        for i, h in enumerate(("launch_enter_hook", "launch_exit_hook")):
            h0 = getattr(rt, h)
            if h0 is not None and (not hasattr(h0, "calls") or h0.calls):
                raise _Decline("launch hooks are set", permanent=False)
            ns[f"H{i}"] = h0
        ns["DBG"] = getattr(rt, "debug", None)
        dyn_scalars = [n for n, v in zip(self.dynamic_names, values) if not _is_tensor(v)]
        if any(_is_tensor(v) for v in self.constant_kwargs.values()):
            raise _Decline("a tensor passed as a constant argument")

        # Walk the decorator stack, replaying what each layer adds to the kwargs, so we
        # can name the autotuner cache entry the launch used (checked per call).
        JIT, AT, HEUR = P["JITFunction"], P["Autotuner"], P["Heuristics"]
        k, kw2, tuners = self.kernel, dict(kw), []
        for _ in range(16):
            if isinstance(k, JIT):
                break
            if isinstance(k, AT):
                if any(n in k.keys for n in dyn_scalars):
                    raise _Decline("dynamic scalar is an autotune key")
                cfg = k.best_config
                if getattr(cfg, "pre_hook", None) is not None:
                    raise _Decline("autotune config has a pre_hook", permanent=False)
                if len(k.configs) > 1:
                    args = {n: v for n, v in kw2.items() if n in k.arg_names}
                    key = [args[n] for n in k.keys if n in args]
                    key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
                    key = tuple(key)
                    if k.cache.get(key) is not cfg:
                        raise _Decline("cannot locate the autotuner's cache entry")
                else:
                    key = None
                    if k.configs[0] is not cfg:
                        raise _Decline("autotuner config not found", permanent=False)
                tuners.append((k, k.configs, len(k.configs), key, cfg))
                kw2.update(cfg.all_kwargs())
            elif isinstance(k, HEUR):
                if dyn_scalars:
                    raise _Decline("heuristics with dynamic scalar arguments")
                for name, h in k.values.items():
                    kw2[name] = h(dict(kw2))
            else:
                raise _Decline(f"unsupported kernel wrapper {type(k).__name__}")
            k = k.fn
        else:
            raise _Decline("kernel decorator stack too deep")
        jit = k

        ck = ret.result() if hasattr(ret, "result") else ret  # async compile returns a future
        if getattr(getattr(ck, "src", None), "fn", None) is not jit:
            raise _Decline("ordinary launch did not return this kernel's CompiledKernel")
        run, fn, pm = ck.run, ck.function, ck.packed_metadata  # .run initialises handles
        if fn is None:
            raise _Decline("compiled kernel has no function handle")

        meta, names = rec.meta, list(jit.arg_names)
        if meta is None or list(meta) != names:
            raise _Decline("grid was not called with the bound arguments")
        for n, v in kw2.items():  # the replay must agree with what Triton really bound
            if n in meta and meta[n] is not v and (_is_tensor(v) or not meta[n] == v):
                raise _Decline(f"could not reproduce the value of {n!r}", permanent=False)
        params = {p.name: p for p in jit.params}
        dev = ns["DEV"] = P["GETDEV"]()
        pos = [None] * len(names)
        for j, n in enumerate(names):
            pos[j] = f"P{j}"
            if n not in self.dynamic_names:  # dynamic ones are filled per call (and not kept alive)
                ns[f"P{j}"] = meta[n]
        tensors, scalars = [], []
        for i, (n, v) in enumerate(zip(self.dynamic_names, values)):
            if n not in params:
                raise _Decline(f"dynamic argument {n!r} is not a kernel parameter")
            if params[n].is_constexpr:
                raise _Decline(f"dynamic argument {n!r} is a constexpr")
            if meta[n] is not v:
                raise _Decline(f"dynamic argument {n!r} was rewritten by a decorator")
            j = names.index(n)
            if _is_tensor(v):
                if v.get_device() != dev:
                    raise _Decline(f"tensor {n!r} is not on the current device", permanent=False)
                ns[f"T{i}"] = v.dtype
                tensors.append((i, v.data_ptr() % 16 == 0))
                pos[j] = f"p{i}"
            elif type(v) in (int, float, bool) or v is None:
                ns[f"K{i}"] = _scalar_key(v)
                scalars.append((i, n))
                pos[j] = f"a{i}"
            else:
                raise _Decline(f"dynamic argument {n!r} has unsupported type {type(v).__name__}")
        for t, (at, cfgs, ln, key, cfg) in enumerate(tuners):
            ns.update({f"AT{t}": at, f"C{t}": cfgs, f"L{t}": ln, f"KEY{t}": key, f"CFG{t}": cfg})
        gvals = list(getattr(jit, "used_global_vals", {}).items())
        for g, ((gname, _), (gval, gdict)) in enumerate(gvals):
            ns.update({f"G{g}": gdict, f"N{g}": gname, f"V{g}": gval})
        ns["PRE"] = getattr(jit, "pre_run_hooks", ())
        ns.update(RUN=run, FN=fn, PM=pm)

        # The launch call: the C entry itself where its convention is recognised.
        render, why = _direct_call(run)
        if render is None:
            _log_once(f"minidynamo launcher for {self.name}: through CompiledKernel.run ({why})")
            ns["DIRECT"] = why

            def render(call_args, bind):
                return f"RUN({', '.join(call_args)})"
        else:
            ns["DIRECT"] = None

        def bind(value):
            name = f"D{len(ns)}"
            ns[name] = value
            return name
        ns["CALL"] = lambda grid, stream, args, bind=bind: render(
            [*grid, stream, "FN", "PM", "None", "None", "None", *args], bind)

        # What the caller of a variant must check per call. Global state: once per call
        # of a graph with several launches; per tensor: alignment (device and dtype are
        # pinned by the guards of a graph that calls it).
        # With one visible GPU the current device cannot be another one.
        multi_gpu = P["GETDEV"] is not None and _device_count() > 1
        conds = ["GETDEV() != DEV" if multi_gpu else None, "PRE",
                 "RT.debug is not DBG" if ns["DBG"] is not None else None]
        for h, attr in enumerate(("launch_enter_hook", "launch_exit_hook")):
            conds.append(f"RT.{attr} is not None" if ns[f"H{h}"] is None
                         else f"RT.{attr} is not H{h} or H{h}.calls")
        for t, (_, _, _, key, _) in enumerate(tuners):
            conds += [f"AT{t}.configs is not C{t}", f"len(C{t}) != L{t}",
                      f"C{t}[0] is not CFG{t}" if key is None else f"AT{t}.cache.get(KEY{t}) is not CFG{t}"]
        conds += [f"G{g}.get(N{g}, MISSING) != V{g}" for g in range(len(gvals))]
        ns["GLOBAL_CONDS"] = [c for c in conds if c]
        ns["TENSORS"], ns["SCALARS"], ns["POS"] = tensors, scalars, pos

        # The grid: constant unless it is callable and a dynamic scalar may feed it.
        if callable(self.grid) and scalars:
            dyn = set(self.dynamic_names)
            ns["GRIDFN"], ns["META"] = self.grid, {n: (None if n in dyn else v) for n, v in meta.items()}
            ns["GRID_DESC"] = "per call"
            ns["GRID"] = None
        else:
            gx, gy, gz = _norm_grid(rec.result)
            ns.update(GX=gx, GY=gy, GZ=gz, GRID_DESC=(gx, gy, gz), GRID=("GX", "GY", "GZ"))
        ns["SOURCE"] = self._variant_source(ns, len(values))
        return ns

    def _variant_source(self, ns: dict, n_values: int) -> str:
        """The per-call function of one variant: checks first, then one launch call."""
        tensors, scalars = ns["TENSORS"], ns["SCALARS"]
        a = ", ".join(f"a{i}" for i in range(n_values))
        slow = f"        return SLOW(_s, {a})"
        pre = list(ns["GLOBAL_CONDS"])
        for i, _ in tensors:
            pre += [f"a{i}.get_device() != DEV", f"a{i}.dtype is not T{i}"]
        body = [f"def fast(_s, {a}):", f"    if {' or '.join(pre)}:", slow]
        body += [f"    p{i} = a{i}.data_ptr()" for i, _ in tensors]
        post = []
        aligned = [f"p{i}" for i, al in tensors if al]
        if aligned:
            post.append(f"({' | '.join(aligned)}) & 15")
        post += [f"not p{i} & 15" for i, al in tensors if not al]
        post += [f"SKEY(a{i}) != K{i}" for i, _ in scalars]
        if post:
            body += [f"    if {' or '.join(post)}:", slow]
        grid = ns["GRID"]
        if grid is None:
            upd = ", ".join(f"{n!r}: a{i}" for i, n in enumerate(self.dynamic_names))
            body.append(f"    gx, gy, gz = NORM(GRIDFN({{**META, {upd}}}))")
            grid = ("gx", "gy", "gz")
        body.append("    " + ns["CALL"](grid, "STREAM(DEV)", ns["POS"]))
        return "\n".join(body) + "\n"

    def _add_variant(self, ns: dict) -> None:
        exec(compile(ns["SOURCE"], f"<minidynamo launcher {self.name}>", "exec"), ns)
        self._variants.insert(0, (ns["fast"], ns))
        del self._variants[_MAX_VARIANTS:]
        # Chain: each variant's mismatch falls through to the next, the last to the
        # ordinary path (rewired through the namespace the function reads SLOW from).
        for (f, n), nxt in zip(self._variants, self._variants[1:] + [(Launcher._ordinary, None)]):
            n["SLOW"] = nxt[0]
        type(self).__call__ = self._variants[0][0]
        self.fallback_reason = None


def make_launcher(kernel, grid, constant_kwargs: dict, dynamic_names: tuple) -> Launcher:
    """Launcher for ``kernel[grid](**constant_kwargs, **dict(zip(dynamic_names, values)))``."""
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"not a Triton kernel: {kernel!r}")
    return Launcher(kernel, grid, constant_kwargs, tuple(dynamic_names))
