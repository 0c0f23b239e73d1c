"""OutputGraph: the torch.fx graph one trace builds, its inputs, guards and side tables.

Tensor work becomes fx nodes; each node's result is computed on fake tensors (never on
real data) so the trace knows shapes, dtypes and devices without running anything.

Running the op on fakes also tells what it did to memory, recorded on the node once for
every later pass (CUDA graphs, the launch program, the fake-op memo):

* ``node.meta["writes"]``: positions in ``node.all_input_nodes`` of the values the op wrote —
  those whose version counter moved (in-place ops, ``out=``, ``x[i] = v``, ``torch.relu_``)
  or that an aten op's schema marks written (`_FactMode`: the writes counters miss).
  A view shares its base's counter and storage, so a write through a view also shows on
  every argument it views; passes map a written value to the inputs it may reach through
  its aliases.
* ``node.meta["aliases"]``: positions of the values whose storage the result shares (a
  view, or an in-place op's own argument); ``()`` is a fresh tensor.

Nodes made elsewhere carry the same facts, recorded where they are made: a Triton launch
(variables/triton.py) from its kernel's source analysis, the functional pass's nodes
(triton/functional.py). `written_values` and `aliased_values` read them back as nodes; a
node without them reads as None: unknown, every input may be written and aliased.
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
    FakeTensorMode,
)
from torch._subclasses import fake_tensor as _fake_tensor
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from .data_checks import CHECKED_CALLS, DATA_CHECKED
from .exc import unsupported
from .dynamic import (has_symbolic, is_symbolic, new_shape_env, shape_guard_exprs, symbolic_fake,
                      symbolic_float, symbolic_int)
from .fakecache import SLOW, direct, input_fake, learn, memo_key, op_key, op_result, remember, replay
from .guards import Guard, GuardSet, shape_guard, tensor_guard
from .overlap import refused_write
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
        self.fake_mode = _FactMode()
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
            tensors = _tensor_args(fx_args, fake_args, []) + _tensor_args(fx_kwargs, fake_kwargs, [])
            versions = _versions(tensors)
            outs = [(t, t.shape) for t in _flat_tensors(fake_kwargs.get("out"))]
            log = self.fake_mode.log = _WriteLog()
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
            if self.shape_env is not None and free_unbacked_symbols(result):
                # With a shape environment, torch's fakes answer a read of tensor data (a 0-d
                # tensor as arange's bound) with an unbacked size instead of raising: the
                # result's size is still the data's, so the op stays outside the graph.
                unsupported("data_dependent", f"{what} depends on tensor data (a size read from a tensor)")
            writes, aliases, items = _memory_facts(tensors, versions, log, result)
            if self.picked_storages and any(n in writes and _storage(t) in self.picked_storages
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
        node.meta["writes"] = _positions(node, writes)
        node.meta["aliases"] = _positions(node, aliases)
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
        inputs = {_storage(i.node.meta["val"]) for i in self.inputs if isinstance(i.node.meta["val"], torch.Tensor)}
        return any(_storage(t) in inputs for t in resized)

    def picked(self, var) -> bool:
        """Whether `var` is a min()/max() pick or one of its candidates (picked_storages)."""
        return bool(self.picked_storages) and _storage(var.fake) in self.picked_storages

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


def written_values(node: fx.Node) -> list | None:
    """The graph values `node` writes (a write through a view also writes what it views:
    follow `aliased_values`), or None when unknown."""
    writes = node.meta.get("writes")
    return None if writes is None else [node.all_input_nodes[i] for i in writes]


def aliased_values(node: fx.Node) -> list | None:
    """The graph values whose memory `node`'s result shares ([]: a fresh tensor, or no
    tensor), or None when unknown."""
    shared = node.meta.get("aliases")
    return None if shared is None else [node.all_input_nodes[i] for i in shared]


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


def _tensor_args(fx_value, fake_value, acc: list) -> list:
    """(fx node, fake tensor) pairs of one lowered argument, walked in parallel."""
    if isinstance(fake_value, torch.Tensor):
        if isinstance(fx_value, fx.Node):
            acc.append((fx_value, fake_value))
    elif isinstance(fake_value, (list, tuple)):
        for n, f in zip(fx_value, fake_value):
            _tensor_args(n, f, acc)
    elif isinstance(fake_value, dict):
        for k, f in fake_value.items():
            _tensor_args(fx_value[k], f, acc)
    return acc


def _flat_tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flat_tensors(v)] if isinstance(value, (list, tuple)) else []


def _versions(tensors: list) -> list | None:
    """Version counters of the arguments, or None where one has none (inference tensors)."""
    try:
        return [t._version for _, t in tensors]
    except RuntimeError:
        return None


# aten ops that write batch norm's running statistics without their schema saying so (nor
# their version counters): written argument positions, and the `training` flag's position.
_UNDECLARED_WRITES = {
    "aten::native_batch_norm": ((3, 4), 5),
    "aten::cudnn_batch_norm": ((3, 4), 5),
    "aten::miopen_batch_norm": ((3, 4), 5),
    "aten::batch_norm_update_stats": ((1, 2), None),
}
_WRITE_SPOTS: dict = {}  # aten op -> ((position, name, keyword only, flag position), ...)


def _write_spots(func) -> tuple:
    schema = getattr(func, "_schema", None)
    if schema is None:
        return ()
    args = schema.arguments
    spots = [(i, a.name, a.kwarg_only, None) for i, a in enumerate(args)
             if a.alias_info is not None and a.alias_info.is_write]
    positions, flag = _UNDECLARED_WRITES.get(schema.name, ((), None))
    spots += [(i, args[i].name, False, flag) for i in positions]
    return tuple(spots)


class _WriteLog:
    """The tensors the aten ops of one traced call write, by their schemas."""

    __slots__ = ("ids", "storages", "overlap", "checked")

    def __init__(self):
        self.ids: set = set()
        self.storages: set = set()
        self.overlap = None  # why eager may refuse a write (overlap.py), or None
        self.checked = None  # an aten op that checks tensor values (data_checks.py), or None

    def note(self, spots, args, kwargs) -> None:
        written = []
        for i, name, kwarg_only, flag in spots:
            if flag is not None and not (args[flag] if flag < len(args) else kwargs.get("training")):
                continue
            v = kwargs.get(name) if kwarg_only or i >= len(args) else args[i]
            listed = isinstance(v, (list, tuple))
            for k, t in enumerate(v if listed else (v,)):  # Tensor(a!)[] too
                if isinstance(t, torch.Tensor):
                    self.ids.add(id(t))
                    self.storages.add(_storage(t))
                    written.append((k if listed else None, t))
        if written and self.overlap is None:
            self.overlap = refused_write(written, [*args, *kwargs.values()], _storage)


# Ops FakeTensorMode.dispatch answers first, from the tensor's own fields (prim.device).
_META_HANDLERS = getattr(_fake_tensor, "_DISPATCH_META_HANDLERS", {})


class _FactMode(FakeTensorMode):
    """FakeTensorMode that, while `log` is set, notes what each aten op writes by its
    schema. Version counters alone miss writes: foreach and fused ops do not bump them on
    fake tensors, batch norm never bumps its running statistics', and inference tensors
    have none."""

    log = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo (two eval-frame
        # switches a call, 2% of a model's first trace) so that Dynamo never traces it; this
        # mode runs only inside minidynamo's own traces.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        log = self.log
        if log is not None:
            spots = _WRITE_SPOTS.get(func)
            if spots is None:
                spots = _WRITE_SPOTS[func] = _write_spots(func)
            if spots:
                log.note(spots, args, kwargs or {})
            if func.overloadpacket in DATA_CHECKED:
                log.checked = func
        handler = _META_HANDLERS.get(func)
        if handler is not None:  # prim.device and the like: FakeTensorMode.dispatch's first step
            return handler(args)
        kwargs = kwargs or {}
        result = direct(self, func, args, kwargs)
        if result is not SLOW:
            return result
        key = memo_key(self, func, args, kwargs)
        if key is not None:
            result = replay(self, key, args)
            if result is not SLOW:
                return result
        result = super().__torch_dispatch__(func, types, args, kwargs)
        if key is not None:
            learn(key, args, kwargs, result)
        return result


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
        return None


def _memory_facts(tensors: list, versions, log, result):
    """(nodes written, nodes whose storage the result shares, per-item sharing for a
    tuple result or ()), from one fake run of the op."""
    if not tensors:
        return (), (), ()
    # Storages after the op: set_ moves an argument onto another's storage.
    storages = [(n, _storage(t)) for n, t in tensors]
    written = ()
    if versions is not None and [t._version for _, t in tensors] != versions:
        written = tuple(n for (n, t), v in zip(tensors, versions) if t._version != v)
    if log.ids:
        written += tuple(n for (n, t), (_, st) in zip(tensors, storages)
                         if id(t) in log.ids or st in log.storages or st is None)
    written = _unique(written)
    if isinstance(result, torch.Tensor):
        return written, _shared(storages, result), ()
    shared, items = (), []
    for r in result if isinstance(result, (tuple, list)) else ():
        mine = _shared(storages, r) if isinstance(r, torch.Tensor) else ()
        shared += mine
        items.append(bool(mine))
    return written, _unique(shared), tuple(items)


def _shared(storages: list, t: torch.Tensor) -> tuple:
    """Argument nodes whose storage `t` shares (all of them where a storage is unknown)."""
    s = _storage(t)
    return _unique(n for n, st in storages if st == s or s is None or st is None)


def _positions(node: fx.Node, values: tuple) -> tuple:
    if not values:
        return ()
    inputs = node.all_input_nodes
    lift = getattr(node.graph, "lift", None)  # a body's graph names outer values by placeholders
    return tuple(inputs.index(lift(v) if lift is not None else v) for v in values)


def _unique(nodes) -> tuple:
    return tuple(dict.fromkeys(nodes))


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
