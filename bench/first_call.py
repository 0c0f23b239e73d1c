"""First-call time (trace + compile + run) of bench/models.py's models, minidynamo beside
torch.compile, each measured in a fresh process (per-process caches start empty, as a
user's first call finds them) after the same warm-up and one eager call as models.py's.

    TRITON_INTERPRET=1 PYTHONPATH=. python bench/first_call.py --models bert,llama \
        --tasks infer,train --runs 3 [--tools minidynamo] [--profile out.prof]

Prints the minimum over --runs per model/task/tool and minidynamo's ratio to
torch.compile's, of wall time and of the process's CPU time (`time.process_time`: on
cores shared with other work, wall times swing by 2-4x while CPU time moves little; both
tools run on one thread). --profile (one model/task, minidynamo) writes cProfile stats of
one first call and prints the top entries by tottime and cumtime.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

MARK = "@@first-call "


def one(name: str, task: str, tool: str, profile: str | None) -> tuple:
    """The first call's (wall, CPU) seconds of `tool` on a fresh copy of the model, in this
    process."""
    import torch
    import models_run
    from models_zoo import BY_NAME
    torch.set_num_threads(1)
    models_run.warm_up(tool)
    spec = BY_NAME[name]
    torch.manual_seed(models_run.SEED)
    base = spec.build()
    base.train(task == "train")
    inputs = spec.inputs(task)
    models_run.step(copy.deepcopy(base), spec, task, inputs)  # eager's own first call
    runner = models_run.make_runner(tool, copy.deepcopy(base), models_run.CountingBackend())
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    models_run.step(runner, spec, task, inputs)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    if profile:
        prof.disable()
        prof.dump_stats(profile)
    return took, cpu


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="bert,llama,timm_resnet18")
    p.add_argument("--tasks", default="infer,train")
    p.add_argument("--tools", default="minidynamo,torch.compile")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", default=None)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        print(MARK + json.dumps(one(*a.worker, a.profile)), flush=True)
        return 0
    env = dict(os.environ, TRITON_INTERPRET="1")
    results = {}
    for name in a.models.split(","):
        for task in a.tasks.split(","):
            for tool in a.tools.split(","):
                times = []
                for _ in range(1 if a.profile else a.runs):
                    cmd = [sys.executable, __file__, "--worker", name, task, tool]
                    if a.profile:
                        cmd += ["--profile", a.profile]
                    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    lines = [x for x in out.stdout.splitlines() if x.startswith(MARK)]
                    if not lines:
                        print(out.stderr[-3000:], file=sys.stderr)
                        break
                    times.append(tuple(json.loads(lines[0][len(MARK):])))
                results[name, task, tool] = ((min(t for t, _ in times), min(c for _, c in times))
                                             if times else None)
                print(f"{name:22} {task:6} {tool:14} wall "
                      + " ".join(f"{t:.3f}" for t, _ in times) + "  cpu " + " ".join(f"{c:.3f}" for _, c in times),
                      flush=True)
    print()
    for name in a.models.split(","):
        for task in a.tasks.split(","):
            md, tc = results.get((name, task, "minidynamo")), results.get((name, task, "torch.compile"))
            line = f"{name:22} {task:6}"
            for i, what in enumerate(("wall", "cpu")):
                m, t = md[i] if md else 0, tc[i] if tc else 0
                ratio = f"{m / t:.3f}" if m and t else "-"
                line += f"  {what}: minidynamo {m:.3f}s torch.compile {t:.3f}s ratio {ratio}"
            print(line)
    if a.profile:
        import pstats
        for key in ("tottime", "cumtime"):
            pstats.Stats(a.profile).sort_stats(key).print_stats(a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
