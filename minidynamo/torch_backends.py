"""torch's own named backends ("aot_eager", "inductor", ...) for minidynamo's graphs.

The backend comes from torch's registry (`torch._dynamo.backends.registry`), so it follows
the installed torch. Before the graph is handed over (`for_torch_backend`):

* each Triton launch node, in the graph and in the bodies of its autograd.Function nodes,
  becomes torch's own `triton_kernel_wrapper_mutation` higher-order op with the kernel and
  its constant arguments in torch's `kernel_side_table`: AOTAutograd then functionalizes
  the launch and inductor compiles the user's kernel together with the ops around it, as
  it does for a graph TorchDynamo captured;
* a NumPy scalar constant in a node's arguments becomes a call building it
  (`numpy.float64(0.25)`; `compile_with` does this for every backend): the code
  generated from the graph has no `np` name, and the exact NumPy scalar must reach the op, since torch treats some of them
  unlike the Python scalar of the same value (`torch.tensor(np.float64(2))` is float64,
  `torch.full((2,), np.bool_(True))` is float32);
* a Function node whose backward runs the user's function eagerly (it could not be
  traced) is refused: AOTAutograd would trace that function once, at compile time, where
  it prints, reads gradient values or launches kernels on fake tensors.

A Function node keeps minidynamo's own target (autograd_function.py): like torch's
`autograd_function_apply`, it is a generated torch.autograd.Function over the two bodies,
which AOTAutograd traces through, the backward body included, when it builds the joint
graph. minidynamo's own launch program stays the default path (backend="eager").

Dynamic sizes. A graph traced with symbolic sizes is handed over as torch.compile hands it
(`OutputGraph.call_user_compiler`): the placeholders' fakes, with their SymInts, made again
in a fresh FakeTensorMode on the trace's ShapeEnv, under a TracingContext with that mode;
AOTAutograd and inductor take the mode and the environment from there, and compile one
artifact for every size. What they decide about sizes lands in the environment, which the
entry's guards are produced from after the backend ran (convert.py). A backend that
cannot take symbolic inputs (not in `_SYMBOLIC_BACKENDS`, or raising on them) gets
`StaticPerSize`: one artifact per set of input sizes, never one size's for another.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading

import torch
import torch.fx as fx

from .dynamic import has_symbolic, hint, is_symbolic
from .exc import BackendError
from .autograd_function import AutogradFunctionApply
from .triton.capture import TritonKernelWrapperMutation, ConfigGrid
from .triton.kernels import kernel_chain

log = logging.getLogger("minidynamo.torch_backends")
# minidynamo's own names for what torch registers under another.
_ALIASES: dict = {}
# Backends that compile one artifact for all sizes of symbolic fake inputs.
_SYMBOLIC_BACKENDS = frozenset({"aot_eager", "aot_eager_default_partitioner", "aot_eager_decomp_partition",
                                "inductor"})


def torch_backend_names() -> list:
    """The backend names torch's registry has (imports torch._dynamo on first use)."""
    from torch._dynamo.backends.registry import list_backends
    return list(list_backends()) + ["aot_eager"]  # torch lists it among its debug ones


def takes_symbolic_inputs(name: str) -> bool:
    """Whether torch's backend `name` compiles one artifact for every size of symbolic
    fake inputs (AOTAutograd's and inductor's do); others specialise to the sizes handed."""
    return _ALIASES.get(name, name) in _SYMBOLIC_BACKENDS


def torch_backend(name: str):
    """A minidynamo backend running torch's backend `name`, or None if torch has none."""
    from torch._dynamo.backends.registry import lookup_backend
    try:
        compiler = lookup_backend(_ALIASES.get(name, name))
    except Exception:  # torch raises its own InvalidBackend
        return None
    return _wrapped(name, compiler)


