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
    return text if len(text) <= limit else text[:limit - 1] + "…"


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


def _kind(node) -> str:
    if node.op == "call_function" and getattr(node.target, "__name__", "").startswith("triton_kernel_wrapper"):
        return "triton"
    return node.op


def _layers(nodes) -> dict:
    """node -> layer: its longest path from an input, inputs just above their first user."""
    layer = {}
    for n in nodes:
        ins = n.all_input_nodes
        layer[n] = 1 + max((layer[p] for p in ins), default=-1)
    for n in reversed(nodes):
        if not n.all_input_nodes and n.users:
            layer[n] = max(0, min(layer[u] for u in n.users) - 1)
    return layer


def graph_svg(graph, kernels=None) -> str:
    """The SVG of `graph` (an fx.Graph), or a short note when it is too large to draw."""
    nodes = list(graph.nodes)
    if not nodes:
        return '<p class="note">(empty graph)</p>'
    if len(nodes) > MAX_NODES:
        return (f'<p class="note">{len(nodes)} nodes: too many to draw (more than {MAX_NODES}); '
                'the code lists every one.</p>')
    layer = _layers(nodes)
    rows: dict = {}
    for n in nodes:
        rows.setdefault(layer[n], []).append(n)
    labels = {n: (_short(f"{n.name}: {target_name(n, kernels)}" if n.op != "placeholder" else n.name),
                  _short(value_text(n))) for n in nodes}
    width = {n: max(56.0, _CHAR * max(len(a), len(b)) + 16) for n, (a, b) in labels.items()}
    center: dict = {}
    for r in sorted(rows):
        row = rows[r]
        wanted = {}
        for i, n in enumerate(row):
            ins = [center[p] for p in n.all_input_nodes if p in center]
            users = [u for u in n.users if u in center]
            wanted[n] = sum(ins) / len(ins) if ins else (center[users[0]] if users else i * 120.0)
        row.sort(key=lambda n: wanted[n])
        right = 10.0
        for n in row:
            left = max(right, wanted[n] - width[n] / 2)
            center[n] = left + width[n] / 2
            right = left + width[n] + _GAP
    total_w = int(max(center[n] + width[n] / 2 for n in nodes) + 12)
    total_h = int((max(rows) + 1) * _ROW + 10)
    top = {n: 10 + layer[n] * _ROW for n in nodes}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{total_w}" height="{total_h}" '
             f'viewBox="0 0 {total_w} {total_h}" font-family="monospace" font-size="11">',
             '<g fill="none" stroke="#8a94a6" stroke-width="1.1" stroke-opacity="0.8">']
    for n in nodes:
        for p in dict.fromkeys(n.all_input_nodes):
            x1, y1 = center[p], top[p] + _BOX_H
            x2, y2 = center[n], top[n] - 1
            bend = max(18.0, (y2 - y1) / 2)
            parts.append(f'<path d="M{x1:.1f},{y1} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
                         f'{x2:.1f},{y2}" marker-end="url(#md-arrow)"/>')
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
