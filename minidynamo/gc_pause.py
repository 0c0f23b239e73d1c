"""paused_gc(): the cyclic garbage collector off while a call is traced and compiled.

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
