"""Code for replaying a resolved launch (resolved.py), written from the record alone: the
checks, then one call of the compiled kernel's entry. The launcher's own variants and a
graph's launch program (program.py) are both rendered here.

Renderers take `names`, the generated code's `sources.Namespace` (an object bound under a
name that says what it is for: ``bind_as(value, hint)``; written inline where it can be:
``const(value, hint)``), and expressions for the dynamic values; they return code text.
"""
from __future__ import annotations

import builtins

from ..sources import Namespace, identifier
from .entry import N_STANDARD, render_call
from .resolved import SCALAR, TENSOR, HeuristicCheck, ResolvedLaunch, ScalarSpec, TunerChoice

_INT_RANGES = {"i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1), "u64": (2**63, 2**64 - 1)}


# ---------------------------------------------------------------- checks (each: true means "no")
def state_conditions(state, names, kernel: str) -> list[str]:
    """The global state the replay was resolved under, as conditions that are true when it
    changed: current device, pre-run hooks, debug flag, launch hooks, autotuner choices
    (with a key fixed at resolution), globals the kernel read."""
    conds = []
    if state.check_device:
        conds.append(f"{names.bind_as(state.get_device, 'current_device')}() != {state.device}")
    conds.append(names.bind_as(state.pre_run_hooks, f"pre_run_hooks_{kernel}"))
    runtime = names.bind_as(state.runtime, "triton_runtime")
    if state.debug is not None:
        conds.append(f"{runtime}.debug is not {names.const(state.debug, 'debug_flag')}")
    for attr, hook in (("launch_enter_hook", state.enter_hook), ("launch_exit_hook", state.exit_hook)):
        if hook is None:
            conds.append(f"{runtime}.{attr} is not None")
        else:  # an empty HookChain: it must stay the same, empty, object
            h = names.bind_as(hook, attr)
            conds.append(f"{runtime}.{attr} is not {h} or {h}.calls")
    for t in state.tuners:
        tuner = names.bind_as(t.tuner, f"autotuner_{kernel}")
        configs = names.bind_as(t.configs, f"configs_{kernel}")
        config = names.bind_as(t.config, f"config_{kernel}")
        conds += [f"{tuner}.configs is not {configs}", f"len({configs}) != {t.n_configs}"]
        if t.key is None:
            conds.append(f"{configs}[0] is not {config}")
        elif t.key_is_constant:
            conds.append(f"{tuner}.cache.get({names.const(t.key, f'tuning_key_{kernel}')}) is not {config}")
    missing = None
    for gdict, gname, gval in state.globals_read:
        missing = missing or names.bind_as(_MISSING, "missing")
        conds.append(f"{names.bind_as(gdict, 'globals_' + identifier(gname))}.get({gname!r}, {missing}) != "
                     f"{names.const(gval, 'global_' + identifier(gname))}")
    return conds


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def tensor_conditions(slot, expr: str, device: int, names) -> list[str]:
    """Device and dtype of a tensor value (what a graph's guards pin; a launcher checks)."""
    return [f"{expr}.get_device() != {device}",
            f"{expr}.dtype is not {names.bind_as(slot.dtype, str(slot.dtype).replace('torch.', ''))}"]


def alignment_condition(slot, pointer: str) -> str | None:
    if slot.aligned is None:
        return None
    return f"{pointer} & 15" if slot.aligned else f"not {pointer} & 15"


def scalar_conditions(spec: ScalarSpec, expr: str) -> list[str]:
    """True when the value would make Triton pick another specialisation."""
    if spec.kind is type(None):
        return [f"{expr} is not None"]
    conds = [f"{expr}.__class__ is not {spec.kind.__name__}"]
    if spec.kind is not int:
        return conds
    if spec.equals_one is not None:
        conds.append(f"{expr} != 1" if spec.equals_one else f"{expr} == 1")
    if spec.divisible_by_16 is not None:
        conds.append(f"{expr} & 15" if spec.divisible_by_16 else f"not {expr} & 15")
    if spec.width is not None:
        lo, hi = _INT_RANGES[spec.width]
        cond = f"not {lo} <= {expr} <= {hi}"
        if spec.width == "i64":
            cond = f"{-2**31} <= {expr} <= {2**31 - 1} or " + cond
        conds.append(cond)
    return conds


def _ref(ref, value_exprs, names, hint) -> str:
    return value_exprs[ref.index] if ref.is_dynamic else names.const(ref.value, hint)


def per_call_conditions(resolved: ResolvedLaunch, value_exprs: list, names, local) -> list[str]:
    """Autotuner keys over dynamic values and recomputed heuristics, in the order Triton
    evaluates them. `local(hint)` gives a fresh local name (for a heuristic's result)."""
    conds = []
    kernel = identifier(resolved.kernel_name)
    for check in resolved.per_call_checks:
        if isinstance(check, TunerChoice):
            parts = [_ref(p, value_exprs, names, "key_part") for p in check.key_parts]
            key = "(" + "".join(p + ", " for p in parts) + ")"
            conds.append(f"{names.bind_as(check.tuner, f'autotuner_{kernel}')}.cache.get({key}) is not "
                         f"{names.bind_as(check.config, f'config_{kernel}')}")
        elif isinstance(check, HeuristicCheck):
            fn = names.bind_as(check.fn, f"heuristic_{identifier(check.name)}")
            arg = "{" + ", ".join(f"{n!r}: {_ref(r, value_exprs, names, n)}" for n, r in check.inputs) + "}"
            got = local(identifier(check.name).lower())
            value = check.value
            if value is None or type(value) is bool:
                conds.append(f"{fn}({arg}) is not {value!r}")
            else:
                kind = "int" if type(value) is int else names.bind_as(type(value), "type_" + identifier(check.name))
                conds.append(f"({got} := {fn}({arg})).__class__ is not {kind} or "
                             f"{got} != {names.const(value, identifier(check.name))}")
    return conds


# ---------------------------------------------------------------- the launch call
def kernel_args(resolved: ResolvedLaunch, value_exprs: list, names) -> list[str]:
    """Expressions for the kernel's arguments in signature order: a tensor's data pointer
    and a scalar as `value_exprs` give them, constants inline or bound."""
    out = []
    for p in resolved.params:
        if p.role in (TENSOR, SCALAR):
            out.append(value_exprs[p.value_index])
        else:
            out.append(names.const(p.value, f"{identifier(resolved.kernel_name)}_{p.name}"))
    return out


def launch_call(resolved: ResolvedLaunch, grid: list, stream: str, args: list, names) -> str:
    """The call of the compiled kernel's entry with grid expressions (x, y, z)."""
    kernel = identifier(resolved.kernel_name)
    standard = [*grid, stream, names.const(resolved.function, f"function_{kernel}"),
                names.const(resolved.packed_metadata, f"metadata_{kernel}"), "None", "None", "None"]
    assert len(standard) == N_STANDARD

    class _EntryNames:  # the entry itself is named after the kernel
        @staticmethod
        def const(value, hint):
            return names.const(value, f"entry_{kernel}" if hint == "entry" else hint)
    return render_call(resolved.entry, standard, args, _EntryNames)


def stream_expr(state, names) -> str:
    return f"{names.bind_as(state.get_stream, 'current_stream')}({state.device})"


# ---------------------------------------------------------------- a launcher's variant
def variant_source(resolved: ResolvedLaunch, n_values: int) -> tuple[str, dict, str]:
    """(source, namespace, function name) of a launcher variant ``launch_<kernel>(launcher, [grid,]
    *values)``: the checks, falling through to `next_variant` (bound later in the
    namespace), then the launch."""
    values = [f"a{i}" for i in range(n_values)]
    kernel = identifier(resolved.kernel_name)
    # The variant's own module namespace: no prefix, nothing that shadows a builtin.
    names = Namespace(prefix="")
    names.values["__builtins__"] = builtins
    for reserved in (*dir(builtins), "launcher", "grid", "gx", "gy", "gz", *values, f"launch_{kernel}",
                     *(f"p{i}" for i in range(n_values)), "next_variant"):
        names.reserve(reserved)
    params = ", ".join(["launcher", *(["grid"] if resolved.grid_per_call else []), *values])
    fallthrough = f"        return next_variant({params})"
    state = resolved.state
    first = state_conditions(state, names, kernel)
    for p in resolved.tensors:
        first += tensor_conditions(p, values[p.value_index], state.device, names)
    body = [f"def launch_{kernel}({params}):", f"    if {' or '.join(first)}:", fallthrough]
    exprs = list(values)
    for p in resolved.tensors:
        exprs[p.value_index] = f"p{p.value_index}"
        body.append(f"    p{p.value_index} = a{p.value_index}.data_ptr()")
    second = []
    aligned = [f"p{p.value_index}" for p in resolved.tensors if p.aligned]
    if aligned:  # one test for all: any low bit set
        second.append(f"({' | '.join(aligned)}) & 15" if len(aligned) > 1 else f"{aligned[0]} & 15")
    second += [f"not p{p.value_index} & 15" for p in resolved.tensors if p.aligned is False]
    for p in resolved.scalars:
        second += scalar_conditions(p.spec, values[p.value_index])
    counter = iter(range(1, 1 << 30))
    second += per_call_conditions(resolved, values, names, lambda hint: f"{hint}_{next(counter)}")
    if second:
        body += [f"    if {' or '.join(second)}:", fallthrough]
    if resolved.grid_per_call:
        pick = "grid" if resolved.config_index is None else f"grid[{resolved.config_index}]"
        body.append(f"    gx, gy, gz = {pick}")
        grid = ["gx", "gy", "gz"]
    elif resolved.grid is None:  # a callable grid that per-call scalars feed
        meta = names.bind_as(resolved.grid_meta, "grid_meta")
        upd = ", ".join(f"{n!r}: {v}" for n, v in zip(resolved.dynamic_names, values))
        body.append(f"    gx, gy, gz = {names.bind_as(normalise_grid, 'normalise_grid')}("
                    f"{names.bind_as(resolved.grid_fn, 'grid_fn')}({{**{meta}, {upd}}}))")
        grid = ["gx", "gy", "gz"]
    else:
        grid = [str(g) for g in resolved.grid]
    args = kernel_args(resolved, exprs, names)
    body.append("    " + launch_call(resolved, grid, stream_expr(state, names), args, names))
    return "\n".join(body) + "\n", names.values, f"launch_{kernel}"


def normalise_grid(g) -> tuple:
    import operator
    n = len(g)
    return (operator.index(g[0]), operator.index(g[1]) if n > 1 else 1,
            operator.index(g[2]) if n > 2 else 1)
