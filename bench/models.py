"""Real models through minidynamo and torch.compile: graphs, ops captured, graph breaks and
eager fallbacks with their reasons, correctness against eager, crashes, and time.

    export TRITON_INTERPRET=1 PYTHONPATH=/path/to/checkout
    python bench/models.py                                # every model, infer + train
    python bench/models.py --models llama,bert --tasks infer
    python bench/models.py --zoo more                     # models_zoo_more.py's models
    python bench/models.py --zoo extra                    # models_zoo_extra.py's models
    python bench/models.py --jobs 2 --json out.json --markdown
    python bench/models.py --from-json out.json --markdown   # the report of a saved run

Needs torch, transformers, timm and torchvision (e.g. a venv with `pip install
torch==2.14.1 torchvision==0.29.1 transformers timm triton bytecode numpy`); the models are
tiny configs with random weights (bench/models_zoo.py), nothing is downloaded. About
10 minutes for the whole suite on 2 CPU cores with --jobs 2.

Each model runs in two subprocesses, one per compiler (`--worker NAME --tool TOOL`: eager
and that compiler, its tasks one after the other), under a timeout, so a hang or a crash
costs that model only, and neither compiler's process-wide state (torch's frame callback,
caches) reaches the other. A worker prints one JSON line per model/task
(bench/models_run.py measures it); the parent merges them and prints the table,
the summary and the tally of the reasons minidynamo broke or fell back
(bench/models_report.py). `--json` keeps every result, reasons included; `--markdown` prints
the table and the tallies as markdown (the default is plain text for a terminal).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

import models_report  # noqa: E402
from models_zoo import MODELS  # noqa: E402
from models_zoo_extra import BY_NAME, EXTRA  # noqa: E402
from models_zoo_more import MORE  # noqa: E402

MARK = "@@models-result "
TASKS = ("infer", "train")
COMPILERS = ("minidynamo", "torch.compile")  # each measured in a worker process of its own


def worker(name: str, tool: str, tasks: list, threads: int) -> None:
    """Measure one model's tasks with eager and `tool` in this process, one JSON line each."""
    import torch
    import models_run
    torch.set_num_threads(threads)
    models_run.warm_up(tool)
    for task in tasks:
        try:
            result = models_run.measure(BY_NAME[name], task, [tool])
        except Exception as e:  # noqa: BLE001 - the harness (eager build/run) failed: a result too
            result = {"model": name, "task": task, "error": f"{type(e).__name__}: {e}"[:500]}
        print(MARK + json.dumps(result, default=str), flush=True)


def run_worker(name: str, tool: str, tasks: list, timeout: float, threads: int) -> list:
    """The results of one (model, tool) worker; a task it did not finish has "error"."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--tool", tool,
           "--tasks", ",".join(tasks), "--threads", str(threads)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * len(tasks))
        stdout, stderr = proc.stdout, proc.stderr
        failed = f"worker exited {proc.returncode}" if proc.returncode else "no result"
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        failed = f"timeout after {timeout * len(tasks):.0f} s"
    results = [json.loads(line[len(MARK):]) for line in stdout.splitlines() if line.startswith(MARK)]
    done = {r["task"] for r in results}
    tail = " | ".join(stderr.strip().splitlines()[-3:])[-500:]
    results += [{"model": name, "task": task, "error": f"{failed}: {tail}"} for task in tasks if task not in done]
    for r in results:
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        r["worker"] = tool
    return results


def merge(parts: list) -> dict:
    """One model/task's result from its workers' (one per compiler): their tools side by
    side, eager's from the first worker in COMPILERS order that has it (each compiler's
    own process's eager time is in its result, "eager_per_call_ms"); a worker's harness
    error stands as that compiler's result {"error": ...}."""
    out = {"tools": {}}
    for part in sorted(parts, key=lambda p: COMPILERS.index(p["worker"])):
        tool = part["worker"]
        if "error" in part:
            out["tools"][tool] = {"tool": tool, "error": part["error"]}
            continue
        for key, value in part.items():
            if key != "tools":
                out.setdefault(key, value)
        out["tools"].setdefault("eager", part["tools"]["eager"])
        out["tools"][tool] = part["tools"][tool]
    out.setdefault("model", parts[0]["model"])
    out.setdefault("task", parts[0]["task"])
    out["wall_s"] = sum(p["wall_s"] for p in parts)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma list of model names (default: all): "
                        + ", ".join(s.name for s in MODELS))
    parser.add_argument("--zoo", choices=("suite", "more", "extra", "all"), default="suite",
                        help="the models without --models: the suite (models_zoo.py), the more "
                             "of models_zoo_more.py, the extra of models_zoo_extra.py, or all three")
    parser.add_argument("--tasks", default=",".join(TASKS), help="infer,train")
    parser.add_argument("--jobs", type=int, default=1, help="models measured at once")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per model/task")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument("--markdown", action="store_true", help="print markdown")
    parser.add_argument("--from-json", metavar="FILE", help="print the report of a saved --json run (runs nothing)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--tool", choices=COMPILERS, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    if unknown := [t for t in tasks if t not in TASKS]:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    if args.worker:
        worker(args.worker, args.tool, tasks, args.threads or 1)
        return 0
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        print(models_report.report(saved["results"], saved["meta"], markdown=args.markdown))
        return 0
    zoo = {"suite": MODELS, "more": MORE, "extra": EXTRA, "all": MODELS + MORE + EXTRA}[args.zoo]
    names = [n for n in args.models.split(",") if n] if args.models else [s.name for s in zoo]
    if unknown := [n for n in names if n not in BY_NAME]:
        parser.error(f"unknown model(s) {', '.join(unknown)}; see --help")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    parts = collections.defaultdict(list)  # (model, task) -> one result per compiler
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_worker, n, tool, tasks, args.timeout, threads)
                   for n in names for tool in COMPILERS]
        for future in concurrent.futures.as_completed(futures):
            for r in future.result():
                key = (r["model"], r["task"])
                parts[key].append(r)
                if len(parts[key]) == len(COMPILERS):
                    print(models_report.progress_line(merge(parts[key])), file=sys.stderr, flush=True)
    results = [merge(parts[n, t]) for n in names for t in tasks]
    meta = models_report.environment(jobs=args.jobs, threads=threads, wall_s=round(time.perf_counter() - t0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    print(models_report.report(results, meta, markdown=args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
