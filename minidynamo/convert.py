"""One (re)compilation: trace a call, turn the result into a graph plus a rebuild of the
return value, hand the graph to the backend, and generate the cache entry function.

A trace that declines (Unsupported) becomes an eager entry under the guards gathered up
to that point, so a function that cannot be traced costs one failed trace, not one per call.
"""
from __future__ import annotations

import builtins
import contextlib
import keyword
import time
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.fx as fx

from . import codegen
from .aliasing import aliasing_guard
from .backends import backend_name, compile_with, lookup_backend
from .backends import eager as eager_backend
from .config import config
from .entries import BreakEntry, CacheEntry, ConstantEntry, EagerEntry, GraphEntry, holder
from .exc import BackendError, InternalError, Unsupported, unsupported
from .gc_pause import paused_gc, resumed_gc
from .globalstate import GlobalState
from .graph import OutputGraph
from .triton.capture import direct_launch_nodes
from .guards import Guard
from .breaks import BreakTail, why_no_break, why_no_break_at
from .instructions import normalize
from .interpreter.translator import StoppedForBreak, trace
from .variables.function_modes import check_around
from .rebuild import Rebuilder
from .side_effects import mutation_guards, writeback_lines
from .logs import get_logger
from .sources import AttrSource, Namespace, ObjectSource
from .memory_facts import storage_of
from .triton.program import program_lines


program_log = get_logger("graph")
internal_log = get_logger("fallbacks")


def _defaults_guards(fn) -> list[Guard]:
    """The generated entry copies fn's defaults: pin them, so editing fn.__defaults__ re-traces."""
    src = ObjectSource(fn, fn.__name__)
    out = []
    if fn.__defaults__ is not None:
        out.append(Guard("ID_MATCH", AttrSource(src, "__defaults__"), fn.__defaults__))
    if fn.__kwdefaults__ is not None:
        out.append(Guard("ID_MATCH", AttrSource(src, "__kwdefaults__"), fn.__kwdefaults__))
    return out


def _prune_unused_inputs(output: OutputGraph) -> None:
    kept = []
    for inp in output.inputs:
        if inp.node.users:
            kept.append(inp)
        else:
            output.graph.erase_node(inp.node)
    output.inputs = kept


def _new_output(fn, dynamic=None) -> OutputGraph:
    output = OutputGraph(fn.__qualname__, dynamic)
    for g in _defaults_guards(fn):
        output.guards.add(g)
    return output


def _trace_frame(fn, args, kwargs, output, stop_at=None):
    """(result tracker, global state) of one trace of the call into `output`; with
    `stop_at`, the StoppedForBreak holding the translator in place of the result."""
    state = GlobalState()  # what the trace assumes of grad mode, default dtype, autocast...
    check_around(output, state.guard())  # a user's mode around the call: whole-call eager
    try:
        with _saved_tensor_hooks_off():
            result = trace(output, fn, args, kwargs, stop_at)
    except StoppedForBreak as stopped:
        result = stopped
    finally:
        output.final_grad_mode = torch.is_grad_enabled()  # where the graph leaves it
        output.leave_state(state.expected["grad mode"])
    return result, state


@contextlib.contextmanager
def _saved_tensor_hooks_off():
    """The trace's fake ops save fake tensors for autograd: the user's saved-tensor hooks
    around the call are for the graph's run, not for the trace (torch's tracing flag turns
    them off, as torch.compile sets it while it traces)."""
    set_tracing = getattr(torch._C._autograd, "_saved_tensors_hooks_set_tracing", None)
    if set_tracing is None:
        yield
        return
    prior = set_tracing(True)
    try:
        yield
    finally:
        set_tracing(prior)


class _ReturnTail:
    """The end of an entry that returns: write back what the trace changed in outside
    containers, rebuild the return value."""

    def __init__(self, result, output):
        self.result = result
        self.output = output

    def roots(self) -> list:
        return [self.result]

    def lines(self, rb) -> list[str]:
        writeback = writeback_lines(rb, self.output)
        before = len(rb.prelude)
        value = rb.expr(self.result)
        _check_picks_escaping(self.output, rb.nodes)
        return [*rb.prelude[:before], *writeback, *rb.prelude[before:], f"return {value}"]


