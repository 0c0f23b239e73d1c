"""Pure torch queries answered in the trace as constants, one class per kind: what the
answer is, and what keeps it true on later calls. Layer: trackers (the torch function
tracker asks `query_of(fn)`; the tables of names are purity.py's)."""
from __future__ import annotations

import functools

from ..exc import unsupported
from ..guards import Guard
from ..sources import CallSource
from .constant import ConstantVariable, fold
from .purity import (_GUARDED_QUERIES, _PROCESS_CONSTANTS, _STATE_QUERIES, _TELEMETRY, _TRACE_ANSWERS, _resolve,
                     qualified_name)


class Query:
    """A known pure query. `answer(tx, var, args, kwargs)`: its constant tracker, with the
    guards it needs (args and kwargs are constants)."""

    def answer(self, tx, var, args: list, kwargs: dict):
        return fold(tx, var.value, args, kwargs, qualified_name(var.value))


class StateQuery(Query):
    """Reads the process-wide torch state every entry checks already (grad mode, the
    default dtype...): answered now."""


class GuardedQuery(Query):
    """Answered now and asked again by the entry on each call (a setting that may change)."""

    def answer(self, tx, var, args, kwargs):
        result = super().answer(tx, var, args, kwargs)
        _guard_answer(tx, var.value, args, kwargs, result)
        return result


class ProcessConstant(Query):
    """Fixed for the process (the CUDA device count, the build's settings): the function's
    identity is what the entry checks; one reached without a source is asked again."""

    def answer(self, tx, var, args, kwargs):
        result = super().answer(tx, var, args, kwargs)
        if var.source is not None:  # a patched function is noticed
            tx.output.guards.add(Guard("ID_MATCH", var.source, var.value))
        else:
            _guard_answer(tx, var.value, args, kwargs, result)
        return result


class TraceAnswer(Query):
    """Answers what torch.compile answers inside a trace (`is_compiling()` is True)."""

    def __init__(self, value: bool):
        self.value = value

    def answer(self, tx, var, args, kwargs):
        if args or kwargs:  # eager's TypeError
            super().answer(tx, var, args, kwargs)
        if var.source is not None:  # a patched function is noticed
            tx.output.guards.add(Guard("ID_MATCH", var.source, var.value))
        return ConstantVariable(self.value)


class Telemetry(Query):
    """torch's API-usage log: no result and nothing a call could observe; dropped."""

    def answer(self, tx, var, args, kwargs):
        if len(args) != 1 or kwargs or not isinstance(args[0], str):
            super().answer(tx, var, args, kwargs)  # eager's TypeError
        return ConstantVariable(None)


def _guard_answer(tx, fn, args, kwargs, result) -> None:
    if args or kwargs or not result.is_python_constant():
        unsupported("call", f"{qualified_name(fn)} with arguments is not folded")
    tx.output.guards.add(Guard("EQUALS_MATCH", CallSource(fn, qualified_name(fn)), result.as_python_constant()))


@functools.lru_cache(maxsize=None)
def _queries() -> dict:
    queries = {}
    tables = ((lambda d: TraceAnswer(_TRACE_ANSWERS[d]), _TRACE_ANSWERS), (lambda d: StateQuery(), _STATE_QUERIES),
              (lambda d: ProcessConstant(), _PROCESS_CONSTANTS), (lambda d: GuardedQuery(), _GUARDED_QUERIES),
              (lambda d: Telemetry(), _TELEMETRY))
    for make, names in tables:
        for dotted in names:
            fn = _resolve(dotted)
            if fn is not None and fn not in queries:
                queries[fn] = make(dotted)
    return queries


def query_of(fn) -> Query | None:
    """The kind of pure query `fn` is, or None."""
    try:
        return _queries().get(fn)
    except TypeError:  # unhashable
        return None