def inductor_backend(mode, options, dynamic):
    """torch.compile(backend="inductor", mode=..., options=...)'s backend: inductor with
    the mode's settings and `options` applied to its config for this function's graphs
    (torch's own wrapper, which also checks the option names and types)."""
    try:
        compiler = torch._TorchCompileInductorWrapper(mode, options, dynamic)
    except RuntimeError as e:  # an unknown option or a value of the wrong type
        msg = str(e)
        unknown = [k for k in options or () if k.replace("-", "_") not in torch._inductor.config.get_config_copy()]
        if unknown:
            import difflib
            close = difflib.get_close_matches(unknown[0].replace("-", "_"),
                                              torch._inductor.config.get_config_copy(), n=1)
            msg = (f"Inductor has no option {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                   + "; its options are the names in torch._inductor.config")
        raise ValueError(f"minidynamo.optimize(backend='inductor', options=...): {msg}") from None
    run = _wrapped("inductor", compiler)
    what = ", ".join(([f"mode={mode!r}"] if mode else []) + ([f"options={options!r}"] if options else []))
    run.__name__ = run.__qualname__ = f"inductor({what})" if what else "inductor"
    return run


def _wrapped(name: str, compiler):
    """torch's backend `compiler` (registered as `name`), taking minidynamo's graphs."""
    try:
        from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation  # noqa: F401
    except ImportError:  # said at lookup: graphs with launches will be refused
        import warnings
        warnings.warn(f"this torch has no triton_kernel_wrapper_mutation higher-order op: graphs with "
                      f"Triton launches cannot go to torch's {name!r} backend (plain torch ops can)",
                      RuntimeWarning, stacklevel=4)

    def run(gm: fx.GraphModule, example_inputs):
        if any(n.meta.get("made_parameter") for n in gm.graph.nodes):
            # An nn.Parameter made in the graph and used there: its ops' gradients must reach
            # that object (variables/torch.py), which AOTAutograd would not keep a leaf.
            log.info("%s: runs uncompiled: it makes an nn.Parameter that its ops use", gm.__class__.__name__)
            return gm.forward
        gm = for_torch_backend(gm, compiles_kernels="inductor" in name)
        fakes, why = symbolic_inputs(gm, example_inputs)
        if fakes is None:  # a static graph: torch's backend gets the real inputs, as ever
            return _compile(compiler, name, gm, example_inputs)
        if why is None and not takes_symbolic_inputs(name):
            why = f"torch's {name!r} backend specialises to the sizes it is handed"
        if why is None:
            try:
                return _compile(compiler, name, gm, fakes, symbolic=True)
            except BackendError:
                raise
            except Exception as e:  # the static artifacts below may still be made
                why = f"torch's {name!r} backend failed on symbolic inputs ({type(e).__name__}: {e})"
        log.info("%s: one compiled artifact per size: %s", gm.__class__.__name__, why)
        return StaticPerSize(functools.partial(_compile, compiler, name, gm), example_inputs, why)

    run.__name__ = run.__qualname__ = name
    return run


def scalar_reads(gm: fx.GraphModule) -> list:
    """The unbacked values of the graph's `t.item()` nodes (scalar_reads.py): a graph with
    one is handed over as a symbolic one, over the environment they belong to."""
    return [n.meta["val"] for n in gm.graph.nodes if n.op == "call_method" and n.target == "item"
            and isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))]


