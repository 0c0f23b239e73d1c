"""Context managers the trace enters and leaves: grad mode (`torch.no_grad`,
`enable_grad`, `set_grad_enabled`), `torch.inference_mode`, `torch.autocast`,
`contextlib.nullcontext`, `torch.cuda.device`, @contextlib.contextmanager generators.

Each changes the tracer's copy of the state (the real thread-local state, which the fake
ops read, restored by the cache whatever happens) and records the change in the graph as
a node at the same place, so the graph carries grad-mode and autocast regions: the
backend sees them and the graph runs under them. `with` is the normal path only: the trace
never raises inside the block (anything that would raise declines first). A graph break
inside a region carries it across (regions.py): each manager says how to leave it at the
end of the graph (`close_at_break`) and how to enter it again for real (`reenter`).
"""
from __future__ import annotations

import contextlib
import inspect
import types
import weakref

import torch
from torch.amp import autocast_mode
from torch.autograd import grad_mode

from ..exc import attribute_error, unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .exits import EnteredManager, GradModeExit, WithCarrier, enter_real, null_exit  # noqa: F401 - builder, regions
from .base import NULL
from .functions import BaseFunctionVariable
from .._compat import PY311
from ..liveness import live_names, local_value
from ..resume import resume_function, why_not_resumable


class ContextManagerVariable(VariableTracker):
    """A context manager made inside the trace: `enter` and `exit` are BEFORE_WITH's
    `__enter__` and the `__exit__(None, None, None)` of the block's normal end."""

    # Its `__exit__` does with an exception what it does on the normal way out, and never
    # suppresses it: the trace follows an exception through the block (opcodes/exceptions.py).
    exits_quietly = False

    def python_type(self):
        return self.manager_type

    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> None:
        raise NotImplementedError

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return _Method(self, name)
        return super().var_getattr(tx, name)

    def clone(self) -> "ContextManagerVariable | None":
        """A fresh manager of the same kind, which torch's decorator form enters around
        each call; None where that form is not traced."""
        return None

    def rebuild_manager(self, rb) -> str | None:
        """The expression making a fresh manager like this one at run time, or None."""
        return None

    # --- a graph break inside the region (regions.py) ----------------------------------
    def why_not_across_break(self) -> str | None:
        """Why a graph break inside this region cannot carry it over (None: it can)."""
        return f"{self.describe()} cannot be carried across a graph break"

    def close_at_break(self, graph) -> None:
        """Leave the region at the end of `graph`, the graph a break ends (the nodes its
        exit records; the trace is over, the thread's state already restored): every
        graph leaves the state as it found it (a backend may run it at compile time)."""
        raise NotImplementedError

    def reenter(self, rb) -> tuple[list, str]:
        """(statements, expression): after the graph, a real manager of this kind entered
        as eager entered it; the expression is its exit for the resume function's stack."""
        raise NotImplementedError

    def leave_real(self, tx) -> None:
        """The exit of a region whose real manager (`self.real`) the trace entered and put in
        `output.entered`: the graph's closing node (close_at_break), then the manager left."""
        self.close_at_break(tx.output.graph)
        tx.output.entered.remove(self.real)
        self.real.__exit__(None, None, None)

    def call_function(self, tx, args, kwargs):
        """`@torch.inference_mode()`, `@my_contextmanager()` over a function defined in the
        traced code: the decorated function (grad mode's: torch.py)."""
        if (self.clone() is None or kwargs or len(args) != 1 or not isinstance(args[0], BaseFunctionVariable)
                or args[0].get_code().co_flags & _GENERATOR_FLAGS):
            return super().call_function(tx, args, kwargs)
        return ContextDecoratedFunction(self, args[0])


# Generators, coroutines, async generators: torch's decorator wraps them otherwise.
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class ContextDecoratedFunction(VariableTracker):
    """A function decorated by a context manager in the trace: each call runs it inside a
    fresh copy of the manager, as torch's decorator enters `clone()` and contextlib's
    recreates its generator."""

    def __init__(self, cm, fn):
        super().__init__(None)
        self.cm, self.fn = cm, fn

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return f"{self.fn.describe()} decorated by {self.cm.describe()}"

    def call_function(self, tx, args, kwargs):
        cm = self.cm.clone()
        cm.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        cm.exit(tx)
        return result

    def var_getattr(self, tx, name):
        if name == "__wrapped__":
            return self.fn
        if name in ("__name__", "__qualname__", "__doc__", "__module__"):  # functools.wraps copies them
            return self.fn.var_getattr(tx, name)
        return super().var_getattr(tx, name)

    def rebuild_new(self, rb):
        manager = self.cm.rebuild_manager(rb)
        if manager is None:
            unsupported("construct", f"{self.describe()}, which exists only inside the trace, would have to "
                                     "outlive it")
        return f"{manager}({rb.expr(self.fn)})"


