"""Why a compiler broke a graph or ran a frame eagerly, read from its own records while
a model runs (bench/models_run.py): one Reason per record, with the file:line it names;
and why it compiled again (its `recompiles` log: one line per recompile).

- minidynamo: the `fallbacks` and `graph_breaks` log channels; each record's arguments
  carry the Unsupported (category, detail, `file:line: source`) and the frame's name.
- torch.compile: the `graph_breaks` log artifact ("Graph break in user code at
  file:line / Graph Break Reason: ..."); the reason is the break's type line. A break
  that propagates through nested frames is logged once per frame (so `times` counts
  those). Its count of graph breaks comes from `counters["graph_break"]` instead.
"""
from __future__ import annotations

import dataclasses
import linecache
import logging
import re
import sys


@dataclasses.dataclass
class Reason:
    """Why a compiler broke a graph ("break") or ran a frame eagerly ("eager")."""
    kind: str
    category: str  # minidynamo's category; "dynamo" for torch.compile
    detail: str
    where: str = ""  # file:line (site-packages/ and the checkout stripped)
    code: str = ""  # the source line there
    frame: str = ""  # the function whose entry broke or fell back
    call: str = "first"  # "first" or "warm" (a recompile)


_SITE = re.compile(r"^.*?/(?:site-packages|dist-packages)/")


def short_path(path: str) -> str:
    """A file path without its install prefix: transformers/models/llama/modeling_llama.py."""
    path = _SITE.sub("", path)
    for root in sys.path:
        if root and path.startswith(root.rstrip("/") + "/") and "site-packages" not in root:
            return path[len(root.rstrip("/")) + 1:]
    return path


def split_where(where: str | None) -> tuple[str, str]:
    """minidynamo's `file:line: source` → ("short/file.py:line", "source")."""
    if not where:
        return "", ""
    m = re.match(r"^(.*?:\d+)(?::\s?(.*))?$", where)
    if not m:
        return short_path(where), ""
    return short_path(m.group(1)), (m.group(2) or "").strip()


class Records(logging.Handler):
    """A handler installed on some loggers while a `with` block runs (levels raised, not
    propagated), turning their records into Reasons (`call` tags them first/warm), and
    the records of RECOMPILES into one line each."""

    LOGGERS: tuple = ()
    RECOMPILES: tuple = ()

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.reasons: list[Reason] = []
        self.recompiles: list[str] = []
        self.call = "first"
        self._saved = {}

    def reason(self, record) -> Reason | None:
        raise NotImplementedError

    def emit(self, record):
        if record.name in self.RECOMPILES:
            if record.levelno >= logging.INFO:  # minidynamo's debug lines repeat the guard
                lines = [x.strip() for x in record.getMessage().strip().splitlines()]
                guard = next((x for x in lines[1:] if x.startswith("- ")), None)  # torch's
                text = re.sub(r"\s+", " ", lines[0] + (f" {guard}" if guard else ""))
                self.recompiles.append(re.sub(r"\S*/(?:site|dist)-packages/", "", text)[:400])
            return
        r = self.reason(record)
        if r is not None:
            r.call = self.call
            self.reasons.append(r)

    def loggers(self) -> list:
        return [logging.getLogger(name) for name in self.LOGGERS + self.RECOMPILES]

    def __enter__(self):
        for log in self.loggers():
            self._saved[log.name] = (log.level, log.propagate)
            log.setLevel(logging.DEBUG)
            log.propagate = False
            log.addHandler(self)
        return self

    def __exit__(self, *exc):
        for log in self.loggers():
            log.removeHandler(self)
            log.setLevel(self._saved[log.name][0])
            log.propagate = self._saved[log.name][1]


class MinidynamoRecords(Records):
    CHANNELS = {"minidynamo.fallbacks": "eager", "minidynamo.graph_breaks": "break"}
    LOGGERS = tuple(CHANNELS)
    RECOMPILES = ("minidynamo.recompiles",)

    def reason(self, record):
        from minidynamo import Unsupported
        r = next((a for a in record.args or () if isinstance(a, Unsupported)), None)
        if r is None:
            return None
        where, code = split_where(r.where)
        frame = record.args[0] if isinstance(record.args[0], str) else ""
        return Reason(self.CHANNELS[record.name], r.category, r.detail, where, code, frame)


class DynamoRecords(Records):
    LOGGERS = tuple(f"torch._dynamo.{m}.__graph_breaks" for m in ("symbolic_convert", "convert_frame", "exc"))
    RECOMPILES = ("torch._dynamo.guards.__recompiles",)

    def emit(self, record):
        if record.name in self.RECOMPILES:  # torch's are debug records
            record.levelno = logging.INFO
        super().emit(record)

    def __enter__(self):
        import torch._logging
        torch._logging.set_logs(recompiles=True)  # torch asks its log state, not the logger
        return super().__enter__()

    def __exit__(self, *exc):
        import torch._logging
        super().__exit__(*exc)
        torch._logging.set_logs()

    def reason(self, record):
        lines = record.getMessage().splitlines()
        if not lines or not lines[0].startswith("Graph break"):
            return None
        at = re.search(r" at (.*?):(\d+)\s*$", lines[0])
        head, rest = "", []
        for i, line in enumerate(lines):
            if line.startswith("Graph Break Reason:"):
                head = line[len("Graph Break Reason:"):].strip()
                rest = [x.strip() for x in lines[i + 1:] if x.strip()]
                break
        detail = rest[0] if head.endswith(":") and rest else head
        eager = "falling back to eager" in head or "skipping the rest" in head.lower()
        where = code = ""
        if at:
            where = f"{short_path(at.group(1))}:{at.group(2)}"
            code = linecache.getline(at.group(1), int(at.group(2))).strip()
        return Reason("eager" if eager else "break", "dynamo", detail, where, code)


def dynamo_break_count() -> int:
    """torch.compile's graph breaks counted since the last counters.clear()."""
    from torch._dynamo.utils import counters
    return sum(counters["graph_break"].values())