def symbolic_inputs(gm: fx.GraphModule, example_inputs) -> tuple:
    """(the fakes the trace made for the graph's inputs, why a backend may not take them),
    or (None, None) where no input is symbolic. The fakes are the placeholders' values:
    tensors with SymInt sizes, SymInts for int arguments, all of the trace's shape
    environment, as torch.compile hands them to its backends."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fakes = [n.meta.get("val") for n in placeholders]
    symbolic = any(has_symbolic(tuple(v.shape)) or has_symbolic(v.stride()) if isinstance(v, torch.Tensor)
                   else is_symbolic(v) for v in fakes)
    if not symbolic and not scalar_reads(gm):
        return None, None
    if len(fakes) != len(example_inputs):
        return fakes, "the graph's placeholders are not its inputs"
    for node, fake, real in zip(placeholders, fakes, example_inputs):
        if isinstance(real, torch.Tensor) != isinstance(fake, torch.Tensor):
            return fakes, f"input {node.name} has no fake of its kind"
        # A placeholder's fake carries what in-place ops did to its metadata (`x.t_()`);
        # the backend must see the input as it comes in. Sizes as traced are the hints.
        if isinstance(real, torch.Tensor) and (
                [hint(s) for s in fake.shape] != list(real.shape)
                or [hint(s) for s in fake.stride()] != list(real.stride())
                or hint(fake.storage_offset()) != real.storage_offset()
                or fake.requires_grad != real.requires_grad):
            return fakes, f"the graph changes the shape, strides or grad of input {node.name} in place"
    return fakes, None


# Errors of torch's backends on which the graph runs uncompiled instead (see _compile).
_UNCOMPILED_WHEN = ("aot_autograd() does not yet handle",
                    "more than one element of the written-to tensor refers to a single memory location",
                    # AOTAutograd traces the backward at compile time, where a write into a
                    # value the backward needs raises; eager raises only if backward runs.
                    "needed for gradient computation has been modified by an inplace operation")


def _compile(compiler, name: str, gm: fx.GraphModule, inputs, symbolic: bool = False):
    """torch's backend on `gm`: over symbolic fakes, under a tracing context with their fake
    mode (what AOTAutograd and inductor take the mode and the shape environment from, as
    under torch.compile); over real inputs, as a plain call."""
    context = contextlib.nullcontext()
    if symbolic:
        from torch._guards import TracingContext, tracing
        mode, inputs = backend_fakes(gm, inputs)
        context = tracing(TracingContext(mode))
    # Our kernel table stays off the graph while torch has it: torch's caches pickle the
    # graph module for their keys, and the launches are torch's own ops by now.
    kernels = gm.__dict__.pop("_minidynamo_kernels", None)
    try:
        with context:
            return compiler(gm, inputs)
    except (AssertionError, RuntimeError) as e:
        if not any(words in str(e) for words in _UNCOMPILED_WHEN):
            if isinstance(e, AssertionError):
                raise
            _explain_launch_failure(gm, e)
            raise
        # AOTAutograd refuses some writes into inputs that share memory with other inputs (a
        # detached alias, a view of another dtype), meets a write eager refuses too (into
        # an expanded input) or one that only eager's backward would refuse: the graph runs
        # uncompiled, as eager would, raising eager's error where eager does.
        log.info("%s: runs uncompiled: torch's %r backend refused it (%s)", gm.__class__.__name__, name,
                 str(e).splitlines()[0])
        return gm.forward
    finally:
        if kernels is not None:
            gm._minidynamo_kernels = kernels


def _explain_launch_failure(gm: fx.GraphModule, e: RuntimeError) -> None:
    """A torch that cannot keep a backward's Triton write into a forward input says so."""
    writers = _functions_launching_in_backward(gm)
    if writers and "leaf Variable that requires grad is being used in an in-place" in str(e):
        raise BackendError(
            f"torch {torch.__version__}'s AOTAutograd failed on the backward of {', '.join(writers)}, "
            "whose Triton kernels write into the tensors they are given: this torch cannot keep a "
            "backward's write into a forward input that requires grad (torch 2.13 can); use "
            f"backend='eager' ({e})") from e


def backend_fakes(gm: fx.GraphModule, fakes: list) -> tuple:
    """(a fresh FakeTensorMode over the trace's shape environment, the trace's fakes made
    again in it): what torch.compile hands its backend. Its sizes are the same SymInts; the
    mode is a plain FakeTensorMode, the type torch registers its higher-order ops' fake
    rules for (the trace's own mode is a subclass that notes writes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    shape_env = next(v.node.shape_env for v in (*_sym_values(fakes), *scalar_reads(gm)))
    mode = FakeTensorMode(shape_env=shape_env)
    return mode, [mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for v in fakes]


@contextlib.contextmanager
def user_backend_context(gm: fx.GraphModule, example_inputs):
    """What a callable backend is compiled under, and the inputs it gets. For a graph with
    symbolic sizes: the real tensors, as under torch.compile, inside a tracing context
    whose fake mode makes each of them its symbolic fake, and an int argument traced
    symbolically as its SymInt. A backend built on AOTAutograd or inductor (which read the
    mode from there) then compiles one artifact for every size, not one for the first size
    that calls of other sizes would run (a silent wrong result)."""
    fakes, why = symbolic_inputs(gm, example_inputs)
    if fakes is None or why is not None:
        yield example_inputs
        return
    from torch._guards import TracingContext, tracing
    mode, made = backend_fakes(gm, fakes)
    for real, fake in zip(example_inputs, made):
        if isinstance(real, torch.Tensor):
            mode.fake_tensor_converter.set_tensor_memo(real, fake)
    inputs = [fake if not isinstance(real, torch.Tensor) and is_symbolic(fake) else real
              for real, fake in zip(example_inputs, made)]
    with tracing(TracingContext(mode)):
        yield inputs
    del made  # the memo holds the fakes weakly: alive until the backend returned


def _sym_values(fakes: list):
    for v in fakes:
        if isinstance(v, torch.Tensor):
            yield from (s for s in (*v.shape, *v.stride()) if is_symbolic(s))
        elif is_symbolic(v):
            yield v


class StaticPerSize:
    """What a graph with symbolic sizes runs as when torch's backend cannot take them (`why`):
    one artifact compiled per distinct set of input sizes, strides and int arguments, each
    used for exactly those (an artifact compiled for 7 rows never sees 9)."""

    def __init__(self, compile_static, example_inputs, why: str):
        self.compile_static = compile_static
        self.why = why
        self.artifacts: dict = {}
        self._lock = threading.Lock()
        self._get(tuple(example_inputs))

    def _get(self, args: tuple):
        key = tuple((tuple(a.shape), a.stride(), a.storage_offset()) if isinstance(a, torch.Tensor) else a
                    for a in args)
        found = self.artifacts.get(key)
        if found is None:
            with self._lock:
                found = self.artifacts.get(key)
                if found is None:
                    grad_mode = torch.is_grad_enabled()  # a backend that runs the graph runs its state changes
                    try:
                        found = self.compile_static(list(args))
                    finally:
                        torch._C._set_grad_enabled(grad_mode)
                    if isinstance(found, torch.nn.Module):
                        found = found.forward
                    self.artifacts[key] = found
        return found

    def __call__(self, *args):
        return self._get(args)(*args)


def for_torch_backend(gm: fx.GraphModule, compiles_kernels: bool = False) -> fx.GraphModule:
    """`gm` (changed in place) as torch's backends can take it: see the module docstring."""
    _refuse_untraced_backwards(gm)
    return with_torch_triton_ops(with_numpy_scalars_built(gm), compiles_kernels)


