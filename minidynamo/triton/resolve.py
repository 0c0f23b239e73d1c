"""Resolution: from one ordinary launch that just ran, the record (resolved.py) of what it
launched and under which checks a replay is the same launch.

The Triton internals this needs are feature-detected once per process (`internals()`):
``JITFunction.run``'s call of ``CompiledKernel.run`` (same in Triton 3.6 and 3.9), where
the launch hooks live, and what Triton specialises a scalar or a pointer on (checked
against its own specialisation function where it can be found).
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from .entry import entry_call
from .kernels import kernel_chain
from .launch_code import normalise_grid
from .resolved import (CONSTANT, SCALAR, TENSOR, HeuristicCheck, LaunchState, ParamSlot, ResolvedLaunch,
                       ScalarSpec, TunerChoice, ValueRef)


class Decline(Exception):
    """Replay not possible; `permanent` ones stop further resolve attempts."""

    def __init__(self, reason: str, permanent: bool = True):
        super().__init__(reason)
        self.permanent = permanent


# Triton's own call, in 3.x: kernel.run(grid_0, grid_1, grid_2, stream, kernel.function,
# kernel.packed_metadata, launch_metadata, <enter hook>, <exit hook>, *bound_args.values())
_RUN_ARGS = ("grid_0", "grid_1", "grid_2", "stream", "kernel.function", "kernel.packed_metadata",
             "launch_metadata")


def _launches_as_expected(src: str) -> bool:
    """Whether JITFunction.run's source (`src`) makes Triton's own call above, read from
    its syntax tree."""
    for node in ast.walk(ast.parse(textwrap.dedent(src))):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "kernel.run") or node.keywords:
            continue
        args = [ast.unparse(a) for a in node.args]
        if (len(args) == 10 and tuple(args[:7]) == _RUN_ARGS and args[7].endswith("launch_enter_hook")
                and args[8].endswith("launch_exit_hook") and args[9] == "*bound_args.values()"):
            return True
    return False


@dataclass
class Internals:
    error: str | None = None
    JITFunction: object = None
    Autotuner: object = None
    Heuristics: object = None
    runtime: object = None        # knobs.runtime (or CompiledKernel before knobs)
    get_stream: object = None
    get_device: object = None
    specialisation_checked: bool = False  # the scalar model matched Triton's own function


_internals: list = []


def internals() -> Internals:
    if not _internals:
        _internals.append(_probe())
    return _internals[0]


def _probe() -> Internals:
    info = Internals()
    try:
        import torch
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.driver import driver
        from triton.runtime.jit import JITFunction
        info.JITFunction, info.Autotuner, info.Heuristics = JITFunction, Autotuner, Heuristics
        src = inspect.getsource(JITFunction.run)
        if not _launches_as_expected(src):
            raise Decline("unrecognised CompiledKernel.run call in JITFunction.run")
        if "get_current_stream(device)" not in src:
            raise Decline("JITFunction.run does not take the stream from the driver")
        try:
            from triton import knobs
            rt = knobs.runtime
            if not hasattr(rt, "launch_enter_hook"):
                raise ImportError
        except ImportError:  # pre-knobs Triton kept the hooks on CompiledKernel
            from triton.compiler.compiler import CompiledKernel as rt
            if not hasattr(rt, "launch_enter_hook"):
                raise Decline("cannot find launch hooks") from None
        info.runtime = rt
        info.get_stream = driver.active.get_current_stream
        # torch.cuda.current_device() is what Triton uses; the raw getter skips _lazy_init.
        info.get_device = getattr(torch._C, "_cuda_getDevice", None) or driver.active.get_current_device
        info.specialisation_checked = _check_specialisation_model()
    except Decline as e:
        info.error = str(e)
    except Exception as e:  # any drift in internals: ordinary path, correct but slower
        info.error = f"triton internals not recognised: {e!r}"
    return info


# ---------------------------------------------------------------- specialisation
def triton_int_key(v: int, specialize: bool, align: bool) -> tuple:
    """What Triton 3.x makes of an int argument: ('constexpr', 1) or (width, attribute)."""
    if specialize and v == 1:
        return ("constexpr", 1)
    width = _width(v)
    if not specialize:
        return (width, None)
    return (width, "D" if align and v % 16 == 0 else "")


def _width(v: int) -> str:
    if -2**31 <= v < 2**31:
        return "i32"
    return "i64" if -2**63 <= v < 2**63 else "u64"


def _check_specialisation_model() -> bool:
    """True when Triton's specialisation function is found and agrees with the model above
    (then do_not_specialize is honoured precisely); False when it is not found (then every
    int is checked for all of ==1, %16 and width). A disagreement declines."""
    try:
        from triton._C.libtriton import native_specialize_impl as spec
        from triton.backends.compiler import BaseBackend
    except ImportError:
        return False
    samples = [0, 1, 2, 15, 16, 17, 32, -16, -1, 2**31 - 16, 2**31, 2**31 + 1, 2**40, -2**31, -2**31 - 16,
               2**63 - 1, 2**63, 2**64 - 16]
    for s in (True, False):
        for a in (True, False):
            for v in samples:
                try:
                    got = tuple(spec(BaseBackend, v, False, s, a))
                except Exception:  # another signature: not checkable here
                    return False
                if got != triton_int_key(v, s, a):
                    raise Decline(f"Triton specialises int {v} as {got}, not as expected")
    return True


def scalar_spec(v, param, exact: bool) -> ScalarSpec:
    t = type(v)
    if t is not int:
        return ScalarSpec(t)
    specialize = not param.do_not_specialize or not exact
    align = not getattr(param, "do_not_specialize_on_alignment", False) or not exact
    return ScalarSpec(int, v == 1 if specialize else None,
                      v % 16 == 0 if specialize and align and v != 1 else None, _width(v))


def _backend_has_own_specialisation(jit, device) -> bool:
    """An AMD backend adds to what a pointer is specialised on: not modelled here."""
    from triton.backends.compiler import BaseBackend
    caches = getattr(jit, "device_caches", {})
    entry = caches.get(device) if hasattr(caches, "get") else None
    for item in entry or ():
        if hasattr(item, "get_tensor_specialization"):
            own = type(item) if not isinstance(item, type) else item
            return (own.get_tensor_specialization is not BaseBackend.get_tensor_specialization
                    or own.get_int_specialization is not BaseBackend.get_int_specialization)
    return False


# ---------------------------------------------------------------- resolution
def _is_tensor(v) -> bool:
    import torch
    return isinstance(v, torch.Tensor)


def config_index(configs_kwargs: list, meta) -> int | None:
    """The first config whose kwargs the bound arguments carry (the grid depends on those
    alone), else None."""
    for i, kwargs in enumerate(configs_kwargs):
        if all(k in meta and meta[k] == v for k, v in kwargs.items()):
            return i
    return None


def resolve(launcher, ret, recorder, kw: dict, values: tuple) -> ResolvedLaunch:
    """The record of the launch that just ran (`ret`: what ``kernel[grid](...)`` returned;
    `recorder`: the grid stand-in that saw Triton's bound arguments)."""
    P = internals()
    if P.error:
        raise Decline(P.error)
    rt = P.runtime
    if any(getattr(k, "pre_run_hooks", None) for k in kernel_chain(launcher.kernel, function=True)):
        raise Decline("the kernel has pre-run hooks", permanent=False)
    if getattr(rt, "add_stages_inspection_hook", None) is not None:
        raise Decline("add_stages_inspection_hook is set", permanent=False)
    hooks = []
    for h in ("launch_enter_hook", "launch_exit_hook"):
        h0 = getattr(rt, h)
        if h0 is not None and (not hasattr(h0, "calls") or h0.calls):
            raise Decline("launch hooks are set", permanent=False)
        hooks.append(h0)
    per_call = launcher.grid_per_call
    dyn_index = {n: i for i, n in enumerate(launcher.dynamic_names)}
    dyn_scalars = {n for n, v in zip(launcher.dynamic_names, values) if not _is_tensor(v)}
    if any(_is_tensor(v) for v in launcher.constant_kwargs.values()):
        raise Decline("a tensor passed as a constant argument")

    def ref(name, value):
        i = dyn_index.get(name)
        if i is not None and values[i] is value:
            return ValueRef(index=i)
        return ValueRef(value=value)

    # Walk the decorator stack, replaying what each layer adds to the kwargs, so the replay
    # can name the autotuner's cache entry and recompute heuristics per call.
    # The chain runs on to the Python function, so a layer that is neither (an
    # InterpretedFunction, a library's wrapper, the bare function) declines below.
    kw2, tuners, checks = dict(kw), [], []
    for k in kernel_chain(launcher.kernel, function=True):
        if isinstance(k, P.JITFunction):
            break
        if isinstance(k, P.Autotuner):
            checks.append(_tuner_choice(launcher, k, kw2, ref))
            tuners.append(checks[-1])
            kw2.update(checks[-1].config.all_kwargs())
        elif isinstance(k, P.Heuristics):
            # Shapes may change per call in per-call mode, scalars in either: recompute then.
            recompute = per_call or dyn_scalars
            for name, h in k.values.items():
                value = h(dict(kw2))
                if recompute:
                    checks.append(HeuristicCheck(name, h, value, tuple((n, ref(n, v)) for n, v in kw2.items())))
                kw2[name] = value
        else:
            raise Decline(f"unsupported kernel wrapper {type(k).__name__}")
    else:
        raise Decline("kernel decorator stack too deep")
    jit = k

    ck = ret.result() if hasattr(ret, "result") else ret  # async compile returns a future
    if getattr(getattr(ck, "src", None), "fn", None) is not jit:
        raise Decline("ordinary launch did not return this kernel's CompiledKernel")
    run, fn, pm = ck.run, ck.function, ck.packed_metadata  # .run initialises handles
    if fn is None:
        raise Decline("compiled kernel has no function handle")

    meta, names = recorder.meta, list(jit.arg_names)
    if meta is None or list(meta) != names:
        raise Decline("grid was not called with the bound arguments")
    for n, v in kw2.items():  # the replay must agree with what Triton really bound
        if n in meta and meta[n] is not v and (_is_tensor(v) or not meta[n] == v):
            raise Decline(f"could not reproduce the value of {n!r}", permanent=False)
    dev = P.get_device()
    if _backend_has_own_specialisation(jit, dev):
        raise Decline("the backend specialises arguments beyond alignment and int values")
    params = {p.name: p for p in jit.params}
    slots = []
    for n in names:
        if n not in dyn_index:
            slots.append(ParamSlot(n, CONSTANT, value=meta[n]))
            continue
        i, v, p = dyn_index[n], values[dyn_index[n]], params[n]
        if p.is_constexpr:
            raise Decline(f"dynamic argument {n!r} is a constexpr")
        if meta[n] is not v:
            raise Decline(f"dynamic argument {n!r} was rewritten by a decorator")
        if _is_tensor(v):
            if v.get_device() != dev:
                raise Decline(f"tensor {n!r} is not on the current device", permanent=False)
            align = not (p.do_not_specialize or getattr(p, "do_not_specialize_on_alignment", False)) \
                or not P.specialisation_checked
            slots.append(ParamSlot(n, TENSOR, i, dtype=v.dtype, aligned=v.data_ptr() % 16 == 0 if align else None))
        elif type(v) in (int, float, bool) or v is None:
            slots.append(ParamSlot(n, SCALAR, i, spec=scalar_spec(v, p, P.specialisation_checked)))
        else:
            raise Decline(f"dynamic argument {n!r} has unsupported type {type(v).__name__}")
    for n in dyn_index:
        if n not in params:
            raise Decline(f"dynamic argument {n!r} is not a kernel parameter")

    entry = entry_call(run)
    if not entry.is_c_entry:
        launcher.note_once(f"through CompiledKernel.run ({entry.why_not_c_entry})")
    gvals = tuple((gdict, gname, gval) for (gname, _), (gval, gdict) in getattr(jit, "used_global_vals", {}).items())
    state = LaunchState(
        device=dev, check_device=P.get_device is not None and launcher.device_count() > 1,
        get_device=P.get_device, get_stream=P.get_stream, runtime=rt, enter_hook=hooks[0],
        exit_hook=hooks[1], debug=getattr(rt, "debug", None), pre_run_hooks=getattr(jit, "pre_run_hooks", ()),
        globals_read=gvals, tuners=tuple(tuners))
    per_call_checks = tuple(c for c in checks if isinstance(c, HeuristicCheck) or not c.key_is_constant)
    common = dict(kernel_name=launcher.name, dynamic_names=launcher.dynamic_names, params=tuple(slots),
                  function=fn, packed_metadata=pm, entry=entry, state=state, per_call_checks=per_call_checks)
    if per_call:
        index = tuners[0].config_index if tuners else None
        return ResolvedLaunch(**common, grid_per_call=True, config_index=index)
    if callable(launcher.grid) and dyn_scalars:  # the grid may read a scalar: computed per call
        grid_meta = {n: (None if n in dyn_index else v) for n, v in meta.items()}
        return ResolvedLaunch(**common, grid_fn=launcher.grid, grid_meta=grid_meta)
    return ResolvedLaunch(**common, grid=normalise_grid(recorder.result))


def _tuner_choice(launcher, k, kw2: dict, ref) -> TunerChoice:
    cfg = k.best_config
    if getattr(cfg, "pre_hook", None) is not None:
        raise Decline("autotune config has a pre_hook", permanent=False)
    index = None
    if launcher.grid_per_call:
        index = config_index(launcher.config_kwargs, cfg.kwargs)
        if index is None:
            raise Decline("the chosen config is not among the configs the grid was given for", permanent=False)
    if len(k.configs) <= 1:
        if not k.configs or k.configs[0] is not cfg:
            raise Decline("autotuner config not found", permanent=False)
        return TunerChoice(k, k.configs, len(k.configs), cfg, index, None)
    # Triton's key: the key arguments' values, then the dtype of every argument with one.
    args = {n: v for n, v in kw2.items() if n in k.arg_names}
    parts = []
    for n in k.keys:
        if n in args:
            if _is_tensor(args[n]):
                raise Decline(f"autotune key {n!r} is a tensor")
            parts.append(ref(n, args[n]))
    parts += [ValueRef(value=str(v.dtype)) for v in args.values() if hasattr(v, "dtype")]
    key = tuple(args[n] for n in k.keys if n in args) + tuple(str(v.dtype) for v in args.values()
                                                              if hasattr(v, "dtype"))
    if k.cache.get(key) is not cfg:
        raise Decline("cannot locate the autotuner's cache entry")
    return TunerChoice(k, k.configs, len(k.configs), cfg, index, key, tuple(parts))
