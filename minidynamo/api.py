"""The public entry point: `optimize` and the OptimizedFunction wrapper it returns."""
from __future__ import annotations

import functools
import inspect
import keyword
import types
import weakref

from .backends import lookup_backend
from .cache import FunctionCache
from .codegen import MISS, dispatcher

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

    def __init__(self, fn, backend="eager", fullgraph: bool = False, mode=None):
        _check_optimizable(fn)
        lookup_backend(backend)  # bad backend names fail here, not at the first call
        if mode not in _MODES:
            raise ValueError(f"unknown minidynamo mode {mode!r}; choose from {sorted(m for m in _MODES if m)}")
        if mode == "cudagraphs":
            from .cudagraphs import wrap_backend
            backend = wrap_backend(lookup_backend(backend))
        self.mode = mode
        self._fn = fn
        code = fn.__code__
        where = f"{code.co_filename}:{code.co_firstlineno}"
        # The name becomes the generated entry's def name: `<lambda>` is no identifier.
        name = fn.__name__ if fn.__name__.isidentifier() and not keyword.iskeyword(fn.__name__) \
            else "fn_" + "".join(c if c.isalnum() else "_" for c in fn.__name__).strip("_")
        self._cache = FunctionCache(fn, backend, fullgraph, name, where)
        self._cache.on_change = self._install_call
        _all_caches.add(self._cache)
        functools.update_wrapper(self, fn)
        self.__signature__ = inspect.signature(fn, follow_wrapped=False)

    def __call__(self, *args, **kwargs):
        # The general path; _install_call puts a generated one in the instance's class.
        for entry in self._cache.entries:
            result = entry.run(*args, **kwargs)
            if result is not MISS:
                return result
        return self._cache.miss(args, kwargs)

    def _install_call(self):
        cls, entries, fn = type(self), self._cache.entries, self._fn
        if cls is OptimizedFunction:
            return
        # A staticmethod: called with the arguments alone, so a call with wrong arguments
        # raises exactly the TypeError the user's function would.
        if len(entries) == 1 and entries[0].fast_call is not None:
            cls.__call__ = staticmethod(entries[0].fast_call)
        elif entries and fn.__defaults__ is None and fn.__kwdefaults__ is None:
            cls.__call__ = staticmethod(dispatcher(self._cache.name, fn, [e.run for e in entries],
                                                   self._cache.call_slow))
        else:
            cls.__call__ = OptimizedFunction.__call__

    def __get__(self, obj, objtype=None):
        # Used as a method: bind like a function would.
        return self if obj is None else types.MethodType(self, obj)

    def cache_entries(self):
        return list(self._cache.entries)

    def guard_failures(self):
        return list(self._cache.failures)

    def reset(self):
        self._cache.clear()

    def __repr__(self):
        return f"<minidynamo optimized {self._fn.__qualname__}>"


def _check_optimizable(fn):
    if isinstance(fn, OptimizedFunction):
        return
    if isinstance(fn, (staticmethod, classmethod)):
        raise TypeError(f"minidynamo.optimize got a {type(fn).__name__} object: apply "
                        f"@minidynamo.optimize below @{type(fn).__name__} (closest to the def)")
    if isinstance(fn, types.MethodType):
        raise TypeError("minidynamo.optimize got a bound method: optimize the function "
                        "(decorate the def in the class body), or wrap a lambda calling it")
    if isinstance(fn, type):
        raise TypeError(f"minidynamo.optimize got the class {fn.__qualname__}: optimize a "
                        "function (for a module, its forward method)")
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)) or (
            callable(fn) and not isinstance(fn, types.FunctionType) and not hasattr(fn, "__code__")):
        raise TypeError(f"minidynamo.optimize needs a Python function; "
                        f"{getattr(fn, '__qualname__', type(fn).__name__)!r} has no Python bytecode")
    if not callable(fn):
        raise TypeError(f"minidynamo.optimize needs a Python function, got {type(fn).__name__}")
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"minidynamo.optimize needs a Python function, got {type(fn).__name__}")
    from ._compat import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
    if fn.__code__.co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR):
        raise TypeError(f"minidynamo.optimize cannot optimize {fn.__qualname__}: generator and "
                        "async functions are not supported")


_MODES = (None, "default", "cudagraphs")


def optimize(backend="eager", *, fullgraph: bool = False, mode=None):
    """Trace a function's tensor work into a guarded torch.fx graph.

    Usable bare (`@optimize`), called (`@optimize()`, `@optimize("eager")`,
    `@optimize(backend=fn, fullgraph=True)`), or as `optimize(backend)(fn)`.
    `mode="cudagraphs"` records the captured graph as a CUDA graph and replays it.
    """
    if isinstance(backend, types.FunctionType) and _looks_like_user_function(backend):
        return OptimizedFunction(backend)
    if isinstance(backend, type) or isinstance(backend, (types.BuiltinFunctionType, types.MethodType,
                                                          staticmethod, classmethod)):
        # Neither a backend nor something optimize can trace: say which, as for fn itself.
        _check_optimizable(backend)

    def decorator(fn):
        if isinstance(fn, OptimizedFunction):
            fn = fn._fn
        return OptimizedFunction(fn, backend, fullgraph, mode)
    lookup_backend(backend)
    return decorator


def _looks_like_user_function(fn) -> bool:
    """Bare @optimize passes the user's function where the backend goes. A backend takes
    exactly (gm, example_inputs); anything else is the function to optimize."""
    params = list(inspect.signature(fn).parameters.values())
    return not (len(params) == 2 and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                         and p.default is p.empty for p in params)
                and params[0].name in ("gm", "graph_module", "graph", "model", "fx_graph", "module"))


def reset():
    """Drop every cache of every optimized function."""
    for cache in list(_all_caches):
        cache.clear()
