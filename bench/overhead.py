"""The per-call overhead and first-call timers bench_core.py and bench_breaks.py share, and
their table: µs per warm call (minimum over interleaved rounds), ms of a first call
(median), each peer's overhead over eager's and minidynamo's ratio to Dynamo's."""
from __future__ import annotations

import contextlib
import statistics
import time


def time_warm(fns: dict, args, rounds=15, min_time=0.02, quiet=contextlib.nullcontext) -> dict:
    """Min µs/call per peer over interleaved rounds (peers alternate within each round, so
    drift of the machine hits them alike); `quiet()` wraps the calls."""
    calls = {}
    with quiet():
        for name, f in fns.items():  # calibrate: about `min_time` seconds per round
            t0 = time.perf_counter()
            for _ in range(50):
                f(*args)
            per = (time.perf_counter() - t0) / 50
            calls[name] = max(50, int(min_time / per))
        samples = {k: [] for k in fns}
        for _ in range(rounds):
            for name, f in fns.items():
                n = calls[name]
                t0 = time.perf_counter()
                for _ in range(n):
                    f(*args)
                samples[name].append((time.perf_counter() - t0) / n * 1e6)
    return {k: min(v) for k, v in samples.items()}


def time_cold(make, args, rounds=5, quiet=contextlib.nullcontext) -> float:
    """Median ms of one first call: `make()` (a fresh compiled callable), then the call."""
    out = []
    with quiet():
        for _ in range(rounds):
            t0 = time.perf_counter()
            f = make()
            f(*args)
            out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def table(rows) -> str:
    """rows: (workload, {peer: µs}, {peer: first-call ms}) for eager, dynamo, minidynamo."""
    lines = [
        "| workload | eager µs | Dynamo µs | minidynamo µs | Dynamo overhead µs "
        "| minidynamo overhead µs | overhead ratio | Dynamo first call ms "
        "| minidynamo first call ms | first-call ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, us, first in rows:
        do, mo = us["dynamo"] - us["eager"], us["minidynamo"] - us["eager"]
        ratio = mo / do if do > 0 else float("nan")
        lines.append(
            f"| {name} | {us['eager']:.1f} | {us['dynamo']:.1f} | {us['minidynamo']:.1f} "
            f"| {do:.1f} | {mo:.1f} | {ratio:.2f} | {first['dynamo']:.1f} "
            f"| {first['minidynamo']:.2f} | {first['minidynamo'] / first['dynamo']:.3f} |")
    return "\n".join(lines)
