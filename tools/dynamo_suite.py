"""Run PyTorch's own Dynamo test files against torch.compile and against minidynamo.

    python tools/dynamo_suite.py DIR [FILE ...] [--out OUT] [--timeout S]

Each test file of DIR (or each FILE named) runs twice under pytest: once as it is
(torch.compile), once with torch.compile, torch._dynamo.optimize / optimize_assert /
explain / reset replaced by minidynamo's equivalents. Only tests torch.compile passes
count. Each failure of minidynamo's run is sorted into a kind:

    crash     an exception raised inside minidynamo (InternalError, or one whose
              innermost frame is minidynamo's)
    break     minidynamo.Unsupported reached the test (fullgraph=True), or a graph /
              frame count that differs from torch.compile's
    artifact  the test reads torch._dynamo internals (counters, guard hooks, compile
              ids, exact op counts, printed graphs) that minidynamo has no twin of
    wrong     an assertion on values failed with no exception: a result differs
    other     anything else (read it)

OUT/results.json holds every test, its kind, the failing line and message, and the
graph breaks minidynamo logged while it ran; OUT/summary.txt the table per file
(md_only: tests torch.compile fails and minidynamo passes).
The same file is the pytest plugin that patches torch (`-p dynamo_suite`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import traceback
from collections import Counter
from pathlib import Path

MODE_ENV = "DYNAMO_SUITE_MODE"  # "tc" or "md": set for the pytest run by the driver
RECORD_ENV = "DYNAMO_SUITE_RECORD"  # where the plugin appends one JSON line per test
TEST_TIMEOUT_S = 120

# A failing line or test body that reads any of these checks torch._dynamo's internals.
ARTIFACT_MARKERS = (
    "counters", "op_count", "assertExpectedInline", "normalize_gm", "guard_fail_fn",
    "guard_export_fn", "CompileId", "compile_id", "get_compilation_metrics", "_debug_get_cache_entry",
    "torch._dynamo.eval_frame", "torch._dynamo.convert_frame", "trace_rules", "print_readable",
    "ExpectedInline", "assertExpected", "torch._dynamo.utils", "CompileProfiler", "graph_module",
    "_dynamo.config.patch", "exc.InternalTorchDynamoError", "frame_compile_id", "recompile_reasons",
    "code_context", "torch._dynamo.symbolic_convert", "torch._guards", "torch._dynamo.logging",
    "cache_size", "fw_graphs", "bw_graphs", ".code.strip()",
)
COUNT_MARKERS = ("frame_count", "graph_count", "graph_break_count", "len(eager.graphs)", "len(backend.graphs)",
                 "len(cnt.graphs)", "len(counter.graphs)", ".graphs)", "break_reasons")


# ---------------------------------------------------------------- the pytest plugin


def _sync_config():
    """torch._dynamo.config settings tests patch that minidynamo has its own copy of."""
    import torch._dynamo.config as tconfig

    import minidynamo
    # cache_size_limit is an alias of recompile_limit (patch.object on the alias deletes it on exit)
    for name, torch_name in (("cache_size_limit", "recompile_limit"), ("error_on_recompile", "error_on_recompile"),
                             ("suppress_errors", "suppress_errors"),
                             ("capture_scalar_outputs", "capture_scalar_outputs")):
        value = getattr(tconfig, torch_name, None)
        if value is not None and getattr(minidynamo.config, name) != value:
            setattr(minidynamo.config, name, value)


def _dynamic_from_config(dynamic):
    """torch._dynamo.config's shape settings, as the `dynamic=` they amount to."""
    import torch._dynamo.config as tconfig
    if dynamic is None and not tconfig.assume_static_by_default:
        return True
    if dynamic is None and not tconfig.automatic_dynamic_shapes:
        return False
    return dynamic


# torch._dynamo.config settings the patched calls carry over to minidynamo
MAPPED_CONFIG = {"cache_size_limit", "error_on_recompile", "suppress_errors", "capture_scalar_outputs",
                 "automatic_dynamic_shapes", "assume_static_by_default"}
CONFIG_PATCH = re.compile(r"config\.patch\((?:\*\*)?\{?[\"']?(\w+)|patch\.object\(\s*torch\._dynamo\.config,\s*[\"'](\w+)"
                          r"|_dynamo\.config\.(\w+)\s*=")


def unmapped_config(source: str) -> set:
    """The torch._dynamo.config settings a test changes that minidynamo does not read."""
    found = {name for m in CONFIG_PATCH.finditer(source) for name in m.groups() if name}
    return found - MAPPED_CONFIG


