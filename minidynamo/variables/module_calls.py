"""Calling a module (one passed in, objects.py; one made in the trace, nn_modules.py):
`module(*args)` is `Module.__call__` (`_call_impl`), which runs its forward and, where there are any, its forward hooks around it, in torch's order:
the process-wide forward pre-hooks, then the module's own; the forward; then the
process-wide forward hooks, then the module's own.

The hooks are traced like any callee: each is read from its dict by handle id and wrapped
by the builder (which guards what it assumes of it: a function's identity, a lambda's code);
the keys of every hook dict the call consulted are guarded, so adding or removing a hook
recompiles, and an empty dict is guarded to stay empty. A hook that cannot be traced
declines the call as any callee does (the call then runs natively, hooks and all, once).

Backward hooks (the module's `_backward_hooks` / `_backward_pre_hooks`, the process-wide
ones) are not traced: torch wraps the inputs and outputs in a BackwardHook autograd
function; a module with one declines. `always_call` hooks differ only when the forward
raises, which a trace never does (it declines): they are called as the others.
See torch/nn/modules/module.py `Module._call_impl`."""
from __future__ import annotations

import torch

from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource, ObjectSource
from .dicts import DictVariable
from .lists import TupleVariable

_module_py = torch.nn.modules.module
_MODULE_PY_SOURCE = ObjectSource(_module_py, "torch.nn.modules.module")

# The module's own hook dicts and the process-wide ones `_call_impl` reads, in pairs.
_FORWARD_PRE = ("_global_forward_pre_hooks", "_forward_pre_hooks")
_FORWARD = ("_global_forward_hooks", "_forward_hooks")
# Which of them are not traced, with how such a hook is registered (for the message).
_BACKWARD = {
    "_backward_hooks": "register_full_backward_hook / register_backward_hook",
    "_backward_pre_hooks": "register_full_backward_pre_hook",
    "_global_backward_hooks": "register_module_full_backward_hook / register_module_backward_hook",
    "_global_backward_pre_hooks": "register_module_full_backward_pre_hook",
}
# (In the order NO_HOOKS guards have always named them: one guard, whoever adds it.)
_OWN = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL = tuple(a for a in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                            "_global_backward_pre_hooks") if hasattr(_module_py, a))


def hooks_present(module) -> list:
    """The hook dicts, the module's own and the process-wide ones, that are not empty."""
    return [a for a in _OWN if getattr(module, a, None)] + [a for a in _GLOBAL if getattr(_module_py, a, None)]


def call_module(tx, module, args, kwargs):
    """`module(*args, **kwargs)` for a UserObjectVariable of an nn.Module whose class keeps
    Module.__call__: its forward, with its forward hooks and the process-wide ones traced
    around it; guarded that the set of hooks stays."""
    hooks = _read_hooks(tx, module.value, module.source, type(module.value).__qualname__)
    return _call_impl(tx, module, hooks, args, kwargs, lambda a, k: module.call_method(tx, "forward", a, k))


def call_new_module(tx, module, args, kwargs, forward):
    """The call of a module made in the trace (nn_modules.py): it has no hooks of its own
    (a fresh module, whose hook dicts the trace never hands out); the process-wide ones
    are traced around `forward(args, kwargs)`, guarded like a passed-in module's."""
    return _call_impl(tx, module, _read_hooks(tx, None, None, module.describe()), args, kwargs, forward)


def _call_impl(tx, module, hooks, args, kwargs, forward):
    """`Module._call_impl` over trackers: the pre-hooks, `forward(args, kwargs)`, the hooks."""
    pre, post = hooks
    if not pre and not post:
        return forward(args, kwargs)
    args_var, kwargs_var = TupleVariable(list(args)), DictVariable(dict(kwargs))
    for hook, with_kwargs in pre:
        if with_kwargs:  # hook(module, args, kwargs) -> None or (args, kwargs)
            got = hook.call_function(tx, [module, args_var, kwargs_var], {})
            if not _is_none(got):
                pair = got.iter_items(tx) if _is_tuple(got) else None
                if pair is None or len(pair) != 2:
                    unsupported("exceptions", "RuntimeError: forward pre-hook must return None or a tuple "
                                              f"of (new_args, new_kwargs), but got {got.describe()}")
                args_var, kwargs_var = pair
        else:  # hook(module, args) -> None, a new args tuple, or one value (a 1-tuple)
            got = hook.call_function(tx, [module, args_var], {})
            if not _is_none(got):
                args_var = got if _is_tuple(got) else TupleVariable([got])
    result = forward(args_var.iter_items(tx), _keywords(kwargs_var))
    for hook, with_kwargs in post:  # hook(module, args, [kwargs,] output) -> None or a new output
        got = hook.call_function(tx, [module, args_var, kwargs_var, result] if with_kwargs
                                 else [module, args_var, result], {})
        if not _is_none(got):
            result = got
    return result


