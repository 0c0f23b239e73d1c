"""The report of bench/models.py: the per-model table, the summary counts, and the tally
of reasons (minidynamo's and torch.compile's) over all model/tasks.

A reason is normalised before it is counted: the model's own class names (its modules,
its outputs: `LlamaModel`, `CausalLMOutputWithPast`) become `<Module>` / `<ModelOutput>`,
memory addresses `0x…`, so the same decline in two models is one row. Each row says how
many model/tasks it cost, how often it happened, and where (file:line, with the source
line) it happened, most frequent site first.
"""
from __future__ import annotations

import collections
import datetime
import importlib.metadata
import importlib.util
import os
import platform
import re
import statistics
import subprocess

MD, TC = "minidynamo", "torch.compile"
SITES_SHOWN = 3
MODELS_SHOWN = 12


# --- environment --------------------------------------------------------------------------

def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def minidynamo_version() -> str:
    """Where minidynamo is imported from, its commit, and whether minidynamo/ differs from it
    (a shared checkout may hold others' uncommitted work)."""
    spec = importlib.util.find_spec("minidynamo")
    if spec is None or not spec.origin:
        return "not found"
    root = os.path.dirname(os.path.dirname(spec.origin))
    git = ["git", "-C", root]
    try:
        commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--", "minidynamo"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return root
    return f"{root} at {commit}" + (" + uncommitted changes" if dirty else "")


def environment(**extra) -> dict:
    return {"date": datetime.date.today().isoformat(), "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            **{d: _version(d) for d in ("torch", "transformers", "timm", "torchvision", "triton")},
            "minidynamo": minidynamo_version(), **extra}


# --- one result ---------------------------------------------------------------------------

def _tool(r: dict, tool: str) -> dict:
    return (r.get("tools") or {}).get(tool) or {}


def status(t: dict) -> str:
    """ok / wrong / crash / timeout / error (of the harness) / - (not compared) of one
    tool's result."""
    if not t:
        return "-"
    if t.get("error"):
        return "timeout" if t["error"].startswith("timeout") else "error"
    if t.get("crash"):
        return "crash"
    return {True: "ok", False: "wrong"}.get(t.get("correct"), "-")


def share(r: dict) -> float | None:
    """minidynamo's ops / torch.compile's ops (first call), when both ran."""
    md, tc = _tool(r, MD), _tool(r, TC)
    if status(md) in ("crash", "timeout", "error") or status(tc) in ("crash", "timeout", "error") \
            or not tc.get("ops"):
        return None
    return md["ops"] / tc["ops"]


def one_graph(t: dict) -> bool:
    """One graph, no break, no frame run eagerly, and the results right."""
    return status(t) == "ok" and t.get("graphs") == 1 and not t.get("breaks") and not t.get("fallbacks")


def progress_line(r: dict) -> str:
    md, tc = _tool(r, MD), _tool(r, TC)
    return (f"{r['model']}/{r['task']}: minidynamo {md.get('graphs')} graphs {md.get('ops')} ops "
            f"{status(md)}, torch.compile {tc.get('graphs')} graphs {tc.get('ops')} ops {status(tc)} "
            f"({r.get('wall_s')} s)")


# --- reasons ------------------------------------------------------------------------------

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def normalise(detail: str, names: dict) -> str:
    """The reason with the model's own class names and addresses replaced."""
    text = _ADDRESS.sub("0x…", detail)
    if names:
        pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
        text = pattern.sub(lambda m: names[m.group(1)], text)
    return text


