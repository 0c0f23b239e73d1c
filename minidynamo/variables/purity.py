"""Which torch callables a trace may call for real.

A trace never runs anything with an effect. Torch functions fall into these groups,
decided *before* the call:

* operators — the functions torch generates from its operator schemas
  (`torch._C._VariableFunctions`, `torch._C._nn`, `_fft`, `_linalg`, `_special`, ...) and
  `torch.ops` overloads: they run on fake tensors, through the dispatcher;
* state queries — `torch.is_grad_enabled()`, `torch.get_default_dtype()`, ...: folded
  to constants; every entry checks the global state they read (globalstate.py);
* pure queries — `torch.cuda.is_available()`, `torch.jit.is_tracing()`, ...: folded to
  constants, each guarded (`PROCESS_CONSTANT` ones only by the identity of the function,
  since their value cannot change within a process; the others by calling them again);
* trace answers — `torch.compiler.is_compiling()` and its aliases: True inside a trace, as
  under torch.compile (`is_exporting()`: False), pinned by the function's identity only;
* everything else that is not Python bytecode: declined, naming the function.
"""
from __future__ import annotations

import functools
import importlib
import types

import torch
import torch.utils.checkpoint

_OPERATOR_NAMESPACES = ("_VariableFunctions", "_nn", "_fft", "_linalg", "_special", "_nested",
                        "_sparse")


@functools.lru_cache(maxsize=None)
def _operator_functions() -> frozenset:
    found = set()
    for ns_name in _OPERATOR_NAMESPACES:
        ns = getattr(torch._C, ns_name, None)
        for name in dir(ns) if ns is not None else ():
            value = getattr(ns, name, None)
            if isinstance(value, types.BuiltinFunctionType):
                found.add(value)
    return frozenset(found)


def is_operator(fn) -> bool:
    """A torch operator: runs on fake tensors through the dispatcher, touching nothing else."""
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    try:
        return fn in _operator_functions()
    except TypeError:  # unhashable
        return False


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return None
    return getattr(obj, attr, None)


# Reads of process-wide state that globalstate.snapshot() covers.
_STATE_QUERIES = (
    "torch.is_grad_enabled", "torch.is_inference_mode_enabled", "torch.get_default_dtype",
    "torch.get_default_device", "torch.is_autocast_enabled", "torch.get_autocast_dtype",
    "torch.is_autocast_cpu_enabled", "torch.get_autocast_cpu_dtype", "torch.get_autocast_gpu_dtype",
    "torch.is_autocast_cache_enabled", "torch.are_deterministic_algorithms_enabled",
    "torch.is_deterministic_algorithms_warn_only_enabled", "torch.get_num_threads",
    "torch._C._is_torch_function_enabled", "torch._C._is_any_autocast_enabled",
    "torch._C._len_torch_dispatch_stack", "torch._C._len_torch_function_stack",
)
# Answers fixed for the life of the process (device presence, build features).
_PROCESS_CONSTANTS = (
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.backends.mps.is_available",
    "torch.backends.cudnn.is_available", "torch.distributed.is_available",
    "torch.jit.is_scripting", "torch._jit_internal.is_scripting",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability",
    "torch.cuda.get_device_name", "torch.cuda.is_bf16_supported", "torch.amp.is_autocast_available",
    "torch.backends.cuda.is_built", "torch.backends.mps.is_built", "torch.backends.openmp.is_available",
)
# Answers inside a trace, whatever the plain call would say: what torch.compile answers.
# NOTE: libraries ask `is_compiling()` to leave eager-only paths (transformers' is_tracing()
# asks it before torch.cuda.is_current_stream_capturing(); others skip host syncs, Python
# checks of tensor data, caches keyed by data_ptr): answering False sent traces down
# those paths and cost graphs. So a traced entry (a resume function's, a callee's
# optimized at a break) runs the compiling branch, as a torch.compile'd frame does; what
# runs eagerly (an eager fallback, a disabled function) makes the plain call, which
# answers False, also as under torch.compile. Code whose branches differ in results
# differs from eager exactly as it does under torch.compile.
_TRACE_ANSWERS = {
    "torch.compiler.is_compiling": True, "torch.compiler.is_dynamo_compiling": True,
    "torch._dynamo.is_compiling": True, "torch._dynamo.external_utils.is_compiling": True,
    "torch._utils.is_compiling": True, "torch.compiler.is_exporting": False,
}
# Answers that can change between calls (tracing by another tool, a process group made,
# a setting assigned, a CUDA graph being captured).
_GUARDED_QUERIES = (
    "torch.jit.is_tracing", "torch._C._is_tracing", "torch._C._get_tracing_state", "torch.onnx.is_in_onnx_export",
    "torch.fx._symbolic_trace.is_fx_tracing", "torch.fx._symbolic_trace.is_fx_symbolic_tracing",
    "torch.cuda.is_current_stream_capturing", "torch.cuda.graphs.is_current_stream_capturing",
    "torch.distributed.is_initialized", "torch._C._are_functorch_transforms_active",
    "torch.cuda.is_initialized", "torch.autograd._is_checkpoint_valid", "torch.cuda.current_device",
    "torch.get_float32_matmul_precision", "torch._C._get_float32_matmul_precision",
    "torch.backends.cuda.flash_sdp_enabled", "torch.backends.cuda.mem_efficient_sdp_enabled",
    "torch.backends.cuda.math_sdp_enabled", "torch.backends.cuda.cudnn_sdp_enabled",
    "torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed",
    "torch._C._get_privateuse1_backend_name",  # torch.utils.rename_privateuse1_backend changes it
)


# torch's API-usage telemetry (a C++ log, once per name and process; torchvision's models
# and Module.__init__ call it): no result and nothing a call could observe, so a trace
# drops it, as torch.compile does.
_TELEMETRY = ("torch._C._log_api_usage_once",)


def qualified_name(fn) -> str:
    """`torch.cuda.is_available`, `torch.nn.functional.relu`: where the function lives."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    if module is None and isinstance(fn, types.BuiltinFunctionType):
        module = getattr(getattr(fn, "__self__", None), "__name__", None)
    return f"{module}.{name}" if module else name


def is_compiler_disabled(fn) -> bool:
    """A `minidynamo.disable` / `torch.compiler.disable` / `torch._dynamo.disable` wrapper
    (or torch's own `torch._disable_dynamo` one): always runs eagerly."""
    return getattr(fn, "_torchdynamo_disable", False) is True or getattr(fn, "_minidynamo_disable", False) is True \
        or is_disabled_by_torch(fn)


def is_checkpoint(fn) -> bool:
    """`torch.utils.checkpoint.checkpoint`: disabled for torch.compile's frames, but
    captured whole (variables/checkpoint.py), as torch.compile captures it."""
    return fn is _CHECKPOINT


_CHECKPOINT = torch.utils.checkpoint.checkpoint


def is_disabled_by_torch(fn) -> bool:
    """A function torch marks with `torch._compile._disable_dynamo` (Optimizer.zero_grad,
    hooks' removal, ...): its wrapper applies torch._dynamo.disable when first called, so
    it is recognised by the wrapper's code."""
    return getattr(fn, "__code__", None) is _disable_dynamo_code()


@functools.cache
def _disable_dynamo_code():
    import torch._compile
    return torch._compile._disable_dynamo(lambda: None).__code__
