"""Library context managers beside the state-changing ones of contexts.py: the
profiler's `record_function` regions, and `contextlib.contextmanager` applied in the trace
(a generator function defined inside the traced function and decorated there), and
`torch.autograd.graph.disable_saved_tensors_hooks(message)` regions.

`record_function(name)` is a no-op region, as torch.compile traces it by default
(`capture_profiler_record_function` off): the graph gets no profiler event, and a graph
break inside it leaves it, as a nullcontext is left. `torch.profiler.profile(...)` and
`torch.autograd.profiler.profile(...)` made in the trace are no-op regions too, as under
torch.compile (its arguments are ignored; the profiler is never started; one given an
`on_trace_ready` callback is not modelled): the object the `with` gives may only be
dropped, anything read from it declines. `contextlib.contextmanager(fn)` made
in the trace is the helper function contextlib returns, kept as the generator function it
wraps: calling it makes contexts.py's GeneratorContextVariable, the same model as for a
helper decorated at import time.
"""
from __future__ import annotations

import contextlib
import inspect

import torch

from ..exc import unsupported
from .base import RealValueVariable, VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .contexts import ContextManagerVariable, GeneratorContextVariable, enter_real, null_exit
from .functions import BaseFunctionVariable

RECORD_FUNCTION = torch.autograd.profiler.record_function  # torch.profiler.record_function too


class _NoOpRegion(ContextManagerVariable):
    """A region the graph does not mark (what eager does there is not part of the result):
    entered, it gives itself; a graph break inside splits it as a nullcontext."""

    def enter(self, tx):
        return self

    def exit(self, tx):
        pass

    def close_at_break(self, graph):
        pass

    def why_not_across_break(self):
        return None

    def reenter(self, rb):
        return [], rb.ns.bind(null_exit, "exit")


class RecordFunctionVariable(_NoOpRegion):
    """`torch.profiler.record_function(name, args=None)`: entered, it gives itself."""

    manager_type = RECORD_FUNCTION

    def __init__(self, name: str, args):
        super().__init__(None)
        self.name, self.args = name, args

    def var_getattr(self, tx, name):
        if name in ("name", "args"):
            return ConstantVariable(getattr(self, name))
        return super().var_getattr(tx, name)

    def describe(self):
        return f"torch.profiler.record_function({self.name!r})"


PROFILE_CLASSES = (torch.profiler.profile, torch.autograd.profiler.profile)


class ProfileVariable(_NoOpRegion):
    """`torch.profiler.profile(...)` / `torch.autograd.profiler.profile(...)` made in the
    trace: a no-op region; entered, it gives itself, which nothing may be read from."""

    def __init__(self, manager_type):
        super().__init__(None)
        self.manager_type = manager_type

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return super().var_getattr(tx, name)
        unsupported("call", f"attribute {name!r} of {self.describe()}: the profiler is not run in a trace",
                    hint="profile around the optimized call")

    def describe(self):
        return f"{self.manager_type.__module__}.profile()"


def make_profile(cls, args: list, kwargs: dict) -> "ProfileVariable | None":
    """A no-op profile region, unless the profiler is given a callback: `on_trace_ready`
    runs user code when it stops (None: not modelled, the call declines)."""
    ready = kwargs.get("on_trace_ready")
    if ready is not None and not (ready.is_python_constant() and ready.as_python_constant() is None):
        return None
    if cls is torch.profiler.profile and len(args) >= 3:  # (activities, schedule, on_trace_ready, ...)
        return None
    return ProfileVariable(cls)


