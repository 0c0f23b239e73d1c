"""A picture of a torch.fx graph as inline SVG, for the compile report (compile_report.py).

No graphviz: a layered layout computed here. A node's layer is its longest path from the
graph's inputs; inputs and attributes are pulled down to just above their first user (a
model's hundreds of parameters would otherwise fill one row); within a layer, nodes sit
near the mean position of their inputs, so chains draw straight. Edges are curves from
an input's bottom to a user's top, drawn under the boxes. Every text is escaped.
"""
from __future__ import annotations

import html
import operator

import torch

MAX_NODES = 3000  # above this the picture is left out (the code lists every node)
_ROW = 64  # layer pitch
_BOX_H = 34
_GAP = 14  # between boxes of a layer
_CHAR = 6.6  # width of a character of the 11px monospace font
_MAX_LABEL = 34
_WAYPOINT_W = 6.0  # the slot a long edge takes in a row it crosses

# (fill, stroke) per node kind
_COLORS = {
    "placeholder": ("#e3f4e1", "#3d8b37"),
    "get_attr": ("#eeeeee", "#777777"),
    "call_function": ("#e4eefb", "#3b6fb6"),
    "call_method": ("#e8f6fb", "#2c8aa8"),
    "call_module": ("#f1e8fb", "#7a4bb0"),
    "output": ("#fdeedd", "#c77418"),
    "triton": ("#fde4e4", "#c0392b"),
}

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
            operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
            operator.neg: "neg", operator.getitem: "[ ]", operator.lt: "<", operator.le: "<=",
            operator.gt: ">", operator.ge: ">=", operator.eq: "==", operator.ne: "!="}


