"""How a replayed launch reaches a compiled kernel: the C entry of its launcher object
where the installed Triton's calling convention is recognised, else ``CompiledKernel.run``.

Every launch has the same standard arguments, Triton's own call in ``JITFunction.run``:
``(grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,
enter_hook, exit_hook, *kernel_args)``. `EntryCall` says how those map onto the
arguments of the callable the generated code calls; `render_call` writes that call.
"""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass

# Positions of the standard arguments (the kernel's own follow them).
GRID_X, GRID_Y, GRID_Z, STREAM, FUNCTION, METADATA, LAUNCH_METADATA, ENTER_HOOK, EXIT_HOOK = range(9)
N_STANDARD = 9
_SCRATCH_LOCALS = ("global_scratch", "profile_scratch")


@dataclass(frozen=True)
class Standard:
    """The standard argument at `position`."""

    position: int

    def render(self, standard, kernel_args, names) -> list:
        return [standard[self.position]]


@dataclass(frozen=True)
class KernelArgs:
    """The kernel's own arguments, spliced in."""

    def render(self, standard, kernel_args, names) -> list:
        return list(kernel_args)


@dataclass(frozen=True)
class KernelArgsTuple:
    """One tuple: the standard arguments at `rest`, then the kernel's (a launcher whose
    ``*args`` holds what follows its own parameters)."""

    rest: tuple

    def render(self, standard, kernel_args, names) -> list:
        items = [standard[i] for i in self.rest] + list(kernel_args)
        return ["(" + "".join(x + ", " for x in items) + ")"]


@dataclass(frozen=True)
class LauncherAttribute:
    """An attribute of the launcher object, bound as it is."""

    name: str
    value: object

    def render(self, standard, kernel_args, names) -> list:
        return [names.const(self.value, self.name)]


@dataclass(frozen=True)
class NoneArgument:
    """None (scratch memory the kernel does not use)."""

    def render(self, standard, kernel_args, names) -> list:
        return ["None"]


@dataclass(frozen=True, eq=False)
class EntryCall:
    """``target(*arguments)``, each argument a slot above (Standard, KernelArgs,
    KernelArgsTuple, LauncherAttribute, NoneArgument) that renders itself."""

    target: object
    arguments: tuple
    is_c_entry: bool
    why_not_c_entry: str | None = None

    def describe(self) -> str:
        return "C entry" if self.is_c_entry else f"CompiledKernel.run: {self.why_not_c_entry}"


def through_run(run, why: str) -> EntryCall:
    """The launch through the launcher object's own ``__call__`` (Triton's call)."""
    args = tuple(Standard(i) for i in range(N_STANDARD)) + (KernelArgs(),)
    return EntryCall(run, args, False, why)


def entry_call(run) -> EntryCall:
    """The C entry where ``run`` (``CompiledKernel.run``) is recognised, else ``run`` itself."""
    why = _why_not_c_entry(run)
    if why is None:
        convention = _launch_convention(type(run))
        if isinstance(convention, str):
            why = convention
        else:
            n_params, items = convention
            rest = tuple(range(n_params, N_STANDARD))  # what `*args` of __call__ holds before the kernel's
            args = [slot for item in items for slot in item.slots(run, n_params, rest)]
            if any(type(a) is Standard and a.position >= N_STANDARD for a in args):
                why = "the launcher's __call__ takes more than the standard arguments"
            else:
                return EntryCall(run.launch, tuple(args), True)
    return through_run(run, why)


# What the launcher's ``self.launch(...)`` call passes, read from its source (one per argument).
class _Param:
    """Its ``__call__``'s k-th parameter: the k-th standard argument."""

    def __init__(self, index: int):
        self.index = index

    def slots(self, run, n_params, rest):
        return [Standard(self.index) if self.index < n_params else NoneArgument()]


class _Star:
    """``*args``: the standard arguments after its parameters, then the kernel's."""

    def slots(self, run, n_params, rest):
        return [*(Standard(i) for i in rest), KernelArgs()]


class _ArgsTuple:
    """``args`` (or ``kernel_args``, the same unless instrumented) as one tuple."""

    def slots(self, run, n_params, rest):
        return [KernelArgsTuple(rest)]


class _Scratch:
    def slots(self, run, n_params, rest):
        return [NoneArgument()]


class _Attr:
    def __init__(self, name: str):
        self.name = name

    def slots(self, run, n_params, rest):
        return [LauncherAttribute(self.name, getattr(run, self.name))]


def _why_not_c_entry(run) -> str | None:
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return "the kernel uses scratch memory"
    if getattr(run, "gsan_enabled", False):
        return "the kernel is instrumented (gsan)"
    if not callable(getattr(run, "launch", None)):
        return "no launch entry on the launcher object"
    return None


def render_call(entry: EntryCall, standard: list, kernel_args: list, names) -> str:
    """The call of `entry` as code: `standard` holds the 9 standard argument expressions,
    `kernel_args` the kernel's; `names` binds objects (``names.const(value, hint)``)."""
    out = [x for a in entry.arguments for x in a.render(standard, kernel_args, names)]
    return f"{names.const(entry.target, 'entry')}({', '.join(out)})"


@functools.lru_cache(maxsize=None)
def _launch_convention(cls):
    """(number of fixed parameters, what each argument of its ``self.launch`` call is:
    _Param, _Star, _ArgsTuple, _Scratch, _Attr) for a launcher class's ``__call__``, or why
    it is not recognised. Read once per
    class: parsing the source costs milliseconds, and every kernel shares the class."""
    try:
        fdef = ast.parse(textwrap.dedent(inspect.getsource(cls.__call__))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError) as e:
        return f"cannot read the launcher's source: {e!r}"
    a = fdef.args
    params = [x.arg for x in a.args][1:]
    vararg = a.vararg.arg if a.vararg else None
    launches = [st for st in fdef.body if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                and ast.unparse(st.value.func) == "self.launch"]
    if a.kwonlyargs or a.kwarg or len(launches) != 1 or launches[0].value.keywords:
        return "the launcher's __call__ does not call self.launch(...) once"
    # Everything else may only prepare what the launch call takes (or is for gsan, off).
    for stmt in fdef.body:
        if stmt is launches[0] or isinstance(stmt, ast.FunctionDef):
            continue
        if isinstance(stmt, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id in (*_SCRATCH_LOCALS, "kernel_args", "active_driver")
                for t in stmt.targets):
            continue
        if isinstance(stmt, ast.If) and any(k in ast.unparse(stmt.test)
                                            for k in ("gsan_enabled", "has_profile_allocator")):
            continue
        return f"unrecognised statement in the launcher: {ast.unparse(stmt)[:60]!r}"
    items = []
    for arg in launches[0].value.args:
        name = arg.id if isinstance(arg, ast.Name) else None
        if isinstance(arg, ast.Starred) and getattr(arg.value, "id", None) == vararg:
            items.append(_Star())
        elif name in params:
            items.append(_Param(params.index(name)))
        elif name is not None and name in (vararg, "kernel_args"):
            items.append(_ArgsTuple())  # kernel_args is args unless gsan (declined above)
        elif name in _SCRATCH_LOCALS:
            items.append(_Scratch())  # no scratch memory: None
        elif isinstance(arg, ast.Attribute) and getattr(arg.value, "id", None) == "self":
            items.append(_Attr(arg.attr))
        else:
            return f"unrecognised launch argument {ast.unparse(arg)!r}"
    return len(params), tuple(items)
