"""Logging under `minidynamo.*`, switched on by MINIDYNAMO_LOGS or set_logs().

MINIDYNAMO_LOGS is a comma list of channels; `+name` turns on debug detail for that
channel, `all` (or `+all`) every channel:

| channel | info | debug (`+name`) |
|---|---|---|
| recompiles | each recompile: function, file:line, failing guard, expected, actual | the guard's expression |
| guards | each new entry's guards, with the value each is about | |
| graph | each captured graph's code | the generated entry function |
| bytecode | | each traced code object's normalized instructions |
| trace | each traced or inlined call, and what it returned | every instruction and the stack top |
| fallbacks | each call that runs eagerly: category, detail, file:line, hint | |
| graph_breaks | each graph break, once: the declined instruction's file:line and reason, the resume functions | |
| progress | a compile still running after 2 s (what, which backend), and its time when done | |

torch's TORCH_LOGS names are taken where they mean the same: `graph_code` is `graph`,
`recompiles_verbose` is `+recompiles` (`recompiles`, `graph_breaks`, `guards` are the same).
On a terminal (stderr a tty) a compile running past 2 s prints one progress line to stderr
even with the channels off, as long-running tools do; elsewhere only the `progress` channel
says it.

Off, a channel emits nothing, whatever the root logger's level: like torch.compile, a
program with `logging.basicConfig(level=logging.DEBUG)` gets no minidynamo records until
it names channels. Warnings a user needs (the cache-size limit) are `warnings.warn`; with
a channel on, the `minidynamo` logger also passes its other modules' warnings (a CUDA graph
that could not be captured), and the cache-size-limit warning goes to the `recompiles`
channel when that one is on. Records of the channels switched on propagate to the root
logger as usual (pytest's caplog sees them); set_logs() also adds one stderr handler to
`minidynamo`.
"""
from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time

CHANNELS = ("recompiles", "guards", "graph", "bytecode", "trace", "fallbacks", "graph_breaks", "progress")
# torch's TORCH_LOGS names for the same channels: name -> (channel, debug).
TORCH_NAMES = {"graph_code": ("graph", False), "recompiles_verbose": ("recompiles", True)}
OFF = logging.CRITICAL + 1  # the level of a channel switched off: no record passes
_handler: logging.Handler | None = None


def get_logger(channel: str) -> logging.Logger:
    return logging.getLogger(f"minidynamo.{channel}")


def set_logs(*names: str, **flags) -> None:
    """Turn channels on: set_logs("recompiles", "+graph"), set_logs(recompiles=True,
    trace="debug"), set_logs("all"). Channels not named are switched off, so set_logs()
    turns everything off."""
    global _handler
    wanted = list(names)
    for k, v in flags.items():
        if v:
            wanted.append(("+" if v in ("debug", "+") else "") + k)
    root = logging.getLogger("minidynamo")
    if _handler is None and wanted:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(_handler)
    levels = {ch: OFF for ch in CHANNELS}
    for raw in wanted:
        name = raw.strip()
        if not name:
            continue
        debug = name.startswith("+")
        name = name.lstrip("+").strip()
        if name in TORCH_NAMES:
            name, verbose = TORCH_NAMES[name]
            debug = debug or verbose
        if name == "all":
            chosen = CHANNELS
        elif name in CHANNELS:
            chosen = (name,)
        else:
            raise ValueError(f"unknown minidynamo log channel {name!r}; choose from "
                             f"{', '.join(CHANNELS)} (or all), '+name' for debug detail; torch's names "
                             f"{', '.join(TORCH_NAMES)} are taken too")
        for ch in chosen:
            levels[ch] = min(levels[ch], logging.DEBUG if debug else logging.INFO)
    for ch, level in levels.items():
        get_logger(ch).setLevel(level)
    # Loggers of other minidynamo modules inherit this: their warnings only with logs on.
    root.setLevel(logging.WARNING if any(level < OFF for level in levels.values()) else OFF)


def init_from_env() -> None:
    env = os.environ.get("MINIDYNAMO_LOGS")
    if env:
        set_logs(*env.split(","))
    else:
        set_logs()  # every channel off


PROGRESS_AFTER_S = 2.0  # a compile running this long says so
progress_log = get_logger("progress")


class _CompileWatch:
    """One daemon thread that announces compiles running past PROGRESS_AFTER_S; started
    on the first compile that could be announced (the channel on, or stderr a terminal)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.active: dict = {}  # token -> [deadline, what, announced, start]
        self.tokens = itertools.count()
        self.thread = None

    def begin(self, what):
        """A token for `end`, or None when nobody would see the line (no cost then);
        `what()` names the compile."""
        terminal = _stderr_is_terminal()
        if not (progress_log.isEnabledFor(logging.INFO) or terminal):
            return None
        now = time.monotonic()
        with self.cond:
            token = next(self.tokens)
            self.active[token] = [now + PROGRESS_AFTER_S, what(), False, now]
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="minidynamo-progress", daemon=True)
                self.thread.start()
            self.cond.notify()
        return token

    def end(self, token):
        if token is None:
            return
        with self.cond:
            found = self.active.pop(token, None)
        if found is not None and found[2]:
            _say(f"compiled {found[1]} in {time.monotonic() - found[3]:.1f} s")

    def _run(self):
        with self.cond:
            while True:
                now = time.monotonic()
                due = [v for v in self.active.values() if not v[2] and v[0] <= now]
                for v in due:
                    v[2] = True
                    _say(f"still compiling {v[1]} ({now - v[3]:.1f} s so far)")
                waiting = [v[0] - now for v in self.active.values() if not v[2]]
                self.cond.wait(timeout=max(min(waiting), 0.01) if waiting else None)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _say(line: str) -> None:
    if progress_log.isEnabledFor(logging.INFO):
        progress_log.info("%s", line)
    elif _stderr_is_terminal():
        print(f"minidynamo: {line}", file=sys.stderr, flush=True)


compile_watch = _CompileWatch()
