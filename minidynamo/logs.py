"""Logging under `minidynamo.*`, switched on by MINIDYNAMO_LOGS or set_logs().

MINIDYNAMO_LOGS is a comma list of: recompiles, guards, graph, bytecode, trace, fallbacks;
`+name` turns on debug detail for that channel.
"""
from __future__ import annotations

import logging
import os

CHANNELS = ("recompiles", "guards", "graph", "bytecode", "trace", "fallbacks")
_handler: logging.Handler | None = None


def get_logger(channel: str) -> logging.Logger:
    return logging.getLogger(f"minidynamo.{channel}")


def set_logs(*names: str, **flags) -> None:
    """Turn channels on: set_logs("recompiles", "+graph") or set_logs(recompiles=True)."""
    global _handler
    wanted = list(names) + [k for k, v in flags.items() if v]
    root = logging.getLogger("minidynamo")
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(_handler)
    for ch in CHANNELS:
        get_logger(ch).setLevel(logging.WARNING)
    for raw in wanted:
        name = raw.strip()
        if not name:
            continue
        debug = name.startswith("+")
        name = name.lstrip("+")
        if name not in CHANNELS:
            raise ValueError(f"unknown minidynamo log channel {name!r}; choose from {', '.join(CHANNELS)}")
        get_logger(name).setLevel(logging.DEBUG if debug else logging.INFO)


def init_from_env() -> None:
    env = os.environ.get("MINIDYNAMO_LOGS")
    if env:
        set_logs(*env.split(","))
