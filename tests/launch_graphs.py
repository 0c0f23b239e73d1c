"""Graphs of Triton launches built by hand, as the trace makes them, and their code as an
entry runs it: the plain graph (launch nodes call their launchers) and the launch program
(triton/program.py). For launch-program tests and benchmarks that need a kind of graph
the trace does not make yet (grids and sizes as values of the graph)."""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

NAMES = ("x_ptr", "y_ptr", "out_ptr", "n")


def chain_graph(add, *, launches: int = 3, dynamic: bool = True, size: int = 300, device: str = "cpu",
                block: int = 64, tuned=None, setup=None):
    """(graph, kernel table) of ``x = a; for each launch: t = empty_like(a); add(x, b, t, n); x = t``,
    returning x. `dynamic`: a's size is symbolic, `n = a.numel()` and the grids are graph
    values, launchers take the grid per call; else everything is fixed for `size`. The
    middle launch uses `tuned` (an autotuned add) where given. `setup(launcher)` is called
    on each launcher made."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from minidynamo.dynamic import new_shape_env, symbolic_fake
    from minidynamo.triton.capture import KernelTable, LaunchRecord
    if dynamic:
        env = new_shape_env()
        mode = FakeTensorMode(shape_env=env, static_shapes=False)
        fa = symbolic_fake(mode, torch.randn(size, device=device), (True,), 0)
        fb = symbolic_fake(mode, torch.randn(size, device=device), (True,), 1)
    else:
        mode = FakeTensorMode()
        fa, fb = (mode.from_tensor(torch.randn(size, device=device)) for _ in range(2))
    g, table = fx.Graph(), KernelTable()

    def node(op, target, args, val, kwargs=None):
        n = g.create_node(op, target, args, kwargs or {})
        n.meta.update(val=val, writes=(), aliases=())
        return n
    a, b = g.placeholder("a"), g.placeholder("b")
    a.meta["val"], b.meta["val"] = fa, fb
    n = node("call_method", "numel", (a,), fa.numel()) if dynamic else size

    def blocks(bl):
        if not dynamic:
            return -(-size // bl)
        up = node("call_function", operator.add, (n, bl - 1), fa.numel() + bl - 1)
        return node("call_function", operator.floordiv, (up, bl), (fa.numel() + bl - 1) // bl)

    def launch(kernel, x, out):
        configs = getattr(kernel, "configs", None)
        constants = {} if configs else {"BLOCK": block}
        grids = [(blocks(c.kwargs["BLOCK"]), 1, 1) for c in configs] if configs else [(blocks(block), 1, 1)]
        if dynamic:
            record = LaunchRecord(kernel, "add", None, constants, NAMES, grid_per_call=True)
        else:
            if configs:
                raise ValueError("a pinned autotuned launch needs a ConfigGrid")
            record = LaunchRecord(kernel, "add", grids[0], {**constants, "n": size}, NAMES[:3])
        idx = table.add(record)
        if setup is not None:
            setup(record.launcher())
        args = {"x_ptr": x, "y_ptr": b, "out_ptr": out, "n": n, **constants}
        node("call_function", table.wrapper, (), None, {"kernel_idx": idx, "grid": grids, "kwargs": args})

    with mode:
        like = torch.empty_like(fa)
    x = a
    for i in range(launches):
        t = node("call_function", torch.empty_like, (a,), like)
        launch(tuned if tuned is not None and i == launches // 2 else add, x, t)
        x = t
    g.output((x,))
    return g, table


def _entry_parts(graph):
    from minidynamo.sources import Namespace
    names = {}

    def var_name(n):
        return names.setdefault(n, n.name)
    inputs = {n: n.name for n in graph.nodes if n.op == "placeholder"}
    out = next(n for n in graph.nodes if n.op == "output").args[0][0]
    return Namespace("_md_"), var_name, inputs, f"    return {var_name(out)}"


def plain_function(graph):
    """The graph's code as the eager backend inlines it: launch nodes call their launchers."""
    from minidynamo import codegen
    from minidynamo.triton.capture import direct_launch_nodes
    ns, var_name, inputs, ret = _entry_parts(graph)
    with direct_launch_nodes(graph):
        lines = codegen.graph_lines(graph, ns, inputs, var_name)
    return codegen.build_function("plain", "a, b", [*("    " + x for x in lines), ret], ns, "<plain>")[0]


def program_function(graph):
    """(launch program, its source), once the launchers resolved: the program returns None
    when the global state it was built for changed."""
    from minidynamo import codegen
    from minidynamo.triton.program import program_lines
    ns, var_name, inputs, ret = _entry_parts(graph)
    lines, builder = program_lines(graph, ns, inputs, var_name)
    if lines is None:
        raise AssertionError(builder)
    body = [f"    if {builder.conds}:", "        return None", *("    " + x for x in lines), ret]
    return codegen.build_function("program", "a, b", body, ns, "<program>")
