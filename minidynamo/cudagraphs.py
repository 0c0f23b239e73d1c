"""mode="cudagraphs": record the whole captured graph — allocations and launches — as one
CUDA graph per guard set and replay it.

Inputs. A recording reads its inputs where they live. A call whose inputs sit at the
addresses of an earlier recording replays it as is (no copies; we hold those tensors, so
the addresses cannot be reused by others); new addresses get a new recording, up to
`MAX_RECORDINGS`. Past that, when the graph writes to no input, one "copy" recording with
its own input buffers is replayed after copying the inputs in; otherwise calls with new
addresses run the plain graph.

Outputs. Every output is cloned out of the graph's memory after a replay: what a caller
keeps is never overwritten by a later replay (cost: one copy per output).

Falls back to the plain graph, saying why, when capture is impossible: no CUDA, an input or
an op on the CPU, an output that may alias an input, or a capture that fails.
"""
from __future__ import annotations

import logging
import operator

import torch
import torch.fx as fx

log = logging.getLogger("minidynamo.cudagraphs")
MAX_RECORDINGS = 4
WARMUP_RUNS = 2  # the first run resolves Triton launchers (autotuning, compilation)

# Ops whose result is a new tensor (never a view of an argument).
_FRESH_FUNCTIONS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.matmul, operator.neg, operator.abs,
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
    torch.empty_like, torch.zeros_like, torch.ones_like, torch.full_like, torch.rand_like,
    torch.randn_like, torch.empty, torch.zeros, torch.ones, torch.full, torch.clone,
    torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.log, torch.add, torch.sub,
    torch.mul, torch.div, torch.matmul, torch.mm, torch.bmm, torch.cat, torch.stack,
    torch.where, torch.sum, torch.mean, torch.softmax, torch.nn.functional.relu,
    torch.nn.functional.gelu, torch.nn.functional.softmax, torch.nn.functional.linear,
}
_FRESH_METHODS = {"clone", "sum", "mean", "relu", "sigmoid", "tanh", "exp", "log", "add",
                  "sub", "mul", "div", "matmul", "softmax", "float", "double", "half"}


def _is_launch(node) -> bool:
    return getattr(node.target, "__module__", "") == "minidynamo.triton"


def _written_by_launch(node, gm) -> list:
    """Graph values a Triton launch node may write (all tensors when unknown)."""
    table = getattr(gm, "_minidynamo_kernels", None)
    if table is None or "kernel_idx" not in node.kwargs:
        return [a for a in node.all_input_nodes]
    record = table.records[node.kwargs["kernel_idx"]]
    written = record.written_tensors()
    kwargs = node.kwargs["kwargs"]
    names = [n for n, v in kwargs.items() if isinstance(v, fx.Node)]
    return [kwargs[n] for n in (names if written is None else written)]


def analyse(gm: fx.GraphModule):
    """(inputs the graph may write, outputs that may alias an input, CPU values)."""
    aliases: dict = {}  # node -> set of input indices it may alias
    written: set = set()
    cpu_nodes = []
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(inputs):
        aliases[n] = {i}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type != "cuda":
            cpu_nodes.append(node.name)
        srcs = set()
        for a in node.all_input_nodes:
            srcs |= aliases.get(a, set())
        mutated_args = []
        if _is_launch(node):
            mutated_args = _written_by_launch(node, gm)
        elif node.op == "call_method" and (node.target.endswith("_") or node.target == "__setitem__"):
            mutated_args = node.args[:1]
        elif node.op == "call_function" and (node.target is operator.setitem or
                                             getattr(node.target, "__name__", "").startswith("i")
                                             and node.target.__module__ == "_operator"):
            mutated_args = node.args[:1]
        for m in mutated_args:
            if isinstance(m, fx.Node):
                written |= aliases.get(m, set())
        fresh = (node.op == "call_function" and node.target in _FRESH_FUNCTIONS) or (
            node.op == "call_method" and node.target in _FRESH_METHODS)
        aliases[node] = set() if fresh else srcs
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    aliasing_outputs = [o.name for o in outs if isinstance(o, fx.Node) and aliases.get(o)]
    return written, aliasing_outputs, cpu_nodes


