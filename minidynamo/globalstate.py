"""Process-wide torch state is an input of every trace.

Grad mode, default dtype, autocast, deterministic algorithms, reduced-precision matmul
flags, torch-function and dispatch modes (a default device is one): ops traced under one
setting may not mean the same under another (`y.requires_grad` differs under no_grad,
`torch.zeros(2).dtype` under another default dtype). The state is snapshotted when a
trace starts; every entry checks it first, in one cheap test (torch's own C check of the
global state where available, plus what that check does not cover), and a failure names
the setting that changed: "grad mode: traced with True, now False".
"""
from __future__ import annotations

import torch

from .guards import Guard
from .sources import Source

# Device types whose autocast state is part of the snapshot (those torch knows of).
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia", "privateuseone")


def _autocast(device: str):
    try:
        return torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)
    except (RuntimeError, TypeError, AttributeError):  # a device type this build lacks
        return None


def _function_modes() -> tuple:
    from torch.overrides import _get_current_function_mode_stack
    return tuple(type(m).__name__ for m in _get_current_function_mode_stack())


def snapshot() -> dict:
    """The state, setting by setting, in readable form (what failures are explained by)."""
    state = {
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "default dtype": torch.get_default_dtype(),
    }
    if hasattr(torch, "get_default_device"):
        with torch._C.DisableTorchFunction():  # it makes a torch.device, which a user's mode would see
            state["default device"] = torch.get_default_device()
    for device in _AUTOCAST_DEVICES:
        found = _autocast(device)
        if found is not None:
            state[f"autocast({device})"] = f"enabled={found[0]}, dtype={found[1]}"
    state["autocast cache"] = torch.is_autocast_cache_enabled()
    state["deterministic algorithms"] = (f"{torch.are_deterministic_algorithms_enabled()}, warn_only="
                                         f"{torch.is_deterministic_algorithms_warn_only_enabled()}")
    matmul = torch.backends.cuda.matmul
    state["TF32 matmul"] = matmul.allow_tf32
    state["fp16 reduced-precision reduction"] = matmul.allow_fp16_reduced_precision_reduction
    state["bf16 reduced-precision reduction"] = matmul.allow_bf16_reduced_precision_reduction
    state["float32 matmul precision"] = torch.get_float32_matmul_precision()
    state["threads"] = torch.get_num_threads()
    state["torch function"] = torch._C._is_torch_function_enabled()
    if hasattr(torch._C, "_is_torch_function_all_disabled"):
        state["torch function all disabled"] = torch._C._is_torch_function_all_disabled()
    state["torch function modes"] = _function_modes()
    state["dispatch modes"] = torch._C._len_torch_dispatch_stack()
    return state


def _c_guard():
    """torch's C check of the global state (what torch.compile's entries start with):
    grad mode, default dtype, autocast of every device type, deterministic algorithms,
    matmul precision flags, threads, torch function. None where it is missing."""
    try:
        from torch._C._dynamo.guards import GlobalStateGuard
        guard = GlobalStateGuard()
        return guard if guard.check() is True else None
    except Exception:  # an older or newer torch without it: the Python snapshot checks
        return None


class GlobalStateSource(Source):
    """The snapshot taken now: what a failing GLOBAL_STATE guard is compared with."""

    def expr(self, ns):
        return f"{ns.bind(snapshot, 'global_state')}()"

    def name(self, naming=None):
        return "global torch state"

    def __eq__(self, other):
        return isinstance(other, GlobalStateSource)

    def __hash__(self):
        return hash(GlobalStateSource)


