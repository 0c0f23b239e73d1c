"""Triton kernels in the trace: `kernel[grid]`, `kernel.run(..., grid=)`, and the call that
becomes one launch node (see triton/capture.py for the node and its side table)."""
from __future__ import annotations

import sys

import torch.fx as fx

from ..exc import Unsupported, unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource
from ..triton.capture import (
    SPECIAL_KWARGS,
    ConfigGrid,
    LaunchRecord,
    check_grid_value,
)
from ..triton.kernels import kernel_chain, kernel_name, kernel_signature
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .lists import BaseListVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable
from .constant import fold
from .functions import UserFunctionVariable, BoundMethodVariable
from ..triton.mutation import analyze_mutations


def is_triton_kernel(value) -> bool:
    """A kernel, or a wrapper of one (autotune, heuristics, and subclasses of them a library
    defines, such as a caching autotuner). Triton imported by nobody means no kernel."""
    if "triton.runtime.jit" not in sys.modules:
        return False
    from triton.runtime.jit import KernelInterface
    return isinstance(value, KernelInterface)


def is_triton_builder(value) -> bool:
    """triton.jit / autotune / heuristics / Config: making kernels inside the trace."""
    if not callable(value) or not (getattr(value, "__module__", "") or "").startswith("triton"):
        return False
    import triton
    return value in (triton.jit, triton.autotune, triton.heuristics, triton.Config)


def is_triton_pure_function(value) -> bool:
    """triton.cdiv, triton.next_power_of_2 (ConstexprFunction objects in newer Triton)."""
    if not (getattr(value, "__module__", "") or type(value).__module__ or "").startswith("triton"):
        return False
    import triton
    pure = [getattr(triton, n, None) for n in ("cdiv", "next_power_of_2")]
    return any(value is p for p in pure if p is not None)


class TritonPureFunctionVariable(ObjectConstantVariable):
    """A pure Triton helper used in grids: folded on constants."""

    def call_function(self, tx, args, kwargs):
        name = getattr(self.value, "__name__", "triton helper")
        body = getattr(self.value, "fn", self.value)  # a ConstexprFunction wraps the function
        if any(isinstance(a, SymNodeVariable) for a in (*args, *kwargs.values())) and hasattr(body, "__code__"):
            # triton.cdiv of a symbolic size: its Python body, traced, stays symbolic.
            return UserFunctionVariable(body).call_function(tx, args, kwargs)
        if not all(a.is_python_constant() for a in args) or not all(
                v.is_python_constant() for v in kwargs.values()):
            unsupported("triton", f"triton.{name} with arguments that are not constants")
        return fold(tx, self.value, [a.as_python_constant() for a in args],
                    {k: v.as_python_constant() for k, v in kwargs.items()}, f"triton.{name}")


class TritonBuilderVariable(ObjectConstantVariable):
    """triton.jit and friends: calling them in the trace declines with a clear reason."""

    def call_function(self, tx, args, kwargs):
        unsupported("triton", f"triton.{self.value.__name__}() inside the traced function: a kernel "
                              "defined inside the traced function is not captured (define it at module level)")


class TritonKernelVariable(VariableTracker):
    __slots__ = ("kernel", "grid")

    def __init__(self, kernel, source=None, grid=None):
        super().__init__(source)
        self.kernel = kernel
        self.grid = grid

    @property
    def name(self) -> str:
        return kernel_name(self.kernel)

    def rebuild(self, rb) -> str:
        if self.grid is None:
            return super().rebuild(rb)
        if self.source is None:  # kernel[grid]: the kernel's source
            unsupported("triton", f"{self.describe()} is not reachable from the frame")
        return f"{self.source.expr(rb.ns)}[{rb.expr(self.grid)}]"

    def python_type(self):
        return type(self.kernel)

    def is_python_constant(self):
        return self.grid is None

    def as_python_constant(self):
        if self.grid is not None:
            return super().as_python_constant()
        return self.kernel

    def describe(self):
        return f"Triton kernel {self.name!r}"

    def getitem(self, tx, grid):
        return self.call_method(tx, "__getitem__", [grid], {})

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            if self.grid is not None:
                unsupported("triton", f"kernel {self.name!r} subscripted twice: launch with a single grid")
            return TritonKernelVariable(self.kernel, self.source, grid=args[0])
        if name == "run":
            kwargs = dict(kwargs)
            grid = kwargs.pop("grid", None)
            kwargs.pop("warmup", None)
            if grid is None:
                unsupported("triton", f"{self.name}.run(...) without grid=: pass grid= to launch")
            return emit_launch(tx, self, grid, list(args), kwargs)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name == "run":
            return BoundMethodVariable(self, "run")
        if name == "__getitem__":
            return BoundMethodVariable(self, "__getitem__")
        unsupported("triton", f"reading {name!r} of kernel {self.name!r} inside the traced function")

    def call_function(self, tx, args, kwargs):
        if self.grid is None:
            unsupported("triton", f"kernel {self.name!r} called without a grid: launch it as kernel[grid](...)")
        return emit_launch(tx, self, self.grid, list(args), dict(kwargs))