class _Recording:
    def __init__(self, graph, static_inputs, static_outputs):
        self.graph = graph
        self.inputs = static_inputs
        self.ptrs = tuple(t.data_ptr() for t in static_inputs)
        self.outputs = static_outputs


class CudaGraphRunner:
    """Callable with the compiled graph's signature: replays recordings, else runs plain."""

    def __init__(self, compiled, gm: fx.GraphModule, example_inputs):
        self.compiled = compiled
        self.recordings: list[_Recording] = []
        self.copy_recording: _Recording | None = None
        self.calls = 0
        self.replays = 0
        self.fallback_reason = self._static_reason(gm, example_inputs)
        written, _, _ = analyse(gm) if self.fallback_reason is None else (set(), [], [])
        self.writes_inputs = bool(written)
        if self.fallback_reason:
            log.info("cudagraphs: running the plain graph: %s", self.fallback_reason)

    @staticmethod
    def _static_reason(gm, example_inputs) -> str | None:
        if not torch.cuda.is_available():
            return "no CUDA device"
        if any(not isinstance(t, torch.Tensor) or not t.is_cuda for t in example_inputs):
            return "an input is not a CUDA tensor"
        written, aliasing, cpu_nodes = analyse(gm)
        if cpu_nodes:
            return f"ops on the CPU cannot be recorded: {', '.join(cpu_nodes[:3])}"
        if aliasing:
            return f"output(s) {', '.join(aliasing)} may alias an input (cloning would break the alias)"
        return None

    def __call__(self, *args):
        self.calls += 1
        if self.fallback_reason is not None or self.calls <= WARMUP_RUNS:
            return self.compiled(*args)
        ptrs = tuple(a.data_ptr() for a in args)
        for rec in self.recordings:
            if rec.ptrs == ptrs:
                return self._replay(rec)
        if len(self.recordings) < MAX_RECORDINGS:
            rec = self._record(list(args))
            if rec is not None:
                self.recordings.append(rec)
                return self._replay(rec)
            return self.compiled(*args)
        if not self.writes_inputs:
            rec = self.copy_recording
            if rec is None:
                rec = self.copy_recording = self._record([a.clone() for a in args], owned=True)
                if rec is None:
                    return self.compiled(*args)
            for static, a in zip(rec.inputs, args):
                static.copy_(a)
            return self._replay(rec)
        return self.compiled(*args)

    def _replay(self, rec: _Recording):
        rec.graph.replay()
        self.replays += 1
        return tuple(o.clone() for o in rec.outputs)

    def _record(self, static_inputs, owned: bool = False):
        try:
            if owned:  # our own buffers: a warm-up run on a side stream is harmless
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    self.compiled(*static_inputs)
                torch.cuda.current_stream().wait_stream(stream)
            # NOTE: capturing does not run the kernels, so the caller's inputs are
            # written exactly once, by the replay that follows.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = self.compiled(*static_inputs)
        except Exception as e:
            self.fallback_reason = f"capture failed: {type(e).__name__}: {e}"
            log.warning("cudagraphs: %s; running the plain graph", self.fallback_reason)
            return None
        return _Recording(graph, static_inputs, tuple(outputs))


def wrap_backend(backend_fn):
    """backend → backend whose result replays CUDA graphs."""
    def cudagraphs_backend(gm, example_inputs):
        from .backends import compile_with
        compiled = compile_with(backend_fn, gm, example_inputs)
        return CudaGraphRunner(compiled, gm, example_inputs)
    cudagraphs_backend.__name__ = f"cudagraphs({getattr(backend_fn, '__name__', backend_fn)})"
    # Its runner returns what the wrapped backend's callable returns; that one is checked
    # when the wrapped backend is a user's (the runner is built on it below).
    cudagraphs_backend._minidynamo_trusted = True
    return cudagraphs_backend
