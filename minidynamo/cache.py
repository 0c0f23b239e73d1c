"""The per-function cache: entries tried in order, recompilation on a miss, the cache-size
limit, and the record of every guard failure (which guard, expected, actual)."""
from __future__ import annotations

import collections
import functools
import logging
import threading
import time
import warnings
from dataclasses import dataclass, replace

from .codegen import MISS
from .config import config
from .exc import InternalError
from .convert import CacheEntry, compile_call
from .logs import get_logger

recompile_log = get_logger("recompiles")
fallback_log = get_logger("fallbacks")
guards_log = get_logger("guards")
graph_log = get_logger("graph")
breaks_log = get_logger("graph_breaks")


MAX_FAILURE_RECORDS = 256  # the newest guard failures kept per function


def _key_exprs(guard, ns) -> list[str]:
    """What identifies a call for the past-the-limit dispatcher: the values the guard that
    keeps failing reads (its kind's `call_key`)."""
    e = guard.source.expr(ns)
    return [k.format(e) for k in guard.call_key]


class RecompileError(RuntimeError):
    """Raised on a recompile when config.error_on_recompile is set."""


@dataclass
class GuardFailure:
    """One recompile: when, which guard of which entry failed, what it expected and what
    the call passed, in plain words (`reason`)."""
    time: float
    function: str
    guard: str  # the guard's expression
    reason: str  # plain words: expected and actual
    kind: str = ""  # the guard's kind (TENSOR_MATCH, EQUALS_MATCH, ...)
    source: str = ""  # the guarded value's name (`x`, `global 'SCALE'`)
    expected: str = ""
    actual: str = ""
    where: str = ""  # the function's file:line
    entry: int = -1  # index of the cache entry whose guard failed
    # The first failing guard of each older entry, newest first (each entry missed).
    others: tuple = ()

    def __str__(self):
        return f"{self.function}: {self.reason} (guard: {self.guard})"

    def message(self) -> str:
        """The recompile line: function, file:line, the failing guard, expected and actual;
        with several entries, one line more per older entry, saying why it missed too."""
        first = f"recompiling {self.function} ({self.where}): {self.reason} [guard {self.kind} {self.source}]"
        if not self.others:
            return first
        lines = [f"recompiling {self.function} ({self.where}), no entry's guards passed:",
                 f"  entry {self.entry}: {self.reason} [guard {self.kind} {self.source}]"]
        lines += [f"  entry {o.entry}: {o.reason} [guard {o.kind} {o.source}]" for o in self.others]
        return "\n".join(lines)


