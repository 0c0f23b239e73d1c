"""Generated Python for cache entries: one function per entry, with the user's own
signature, that checks the guards and then runs the compiled graph (or the original
function, for an eager fallback) and rebuilds the return value.

The text is kept: explain(), the logs and MINIDYNAMO_DUMP show exactly what runs.
"""
from __future__ import annotations

import inspect

from .sources import Namespace

MISS = object()  # returned by an entry whose guards fail


def signature_parts(fn, ns: Namespace) -> tuple[str, str]:
    """(parameter list text, call argument text) reproducing `fn`'s signature."""
    sig = inspect.signature(fn, follow_wrapped=False)
    params, call = [], []
    saw_posonly = saw_star = False
    for p in sig.parameters.values():
        default = "" if p.default is p.empty else f"={ns.bind(p.default, 'd')}"
        if p.kind is p.POSITIONAL_ONLY:
            saw_posonly = True
            params.append(p.name + default)
            call.append(p.name)
            continue
        if saw_posonly:
            params.append("/")
            saw_posonly = False
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            params.append(p.name + default)
            call.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            saw_star = True
            params.append("*" + p.name)
            call.append("*" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not saw_star:
                params.append("*")
                saw_star = True
            params.append(p.name + default)
            call.append(f"{p.name}={p.name}")
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            call.append("**" + p.name)
    if saw_posonly:
        params.append("/")
    return ", ".join(params), ", ".join(call)


def pick_prefix(fn) -> str:
    """A prefix for generated names that no parameter of `fn` uses."""
    names = set(fn.__code__.co_varnames)
    prefix = "_md_"
    while any(n.startswith(prefix) for n in names):
        prefix = "_" + prefix
    return prefix


def guard_block(guard_exprs: list[str], miss: str, indent: str = "    ") -> list[str]:
    if not guard_exprs:
        return []
    cond = (" and\n" + indent + "        ").join(f"({e})" for e in guard_exprs)
    return [
        f"{indent}try:",
        f"{indent}    if not ({cond}):",
        f"{indent}        return {miss}",
        f"{indent}except Exception:",
        f"{indent}    return {miss}",
    ]


def build_function(name: str, params: str, body: list[str], ns: Namespace, filename: str):
    """exec a factory that closes over the namespace (fast cell loads, not dict lookups)."""
    factory_args = ", ".join(ns.values)
    lines = [f"def {name}({params}):", *body]
    inner = "\n".join("    " + line for line in lines)
    src = f"def __make({factory_args}):\n{inner}\n    return {name}\n"
    scope: dict = {}
    exec(compile(src, filename, "exec"), scope)
    return scope["__make"](*ns.values.values()), "\n".join(lines)


def failure_finder(name: str, params: str, guard_exprs: list[str], ns: Namespace):
    """A function with the user's signature returning (index of the first failing guard,
    the value its source had), or (-1, None) when all pass."""
    body = []
    for i, e in enumerate(guard_exprs):
        body += [
            "    try:",
            f"        if not ({e}):",
            f"            return {i}",
            "    except Exception:",
            f"        return {i}",
        ]
    body.append("    return -1")
    fn, _ = build_function(name, params, body, ns, "<minidynamo guards>")
    return fn


def source_reader(name: str, params: str, exprs: list[str], ns: Namespace):
    """A function with the user's signature returning the value of source `i`."""
    body = ["    _md_values = []"]
    for e in exprs:
        body += ["    try:", f"        _md_values.append({e})", "    except Exception as _md_e:",
                 "        _md_values.append(_md_e)"]
    body.append("    return _md_values")
    fn, _ = build_function(name, params, body, ns, "<minidynamo guards>")
    return fn
