"""Call arguments bound to a function's parameters as CPython binds them (the translator
inlining a call, autograd.Function's forward, a namedtuple's __new__). Layer: trackers."""
from __future__ import annotations

import types

from .._compat import CO_VARARGS, CO_VARKEYWORDS
from ..exc import builtin_raises, unsupported
from .constant import ConstantVariable
from .dicts import DictVariable
from .functions import UserFunctionVariable
from .lists import TupleVariable


def bind_arguments(fn_var, tx, code, args: list, kwargs: dict) -> dict:
    """Bind call arguments to the parameters of `code`, as CPython does; a mismatch is
    the user's TypeError, which the eager run raises for real."""
    name = fn_var.get_name() if hasattr(fn_var, "get_name") else code.co_name
    nargs, nkwonly, nposonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    names = code.co_varnames
    positional = names[:nargs]
    kwonly = names[nargs:nargs + nkwonly]
    idx = nargs + nkwonly
    varargs = names[idx] if code.co_flags & CO_VARARGS else None
    idx += 1 if varargs else 0
    varkw = names[idx] if code.co_flags & CO_VARKEYWORDS else None

    def fail(msg):
        text = _binding_error(fn_var, tx, code, len(args), list(kwargs))
        if text is not None:  # CPython's own message: raised in the trace, a try may catch it
            builtin_raises(TypeError, [ConstantVariable(text)], f"TypeError: {text}")
        unsupported("exceptions", f"TypeError: {name}() {msg}")

    if isinstance(fn_var, UserFunctionVariable):
        fn_var.guard_code(tx)

    bound: dict = {}
    for pname, value in zip(positional, args):
        bound[pname] = value
    extra = args[nargs:]
    if extra and varargs is None:
        fail(f"takes {nargs} positional arguments but {len(args)} were given")
    extra_kw = {}
    for k, v in kwargs.items():
        if k in kwonly or (k in positional and positional.index(k) >= nposonly):
            if k in bound:
                fail(f"got multiple values for argument {k!r}")
            bound[k] = v
        elif varkw is not None:
            extra_kw[k] = v
        else:
            fail(f"got an unexpected keyword argument {k!r}")
    defaults = fn_var.defaults(tx)
    first_default = nargs - len(defaults)
    for i, pname in enumerate(positional):
        if pname not in bound:
            if i >= first_default:
                bound[pname] = defaults[i - first_default]
            else:
                fail(f"missing required positional argument: {pname!r}")
    kwdefaults = fn_var.kwdefaults(tx)
    for pname in kwonly:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                fail(f"missing required keyword-only argument: {pname!r}")
    if varargs is not None:
        bound[varargs] = TupleVariable(extra)
    if varkw is not None:
        bound[varkw] = DictVariable(extra_kw)
    return bound


def _stub():
    pass


def _binding_error(fn_var, tx, code, nargs: int, keywords: list) -> str | None:
    """The text of the TypeError CPython raises binding `nargs` positional arguments and
    `keywords` to the parameters of `code`: a function of the same parameters, defaults
    and name, with an empty body, called with placeholders (its message depends on the
    parameters and the argument names only). None where that call does not raise it."""
    flags = code.co_flags & (CO_VARARGS | CO_VARKEYWORDS)
    nparams = code.co_argcount + code.co_kwonlyargcount + bool(flags & CO_VARARGS) + bool(flags & CO_VARKEYWORDS)
    names = code.co_varnames[:nparams]
    try:
        stub_code = _stub.__code__.replace(
            co_argcount=code.co_argcount, co_posonlyargcount=code.co_posonlyargcount,
            co_kwonlyargcount=code.co_kwonlyargcount, co_varnames=names, co_nlocals=nparams,
            co_flags=_stub.__code__.co_flags | flags, co_name=code.co_name)
        stub = types.FunctionType(stub_code, {}, code.co_name, (None,) * len(fn_var.defaults(tx)))
        stub.__kwdefaults__ = dict.fromkeys(fn_var.kwdefaults(tx)) or None
    except Exception:  # noqa: BLE001 - not modeled: declines as before
        return None
    real = getattr(fn_var, "fn", None)
    if real is not None:
        qualname = real.__qualname__
        if qualname != getattr(code, "co_qualname", qualname):
            return None  # renamed: the guards pin its code, not its name
    elif "__qualname__" in getattr(fn_var, "attrs", {}):
        return None
    else:
        qualname = getattr(code, "co_qualname", None) or fn_var.get_name()
    stub.__qualname__ = qualname
    try:
        stub(*(None,) * nargs, **dict.fromkeys(keywords))
    except TypeError as e:
        return str(e)
    return None
