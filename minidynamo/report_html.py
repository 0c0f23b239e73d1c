"""The compile report's page: one static HTML file, no scripts or styles from elsewhere.

Input is what compile_report.py recorded (frames, their entries, recompiles, in call
order); this module only reads it. Every text from the user's program (source lines,
guard values, graph code, messages) goes through `esc`. Long sections (graph code,
guards, pictures of big graphs) are folded in <details>, so a model's page stays usable.
"""
from __future__ import annotations

import datetime
import linecache
import os
import re
import sys

import torch

from . import callees, frame_hook
from .backends import backend_name
from .report_svg import SVG_DEFS, esc, graph_svg

_WHERE = re.compile(r"^(.*?):(\d+)(?::|$)")
_CONTEXT = 3  # source lines shown on each side of a highlighted one
_OPEN_CODE_LINES = 60  # graph code longer than this starts folded
_OPEN_GUARDS = 25
_OPEN_PICTURE_NODES = 80
# Compile phases in the order they run (convert.py measures them).
_PHASES = ("trace", "trace again to the break", "backend", "guards and entry code")
_KIND_WORDS = {"graph": "graph", "break": "graph break", "eager": "runs eagerly",
               "constant": "no tensor work"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#233044;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px} header .run{color:#c6d0dd;font-size:13px;margin-top:4px}
nav{background:#fff;border-bottom:1px solid #d8dde5;padding:8px 24px;position:sticky;top:0;z-index:2}
nav a{margin-right:16px;color:#2b5ea7;text-decoration:none;font-size:14px}
main{padding:8px 24px 40px;max-width:1400px}
section{background:#fff;border:1px solid #d8dde5;border-radius:6px;margin:16px 0;padding:10px 16px}
h2{font-size:17px;margin:6px 0 10px} h3{font-size:15px;margin:14px 0 6px} h4{font-size:14px;margin:10px 0 4px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #d8dde5;border-radius:6px;padding:8px 14px;min-width:110px;background:#fafbfc}
.card b{display:block;font-size:22px} .card span{font-size:12px;color:#5b6577}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
td,th{border-bottom:1px solid #e6e9ee;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#5b6577;font-weight:600} td.num,th.num{text-align:right;padding-left:10px} td.num{white-space:nowrap}
.wide{overflow-x:auto}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f3f5f8;border:1px solid #e1e5eb;border-radius:4px;padding:8px;overflow:auto;max-height:70vh;margin:4px 0}
pre.src{padding:4px 0} pre.src span{display:block;padding:0 8px;white-space:pre}
pre.src span.hl{background:#fff3b0;border-left:3px solid #e0a800;font-weight:600}
pre.src i{color:#8a94a6;font-style:normal;display:inline-block;width:4em;text-align:right;margin-right:10px}
.badge{display:inline-block;white-space:nowrap;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}
.k-graph{background:#2f7d32} .k-break{background:#c77418} .k-eager{background:#b3261e} .k-constant{background:#6b7585}
.k-recompile{background:#7a4bb0} .k-limit{background:#b3261e}
details{margin:4px 0} summary{cursor:pointer;font-size:13px;color:#2b5ea7}
details.entry{border:1px solid #d8dde5;border-radius:6px;padding:6px 12px;margin:8px 0;background:#fcfcfd}
details.entry>summary{font-size:14px;color:#1d2330}
.frame{border-top:2px solid #d8dde5;padding-top:6px;margin-top:14px}
.muted{color:#5b6577;font-size:12px} .note{color:#5b6577;font-size:13px}
.svgbox{overflow:auto;max-height:80vh;border:1px solid #e1e5eb;border-radius:4px;background:#fff}
.bar{display:flex;height:12px;min-width:2px;border-radius:2px;overflow:hidden}
.bar div{height:100%} .p0{background:#3b6fb6} .p1{background:#8fb3e8} .p2{background:#c77418} .p3{background:#9aa4b2}
.p4{background:#7a4bb0}
ul.tree{list-style:none;padding-left:18px;margin:4px 0} ul.tree li{margin:3px 0}
.reason{margin:8px 0 14px;padding:6px 10px;border-left:3px solid #c77418;background:#fffaf2}
.reason.recompile{border-color:#7a4bb0;background:#faf7fe} .reason.eager{border-color:#b3261e;background:#fff6f6}
"""

# Expand or fold every section at once; nothing is loaded from anywhere.
_SCRIPT = """function mdFold(open){document.querySelectorAll('details').forEach(d=>d.open=open)}"""


def _where(text):
    """(file, line) from `file:line[: source]`, or None."""
    m = _WHERE.match(text or "")
    return (m.group(1), int(m.group(2))) if m else None


def source_context(filename: str, lineno: int, around: int = _CONTEXT) -> str:
    """The lines around `lineno` of `filename`, that line highlighted."""
    first = max(1, lineno - around)
    rows = []
    for n in range(first, lineno + around + 1):
        text = linecache.getline(filename, n)
        if not text and n > lineno:
            break
        cls = ' class="hl"' if n == lineno else ""
        rows.append(f"<span{cls}><i>{n}</i>{esc(text.rstrip())}</span>")
    if not any(linecache.getline(filename, n) for n in range(first, lineno + 1)):
        return f'<p class="note">(source of {esc(filename)} not available)</p>'
    return f'<div class="muted">{esc(_short_path(filename))}:{lineno}</div><pre class="src">{"".join(rows)}</pre>'


def _context_of(where_text) -> str:
    found = _where(where_text)
    return source_context(*found) if found else ""


def _short_path(path: str) -> str:
    """Relative to the working directory, or from the package on for an installed one."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        rel = path
    if not rel.startswith(".."):
        return rel
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


_PATH = re.compile(r"(?<![\w.])(/[^\s():]+\.py)\b")


def _short_paths(text: str) -> str:
    """`text` with each file path in it shortened (a frame's label: `f (file:line)`)."""
    return _PATH.sub(lambda m: _short_path(m.group(1)), text)


def _badge(kind: str, text: str | None = None) -> str:
    return f'<span class="badge k-{esc(kind)}">{esc(text or _KIND_WORDS.get(kind, kind))}</span>'


def _fold(summary: str, body: str, open_: bool, cls: str = "") -> str:
    return (f'<details{" open" if open_ else ""}{f" class={cls!r}" if cls else ""}>'
            f"<summary>{summary}</summary>{body}</details>")


class Page:
    """Renders one recorded run (compile_report.Recording) as HTML."""

    def __init__(self, rec, title: str):
        self.rec = rec
        self.title = title
        self.ids = {id(f.cache): i for i, f in enumerate(rec.frames)}

    # --- helpers -------------------------------------------------------------------------
    def frame_link(self, frame) -> str:
        return f'<a href="#frame-{self.ids[id(frame.cache)]}">{esc(_short_paths(frame.label))}</a>'

    def entry_link(self, frame, index: int, text: str | None = None) -> str:
        return f'<a href="#frame-{self.ids[id(frame.cache)]}-entry-{index}">{esc(text or f"entry {index}")}</a>'

    # --- the page ------------------------------------------------------------------------
    def render(self) -> str:
        rec = self.rec
        sections = [self.overview(), self.timeline(), self.times(), self.breaks(), self.recompiles(),
                    self.frames(), self.plain_frames()]
        when = datetime.datetime.fromtimestamp(rec.start).strftime("%Y-%m-%d %H:%M:%S")
        run = (f"{esc(' '.join(sys.argv) or sys.executable)} · started {when} · Python "
               f"{sys.version.split()[0]} · torch {esc(torch.__version__)}")
        nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
            ("overview", "Overview"), ("timeline", "Timeline"), ("times", "Compile time"),
            ("breaks", "Graph breaks"), ("recompiles", "Recompiles"), ("frames", "Frames")))
        nav += ('<a href="#" onclick="mdFold(true);return false">expand all</a>'
                '<a href="#" onclick="mdFold(false);return false">fold all</a>')
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{esc(self.title)}</title><style>{_CSS}</style><script>{_SCRIPT}</script></head>"
                f'<body>{SVG_DEFS}<header><h1>{esc(self.title)}</h1><div class="run">{run}</div></header>'
                f'<nav>{nav}</nav><main>{"".join(sections)}</main></body></html>\n')

    def overview(self) -> str:
        rec = self.rec
        entries = [e for f in rec.frames for _, e in f.entries]
        kinds = {k: sum(e.kind == k for e in entries) for k in _KIND_WORDS}
        launches = sum(len(e.kernels or ()) for e in entries)
        ms = sum(e.compile_time_ms for e in entries)
        cards = [(len(rec.frames), "frames (functions and resume functions)"), (len(entries), "cache entries"),
                 (kinds["graph"] + kinds["break"], "graphs"), (kinds["break"], "graph breaks"),
                 (len(rec.failures), "recompiles"), (kinds["eager"], "eager fallbacks"),
                 (launches, "Triton launches"), (f"{ms:.0f} ms", "compile time")]
        body = "".join(f'<div class="card"><b>{esc(v)}</b><span>{esc(t)}</span></div>' for v, t in cards)
        if not rec.frames:
            tree = '<p class="note">Nothing was compiled while the report was recording.</p>'
        else:
            tree = ('<h3>How the frames chain</h3><p class="note">Each optimized function, its cache entries, '
                    "and where an entry breaks the graph, the resume function the rest of the frame "
                    "continues in.</p>" + self.tree())
        return f'<section id="overview"><h2>Overview</h2><div class="cards">{body}</div>{tree}</section>'

    def tree(self) -> str:
        shown: set = set()
        roots = [f for f in self.rec.frames if not f.continuation or id(f.root) not in self.rec.by_cache]
        return '<ul class="tree">' + "".join(self._tree_item(f, shown) for f in roots) + "</ul>"

    def _tree_item(self, frame, shown: set) -> str:
        if id(frame.cache) in shown:
            return f"<li>{self.frame_link(frame)} <span class=muted>(above)</span></li>"
        shown.add(id(frame.cache))
        tag = "resume function" if frame.continuation else frame.origin
        items = []
        for index, e in frame.entries:
            line = f"{self.entry_link(frame, index)} {_badge(e.kind)} {self._entry_brief(e)}"
            subs = []
            for r in e.resumes:
                child = self.rec.by_cache.get(id(getattr(r, "_cache", None)))
                if child is not None:
                    subs.append(self._tree_item(child, shown))
                else:
                    subs.append(f"<li>{esc(getattr(r, '__name__', 'resume'))} "
                                "<span class=muted>(not compiled while recording)</span></li>")
            if subs:
                line += ' → continues in<ul class="tree">' + "".join(subs) + "</ul>"
            items.append(f"<li>{line}</li>")
        inner = '<ul class="tree">' + "".join(items) + "</ul>" if items else ""
        return f"<li>{self.frame_link(frame)} <span class=muted>{esc(tag)}</span>{inner}</li>"

    def _entry_brief(self, e) -> str:
        bits = [f"{e.hit_count} hits", f"{e.compile_time_ms:.1f} ms"]
        ops = _op_count(e)
        if ops:
            bits.append(f"{ops} ops")
        if e.kernels:
            bits.append(f"{len(e.kernels)} Triton launches")
        if e.break_reason is not None:
            r = e.break_reason
            found = _where(r.where)
            bits.append(f"breaks at line {found[1]}: [{r.category}]" if found else f"breaks: [{r.category}]")
        if e.reason is not None:
            bits.append(f"[{e.reason.category}]")
        return f'<span class="muted">{esc(", ".join(bits))}</span>'

    def timeline(self) -> str:
        rows = []
        t0 = self.rec.start
        for ev in self.rec.events:
            frame = ev.frame
            if ev.what == "compile":
                what = f"compiled {self.entry_link(frame, ev.index)} of {self.frame_link(frame)} {_badge(ev.entry.kind)}"
            elif ev.what == "recompile":
                what = (f'<a href="#recompile-{ev.index}">recompile</a> of {self.frame_link(frame)}: '
                        f"{esc(ev.failure.reason)}")
            else:
                what = f"{_badge('limit', 'cache limit')} {esc(ev.message)}"
            site = f'<span class="muted">{esc(_short_where(ev.call_site))}</span>' if ev.call_site else ""
            rows.append(f'<tr><td class="num">{(ev.time - t0) * 1e3:.0f} ms</td><td>{what}</td><td>{site}</td></tr>')
        body = ("<table><tr><th class=num>at</th><th>what</th><th>called from</th></tr>" + "".join(rows) + "</table>"
                if rows else '<p class="note">No compiles.</p>')
        return f'<section id="timeline"><h2>Timeline</h2>{_fold(f"{len(rows)} events", body, len(rows) <= 40)}</section>'

    def times(self) -> str:
        rows = []
        seen = {k for f in self.rec.frames for _, e in f.entries for k in (getattr(e, "phases", None) or {})}
        names = [k for k in _PHASES if k in seen] + sorted(seen - set(_PHASES))
        total_ms = {k: 0.0 for k in names}
        biggest = max((e.compile_time_ms for f in self.rec.frames for _, e in f.entries), default=1.0) or 1.0
        for f in self.rec.frames:
            for index, e in f.entries:
                phases = getattr(e, "phases", None) or {}
                cells = "".join(f'<td class="num">{phases[k]:.1f}</td>' if k in phases else "<td></td>"
                                for k in names)
                for k, v in phases.items():
                    total_ms[k] += v
                bar = "".join(f'<div class="p{names.index(k) % 5}" style="width:{160 * phases[k] / biggest:.1f}px" '
                              f'title="{esc(k)}: {phases[k]:.1f} ms"></div>' for k in names if k in phases)
                rows.append(f"<tr><td>{self.frame_link(f)}</td><td class=num>{self.entry_link(f, index)}</td>"
                            f"<td>{_badge(e.kind)}</td>{cells}<td class=num><b>{e.compile_time_ms:.1f}</b></td>"
                            f'<td><div class="bar">{bar}</div></td></tr>')
        if not rows:
            return '<section id="times"><h2>Compile time</h2><p class="note">No compiles.</p></section>'
        head = "".join(f"<th class=num>{esc(k)} (ms)</th>" for k in names)
        legend = " ".join(f'<span class="badge p{i % 5}">{esc(k)}</span>' for i, k in enumerate(names))
        foot = "".join(f"<td class=num><b>{total_ms[k]:.1f}</b></td>" for k in names)
        total = sum(e.compile_time_ms for f in self.rec.frames for _, e in f.entries)
        table = (f"<table><tr><th>frame</th><th>entry</th><th>kind</th>{head}<th class=num>total (ms)</th><th></th></tr>"
                 + "".join(rows) + f"<tr><td><b>all</b></td><td></td><td></td>{foot}<td class=num><b>{total:.1f}</b>"
                 "</td><td></td></tr></table>")
        note = ('<p class="note">Per cache entry: tracing the bytecode (on fake tensors), tracing again up to '
                "a graph break, the backend compiling the graph, and generating the guards and the entry "
                "function. A first compile in a process also pays torch's one-time import of its fake "
                "tensors.</p>")
        folded = _fold(f"{len(rows)} entries", f'<div class="wide">{table}</div>', len(rows) <= 40)
        return f'<section id="times"><h2>Compile time</h2>{note}<div>{legend}</div>{folded}</section>'

    def breaks(self) -> str:
        items = []
        for f in self.rec.frames:
            for index, e in f.entries:
                r = e.break_reason or e.reason
                if r is None:
                    continue
                cls = "reason" if e.break_reason is not None else "reason eager"
                what = "graph break" if e.break_reason is not None else "runs eagerly as a whole"
                extra = ""
                if r.no_break:
                    extra += f"<div>no graph break there: {esc(r.no_break)}</div>"
                if e.resumes:
                    extra += ("<div>then runs that instruction natively and continues in "
                              + ", ".join(self._resume_link(x) for x in e.resumes) + "</div>")
                items.append(f'<div class="{cls}"><div>{_badge(e.kind)} <b>{esc(what)}</b> in {self.frame_link(f)}, '
                             f"{self.entry_link(f, index)}: <code>[{esc(r.category)}]</code> {esc(r.detail)}</div>"
                             f"{_context_of(r.where)}<div>hint: {esc(r.hint)}</div>{extra}</div>")
        body = "".join(items) or '<p class="note">No graph breaks and no eager fallbacks.</p>'
        return f'<section id="breaks"><h2>Graph breaks and eager fallbacks ({len(items)})</h2>{body}</section>'

    def _resume_link(self, r) -> str:
        child = self.rec.by_cache.get(id(getattr(r, "_cache", None)))
        return self.frame_link(child) if child is not None else esc(getattr(r, "__name__", "resume"))

    def recompiles(self) -> str:
        items = []
        for n, (frame, failure, site) in enumerate(self.rec.failures):
            others = "".join(f"<li>entry {o.entry}: {esc(o.reason)} <code>[{esc(o.kind)} {esc(o.source)}]</code></li>"
                             for o in failure.others)
            others = f"<div>the other entries missed too:<ul>{others}</ul></div>" if others else ""
            call = ("<h4>the call that recompiled</h4>" + _context_of(site)) if site else ""
            items.append(
                f'<div class="reason recompile" id="recompile-{n}"><div>{_badge("recompile")} '
                f"<b>{self.frame_link(frame)}</b>: {esc(failure.reason)}</div>"
                f"<table><tr><th>guard</th><td><code>{esc(failure.kind)}</code> on {esc(failure.source)}</td></tr>"
                f"<tr><th>expected</th><td><code>{esc(failure.expected)}</code></td></tr>"
                f"<tr><th>actual</th><td><code>{esc(failure.actual)}</code></td></tr>"
                f"<tr><th>checked against</th><td>{self.entry_link(frame, failure.entry)}</td></tr>"
                f"<tr><th>expression</th><td><code>{esc(_cut(failure.guard))}</code></td></tr></table>"
                f"{others}{call}<h4>the function{' after the break' if failure.resume else ''}</h4>"
                f"{_context_of(failure.where)}</div>")
        for ev in self.rec.events:
            if ev.what == "limit":
                items.append(f'<div class="reason eager">{_badge("limit", "cache limit")} {self.frame_link(ev.frame)}: '
                             f"{esc(ev.message)}{_context_of(ev.call_site) if ev.call_site else ''}</div>")
        body = "".join(items) or '<p class="note">No recompiles.</p>'
        return f'<section id="recompiles"><h2>Recompiles ({len(self.rec.failures)})</h2>{body}</section>'

    def frames(self) -> str:
        parts = []
        for f in self.rec.frames:
            k = self.ids[id(f.cache)]
            head = f'<div class="frame" id="frame-{k}"><h3>{esc(_short_paths(f.label))}</h3>'
            sub = [f"{esc(f.origin if not f.continuation else 'resume function')}",
                   f"generated name <code>{esc(f.cache.name)}</code>" if f.continuation else "",
                   f"backend <code>{esc(backend_name(f.cache.backend))}</code>",
                   f"{len(f.entries)} entries"]
            if f.continuation and id(f.root) in self.rec.by_cache:
                sub.append("of " + self.frame_link(self.rec.by_cache[id(f.root)]))
            head += f'<div class="muted">{" · ".join(s for s in sub if s)}</div>'
            open_entries = len(f.entries) <= 3
            entries = "".join(self.entry(f, index, e, open_entries) for index, e in f.entries)
            parts.append(head + entries + "</div>")
        return f'<section id="frames"><h2>Frames and their cache entries</h2>{"".join(parts)}</section>'

    def entry(self, frame, index: int, e, open_: bool) -> str:
        k = self.ids[id(frame.cache)]
        naming = frame.cache.naming
        summary = f"entry {index} {_badge(e.kind)} {self._entry_brief(e)}"
        body = []
        if e.reason is not None:
            body.append(f'<div class="reason eager">runs eagerly: <code>[{esc(e.reason.category)}]</code> '
                        f'{esc(e.reason.detail)} <a href="#breaks">(details)</a></div>')
        if e.break_reason is not None:
            r = e.break_reason
            body.append(f'<div class="reason">breaks the graph: <code>[{esc(r.category)}]</code> {esc(r.detail)} '
                        f"→ continues in {', '.join(self._resume_link(x) for x in e.resumes) or 'nothing'}</div>")
        body.append(self.guards(e, naming))
        body.append(self.graph(e))
        body.append(self.launches(e))
        if getattr(e, "program_note", ""):
            body.append(f'<div class="muted">launch program: {esc(e.program_note)}</div>')
        body.append(_fold("the entry function as it runs (guards, then the graph)",
                          f"<pre>{esc(e.source_text)}</pre>", False))
        return (f'<details class="entry" id="frame-{k}-entry-{index}"{" open" if open_ else ""}>'
                f"<summary>{summary}</summary>{''.join(body)}</details>")

    def guards(self, e, naming) -> str:
        rows = "".join(f"<tr><td><code>{esc(g.source.name(naming))}</code></td><td>{esc(_describe(g, naming))}</td>"
                       f"<td class=muted>{esc(g.kind)}</td></tr>" for g in e.guards)
        exprs = f"<pre>{esc(chr(10).join(_cut(x) for x in e.guard_exprs) or '(no guards)')}</pre>"
        table = (f"<table><tr><th>value</th><th>what the entry requires</th><th>kind</th></tr>{rows}</table>"
                 + _fold("the guard expressions, as they run", exprs, False))
        return _fold(f"<b>{len(e.guards)} guards</b> in words", table, len(e.guards) <= _OPEN_GUARDS)

    def graph(self, e) -> str:
        try:
            code = e.graph_code
            gm = e.gm
        except Exception as err:  # noqa: BLE001 - a report must never fail the run
            return f'<p class="note">the graph could not be shown: {esc(type(err).__name__)}: {esc(err)}</p>'
        if code is None or gm is None:
            return ""
        lines = code.count("\n") + 1
        nodes = len(gm.graph.nodes)
        out = _fold(f"<b>graph code</b> ({lines} lines, {_op_count(e)} ops)", f"<pre>{esc(code)}</pre>",
                    lines <= _OPEN_CODE_LINES)
        try:
            svg = graph_svg(gm.graph, e.kernels)
        except Exception as err:  # noqa: BLE001 - a report must never fail the run
            svg = f'<p class="note">no picture: {esc(type(err).__name__)}: {esc(err)}</p>'
        legend = ('<div class="muted">dashed red: this node reads a tensor a Triton launch above it wrote</div>'
                  if e.kernels else "")
        return out + _fold(f"<b>picture of the graph</b> ({nodes} nodes)", f'{legend}<div class="svgbox">{svg}</div>',
                           nodes <= _OPEN_PICTURE_NODES)

    def launches(self, e) -> str:
        if not e.kernels:
            return ""
        rows = []
        for rec in e.kernels:
            m = rec.mutation
            writes = rec.written_tensors()
            if writes is None:
                what = f"unknown ({getattr(m, 'reason', None) or 'not analysed'}): every tensor argument treated as written"
            else:
                what = ", ".join(writes) or "nothing"
            grid = rec.grid if isinstance(rec.grid, tuple) else f"per config {rec.grid}"
            rows.append(f"<tr><td><code>{esc(rec.name)}</code></td><td><code>{esc(grid)}</code></td>"
                        f"<td>{esc(what)}</td></tr>")
        return (f"<h4>Triton launches ({len(rows)})</h4><table><tr><th>kernel</th><th>grid</th><th>writes</th></tr>"
                + "".join(rows) + "</table>")

    def plain_frames(self) -> str:
        records = [r for r in frame_hook.report() if getattr(r, "plain", None)]
        if not records:
            return ""
        rows = "".join(f"<tr><td><code>{esc(r.qualname)}</code></td><td class=muted>{esc(_short_where(r.where))}</td>"
                       f"<td>{esc(r.plain)}</td></tr>" for r in records)
        body = ('<p class="note">Frames run eagerly do not take what they call with them: each Python function '
                "they call is offered to the optimizer on its own. These run plainly from now on, and why:</p>"
                f"<table><tr><th>function</th><th>where</th><th>why it runs plainly</th></tr>{rows}</table>")
        return f'<section id="plain"><h2>Frames that run plainly ({len(records)})</h2>{body}</section>'


def _describe(guard, naming) -> str:
    try:
        return guard.describe(naming)
    except Exception as err:  # noqa: BLE001 - a report must never fail the run
        return f"(cannot be described: {type(err).__name__})"


def _cut(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit - 1] + f"… ({len(text)} characters)"


def _short_where(where) -> str:
    found = _where(where)
    return f"{_short_path(found[0])}:{found[1]}" if found else str(where or "")


def _op_count(e) -> int:
    try:
        gm = e.gm
    except Exception:  # noqa: BLE001 - counted as none where the graph cannot be built
        return 0
    return 0 if gm is None else sum(1 for n in gm.graph.nodes if n.op.startswith("call"))


def origin_of(cache) -> str:
    """How a frame came to be optimized: by the user, or as a callee of eager code."""
    fn = getattr(cache, "fn", None)
    try:
        made = fn in callees._made
    except TypeError:
        made = False
    return "optimized as a frame called from code that runs eagerly" if made else "optimized function"


def render(recording, title: str = "minidynamo compile report") -> str:
    return Page(recording, title).render()