def _graph_modules(gm: fx.GraphModule) -> list:
    """`gm` and the bodies of its autograd.Function nodes (nested ones too), once each."""
    return [m for _, m in gm.named_modules() if isinstance(m, fx.GraphModule)]


class _InterpreterAnalysisFilter(logging.Filter):
    """torch analyses a kernel's Triton IR to learn which inputs it writes; a kernel run by
    Triton's interpreter has none, so torch logs a warning with a traceback, at every
    functionalization, and treats every input as written (correct, only less optimized).
    That expected failure is said once, in one line, on minidynamo's logger instead."""

    said = False

    def filter(self, record):
        if not (record.getMessage().startswith("Encountered an exception in identify_")
                and _not_a_jit_function(record.exc_info)):
            return True
        if not _InterpreterAnalysisFilter.said:
            _InterpreterAnalysisFilter.said = True
            log.info("Triton kernels run by Triton's interpreter: torch's backends cannot read which "
                     "inputs they write, so every tensor input of a launch is taken as written")
        return False


def _not_a_jit_function(exc_info) -> bool:
    """Whether torch's analysis failed because the kernel is no JITFunction (an interpreted
    one): said by the message on newer torch, by the failing `assert isinstance(kernel,
    JITFunction)` line on older."""
    if not exc_info or exc_info[1] is None:
        return False
    if "InterpretedFunction" in str(exc_info[1]):
        return True
    import traceback
    frames = traceback.extract_tb(exc_info[2])
    return bool(frames) and "JITFunction" in (frames[-1].line or "")


@functools.cache
def _quiet_interpreter_analysis():
    for name in ("torch._dynamo", "torch._higher_order_ops.triton_kernel_wrap"):  # where torch versions log it
        logging.getLogger(name).addFilter(_InterpreterAnalysisFilter())


def with_torch_triton_ops(gm: fx.GraphModule, compiles_kernels: bool = False) -> fx.GraphModule:
    """`gm` with its Triton launch nodes, and those of its Function nodes' bodies,
    rewritten as torch's triton_kernel_wrapper_mutation over torch's kernel side table.
    A graph with no launches is returned as it is.
    `compiles_kernels`: the backend compiles the kernels itself (inductor), which it cannot
    do for kernels run by Triton's interpreter."""
    launches = [(m, n) for m in _graph_modules(gm) for n in m.graph.nodes
                if n.op == "call_function" and isinstance(n.target, TritonKernelWrapperMutation)]
    if not launches:
        return gm
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_mutation
    except ImportError as e:
        raise BackendError("this torch has no triton_kernel_wrapper_mutation higher-order op, which torch's "
                           "backends need for Triton launches: use backend='eager' (minidynamo's launcher) "
                           f"({e})") from e
    for _, node in launches:  # all checked before any is changed
        _check_compilable(node.target.table.records[node.kwargs["kernel_idx"]], compiles_kernels)
    for _, node in launches:
        _as_torch_launch(node, kernel_side_table, triton_kernel_wrapper_mutation)
    _quiet_interpreter_analysis()
    for changed in {id(m): m for m, _ in launches}.values():
        changed.graph.lint()
        changed.recompile()
    return gm