class _Method(VariableTracker):
    """`cm.__enter__` / `cm.__exit__` as values (the bound `__exit__` BEFORE_WITH pushes)."""

    carried = False  # a region a graph break carried into this resume function: entered before it

    def __init__(self, cm, name):
        super().__init__(None)
        self.cm, self.name = cm, name

    def rebuild(self, rb) -> str:
        if self.name != "__exit__":
            return super().rebuild(rb)
        if id(self) in rb.exits:  # a with region a graph break splits, entered again after the graph (regions.py)
            return rb.exits[id(self)]
        real = exit_across_break(self)
        if real is None:
            unsupported("exceptions", f"a graph break inside a with block over {self.cm.describe()}")
        return rb.ns.bind(real, "exit")

    @property
    def exit_raising(self):
        """contextlib's exit with an exception (opcodes/exceptions.py): only a generator
        manager's is traced, its generator thrown the exception at its yield."""
        if self.name != "__exit__" or self.carried or not isinstance(self.cm, GeneratorContextVariable):
            return None
        return lambda tx, exc: ConstantVariable(self.cm.gen.resume_raising(exc))

    def call_function(self, tx, args, kwargs):
        if self.name == "__enter__":
            return self.cm.enter(tx)
        if any(not (a.is_python_constant() and a.as_python_constant() is None) for a in args):
            unsupported("exceptions", "leaving a with block by an exception")
        self.cm.exit(tx)
        return ConstantVariable(None)


class GradModeVariable(ContextManagerVariable):
    """`torch.no_grad()`, `torch.enable_grad()`, `torch.set_grad_enabled(mode)`. The last
    sets the mode when it is made, as it does in eager (so it works as a statement too)."""

    exits_quietly = True

    def __init__(self, enabled: bool, manager_type, tx=None, now: bool = False):
        super().__init__(None)
        self.enabled = enabled
        self.manager_type = manager_type
        self.prev = None
        if now:
            self.prev = _set_grad(tx, enabled)

    def enter(self, tx):
        if self.prev is None:
            self.prev = _set_grad(tx, self.enabled)
        return ConstantVariable(None)

    def exit(self, tx):
        _set_grad(tx, self.prev)

    def close_at_break(self, graph):
        graph.create_node("call_function", torch._C._set_grad_enabled, (self.prev,), {})

    def clone(self):
        """Decorator form: a fresh region per call (never setting the mode when made)."""
        return GradModeVariable(self.enabled, self.manager_type)

    def rebuild_manager(self, rb):
        cls = rb.ns.bind(self.manager_type, "grad_mode")
        return f"{cls}({self.enabled!r})" if self.manager_type is torch.set_grad_enabled else f"{cls}()"

    def describe(self):
        return f"{self.manager_type.__name__} (grad {'on' if self.enabled else 'off'})"

    def why_not_across_break(self):
        return None if self.prev is not None else "grad mode region not entered"

    def reenter(self, rb):
        # Stateless: its exit sets the mode from before the region (the mode inside is set
        # with the others' after the re-entries, regions.py).
        return [], rb.ns.bind(GradModeExit(self.prev), "exit")


def exit_across_break(method) -> object | None:
    """The real callable standing for the bound `__exit__` of a region that a graph break
    splits (`_Method`), or None when that region cannot be carried across a break."""
    cm = method.cm
    if isinstance(cm, GradModeVariable) and cm.prev is not None:
        return GradModeExit(cm.prev)
    if isinstance(cm, NullContextVariable):
        return null_exit
    return None


def wrap_exit(value) -> "_Method":
    """A resume function's tracker for a real exit made by `exit_across_break`."""
    if isinstance(value, GradModeExit):
        cm = GradModeVariable(not value.prev, torch.set_grad_enabled)
        cm.prev = value.prev
        method = _Method(cm, "__exit__")
    else:
        method = _Method(NullContextVariable(ConstantVariable(None)), "__exit__")
    method.carried = True
    return method


def _set_grad(tx, enabled: bool, always: bool = False) -> bool:
    """Grad mode on or off from here on, in the trace and in the graph; the mode before.
    A grad-mode manager setting the mode there is records no node (as torch.compile
    coalesces them); a call of `torch._C._set_grad_enabled` itself (`always`) is one."""
    prev = torch.is_grad_enabled()
    if enabled != prev or always:
        tx.output.graph.create_node("call_function", torch._C._set_grad_enabled, (enabled,), {})
    torch._C._set_grad_enabled(enabled)
    _note_grad(tx)
    return prev


