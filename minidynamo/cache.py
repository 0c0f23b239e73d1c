"""The per-function cache: entries tried in order, recompilation on a miss, the cache-size
limit, and the record of every guard failure (which guard, expected, actual)."""
from __future__ import annotations

import collections
import functools
import logging
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field

import torch

from .backends import backend_name
from .codegen import MISS
from .compile_report import note_entry, note_failure, note_limit, recorders
from .config import config
from .exc import InternalError, Raised
from .convert import CallToCompile, compile_call
from .entries import CacheEntry
from .logs import compile_watch, get_logger
from .sources import IteratorSource
from .user_names import Naming, for_resume, plain
from . import dump, optimizing
from .codegen import limit_dispatcher, build_function, source_reader
from .dynamic import DynamicPolicy
from .frame_hook import eager_call
from .resume import resume_function

recompile_log = get_logger("recompiles")
fallback_log = get_logger("fallbacks")
guards_log = get_logger("guards")
graph_log = get_logger("graph")
breaks_log = get_logger("graph_breaks")


MAX_FAILURE_RECORDS = 256  # the newest guard failures kept per function
_LISTED = 4  # other entries a recompile message lists


def _property_differences(guard, actual) -> int:
    """1, or for a tensor guard the number of its properties `actual` differs in."""
    m = guard.meta
    if guard.kind != "TENSOR_MATCH" or not isinstance(actual, torch.Tensor) or "shape" not in m:
        return 1
    try:
        n = (type(actual) is not m["type"]) + (actual.dtype is not m["dtype"]) + \
            (actual.device != m["device"]) + (actual.requires_grad != m["requires_grad"])
        if actual.dim() != len(m["shape"]):
            return n + 1
        n += sum(e is not None and e != a for e, a in zip(m["shape"], actual.shape))
        n += sum(e is not None and e != a for e, a in zip(m["stride"], actual.stride()))
        return max(n, 1)
    except Exception:  # noqa: BLE001 - a tensor subclass that cannot be read this way
        return 1


def _key_exprs(guard, ns) -> list[str]:
    """What identifies a call for the past-the-limit dispatcher: the values the guard that
    keeps failing reads (its kind's `call_key`)."""
    e = guard.source.expr(ns)
    return [k.format(e) for k in guard.call_key]


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn that points at the user's call (the first frame
    outside minidynamo and its generated code), not at a generated dispatcher."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        file = frame.f_code.co_filename
        if not (file.startswith("<minidynamo") or os.path.dirname(os.path.abspath(file)).startswith(_PACKAGE)):
            return level
        frame, level = frame.f_back, level + 1
    return 1


class RecompileError(RuntimeError):
    """Raised on a recompile when config.error_on_recompile is set."""


def _failed_torch_check(reason) -> bool:
    """A false `torch._check(...)` (or `_check_index`, `_check_value`... through torch's
    `_check_with`) whose error no handler of the traced code may catch: under fullgraph=True
    the eager run raises it, as torch.compile(fullgraph=True) raises it when its graph runs."""
    if not isinstance(reason, Raised) or reason.may_be_caught:
        return False
    code = reason.origin[0].code
    return code.co_name == "_check_with" and code.co_filename == torch.__file__


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
    where: str = ""  # the function's file:line (a resume point's line after a graph break)
    # The entry this call came closest to passing (fewest differences; the newest on a tie),
    # whose first failing guard this record names.
    entry: int = -1
    # The first failing guard of each other entry, newest first (each entry missed).
    others: tuple = ()
    # "after the graph break at line 4": the recompile was of the code after a graph break
    # (a resume function's entries); "" for the function's own entries.
    resume: str = ""
    raw_source: str = field(default="", repr=False)  # the source's name as guards use it
    # The guard reads a loop iterator's position or sequence (a resume function's iterator).
    on_iterator: bool = field(default=False, repr=False)

    def __str__(self):
        return f"{self.function}: {self.reason} (guard: {self.guard})"

    def _head(self) -> str:
        return f"recompiling {self.function}{' ' + self.resume if self.resume else ''} ({self.where})"

    def message(self) -> str:
        """The recompile line: function, file:line, the failing guard, expected and actual;
        with several entries, one line more per other entry, saying why it missed too."""
        first = f"{self._head()}: {self.reason} [guard {self.kind} {self.source}]"
        if not self.others:
            return first
        lines = [f"{self._head()}, no entry's guards passed; closest:",
                 f"  entry {self.entry}: {self.reason} [guard {self.kind} {self.source}]"]
        lines += [f"  entry {o.entry}: {o.reason} [guard {o.kind} {o.source}]" for o in self.others[:_LISTED]]
        if len(self.others) > _LISTED:
            lines.append(f"  ... and {len(self.others) - _LISTED} older entries (`failure.others`)")
        return "\n".join(lines)


