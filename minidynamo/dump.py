"""MINIDYNAMO_DUMP=dir (or config.dump_dir): one readable Python file per cache entry.

The file holds the objects the guards refer to (rebuilt as code where they can be), the
graph's code, and the entry function exactly as it runs: guards first, then the graph or
the eager call. Run it with plain Python: it builds inputs that satisfy the guards, calls
the entry and prints the decision.
"""
from __future__ import annotations

import os
import re
import types

import torch

_HEADER = '''"""minidynamo cache entry {index} of {name} ({where})
kind: {kind}; compiled in {ms:.1f} ms{reason}

Run with plain Python to check the guards against inputs built from them."""
import torch

_MISS = object()


class _Unavailable:
    """An object that only exists in the traced process (a kernel, a compiled graph...)."""

    def __init__(self, what):
        self.what = what

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{{self.what}} is not available outside the traced process")

    def __getattr__(self, name):
        raise RuntimeError(f"{{self.what}} is not available outside the traced process")
'''


def _object_code(name: str, value) -> str:
    """Python source that rebuilds `value`, or an _Unavailable stand-in."""
    if isinstance(value, torch.dtype):
        return f"{name} = {value}"
    if isinstance(value, torch.device):
        return f"{name} = torch.device({str(value)!r})"
    if value is torch.Tensor:
        return f"{name} = torch.Tensor"
    if isinstance(value, type) and value.__module__ == "builtins":
        return f"{name} = {value.__name__}"
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}" if "." not in value.__name__ else \
            f"import importlib; {name} = importlib.import_module({value.__name__!r})"
    if type(value) in (int, float, str, bool, bytes, type(None), tuple) and _literal(value):
        return f"{name} = {value!r}"
    if isinstance(value, dict) and "__name__" in value and "__builtins__" in value:
        return f"{name} = {{}}  # globals of module {value['__name__']!r}: the names the guards read follow"
    if type(value) is list and all(type(v) is int for v in value):
        return f"{name} = [0]"
    if value.__class__.__name__ == "object" and type(value) is object:
        return f"{name} = _MISS"
    what = getattr(value, "__qualname__", None) or type(value).__name__
    mod = getattr(value, "__module__", None)
    if mod and mod != "__main__" and "<" not in what and isinstance(value, type):
        return (f"try:\n    import importlib\n    {name} = getattr(importlib.import_module({mod!r}), "
                f"{what!r})\nexcept Exception:\n    {name} = _Unavailable({what!r})")
    return f"{name} = _Unavailable({what!r})"


def _wiring(entry) -> list[str]:
    """Globals the guards read, and function defaults, linked to the objects above."""
    from .sources import GlobalSource
    names = {id(v): n for n, v in entry.ns.values.items()}
    lines = []
    seen = set()
    for g in entry.guards:
        src = g.source
        while src is not None and not isinstance(src, GlobalSource):
            src = getattr(src, "base", None)
        if src is None or (id(src.globals_dict), src.global_name) in seen:
            continue
        seen.add((id(src.globals_dict), src.global_name))
        gname = names.get(id(src.globals_dict))
        value = src.globals_dict.get(src.global_name)
        if gname is None:
            continue
        ref = names.get(id(value))
        lines.append(f"{gname}[{src.global_name!r}] = {ref}" if ref else
                     _object_code(f"{gname}[{src.global_name!r}]", value))
    for n, v in entry.ns.values.items():
        if isinstance(v, types.FunctionType):
            for attr in ("__defaults__", "__kwdefaults__"):
                ref = names.get(id(getattr(v, attr)))
                if ref:
                    lines.append(f"{n}.{attr} = {ref}")
    return lines


def _literal(v) -> bool:
    try:
        return eval(repr(v), {}) == v  # noqa: S307 - our own repr of a constant
    except Exception:
        return False


def _example_inputs(entry) -> list[str]:
    """`name = torch.empty_strided(...)` for each argument a TENSOR_MATCH guard pins."""
    lines = []
    for g in entry.guards:
        if g.kind == "TENSOR_MATCH" and re.fullmatch(r"[A-Za-z_]\w*", g.source.expr(entry.ns)):
            m = g.meta
            lines.append(f"    {g.source.expr(entry.ns)} = torch.empty_strided({m['shape']}, {m['stride']}, "
                         f"dtype={m['dtype']}, device={str(m['device'])!r}, "
                         f"requires_grad={m['requires_grad']})")
    return lines


def render(entry, index: int, name: str, where: str) -> str:
    reason = f"\nruns eagerly because: {entry.reason}" if entry.reason is not None else ""
    parts = [_HEADER.format(index=index, name=name, where=where, kind=entry.kind,
                            ms=entry.compile_time_ms, reason=reason)]
    parts.append("# --- objects the generated code refers to ---")
    for n, v in entry.ns.values.items():
        if entry.gm is not None and v is entry.compiled:
            continue  # defined after the graph below
        parts.append(_object_code(n, v))
    parts.extend(_wiring(entry))
    if entry.gm is not None:
        code = entry.gm.code
        parts.append("\n# --- the graph (torch.fx) ---")
        parts.append("import operator")
        for ext in sorted(set(re.findall(r"\bminidynamo_\w+", code))):
            parts.append(f"{ext} = _Unavailable({ext!r})")
        parts.append("class Graph(torch.nn.Module):" + code.replace("\n", "\n    ").rstrip())
        for n, v in entry.ns.values.items():
            if v is entry.compiled:
                parts.append(f"\n{n} = Graph().forward")
    parts.append("\n# --- the entry: guards, then the graph (or the original function) ---")
    parts.append(entry.source_text)
    parts.append("\n\nif __name__ == '__main__':")
    inputs = _example_inputs(entry)
    if inputs:
        parts.extend(inputs)
        call_args = ", ".join(line.split("=")[0].strip() for line in inputs)
        parts.append("    try:")
        parts.append(f"        result = {name}({call_args})")
        parts.append("        print('guards:', 'MISS' if result is _MISS else 'pass')")
        parts.append("    except RuntimeError as e:")
        parts.append("        print('guards: pass; then', e)")
    else:
        parts.append("    print('this entry guards no tensor arguments')")
    return "\n".join(parts) + "\n"


def write(entry, index: int, name: str, where: str, directory: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}_entry{index}.py")
    with open(path, "w") as f:
        f.write(render(entry, index, name, where))
    return path
