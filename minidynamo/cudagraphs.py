"""mode="cudagraphs": record the whole captured graph — allocations and launches — as CUDA
graphs per guard set and replay them.

Inputs. A recording reads its inputs where they live. A call whose inputs sit at the
addresses of an earlier recording replays it as is (no copies; we hold those tensors, so
the addresses cannot be reused by others). An input seen at more than one address (from the
first call on, warm-up runs included: a decode step's fresh token ids, say) is *moving*;
once one is, a call that matches no recording goes to a "staged" recording, which has its
own buffers for the moving inputs the graph does not write (each call copies them in) and
reads every other input in place (parameters, a KV cache written in place, a position
counter): it is replayed for any address of the staged inputs and the same addresses of the
others (`MAX_RECORDINGS` such sets). With nothing moving, new addresses (new sizes, with
symbolic sizes) get a new recording, up to `MAX_RECORDINGS`; past that, when the graph writes
to no input, a staged recording that copies every input in is replayed. An input the graph
writes is never staged (a replay would write our buffer, not the caller's): such inputs are
read in place, and new addresses of them run the plain graph once the recordings are full.
What the graph writes is what the trace recorded (`analyse`).

Outputs. A call returns aliases of the recording's static outputs (no copy): new tensor
objects sharing the graph's memory, which belongs to the recording's memory pool. An output
you still hold (or any view/alias of it, or autograd saved for backward) is never
overwritten: the next call uses another recording's memory (`MAX_SLOTS` = two per input
set), and when both are held it runs the plain graph (`held_fallbacks` counts those calls);
outputs you drop are reused without a copy. "Held" is read from the reference counts of each
output's storage (`torch._C._storage_Use_Count`, plus the Python references to the storage
object), compared with the counts measured right after capture, when only our own tensors
existed. Without `_storage_Use_Count`, or when an output requires grad, outputs are cloned
instead (`clone_reason` says why).

Training. When the outputs require grad (seen at the first call), each slot records the
backward too and a call goes through an autograd.Function: cudagraph_training.py.

Falls back to the plain graph, saying why, when capture is impossible: no CUDA, an input or
an op on the CPU, an output that may alias an input, an input whose shape or strides the
graph changes in place, or a capture that fails.
"""
from __future__ import annotations

import logging
import threading

import torch
import torch.fx as fx

from . import cudagraph_training, held
from .dynamic import has_symbolic, hint
from .memory_facts import aliased_values, written_values
from .held import HeldCheck
from .backends import compile_with

log = logging.getLogger("minidynamo.cudagraphs")
MAX_RECORDINGS = 4
MAX_SLOTS = 2  # captures per input set: `o = f(a, b)` keeps the last output alive during a call
WARMUP_RUNS = 2  # the first run resolves Triton launchers (autotuning, compilation)


def analyse(gm: fx.GraphModule):
    """(inputs the graph may write, outputs that may alias an input, CPU values), from the
    writes and aliases the trace recorded on each node (graph.py); a node without them
    (made by a graph pass, which moves no storage) may write and alias every value it takes."""
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
        shared = aliased_values(node)
        mine = set()
        for a in node.all_input_nodes if shared is None else shared:
            mine |= aliases.get(a, set())
        aliases[node] = mine
        targets = written_values(node)
        if targets is None:
            targets = node.all_input_nodes
        else:  # set_ moves a value onto another's memory: it aliases what the result does
            for m in targets:
                aliases[m] = aliases.get(m, set()) | mine
        for m in targets:
            written |= aliases.get(m, set())
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    aliasing_outputs = [o.name for o in outs if isinstance(o, fx.Node) and aliases.get(o)]
    return written, aliasing_outputs, cpu_nodes


def reshaped_inputs(gm: fx.GraphModule, example_inputs) -> list:
    """Names of inputs the graph leaves with another shape, strides or offset (transpose_,
    resize_, set_): a replay writes memory but runs no Python, so it cannot redo that.
    A symbolic size is compared by the value it was traced at (comparing the SymInt would
    add a guard to the shape environment)."""
    found = []
    for n, t in zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs):
        fake = n.meta.get("val")
        if isinstance(fake, torch.Tensor) and isinstance(t, torch.Tensor) and (
                [hint(s) for s in fake.shape] != list(t.shape) or [hint(s) for s in fake.stride()] != list(t.stride())
                or hint(fake.storage_offset()) != t.storage_offset()):
            found.append(n.name)
    return found


def has_symbolic_inputs(gm: fx.GraphModule) -> bool:
    """Whether the graph serves more than one set of input sizes (symbolic placeholders)."""
    for n in gm.graph.nodes:
        v = n.meta.get("val") if n.op == "placeholder" else None
        if isinstance(v, torch.Tensor) and (has_symbolic(tuple(v.shape)) or has_symbolic(v.stride())):
            return True
    return False