def _check_compilable(record, compiles_kernels: bool) -> None:
    if compiles_kernels and type(kernel_chain(record.kernel)[-1]).__name__ == "InterpretedFunction":
        raise BackendError(f"kernel {record.name} runs in Triton's interpreter (TRITON_INTERPRET=1), "
                           "which inductor cannot compile: use backend='aot_eager' or 'eager'")


def _as_torch_launch(node: fx.Node, side_table, wrapper) -> None:
    record = node.target.table.records[node.kwargs["kernel_idx"]]
    grids = [tuple(record.grid)] if record.grid is not None else None
    if record.grid_per_call:  # graph values already: one grid per config, in order
        grids = [tuple(g) for g in node.kwargs["grid"]]
    elif isinstance(record.grid, ConfigGrid):  # torch takes one grid per config, in order
        grids = [record.grid(dict(config.all_kwargs())) for config in kernel_chain(record.kernel)[0].configs]
    kwargs = dict(node.kwargs["kwargs"])
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, fx.Node)}
    constants = {k: v for k, v in kwargs.items() if not isinstance(v, fx.Node)}
    node.target = wrapper
    node.kwargs = {
        "kernel_idx": side_table.add_kernel(record.kernel),
        "constant_args_idx": side_table.add_constant_args(constants),
        "grid": grids,
        "tma_descriptor_metadata": {},
        "kwargs": tensors,
    }


def _functions_launching_in_backward(gm: fx.GraphModule) -> list:
    """Names of the Functions of `gm` whose backward body launches kernels (in torch's form)."""
    names = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, AutogradFunctionApply):
            bwd = gm.get_submodule(node.args[1].target)
            if any(getattr(n.target, "__name__", None) == "triton_kernel_wrapper_mutation" for n in bwd.graph.nodes):
                names.append(node.target.spec.name)
    return names


def _refuse_untraced_backwards(gm: fx.GraphModule) -> None:
    """A Function node whose backward is the user's function run eagerly: torch's tracing
    would run that function once, at compile time, on fake tensors (its prints, value
    reads and kernel launches would not happen at backward time). Say so instead.
    Only nodes whose outputs can carry a gradient count: a Function applied inside
    another's forward runs under no_grad, so its backward never runs."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, AutogradFunctionApply):
            continue
        spec = node.target.spec
        outputs = node.meta.get("val")  # fake outputs; without them, assume a backward may run
        if spec.eager_backward is not None and (
                outputs is None or any(getattr(v, "requires_grad", True) for v in outputs)):
            raise BackendError(f"{spec.name}.backward could not be traced ({spec.eager_backward.reason}) "
                               "and runs as the user's function, which torch's backends would trace once "
                               "at compile time instead of running at each backward: use backend='eager'")


def with_numpy_scalars_built(gm: fx.GraphModule) -> fx.GraphModule:
    """`gm` (changed in place) with each NumPy scalar constant in its nodes' arguments, and
    in its Function nodes' bodies, made by a node calling its type on the Python value
    (`numpy.float64(0.25)`). fx writes a constant by its repr, and `np.float64(0.25)`
    names a module the GraphModule's code does not have (a NameError when it runs). The
    op still gets the NumPy scalar itself: torch treats some of them unlike the Python
    scalar of the same value."""
    for module in _graph_modules(gm):
        _build_numpy_scalars(module)
    return gm


def _build_numpy_scalars(gm: fx.GraphModule) -> None:
    import numpy as np
    graph, changed = gm.graph, False

    def rebuilt(value, before):
        nonlocal changed
        if isinstance(value, np.generic):
            item = value.item()
            if type(item) not in (bool, int, float, complex) or type(value)(item).tobytes() != value.tobytes():
                raise BackendError(f"the NumPy scalar {value!r} in the graph has no exact Python value to "
                                   "rebuild it from in the graph's code: use backend='eager'")
            changed = True
            with graph.inserting_before(before):
                return graph.call_function(type(value), (item,))
        if isinstance(value, (tuple, list)):
            return type(value)(rebuilt(v, before) for v in value)
        if isinstance(value, dict):
            return {k: rebuilt(v, before) for k, v in value.items()}
        return value

    for node in list(graph.nodes):
        if node.op in ("call_function", "call_method", "call_module", "output"):
            node.args = rebuilt(node.args, node)
            node.kwargs = rebuilt(node.kwargs, node)
    if changed:
        graph.lint()
        gm.recompile()