def _check_picks_escaping(output, nodes) -> None:
    """A min()/max() pick and a candidate both leaving the call: in eager they may be one
    object, here they are two (graph.OutputGraph.picked_storages)."""
    if not output.picked_storages:
        return
    escaping = {storage_of(n.meta["val"]) for n in nodes if isinstance(n.meta.get("val"), torch.Tensor)}
    if len(escaping & output.picked_storages) > 1:
        unsupported("data_dependent", "a tensor min()/max() picked by a tensor comparison leaves the call "
                                      "with a candidate it picked from: eager's may be the same object")


@dataclass(frozen=True, eq=False)
class CallToCompile:
    """One call to compile into a cache entry, and what the entry is for.

    `slow`: the cache's miss path, called with the arguments; the entry then also gets a
    `fast_call` variant that goes there itself when a guard fails. `resumes` (target,
    nulls, live → resume function): the frame may break there (breaks.py); None: it may
    not. `continuation`: the entry belongs to a resume function and returns a Continue
    there. `dynamic`: the function's DynamicPolicy (which input sizes are traced
    symbolically)."""

    fn: Callable
    args: tuple
    kwargs: dict
    backend: object
    name: str
    slow: Callable | None = None
    fullgraph: bool = False
    resumes: Callable | None = None
    continuation: bool = False
    dynamic: object = None


def _dynamic_mode(call: CallToCompile):
    """The dynamic-shape mode the frames its eager code calls are optimized under."""
    return call.dynamic.mode if call.dynamic is not None else None


def compile_call(call: CallToCompile) -> CacheEntry:
    """Trace the call and build its cache entry (graph, graph break, constant or eager
    fallback). The cyclic garbage collector is off while it traces and builds the entry,
    not while the backend compiles (gc_pause.py)."""
    with paused_gc():
        return _EntryBuilder(call).build()


