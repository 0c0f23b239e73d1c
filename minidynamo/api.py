"""The public entry point: `optimize` and the OptimizedFunction wrapper it returns."""
from __future__ import annotations

import functools
import inspect
import types
import weakref

import torch

from . import callees, optimizing
from .backends import backend_name, lookup_backend
from .cache import FunctionCache
from .codegen import MISS, dispatcher, entry_name
from .user_names import for_module
from .user_tracebacks import trimmed
from ._compat import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
from .cudagraphs import wrap_backend
from .torch_backends import inductor_backend, takes_symbolic_inputs, torch_backend_names

_all_caches: "weakref.WeakSet[FunctionCache]" = weakref.WeakSet()


class OptimizedFunction:
    """Calls `fn` through guarded cache entries; `fn` itself stays plain eager.

    Each instance gets its own subclass, so that `__call__` (looked up on the type) can be
    the generated function that fits the current entries: with one entry, that entry's
    own guards-then-graph function, called without repacking the arguments.
    """

    def __new__(cls, *args, **kwargs):
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        return super().__new__(own)

    def __init__(self, fn, backend="eager", fullgraph: bool = False, mode=None, dynamic=None,
                 naming=None):
        _check_optimizable(fn)
        lookup_backend(backend)  # bad backend names fail here, not at the first call
        _check_mode(mode)
        if mode == "cudagraphs":
            backend = wrap_backend(lookup_backend(backend))
        self.mode = mode
        shown, fn = fn, as_function(fn)
        self._fn = fn
        where = _where(fn)
        name = entry_name(fn)  # the generated entry's def name
        self._cache = FunctionCache(fn, backend, fullgraph, name, where,
                                    dynamic=_dynamic_for(backend, mode, dynamic), naming=naming)
        self._cache.on_change = self._install_call
        _all_caches.add(self._cache)
        functools.update_wrapper(self, shown)
        try:
            self.__signature__ = inspect.signature(shown, follow_wrapped=False)
        except (TypeError, ValueError):  # a C function without a text signature
            self.__signature__ = inspect.signature(fn, follow_wrapped=False)

    @classmethod
    def _resume(cls, fn, root):
        """The optimized resume function `fn` of the function cached by `root` (resume.py):
        same backend, entries that hand a Continue back at a break."""
        self = cls.__new__(cls)
        self.mode = None
        self._fn = fn
        self._cache = FunctionCache(fn, root.backend, False, fn.__name__, root.where, root=root)
        self._cache.on_change = self._install_call
        _all_caches.add(self._cache)
        functools.update_wrapper(self, fn)
        return self

    def __call__(self, *args, **kwargs):
        # The general path; _install_call puts a generated one in the instance's class.
        try:
            for entry in self._cache.dispatch_order():
                result = entry.run(*args, **kwargs)
                if result is not MISS:
                    return result
            return self._cache.miss(args, kwargs)
        except BaseException as e:
            raise trimmed(e)  # the user's exception without the package's frames

    def _install_call(self):
        cls, entries, fn = type(self), self._cache.entries, self._fn
        if cls is OptimizedFunction:
            return
        # A staticmethod: called with the arguments alone, so a call with wrong arguments
        # raises exactly the TypeError the user's function would.
        limited = self._cache.limited_call() if self._cache.warned_limit else None
        if limited is not None:
            cls.__call__ = staticmethod(limited)
        elif len(entries) == 1 and entries[0].fast_call is not None:
            cls.__call__ = staticmethod(entries[0].fast_call)
        elif entries and fn.__defaults__ is None and fn.__kwdefaults__ is None:
            cls.__call__ = staticmethod(dispatcher(self._cache.name, fn, [e.run for e in self._cache.dispatch_order()],
                                                   self._cache.call_slow))
        else:
            cls.__call__ = OptimizedFunction.__call__

    def __get__(self, obj, objtype=None):
        # Used as a method: bind like a function would.
        return self if obj is None else types.MethodType(self, obj)

    def cache_entries(self):
        return list(self._cache.entries)

    def guard_failures(self):
        """Every recompile, in call order: of this function's entries, and of the code
        after its graph breaks (`failure.resume` says which break)."""
        return list(self._cache.chain_failures)

    def reset(self):
        self._cache.clear()

    def __repr__(self):
        return f"<minidynamo optimized {self._fn.__qualname__}>"


