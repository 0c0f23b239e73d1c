"""paused_gc(): the cyclic garbage collector off while a call is traced and its entry built;
resumed_gc(): on again inside that, while a backend compiles the graph.

A trace allocates many short-lived objects (trackers, fx nodes, fakes, guard text); each
700 allocations start a young-generation collection, every tenth of those an older one,
and now and then one of them becomes a full collection over the whole heap, which in a
process that has imported torch and a model library is 400k+ objects: 100-400 ms, more
than the rest of a model's first call. The trace's garbage is mostly freed by reference
counting; what is cyclic waits until the collector is back on, and is then found by one
young collection instead of dozens. Python promises nothing about when cycles are
collected, so no program can tell the difference (finalizers of cyclic garbage run a
little later). The collector's state is restored exactly: left off if it was off,
and nested or concurrent traces turn it back on only when the last one ends.

The whole build is one pause: a pause around the trace alone left the collector on
between the trace and the guards, where the first allocation paid for the trace's tens
of thousands of young objects and, when that tipped the counters, a full collection
(200 ms of a llama's first call, about as long as the rest of it).
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused_gc():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


@contextlib.contextmanager
def resumed_gc():
    """The collector as it was before the outermost pause, inside one (a backend's compile,
    whose own garbage may be large); paused again after."""
    with _lock:
        resume = _depth == 1 and _was_enabled
        if resume:
            gc.enable()
    try:
        yield
    finally:
        if resume:
            with _lock:
                gc.disable()