class _EntryBuilder:
    """One entry, built once: the trace, the tail after the graph (return value, write-
    backs, a break's native instruction) rendered once, then the graph inlined or handed
    to the backend, the guards, and the generated functions.

    The tail is rendered before the graph's outputs are known: a graph value is named
    there as the entry's local for it (`var_name`), which the inlined graph's code assigns,
    or the unpacking of the compiled graph's outputs does."""

    def __init__(self, call: CallToCompile):
        self.call = call
        self.start = time.perf_counter()
        self.ns = Namespace(codegen.pick_prefix(call.fn))
        self.params, self.call_args = codegen.signature_parts(call.fn, self.ns)
        self.ns.bind(codegen.MISS, "MISS")
        self.var_name = None  # names of the graph's values in the entry (_var_namer)

    def rebuilder(self) -> Rebuilder:
        self.var_name = _var_namer(self.call.fn, self.ns)
        return Rebuilder(self.ns, self.var_name)

    def build(self) -> CacheEntry:
        call, ns = self.call, self.ns
        fn = call.fn
        output = _new_output(fn, call.dynamic)
        breaking = None
        traced = None  # when the first trace ended (a graph break traces again up to it)
        try:
            try:
                result, state = _trace_frame(fn, call.args, call.kwargs, output)
                tail = _ReturnTail(result, output)
                mutation_guards(output)
                rb = self.rebuilder()
                rb.prepare(tail.roots())
                tail_lines = tail.lines(rb)
            except Unsupported as reason:
                if call.resumes is None or reason.break_at is None:
                    raise
                breaking = reason
                traced = time.perf_counter()
                output, tail, state, rb, tail_lines = self.restart_for_break(reason)
        except Unsupported as reason:
            return self.eager_entry(output, reason)
        except Exception as e:  # not a decline: a bug of minidynamo's
            error = InternalError.while_tracing(fn, e)
            if not config.suppress_errors:
                raise error from e
            internal_log.warning("%s", error, exc_info=e)
            warnings.warn(str(error), RuntimeWarning, stacklevel=3)
            return self.eager_entry(output, Unsupported("internal", str(error)))
        output.guards.add(state.guard())
        phases = _phases(self.start, traced)
        backend_start = None

        output.prune_sym_nodes(keep=set(rb.nodes))
        # Inputs the graph writes alias as traced (unused ones too: a shape read of one that
        # `a.t_()` changes through aliasing is folded).
        aliasing = aliasing_guard(output.inputs, output.root_graph)
        if aliasing is not None:
            output.guards.add(aliasing)
        _prune_unused_inputs(output)
        hits = [0]
        body = [f"    {ns.bind(hits, 'hits')}[0] += 1"]
        gm = compiled = None
        # Any call in the graph is work, a state change (`torch.autocast` entered) too; so is a
        # returned size the graph computes. Grad-mode changes alone are not: the entry leaves
        # the mode where the graph would (torch.compile makes no graph of them either).
        has_work = output.op_count > 0 or output.kernels or bool(rb.nodes) or any(
            n.op == "call_function" and n.target is not torch._C._set_grad_enabled for n in output.graph.nodes)
        if not has_work and output.final_grad_mode != state.expected["grad mode"]:
            body.append(f"    {ns.bind(torch._C._set_grad_enabled, 'set_grad_enabled')}({output.final_grad_mode})")
        inlined = False
        if has_work:
            output.graph.output(tuple(rb.nodes))
            if lookup_backend(call.backend) is eager_backend:
                # The eager backend runs the graph's code as is: emit it into the entry
                # itself (no GraphModule to build, no call into forward per call); Triton
                # launch nodes become direct calls of their launchers.
                with direct_launch_nodes(output.graph):
                    inlined = self.inline_graph(output, body, tail_lines)
            if not inlined:
                gm = fx.GraphModule(holder(output.submodules), output.graph, class_name=f"{call.name}_graph")
                gm._minidynamo_kernels = output.kernels  # the graph owns its Triton side table
                example_inputs = [inp.example for inp in output.inputs]
                backend_start = time.perf_counter()
                try:
                    with resumed_gc():
                        compiled = compile_with(call.backend, gm, example_inputs)
                except BackendError as error:
                    if not config.suppress_errors:
                        raise
                    # As torch.compile's suppress_errors: the backend's failure is logged and
                    # this call's variant runs eagerly.
                    internal_log.warning("%s", error)
                    warnings.warn(f"{error}; minidynamo.config.suppress_errors is set: {fn.__qualname__} "
                                  "runs eagerly for these arguments", RuntimeWarning, stacklevel=3)
                    return self.eager_entry(output, Unsupported("backend", str(error)))
                phases["backend"] = (time.perf_counter() - backend_start) * 1e3
                inputs = ", ".join(_input_exprs(output, ns).values())
                run_graph = f"{ns.bind(compiled, 'compiled')}({inputs})"
                names = [self.var_name(n) for n in rb.nodes]
                # The compiled graph returns its outputs (backends.compile_with checks a user
                # backend's count): each into the local the tail names it by.
                body.append(f"    {names[0]}, = {run_graph}" if len(names) == 1 else
                            f"    {', '.join(names)} = {run_graph}" if names else f"    {run_graph}")
                if output.final_grad_mode != state.expected["grad mode"]:
                    # A graph that changes grad mode (`torch.set_grad_enabled(False)` as a
                    # statement): a compiling backend drops that state change, so the entry
                    # makes it, as eager leaves it.
                    set_grad = ns.bind(torch._C._set_grad_enabled, "set_grad_enabled")
                    body.append(f"    {set_grad}({output.final_grad_mode})")
        if not inlined:
            body += ["    " + line for line in tail_lines]
        # After the backend ran: one handed symbolic inputs adds its own decisions on sizes to
        # the environment (inductor: `s0 <= 4096`), and its artifact holds only under them.
        for guard in output.shape_guards():
            output.guards.add(guard)
        guard_exprs = output.guards.expressions(ns)
        checks = output.guards.check_expressions(ns)
        checks = (checks, output.guards.fast_tier(ns))
        run, text, fast = self.functions(checks, body)
        upgrade = None
        if inlined and output.kernels and breaking is None:
            # The builder outlives the call until the entry's first call: not its arguments.
            self.call = replace(call, args=(), kwargs={})

            def upgrade():
                return self.program_entry(output, tail_lines, checks, body)
        entry_type = BreakEntry if breaking is not None else GraphEntry if has_work else ConstantEntry
        total = (time.perf_counter() - self.start) * 1e3
        phases["guards and entry code"] = max(0.0, total - sum(phases.values()))
        if breaking is not None:  # as for a fallback's reason: its frames would keep the arguments alive
            breaking.__traceback__ = breaking.__context__ = breaking.__cause__ = None
        return entry_type(run, output.guards.ordered(),
                          guard_exprs, text, self.params, ns, gm, compiled, None,
                          total, hits, fast_call=fast,
                          graph=output.graph if inlined else None, graph_name=f"{call.name}_graph",
                          kernels=output.kernels, submodules=output.submodules, _upgrade=upgrade,
                          break_reason=breaking, resumes=tuple(getattr(tail, "functions", ())),
                          symbolic=bool(output.symbolic_inputs), phases=phases)

    def restart_for_break(self, reason):
        """Trace again up to the instruction `reason` declined and render the break's tail:
        (output, tail, state, rebuilder, the tail's lines). Unsupported (the original
        reason, saying why not) when the frame cannot break there."""
        call = self.call
        fn = call.fn
        index, step = reason.break_at
        info = getattr(fn, "_minidynamo_resume", None)
        code = fn.__code__ if info is None else info.code
        why = why_no_break_at(normalize(code)[index], call.fullgraph)
        if why is not None:  # no restart needed to know
            raise _no_break(reason, why)
        output = _new_output(fn, call.dynamic)
        stopped, state = _trace_frame(fn, call.args, call.kwargs, output, stop_at=step)
        if not isinstance(stopped, StoppedForBreak):
            raise _no_break(reason, "the trace did not reach it again")
        tx = stopped.tx
        if tx.ip != index:
            raise _no_break(reason, "the trace took another path when restarted")
        why = why_no_break(tx, index, call.fullgraph)
        if why is not None:
            raise _no_break(reason, why)
        tail = BreakTail(tx, index, call.resumes, call.continuation, reason.inside_call, call.backend,
                         _dynamic_mode(call))
        rb = self.rebuilder()
        rb.prepare(tail.roots())
        try:
            mutation_guards(output)
            lines = tail.lines(rb)
        except Unsupported as e:
            raise _no_break(reason, e.detail) from None
        return output, tail, state, rb, lines

    def inline_graph(self, output, body, tail_lines) -> bool:
        """Append the graph's statements to `body`, then the tail's; False if the graph
        cannot be inlined."""
        lines = codegen.graph_lines(output.graph, self.ns, _input_exprs(output, self.ns), self.var_name)
        if lines is None:
            return False
        body.extend("    " + line for line in lines + tail_lines)
        return True

    def functions(self, checks, body, filename=None):
        """(run, its text, fast_call or None): guards (their check expressions, or those and
        the fast tier: GuardSet.fast_tier), then `body`.

        One function is compiled; where a guard fails it calls `<prefix>guard_miss` with the
        arguments. `run` binds that name to a function returning MISS, `fast_call` (a
        second function object over the same code) to `slow`, the cache's miss path."""
        fn, ns = self.call.fn, self.ns
        miss_name = ns.bind(guard_miss, "miss")
        miss_call = f"{miss_name}({self.call_args})"
        checks, fast_tier = checks if isinstance(checks, tuple) else (checks, None)
        filename = filename or f"<minidynamo entry {self.call.name}>"
        if fast_tier is not None:  # the precise tier: a function of its own (codegen.precise_block)
            fast_tier = fast_tier.used_by(body, ns)
            precise, _ = codegen.build_function(self.call.name + "_guards", self.params,
                                                codegen.precise_block(checks, ns.prefix + "ok", fast_tier), ns,
                                                filename)
            fast_tier.precise, fast_tier.call = ns.bind(precise, "precise"), self.call_args
        guards = codegen.guard_block(checks, miss_call, ns.prefix + "ok", fast=fast_tier)
        run, text = codegen.build_function(self.call.name, self.params, guards + body, ns,
                                           filename, fn.__qualname__)
        fast = None
        if self.call.slow is not None and fn.__defaults__ is None and fn.__kwdefaults__ is None:
            fast = codegen.rebind(run, miss_name, self.call.slow)
        return run, text, fast

    def program_entry(self, output, tail_lines, checks, body):
        """(note, (run, text, fast_call) or None): the entry rebuilt around the graph's launch
        program — guards, then the program while the launch state it was built for holds, else
        the plain graph (`body`) as before. The program's values have the names the graph's
        code gives them, so the tail (`tail_lines`) is the same after either."""
        fn, ns, name = self.call.fn, self.ns, self.call.name
        try:
            input_exprs = {inp.node: inp.source.expr(ns) for inp in output.inputs}
            lines, builder = program_lines(output.graph, ns, input_exprs, self.var_name)
            if lines is None:
                return f"not used: {builder}", None
            lines += tail_lines
            new_body = [body[0], f"    if not ({builder.conds}):", *("        " + x for x in lines), *body[1:]]
            new = self.functions(checks, new_body)
        except Exception as e:  # a bug: the launch program declines by returning why (above)
            # Built after the first call returned: its result stands and the plain graph keeps
            # working, so the bug is said (a warning, the internal log), not raised, and not silent.
            error = (f"minidynamo internal error building the launch program of {fn.__qualname__}: "
                     f"{type(e).__name__}: {e}. This is a bug in minidynamo; its calls keep the plain graph")
            internal_log.warning("%s", error, exc_info=True)
            if not config.suppress_errors:
                warnings.warn(error, RuntimeWarning, stacklevel=2)
            return f"not used: could not be built ({type(e).__name__}: {e})", None
        program_log.debug("entry of %s with its launch program:\n%s", name, new[1])
        direct = sum(1 for launch in builder.launches.values() if launch.resolved.entry.is_c_entry)
        note = (f"{len(builder.launches)} launch(es) straight to the compiled kernels "
                f"({direct} to the C entry), {len(builder.scratch)} scratch value(s) in "
                f"{builder.scratch_bytes} bytes")
        return note, new

    def eager_entry(self, output, reason) -> CacheEntry:
        call, ns = self.call, self.ns
        declined = time.perf_counter()
        # The reason outlives the trace: its traceback's frames would keep the first call's
        # arguments (and the trace) alive as long as the entry.
        reason.__traceback__ = reason.__context__ = reason.__cause__ = None
        guard_exprs = output.guards.expressions(ns)
        hits = [0]
        body = [f"    {ns.bind(hits, 'hits')}[0] += 1",
                *codegen.eager_call_lines(ns, call.fn, call.backend, self.call_args, dynamic=_dynamic_mode(call))]
        run, text, fast = self.functions(output.guards.check_expressions(ns), body,
                                         f"<minidynamo eager entry {call.name}>")
        now = time.perf_counter()
        return EagerEntry(run, output.guards.ordered(), guard_exprs, text, self.params, ns,
                          reason=reason, compile_time_ms=(now - self.start) * 1e3, hits=hits,
                          fast_call=fast, graph_name=f"{call.name}_graph",
                          phases={"trace": (declined - self.start) * 1e3,
                                  "guards and entry code": (now - declined) * 1e3})


