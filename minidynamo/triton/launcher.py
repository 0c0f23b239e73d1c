"""Fast replay of one captured Triton kernel launch.

``make_launcher(kernel, grid, constant_kwargs, dynamic_names)`` returns a callable
``launcher(*values)`` that behaves exactly like ``kernel[grid](**constant_kwargs,
**dict(zip(dynamic_names, values)))`` (and returns None), but costs less host time on a
GPU. With ``grid_per_call=True`` it is called ``launcher(grid, *values)``: the grid
comes with each call — a 3-tuple of ints, or for an autotuned kernel a tuple of them,
one per config in the autotuner's `configs` order (the one of the config it picks is
used) — and nothing derived from shapes or int values is assumed to stay.

* The first call takes the ordinary path, so the autotuner benchmarks, heuristics
  run and the kernel compiles. A grid recorder captures the bound arguments (the
  ``meta`` Triton hands to a grid callable) and the grid, and resolve.py turns the
  ``CompiledKernel`` that the launch returned into a `ResolvedLaunch` record.
* Later calls run a function generated from that record (launch_code.py, a
  "variant") that re-checks what Triton specialises on and the caller does not pin
  (current device, each tensor's device, dtype and 16-byte alignment, scalars'
  specialisation, autotuner choices and keys, heuristics where shapes or scalars may
  change, launch hooks, globals the kernel read) and then calls the compiled kernel's
  C entry (or ``CompiledKernel.run``, entry.py) with raw data pointers.
* Any mismatch falls through to older variants, then to the ordinary path, which may
  resolve one more variant (at most ``_MAX_VARIANTS`` live). The newest variant is
  installed as ``__call__`` of a per-launcher subclass, so a call costs one Python
  frame on top of the launch entry.

If the Triton internals are not recognised, or under ``TRITON_INTERPRET=1``, every
call takes the ordinary path; the reason is logged once and kept in ``fallback_reason``.

Pinned mode (the default) assumes the caller's guards pin tensor shapes and strides (a
callable grid or heuristic may read them). Both modes assume the identity of the kernel
object and Triton compile knobs read from the environment (``TRITON_DEBUG`` is
re-checked since it is a plain attribute).
"""
from __future__ import annotations

import inspect
import logging
import threading

from .kernels import kernel_chain, kernel_name
from .launch_code import variant_source
from .resolve import Decline, config_index, resolve
from .resolved import ResolvedLaunch

log = logging.getLogger("minidynamo.launcher")

_MAX_VARIANTS = 4      # live specialisations per launcher
_MAX_RESOLVES = 16     # stop resolving after this many new variants or declines (thrashing guard)
_MAX_REPEATS = 64      # ... or this many resolutions that found a live variant again
_RESOLVE_LOCK = threading.RLock()
_logged: set = set()


def _log_once(msg: str, level: int = logging.INFO) -> None:
    if msg not in _logged:
        _logged.add(msg)
        log.log(level, msg)


class _GridRecorder:
    """Stands in for the grid for one ordinary launch and keeps the meta (= Triton's
    bound_args, all params in signature order) and the grid of the last call, which is
    the real launch (autotune benchmarking calls come first)."""

    __slots__ = ("grid", "meta", "result")

    def __init__(self, grid):
        self.grid, self.meta, self.result = grid, None, None

    def __call__(self, meta):
        g = self.grid(meta) if callable(self.grid) else self.grid
        self.meta, self.result = dict(meta), g
        return g


class _PerConfigGrid:
    """The grid of an autotuned launch given per call: one per config, picked by the
    config kwargs Triton passes in `meta`."""

    __slots__ = ("configs_kwargs", "grids")

    def __init__(self, configs_kwargs: list, grids):
        self.configs_kwargs, self.grids = configs_kwargs, grids

    def __call__(self, meta):
        i = config_index(self.configs_kwargs, meta)
        if i is None:
            raise RuntimeError(
                "minidynamo: the autotuner chose a config "
                f"{ {k: meta.get(k) for c in self.configs_kwargs for k in c} } that was not among "
                "kernel.configs when the launch was traced")
        return tuple(self.grids[i])