class _UnsupportedEither(type):
    """`assertRaises(torch._dynamo.exc.Unsupported)` accepts minidynamo's Unsupported too."""

    def __instancecheck__(cls, obj):
        return cls.__subclasscheck__(type(obj))

    def __subclasscheck__(cls, sub):
        import minidynamo
        return type.__subclasscheck__(cls, sub) or issubclass(sub, (cls._torch, minidynamo.Unsupported))


def _install_minidynamo():
    import torch
    import torch._dynamo
    import torch._dynamo.exc
    import torch._dynamo.test_case
    import torch._dynamo.testing

    import minidynamo

    def md_optimize(fn, backend, fullgraph, dynamic, mode=None, options=None):
        _sync_config()
        dynamic = _dynamic_from_config(dynamic)
        kw = {"mode": mode, "options": options} if (mode or options) else {}
        return minidynamo.optimize(fn, backend=backend, fullgraph=bool(fullgraph), dynamic=dynamic, **kw)

    def compile_(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
                 disable=False):
        def wrap(m):
            return m if disable else md_optimize(m, backend, fullgraph, dynamic, mode, options)
        return wrap if model is None else wrap(model)

    class _Decorator:
        def __init__(self, backend, fullgraph, dynamic, disable):
            self.args = backend, fullgraph, dynamic
            self.disable = disable

        def __call__(self, fn):
            return fn if self.disable else md_optimize(fn, *self.args)

        def __enter__(self):
            raise NotImplementedError("dynamo_suite: torch._dynamo.optimize as a context manager")

        def __exit__(self, *exc):
            return False

    def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False, **_hooks):
        return _Decorator(backend, nopython, dynamic, disable)

    def optimize_assert(backend="inductor", *, dynamic=None, **_hooks):
        return _Decorator(backend, True, dynamic, False)

    def explain(f, *args, **kwargs):
        run = minidynamo.explain(f)
        return run(*args, **kwargs) if args or kwargs else run

    def reset():
        torch_reset()
        minidynamo.reset()

    torch_reset = torch._dynamo.reset
    torch.compile = compile_
    for mod in (torch._dynamo, torch._dynamo.testing):
        mod.optimize_assert = optimize_assert
    torch._dynamo.optimize = optimize
    torch._dynamo.explain = explain
    for mod in (torch._dynamo, torch._dynamo.testing, torch._dynamo.test_case, torch.compiler):
        mod.reset = reset
    either = _UnsupportedEither("Unsupported", (Exception,), {"_torch": torch._dynamo.exc.Unsupported})
    torch._dynamo.exc.Unsupported = either
    minidynamo.set_logs("graph_breaks", "fallbacks")
    logging.getLogger("minidynamo").addHandler(_BREAKS)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        if len(self.lines) < 20:
            self.lines.append(record.getMessage()[:400])


_BREAKS = _Collect()


def pytest_configure(config):
    if os.environ.get(MODE_ENV) == "md":
        _install_minidynamo()


def _alarm(signum, frame):
    raise TimeoutError(f"dynamo_suite: test ran past {TEST_TIMEOUT_S}s")


def pytest_runtest_setup(item):
    _BREAKS.lines.clear()
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(TEST_TIMEOUT_S)


def pytest_runtest_teardown(item):
    if hasattr(signal, "SIGALRM"):
        signal.alarm(0)


def _test_source(item) -> str:
    import inspect
    fn = getattr(item, "function", None)
    fn = getattr(fn, "__wrapped__", fn)
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _failing_line(excinfo, test_file: str) -> tuple[str, int]:
    """The innermost line of the test file in the traceback (what failed there)."""
    best = ("", 0)
    for entry in traceback.extract_tb(excinfo.tb):
        if os.path.abspath(entry.filename) == test_file:
            best = ((entry.line or "").strip(), entry.lineno or 0)
    return best


def _innermost_in_minidynamo(excinfo) -> bool:
    frames = traceback.extract_tb(excinfo.tb)
    return bool(frames) and f"{os.sep}minidynamo{os.sep}" in frames[-1].filename


def _record(item, call, outcome: str):
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    rec = {"id": item.nodeid, "outcome": outcome}
    if outcome == "failed" and call.excinfo is not None:
        exc = call.excinfo.value
        line, lineno = _failing_line(call.excinfo, os.path.abspath(str(item.fspath)))
        rec.update(exc_type=f"{type(exc).__module__}.{type(exc).__name__}", message=str(exc)[:1500],
                   line=line, lineno=lineno, in_minidynamo=_innermost_in_minidynamo(call.excinfo),
                   source=_test_source(item), breaks=list(_BREAKS.lines),
                   tb="".join(traceback.format_tb(call.excinfo.tb)[-4:])[-3000:])
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_runtest_makereport(item, call):
    import pytest
    if call.when == "setup" and call.excinfo is not None:
        skipped = call.excinfo.errisinstance(pytest.skip.Exception)
        _record(item, call, "skipped" if skipped else "failed")
    elif call.when == "call":
        if call.excinfo is None:
            _record(item, call, "passed")
        elif call.excinfo.errisinstance(pytest.skip.Exception):
            _record(item, call, "skipped")
        elif getattr(call.excinfo.value, "__class__", None).__name__ == "_UnexpectedSuccess":
            _record(item, call, "xpass")
        else:
            _record(item, call, "failed")