def tally(results: list, tool: str) -> list:
    """[(key, row)] sorted by model/tasks cost: key = (kind, category, normalised detail),
    row = {"runs": set of "model/task", "count": occurrences, "sites": Counter of where,
    "code": {where: source line}, "warm": occurrences on a later call (a recompile)}."""
    rows: dict = {}
    for r in results:
        t = _tool(r, tool)
        for reason in t.get("reasons") or ():
            key = (reason["kind"], reason["category"], normalise(reason["detail"], r.get("names") or {}))
            row = rows.setdefault(key, {"runs": set(), "count": 0, "sites": collections.Counter(),
                                        "code": {}, "warm": 0})
            row["runs"].add(f"{r['model']}/{r['task']}")
            row["count"] += 1
            row["warm"] += reason.get("call") == "warm"
            # no file:line (a decline outside any instruction): the frame it happened in
            site = reason.get("where") or f"in {reason.get('frame') or '?'}"
            row["sites"][site] += 1
            row["code"].setdefault(site, reason.get("code") or "")
    return sorted(rows.items(), key=lambda kv: (-len(kv[1]["runs"]), -kv[1]["count"], kv[0]))


def _models_text(runs: set) -> str:
    """llama (infer, train), bert (infer), ...: the model/tasks a reason cost."""
    by_model = collections.defaultdict(list)
    for run in sorted(runs):
        model, task = run.rsplit("/", 1)
        by_model[model].append(task)
    parts = [f"{m} ({', '.join(ts)})" for m, ts in sorted(by_model.items())]
    more = len(parts) - MODELS_SHOWN
    return ", ".join(parts[:MODELS_SHOWN]) + (f", +{more} more" if more > 0 else "")


def tally_text(results: list, tool: str, top: int, markdown: bool) -> str:
    rows = tally(results, tool)
    if not rows:
        return f"{tool}: no graph breaks or fallbacks."
    lines = []
    for i, ((kind, category, detail), row) in enumerate(rows[:top], 1):
        what = "graph break" if kind == "break" else "runs eagerly"
        warm = f", {row['warm']} on a later call" if row["warm"] else ""
        head = f"[{category}] {detail}" if category != "dynamo" else detail
        lines.append(f"{i}. **{what}** {head} — {len(row['runs'])} model/tasks, {row['count']} times{warm}"
                     if markdown else
                     f"{i:3d}. {what}: {head}  [{len(row['runs'])} model/tasks, {row['count']} times{warm}]")
        for where, n in row["sites"].most_common(SITES_SHOWN):
            code = row["code"].get(where)
            site = f"`{where}`" if markdown else where
            lines.append(f"     - at {site} ({n}×)" + (f": `{code}`" if code and markdown else
                                                        f": {code}" if code else ""))
        if len(row["sites"]) > SITES_SHOWN:
            lines.append(f"     - and {len(row['sites']) - SITES_SHOWN} more sites")
        lines.append(f"     - models: {_models_text(row['runs'])}")
    if len(rows) > top:
        lines.append(f"({len(rows) - top} more reasons in the JSON results)")
    return "\n".join(lines)


# --- table --------------------------------------------------------------------------------

def _num(v, fmt="{}"):
    return "-" if v is None else fmt.format(v)


def _pair(md: dict, tc: dict, key: str, fmt="{}") -> str:
    return f"{_num(md.get(key), fmt)} / {_num(tc.get(key), fmt)}"


def note(r: dict) -> str:
    out = []
    for tool in (MD, TC, "eager"):
        t = _tool(r, tool)
        if t.get("error"):
            out.append(f"{tool} {status(t)}: {t['error'][:300]}")
        elif t.get("crash"):
            out.append(f"{tool} crash: {t['crash']} (at {t.get('crash_where')})")
        elif t.get("mismatch"):
            out.append(f"{tool} wrong: {t['mismatch']}")
        if t.get("graphs_total", 0) > t.get("graphs", 0) and tool != "eager":
            why = f" ({t['recompiles'][0][:160]})" if t.get("recompiles") else ""
            out.append(f"{tool}: {t['graphs_total'] - t['graphs']} more graphs on later calls{why}")
    return "; ".join(out)


COLUMNS = ("model", "task", "graphs md / tc", "ops md / tc", "share", "breaks md / tc",
           "eager frames md", "result md / tc", "ms/call eager / md / tc", "first call s md / tc", "note")