def _param_order(kernel) -> tuple:
    try:
        return tuple(inspect.signature(kernel_chain(kernel, function=True)[-1]).parameters)
    except (TypeError, ValueError):
        return ()


class Launcher:
    """Callable replay of ``kernel[grid](**constant_kwargs, **dynamic)``."""

    def __init__(self, kernel, grid, constant_kwargs: dict, dynamic_names: tuple, grid_per_call: bool = False):
        self.kernel = kernel
        # Triton indexes a grid sequence, but its interpreter only takes tuples: a list
        # grid is normalised so it works in both (same launch either way).
        self.grid = tuple(grid) if type(grid) is list else grid
        self.grid_per_call = grid_per_call
        self.constant_kwargs = dict(constant_kwargs)
        self.dynamic_names = tuple(dynamic_names)
        self.name = kernel_name(kernel)
        self._param_order = _param_order(kernel)
        # Names autotune configs and heuristics set: never passed positionally.
        self._meta_names = {n for k in kernel_chain(kernel, function=True) for n in getattr(k, "values", {})}
        self._meta_names.update(n for k in kernel_chain(kernel, function=True) for c in getattr(k, "configs", ())
                                for n in getattr(c, "kwargs", {}))
        self.config_kwargs = None  # per-call grid of an autotuned kernel: the configs' kwargs, in order
        if grid_per_call:
            tuners = [k for k in kernel_chain(kernel, function=True) if hasattr(k, "configs") and hasattr(k, "cache")]
            if len(tuners) > 1:
                raise ValueError(f"kernel {self.name} has more than one @triton.autotune")
            if tuners:
                self.config_kwargs = [dict(c.kwargs) for c in tuners[0].configs]
        self.fallback_reason: str | None = None
        self.ordinary_calls = 0          # how often the ordinary path ran (for tests/inspection)
        self._variants: list = []        # (generated function, ResolvedLaunch), newest first
        self._resolves = self._repeats = 0
        self._enabled = True
        # A class per launcher, so a variant can be installed as its __call__: calling the
        # instance then runs the generated function directly (no extra *args frame).
        ordinary = Launcher._ordinary_with_grid if grid_per_call else Launcher._ordinary
        self.__class__ = type(Launcher.__name__, (Launcher,), {"__module__": __name__, "__call__": ordinary})
        reason = self._static_reason()
        if reason:
            self._disable(reason)

    # -- public ---------------------------------------------------------------
    def __call__(self, *values):  # replaced per instance (see __init__)
        return self._ordinary(*values)

    @property
    def fast_path(self) -> bool:
        return bool(self._variants)

    @property
    def variants(self) -> list[ResolvedLaunch]:
        """What the live variants replay, newest first."""
        return [r for _, r in self._variants]

    def describe(self) -> str:
        if self.grid_per_call:
            g = "per call" + (" (one per config)" if self.config_kwargs is not None else "")
        else:
            g = "callable" if callable(self.grid) else tuple(self.grid)
        if self._variants:
            r = self._variants[0][1]
            how = (f"fast path ({len(self._variants)} variant(s), grid {r.grid_description()}, "
                   f"{r.entry.describe()})")
        elif self._enabled:
            how = "ordinary path (not resolved yet" + (f": {self.fallback_reason})" if self.fallback_reason else ")")
        else:
            how = f"ordinary path ({self.fallback_reason})"
        return f"{self.name}[grid={g}] dynamic={self.dynamic_names}: {how}"

    def __repr__(self):
        return f"<Launcher {self.describe()}>"

    def note_once(self, what: str) -> None:
        _log_once(f"minidynamo launcher for {self.name}: {what}")

    @staticmethod
    def device_count() -> int:
        import torch
        return torch.cuda.device_count()

    # -- ordinary path --------------------------------------------------------
    def _static_reason(self) -> str | None:
        import os
        if any(type(k).__name__ == "InterpretedFunction" for k in kernel_chain(self.kernel, function=True)):
            return "interpreter mode (TRITON_INTERPRET=1)"
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
        return self._run_ordinary(self.grid, values)

    def _ordinary_with_grid(self, grid, *values):
        if self.config_kwargs is None:
            grid = tuple(grid)
        else:
            if len(grid) != len(self.config_kwargs):
                raise ValueError(f"minidynamo launcher for {self.name}: {len(grid)} grids for "
                                 f"{len(self.config_kwargs)} autotune configs")
            grid = _PerConfigGrid(self.config_kwargs, grid)
        return self._run_ordinary(grid, values)

    def _run_ordinary(self, grid, values: tuple):
        self.ordinary_calls += 1
        kw = dict(self.constant_kwargs)
        kw.update(zip(self.dynamic_names, values))
        pos, rest = self._split(kw)
        if not self._enabled or self._resolves >= _MAX_RESOLVES or self._repeats >= _MAX_REPEATS:
            self.kernel[grid](*pos, **rest)
            return None
        with _RESOLVE_LOCK:  # one resolution at a time: Triton's compile/load path is shared state
            rec = _GridRecorder(grid)
            ret = self.kernel[rec](*pos, **rest)
            # The arguments in the order Triton sees them (an autotuner's key lists dtypes so).
            seen = {**dict(zip(self._param_order, pos)), **rest}
            try:
                self._add_variant(resolve(self, ret, rec, seen, values))
            except Decline as e:
                self._resolves += 1
                if e.permanent:
                    self._disable(str(e))
                else:
                    self.fallback_reason = str(e)
            except Exception as e:  # never let resolution break a launch that already happened
                self._disable(f"could not resolve compiled kernel: {e!r}")
        return None

    def _split(self, kw: dict) -> tuple[list, dict]:
        """(positional, keyword) arguments of the launch: the leading kernel parameters in
        signature order, as a launch is written (an autotuner's prune function and
        performance model see those as `named_args`, and a parameter named `grid` or
        `warmup` cannot clash with Triton's launch keywords), the rest by keyword (a
        config or heuristic value passed anyway meets Triton's own "Conflicting
        meta-parameters" check)."""
        pos = []
        for name in self._param_order:
            if name not in kw or name in self._meta_names:
                break
            pos.append(kw[name])
        if not pos:
            return pos, kw
        rest = dict(kw)
        for name in self._param_order[:len(pos)]:
            del rest[name]
        return pos, rest

    # -- variants ---------------------------------------------------------------
    def _add_variant(self, resolved: ResolvedLaunch) -> None:
        same = next((v for v in self._variants if v[1].same_replay(resolved)), None)
        if same is not None:  # e.g. a new autotune key tuned to the same config: no new code
            self._repeats += 1
            self._variants.remove(same)
            self._variants.insert(0, same)
        else:
            self._resolves += 1
            source, namespace, name = variant_source(resolved, len(self.dynamic_names))
            exec(compile(source, f"<minidynamo launcher {self.name}>", "exec"), namespace)
            fn = namespace[name]
            fn.__source__ = source  # what it runs, for inspection
            self._variants.insert(0, (fn, resolved))
            del self._variants[_MAX_VARIANTS:]
        # Chain: each variant's mismatch falls through to the next, the last to the
        # ordinary path (rewired through the namespace the function reads it from).
        ordinary = Launcher._ordinary_with_grid if self.grid_per_call else Launcher._ordinary
        for (f, _), nxt in zip(self._variants, [v[0] for v in self._variants[1:]] + [ordinary]):
            f.__globals__["next_variant"] = nxt
        type(self).__call__ = self._variants[0][0]
        self.fallback_reason = None


def make_launcher(kernel, grid, constant_kwargs: dict, dynamic_names: tuple, *,
                  grid_per_call: bool = False) -> Launcher:
    """Launcher for ``kernel[grid](**constant_kwargs, **dict(zip(dynamic_names, values)))``,
    called ``launcher(*values)``; with `grid_per_call`, ``launcher(grid, *values)`` (the
    `grid` argument of make_launcher is then not used and may be None)."""
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"not a Triton kernel: {kernel!r}")
    return Launcher(kernel, grid, constant_kwargs, tuple(dynamic_names), grid_per_call)