# ---------------------------------------------------------------- the driver


def classify(rec: dict) -> str:
    exc = rec.get("exc_type", "")
    line = rec.get("line", "")
    if exc.endswith("InternalError") or (rec.get("in_minidynamo") and "Unsupported" not in exc):
        return "crash"
    if "Unsupported" in exc and "minidynamo" in exc:
        return "break"
    if any(m in line for m in ARTIFACT_MARKERS):
        return "artifact"
    if "assertRaisesRegex" in line and "does not match" in rec.get("message", ""):
        return "artifact"  # the right exception, in minidynamo's words rather than torch's
    if exc.endswith("AssertionError") and unmapped_config(rec.get("source", "")):
        return "artifact"
    if any(m in line for m in COUNT_MARKERS):
        return "break"
    if "dynamo_suite:" in rec.get("message", "") and "context manager" in rec.get("message", ""):
        return "artifact"
    if exc.endswith("AssertionError") and any(m in rec.get("source", "") for m in ARTIFACT_MARKERS) \
            and not re.search(r"(same|allclose|assertEqual)\(", line):
        return "artifact"
    if exc.endswith("AssertionError"):
        return "wrong"
    return "other"


def run_file(test_file: Path, mode: str, out: Path, timeout: int) -> dict:
    record = out / f"{test_file.stem}.{mode}.jsonl"
    record.unlink(missing_ok=True)
    env = dict(os.environ, **{MODE_ENV: mode, RECORD_ENV: str(record), "TRITON_INTERPRET": "1"})
    here = str(Path(__file__).resolve().parent)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here, repo, str(test_file.parent), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "dynamo_suite",
           "-o", "addopts=", str(test_file)]
    try:
        proc = subprocess.run(cmd, env=env, cwd=test_file.parent, capture_output=True, text=True,
                              timeout=timeout)
        (out / f"{test_file.stem}.{mode}.log").write_text(proc.stdout[-200000:] + proc.stderr[-50000:])
    except subprocess.TimeoutExpired:
        (out / f"{test_file.stem}.{mode}.log").write_text("file timed out")
    results = {}
    if record.exists():
        for raw in record.read_text().splitlines():
            rec = json.loads(raw)
            results[rec["id"]] = rec
    return results


def compare(tc: dict, md: dict) -> dict:
    kinds = Counter()
    rows = []
    for test_id, rec in tc.items():
        if rec["outcome"] != "passed":
            kinds["md_only"] += md.get(test_id, {}).get("outcome") == "passed"
            continue
        kinds["tc_pass"] += 1
        got = md.get(test_id, {"id": test_id, "outcome": "missing"})
        if got["outcome"] == "passed":
            kinds["md_pass"] += 1
            continue
        kind = classify(got) if got["outcome"] == "failed" else got["outcome"]
        kinds[kind] += 1
        rows.append(dict(got, kind=kind))
    return {"counts": dict(kinds), "failures": rows}


COLUMNS = ("tc_pass", "md_pass", "wrong", "crash", "break", "artifact", "other", "md_only")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a directory of PyTorch test files (test_*.py)")
    ap.add_argument("files", nargs="*", help="file names in DIR (default: every test_*.py)")
    ap.add_argument("--out", type=Path, default=Path("dynamo_suite_out"))
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per file and mode")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    files = [args.dir / f for f in args.files] or sorted(args.dir.glob("test_*.py"))
    report = {}
    for f in files:
        tc = run_file(f.resolve(), "tc", args.out, args.timeout)
        md = run_file(f.resolve(), "md", args.out, args.timeout)
        report[f.name] = compare(tc, md)
        if not tc:
            report[f.name]["counts"]["no_tests"] = 1  # collection failed: OUT/<name>.tc.log says why
        print(f.name, report[f.name]["counts"], flush=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=1))
    lines = ["file".ljust(34) + "".join(c.rjust(9) for c in COLUMNS)]
    total = Counter()
    for name, r in report.items():
        total.update(r["counts"])
        lines.append(name.ljust(34) + "".join(str(r["counts"].get(c, 0)).rjust(9) for c in COLUMNS))
    lines.append("total".ljust(34) + "".join(str(total.get(c, 0)).rjust(9) for c in COLUMNS))
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

