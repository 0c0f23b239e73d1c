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

import logging
import os

CHANNELS = ("recompiles", "guards", "graph", "bytecode", "trace", "fallbacks", "graph_breaks")
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
        if name == "all":
            chosen = CHANNELS
        elif name in CHANNELS:
            chosen = (name,)
        else:
            raise ValueError(f"unknown minidynamo log channel {name!r}; choose from "
                             f"{', '.join(CHANNELS)} (or all), '+name' for debug detail")
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
