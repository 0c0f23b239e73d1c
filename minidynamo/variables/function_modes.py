"""Torch function modes entered in traced code: `with MyMode():` of a `TorchFunctionMode`
subclass, made inside or passed in, in the frame or a function it calls.

The trace keeps its own stack of mode trackers (`OutputGraph.function_modes`): entering
pushes, leaving pops (`TorchFunctionMode.__enter__`/`__exit__`, whoever calls them: the
`with`, a subclass's `super().__enter__()`). While it is not empty, each torch-level call
(a torch function, `F.*`, a Tensor method, an operator on a tensor, a tensor attribute
such as `x.shape`) is handed to the top mode's `__torch_function__`, inlined, with that
mode popped for the handler's run as torch's `_pop_mode_temporarily` does: what the
handler calls (`func(*args, **kwargs)` or anything else) goes to the modes below it, and
once none is left, to the graph. The real stack stays as it was: nothing the trace runs
for real sees the user's mode.

A decline while a mode is on the stack runs the whole call eagerly (a graph break would
run the rest without the mode); so does a mode still entered when the function returns,
one active around the optimized call (its handler would have to see every call of the
graph), and a TorchDispatchMode entered in the trace (as torch.compile does).
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import ListVariable, TupleVariable
from .tensor import TensorVariable

NO_BREAK = "a torch function mode entered in the traced code is active here (the rest would run without it)"


def _enter(tx, args, kwargs):
    tx.output.function_modes.append(args[0])
    return args[0]


def _exit(tx, args, kwargs):
    if not tx.output.function_modes:
        unsupported("call", "leaving a torch function mode the trace did not enter", no_break=NO_BREAK)
    tx.output.function_modes.pop()
    return ConstantVariable(None)


def _dispatch_mode(tx, args, kwargs):
    unsupported("call", f"entering a TorchDispatchMode ({args[0].describe()}) inside the optimized function: its "
                        "handler sees aten calls, which a trace does not run (torch.compile runs such a "
                        "frame eagerly too)", hint="enter the mode around the optimized call instead",
                no_break="a TorchDispatchMode is entered in the traced code")


# Python functions of torch's a trace models instead of inlining (UserFunctionVariable).
MODE_FUNCTIONS = {TorchFunctionMode.__enter__: _enter, TorchFunctionMode.__exit__: _exit,
                  TorchDispatchMode.__enter__: _dispatch_mode}


def active(tx) -> bool:
    return bool(tx.output.function_modes)


def call_handler(tx, func: VariableTracker, args: list, kwargs: dict, types: tuple = ()):
    """`top.__torch_function__(func, types, args, kwargs)` with the top mode popped for its
    run, or None where no mode is entered. `types` is () as under torch.compile (eager
    passes () for most calls, the tensor class for a few)."""
    stack = tx.output.function_modes
    if not stack:
        return None
    mode = stack.pop()
    try:
        return mode.call_method(tx, "__torch_function__", [
            func, TupleVariable([tx.wrap(t, None) for t in types]), TupleVariable(list(args)),
            DictVariable(dict(kwargs))], {})
    finally:
        stack.append(mode)


def dispatch_call(tx, fn, args: list, kwargs: dict):
    """A call of torch function or Tensor method `fn` under the entered modes, or None."""
    if not active(tx) or fn in _ignored():
        return None
    return call_handler(tx, tx.torch_callable(fn), args, kwargs)


def dispatch_getattr(tx, tensor, name: str):
    """`x.name` of a tensor under the entered modes where torch's C getter asks the mode
    (`Tensor.shape.__get__`), or None."""
    if not active(tx):
        return None
    descriptor = _getter(name)
    if descriptor is None:
        return None
    return call_handler(tx, TensorGetterVariable(descriptor), [tensor], {}, (torch.Tensor,))


def _getter(name: str):
    for cls in torch.Tensor.__mro__:
        found = cls.__dict__.get(name)
        if found is not None:
            return found if type(found).__name__ == "getset_descriptor" and cls is torch._C.TensorBase else None
    return None


class TensorGetterVariable(VariableTracker):
    """`Tensor.shape.__get__`, the function a mode's handler gets for `x.shape`."""

    __slots__ = ("descriptor",)

    def __init__(self, descriptor):
        super().__init__(None)
        self.descriptor = descriptor

    def describe(self):
        return f"the getter of Tensor.{self.descriptor.__name__}"

    def python_type(self):
        return type(self.descriptor.__get__)

    def var_getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable("__get__")
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs or not isinstance(args[0], TensorVariable):
            unsupported("call", f"{self.describe()} with other arguments than one tensor")
        return args[0].var_getattr(tx, self.descriptor.__name__)