def emit_launch(tx, kv: TritonKernelVariable, grid_var, args: list, kwargs: dict):
    from triton.runtime.autotuner import Autotuner, Heuristics


    kernel, name = kv.kernel, kv.name
    chain = kernel_chain(kernel)
    sig = kernel_signature(kernel)
    params = list(sig.parameters)
    if len(args) > len(params):
        unsupported("exceptions", f"TypeError: kernel {name!r} takes {len(params)} arguments, "
                                  f"{len(args)} given")
    bound: dict = dict(zip(params, args))
    special: dict = {}
    for k, v in kwargs.items():
        if k in params:
            if k in bound:
                unsupported("exceptions", f"TypeError: kernel {name!r} got multiple values for {k!r}")
            bound[k] = v
        elif k in SPECIAL_KWARGS:
            special[k] = v
        else:
            unsupported("exceptions", f"TypeError: kernel {name!r} got an unexpected argument {k!r}")

    constant_kwargs: dict = {}
    dynamic_names: list = []
    fx_kwargs: dict = {}
    for pname in params:
        if pname not in bound:
            continue
        v = bound[pname]
        if isinstance(v, TensorVariable):
            if v.fake.device.type == "cpu" and not _interpreted(chain[-1]):
                # Compiled Triton rejects host pointers: the eager run raises it, with the user's line.
                unsupported("exceptions", f"ValueError: kernel {name!r} argument {pname!r} is a cpu tensor; "
                                          "a compiled Triton kernel needs GPU tensors")
            dynamic_names.append(pname)
            fx_kwargs[pname] = v
        elif isinstance(v, SymNodeVariable) and v.python_type() is int and not _is_constexpr(sig, pname):
            # A symbolic size as an int argument: passed per call (the launcher checks what
            # Triton specialises on: == 1, divisible by 16).
            dynamic_names.append(pname)
            fx_kwargs[pname] = v
        else:
            constant_kwargs[pname] = fx_kwargs[pname] = _constant_arg(v, name, pname)
    for k, v in special.items():
        constant_kwargs[k] = _constant_arg(v, name, k)

    # meta as Triton builds it for grids and heuristics: bound args, then defaults.
    meta_items = dict(bound)
    for pname, p in sig.parameters.items():
        if pname not in meta_items:
            if p.default is p.empty:
                if not any(isinstance(k, Heuristics) and pname in k.values for k in chain) and not any(
                        isinstance(k, Autotuner) and any(pname in c.kwargs for c in k.configs) for k in chain):
                    unsupported("exceptions", f"TypeError: kernel {name!r} missing argument {pname!r}")
                continue
            meta_items[pname] = ConstantVariable(_unwrap_constexpr(p.default))

    _guard_kernel_state(tx, kv, chain)
    autotuners = [k for k in chain if isinstance(k, Autotuner)]
    if len(autotuners) > 1:
        unsupported("triton", f"kernel {name!r} has more than one @triton.autotune")
    if autotuners:
        keys, table, node_grid = _config_keys(autotuners[0]), {}, []
        for cfg in autotuners[0].configs:
            meta = dict(meta_items)
            meta.update({k: ConstantVariable(v) for k, v in cfg.kwargs.items()})
            _apply_heuristics(tx, kv, chain, meta, name)
            node_grid.append(_eval_grid(tx, grid_var, meta, name))
            table[tuple(cfg.kwargs.get(k) for k in keys)] = node_grid[-1]
        grid = ConfigGrid(keys, table)
    else:
        meta = dict(meta_items)
        _apply_heuristics(tx, kv, chain, meta, name)
        grid = _eval_grid(tx, grid_var, meta, name)
        node_grid = [grid]
    # A grid of symbolic sizes is computed per call by the graph (one per config, in the
    # autotuner's order) and handed to the launcher first.
    per_call = any(isinstance(g, fx.Node) for item in node_grid for g in item) or any(
        isinstance(fx_kwargs[n], SymNodeVariable) for n in dynamic_names)
    if per_call:
        grid = node_grid if autotuners else node_grid[0]

    try:
        mutation = analyze_mutations(kernel)
    except TypeError as e:  # no Python function at the bottom of the wrappers
        unsupported("triton", f"kernel {name}: {e}")
    record = LaunchRecord(kernel, name, grid, constant_kwargs, tuple(dynamic_names), mutation,
                          grid_per_call=per_call)
    _name_triton_in_fx_code()
    output = tx.output
    idx = output.kernels.add(record)
    lowered = {k: (v.as_fx_arg() if isinstance(v, (TensorVariable, SymNodeVariable)) else v)
               for k, v in fx_kwargs.items()}
    node = output.graph.create_node("call_function", output.kernels.wrapper, (),
                                    {"kernel_idx": idx, "grid": node_grid, "kwargs": lowered},
                                    name=f"{name}_launch")
    node.meta["writes"] = _launch_writes(node, record)
    node.meta["aliases"] = ()  # a launch returns None
    _forget_written_constants(output.fake_mode, fx_kwargs, record)
    output.op_count += 1
    return ConstantVariable(None)