class OptimizedModule(torch.nn.Module):
    """`optimize(module)`: calling it runs the module's call (its forward, and its hooks
    as Module.__call__ runs them) through an OptimizedFunction, like torch.compile's
    OptimizedModule. Parameters, buffers, state_dict (the original's keys, no prefix),
    train/eval and attribute reads are the original module's."""

    # The wrapper's own attributes; every other write or delete goes to the original module
    # (as torch.compile's OptimizedModule: `opt.scale = 3.0` changes what the call reads).
    _own_attributes = frozenset({"_orig_mod", "_optimized", "_super_module_initialized", "forward", "__dict__"})

    def __init__(self, mod: torch.nn.Module, backend="eager", fullgraph: bool = False, mode=None,
                 dynamic=None):
        # NOTE: first: Module.__init__ writes `training`, which the property below forwards.
        object.__setattr__(self, "_orig_mod", mod)
        self._super_module_initialized = False
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = mod  # a submodule: parameters(), .to(), train() reach it

        def forward(*args, **kwargs):
            return mod(*args, **kwargs)
        forward.__qualname__ = f"{type(mod).__qualname__}.forward"
        forward.__wrapped__ = mod.forward
        self._optimized = OptimizedFunction(forward, backend, fullgraph, mode, dynamic,
                                            naming=for_module(mod, forward))

    def __call__(self, *args, **kwargs):
        try:
            return self._optimized(*args, **kwargs)
        except BaseException as e:
            raise trimmed(e)

    forward = __call__

    def __getattr__(self, name):
        if name in ("_orig_mod", "_optimized"):
            return self.__dict__[name] if name in self.__dict__ else super().__getattr__(name)
        return getattr(self._orig_mod, name)

    @property
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_super_module_initialized"):  # not Module.__init__'s default
            self._orig_mod.training = value

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in self._own_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in self._own_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    # Python looks dunders up on the class, past __getattr__: the container protocol and
    # truth are the original's (an empty ModuleList is false; `len` of a Linear raises
    # eager's TypeError, and its truth stays True).
    def __bool__(self):
        return bool(self._orig_mod)

    def __len__(self):
        return len(self._orig_mod)

    def __iter__(self):
        return iter(self._orig_mod)

    def __getitem__(self, key):
        return self._orig_mod[key]

    def __setitem__(self, key, value):
        self._orig_mod[key] = value

    def __delitem__(self, key):
        del self._orig_mod[key]

    def __contains__(self, item):
        return item in self._orig_mod

    def __dir__(self):
        return dir(self._orig_mod)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def cache_entries(self):
        return self._optimized.cache_entries()

    def guard_failures(self):
        return self._optimized.guard_failures()

    def reset(self):
        self._optimized.reset()

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"


def _check_optimizable(fn):
    why = _not_optimizable(fn)
    if why is not None:
        raise TypeError(why)


def _not_optimizable(fn) -> str | None:
    """Why `fn` cannot be optimized, or None when it can (a Python function, or any other
    callable: see `as_function`)."""
    if isinstance(fn, OptimizedFunction):
        return None
    if isinstance(fn, (staticmethod, classmethod)):
        return (f"minidynamo.optimize got a {type(fn).__name__} object: apply "
                f"@minidynamo.optimize below @{type(fn).__name__} (closest to the def)")
    if isinstance(fn, type):
        return (f"minidynamo.optimize got the class {fn.__qualname__}: optimize a "
                "function (for a module, its forward method)")
    if isinstance(fn, torch.nn.Module):  # optimize() wraps modules in an OptimizedModule first
        return (f"minidynamo.optimize got the nn.Module instance {type(fn).__name__} here: use "
                "minidynamo.optimize(module), which returns an OptimizedModule")
    if not callable(fn):
        return f"minidynamo.optimize needs a function or another callable, got {type(fn).__name__}"
    if not isinstance(fn, types.FunctionType) and _takes_example_inputs(fn):
        return (f"minidynamo.optimize got {type(fn).__name__} object, a backend (it takes example_inputs) "
                "where the function to optimize goes")
    code = getattr(fn.__func__ if isinstance(fn, types.MethodType) else fn, "__code__", None)
    if isinstance(code, types.CodeType) and code.co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR):
        return (f"minidynamo.optimize cannot optimize {fn.__qualname__}: generator and "
                "async functions are not supported")
    return None