class FunctionCache:
    def __init__(self, fn, backend, fullgraph: bool, name: str, where: str, root=None, dynamic=None):
        from .dynamic import DynamicPolicy
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.name = name
        self.where = where
        self.entries: tuple[CacheEntry, ...] = ()
        self._order: tuple = (None, [])  # (entries, the order calls try them in)
        self.failures: collections.deque[GuardFailure] = collections.deque(maxlen=MAX_FAILURE_RECORDS)
        self.warned_limit = False
        self.lock = threading.RLock()
        self.on_change = None  # called after entries are added or dropped
        # Graph breaks: the optimized function's cache (`root`) holds one resume function
        # per resume point and layout, shared by every entry and resume function of it.
        self.root = root if root is not None else self
        self.continuation = root is not None  # a resume function's cache
        self.resume_fns: dict = {}
        # Which input sizes are traced symbolically, and the sizes seen (per function:
        # a resume function has its own, under its root's mode).
        self.dynamic = DynamicPolicy(root.dynamic.mode if root is not None else dynamic)

    def dispatch_order(self) -> list:
        """The order calls try the entries in: entries with symbolic sizes first, newest
        first (one made when a size changed takes every size, the static entry before it
        included: trying that one first would cost a failed guard check per call), then the
        static ones in the order they were made."""
        entries = self.entries
        if self._order[0] is not entries:  # computed once per change of the entries
            order = [e for e in reversed(entries) if e.symbolic] + [e for e in entries if not e.symbolic]
            self._order = (entries, order)
        return self._order[1]

    def limited_call(self):
        """Past the cache limit (warned): the dispatcher that sends a call straight to the
        entry that took its key last time, or to the original function (codegen's
        limit_dispatcher), or None where no key can be read."""
        guard = self._failing_guard()
        if guard is None or self.fn.__defaults__ is not None or self.fn.__kwdefaults__ is not None:
            return None
        from .codegen import limit_dispatcher
        cap = 1024
        runs = [e.run for e in self.entries]  # indices into cache_entries(), as memoized

        def slow(key, *args, **kwargs):
            for i, run in enumerate(runs):
                result = run(*args, **kwargs)
                if result is not MISS:
                    if key is not None and len(memo) < cap:
                        memo[key] = i
                    return result
            if key is not None and len(memo) < cap:
                memo[key] = -1
            return self.miss(args, kwargs)
        fn, memo = limit_dispatcher(self.name, self.fn, runs, slow, lambda ns: _key_exprs(guard, ns),
                                    (self.fn, self.backend))
        return fn

    def _most_failed(self, prefer=None):
        """((kind, source), count) of the guard that failed most often among the recorded
        recompiles (`prefer` on a tie), or None."""
        counts = collections.Counter((f.kind, f.source) for f in self.failures)
        if not counts:
            return None
        top = max(counts, key=lambda k: (counts[k], k == prefer))
        return top, counts[top]

    def _failing_guard(self):
        """The guard that failed most often among the recorded recompiles, as an object."""
        found = self._most_failed()
        if found is None:
            return None
        (kind, source), _ = found
        for entry in self.entries:
            for g in entry.guards:
                if g.kind == kind and g.source.name() == source and g.call_key is not None:
                    return g
        return None

    @functools.cached_property
    def _eager(self):
        from .frame_hook import eager_call
        return eager_call(self.fn, self.backend)

    def run_eagerly(self, args, kwargs):
        """The function run plainly (past the limit), its callees still optimized (frame_hook)."""
        plain, hooked = self._eager
        if hooked is None:
            return plain(*args, **kwargs)
        with hooked:
            return plain(*args, **kwargs)

    def call_slow(self, *args, **kwargs):
        """The miss path with the call's own arguments (what generated code calls)."""
        return self.miss(args, kwargs)

    def _changed(self):
        if self.on_change is not None:
            self.on_change()

    def resume_for(self, target: int, nulls: tuple, live: tuple):
        """The optimized resume function of the frame at normalized index `target`."""
        root = self.root
        key = (target, nulls, live)
        found = root.resume_fns.get(key)
        if found is None:
            from .api import OptimizedFunction
            from .resume import resume_function
            fn = resume_function(root.fn, root.fn.__code__, target, nulls, live)
            found = root.resume_fns[key] = OptimizedFunction._resume(fn, root)
        return found

    def clear(self):
        with self.lock:
            for resumed in self.resume_fns.values():
                resumed._cache.clear()
            self.resume_fns.clear()
            self.entries = ()
            self.dynamic.seen.clear()
            self.failures.clear()
            self.warned_limit = False
            self._changed()

    def miss(self, args, kwargs):
        """No entry's guards passed: explain why, then trace (or run eagerly past the limit)."""
        with self.lock:
            for entry in self.dispatch_order():  # another thread may have compiled it meanwhile
                result = entry.run(*args, **kwargs)
                if result is not MISS:
                    return result
            past_limit = self.warned_limit and len(self.entries) >= config.cache_size_limit
            # Past the limit (already warned, naming the guard) new variants just run eagerly.
            failure = self._record_failure(args, kwargs) if self.entries and not past_limit else None
            if failure is not None and config.error_on_recompile:
                raise RecompileError(failure.message())
            if len(self.entries) >= config.cache_size_limit:
                self._warn_limit(failure)
                return self.run_eagerly(args, kwargs)
            entry = compile_call(self.fn, args, kwargs, self.backend, name=self.name,
                                 slow=self.call_slow, fullgraph=self.fullgraph,
                                 resumes=None if self.fullgraph else self.resume_for,
                                 continuation=self.continuation, dynamic=self.dynamic)
            index = len(self.entries)
            if entry.reason is not None:
                if self.fullgraph:
                    raise entry.reason
                if fallback_log.isEnabledFor(logging.INFO):
                    r = entry.reason
                    fallback_log.info("%s (%s) runs eagerly: %s\n  hint: %s", self.name, self.where, r, r.hint)
            if entry.break_reason is not None and breaks_log.isEnabledFor(logging.INFO):
                r = entry.break_reason
                breaks_log.info("graph break in %s (%s): %s\n  the graph runs, then the instruction "
                                "natively, then %s", self.name, self.where, r,
                                " or ".join(f.__name__ for f in entry.resumes))
            if entry.reason is None and graph_log.isEnabledFor(logging.INFO) and entry.gm is not None:
                graph_log.info("graph of %s (%s), entry %d:\n%s", self.name, self.where, index,
                               entry.graph_code)
                graph_log.debug("entry %d of %s, as it runs:\n%s", index, self.name, entry.source_text)
            if guards_log.isEnabledFor(logging.INFO):
                guards_log.info("guards of %s (%s), entry %d:\n%s", self.name, self.where, index,
                                "\n".join(f"  {g.source.name()}: {e}" for g, e in
                                          zip(entry.guards, entry.guard_exprs)) or "  (no guards)")
            if config.dump_dir:
                from . import dump
                dump.write(entry, index, self.name, self.where, config.dump_dir, args, kwargs)
            self.entries = self.entries + (entry,)
            self._changed()
            result = entry.run(*args, **kwargs)
            if result is MISS:  # a guard minidynamo wrote cannot pass: its own bug, never a loop
                found = entry.first_mismatch(args, kwargs)
                raise InternalError(f"minidynamo internal error: the guards of a new entry for {self.name} "
                                    f"({self.where}) fail on the arguments it was traced with: "
                                    + (f"{found[0].code(entry.ns)}: {found[1]}" if found else entry.guard_text()))
            if entry.after_first_call():
                self._changed()  # the entry's functions were rebuilt around its launch program
            return result

    def _record_failure(self, args, kwargs) -> GuardFailure | None:
        """Why each entry missed: the newest entry's first failing guard (the entry the
        caller most likely meant to hit), the older entries' in `others`."""
        now = time.time()
        found_all = []
        for index in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[index]
            found = entry.first_mismatch(args, kwargs)
            if found is not None:
                guard, reason, expected, actual = found
                found_all.append(GuardFailure(now, self.name, guard.code(entry.ns), reason, guard.kind,
                                              guard.source.name(), expected, actual, self.where, index))
        if not found_all:
            return None
        failure = replace(found_all[0], others=tuple(found_all[1:]))
        self.failures.append(failure)
        if recompile_log.isEnabledFor(logging.INFO):
            recompile_log.info("%s", failure.message())
            for f in found_all:
                recompile_log.debug("  failing guard of entry %d: %s", f.entry, f.guard)
        return failure

    def _warn_limit(self, failure):
        if self.warned_limit:
            return
        self.warned_limit = True
        self._changed()  # the optimized function's call becomes the past-the-limit dispatcher
        why = ""
        if failure is not None:
            # The guard that failed most often among the recorded recompiles (this one on a tie).
            top, count = self._most_failed(prefer=(failure.kind, failure.source))
            last = next(f for f in reversed(self.failures) if (f.kind, f.source) == top)
            why = (f"; the guard that keeps failing: {top[0]} on {top[1]} ({count} of "
                   f"{len(self.failures)} recompiles), last: {last.reason}")
        if self.continuation and "iterator" in why:
            why += (" (a graph break inside a loop: each iteration resumes at another position of "
                    "the loop, so the iterations past the limit run eagerly; move the break out of "
                    "the loop to capture them all)")
        msg = (f"minidynamo: {self.name} ({self.where}) reached cache_size_limit "
               f"({config.cache_size_limit}){why}. New variants run eagerly.")
        recompile_log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