def _phases(start: float, traced) -> dict:
    """ms of the trace, and of the second trace up to a graph break (`traced`: when the
    first one ended), at the end of tracing."""
    now = time.perf_counter()
    if traced is None:
        return {"trace": (now - start) * 1e3}
    return {"trace": (traced - start) * 1e3, "trace again to the break": (now - traced) * 1e3}


def _no_break(reason: Unsupported, why: str) -> Unsupported:
    """The original decline, noting why the graph could not break there instead."""
    reason.no_break = why
    return reason


def guard_miss(*args, **kwargs):
    """What an entry's `run` calls when a guard fails: MISS, for the caller to go on."""
    return codegen.MISS


def _var_namer(fn, ns):
    """Names for the graph's values in generated code: the node's name unless it would
    shadow a parameter, a builtin or a bound object."""
    avoid = set(fn.__code__.co_varnames) | set(fn.__code__.co_cellvars) | set(fn.__code__.co_freevars)
    names: dict = {}

    def var_name(node) -> str:
        n = names.get(node)
        if n is None:
            n = node.name
            if n in avoid or n.startswith(ns.prefix) or keyword.iskeyword(n) or hasattr(builtins, n):
                n = ns.prefix + "v_" + n
            while n in ns.values:
                n += "_"
            ns.reserve(n)
            names[node] = n
        return n
    return var_name


def _input_exprs(output, ns) -> dict:
    """placeholder node -> the expression the entry fetches it by: a local where the guards
    fetched it already (a parameter whose TENSOR_MATCH read it), else its source's path,
    its modules read from the guards' locals (guards.py plan_hoisting)."""
    ns.hoisted = output.guards.plan_hoisting(ns, [inp.source for inp in output.inputs], snapshot=True)
    try:
        return {inp.node: inp.source.ref(ns) for inp in output.inputs}
    finally:
        ns.hoisted = {}


__all__ = ["CacheEntry", "CallToCompile", "compile_call", "backend_name"]
