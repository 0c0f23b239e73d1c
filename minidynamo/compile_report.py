"""The compile report: one static HTML page of what a run compiled (like tlparse's, readable
without a manual), written by `with minidynamo.report(path): ...` or, for a whole process,
`MINIDYNAMO_REPORT=dir`.

While a report records, the cache (cache.py) tells it of each new entry, each recompile
and each function that reaches its cache limit; the page is rendered from those records
when the report is written (report_html.py), so hit counts are those at that time. Off,
recording costs one test of an empty list per compile, nothing per call.
"""
from __future__ import annotations

import atexit
import os
import sys
import time
from dataclasses import dataclass, field

from .report_html import origin_of, render

# The recordings active now; cache.py tests this list on each compile and recompile.
recorders: list = []
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Frame:
    """One optimized function or resume function, and what it compiled while recording."""
    cache: object  # its FunctionCache
    entries: list = field(default_factory=list)  # (index in its cache, CacheEntry)

    @property
    def label(self) -> str:
        return self.cache.naming.label()

    @property
    def continuation(self) -> bool:
        return self.cache.continuation

    @property
    def root(self):
        return self.cache.root

    @property
    def origin(self) -> str:
        return origin_of(self.cache)


@dataclass
class Event:
    what: str  # "compile", "recompile" or "limit"
    time: float
    frame: Frame
    index: int = -1  # the entry compiled, or the recompile's number
    entry: object = None
    failure: object = None
    message: str = ""
    call_site: str = ""  # file:line of the user's call that led here


class Recording:
    """What was compiled while a report recorded, in call order."""

    def __init__(self):
        self.start = time.time()
        self.frames: list[Frame] = []
        self.by_cache: dict = {}  # id(FunctionCache) -> Frame
        self.failures: list = []  # (Frame, GuardFailure, call site)
        self.events: list[Event] = []
        self._keep: list = []  # the caches, alive as long as the recording (ids stay unique)

    def frame(self, cache) -> Frame:
        found = self.by_cache.get(id(cache))
        if found is None:
            found = self.by_cache[id(cache)] = Frame(cache)
            self.frames.append(found)
            self._keep.append(cache)
        return found

    def entry(self, cache, index: int, entry) -> None:
        frame = self.frame(cache)
        frame.entries.append((index, entry))
        self.events.append(Event("compile", time.time(), frame, index, entry, call_site=_call_site()))

    def failure(self, cache, failure) -> None:
        frame = self.frame(cache)
        site = _call_site()
        self.events.append(Event("recompile", time.time(), frame, len(self.failures), failure=failure,
                                 call_site=site))
        self.failures.append((frame, failure, site))

    def limit(self, cache, message: str) -> None:
        self.events.append(Event("limit", time.time(), self.frame(cache), message=message,
                                 call_site=_call_site()))


def _call_site() -> str:
    """file:line of the innermost frame outside minidynamo and its generated code: the
    user's line whose call compiled (the caller of a resume function is generated code)."""
    frame = sys._getframe(2)
    while frame is not None:
        file = frame.f_code.co_filename
        if not (file.startswith("<") or os.path.abspath(file).startswith(_PACKAGE + os.sep)):
            return f"{file}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


# --- hooks (cache.py) ------------------------------------------------------------------
def note_entry(cache, index: int, entry) -> None:
    for r in recorders:
        r.entry(cache, index, entry)


def note_failure(cache, failure) -> None:
    for r in recorders:
        r.failure(cache, failure)


def note_limit(cache, message: str) -> None:
    for r in recorders:
        r.limit(cache, message)


# --- the API ---------------------------------------------------------------------------
def _target(path) -> str:
    """A file path as given, or `<dir>/index.html` for a directory (existing, or named
    with a trailing separator, or without an .html/.htm suffix)."""
    path = os.fspath(path)
    if os.path.isdir(path) or path.endswith(("/", os.sep)) or not path.lower().endswith((".html", ".htm")):
        return os.path.join(path, "index.html")
    return path


def write_page(recording: Recording, path, title: str = "minidynamo compile report") -> str:
    """Render `recording` and write it to `path` (a file, or a directory's index.html);
    returns the file written."""
    target = _target(path)
    text = render(recording, title)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)
    return target


class report:
    """`with minidynamo.report("report.html"): ...` records what the block compiles — every
    optimized function and resume function, their entries, graph breaks, recompiles — and
    writes the page when the block ends (also when it raises). `path` is an .html file or a
    directory (then `<dir>/index.html`); `.path` is the file written, `.html()` the page
    as text at any time (also inside the block)."""

    def __init__(self, path="minidynamo_report", title: str = "minidynamo compile report"):
        self.target = path
        self.title = title
        self.recording = Recording()
        self.path: str | None = None

    def __enter__(self):
        self.recording = Recording()
        recorders.append(self.recording)
        return self

    def __exit__(self, *exc):
        if self.recording in recorders:
            recorders.remove(self.recording)
        if self.target is not None:
            self.path = write_page(self.recording, self.target, self.title)
        return False

    def html(self) -> str:
        return render(self.recording, self.title)


_process: Recording | None = None


def init_from_env() -> None:
    """MINIDYNAMO_REPORT=dir: record the whole process; write `<dir>/index.html` at exit."""
    global _process
    where = os.environ.get("MINIDYNAMO_REPORT")
    if not where or _process is not None:
        return
    _process = Recording()
    recorders.append(_process)
    atexit.register(_write_at_exit, where)


def _write_at_exit(where: str) -> None:
    try:
        path = write_page(_process, where)
    except Exception as e:  # noqa: BLE001 - at exit: say so, never turn a run into a failure
        print(f"minidynamo: could not write the compile report to {where!r}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return
    print(f"minidynamo: compile report written to {path}", file=sys.stderr)