# The grad mode the trace has set last, per graph recorded into (a graph break reads it:
# by then the thread's state is restored).
_grad_set: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _note_grad(tx) -> None:
    _grad_set[tx.output.graph] = torch.is_grad_enabled()


def grad_at_break(graph) -> bool:
    """The grad mode a trace recording into `graph` had when it stopped, read after the
    thread's state was restored (the mode it started with, unless the trace changed it)."""
    return _grad_set.get(graph, torch.is_grad_enabled())


class InferenceModeVariable(ContextManagerVariable):
    """`torch.inference_mode(mode=True)`: torch's guard sets inference mode to `mode` and
    grad mode to `not mode` inside, and puts both back on exit; the graph does the same
    around the region (`_enter_inference_mode` / `_exit_inference_mode`). Tensors made
    inside are inference tensors in the trace as in eager: the fake ops run under the
    real mode."""

    exits_quietly = True

    manager_type = torch.inference_mode

    def __init__(self, mode: bool):
        super().__init__(None)
        self.mode = mode
        self.real = None
        self.node = None
        self.grad_before = None  # grad mode when it was entered: the re-entry at a break sets it first

    def enter(self, tx):
        output = tx.output
        self.grad_before = torch.is_grad_enabled()
        self.real = torch._C._InferenceMode(self.mode)
        self.real.__enter__()
        output.entered.append(self.real)  # left by the cache if the trace stops inside
        self.node = output.graph.create_node("call_function", grad_mode._enter_inference_mode, (self.mode,), {})
        output.inference_regions += self.mode
        _note_grad(tx)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.inference_regions -= self.mode
        self.leave_real(tx)
        _note_grad(tx)

    def close_at_break(self, graph):
        graph.create_node("call_function", grad_mode._exit_inference_mode, (self.node,), {})

    def clone(self):
        return InferenceModeVariable(self.mode)

    def rebuild_manager(self, rb):
        return f"{rb.ns.bind(torch.inference_mode, 'inference_mode')}({self.mode!r})"

    def describe(self):
        return f"torch.inference_mode({self.mode})"

    def why_not_across_break(self):
        return None if self.node is not None else "inference mode region not entered"

    def reenter(self, rb):
        # torch's guard saves the whole autograd state it finds: the grad mode eager had
        # when it entered first.
        name = rb.temp()
        return ([f"{rb.ns.bind(torch._C._set_grad_enabled, 'set_grad_enabled')}({self.grad_before!r})",
                 f"{name} = {rb.ns.bind(enter_real, 'enter')}("
                 f"{rb.ns.bind(torch.inference_mode, 'inference_mode')}({self.mode!r}))"], name)


def mark_inference_views(target, tensors: list, result) -> None:
    """Under inference mode, eager's view of a tensor that requires grad (and is no
    inference tensor) requires grad too, a leaf without grad_fn. Torch's composite view
    ops (reshape, flatten, view_as) reach fake tensors whole there, autograd's dispatch
    keys being off, and come back as new tensors without it: set it on a result sharing
    such an argument's storage (detach's result does not require grad)."""
    if target in _DETACHES or not torch.is_inference_mode_enabled():
        return
    bases = {_storage(t) for _, t in tensors if t.requires_grad and not t.is_inference()}
    bases.discard(None)
    for r in result if isinstance(result, (tuple, list)) else (result,):
        if (isinstance(r, torch.Tensor) and not r.requires_grad and not r.is_inference()
                and (r.is_floating_point() or r.is_complex()) and _storage(r) in bases):
            r.requires_grad_(True)


_DETACHES = ("detach", torch.detach, torch.Tensor.detach)


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
        return None


class AutocastVariable(ContextManagerVariable):
    """`torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`."""

    exits_quietly = True

    manager_type = torch.autocast

    def __init__(self, args: tuple):
        super().__init__(None)
        self.args = args  # (device_type, dtype, enabled, cache_enabled), constants
        self.real = None
        self.node = None

    def enter(self, tx):
        try:
            self.real = torch.autocast(*self.args)
            self.real.__enter__()
        except Exception as e:  # a bad device type or dtype: eager raises it
            unsupported("exceptions", f"torch.autocast{self.args!r} raised {type(e).__name__}: {e}",
                        raised=attribute_error(e))
        tx.output.entered.append(self.real)  # left by the cache if the trace stops inside
        self.node = tx.output.graph.create_node("call_function", autocast_mode._enter_autocast, self.args, {})
        return ConstantVariable(None)

    def exit(self, tx):
        self.leave_real(tx)

    def close_at_break(self, graph):
        graph.create_node("call_function", autocast_mode._exit_autocast, (self.node,), {})

    def describe(self):
        return f"torch.autocast{self.args!r}"

    def why_not_across_break(self):
        return None if self.node is not None else "autocast region not entered"

    def reenter(self, rb):
        name = rb.temp()
        args = ", ".join(rb.expr(ConstantVariable(a)) for a in self.args)
        return [f"{name} = {rb.ns.bind(enter_real, 'enter')}({rb.ns.bind(torch.autocast, 'autocast')}({args}))"], name