def make_record_function(args: list, kwargs: dict) -> "RecordFunctionVariable | None":
    """`record_function(name, args=None)` with constant strings, else None."""
    if not all(a.is_python_constant() for a in (*args, *kwargs.values())):
        return None
    try:
        bound = inspect.signature(RECORD_FUNCTION.__init__).bind(
            None, *[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
    except TypeError:
        return None
    bound.apply_defaults()
    name, extra = bound.arguments["name"], bound.arguments["args"]
    if not isinstance(name, str) or not (extra is None or isinstance(extra, str)):
        return None
    return RecordFunctionVariable(name, extra)


class ContextManagerDecoratorVariable(VariableTracker):
    """`contextlib.contextmanager` itself, applied in the trace (guarded by identity)."""

    def python_type(self):
        return type(contextlib.contextmanager)

    def describe(self):
        return "contextlib.contextmanager"

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return contextlib.contextmanager

    def call_function(self, tx, args, kwargs):
        fn = args[0] if len(args) == 1 and not kwargs else None
        if not isinstance(fn, BaseFunctionVariable):
            unsupported("call", f"contextlib.contextmanager applied to {fn.describe() if fn else 'these arguments'}")
        if not fn.get_code().co_flags & inspect.CO_GENERATOR:
            # contextlib wraps anything; calling the result fails on enter: eager raises there.
            unsupported("call", f"contextlib.contextmanager over {fn.describe()}, which is not a generator "
                                "function")
        return ContextManagerFunctionVariable(fn)


class ContextManagerFunctionVariable(VariableTracker):
    """The helper `contextlib.contextmanager(fn)` returns, made in the trace: calling it
    makes a manager over a new generator of `fn`; `functools.wraps` copied fn's names."""

    def __init__(self, fn):
        super().__init__(None)
        self.fn = fn

    def python_type(self):
        return type(contextlib.contextmanager)

    def describe(self):
        return f"contextmanager {self.fn.describe()}"

    def call_function(self, tx, args, kwargs):
        return GeneratorContextVariable(self.fn, list(args), dict(kwargs))

    def var_getattr(self, tx, name):
        if name == "__wrapped__":
            return self.fn
        if name in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__", "__annotate__",
                    "__type_params__"):  # what functools.wraps copied: fn's very objects
            return self.fn.var_getattr(tx, name)
        if name == "__dict__":  # wraps' update of fn's, then __wrapped__ (read by another wraps)
            entries = self.fn.var_getattr(tx, "__dict__")
            return _HelperDict({**entries.items, "__wrapped__": self.fn})
        unsupported("construct", f"attribute {name!r} of {self.describe()}")


class _HelperDict(DictVariable):
    """The `__dict__` of a contextmanager helper made in the trace, as read: not kept, so
    not written."""

    __slots__ = ()

    def check_mutable(self, what, tx):
        unsupported("side_effect", f"{what} on the __dict__ of a contextmanager helper made in the trace")

    def rebuild_new(self, rb):
        return f"{rb.ns.bind(contextlib.contextmanager, 'contextmanager')}({rb.expr(self.fn)})"


# --- torch.autograd.graph.disable_saved_tensors_hooks(message) ----------------------------
DISABLE_SAVED_TENSORS_HOOKS = torch.autograd.graph.disable_saved_tensors_hooks
# (a backend's dead-code elimination keeps these nodes: they change the thread's state)
_has_side_effect = getattr(torch.fx.node, "has_side_effect", lambda fn: fn)


@_has_side_effect
def saved_tensors_hooks_off(message: str):
    """The graph's entry into the region: what the manager's __enter__ does (raising where
    hooks are registered now, as eager does); returns the message it replaces."""
    prev = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
    try:
        torch._C._autograd._saved_tensors_hooks_disable(message)
    except BaseException:  # (it sets the message, then raises): the manager's finally
        saved_tensors_hooks_restore(prev)
        raise
    return prev


@_has_side_effect
def saved_tensors_hooks_restore(prev) -> None:
    """The graph's way out of the region: the state before it (its __exit__)."""
    if prev is None:
        torch._C._autograd._saved_tensors_hooks_enable()
    else:
        torch._C._autograd._saved_tensors_hooks_disable(prev)


class DisableSavedTensorsHooksFunction(RealValueVariable):
    """`torch.autograd.graph.disable_saved_tensors_hooks` itself (guarded by identity):
    called with a constant message it makes the region below."""

    __slots__ = ()
    rebuild = RealValueVariable.rebuild_as_itself

    def describe(self):
        return "torch.autograd.graph.disable_saved_tensors_hooks"

    def call_function(self, tx, args, kwargs):
        values = list(args) + list(kwargs.values())
        if len(values) != 1 or set(kwargs) - {"error_message"} or not values[0].is_python_constant() \
                or not isinstance(values[0].as_python_constant(), str):
            unsupported("call", "disable_saved_tensors_hooks with other than one constant message")
        return SavedTensorsHooksOffVariable(values[0].as_python_constant())


class SavedTensorsHooksOffVariable(ContextManagerVariable):
    """`with torch.autograd.graph.disable_saved_tensors_hooks(message):` (or the decorator
    form): entered for real while tracing, and in the graph as a pair of nodes (the state it
    found, given back on the way out), as torch.compile records it."""

    manager_type = contextlib._GeneratorContextManager
    exits_quietly = True

    def __init__(self, message: str):
        super().__init__(None)
        self.message = message
        self.real = None
        self.node = None

    def enter(self, tx):
        self.real = DISABLE_SAVED_TENSORS_HOOKS(self.message)
        try:
            self.real.__enter__()
        except RuntimeError as e:  # saved-tensor hooks registered now: eager raises it
            unsupported("exceptions", f"RuntimeError: {e}", raised=RuntimeError)
        tx.output.entered.append(self.real)  # left by the cache if the trace stops inside
        self.node = tx.output.graph.create_node("call_function", saved_tensors_hooks_off, (self.message,), {})
        return ConstantVariable(None)

    def exit(self, tx):
        self.leave_real(tx)

    def close_at_break(self, graph):
        graph.create_node("call_function", saved_tensors_hooks_restore, (self.node,), {})

    def clone(self):
        return SavedTensorsHooksOffVariable(self.message)

    def describe(self):
        return f"disable_saved_tensors_hooks({self.message!r})"

    def why_not_across_break(self):
        return None if self.node is not None else "disable_saved_tensors_hooks region not entered"

    def reenter(self, rb):
        name = rb.temp()
        made = f"{rb.ns.bind(DISABLE_SAVED_TENSORS_HOOKS, 'disable_saved_tensors_hooks')}({self.message!r})"
        return [f"{name} = {rb.ns.bind(enter_real, 'enter')}({made})"], name