class FunctionCache:
    def __init__(self, fn, backend, fullgraph: bool, name: str, where: str, root=None, dynamic=None,
                 naming: Naming | None = None):
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.name = name
        self.where = where
        # How messages name this function (the user's function and line, user_names.py).
        self.naming = naming if naming is not None else (
            for_resume(fn, root.naming) if root is not None else plain(name, where))
        self.entries: tuple[CacheEntry, ...] = ()
        self._order: tuple = (None, [])  # (entries, the order calls try them in)
        # This function's own recompiles; on the root also those of its resume functions,
        # in call order (what guard_failures() returns).
        self.failures: collections.deque[GuardFailure] = collections.deque(maxlen=MAX_FAILURE_RECORDS)
        self.chain_failures: collections.deque[GuardFailure] = collections.deque(maxlen=MAX_FAILURE_RECORDS)
        self._checkers: dict = {}  # id(entry) -> (entry, function listing its failing guards)
        self.warned_limit = False
        self.lock = threading.RLock()
        self.on_change = None  # called after entries are added or dropped
        # Graph breaks: the optimized function's cache (`root`) holds one resume function
        # per resume point and layout, shared by every entry and resume function of it.
        self.root = root if root is not None else self
        self.continuation = root is not None  # a resume function's cache
        self.resume_fns: dict = {}
        self.logged_breaks: set = set()  # (category, where) of the breaks the log has shown
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
                                    (self.fn, self.backend, self.dynamic.mode))
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
        raw = next(f.raw_source for f in reversed(self.failures) if (f.kind, f.source) == (kind, source))
        for entry in self.entries:
            for g in entry.guards:
                if g.kind == kind and g.source.name() == raw and g.call_key is not None:
                    return g
        return None

    @functools.cached_property
    def _eager(self):
        return eager_call(self.fn, self.backend, self.dynamic.mode)

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
            fn = resume_function(root.fn, root.fn.__code__, target, nulls, live)
            found = root.resume_fns[key] = optimizing.OptimizedFunction._resume(fn, root)
        return found

    def clear(self):
        with self.lock:
            for resumed in self.resume_fns.values():
                resumed._cache.clear()
            self.resume_fns.clear()
            self.entries = ()
            self.dynamic.seen.clear()
            self.failures.clear()
            self.chain_failures.clear()
            self._checkers.clear()
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
            watch = compile_watch.begin(lambda: f"{self.naming.label()} (backend {backend_name(self.backend)!r})")
            try:
                entry = compile_call(CallToCompile(
                    self.fn, args, kwargs, self.backend, self.name, slow=self.call_slow,
                    fullgraph=self.fullgraph, resumes=None if self.fullgraph else self.resume_for,
                    continuation=self.continuation, dynamic=self.dynamic))
            finally:
                compile_watch.end(watch)
            index = len(self.entries)
            label = self.naming.label()
            if entry.reason is not None:
                if self.fullgraph and not _failed_torch_check(entry.reason):
                    raise entry.reason
                if fallback_log.isEnabledFor(logging.INFO):
                    r = entry.reason
                    fallback_log.info("%s runs eagerly: %s\n  hint: %s", label, r, r.hint)
            if entry.break_reason is not None and breaks_log.isEnabledFor(logging.INFO):
                r = entry.break_reason
                key = (r.category, r.where or r.detail)
                if key not in self.root.logged_breaks:  # once: not again on each recompile
                    self.root.logged_breaks.add(key)
                    breaks_log.info("graph break in %s: %s\n  the graph runs, then the instruction "
                                    "natively, then %s", label, r,
                                    " or ".join(f.__name__ for f in entry.resumes))
            if entry.reason is None and graph_log.isEnabledFor(logging.INFO) and entry.gm is not None:
                graph_log.info("graph of %s, entry %d:\n%s", label, index, entry.graph_code)
                graph_log.debug("entry %d of %s, as it runs:\n%s", index, label, entry.source_text)
            if guards_log.isEnabledFor(logging.INFO):
                naming = self.naming
                guards_log.info("guards of %s, entry %d:\n%s", label, index,
                                "\n".join(f"  {g.source.name(naming)}: {e}" for g, e in
                                          zip(entry.guards, entry.guard_exprs)) or "  (no guards)")
            if config.dump_dir:
                dump.write(entry, index, self.name, self.where, config.dump_dir, args, kwargs)
            self.entries = self.entries + (entry,)
            if recorders:
                note_entry(self, index, entry)
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
        """Why each entry missed, led by the entry the call came closest to passing: the
        fewest differences (failing guards, a tensor's differing properties), the newest
        on a tie (torch.compile's "most recent entry of the same shape"); the other entries'
        first failing guards in `others`, newest first."""
        now = time.time()
        naming = self.naming
        found_all, closeness = [], []
        for index in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[index]
            found = entry.first_mismatch(args, kwargs, naming)
            if found is not None:
                guard, reason, expected, actual = found
                raw = guard.source.name()
                found_all.append(GuardFailure(now, naming.function, guard.code(entry.ns), reason,
                                              guard.kind, guard.source.name(naming), expected, actual, naming.where,
                                              index, resume=naming.resume, raw_source=raw,
                                              on_iterator=any(isinstance(s, IteratorSource) for s in guard.reads())))
                closeness.append(self._differences(entry, args, kwargs) if len(self.entries) > 1 else 0)
        if not found_all:
            return None
        best = min(range(len(found_all)), key=lambda i: (closeness[i], i))  # i: newest first
        failure = found_all[best]
        failure.others = tuple(f for i, f in enumerate(found_all) if i != best)
        self.failures.append(failure)
        if self.root is not self:
            self.root.chain_failures.append(failure)
        self.chain_failures.append(failure)
        if recorders:
            note_failure(self, failure)
        if recompile_log.isEnabledFor(logging.INFO):
            recompile_log.info("%s", failure.message())
            for f in (failure, *failure.others):
                recompile_log.debug("  failing guard of entry %d: %s", f.entry, f.guard)
        return failure

    def _differences(self, entry, args, kwargs) -> int:
        """How far the call is from passing `entry`: its failing guards, a tensor guard
        counted once per property that differs (dtype, requires_grad, each size...).
        Only computed on a recompile with several entries."""
        found = self._checkers.get(id(entry))
        if found is None or found[0] is not entry:
            exprs = [e if c == e else f"({e}) and {c}"
                     for g, e in zip(entry.guards, entry.guard_exprs) for c in (g.check_code(entry.ns),)]
            body = ["    _md_failing = []"]
            for i, e in enumerate(exprs):
                body += ["    try:", f"        if not ({e}):", f"            _md_failing.append({i})",
                         "    except Exception:", f"        _md_failing.append({i})"]
            body.append("    return _md_failing")
            failing, _ = build_function("_md_failing_guards", entry.params, body, entry.ns, "<minidynamo guards>")
            reader = source_reader("_md_read", entry.params,
                                   [g.source.expr(entry.ns) for g in entry.guards], entry.ns)
            found = self._checkers[id(entry)] = (entry, failing, reader)
        _, failing, reader = found
        indices = failing(*args, **kwargs)
        if not indices:
            return 0
        values = reader(*args, **kwargs)
        # A guard read through a failing guard's value (the hooks in a dict whose keys
        # changed) fails because of that one: counted once, as that one.
        failed = {entry.guards[i].source.name() for i in indices}
        return sum(_property_differences(entry.guards[i], values[i]) for i in indices
                   if not any(s.name() in failed for s in entry.guards[i].reads()[:-1]))

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
            if self.continuation and last.on_iterator:
                why += (" (a graph break inside a loop: each iteration resumes at another position "
                        "of the loop, so the iterations past the limit run eagerly; move the break "
                        "out of the loop to capture them all)")
        what = self.naming.label() if not self.continuation else \
            f"the code of {self.naming.label()}"
        msg = (f"minidynamo: {what} reached cache_size_limit "
               f"({config.cache_size_limit}){why}. New variants run eagerly.")
        recompile_log.warning(msg)
        if recorders:
            note_limit(self, msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=_user_stacklevel())