class NullContextVariable(ContextManagerVariable):
    manager_type = contextlib.nullcontext
    exits_quietly = True

    def __init__(self, result):
        super().__init__(None)
        self.result = result

    def enter(self, tx):
        return self.result

    def exit(self, tx):
        pass

    def close_at_break(self, graph):
        pass

    def describe(self):
        return "contextlib.nullcontext()"

    def why_not_across_break(self):
        return None

    def reenter(self, rb):
        return [], rb.ns.bind(null_exit, "exit")


class CudaDeviceVariable(ContextManagerVariable):
    """`torch.cuda.device(d)`, as torch's manager does it: `index` is the device it selects
    inside, and the graph switches to it around the region (`_exchange_device`); nothing
    for a negative index, nor for one that is the current device, whichever it is at run
    time (`d` None or a device without index where CUDA is available). Where CUDA is not,
    torch finds no index for those and its `__enter__` raises: so does the trace (eager
    raises it)."""

    exits_quietly = True

    manager_type = torch.cuda.device

    def __init__(self, arg, index: int | None):
        super().__init__(None)
        self.arg = arg  # the argument, as a constant: a break enters torch's manager with it
        self.index = index
        self.prev = None

    def enter(self, tx):
        if self.index is None:
            unsupported("exceptions", f"torch.cuda.device({self.arg!r}).__enter__() raises TypeError "
                                      "(no CUDA device to take the index of)")
        if self.index >= 0:
            self.prev = tx.output.graph.create_node("call_function", torch.cuda._exchange_device,
                                                    (self.index,), {})
        return ConstantVariable(None)

    def exit(self, tx):
        self.close_at_break(tx.output.graph)

    def close_at_break(self, graph):
        if self.prev is not None:
            graph.create_node("call_function", torch.cuda._maybe_exchange_device, (self.prev,), {})

    def describe(self):
        return f"torch.cuda.device({self.arg!r})"

    def why_not_across_break(self):
        return None

    def reenter(self, rb):
        # The device before the region is a value of the graph at run time: the graph
        # switches back at its end and torch's manager, made as eager made it, switches
        # again and keeps the device it found for its exit.
        name = rb.temp()
        return [f"{name} = {rb.ns.bind(enter_real, 'enter')}({rb.ns.bind(torch.cuda.device, 'cuda_device')}"
                f"({rb.expr(ConstantVariable(self.arg))}))"], name


def _cuda_device(arg) -> "CudaDeviceVariable":
    from torch.cuda._utils import _get_device_index
    try:
        index = _get_device_index(arg, optional=True)
    except Exception as e:  # a CPU device, say: eager raises it
        unsupported("exceptions", f"torch.cuda.device({arg!r}) raised {type(e).__name__}: {e}",
                    raised=attribute_error(e))
    implicit = arg is None or (isinstance(arg, (str, torch.device)) and torch.device(arg).index is None)
    if implicit and index is not None:  # the current device: switching to it changes nothing
        index = -1
    return CudaDeviceVariable(arg, index)


_CONTEXTMANAGER_CODE = contextlib.contextmanager(lambda: (yield)).__code__


def is_contextmanager_function(fn) -> bool:
    """A function made by @contextlib.contextmanager (its `helper` wrapper)."""
    return getattr(fn, "__code__", None) is _CONTEXTMANAGER_CODE