def _input_key(args, with_sizes: bool) -> tuple:
    """What a recording is replayed for: the inputs' addresses, and with symbolic sizes
    their sizes and strides too (a view of one buffer keeps its address at any length)."""
    if not with_sizes:
        return tuple([a.data_ptr() for a in args])
    return tuple([(a.data_ptr(), tuple(a.shape), a.stride(), a.storage_offset()) for a in args])


class _Slot:
    """One capture of the graph over an input set: the CUDA graph, our static outputs and
    the check of whether a caller still holds them (calibrated right after capture)."""

    __slots__ = ("graph", "outputs", "held")

    def __init__(self, graph, outputs: tuple):
        self.graph = graph
        self.outputs = outputs
        self.held = HeldCheck(outputs)  # free: safe to replay over the outputs

    def is_free(self) -> bool:
        return self.held.is_free()

    def aliases(self) -> tuple:
        """New tensors on our outputs' storage: their use counts show while a caller holds them."""
        outs = self.outputs
        if len(outs) == 1:
            return (outs[0].detach(),)
        return tuple([o.detach() for o in outs])


def _buffer_like(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` of ours with its sizes, strides, dtype and device (the graph was traced
    for those strides; a clone of a view would be compact). Valid contents: a warm-up run
    over it must not index out of bounds."""
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t.detach())


class _InputSet:
    """Static inputs at fixed addresses, and the captures (slots) made over them."""

    __slots__ = ("inputs", "key", "staged", "slots")

    def __init__(self, inputs: list, key: tuple, staged: tuple = ()):
        self.inputs = inputs
        self.key = key  # the key of the calls it replays for
        self.staged = staged  # indices of inputs that are our own buffers: copied in per call
        self.slots: list[_Slot] = []

    @property
    def owned(self) -> bool:
        """Whether any input is a buffer of ours (a warm-up run over them is harmless)."""
        return bool(self.staged)


class CudaGraphRunner:
    """Callable with the compiled graph's signature: replays recordings, else runs plain."""

    def __init__(self, compiled, gm: fx.GraphModule, example_inputs):
        self.compiled = compiled
        self.recordings: list[_InputSet] = []
        # With symbolic sizes one graph serves many sizes, and a recording holds one: the
        # keys carry sizes, and the copy recordings are one per size (up to MAX_RECORDINGS).
        self.symbolic = has_symbolic_inputs(gm)
        self.copy_recordings: dict = {}  # _staged_key -> staged _InputSet
        self.calls = 0
        self.replays = 0
        self.held_fallbacks = 0  # plain runs because every slot's outputs were still held
        self.fallback_reason = self._static_reason(gm, example_inputs)
        written, _, _ = analyse(gm) if self.fallback_reason is None else (set(), [], [])
        self.written: set = written  # indices of the inputs the graph may write
        self.writes_inputs = bool(written)
        self.first_ptrs: list | None = None  # each input's address at the first call
        self.moving: set = set()  # indices of inputs seen at another address since
        self.staged: tuple = ()  # the moving inputs the graph does not write: copied in
        self.clone_reason: str | None = None  # set when outputs are cloned, not aliased
        # Whether autograd differentiates the outputs (seen at the first call): forward and
        # backward are recorded together (cudagraph_training.py).
        self.training = False
        self.needs_grad: tuple = ()
        self.max_slots = MAX_SLOTS
        # The in-place recording replayed last (no sizes in its key, nothing staged): the
        # steady state of a loop calling with the same tensors checks it first, inline.
        self.last: _InputSet | None = None
        # Choosing a free slot, replaying it and handing out its aliases is one step: two
        # threads must not both find the same slot free.
        self._lock = threading.Lock()
        if self.fallback_reason:
            log.info("cudagraphs: running the plain graph: %s", self.fallback_reason)
            return
        if held.use_count is None:
            # Without the count we cannot tell whether an output is still held: one slot
            # per input set, and every output cloned out of it.
            self.max_slots = 1
            self._clone_outputs("this torch has no torch._C._storage_Use_Count")
        # A class of its own whose __call__ takes the graph's inputs by name: the steady
        # state's check reads each address without building an argument tuple first.
        self.__class__ = type(CudaGraphRunner.__name__, (CudaGraphRunner,),
                              {"__module__": __name__, "__call__": _steady_call(len(example_inputs))})

    @property
    def copy_recording(self) -> _InputSet | None:
        """The recording over our own input buffers (the first one, with symbolic sizes)."""
        return next(iter(self.copy_recordings.values()), None)

    @staticmethod
    def _static_reason(gm, example_inputs) -> str | None:
        if not torch.cuda.is_available():
            return "no CUDA device"
        if any(not isinstance(t, torch.Tensor) or not t.is_cuda for t in example_inputs):
            return "an input is not a CUDA tensor"
        written, aliasing, cpu_nodes = analyse(gm)
        if cpu_nodes:
            return f"ops on the CPU cannot be recorded: {', '.join(cpu_nodes[:3])}"
        reshaped = reshaped_inputs(gm, example_inputs)
        if reshaped:
            return (f"input(s) {', '.join(reshaped)} change shape or strides in place "
                    "(a replay runs no Python)")
        if aliasing:
            return f"output(s) {', '.join(aliasing)} may alias an input (a replay returns the recording's own memory)"
        return None

    def _clone_outputs(self, why: str) -> None:
        self.clone_reason = why
        log.info("cudagraphs: outputs are cloned after each replay: %s", why)

    def __call__(self, *args):
        return self._call(args)

    def _call(self, args):
        self.calls += 1
        last = self.last
        if last is not None and self.fallback_reason is None and last.key == tuple([a.data_ptr() for a in args]):
            with self._lock:
                out = self._replay_free_slot(last, args)
            return self.compiled(*args) if out is None else out
        if self.fallback_reason is not None:
            return self.compiled(*args)
        if self.calls <= WARMUP_RUNS:
            self._note_addresses(args)
            out = self.compiled(*args)
            if self.calls == 1:
                self._note_training(args, out)
            return out
        if self.recordings:
            key = _input_key(args, self.symbolic)
            for rec in self.recordings:
                if rec.key == key:
                    return self._run(rec, args)
        if self.staged:
            rec = self.copy_recordings.get(self._staged_key(args))
            if rec is not None:
                return self._run(rec, args)
        return self._miss(args)

    def _note_training(self, args, out) -> None:
        if not any(isinstance(o, torch.Tensor) and o.requires_grad for o in out):
            return
        self.training = True
        self.needs_grad = tuple(a.requires_grad for a in args)  # guarded: the same every call
        grad_written = sorted(i for i in self.written if args[i].requires_grad)
        if not any(self.needs_grad):
            self.fallback_reason = "outputs require grad but no input does (nothing to record a backward for)"
            log.info("cudagraphs: running the plain graph: %s", self.fallback_reason)
        elif grad_written:
            self.fallback_reason = (f"the graph writes input(s) {grad_written} that require grad "
                                    "(autograd must see the write)")
            log.info("cudagraphs: running the plain graph: %s", self.fallback_reason)

    def _note_addresses(self, args) -> None:
        """Mark the inputs whose address differs from their first call's as moving."""
        ptrs = [a.data_ptr() for a in args]
        if self.first_ptrs is None:
            self.first_ptrs = ptrs
            return
        for i, (p, q) in enumerate(zip(ptrs, self.first_ptrs)):
            if p != q:
                self.moving.add(i)
        staged = tuple(sorted(self.moving - self.written))
        if staged != self.staged:  # recordings staged otherwise are never looked up again
            self.staged = staged
            self.copy_recordings = {}

    def _staged_key(self, args) -> tuple:
        """A staged recording's key: the in-place inputs' addresses (with symbolic sizes,
        and sizes and strides), the staged inputs' sizes and strides (a buffer has one)."""
        staged = self.staged
        key = []
        for i, a in enumerate(args):
            if i in staged:
                key.append((tuple(a.shape), a.stride()))
            elif self.symbolic:
                key.append((a.data_ptr(), tuple(a.shape), a.stride(), a.storage_offset()))
            else:
                key.append(a.data_ptr())
        return tuple(key)

    def _miss(self, args):
        """No recording serves these inputs: make one, or run the plain graph."""
        self._note_addresses(args)
        if not self.staged and len(self.recordings) < MAX_RECORDINGS:
            # The caller's tensors (in training, aliases: their autograd history is not ours to keep).
            rec = _InputSet([a.detach() for a in args] if self.training else list(args),
                            key=_input_key(args, self.symbolic))
            self.recordings.append(rec)
            return self._run(rec, args)
        if not self.staged:
            if self.writes_inputs:
                return self.compiled(*args)
            # Nothing moves (new sizes of one buffer, or sets of inputs each used in
            # place before): past the in-place recordings, copy every input in.
            self.staged = tuple(range(len(args)))
            self.copy_recordings = {}
        key = self._staged_key(args)
        rec = self.copy_recordings.get(key)
        if rec is None:
            if len(self.copy_recordings) >= MAX_RECORDINGS:
                return self.compiled(*args)
            inputs = [_buffer_like(a) if i in self.staged else a for i, a in enumerate(args)]
            rec = self.copy_recordings[key] = _InputSet(inputs, key=key, staged=self.staged)
        return self._run(rec, args)

    def _run(self, rec: _InputSet, args):
        """Replay a slot of `rec` whose outputs nobody holds; else run the plain graph."""
        with self._lock:
            out = self._replay_free_slot(rec, args)
        return self.compiled(*args) if out is None else out

    def _replay_free_slot(self, rec: _InputSet, args):
        slot = None
        for s in rec.slots:
            if s.held.is_free():
                slot = s
                break
        if slot is None:
            if len(rec.slots) < self.max_slots:
                slot = self._record(rec)
                if slot is None:  # capture failed: fallback_reason is set
                    return None
            else:
                # Replaying would overwrite an output someone still holds, and copying
                # into static memory would cost what the aliases save: fresh outputs.
                self.held_fallbacks += 1
                return None
        self.replays += 1
        if not self.symbolic and not rec.staged and self.fallback_reason is None:
            self.last = rec
        if self.training:
            return cudagraph_training._Replay.apply(slot, rec, self.clone_reason is not None, *args)
        inputs = rec.inputs
        for i in rec.staged:
            inputs[i].copy_(args[i])
        slot.graph.replay()
        if self.clone_reason is None:
            return slot.aliases()
        return tuple([o.clone() for o in slot.outputs])

    def _record(self, rec: _InputSet) -> _Slot | None:
        try:
            if self.training:
                slot = self._capture_training(rec)
                slot.held.calibrate()
                rec.slots.append(slot)
                return slot
            graph, outputs = self._capture(rec)
        except Exception as e:
            self.fallback_reason = f"capture failed: {type(e).__name__}: {e}"
            log.warning("cudagraphs: %s; running the plain graph", self.fallback_reason)
            return None
        slot = _Slot(graph, tuple(outputs))
        if self.clone_reason is None and any(o.requires_grad for o in slot.outputs):
            # detach() would cut the output off its autograd history; a clone keeps it.
            self._clone_outputs("an output requires grad (an alias would detach it from autograd)")
        slot.held.calibrate()  # now: no caller has seen these outputs yet
        rec.slots.append(slot)
        return slot

    def _capture_training(self, rec: _InputSet):
        """A TrainingSlot: forward and backward recorded over `rec`'s inputs."""
        return cudagraph_training.capture(self.compiled, rec.inputs, self.needs_grad,
                                          warm=not self.writes_inputs)

    def _capture(self, rec: _InputSet):
        """(CUDA graph, static outputs) of one capture over `rec`'s inputs."""
        if rec.owned and not self.writes_inputs:  # our own buffers: a warm-up run on a side stream is harmless
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                self.compiled(*rec.inputs)
            torch.cuda.current_stream().wait_stream(stream)
        # NOTE: capturing does not run the kernels, so the caller's inputs are written
        # exactly once, by the replay that follows. Each capture gets its own memory pool,
        # so replaying one slot never touches another slot's outputs.
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.compiled(*rec.inputs)
        return graph, outputs


_STEADY = """\
def __call__(self{params}):
    last = self.last
    if (last is not None and last.key == ({ptrs}) and self.fallback_reason is None
            and self.clone_reason is None and not self.training):
        lock = self._lock
        if lock.acquire(False):  # taken: another thread is replaying, wait on the full path
            try:
                for slot in last.slots:
                    if slot.held.is_free():
                        self.calls += 1
                        self.replays += 1
                        slot.graph.replay()
                        return slot.aliases()
            finally:
                lock.release()
    return self._call(({args}))
"""


def _steady_call(n: int):
    """``__call__`` for `n` inputs: the recording replayed last, when its inputs are at the
    same addresses and one of its slots is free, replayed with nothing else looked up;
    every other call takes `_call`. Aliases only (no clone, no autograd): those modes
    take `_call`."""
    names = [f"a{i}" for i in range(n)]
    src = _STEADY.format(params="".join(", " + a for a in names),
                         ptrs="".join(f"{a}.data_ptr(), " for a in names), args="".join(a + ", " for a in names))
    scope: dict = {}
    exec(compile(src, f"<cudagraphs steady call of {n}>", "exec"), scope)
    return scope["__call__"]


def wrap_backend(backend_fn):
    """backend → backend whose result replays CUDA graphs."""
    def cudagraphs_backend(gm, example_inputs):
        compiled = compile_with(backend_fn, gm, example_inputs)
        return CudaGraphRunner(compiled, gm, example_inputs)
    cudagraphs_backend.__name__ = f"cudagraphs({getattr(backend_fn, '__name__', backend_fn)})"
    # Its runner returns what the wrapped backend's callable returns; that one is checked
    # when the wrapped backend is a user's (the runner is built on it below).
    cudagraphs_backend._minidynamo_trusted = True
    return cudagraphs_backend
