"""The per-function cache: entries tried in order, recompilation on a miss, the cache-size
limit, and the record of every guard failure (which guard, expected, actual)."""
from __future__ import annotations

import collections
import threading
import time
import warnings
from dataclasses import dataclass

from .codegen import MISS
from .config import config
from .convert import CacheEntry, compile_call
from .logs import get_logger

recompile_log = get_logger("recompiles")
fallback_log = get_logger("fallbacks")
guards_log = get_logger("guards")
graph_log = get_logger("graph")


MAX_FAILURE_RECORDS = 256  # the newest guard failures kept per function


class RecompileError(RuntimeError):
    """Raised on a recompile when config.error_on_recompile is set."""


@dataclass
class GuardFailure:
    time: float
    function: str
    guard: str  # the guard's expression
    reason: str  # plain words: expected and actual

    def __str__(self):
        return f"{self.function}: {self.reason} (guard: {self.guard})"


class FunctionCache:
    def __init__(self, fn, backend, fullgraph: bool, name: str, where: str):
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.name = name
        self.where = where
        self.entries: tuple[CacheEntry, ...] = ()
        self.failures: collections.deque[GuardFailure] = collections.deque(maxlen=MAX_FAILURE_RECORDS)
        self.warned_limit = False
        self.lock = threading.RLock()
        self.on_change = None  # called after entries are added or dropped

    def call_slow(self, *args, **kwargs):
        """The miss path with the call's own arguments (what generated code calls)."""
        return self.miss(args, kwargs)

    def _changed(self):
        if self.on_change is not None:
            self.on_change()

    def clear(self):
        with self.lock:
            self.entries = ()
            self.failures.clear()
            self.warned_limit = False
            self._changed()

    def miss(self, args, kwargs):
        """No entry's guards passed: explain why, then trace (or run eagerly past the limit)."""
        with self.lock:
            for entry in self.entries:  # another thread may have compiled it meanwhile
                result = entry.run(*args, **kwargs)
                if result is not MISS:
                    return result
            past_limit = self.warned_limit and len(self.entries) >= config.cache_size_limit
            # Past the limit (already warned, naming the guard) new variants just run eagerly.
            failure = self._record_failure(args, kwargs) if self.entries and not past_limit else None
            if failure is not None and config.error_on_recompile:
                raise RecompileError(f"recompiling {self.name} ({self.where}): {failure.reason}")
            if len(self.entries) >= config.cache_size_limit:
                self._warn_limit(failure)
                return self.fn(*args, **kwargs)
            entry = compile_call(self.fn, args, kwargs, self.backend, name=self.name,
                                 slow=self.call_slow)
            if entry.reason is not None:
                if self.fullgraph:
                    raise entry.reason
                fallback_log.info("%s (%s) runs eagerly: %s", self.name, self.where, entry.reason)
            elif graph_log.isEnabledFor(20) and entry.gm is not None:
                graph_log.info("graph of %s:\n%s", self.name, entry.gm.code.strip())
            if guards_log.isEnabledFor(20):
                guards_log.info("guards of %s:\n%s", self.name, entry.guard_text())
            if config.dump_dir:
                from . import dump
                dump.write(entry, len(self.entries), self.name, self.where, config.dump_dir)
            self.entries = self.entries + (entry,)
            self._changed()
            result = entry.run(*args, **kwargs)
            assert result is not MISS, f"guards of a fresh entry for {self.name} fail on its own inputs:\n" \
                                       f"{entry.guard_text()}"
            return result

    def _record_failure(self, args, kwargs) -> GuardFailure | None:
        # The newest entry is the one the caller most likely meant to hit.
        for entry in reversed(self.entries):
            found = entry.first_failure(args, kwargs)
            if found is not None:
                guard, reason = found
                failure = GuardFailure(time.time(), self.name, guard.code(entry.ns), reason)
                self.failures.append(failure)
                recompile_log.info("Recompiling %s (%s): %s", self.name, self.where, reason)
                return failure
        return None

    def _warn_limit(self, failure):
        if self.warned_limit:
            return
        self.warned_limit = True
        why = f"; the guard that keeps failing: {failure.reason}" if failure else ""
        msg = (f"minidynamo: {self.name} ({self.where}) reached cache_size_limit "
               f"({config.cache_size_limit}){why}. New variants run eagerly.")
        recompile_log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
