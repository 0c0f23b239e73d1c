"""The compile report (minidynamo.report / MINIDYNAMO_REPORT): the page lists every frame,
entry, graph break and recompile of a run, escapes what the user's program wrote, loads
nothing from elsewhere, and opens in a real headless browser (Chromium, when installed)."""
import html
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from html.parser import HTMLParser

import pytest
import torch
import triton
import triton.language as tl

import minidynamo
from minidynamo import compile_report
from minidynamo.callees import chain_caches
from minidynamo.report_svg import graph_svg


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def readme_f(x, y, scale=2.0):
    a, b = x + y, x * y
    act = lambda t: torch.relu(t) * scale  # noqa: E731 - the README's example as written
    o = torch.empty_like(a)
    add_kernel[lambda meta: (triton.cdiv(o.numel(), meta["BLOCK"]),)](a, b, o, o.numel(), BLOCK=256)
    return act(o) - b.sum(dim=0), (a.shape[0], "ok")


class Printing(torch.nn.Module):
    """A forward that prints (a graph break) and is called with changing dtypes (recompiles)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("shape <b>&", y.shape)  # user text with markup in it: escaped on the page
        return torch.relu(y) * 2


def _readme_run(path):
    f = minidynamo.optimize(readme_f)
    with minidynamo.report(path) as rep:
        x, y = torch.randn(8, 4), torch.randn(8, 4)
        f(x, y)
        f(x, y)
        f(torch.randn(16, 4), torch.randn(16, 4))
    return f, rep


def _module_run(path):
    net = minidynamo.optimize(Printing())
    with minidynamo.report(path) as rep:
        for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
            net.to(dtype)
            net(torch.randn(3, 4, dtype=dtype))
    return net, rep


class _Balance(HTMLParser):
    """Checks that every element opened is closed, in order (no markup leaked from text)."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "path", "rect"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append((tag, list(self.stack[-3:])))
        else:
            self.stack.pop()


def _check_well_formed(page: str):
    parser = _Balance()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []


def _check_self_contained(page: str):
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", page)
    links = re.findall(r'\b(?:href|src)="([^"]*)"', page)
    assert all(link.startswith("#") for link in links), [x for x in links if not x.startswith("#")]
    assert "@import" not in page and "url(http" not in page


def _entries(cache_root, backend="eager"):
    return [(c, i, e) for c in chain_caches(cache_root, backend) for i, e in enumerate(c.entries)]


def test_readme_example_report(tmp_path):
    f, rep = _readme_run(tmp_path / "readme.html")
    assert rep.path == str(tmp_path / "readme.html") and os.path.exists(rep.path)
    page = open(rep.path, encoding="utf-8").read()
    _check_well_formed(page)
    _check_self_contained(page)
    assert compile_report.recorders == []  # recording stops with the block
    entries = f.cache_entries()
    assert len(entries) == 2
    for i, e in enumerate(entries):
        assert f'id="frame-0-entry-{i}"' in page
        assert html.escape(e.graph_code) in page  # the readable code
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="graph"') == 2  # a picture per graph
    (failure,) = f.guard_failures()
    assert html.escape(failure.reason) in page  # the recompile, in words
    assert "tensor &#x27;x&#x27; size mismatch at dim 0: expected 8, actual 16" in page
    assert "<h4>Triton launches (1)</h4>" in page and "add_kernel" in page
    assert "x: tensor float32 cpu (8, 4) contiguous" in page.replace("</code></td><td>", ": ")
    # the recompiling call's line, highlighted among its neighbours
    assert re.search(r'<span class="hl"><i>\d+</i>\s*f\(torch.randn\(16, 4\)', page)
    for phase in ("trace", "guards and entry code"):
        assert f"{phase} (ms)" in page
    # phases add up to the compile time each entry reports
    for e in entries:
        assert e.phases and abs(sum(e.phases.values()) - e.compile_time_ms) < 0.5


def test_module_with_breaks_and_recompiles(tmp_path, capsys):
    net, rep = _module_run(tmp_path / "out")  # a directory: out/index.html
    assert rep.path == str(tmp_path / "out" / "index.html")
    page = open(rep.path, encoding="utf-8").read()
    _check_well_formed(page)
    _check_self_contained(page)
    assert capsys.readouterr().out.count("shape <b>&") == 4  # ran once per call, as eager
    frames = rep.recording.frames
    caches = {id(c) for c, _, _ in _entries(net._optimized._cache)}
    assert caches <= {id(fr.cache) for fr in frames}
    recorded = {id(e) for fr in frames for _, e in fr.entries}
    ids = {id(fr.cache): k for k, fr in enumerate(frames)}
    all_entries = _entries(net._optimized._cache)
    assert len(all_entries) >= 4
    for cache, i, e in all_entries:  # every entry of every frame and resume function
        assert id(e) in recorded
        assert f'id="frame-{ids[id(cache)]}-entry-{i}"' in page
        if e.graph_code is not None:
            assert html.escape(e.graph_code) in page
    breaks = [e for _, _, e in all_entries if e.break_reason is not None]
    assert breaks and page.count("<b>graph break</b> in") == len(breaks)
    # the break's user line is highlighted, escaped
    assert re.search(r'<span class="hl"><i>\d+</i>\s*print\(&quot;shape &lt;b&gt;&amp;&quot;, y.shape\)', page)
    assert "shape <b>" not in page
    # the module's own recompiles, and those of the frames it called (its forward, run as
    # a frame of its own where the wrapper broke) and their resume functions
    failures = [f for c in chain_caches(net._optimized._cache, "eager") for f in c.failures]
    assert len(failures) >= 2 and net.guard_failures()[0] in failures
    recompiles = re.findall(r'id="recompile-\d+"', page)
    recorded_failures = [f for _, f, _ in rep.recording.failures]
    assert len(recompiles) == len(recorded_failures)
    for failure in failures:  # every recompile, with its reason in words
        assert any(failure is f for f in recorded_failures)
        assert html.escape(failure.reason) in page
    assert "dtype mismatch: expected torch.float32, actual torch.float64" in page
    # how they chain: the function, its break, the resume function it continues in
    assert "continues in" in page and "resume function" in page