def _takes_example_inputs(fn) -> bool:
    """Whether callable `fn` looks like a backend, `(gm, example_inputs)`."""
    try:
        return "example_inputs" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def as_function(fn) -> types.FunctionType:
    """`fn` itself for a Python function; for any other callable (a bound method, a
    functools.partial, an object with `__call__`, a C function such as `torch.add`), a
    Python function calling it, which the trace inlines as it would that call (as
    torch.compile accepts any callable). It is named after `fn`; `__wrapped__` is `fn`."""
    if isinstance(fn, types.FunctionType):
        return fn
    target = fn

    def call(*args, **kwargs):
        return target(*args, **kwargs)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    call.__name__ = name if isinstance(name, str) else type(fn).__name__
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    call.__wrapped__ = fn
    return call


def _where(fn) -> str:
    """Where `fn` (as_function's) is defined, for messages: its own code, or the code of
    the callable it calls (a partial's function, a method's, a `__call__`), or its name."""
    if fn.__code__ is not _CALL_CODE:
        return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
    target = fn.__wrapped__
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None) or getattr(getattr(type(target), "__call__", None), "__code__", None)
    if isinstance(code, types.CodeType):
        return f"{code.co_filename}:{code.co_firstlineno}"
    return f"<{getattr(target, '__qualname__', type(target).__qualname__)}>"


_CALL_CODE = as_function(len).__code__


_MODES = (None, "default", "cudagraphs")


def _inductor_modes() -> tuple:
    from torch._inductor import list_mode_options
    return tuple(m for m in list_mode_options() if m != "default")


def _check_mode(mode):
    if mode in _MODES:
        return
    if isinstance(mode, str) and mode in _inductor_modes():
        raise ValueError(f"mode={mode!r} is one of Inductor's modes: pass backend='inductor' with it "
                         "(as torch.compile runs it)"
                         + ("; for CUDA-graph replay with any backend use mode='cudagraphs'"
                            if mode == "reduce-overhead" else "")
                         + ". minidynamo's own modes: None, 'default', 'cudagraphs'")
    raise ValueError(f"unknown minidynamo mode {mode!r}; choose from None, 'default', 'cudagraphs', "
                     f"or with backend='inductor' one of Inductor's: {', '.join(map(repr, _inductor_modes()))}")


def _inductor_settings(backend, mode, options, dynamic):
    """(backend, mode) with torch.compile's Inductor `mode`/`options` turned into the
    backend that applies them, as torch.compile does; elsewhere they are refused."""
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"minidynamo.optimize: options must be a dict of Inductor settings, not "
                        f"{type(options).__name__}")
    inductor = isinstance(backend, str) and backend == "inductor"
    if options and not inductor:
        raise ValueError(f"minidynamo.optimize: options= are Inductor's settings; backend "
                         f"{_name(backend)!r} takes none (pass backend='inductor', or leave options out)")
    if mode is not None and options:
        raise ValueError("minidynamo.optimize: give mode= or options=, not both (as torch.compile): "
                         "a mode is a set of Inductor options")
    if inductor and (options or mode not in _MODES):
        if mode not in _MODES and not (isinstance(mode, str) and mode in _inductor_modes()):
            _check_mode(mode)
        return inductor_backend(None if mode in _MODES else mode, options, dynamic), \
            (mode if mode in _MODES else None)
    _check_mode(mode)
    return backend, mode


def _name(backend) -> str:
    return backend if isinstance(backend, str) else backend_name(backend)


class _DefaultBackend(str):
    """The default backend name: tells `optimize("debug")` from `optimize("debug", backend=...)`."""


_EAGER = _DefaultBackend("eager")