def _forget_written_constants(mode, fx_kwargs: dict, record) -> None:
    """A fake tensor made from constants (`torch.tensor(1)`) carries its value, which the
    trace reads (a list indexed by it); FakeTensorMode forgets it when an aten op writes the
    tensor or a view of it, but it never sees a kernel's writes: forget it here, for the
    tensor and every fake sharing its storage."""
    names = record.written_tensors()
    for n in fx_kwargs if names is None else names:
        v = fx_kwargs.get(n)
        if isinstance(v, TensorVariable) and v.fake.constant is not None:
            mode.fake_tensor_converter.invalidate_constant_aliases(v.fake.constant)


def _launch_writes(node, record) -> tuple:
    """Positions in `node.all_input_nodes` of the tensors the kernel writes, by its source
    analysis (every tensor argument when it could not decide). Read from the node's own
    kwargs: in a body, outer values are already the body's placeholders there."""
    kwargs = node.kwargs["kwargs"]
    names = record.written_tensors()
    if names is None:
        names = list(kwargs)
    inputs = node.all_input_nodes
    written = dict.fromkeys(kwargs[n] for n in names if isinstance(kwargs.get(n), fx.Node)
                            and not kwargs[n].meta.get("sym"))  # an int argument is never written
    return tuple(inputs.index(v) for v in written)


def _interpreted(jit_fn) -> bool:
    """Under TRITON_INTERPRET=1, @triton.jit gives an InterpretedFunction, which runs on CPU."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return False
    return isinstance(jit_fn, InterpretedFunction)


def _unwrap_constexpr(v):
    return getattr(v, "value", v) if type(v).__name__ == "constexpr" else v


def _name_triton_in_fx_code():
    """fx writes constants by their repr: `triton.language.bfloat16` (a kernel's dtype
    argument) must name something in a GraphModule's generated code."""
    import torch.fx.graph as fx_graph
    if "triton" not in fx_graph._custom_builtins:
        import triton
        fx_graph._register_custom_builtin("triton", "import triton", triton)


def _constant_arg(v: VariableTracker, kname: str, pname: str):
    if isinstance(v, (BaseListVariable, DictVariable)) and any(
            isinstance(i, TensorVariable) for i in getattr(v, "items", [])):
        unsupported("triton", f"kernel {kname!r} argument {pname!r}: tensors inside a {v.python_type().__name__} "
                              "are not captured")
    if not v.is_python_constant():
        unsupported("triton", f"kernel {kname!r} argument {pname!r}: {v.describe()} is not a tensor or a constant")
    value = v.as_python_constant()
    if not (is_constant_value(value) or type(value).__name__ in ("constexpr", "dtype")):
        unsupported("triton", f"kernel {kname!r} argument {pname!r}: a {type(value).__name__} is not a "
                              "Triton argument type")
    return value


