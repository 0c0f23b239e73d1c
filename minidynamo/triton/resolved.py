"""What a launcher resolved from one ordinary launch, as data: enough to replay the launch
by calling the compiled kernel's entry, and the checks under which that replay is the
launch Triton would make. launch_code.py renders it as code, for the launcher's own
variants and for a graph's launch program alike.

Values in the records: "dynamic values" are what the caller passes per call, in the
launcher's `dynamic_names` order; a `ValueRef` names one of them or a constant.
"""
from __future__ import annotations

from dataclasses import dataclass

TENSOR, SCALAR, CONSTANT = "tensor", "scalar", "constant"


@dataclass(frozen=True)
class ValueRef:
    """A dynamic value (`index`) or a constant (`value`)."""

    index: int | None = None
    value: object = None

    @property
    def is_dynamic(self) -> bool:
        return self.index is not None


@dataclass(frozen=True)
class ScalarSpec:
    """What Triton specialises a non-constexpr scalar argument on; None: not on that."""

    kind: type                       # int, float, bool, type(None)
    equals_one: bool | None = None   # int == 1 (then a constexpr)
    divisible_by_16: bool | None = None
    width: str | None = None         # int: "i32", "i64" or "u64"


@dataclass(frozen=True, eq=False)
class ParamSlot:
    """One kernel parameter, in signature order (the entry's argument order)."""

    name: str
    role: str                        # TENSOR, SCALAR (dynamic values) or CONSTANT
    value_index: int | None = None   # TENSOR, SCALAR: its dynamic value
    value: object = None             # CONSTANT: what Triton bound (constexprs, config and heuristic values too)
    dtype: object = None             # TENSOR
    aligned: bool | None = None      # TENSOR: data_ptr % 16 == 0 when resolved; None: Triton does not check
    spec: ScalarSpec | None = None   # SCALAR


@dataclass(frozen=True, eq=False)
class TunerChoice:
    """An autotuner's choice: it holds while the config list is unchanged and the cache maps
    the key of this call to the same config (one config: no cache, the first one)."""

    tuner: object
    configs: list                    # the config list object when resolved
    n_configs: int
    config: object
    config_index: int | None         # the config's entry in a per-call grid (configs order)
    key: tuple | None                # the cache key when resolved; None with one config
    key_parts: tuple = ()            # ValueRefs: the key rebuilt per call

    @property
    def key_is_constant(self) -> bool:
        return not any(p.is_dynamic for p in self.key_parts)


@dataclass(frozen=True, eq=False)
class HeuristicCheck:
    """A ``@triton.heuristics`` value recomputed per call: ``fn(inputs)`` must still equal
    `value` (the constexpr the kernel was compiled for)."""

    name: str
    fn: object
    value: object
    inputs: tuple                    # (parameter name, ValueRef): the dict Triton calls fn with


@dataclass(frozen=True, eq=False)
class LaunchState:
    """Global state the replay depends on, checked once per call (once per program call)."""

    device: int
    check_device: bool               # more than one GPU visible: the current one may change
    get_device: object
    get_stream: object               # device -> current stream
    runtime: object                  # where Triton keeps the launch hooks and debug flag
    enter_hook: object
    exit_hook: object
    debug: object                    # the debug flag when resolved; None: not checked
    pre_run_hooks: list              # the JIT function's list: any hook takes the ordinary path
    globals_read: tuple = ()         # (globals dict, name, value) the kernel read
    tuners: tuple = ()               # TunerChoice, outermost first


@dataclass(frozen=True, eq=False)
class ResolvedLaunch:
    """One variant: the compiled kernel, how to call it, and what must hold per call."""

    kernel_name: str
    dynamic_names: tuple
    params: tuple                    # ParamSlot per kernel parameter
    function: object                 # the compiled kernel's function handle
    packed_metadata: object
    entry: object                    # EntryCall
    state: LaunchState
    grid: tuple | None = None        # a fixed (x, y, z)
    grid_fn: object = None           # pinned mode: a grid callable fed the per-call scalars
    grid_meta: dict | None = None    # ... with these other arguments
    grid_per_call: bool = False      # the caller passes the grid
    config_index: int | None = None  # per-call grid of an autotuned kernel: the entry to use
    per_call_checks: tuple = ()      # HeuristicCheck / TunerChoice (dynamic key), in layer order

    @property
    def tensors(self) -> list:
        return [p for p in self.params if p.role == TENSOR]

    @property
    def scalars(self) -> list:
        return [p for p in self.params if p.role == SCALAR]

    def grid_description(self):
        if self.grid_per_call:
            return "per call" + ("" if self.config_index is None else f" (config entry {self.config_index})")
        return "per call (callable)" if self.grid is None else self.grid

    def same_replay(self, other: ResolvedLaunch) -> bool:
        """Whether `other` replays the same compiled kernel under the same checks."""
        def slots(r):
            return [(p.name, p.role, p.value_index, p.dtype, p.aligned, p.spec,
                     p.value if p.role == CONSTANT else None) for p in r.params]
        try:
            return (self.function == other.function and slots(self) == slots(other)
                    and self.grid == other.grid and self.config_index == other.config_index
                    and self.grid_fn is other.grid_fn and self.state.device == other.state.device
                    and _choices(self) == _choices(other)
                    and [(h.name, h.value) for h in self.per_call_checks if isinstance(h, HeuristicCheck)]
                    == [(h.name, h.value) for h in other.per_call_checks if isinstance(h, HeuristicCheck)])
        except Exception:  # a constant without a plain ==: not the same
            return False


def _choices(r: ResolvedLaunch) -> list:
    return [(t.tuner, t.config, t.key if t.key_is_constant else None) for t in r.state.tuners]