def test_everything_user_written_is_escaped(tmp_path):
    def weird(x):
        s = "<script>alert('x')</script>"
        print(s)
        return x + len(s)

    opt = minidynamo.optimize(weird)
    with minidynamo.report(tmp_path / "w.html") as rep:
        opt(torch.ones(2))
        opt(torch.ones(2, dtype=torch.float64))
    page = open(rep.path, encoding="utf-8").read()
    _check_well_formed(page)
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own fold/expand helper


def test_report_html_inside_block_and_nothing_recorded_outside(tmp_path):
    f = minidynamo.optimize(lambda x: x * 2)
    f(torch.ones(1))  # before the block: not in the report
    with minidynamo.report(tmp_path / "r.html") as rep:
        assert "Nothing was compiled" in rep.html()
        f(torch.ones(1, 2))
        assert 'id="frame-0-entry-1"' in rep.html()
    assert len(rep.recording.frames) == 1 and [i for i, _ in rep.recording.frames[0].entries] == [1]


def test_report_written_when_the_block_raises(tmp_path):
    f = minidynamo.optimize(lambda x: x.sum())
    with pytest.raises(ValueError):
        with minidynamo.report(tmp_path / "r.html"):
            f(torch.ones(3))
            raise ValueError("boom")
    assert "entry 0" in open(tmp_path / "r.html", encoding="utf-8").read()
    assert compile_report.recorders == []


def test_environment_variable_writes_the_page_at_exit(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch, minidynamo

        @minidynamo.optimize
        def scaled(x):
            y = x * 2
            print("between")
            return y + 1

        scaled(torch.ones(2))
        scaled(torch.ones(2, dtype=torch.float64))
    """))
    out = tmp_path / "report"
    env = dict(os.environ, MINIDYNAMO_REPORT=str(out),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text(encoding="utf-8")
    assert f"compile report written to {out / 'index.html'}" in proc.stderr
    assert "scaled" in page and "<b>graph break</b> in" in page and 'id="recompile-0"' in page


def test_big_graph_is_folded_and_drawn_sanely(tmp_path):
    def deep(x):
        for i in range(150):
            x = torch.relu(x * 1.01 + i)
        return x

    opt = minidynamo.optimize(deep)
    with minidynamo.report(tmp_path / "big.html") as rep:
        opt(torch.ones(4))
    page = open(rep.path, encoding="utf-8").read()
    (entry,) = opt.cache_entries()
    nodes = len(entry.gm.graph.nodes)
    assert nodes > 400
    assert f"<summary><b>picture of the graph</b> ({nodes} nodes)</summary>" in page
    assert f'<details><summary><b>picture of the graph</b> ({nodes} nodes)' in page  # folded
    assert re.search(r"<details><summary><b>graph code</b> \(\d+ lines", page)  # folded
    svg = graph_svg(entry.gm.graph)
    width, height = (int(v) for v in re.search(r'width="(\d+)" height="(\d+)"', svg).groups())
    assert width < 1000  # a chain draws as one column, not one row
    assert height < 80 * nodes


# --- the page in a real browser -------------------------------------------------------------
def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_pixels(path):
    """(width, height, rows of RGB(A) bytes, bytes per pixel) of an 8-bit PNG: zlib and the
    five row filters, enough for a browser's screenshot."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
        elif kind == b"IDAT":
            idat += body
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev, i = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def test_page_opens_in_headless_chromium(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("NO BROWSER: chromium not found on PATH, the report was not opened in a real browser "
                    "(install it with `apt-get install -y chromium`; .ci/run does)")
    _module_run(tmp_path / "page.html")
    url = (tmp_path / "page.html").resolve().as_uri()
    shot = tmp_path / "shot.png"
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "minidynamo compile report" in dom.stdout and 'id="recompile-0"' in dom.stdout
    proc = subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1000,700", url],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    width, height, rows, bpp = _png_pixels(shot)
    assert (width, height) == (1000, 700)
    pixels = [row[x:x + 3] for row in rows[::7] for x in range(0, width * bpp, bpp * 7)]
    colors = set(pixels)
    assert len(colors) > 40, "the screenshot is (nearly) blank"
    # the page's own header (dark blue, #233044) across the top: the page, not an error page
    header = rows[10]
    assert header[0:3] == b"\x23\x30\x44" and header[(width // 2) * bpp:(width // 2) * bpp + 3] == b"\x23\x30\x44"
    # and below it, the light page background with text on it
    light = sum(1 for p in pixels if min(p) > 235)
    assert light > len(pixels) // 3
