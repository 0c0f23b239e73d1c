"""The package's import graph, read from its source: which module imports which at the top
of the module (the layers) and which imports are still made inside functions (each closes
a real cycle), and a picture of the layers for docs/architecture.md.

    python tools/import_graph.py            # the layers, the cycles, the function-level imports
    python tools/import_graph.py --write    # regenerate docs/layers.svg

A module's layer is the length of its longest chain of top-level imports of the package's
own modules: layer 0 imports none of them, and every module imports only modules of lower
layers. tests/test_import_layers.py keeps the graph acyclic, the function-level imports
few, and the picture in step with the code.
"""
from __future__ import annotations

import ast
import functools
import html
import os
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "minidynamo"
PICTURE = os.path.join(ROOT, "docs", "layers.svg")


@dataclass
class ImportGraph:
    modules: dict  # dotted name -> path
    top: dict = field(default_factory=dict)  # module -> modules it imports at its top
    inner: dict = field(default_factory=dict)  # module -> [(module imported, line)] inside functions

    def cycles(self) -> list:
        """Strongly connected sets of modules of more than one, over top-level imports."""
        index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in self.top[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    found.append(sorted(scc))

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(self.modules)))
        for m in self.modules:
            if m not in index:
                visit(m)
        return found

    def layers(self) -> dict:
        """module -> its layer (the graph must be acyclic)."""
        @functools.lru_cache(maxsize=None)
        def layer(m):
            return 1 + max((layer(t) for t in self.top[m]), default=-1)
        return {m: layer(m) for m in self.modules}

    def inner_imports(self) -> list:
        return [(m, t, line) for m, items in sorted(self.inner.items()) for t, line in items]


def read(root: str = ROOT) -> ImportGraph:
    modules = {}
    base = os.path.join(root, PACKAGE)
    for dirpath, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                modules[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    graph = ImportGraph(modules)
    for name, path in modules.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        inside = set()
        graph.inner[name] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(node):
                    if isinstance(n, ast.ImportFrom) and n.level and id(n) not in inside:
                        inside.add(id(n))
                        graph.inner[name] += [(t, n.lineno) for t in _targets(name, path, n, modules)]
        graph.top[name] = {t for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level
                           and id(n) not in inside for t in _targets(name, path, n, modules)} - {name}
    return graph


def _targets(name: str, path: str, node: ast.ImportFrom, modules: dict) -> set:
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    base = ".".join(package[:len(package) - (node.level - 1)] + ([node.module] if node.module else []))
    found = set()
    for alias in node.names:  # `from . import x` imports the module x
        sub = f"{base}.{alias.name}"
        found.add(sub if sub in modules else base)
    return {t for t in found if t in modules}


def picture(graph: ImportGraph) -> str:
    """The layers as an SVG: the highest layer at the top, the lowest at the bottom; a
    layer wider than the picture takes several lines."""
    layers = graph.layers()
    rows: dict = {}
    for m, k in layers.items():
        rows.setdefault(k, []).append(m[len(PACKAGE) + 1:] or PACKAGE)
    char, box_h, row_h, gap, pad, left, max_w = 6.6, 22, 28, 8, 10, 40, 1000
    placed, lines = [], 0  # (line, x, name) per box; a layer wider than max_w wraps
    for k in sorted(rows, reverse=True):
        x, first = left, lines
        for n in sorted(rows[k]):
            w = len(n) * char + 12
            if x + w > left + max_w and x > left:
                lines, x = lines + 1, left
            placed.append((lines, x, w, n, k, first))
            x += w + gap
        lines += 1
    width, height = left + max_w + 2 * pad, 2 * pad + (lines - 1) * row_h + 6 * max(rows) + box_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           f'<rect width="{width:.0f}" height="{height}" fill="white"/>']
    seen = set()
    for line, x, w, n, k, first in placed:
        y = pad + line * row_h + 6 * (max(rows) - k)  # a little air between layers
        if k not in seen:
            seen.add(k)
            out.append(f'<text x="{pad}" y="{y + 15}" fill="#777">{k}</text>')
        area = n.split(".")[0] if "." in n else "package"
        fill, stroke = _COLORS.get(area, _COLORS["package"])
        out.append(f'<rect x="{x + pad:.0f}" y="{y}" width="{w:.0f}" height="{box_h}" rx="4" fill="{fill}" '
                   f'stroke="{stroke}"/><text x="{x + pad + 6:.0f}" y="{y + 15}">{html.escape(n)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


_COLORS = {"variables": ("#e4eefb", "#3b6fb6"), "interpreter": ("#f1e8fb", "#7a4bb0"),
           "triton": ("#fdf0e0", "#c07a20"), "package": ("#eeeeee", "#777777")}


def main(argv) -> int:
    graph = read()
    cycles = graph.cycles()
    if cycles:
        print("cycles among top-level imports:", *cycles, sep="\n  ")
        return 1
    if "--write" in argv:
        with open(PICTURE, "w", encoding="utf-8") as f:
            f.write(picture(graph))
        print("wrote", os.path.relpath(PICTURE, ROOT))
        return 0
    layers = graph.layers()
    for k in sorted(set(layers.values())):
        print(k, " ".join(sorted(m for m, v in layers.items() if v == k)))
    inner = graph.inner_imports()
    print(f"\n{len(inner)} imports of the package's own modules inside functions:")
    for m, t, line in inner:
        print(f"  {graph.modules[m][len(ROOT) + 1:]}:{line} -> {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