# Once per page, outside any folded section (a marker inside a closed <details> would not draw).
SVG_DEFS = ('<svg width="0" height="0" style="position:absolute"><defs><marker id="md-arrow" '
            'viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">'
            '<path d="M0,0 L8,4 L0,8 z" fill="#8a94a6"/></marker></defs></svg>')


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def _short(text: str, limit: int = _MAX_LABEL) -> str:
    """Cut in the middle: a parameter's path differs at its end (`..._attn_c_attn_weight`)."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "…" + text[len(text) - (limit - head - 1):]


def target_name(node, kernels=None) -> str:
    """What a node does, in a few characters: `torch.relu`, `.view`, `+`, `triton add_kernel`."""
    if node.op == "call_function":
        t = node.target
        if t in _SYMBOLS:
            return _SYMBOLS[t]
        name = getattr(t, "__name__", None) or type(t).__name__
        if name.startswith("triton_kernel_wrapper"):
            return "triton " + _kernel_name(node, kernels)
        module = getattr(t, "__module__", None) or ""
        if module.startswith("torch") and not module.startswith("torch._ops"):
            return f"torch.{name}" if module in ("torch", "torch._C._VariableFunctions") else name
        return name
    if node.op == "call_method":
        return f".{node.target}"
    if node.op in ("call_module", "get_attr"):
        return str(node.target)
    return node.op


def _kernel_name(node, kernels) -> str:
    index = node.kwargs.get("kernel_idx")
    records = getattr(kernels, "records", None)
    if records is not None and isinstance(index, int) and 0 <= index < len(records):
        return records[index].name
    return "kernel"


def value_text(node) -> str:
    """`f32[8, 4]` for a tensor-valued node, the value of a size, else ''."""
    val = node.meta.get("val", node.meta.get("example_value"))
    if isinstance(val, torch.Tensor):
        dtype = str(val.dtype).removeprefix("torch.")
        short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
                 "int64": "i64", "int32": "i32", "bool": "bool"}.get(dtype, dtype)
        return f"{short}[{', '.join(str(s) for s in val.shape)}]"
    if isinstance(val, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return str(val)
    if isinstance(val, (tuple, list)) and val:
        return f"{type(val).__name__} of {len(val)}"
    return ""


def _label(node, kernels) -> str:
    """`name: what it does`; where that is too long, what it does (the name is in the tooltip)."""
    if node.op in ("placeholder", "output"):
        return _short(node.name)
    what = target_name(node, kernels)
    full = f"{node.name}: {what}"
    return full if len(full) <= _MAX_LABEL else _short(what)


class _Waypoint:
    """Where a long edge crosses a layer; `prev`: the waypoint or node above it."""
    __slots__ = ("prev",)

    def __init__(self, prev):
        self.prev = prev


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    """A cubic from (x1, y1) down to (x2, y2), leaving and arriving vertically."""
    bend = max(12.0, (y2 - y1) / 2)
    return f"C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2}"


def _is_launch(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__name__", "").startswith("triton_kernel_wrapper")


def _kind(node) -> str:
    """The node's colour class: fx's op, or a Triton launch."""
    return "triton" if _is_launch(node) else node.op


def _layers(nodes, inputs) -> dict:
    """node -> layer: its longest path from an input, inputs just above their first user."""
    layer = {}
    for n in nodes:
        layer[n] = 1 + max((layer[p] for p in inputs[n]), default=-1)
    users: dict = {}
    for n in nodes:
        for p in inputs[n]:
            users.setdefault(p, []).append(n)
    for n in reversed(nodes):
        if not inputs[n] and users.get(n):
            layer[n] = max(0, min(layer[u] for u in users[n]) - 1)
    return layer


def _after_writes(nodes, kernels) -> dict:
    """node -> the Triton launches it must follow: it reads a tensor a launch before it
    wrote (drawn dashed: an order the data edges alone do not show)."""
    records = getattr(kernels, "records", None) or []
    after: dict = {}
    written: dict = {}  # tensor node -> the launch that wrote it last
    for n in nodes:
        for p in n.all_input_nodes:
            if p in written and written[p] is not n:
                after.setdefault(n, []).append(written[p])
        if _is_launch(n):
            index, args = n.kwargs.get("kernel_idx"), n.kwargs.get("kwargs") or {}
            record = records[index] if isinstance(index, int) and index < len(records) else None
            names = record.written_tensors() if record is not None else None
            for name, value in args.items():
                if hasattr(value, "op") and (names is None or name in names):
                    written[value] = n
    return after


def graph_svg(graph, kernels=None) -> str:
    """The SVG of `graph` (an fx.Graph), or a short note when it is too large to draw."""
    nodes = list(graph.nodes)
    if not nodes:
        return '<p class="note">(empty graph)</p>'
    if len(nodes) > MAX_NODES:
        return (f'<p class="note">{len(nodes)} nodes: too many to draw (more than {MAX_NODES}); '
                'the code lists every one.</p>')
    after = _after_writes(nodes, kernels)
    inputs = {n: list(dict.fromkeys([*n.all_input_nodes, *after.get(n, ())])) for n in nodes}
    layer = _layers(nodes, inputs)
    rows: dict = {}
    for n in nodes:
        rows.setdefault(layer[n], []).append(n)
    # An edge over several layers passes through a waypoint in each layer between: a slot of
    # its own in that row, so it goes around the boxes there instead of under them.
    above = {n: [] for n in nodes}  # what an item's edges come from, one layer up
    edges = []  # (input, node, waypoints)
    for n in nodes:
        for p in inputs[n]:
            prev, points = p, []
            for r in range(layer[p] + 1, layer[n]):
                point = _Waypoint(prev)
                rows[r].append(point)
                points.append(point)
                prev = point
            above[n].append(prev)
            edges.append((p, n, points, p in after.get(n, ()) and p not in n.all_input_nodes))
    labels = {n: (_label(n, kernels), _short(value_text(n))) for n in nodes}
    width = {n: max(56.0, _CHAR * max(len(a), len(b)) + 16) for n, (a, b) in labels.items()}
    center: dict = {}
    for r in sorted(rows):
        row = rows[r]
        wanted = {}
        for i, n in enumerate(row):
            if isinstance(n, _Waypoint):
                wanted[n] = center[n.prev]
                continue
            ins = [center[p] for p in above[n] if p in center]
            users = [u for u in n.users if u in center]
            wanted[n] = sum(ins) / len(ins) if ins else (center[users[0]] if users else i * 120.0)
        row.sort(key=lambda n: wanted[n])
        right = 10.0
        for n in row:
            w = width.get(n, _WAYPOINT_W)
            left = max(right, wanted[n] - w / 2)
            center[n] = left + w / 2
            right = left + w + _GAP
    total_w = int(max(center[n] + width.get(n, _WAYPOINT_W) / 2 for row in rows.values() for n in row) + 12)
    total_h = int((max(rows) + 1) * _ROW + 10)
    top = {n: 10 + layer[n] * _ROW for n in nodes}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{total_w}" height="{total_h}" '
             f'viewBox="0 0 {total_w} {total_h}" font-family="monospace" font-size="11">',
             '<g fill="none" stroke="#8a94a6" stroke-width="1.1" stroke-opacity="0.8">']
    for p, n, points, order_only in edges:
        x, y = center[p], top[p] + _BOX_H
        d = [f"M{x:.1f},{y}"]
        for r, point in enumerate(points, layer[p] + 1):  # down through each waypoint's row
            x2, y2 = center[point], 10 + r * _ROW
            d.append(_curve(x, y, x2, y2) + f" L{x2:.1f},{y2 + _BOX_H}")
            x, y = x2, y2 + _BOX_H
        d.append(_curve(x, y, center[n], top[n] - 1))
        dash = ' stroke-dasharray="4 3" stroke="#c0392b"' if order_only else ""
        parts.append(f'<path d="{" ".join(d)}"{dash} marker-end="url(#md-arrow)"/>')
    parts.append("</g>")
    for n in nodes:
        fill, stroke = _COLORS.get(_kind(n), _COLORS["call_function"])
        x, y, w = center[n] - width[n] / 2, top[n], width[n]
        first, second = labels[n]
        tip = f"{n.format_node()}" + (f"\n{value_text(n)}" if value_text(n) else "")
        parts.append(f'<g class="node"><title>{esc(tip)}</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{_BOX_H}" rx="5" fill="{fill}" '
                     f'stroke="{stroke}"/>'
                     f'<text x="{center[n]:.1f}" y="{y + 14}" text-anchor="middle">{esc(first)}</text>'
                     + (f'<text x="{center[n]:.1f}" y="{y + 27}" text-anchor="middle" fill="#555">{esc(second)}</text>'
                        if second else "") + "</g>")
    parts.append("</svg>")
    return "".join(parts)
