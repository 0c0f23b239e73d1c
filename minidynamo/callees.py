"""What a graph break calls in place of a call that declined inside: the callee run as a
frame of its own, optimized (its own graphs and breaks), as torch.compile's frame hook
would compile it. A Python function or method; an nn.Module's forward, while the module
runs plainly; an autograd.Function, through a subclass whose forward and backward are
optimized. Each is made once per object, backend and dynamic-shape mode (the one of the
optimized function whose call broke: `dynamic=False` reaches its callees).
"""
from __future__ import annotations

import inspect
import types
import weakref

from . import optimizing
from .frame_hook import run_plainly, torch_code_optimized
from .variables.functions import UserFunctionVariable, UserMethodVariable
from .variables.objects import UserObjectVariable
from .variables.purity import is_compiler_disabled
from .variables.module_calls import hooks_present

# function / Function class / module class → {(what, (backend key, dynamic)): the optimized callable}
_made: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _backend_key(backend, dynamic=None):
    return backend if isinstance(backend, str) else id(backend), dynamic


def _once(obj, what: str, backend, make, dynamic=None):
    per_obj = _made.setdefault(obj, {})
    key = (what, _backend_key(backend, dynamic))
    found = per_obj.get(key)
    if found is None:
        found = per_obj[key] = make()
    return found


def optimizable_callee(fn):
    """(function, self tracker or None) for a call the break may run optimized: a plain
    Python function (or a method of one) that is not torch's own and not disabled."""
    obj = None
    if isinstance(fn, UserMethodVariable):
        fn, obj = fn.func, fn.obj
    if not isinstance(fn, UserFunctionVariable):
        return None
    func = optimizable_callee_function(fn.fn)
    return None if func is None else (func, obj)


def optimizable_callee_function(func):
    """`func` when a break may run it optimized on its own: a plain Python function, not
    torch's own (but for torch.nn's containers), not disabled, not a generator or coroutine."""
    if not isinstance(func, types.FunctionType):
        return None
    module = getattr(func, "__module__", None) or ""
    if (module == "torch" or module.startswith("torch.")) and not torch_code_optimized(func.__code__) \
            or module.startswith("minidynamo") or is_compiler_disabled(func):
        return None
    if getattr(func, "_minidynamo_resume", None) is not None or func.__code__.co_flags & 0x2A0:
        return None  # generators, coroutines
    return func


def optimized_function(func, backend, dynamic=None):
    """The optimized version of `func` that breaks in callees use."""
    return _once(func, "function", backend, lambda: optimizing.OptimizedFunction(func, backend, dynamic=dynamic),
                 dynamic)


def optimized_apply(cls, backend, dynamic=None):
    """`apply` of a subclass of the autograd.Function `cls` whose forward and backward are
    optimized functions: where the forward cannot be captured as one Function node, its
    frames still are (with breaks), as they would be when torch calls them."""
    import torch

    def make():
        attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        for name in ("forward", "backward"):
            method = getattr(cls, name)
            if isinstance(method, types.FunctionType) and method is not getattr(torch.autograd.Function, name):
                optimized = optimized_function(method, backend, dynamic)
                # torch's apply reads forward's code to place keyword arguments: hand it the
                # function's own (a plain function with it, calling the optimized one)
                attrs[name] = staticmethod(_with_code(optimized, method))
        return type(cls.__name__, (cls,), attrs).apply
    return _once(cls, "apply", backend, make, dynamic)


def _with_code(optimized, fn):
    """A plain function with `fn`'s parameters (torch's C apply reads forward's __code__ to
    place keyword arguments) whose body calls `optimized` with them."""
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    positional = names[:code.co_argcount]
    keyword = names[code.co_argcount:]
    params, call = list(positional), list(positional)
    extra = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & inspect.CO_VARARGS:
        star = code.co_varnames[extra]
        params.append("*" + star)
        call.append("*" + star)
        extra += 1
    elif keyword:
        params.append("*")
    params += keyword
    call += [f"{k}={k}" for k in keyword]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + code.co_varnames[extra])
        call.append("**" + code.co_varnames[extra])
    scope = {"_optimized": optimized}
    exec(f"def {code.co_name}({', '.join(params)}):\n    return _optimized({', '.join(call)})", scope)  # noqa: S102
    wrapper = scope[code.co_name]
    wrapper.__defaults__, wrapper.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    wrapper.__qualname__, wrapper.__module__, wrapper.__wrapped__ = fn.__qualname__, fn.__module__, fn
    return wrapper


def optimized_module_call(fn, backend, dynamic=None):
    """For a call of an nn.Module whose forward declined: a function calling the module
    with its forward optimized on its own, while the module runs plainly (its class's
    forward, no hooks); else the module itself is called. None: not such a module."""
    import torch
    if not isinstance(fn, UserObjectVariable) or not isinstance(fn.value, torch.nn.Module):
        return None
    cls = type(fn.value)
    forward = getattr(cls, "forward", None)
    if cls.__call__ is not torch.nn.Module.__call__ or optimizable_callee_function(forward) is None:
        return None

    def make():
        optimized = optimized_function(forward, backend, dynamic)

        def call(module, *args, **kwargs):
            if type(module).forward is forward and "forward" not in module.__dict__ \
                    and not hooks_present(module):
                return optimized(module, *args, **kwargs)
            return module(*args, **kwargs)
        # Under the frame hook this frame is the package's, whose whole subtree would run
        # plainly: marked to run plainly itself, so a module called with hooks has its
        # forward (and the hooks) offered to the optimizer as frames of their own.
        run_plainly(call.__code__)
        return call
    return _once(cls, "module call", backend, make, dynamic)


def optimized_callees(backend) -> list:
    """The optimized functions made for `backend` so far (under any dynamic-shape mode)."""
    backend_key = _backend_key(backend)[0]
    return [found for per_obj in list(_made.values()) for (what, (b, _)), found in list(per_obj.items())
            if what == "function" and b == backend_key]


def chain_caches(cache, backend) -> list:
    """The caches a call of the optimized function with `cache` can fill: its own, its
    resume functions', and those of the callees optimized for `backend` with theirs."""
    out = []
    for c in [cache, *(o._cache for o in optimized_callees(backend))]:
        out += [c, *(r._cache for r in c.resume_fns.values())]
    return out