def optimize(fn=None, *, backend=_EAGER, fullgraph: bool = False, dynamic: bool | None = None, mode=None,
             options: dict | None = None):
    """Trace a function's tensor work into a guarded torch.fx graph: torch.compile's call form.

    `@optimize`, `optimize(fn)`, `optimize(fn, backend=..., fullgraph=True)`, or the
    decorator factory `@optimize(backend=..., ...)`. A first argument is always the
    function to optimize, except a string, which names a backend (`@optimize("eager")`).
    `backend`: a registered name or a callable `backend(gm, example_inputs) -> callable`.
    `dynamic`: None (automatic: a size that changes between calls is traced symbolically
    from then on), True (every input size symbolic from the first call) or False (static:
    each new size is traced again); `mark_dynamic`/`mark_static` pin single dimensions.
    `mode="cudagraphs"` replays the graph as a CUDA graph. With `backend="inductor"`,
    Inductor's modes (`"max-autotune"`, ...) and `options` (its config) go to Inductor,
    as torch.compile passes them.
    """
    if isinstance(fn, str):
        if backend is not _EAGER:
            raise TypeError(f"minidynamo.optimize got two backends: {fn!r} and backend={backend!r}; "
                            "give one, as backend=...")
        fn, backend = None, fn
    _check_backend(backend)
    if type(fullgraph) is not bool:
        raise TypeError(f"minidynamo.optimize: fullgraph must be True or False, not {fullgraph!r}")
    _check_dynamic(dynamic)
    backend = str(backend) if isinstance(backend, str) else backend
    backend, mode = _inductor_settings(backend, mode, options, dynamic)

    def decorator(fn):
        if isinstance(fn, OptimizedFunction):
            fn = fn._fn
        if isinstance(fn, OptimizedModule):
            fn = fn._orig_mod
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, backend, fullgraph, mode, dynamic)
        return OptimizedFunction(fn, backend, fullgraph, mode, dynamic)
    if fn is None:
        return decorator
    if isinstance(fn, (torch.nn.Module, OptimizedModule)):
        return decorator(fn)
    why = _not_optimizable(fn)
    if why is not None:
        # The old form optimize(backend)(fn) lands here: say where a backend goes.
        raise TypeError(f"{why}. The first argument of minidynamo.optimize is the function to "
                        "optimize; pass backends as backend=...: minidynamo.optimize(backend=b)(fn)")
    return decorator(fn)


def _check_backend(backend):
    """A name must be registered; a callable must take (gm, example_inputs)."""
    fn = lookup_backend(backend)
    if isinstance(backend, str):
        return
    try:  # a module's __call__ takes (*args, **kwargs): its forward says what it takes
        sig = inspect.signature(fn.forward if isinstance(fn, torch.nn.Module) else fn)
    except (TypeError, ValueError):  # some builtins and C callables: nothing to read
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise TypeError(f"minidynamo backend {backend_name(backend)!r} takes {sig}: a backend is "
                        "called as backend(gm, example_inputs) and returns a callable that runs "
                        "the graph") from None


def _check_dynamic(dynamic):
    if dynamic is not None and type(dynamic) is not bool:
        raise TypeError(f"minidynamo.optimize: dynamic must be None, False or True, not {dynamic!r}")


# Backends that run the graph as it is, for any sizes: symbolic sizes are computed by its
# own nodes. torch's compiling backends take symbolic inputs where they can (torch_backends.py).
_SIZE_AGNOSTIC = ("eager", "debug", "print", "functional_eager")


def _dynamic_for(backend, mode, dynamic):
    """The dynamic-shape mode an optimized function gets: static where torch's backend
    would specialise the graph to the sizes it was handed anyway."""
    if isinstance(backend, str) and backend not in _SIZE_AGNOSTIC:
        if backend in torch_backend_names() and not takes_symbolic_inputs(backend):
            return False
    return dynamic


def reset():
    """Drop every cache of every optimized function."""
    for cache in list(_all_caches):
        cache.clear()


# The layers below that make optimized functions reach them through optimizing.py.
optimizing.fill(OptimizedFunction, callees.optimized_function)
