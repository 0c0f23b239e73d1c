"""MINIDYNAMO_DUMP=dir (or config.dump_dir): one readable Python file per cache entry.

The file holds the objects the guards refer to (rebuilt as code where they can be), the
graph's code, and the entry function exactly as it runs: guards first, then the graph or
the eager call. Run it with plain Python: it builds inputs that satisfy the guards, calls
the entry and prints the decision.
"""
from __future__ import annotations

import os
import types
import warnings

import torch

from .globalstate import GlobalState
from .convert import guard_miss
from .frame_hook import Region
from .sources import GlobalSource

_HEADER = '''"""minidynamo cache entry {index} of {name} ({where})
kind: {kind}; compiled in {ms:.1f} ms{reason}

Run with plain Python: it rebuilds the arguments of the call that compiled this entry
(tensors with the same metadata, zero-filled), runs the guards on them, prints the decision,
and then runs the entry as the cache would."""
import types

import torch

_MISS = object()


def _tensor(shape, stride, dtype, device, requires_grad):
    t = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    try:
        t.zero_()
    except RuntimeError:  # overlapping memory (an expanded tensor): left as is
        pass
    return t.requires_grad_(requires_grad)


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
    if isinstance(value, Region):  # a dump runs its entry alone: the callees run plainly
        return f"import contextlib; {name} = contextlib.nullcontext()"
    if isinstance(value, type) and value.__module__ == "builtins":
        return f"{name} = type(None)" if value is type(None) else f"{name} = {value.__name__}"
    if isinstance(value, types.ModuleType):
        if not _library(value.__name__):  # importing the user's own code would run it
            return f"{name} = _Unavailable('module {value.__name__}')"
        return f"import importlib; {name} = importlib.import_module({value.__name__!r})"
    if type(value) in (int, float, str, bool, bytes, type(None), tuple) and _literal(value):
        return f"{name} = {value!r}"
    if isinstance(value, dict) and "__name__" in value and "__builtins__" in value:
        return f"{name} = {{}}  # globals of module {value['__name__']!r}: the names the guards read follow"
    if type(value) is float:
        return f"{name} = float({repr(value)!r})"
    if type(value) is list and name.endswith("hits") and all(type(v) is int for v in value):
        return f"{name} = [0]"
    if type(value) in (slice, list, dict, frozenset, set, type(Ellipsis)) and _literal(value):
        return f"{name} = {value!r}"
    if value.__class__.__name__ == "object" and type(value) is object:
        return f"{name} = _MISS"
    if value is guard_miss:
        return f"def {name}(*args, **kwargs):\n    return _MISS  # a guard failed: the cache goes on to its miss path"
    if isinstance(value, types.CellType):
        return f"{name} = types.CellType()  # a closure cell; its contents follow below"
    ref = _importable(value)
    if ref is not None:
        mod, path = ref
        return f"import {mod} as _m; {name} = _m.{path}; del _m" if "." not in mod else \
            f"import importlib; {name} = importlib.import_module({mod!r}).{path}"
    what = getattr(value, "__qualname__", None) or type(value).__name__
    mod = getattr(value, "__module__", None)
    if mod and _library(mod) and "<" not in what and isinstance(value, type):
        return (f"try:\n    import importlib\n    {name} = getattr(importlib.import_module({mod!r}), "
                f"{what!r})\nexcept Exception:\n    {name} = _Unavailable({what!r})")
    return f"{name} = _Unavailable({getattr(value, '__name__', None) or what!r})"


def _c_check_code(name: str, m: dict) -> str:
    """torch's C tensor check, rebuilt from the metadata it was made for."""
    # A symbolic dimension (None) is not checked: any size and stride stands in for it.
    shape = tuple(2 if s is None else s for s in m["shape"])
    stride = tuple(1 if s is None else s for s in m["stride"])
    example = f"_tensor({shape!r}, {stride!r}, {m['dtype']}, {str(m['device'])!r}, {m['requires_grad']!r})"
    if m["type"] is torch.nn.Parameter:
        example = f"torch.nn.Parameter({example}, requires_grad={m['requires_grad']!r})"
    elif m["type"] is not torch.Tensor:
        return f"{name} = _Unavailable('the tensor check of a {m['type'].__name__}')"
    return (f"from torch._C._dynamo.guards import TensorGuards\n{name} = TensorGuards({example}, "
            f"dynamic_dims_sizes=[{list(m['shape'])!r}], dynamic_dims_strides=[{list(m['stride'])!r}]).check")


def _library(module_name: str) -> bool:
    """Only torch, Triton, numpy and the standard library are imported by a dump: importing
    a module of the user's own would run its code."""
    import sys
    top = module_name.split(".")[0]
    stdlib = getattr(sys, "stdlib_module_names", ())
    return top in ("torch", "triton", "numpy", "builtins") or top.lstrip("_") in stdlib or top in stdlib


def _importable(value):
    """(module, attribute path) that gives back `value` itself on import, or None."""
    import importlib
    mod = getattr(value, "__module__", None)
    if not isinstance(mod, str) or not _library(mod) or not callable(value):
        return None
    for path in (getattr(value, "__qualname__", None), getattr(value, "__name__", None)):
        if not isinstance(path, str) or "<" in path:
            continue
        for module_name in (mod, mod.lstrip("_")):
            try:
                obj = importlib.import_module(module_name)
                for part in path.split("."):
                    obj = getattr(obj, part)
            except Exception:
                continue
            if obj is value:
                return module_name, path
    return None


def _value_code(value, names: dict, depth: int = 0) -> str:
    """An expression for one argument of the call: a name bound above, a tensor with the
    same metadata, a literal, or a container of those; None for anything else."""
    ref = names.get(id(value))
    if ref is not None:
        return ref
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor and value.layout == torch.strided:
        return (f"_tensor({tuple(value.shape)}, {tuple(value.stride())}, {value.dtype}, "
                f"{str(value.device)!r}, {value.requires_grad})")
    if depth < 8 and type(value) in (list, tuple):
        inner = ", ".join(_value_code(v, names, depth + 1) for v in value)
        return f"[{inner}]" if type(value) is list else f"({inner}{',' if len(value) == 1 else ''})"
    if depth < 8 and type(value) is dict:
        return "{" + ", ".join(f"{_value_code(k, names, depth + 1)}: {_value_code(v, names, depth + 1)}"
                               for k, v in value.items()) + "}"
    if type(value) is float:
        return f"float({repr(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    if type(value) in (int, str, bool, bytes, type(None), slice) and _literal(value):
        return repr(value)
    ref = _importable(value) if isinstance(value, type) or callable(value) else None
    if ref is not None:
        return f"__import__('importlib').import_module({ref[0]!r}).{ref[1]}"
    return "None"  # an object only the traced process has


def _wiring(entry) -> list[str]:
    """Globals the guards read, and function defaults, linked to the objects above."""
    names = {id(v): n for n, v in entry.ns.values.items()}
    lines = []
    done = set()
    scope = dict(entry.ns.values)
    for g in entry.guards:
        chain, src = [], g.source
        while src is not None:
            chain.append(src)
            src = getattr(src, "base", None)
        if not isinstance(chain[-1], GlobalSource) or names.get(id(chain[-1].globals_dict)) is None:
            continue
        for src in reversed(chain):  # the global first, then attributes/items read from it
            target = src.expr(entry.ns)
            if target in done:
                continue
            done.add(target)
            try:
                value = eval(target, scope)  # noqa: S307 - our own generated expression
            except Exception:
                break
            ref = names.get(id(value))
            lines.append(f"{target} = {ref}" if ref else _object_code(target, value))
    for n, v in entry.ns.values.items():
        if isinstance(v, types.CellType):
            try:
                contents = v.cell_contents
            except ValueError:
                continue
            lines.append(f"{n}.cell_contents = {_value_code(contents, names)}")
        if isinstance(v, types.FunctionType):
            for attr in ("__defaults__", "__kwdefaults__"):
                value = getattr(v, attr)
                ref = names.get(id(value)) if value is not None else None
                if ref:
                    lines.append(f"{n}.{attr} = {ref}")
    return lines


def _literal(v) -> bool:
    try:
        return eval(repr(v), {}) == v  # noqa: S307 - our own repr of a constant
    except Exception:
        return False


def _first_failing(entry, name: str) -> str:
    """A function with the entry's signature returning `source: guard` for the first
    guard that fails (None when all pass), and `_summary` for the printed result."""
    lines = [f"def _first_failing({entry.params}):"]
    for g, e in zip(entry.guards, entry.guard_exprs):
        label = f"{g.source.name()}: {e}"
        lines += ["    try:", f"        if not ({e}):", f"            return {label!r}",
                  "    except Exception:", f"        return {label!r}"]
    lines.append("    return None")
    lines.append("""

def _summary(value):
    if isinstance(value, torch.Tensor):
        return f"tensor {tuple(value.shape)} {value.dtype}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_summary(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)""")
    return "\n".join(lines)


def render(entry, index: int, name: str, where: str, args=None, kwargs=None) -> str:
    reason = f"\nruns eagerly because: {entry.reason}" if entry.reason is not None else ""
    parts = [_HEADER.format(index=index, name=name, where=where, kind=entry.kind,
                            ms=entry.compile_time_ms, reason=reason)]
    parts.append("# --- objects the generated code refers to ---")
    c_checks = {id(g.meta["c_check"]): g.meta for g in entry.guards if g.meta.get("c_check") is not None}
    # torch's C check of the global state stands for the readable condition of the state
    # traced under (computed first: it may name torch in the namespace).
    state_checks = {id(g.expected.c_check): g.code(entry.ns) for g in entry.guards
                    if isinstance(g.expected, GlobalState) and g.expected.c_check is not None}
    for n, v in list(entry.ns.values.items()):
        if entry.compiled is not None and v is entry.compiled:
            continue  # defined after the graph below
        meta = c_checks.get(id(v))
        if id(v) in state_checks:
            parts.append(f"def {n}():  # the global torch state traced under\n    return {state_checks[id(v)]}")
        else:
            parts.append(_object_code(n, v) if meta is None else _c_check_code(n, meta))
    parts.extend(_wiring(entry))
    if entry.gm is not None:
        code = entry.gm.code
        inlined = entry.compiled is None
        parts.append("\n# --- the graph (torch.fx)" + (": the eager backend runs its code inlined in the entry below"
                                                      if inlined else "") + " ---")
        parts.append("import operator")
        # The graph's globals that name the package's own callables (fx names them after
        # their qualified name: a NumPy node, ...): only the traced process has them.
        names = entry.gm.graph.python_code(root_module="self").globals
        for ext in sorted(n for n in names if n.startswith("minidynamo_")):
            parts.append(f"{ext} = _Unavailable({ext!r})")
        parts.append("class Graph(torch.nn.Module):\n    " + code.strip().replace("\n", "\n    "))
        for n, v in entry.ns.values.items():
            if entry.compiled is not None and v is entry.compiled:
                parts.append(f"\n{n} = Graph().forward")
    parts.append("\n# --- the entry: guards, then the graph (or the original function) ---")
    parts.append(entry.source_text)
    parts.append("\n# --- which guard fails first (what the cache's failure record names) ---")
    parts.append(_first_failing(entry, name))
    parts.append("\n\nif __name__ == '__main__':")
    names = {id(v): n for n, v in entry.ns.values.items()}
    if args is None:
        parts.append("    args, kwargs = (), {}  # the call's arguments were not given to the dump")
    else:
        parts.append(f"    args = ({''.join(_value_code(a, names) + ', ' for a in args)})")
        parts.append("    kwargs = {" + ", ".join(f"{k!r}: {_value_code(v, names)}"
                                                  for k, v in (kwargs or {}).items()) + "}")
    parts.append(f"""    failing = _first_failing(*args, **kwargs)
    if failing is not None:
        print('guards: MISS at', failing)
    else:
        print('guards: pass')
        try:
            result = {name}(*args, **kwargs)
        except RuntimeError as e:
            print('then:', e)
        else:
            print('then: ran the entry, result:', _summary(result))""")
    return "\n".join(parts) + "\n"


_unwritable: set = set()  # directories already warned about


def write(entry, index: int, name: str, where: str, directory: str, args=None, kwargs=None) -> str | None:
    """Write entry `index` of function `name` as `<directory>/<name>_entry<index>.py`;
    with the arguments of the call that compiled it, the file rebuilds and checks them.
    A directory that cannot be written to warns once and writes nothing (None): a dump
    must never make the user's call fail."""
    path = os.path.join(directory, f"{name}_entry{index}.py")
    text = render(entry, index, name, where, args, kwargs)
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        key = os.fspath(directory)
        if key not in _unwritable:
            _unwritable.add(key)
            warnings.warn(f"minidynamo: cannot write cache entry dumps to {key!r} "
                          f"(MINIDYNAMO_DUMP / config.dump_dir): {type(e).__name__}: {e}; "
                          "going on without dumps there", RuntimeWarning, stacklevel=2)
        return None
    return path
