"""OutputGraph: the torch.fx graph one trace builds, its inputs, guards and side tables.

Tensor work becomes fx nodes; each node's result is computed on fake tensors (never on
real data) so the trace knows shapes, dtypes and devices without running anything.

Running the op on fakes also tells what it did to memory, recorded on its node once
(memory_facts.py: what it wrote, what its result shares).
"""
from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from .data_checks import CHECKED_CALLS
from .exc import unsupported
from .dynamic import (has_symbolic, is_symbolic, new_shape_env, shape_guard_exprs, symbolic_fake,
                      symbolic_float, symbolic_int)
from .fakecache import input_fake, op_key, op_result, remember
from .guards import Guard, GuardSet, shape_guard, tensor_guard
from .memory_facts import FactMode, WriteLog, memory_facts, positions, storage_of, tensor_args, versions_of
from .sources import Source, identifier
from .triton.capture import KernelTable, direct_launches
from .variables.base import VariableTracker
from .variables.contexts import mark_inference_views
from .variables.dicts import DictVariable
from .variables.lists import BaseListVariable
from .variables.symbolic import SymNodeVariable
from .variables.tensor import TensorVariable

_NO_CONTEXT = contextlib.nullcontext()


def python_dispatcher():
    from torch._dispatch.python import enable_python_dispatcher
    return enable_python_dispatcher()


@dataclass
class GraphInput:
    source: Source
    node: fx.Node
    example: torch.Tensor