def _read_hooks(tx, module, source, what: str) -> tuple[list, list]:
    """The forward pre-hooks and forward hooks `_call_impl` runs for `module` (None: a
    module made in the trace, only the process-wide ones), in order, as (hook tracker,
    with_kwargs) pairs; declines where a backward hook is set. Guards every hook dict
    read: an empty one stays empty, a non-empty one keeps its keys."""
    own = {a: getattr(module, a) for a in _OWN if hasattr(module, a)} if module is not None else {}
    shared = {a: getattr(_module_py, a) for a in _GLOBAL}
    backward = [a for a in _BACKWARD if own.get(a) or shared.get(a)]
    if backward:
        how = "; ".join(f"{a} ({_BACKWARD[a]})" for a in backward)
        unsupported("call", f"{what} has backward hooks, which are not traced: {how}")
    if module is not None:
        if source is None:
            unsupported("call", f"calling a {what} that is not reachable from the function's inputs "
                                "(its hooks could not be checked on later calls)")
        _guard_hook_dicts(tx, source, own)
    _guard_hook_dicts(tx, _MODULE_PY_SOURCE, shared)
    pre, post = [], []
    if own.get(_FORWARD_PRE[1]) or shared.get(_FORWARD_PRE[0]):
        # NOTE: torch asks the module's with_kwargs dict about the process-wide pre-hooks too.
        with_kwargs = _keys(tx, module, source, "_forward_pre_hooks_with_kwargs") if module is not None \
            else frozenset()
        pre = [(hook, hook_id in with_kwargs) for hook_id, hook in _hooks(tx, own, shared, source, _FORWARD_PRE)]
    if own.get(_FORWARD[1]) or shared.get(_FORWARD[0]):
        with_kwargs = _keys(tx, _module_py, _MODULE_PY_SOURCE, "_global_forward_hooks_with_kwargs")
        if module is not None:
            with_kwargs |= _keys(tx, module, source, "_forward_hooks_with_kwargs")
        post = [(hook, hook_id in with_kwargs) for hook_id, hook in _hooks(tx, own, shared, source, _FORWARD)]
    return pre, post


def _guard_hook_dicts(tx, source, dicts: dict) -> None:
    """One NO_HOOKS guard over the empty hook dicts of `dicts` (name -> dict, read from
    `source`), the keys of each other one."""
    empty = tuple(a for a, d in dicts.items() if not d)
    if empty:
        tx.output.guards.add(Guard("NO_HOOKS", source, None, {"attrs": empty}))
    for a, d in dicts.items():
        if d:
            _guard_keys(tx, AttrSource(source, a), d)


def _guard_keys(tx, source, d) -> None:
    tx.output.guards.add(Guard("DICT_KEYS", source, tuple(d), {"type": type(d)}))


def _keys(tx, obj, source, attr: str) -> frozenset:
    """The keys of `obj.attr` (a with_kwargs dict), guarded; empty where there is none."""
    d = getattr(obj, attr, None)
    if d is None:
        return frozenset()
    _guard_keys(tx, AttrSource(source, attr), d)
    return frozenset(d)


def _hooks(tx, own: dict, shared: dict, source, names: tuple) -> list:
    """(handle id, hook tracker) of the process-wide dict `names[0]` then the module's own
    `names[1]`, each hook wrapped from its item of the dict."""
    out = []
    for d, base in ((shared.get(names[0]), AttrSource(_MODULE_PY_SOURCE, names[0])),
                    (own.get(names[1]), AttrSource(source, names[1]))):
        for hook_id, hook in (d or {}).items():
            out.append((hook_id, tx.wrap(hook, ItemSource(base, hook_id))))
    return out


def _is_none(v) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _is_tuple(v) -> bool:
    return isinstance(v, TupleVariable) or issubclass(v.python_type(), tuple)


def _keywords(kwargs_var) -> dict:
    """`**kwargs` of the forward call: a dict tracker with string keys."""
    if not isinstance(kwargs_var, DictVariable):
        unsupported("construct", f"a forward pre-hook returned kwargs {kwargs_var.describe()}, not a dict")
    out = {}
    for k, v in kwargs_var.items.items():
        if not isinstance(k, str):
            unsupported("exceptions", "TypeError: keywords must be strings")
        out[k] = v
    return out