def table_rows(results: list) -> list:
    rows = []
    for r in results:
        md, tc, eager = _tool(r, MD), _tool(r, TC), _tool(r, "eager")
        s = share(r)
        rows.append([r["model"], r["task"], _pair(md, tc, "graphs"), _pair(md, tc, "ops"),
                     "-" if s is None else f"{s:.2f}", _pair(md, tc, "breaks"),
                     _num(md.get("fallbacks")), f"{status(md)} / {status(tc)}",
                     f"{_num(eager.get('per_call_ms'), '{:.1f}')} / {_num(md.get('per_call_ms'), '{:.1f}')} / "
                     f"{_num(tc.get('per_call_ms'), '{:.1f}')}",
                     _pair(md, tc, "first_s", "{:.2f}"), note(r).replace("|", "\\|")])
    return rows


def table_text(results: list, markdown: bool) -> str:
    rows = table_rows(results)
    if markdown:
        head = "| " + " | ".join(COLUMNS) + " |"
        align = "|" + "|".join("---" if c in ("model", "task", "note") else "---:" for c in COLUMNS) + "|"
        return "\n".join([head, align] + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(c), *(len(row[i]) for row in rows)) if i < len(COLUMNS) - 1 else 0
              for i, c in enumerate(COLUMNS)]
    fmt = lambda row: "  ".join(v.ljust(w) for v, w in zip(row, widths))  # noqa: E731
    return "\n".join([fmt(COLUMNS)] + [fmt(row) for row in rows])


# --- summary ------------------------------------------------------------------------------

def _eager_ms(r: dict, t: dict) -> float | None:
    """Eager's ms/call measured in the same process as the tool's `t` (else the table's)."""
    return t.get("eager_per_call_ms") or _tool(r, "eager").get("per_call_ms")


def summary(results: list) -> dict:
    shares = [s for s in map(share, results) if s is not None]
    out = {"model/tasks": len(results),
           "median share of torch.compile's ops": round(statistics.median(shares), 3) if shares else None,
           "eager failed": sum(1 for r in results if status(_tool(r, "eager")) not in ("ok", "-"))}
    for tool in (MD, TC):
        ts = [_tool(r, tool) for r in results]
        out[f"{tool}: one graph"] = sum(map(one_graph, ts))
        out[f"{tool}: no graph"] = sum(1 for t in ts if status(t) in ("ok", "wrong") and not t.get("graphs"))
        for what in ("wrong", "crash", "timeout", "error"):
            out[f"{tool}: {what}"] = sum(1 for t in ts if status(t) == what)
        out[f"{tool}: graph breaks"] = sum(t.get("breaks") or 0 for t in ts)
        out[f"{tool}: eager frames"] = sum(t.get("fallbacks") or 0 for t in ts)
        firsts = [t["first_s"] for t in ts if status(t) == "ok" and t.get("first_s") is not None]
        out[f"{tool}: median first call s"] = round(statistics.median(firsts), 2) if firsts else None
        ratios = [t["per_call_ms"] / _eager_ms(r, t) for r, t in zip(results, ts)
                  if status(t) == "ok" and t.get("per_call_ms") and _eager_ms(r, t)]
        out[f"{tool}: median ms/call over eager's"] = round(statistics.median(ratios), 2) if ratios else None
    return out


def report(results: list, meta: dict, markdown: bool, top: int = 30) -> str:
    env = ", ".join(f"{k} {v}" for k, v in meta.items())
    parts = [f"Models: {env}", "", table_text(results, markdown), ""]
    parts.append("Summary:" if not markdown else "**Summary**")
    parts.extend(f"- {k}: {v}" for k, v in summary(results).items())
    parts += ["", "Why minidynamo broke graphs or ran frames eagerly (all model/tasks):" if not markdown
              else "**Why minidynamo broke graphs or ran frames eagerly**", "",
              tally_text(results, MD, top, markdown), "",
              "torch.compile's graph breaks:" if not markdown else "**torch.compile's graph breaks**", "",
              tally_text(results, TC, 10, markdown)]
    return "\n".join(parts)