class _Seen(Exception):
    def __init__(self, func, types, args, kwargs):
        super().__init__()
        self.func, self.types, self.args, self.kwargs = func, types, args, kwargs


class _Probe(TorchFunctionMode):
    """Stops at the first torch function an operator asks for: which function, with which
    arguments (eager's, down to `2 - x` being `Tensor.__rsub__(x, 2)`), before it runs."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise _Seen(func, types, args, kwargs or {})


def dispatch_operator(tx, op, operands: list):
    """`op(*operands)` (operator.add, operator.neg, ...) with a tensor among them under the
    entered modes, or None: the function and arguments eager hands the mode, found by
    running the operator on stand-ins under a mode that stops at once."""
    if not active(tx):
        return None
    by_id, stand_ins = {}, []
    for v in operands:
        if isinstance(v, TensorVariable):
            real = torch.empty(0)
        elif v.is_python_constant() and not isinstance(v, (ListVariable, DictVariable)):
            real = v.as_python_constant()
        else:
            unsupported("call", f"an operator on {v.describe()} under a torch function mode", no_break=NO_BREAK)
        by_id[id(real)] = v
        stand_ins.append(real)
    try:
        with _Probe():
            op(*stand_ins)
    except _Seen as seen:
        try:
            args = [by_id[id(a)] for a in seen.args]
        except KeyError:
            unsupported("call", f"operator.{op.__name__} under a torch function mode: the arguments "
                                "torch hands the mode are not the operands", no_break=NO_BREAK)
        if seen.kwargs:
            unsupported("call", f"operator.{op.__name__} under a torch function mode with keywords",
                        no_break=NO_BREAK)
        return call_handler(tx, tx.torch_callable(seen.func), args, {}, seen.types)
    except Exception:  # noqa: BLE001 - what eager's operator raises: the trace's own path says
        return None
    unsupported("call", f"operator.{op.__name__} did not ask the torch function mode", no_break=NO_BREAK)


_IGNORED = []


def _ignored() -> set:
    """torch's functions that never ask a mode (`torch.overrides.get_ignored_functions`)."""
    if not _IGNORED:
        _IGNORED.append(set(torch.overrides.get_ignored_functions()))
    return _IGNORED[0]

# Queries of the mode stack: the real stack's answer is not the trace's.
STACK_QUERIES = {torch._C._len_torch_function_stack, torch._C._is_torch_function_mode_enabled,
                 torch.overrides._get_current_function_mode_stack, torch.overrides._get_current_function_mode}


def check_around(output, state_guard) -> None:
    """A mode the caller entered around the optimized call: whole-call eager under the
    global-state guard, so a call without it traces again (a user TorchFunctionMode would
    see each call of the graph, a TorchDispatchMode its aten calls; the default-device
    mode of `with torch.device(...)` is global state)."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext
    modes = [m for m in _get_current_function_mode_stack() if not isinstance(m, DeviceContext)]
    if modes or torch._C._len_torch_dispatch_stack():
        output.guards.add(state_guard)
    if modes:
        unsupported("call", f"a torch function mode ({type(modes[-1]).__qualname__}) is active around the "
                            "optimized call", hint="enter the mode inside the optimized function",
                    no_break="a torch function mode is active around the call")
    if torch._C._len_torch_dispatch_stack():
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        mode = _get_current_dispatch_mode()
        unsupported("call", f"a TorchDispatchMode ({type(mode).__qualname__}) is active around the optimized "
                            "call (torch.compile runs such a call eagerly too)",
                    no_break="a TorchDispatchMode is active around the call")