def _config_keys(autotuner) -> tuple:
    keys: list = []
    for cfg in autotuner.configs:
        for k in cfg.kwargs:
            if k not in keys:
                keys.append(k)
    return tuple(keys)


def _chain_sources(kv, chain) -> list:
    """The source of each decorator level: kernel, kernel.fn, kernel.fn.fn, ..."""
    srcs, src = [], kv.source
    for _ in chain:
        srcs.append(src)
        src = AttrSource(src, "fn") if src is not None else None
    return srcs


def _guard_kernel_state(tx, kv, chain):
    """Swapping or editing autotune configs must re-trace: per-config grids would be stale."""
    from triton.runtime.autotuner import Autotuner
    for k, src in zip(chain, _chain_sources(kv, chain)):
        if not isinstance(k, Autotuner) or src is None:
            continue
        configs = AttrSource(src, "configs")
        tx.output.guards.add(Guard("ID_MATCH", configs, k.configs))
        tx.output.guards.add(Guard("LEN_MATCH", configs, len(k.configs), {"type": type(k.configs)}))
        for i, cfg in enumerate(k.configs):
            item = ItemSource(configs, i)
            tx.output.guards.add(Guard("ID_MATCH", item, cfg))
            tx.output.guards.add(Guard("EQUALS_MATCH", AttrSource(item, "kwargs"), dict(cfg.kwargs)))


def _apply_heuristics(tx, kv, chain, meta: dict, kname: str):
    """Heuristics run innermost-last, on the values the guards pin down; each heuristic
    function is guarded, so replacing one re-traces."""
    from triton.runtime.autotuner import Heuristics
    for k, src in zip(chain, _chain_sources(kv, chain)):
        if isinstance(k, Heuristics):
            values = AttrSource(src, "values") if src is not None else None
            if values is not None:
                tx.output.guards.add(Guard("DICT_KEYS", values, tuple(k.values), {"type": type(k.values)}))
            for vname, fn in k.values.items():
                fn_var = tx.wrap(fn, ItemSource(values, vname) if values is not None else None)
                try:
                    result = fn_var.call_function(tx, [DictVariable(dict(meta))], {})
                except Unsupported as e:
                    unsupported("triton", f"heuristic {vname!r} of kernel {kname!r} cannot be traced: {e.detail}")
                if not result.is_python_constant():
                    unsupported("triton", f"heuristic {vname!r} of kernel {kname!r} must return a constant")
                meta[vname] = result


def _is_constexpr(sig, pname: str) -> bool:
    ann = sig.parameters[pname].annotation
    return "constexpr" in (ann if isinstance(ann, str) else getattr(ann, "__name__", ""))


def _eval_grid(tx, grid_var, meta: dict, kname: str) -> tuple:
    what = f"grid of kernel {kname!r}"
    if isinstance(grid_var, BaseListVariable) or grid_var.is_python_constant() and isinstance(
            grid_var.as_python_constant(), (tuple, list)):
        g = grid_var
    else:
        try:
            g = grid_var.call_function(tx, [DictVariable(dict(meta))], {})
        except Unsupported as e:
            if e.category in ("triton",):
                raise
            unsupported("triton", f"{what} ({grid_var.describe()}) cannot be traced: {e.detail}")
    items = g.items if isinstance(g, BaseListVariable) else None
    if items is not None and any(isinstance(i, SymNodeVariable) for i in items):
        # Symbolic sizes: the grid's entries are graph values (ints of the others).
        if not 1 <= len(items) <= 3 or not all(
                isinstance(i, SymNodeVariable) and i.python_type() is int or i.is_python_constant() for i in items):
            unsupported("triton", f"{what}: a grid must be a tuple of 1 to 3 ints, got {g.describe()}")
        values = [i.as_fx_arg() if isinstance(i, SymNodeVariable) else i.as_python_constant() for i in items]
        check_grid_value(tuple(0 if isinstance(v, fx.Node) else v for v in values), what)
        return tuple(values) + (1,) * (3 - len(values))
    if not g.is_python_constant():
        unsupported("triton", f"{what} is not a tuple of constants: {g.describe()}")
    return check_grid_value(g.as_python_constant(), what)


def _wrap_kernel(tx, value, source):
    return TritonKernelVariable(value, source)


def _wrap_builder(tx, value, source):
    return TritonBuilderVariable(value, source)


def _wrap_pure_function(tx, value, source):
    return TritonPureFunctionVariable(value, source)