class GeneratorContextVariable(ContextManagerVariable):
    """`with helper(...)` for a @contextlib.contextmanager generator: its body up to the
    yield is traced on entry, the rest on exit, the normal way out of the block: the end of
    a `try` around the yield, its `else`, its `finally`. An exception leaving the block is
    thrown in at the yield (the translator's `resume_raising`), as contextlib's exit does."""

    manager_type = contextlib._GeneratorContextManager

    def __init__(self, generator_fn, args, kwargs):
        super().__init__(None)
        self.generator_fn = generator_fn  # a tracker of the generator function
        self.args, self.kwargs = args, kwargs
        self.gen = None

    def enter(self, tx):
        self.gen = tx.start_generator(self.generator_fn, self.args, self.kwargs)
        return self.gen.run_to_yield()

    def exit(self, tx):
        self.gen.resume()

    def clone(self):
        """As contextlib's decorator form recreates it: a new generator, same arguments."""
        return GeneratorContextVariable(self.generator_fn, self.args, self.kwargs)

    def _yield_index(self) -> int:
        gen = self.gen
        return next(i for i, inst in enumerate(gen.instructions) if inst is gen.yield_inst)

    def why_not_across_break(self):
        if self.gen is None or self.gen.yield_inst is None:
            return "its generator is not at its yield"
        if getattr(self.generator_fn, "fn", None) is None:
            return "its generator function was made in the trace"
        if not PY311:
            return "Python 3.10 starts generators with GEN_START"
        if self.gen.yield_inst.opname != "YIELD_VALUE":
            return "its generator is inside a yield from"
        why = why_not_resumable(self.gen.code, self._yield_index())
        return None if why is None else f"its generator cannot be resumed at its yield: {why}"

    def close_at_break(self, graph):
        pass  # its state is the regions its body entered, closed with the others (regions.py)

    def reenter(self, rb):
        # The generator cannot be copied: a new one is made from its code, resumed at the
        # yield with the stack and live locals the trace has there (the regions its body
        # entered are the exits already entered again); contextlib's manager over it
        # runs its first step to that yield, and its exit runs the rest as eager's does.
        gen, index = self.gen, self._yield_index()
        stack = [*gen.stack, ConstantVariable(None)]  # what the new generator yields first
        nulls = tuple(v is NULL for v in stack)
        names = live_names(gen, index)
        fn = resume_function(self.generator_fn.fn, gen.code, index, nulls, names)
        values = [rb.expr(v) for v in stack if v is not NULL] + [rb.expr(local_value(gen, n)) for n in names]
        name = rb.temp()
        manager = rb.ns.bind(contextlib._GeneratorContextManager, "GeneratorContextManager")
        return [f"{name} = {rb.ns.bind(enter_real, 'enter')}({manager}({rb.ns.bind(fn, 'resumed')}, "
                f"({''.join(v + ', ' for v in values)}), {{}}))"], name

    def describe(self):
        return f"contextmanager {self.generator_fn.describe()}"


def make_context_manager(tx, cls, args, kwargs):
    """The tracker for `cls(*args, **kwargs)` if `cls` is a context manager traced here,
    else None."""
    if cls is contextlib.nullcontext and len(args) + len(kwargs) <= 1 and set(kwargs) <= {"enter_result"}:
        return NullContextVariable(args[0] if args else kwargs.get("enter_result", ConstantVariable(None)))
    if not all(a.is_python_constant() for a in args) or not all(
            v.is_python_constant() for v in kwargs.values()):
        return None
    values = [a.as_python_constant() for a in args]
    named = {k: v.as_python_constant() for k, v in kwargs.items()}
    if cls is torch.no_grad and not values and not named:
        return GradModeVariable(False, cls)
    if cls is torch.enable_grad and not values and not named:
        return GradModeVariable(True, cls)
    if cls is torch.set_grad_enabled and len(values) + len(named) == 1:
        mode = values[0] if values else named.get("mode")
        if type(mode) is bool:
            return GradModeVariable(mode, cls, tx, now=True)
    if cls is torch.inference_mode and len(values) + len(named) <= 1 and set(named) <= {"mode"}:
        mode = values[0] if values else named.get("mode", True)
        if type(mode) is bool:  # anything else is a function to decorate
            return InferenceModeVariable(mode)
    if cls is getattr(torch.cpu, "device", None) and len(values) == 1 and not named:
        return NullContextVariable(ConstantVariable(None))  # the CPU has one device: nothing to switch
    if cls is torch.cuda.device and len(values) == 1 and not named:
        return _cuda_device(values[0])
    # (torch.autograd.profiler.record_function: registry.CONSTRUCTORS, library_contexts.py)
    if cls is torch.autocast:
        try:
            bound = _AUTOCAST_SIGNATURE.bind(*values, **named)
        except TypeError:
            return None
        bound.apply_defaults()
        return AutocastVariable(tuple(bound.arguments.values()))
    return None


def _autocast_signature():
    params = list(inspect.signature(torch.autocast.__init__).parameters.values())[1:]
    return inspect.Signature(params)


_AUTOCAST_SIGNATURE = _autocast_signature()