class OutputGraph:
    def __init__(self, name: str, dynamic=None):
        self.name = name
        self.frames: list = []  # the translators running now, outermost first (in_try_block)
        self.dynamic = dynamic  # the function's DynamicPolicy (dynamic.py), or None: all static
        self.shape_env = None  # made with the first symbolic input
        self.symbolic_inputs: list = []  # (source, fake) of inputs with symbolic sizes
        self._static: list = []  # per symbolic input: which sizes, strides were static when made
        self.graph = fx.Graph()  # where nodes go: the frame's graph, or a body being traced
        self.root_graph = self.graph  # the frame's graph: inputs are its placeholders
        self.submodules: dict = {}  # bodies held by nodes (autograd.Function), by attribute name
        self.entered: list = []  # real context managers the trace is inside (autocast)
        self.function_modes: list = []  # trackers of the torch function modes entered (function_modes.py)
        self.inference_regions = 0  # torch.inference_mode() regions the trace is inside
        self.final_grad_mode = None  # grad mode where the trace ended (convert._trace_frame)
        self.fake_mode = FactMode()
        # The thread's dispatch keys as the entry will check its guards (the state the trace
        # starts in): a tensor read inside a region the trace entered for real (autocast)
        # must not have that region's keys in its C check (see add_input).
        self.dispatch_tls = (torch._C._dispatch_tls_local_include_set(),
                             torch._C._dispatch_tls_local_exclude_set())
        self.inputs: list[GraphInput] = []
        self._input_by_source: dict = {}
        self._input_by_id: dict = {}
        self.guards = GuardSet()
        # Side table for Triton launches: owned by this graph, released with it.
        self.kernels = KernelTable()
        self.op_count = 0
        # Storages of tensors that min()/max() picked between by a tensor comparison, and of
        # their picks: eager's result IS one of the candidates, the graph's is a new tensor
        # (torch.where), so writing to any of them, or `is` on them, would tell (see picked).
        self.picked_storages: set = set()
        # Trackers of values read from the frame, per source (aliasing preserved).
        self.wrapped: dict = {}
        self.builtins_wrapped: dict = {}  # builtin name → (value, tracker): one tracker per object
        self.builtins_read: dict = {}  # id(globals dict) → the builtin names read through it (guarded unshadowed)
        self.iterators: dict = {}  # source → (real iterator, tracker): see builder._wrap_iterator
        # Lists and dicts from outside that the trace changed, in the order first changed:
        # the entry writes their final contents back after the graph (see side_effects.py).
        self.mutated: dict = {}  # id(tracker) → (tracker, what was done first)
        self.containers: dict = {}  # id(list or dict read from the frame) → (it, tracker, source)
        # Calls whose only effect is output, made after the graph in order (side_effects.py):
        # (function, the object it is called on, constant args, constant kwargs).
        self.deferred_calls: list = []
        # Python attributes the trace set on tensors (`x.tag = 3`), per tensor: one graph
        # node is one tensor object (aliases of an input share its node, in-place results
        # are their input's). node → [a tracker of it (one with a source if any), {name: value}];
        # the entry sets them on the real tensors after the graph (side_effects.py).
        self.tensor_attrs: dict = {}

    def record_append(self, var) -> None:
        """An outside list the trace appended to without reading it (see ListVariable)."""
        if id(var) not in self.mutated:
            self.mutated[id(var)] = (var, f"list.append on {var.source.name()!r}")

    def record_mutation(self, var, what: str) -> None:
        if id(var) not in self.mutated:
            getattr(var, "items", None)  # read it all (and guard it) before it changes
            self.mutated[id(var)] = (var, what)

    # --- inputs ------------------------------------------------------------------
    def add_input(self, source: Source, value: torch.Tensor):
        """A tensor read from the frame becomes a placeholder, guarded by TENSOR_MATCH."""
        existing = self._input_by_source.get(source)
        if existing is not None:
            return existing
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            # A subclass may override any op (__torch_function__): its calls are not plain aten.
            unsupported("construct", f"a tensor subclass ({type(value).__qualname__}) as {source.name()}")
        same = self._input_by_id.get(id(value))
        if same is not None and same[0] is value:
            # The same tensor object reached twice: one graph input (a backend sees each
            # tensor once; AOTAutograd fails on a written duplicate), pinned by identity.
            first = same[1]
            self.guards.add(Guard("ALIAS_MATCH", first.source, True, {"other": source}))
            var = TensorVariable(first.node, first.fake, source, cls=type(value))
            self._input_by_source[source] = var
            return var
        grad = value.grad if value.requires_grad and value.is_leaf else None
        if grad is not None and (grad.shape != value.shape or grad.dtype != value.dtype):
            # Left by `p.data = t` of another shape: torch cannot make the fake (its .grad
            # must match); eager runs the forward and fails only in backward.
            unsupported("construct", f"{source.name()} has a .grad of another shape or dtype "
                        f"({tuple(grad.shape)} {grad.dtype} for {tuple(value.shape)} {value.dtype})")
        fake = self._symbolic_fake(source, value)
        if fake is None:
            fake = input_fake(self.fake_mode, value)
        symbolic = has_symbolic(tuple(fake.shape)) or has_symbolic(fake.stride())
        with torch._C._ForceDispatchKeyGuard(*self.dispatch_tls):
            self.guards.add(tensor_guard(source, value, fake if symbolic else None))
        node = self.root_graph.placeholder(_placeholder_name(source, len(self.inputs)))
        node.meta["val"] = fake  # at the trace's end: the metadata in-place ops left it with
        self.inputs.append(GraphInput(source, node, value))
        var = TensorVariable(node, fake, source, cls=type(value))
        self._input_by_source[source] = var
        self._input_by_id[id(value)] = (value, var)
        return var

    def add_int_input(self, source: Source, value):
        """An int (or float) argument the policy traces symbolically: a placeholder of the
        graph (the entry passes the number) and a SymNodeVariable; None when it stays a
        constant."""
        if self.dynamic is None or not self.dynamic.int_is_symbolic(source.name(), value):
            return None
        existing = self._input_by_source.get(source)
        if existing is not None:
            return existing
        self._ensure_shape_env()
        make = symbolic_float if type(value) is float else symbolic_int
        sym = make(self.shape_env, value, len(self.symbolic_inputs))
        if sym is None:
            return None
        self.symbolic_inputs.append((source, sym))
        self._static.append(([], []))
        node = self.root_graph.placeholder(_placeholder_name(source, len(self.inputs)))
        node.meta["val"] = sym
        self.inputs.append(GraphInput(source, node, value))
        var = SymNodeVariable(node, sym, source)
        self._input_by_source[source] = var
        return var

    def _ensure_shape_env(self) -> None:
        if self.shape_env is None:
            # The mode's fakes so far are static; from now on it has an environment.
            self.shape_env = self.fake_mode.shape_env = new_shape_env()
            self.fake_mode.static_shapes = False

    def _symbolic_fake(self, source: Source, value: torch.Tensor):
        """A fake with symbolic dimensions where the policy says so, else None."""
        if self.dynamic is None or value.layout is not torch.strided or value.dim() == 0:
            return None
        dims = self.dynamic.tensor_dims(source.name(), value)
        if not any(dims):
            return None
        self._ensure_shape_env()
        fake = symbolic_fake(self.fake_mode, value, dims, len(self.symbolic_inputs))
        self.symbolic_inputs.append((source, fake))
        self._static.append(([not is_symbolic(s) for s in fake.shape], [not is_symbolic(s) for s in fake.stride()]))
        return fake

    def shape_guards(self) -> list:
        """The shape environment's guards over the symbolic inputs (after the trace)."""
        exprs = shape_guard_exprs(self.shape_env, [f for _, f in self.symbolic_inputs], self._static)
        inputs = [s for s, _ in self.symbolic_inputs]
        return [shape_guard(e, inputs, e.reads()) for e in exprs]

    def sym_node(self, kind: str, target, args: tuple, value) -> fx.Node:
        """A node computing a symbolic int/float/bool (a size, arithmetic on sizes)."""
        node = self.graph.create_node(kind, target, tuple(args), {})
        node.meta.update(val=value, writes=(), aliases=(), sym=True)
        return node

    def prune_sym_nodes(self, keep=()) -> None:
        """Drop size reads and size arithmetic nothing used (each read of `x.shape` makes
        its nodes whether the trace needs them or not)."""
        for graph in (self.root_graph, *(m.graph for m in self.submodules.values()
                                         if isinstance(m, fx.GraphModule))):
            for node in reversed(list(graph.nodes)):
                if node.meta.get("sym") and not node.users and node not in keep:
                    graph.erase_node(node)

    # --- nodes -------------------------------------------------------------------
    def call(self, kind: str, target, args: list, kwargs: dict, *, what: str,
             fold_metadata: bool = False, allow_none: bool = False):
        """Record one tensor operation. `kind` is 'call_function' or 'call_method'."""
        from .variables.builder import wrap_fake_result  # a cycle: builder's trackers import this module
        fx_args, fake_args = _lower(args), _fake(args)
        fx_kwargs, fake_kwargs = _lower(kwargs), _fake(kwargs)
        if fake_kwargs.get("requires_grad") is True:
            # A new leaf that requires grad: AOTAutograd makes it a graph intermediate without
            # grad; as torch.compile, made outside the graph.
            unsupported("construct", f"{what} with requires_grad=True makes a leaf that requires grad "
                                     "(torch's backends do not keep the flag)",
                        hint="create it outside the optimized function")
        key = op_key(kind, target, fake_args, fake_kwargs, self.fake_mode)
        result = None if key is None else op_result(key, self.fake_mode)
        writes = aliases = items = ()  # a memoized op wrote nothing and made a fresh tensor
        if result is None:
            tensors = tensor_args(fx_args, fake_args, []) + tensor_args(fx_kwargs, fake_kwargs, [])
            versions = versions_of(tensors)
            outs = [(t, t.shape) for t in _flat_tensors(fake_kwargs.get("out"))]
            log = self.fake_mode.log = WriteLog()
            # NOTE: only the op itself is inside the try: what it raises is the user's (eager
            # raises it too); an error of the bookkeeping around it is minidynamo's own.
            try:
                # With symbolic sizes, ops that take size lists (F.pad, interpolate) need the
                # Python dispatcher, as under torch.compile.
                with self.fake_mode, (python_dispatcher() if self.shape_env is not None else _NO_CONTEXT):
                    if kind == "call_method":
                        result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                    else:
                        result = target(*fake_args, **fake_kwargs)
            except (DataDependentOutputException, DynamicOutputShapeException,
                    GuardOnDataDependentSymNode) as e:
                unsupported("data_dependent", f"{what} depends on tensor data ({type(e).__name__})")
            except NotImplementedError as e:
                unsupported("torch_op", f"{what} cannot run on fake tensors: {_first_line(e)}")
            except Exception as e:  # a shape mismatch and the like: eager will raise it for real
                unsupported("torch_op", f"{what} raised {type(e).__name__}: {_first_line(e)}")
            finally:
                self.fake_mode.log = None
            resized = [t for t, shape in outs if t.shape != shape]
            if resized and self._resizes_input(resized):
                # As resize_: AOTAutograd cannot replay a graph input's new size (expand error).
                unsupported("torch_op", f"{what} resizes its out= tensor, a graph input "
                                        "(torch's backends do not replay it on inputs)")
            if log.overlap is not None:  # the fakes do not check: eager may raise
                unsupported("torch_op", f"{what} {log.overlap}")
            if log.checked is None and any(target is c for c in CHECKED_CALLS):
                log.checked = target
            if log.checked is not None and any(frame.in_try_block() for frame in self.frames):
                unsupported("data_dependent", f"{what} checks tensor values inside a try block: eager's "
                                              "raise must reach the handler")
            if self.shape_env is not None and free_unbacked_symbols(_sized_leaves(result)):
                # With a shape environment, torch's fakes answer a read of tensor data (a 0-d
                # tensor as arange's bound) with an unbacked size instead of raising: the
                # result's size is still the data's, so the op stays outside the graph.
                unsupported("data_dependent", f"{what} depends on tensor data (a size read from a tensor)")
            writes, aliases, items = memory_facts(tensors, versions, log, result)
            if self.picked_storages and any(n in writes and storage_of(t) in self.picked_storages
                                            for n, t in tensors):
                unsupported("data_dependent", f"{what} writes to a tensor that min()/max() picked, or picked "
                                              "from, by a tensor comparison: which object eager writes "
                                              "depends on the data")
            if self.inference_regions or torch.is_inference_mode_enabled():  # entered in or around the trace
                mark_inference_views(target, tensors, result)
            if key is not None and not writes and not aliases and log.checked is None:
                remember(key, result)
        if not _contains_tensor(result):
            if has_symbolic(result):  # a size (numel, x.size(0)): a value of the graph
                node = self.sym_node(kind, target, tuple(fx_args), result)
                return wrap_fake_result(self, node, result, what)
            if result is None and allow_none:
                pass
            elif fold_metadata and result is not None:
                return wrap_fake_result(self, None, result, what)
            else:
                unsupported("torch_op", f"{what} returned {type(result).__name__}, not a tensor "
                                        "(results that are not tensors are only folded for metadata queries)")
        node = self.graph.create_node(kind, target, tuple(fx_args), fx_kwargs)
        node.meta["val"] = result  # fake value: device/shape for graph passes (cudagraphs)
        node.meta["writes"] = positions(node, writes)
        node.meta["aliases"] = positions(node, aliases)
        if items:
            node.meta["item_aliases"] = items  # per element of a tuple result: shares storage?
        self.op_count += 1
        if isinstance(result, torch.Tensor):
            # An in-place op (x.add_(1), x += 1, out=y) returns its argument: the result is
            # that same tracker, so `y is x` holds and the input is returned as itself.
            for a in _flat(args, kwargs):
                if getattr(a, "fake", None) is result:
                    return a
        return wrap_fake_result(self, node, result, what)

    def _resizes_input(self, resized: list) -> bool:
        """Whether one of the out= tensors the op resized is a graph input's storage."""
        inputs = {storage_of(i.node.meta["val"]) for i in self.inputs if isinstance(i.node.meta["val"], torch.Tensor)}
        return any(storage_of(t) in inputs for t in resized)

    def picked(self, var) -> bool:
        """Whether `var` is a min()/max() pick or one of its candidates (picked_storages)."""
        return bool(self.picked_storages) and storage_of(var.fake) in self.picked_storages

    def example_of(self, var):
        """The real tensor behind a placeholder tracker, or None for computed tensors."""
        for inp in self.inputs:
            if inp.node is var.node:
                return inp.example
        return None

    def leave_state(self, grad_enabled: bool) -> None:
        """After a trace, finished or stopped: the thread's state as it was before it (the
        trace changes the real grad mode and autocast, which the fake ops read)."""
        while self.entered:
            self.entered.pop().__exit__(None, None, None)
        torch._C._set_grad_enabled(grad_enabled)

    def add_submodule(self, name: str, module) -> fx.Node:
        """A `get_attr` node of the frame's graph for a body it holds."""
        self.submodules[name] = module
        node = self.graph.get_attr(name)
        node.meta["module"] = module
        # What the inlined entry runs: launches call their kernels' launchers directly.
        node.meta["run_module"] = direct_launches(module)
        return node

    def next_body_index(self) -> int:
        return len(self.submodules) // 2

    def getitem_node(self, node: fx.Node, index: int) -> fx.Node:
        if node.meta.get("sym"):  # an item of a symbolic Size
            return self.sym_node("call_function", operator.getitem, (node, index), node.meta["val"][index])
        item = self.graph.create_node("call_function", operator.getitem, (node, index), {})
        item.meta["val"] = node.meta["val"][index]
        item.meta["writes"] = ()
        shared = node.meta.get("item_aliases")
        item.meta["aliases"] = (0,) if shared is None or shared[index] else ()  # 0: `node`
        return item