class GlobalState:
    """The state one trace ran under and the expression that checks it."""

    def __init__(self):
        self.expected = snapshot()
        self.c_guard = _c_guard()
        # One bound method, so every rendering of the check binds the same name.
        self.c_check = self.c_guard.check if self.c_guard is not None else None
        self.modes = (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())
        # Raw values of what the snapshot shows as words: the condition is rendered from
        # these (rendered later, e.g. to explain a failure, the live state has moved on).
        self.autocast = {d: found for d in _AUTOCAST_DEVICES for found in [_autocast(d)] if found is not None}
        self.deterministic = (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())

    def guard(self) -> Guard:
        return Guard("GLOBAL_STATE", GlobalStateSource(), self, {})

    def code(self, ns) -> str:
        """The state as a readable Python condition (what explain() and failures show)."""
        t = ns.bind(torch, "torch")
        e = self.expected
        parts = [f"{t}.is_grad_enabled() is {e['grad mode']!r}",
                 f"{t}.is_inference_mode_enabled() is {e['inference mode']!r}",
                 f"{t}.get_default_dtype() is {_dtype(t, e['default dtype'])}"]
        for device, found in self.autocast.items():
            if device in ("cpu", "cuda") or found[0]:
                parts.append(f"{t}.is_autocast_enabled({device!r}) is {found[0]!r}")
                parts.append(f"{t}.get_autocast_dtype({device!r}) is {_dtype(t, found[1])}")
        matmul = f"{t}.backends.cuda.matmul"
        parts += [f"{t}.are_deterministic_algorithms_enabled() is {self.deterministic[0]!r}",
                  f"{t}.is_deterministic_algorithms_warn_only_enabled() is {self.deterministic[1]!r}",
                  f"{matmul}.allow_tf32 is {e['TF32 matmul']!r}",
                  f"{matmul}.allow_fp16_reduced_precision_reduction is {e['fp16 reduced-precision reduction']!r}",
                  f"{matmul}.allow_bf16_reduced_precision_reduction is {e['bf16 reduced-precision reduction']!r}",
                  f"{t}.get_float32_matmul_precision() == {e['float32 matmul precision']!r}",
                  f"{t}.get_num_threads() == {e['threads']!r}",
                  f"{t}._C._is_torch_function_enabled() is {e['torch function']!r}",
                  f"{t}._C._len_torch_function_stack() == {self.modes[0]}",
                  f"{t}._C._len_torch_dispatch_stack() == {self.modes[1]}"]
        return " and ".join(parts)

    def check_code(self, ns) -> str:
        """What the entry runs: torch's C check of the global state plus what it leaves out
        (inference mode, and the mode stacks: a default device, a TorchFunctionMode, a
        TorchDispatchMode); the readable condition where the C check is missing.

        Where the C check fails, the entry still holds if every setting reads as it did
        (`same_state`, the snapshot compared): the C check compares raw precision settings,
        and torch 2.15 sets `fp32_precision` to 'ieee' (not back to 'none') when
        `allow_tf32` is set back to False, a state that computes as the one traced."""
        if self.c_check is None:
            return self.code(ns)
        inference = ns.bind(torch.is_inference_mode_enabled, "is_inference_mode_enabled")
        tf_len = ns.bind(torch._C._len_torch_function_stack, "len_torch_function_stack")
        d_len = ns.bind(torch._C._len_torch_dispatch_stack, "len_torch_dispatch_stack")
        same = ns.bind(self.same_state, "same_global_state")
        return (f"(({ns.bind(self.c_check, 'global_state_check')}() and "
                f"{inference}() is {self.expected['inference mode']!r} and "
                f"{tf_len}() == {self.modes[0]} and {d_len}() == {self.modes[1]}) or {same}())")

    def same_state(self) -> bool:
        return snapshot() == self.expected

    def mismatch(self, now: dict) -> tuple[str, str, str]:
        changed = [(k, v, now.get(k)) for k, v in self.expected.items() if now.get(k) != v]
        if not changed:
            why = self.c_guard.reason().strip() if self.c_guard is not None else ""
            what = why or "a setting outside the snapshot"
            return f"global torch state changed: {what}", "the traced state", what
        words = "; ".join(f"{k}: traced with {_show(old)}, now {_show(new)}" for k, old, new in changed)
        expected = ", ".join(f"{k}={_show(old)}" for k, old, _ in changed)
        actual = ", ".join(f"{k}={_show(new)}" for k, _, new in changed)
        return f"global torch state changed: {words}", expected, actual

    def describe(self) -> str:
        """The settings people change most, in a few words."""
        e = self.expected
        words = [f"grad mode={e['grad mode']}", f"default dtype={_show(e['default dtype'])}"]
        if "default device" in e:
            words.append(f"default device={e['default device']}")
        on = [f"{device}: {_show(found[1])}" for device, found in self.autocast.items() if found[0]]
        words.append(f"autocast {', '.join(on)}" if on else "autocast off")
        if e["inference mode"]:
            words.append("inference mode")
        return ", ".join(words)


def _dtype(torch_name: str, dtype) -> str:
    return f"{torch_name}.{str(dtype).replace('torch.', '')}"


def _show(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v).replace("torch.", "")