def _placeholder_name(source: Source, n: int) -> str:
    raw = source.name().replace("global ", "G_").replace("closure ", "C_")
    cleaned = identifier(raw).strip("_") or "input"
    if cleaned[0].isdigit():
        cleaned = "i_" + cleaned
    return f"L_{cleaned}" if not cleaned.isidentifier() else cleaned


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _contains_tensor(v) -> bool:
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)):
        return any(_contains_tensor(x) for x in v)
    return False


def _sized_leaves(value) -> list:
    """The tensors and symbolic numbers of a result (torch's symbol search asserts on
    anything else: `_parse_to` answers a dtype and a device)."""
    return [v for v in torch.utils._pytree.tree_leaves(value)
            if isinstance(v, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))]


def _flat_tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flat_tensors(v)] if isinstance(value, (list, tuple)) else []


def _flat(args, kwargs):
    todo = list(args) + list(kwargs.values())
    while todo:
        v = todo.pop()
        if isinstance(v, BaseListVariable):
            todo.extend(v.items)
        elif isinstance(v, DictVariable):
            todo.extend(v.items.values())
        else:
            yield v


def _lower(v):
    """Trackers → fx arguments (nodes for tensors, plain values for constants)."""
    if isinstance(v, dict):
        return {k: _lower(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_lower(x) for x in v] if isinstance(v, list) else tuple(_lower(x) for x in v)
    if isinstance(v, VariableTracker):
        return v.as_fx_arg()
    return v


def _fake(v):
    if isinstance(v, dict):
        return {k: _fake(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_fake(x) for x in v] if isinstance(v, list) else tuple(_fake(x) for x in v)
    if isinstance(v, VariableTracker):
        return v.as_fake()
    return v
