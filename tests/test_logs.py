"""Logging channels under minidynamo.*: what each one says, switched on by set_logs() or
MINIDYNAMO_LOGS, and nothing (not even a per-instruction check) when they are off."""
import logging
import os
import subprocess
import sys

import pytest
import torch

import minidynamo
from kernels import capture_kernels as K
from minidynamo.interpreter import translator
from minidynamo.logs import CHANNELS, OFF, get_logger

ROOT = os.path.dirname(os.path.dirname(minidynamo.__file__))


@pytest.fixture(autouse=True)
def _restore_levels():
    saved = {ch: get_logger(ch).level for ch in CHANNELS}
    saved_parent = logging.getLogger("minidynamo").level
    yield
    for ch, level in saved.items():
        get_logger(ch).setLevel(level)
    logging.getLogger("minidynamo").setLevel(saved_parent)


def helper(t):
    return t * 2


def f(x):
    return helper(x) + 1


def _messages(caplog, channel):
    return [r.getMessage() for r in caplog.records if r.name == f"minidynamo.{channel}"]


def test_recompiles_channel(caplog):
    minidynamo.set_logs("recompiles")
    opt = minidynamo.optimize(f)
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("recompiles")
        opt(torch.ones(3))
        opt(torch.ones(4))
    where = f"{__file__}:{f.__code__.co_firstlineno}"
    assert _messages(caplog, "recompiles") == [
        f"recompiling f ({where}): tensor 'x' size mismatch at dim 0: expected 3, actual 4 [guard TENSOR_MATCH x]"]
    assert _messages(caplog, "recompiles") == [opt.guard_failures()[0].message()]
    assert _messages(caplog, "graph") == [] and _messages(caplog, "trace") == []


def test_recompiles_debug_shows_the_guard(caplog):
    opt = minidynamo.optimize(f)
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("+recompiles")
        opt(torch.ones(3))
        opt(torch.ones(4))
    msgs = _messages(caplog, "recompiles")
    assert len(msgs) == 2 and msgs[1].startswith("  failing guard of entry 0: type(x) is ")


def test_guards_graph_fallbacks_channels(caplog):
    def g(x):
        y = x
        try:  # the frame cannot break inside a try: the call runs eagerly
            print("side effect")
        finally:
            pass
        return y

    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("guards", "graph", "fallbacks")
        minidynamo.optimize(f)(torch.ones(3))
        minidynamo.optimize(g)(torch.ones(3))
    where = f"{__file__}:{f.__code__.co_firstlineno}"
    guards = _messages(caplog, "guards")
    assert guards[0].splitlines()[0] == f"guards of f ({where}), entry 0:"
    assert "  global 'helper': _md_G_test_logs['helper'] is _md_helper" in guards[0].splitlines()
    (graph,) = _messages(caplog, "graph")
    assert graph.splitlines()[:2] == [f"graph of f ({where}), entry 0:", "def forward(self, x):"]
    (fallback,) = _messages(caplog, "fallbacks")
    line = g.__code__.co_firstlineno + 3
    assert fallback == (f"g ({__file__}:{g.__code__.co_firstlineno}) runs eagerly: [side_effect] print() "
                        f"writes output (at {__file__}:{line}: print(\"side effect\"))\n"
                        f"  hint: {minidynamo.exc.HINTS['side_effect']}")


def test_graph_breaks_channel(caplog):
    def g(x):
        y = x + 1
        print("side effect")
        return y * 2

    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("graph_breaks", "fallbacks")
        opt = minidynamo.optimize(g)
        opt(torch.ones(3))
        opt(torch.ones(3))  # a cache hit logs nothing
    (resume,) = opt.cache_entries()[0].resumes
    line = g.__code__.co_firstlineno + 2
    assert _messages(caplog, "graph_breaks") == [
        f"graph break in g ({__file__}:{g.__code__.co_firstlineno}): [side_effect] print() writes output "
        f"(at {__file__}:{line}: print(\"side effect\"))\n"
        f"  the graph runs, then the instruction natively, then {resume.__name__}"]
    assert _messages(caplog, "fallbacks") == []  # a break is not a fallback


def test_graph_debug_shows_the_entry(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("+graph")
        minidynamo.optimize(f)(torch.ones(3))
    msgs = _messages(caplog, "graph")
    assert len(msgs) == 2 and msgs[1].splitlines()[1] == "def f(x):"


def test_bytecode_channel(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("+bytecode")
        minidynamo.optimize(f)(torch.ones(3))
    msgs = _messages(caplog, "bytecode")
    assert [m.splitlines()[0] for m in msgs] == [
        f"f ({__file__}:{f.__code__.co_firstlineno}), normalized:",
        f"helper ({__file__}:{helper.__code__.co_firstlineno}), normalized:"]
    body = msgs[0].splitlines()[1:]
    assert "LOAD_GLOBAL (" in body[0] and "'helper')" in body[0]  # push-NULL flag differs by version
    assert body[-1].endswith("RETURN_VALUE 0")


def test_bytecode_info_level_is_silent(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("bytecode")  # its detail is debug only
        minidynamo.optimize(f)(torch.ones(3))
    assert _messages(caplog, "bytecode") == []


def test_trace_channel_calls(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("trace")
        minidynamo.optimize(f)(torch.ones(3))
    msgs = _messages(caplog, "trace")
    assert msgs == [
        f"trace f ({__file__}:{f.__code__.co_firstlineno}), 6 instructions",
        f"  inline helper ({__file__}:{helper.__code__.co_firstlineno}), 4 instructions",
        "  helper returned tensor mul (3,) after 4 instructions (graph: 1 ops)",
        "f returned tensor add (3,) after 10 instructions (graph: 2 ops)",
    ]


def test_trace_channel_instructions(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("+trace")
        minidynamo.optimize(f)(torch.ones(3))
    msgs = _messages(caplog, "trace")
    per_inst = [m for m in msgs if " stack [" in m]
    assert len(per_inst) == 10
    line = f.__code__.co_firstlineno + 1
    assert per_inst[0].startswith(f"f:{line} LOAD_GLOBAL (") and per_inst[0].endswith("'helper')  stack []")
    # 3.10 has no NULL; it goes below the callable on 3.11/3.12, above it on 3.13
    assert per_inst[2] in (f"f:{line} CALL 1  stack [null, function 'helper', tensor x (3,)]",
                           f"f:{line} CALL 1  stack [function 'helper', null, tensor x (3,)]",
                           f"f:{line} CALL_FUNCTION 1  stack [function 'helper', tensor x (3,)]")
    assert per_inst[3].startswith(f"  helper:{helper.__code__.co_firstlineno + 1} LOAD_FAST 't'")


def test_trace_stopped_by_a_fallback(caplog):
    def g(x):
        y = x
        try:
            print("no")  # inside a try: the frame cannot break
        finally:
            pass
        return y

    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("trace")
        minidynamo.optimize(g)(torch.ones(3))
    msgs = _messages(caplog, "trace")
    assert msgs[-1].startswith("g stopped after ")
    # Every "stopped" line names the reason, or (a trace restarted to make a graph break
    # there, which then could not be: the print is inside a try block) the restart.
    stopped = [m for m in msgs if m.startswith("g stopped after ")]
    assert stopped and ": [side_effect] print() writes output (at " in stopped[0], msgs
    assert all(": [side_effect] print() writes output (at " in m or
               m.endswith("stopped just before the instruction the graph breaks at") for m in stopped), msgs


def test_trace_stopped_by_a_break(caplog):
    def g(x):
        y = x + 1
        print("no")
        return y * 2

    with caplog.at_level(logging.DEBUG, logger="minidynamo"):
        minidynamo.set_logs("trace")
        minidynamo.optimize(g)(torch.ones(3))
    msgs = _messages(caplog, "trace")
    stopped = [m for m in msgs if m.startswith("g stopped after ")]
    where = f"{__file__}:{g.__code__.co_firstlineno + 2}: print(\"no\")"
    assert stopped and stopped[0].endswith(f": [side_effect] print() writes output (at {where})"), stopped
    # the restarted trace stops where the graph breaks
    assert all(m.endswith("stopped just before the instruction the graph breaks at") for m in stopped[1:])
    assert msgs[-1].startswith("g returned tensor ")  # the resume function, traced to its end


def test_off_means_no_per_trace_logging_state(monkeypatch):
    minidynamo.set_logs()
    assert translator._TraceLogs.if_enabled() is None
    seen = []
    monkeypatch.setattr(translator, "_logged_dispatch", lambda cls: seen.append(cls) or cls.dispatch)
    minidynamo.optimize(f)(torch.ones(3))
    assert seen == []
    minidynamo.set_logs("trace")
    logs = translator._TraceLogs.if_enabled()
    assert logs is not None and logs.calls and not logs.instructions and not logs.bytecode


def test_set_logs_forms():
    minidynamo.set_logs(recompiles=True, trace="debug")
    assert get_logger("recompiles").level == logging.INFO and get_logger("trace").level == logging.DEBUG
    assert get_logger("graph").level == OFF
    minidynamo.set_logs("+all")
    assert all(get_logger(ch).level == logging.DEBUG for ch in CHANNELS)
    minidynamo.set_logs()
    assert all(get_logger(ch).level == OFF for ch in CHANNELS)
    with pytest.raises(ValueError, match="unknown minidynamo log channel 'recompile'"):
        minidynamo.set_logs("recompile")


@pytest.mark.parametrize("channels", [(), ("recompiles",), ("graph",)])
def test_cache_limit_warning_is_a_warning_and_logged_with_recompiles_on(caplog, channels):
    minidynamo.config.cache_size_limit = 1
    opt = minidynamo.optimize(lambda x, k: x * k)
    minidynamo.set_logs(*channels)
    with caplog.at_level(logging.WARNING), pytest.warns(RuntimeWarning, match="reached cache_size_limit"):
        opt(torch.ones(2), 1)
        opt(torch.ones(2), 2)
    msgs = _messages(caplog, "recompiles")
    if channels == ("recompiles",):
        (msg,) = msgs
        assert "reached cache_size_limit (1); the guard that keeps failing: EQUALS_MATCH on k" in msg
    else:
        assert msgs == []


def _everything(x, k):
    """A trace, an inlined call, a Triton launch, then (below) a recompile, a fallback and
    the cache-size limit: each would log if its channel were on."""
    o = torch.empty_like(x)
    K.add_kernel[(1,)](x, x, o, x.numel(), BLOCK=16)
    return helper(o) * k


def _chatty(x):
    print("eager")
    return x


def test_logs_off_emit_no_record_even_with_root_at_debug(capsys):
    minidynamo.set_logs()
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    minidynamo.config.cache_size_limit = 2
    try:
        opt = minidynamo.optimize(_everything, dynamic=False)  # an entry per value of k
        with pytest.warns(RuntimeWarning, match="reached cache_size_limit"):
            for k in (1, 2, 3):
                opt(torch.ones(8, device=K.DEVICE), k)
        minidynamo.optimize(_chatty)(torch.ones(2))
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
    assert [r for r in records if r.name.startswith("minidynamo")] == []
    assert len(opt.cache_entries()) == 2 and capsys.readouterr().out == "eager\n"


def test_basic_config_at_debug_prints_nothing_of_minidynamo(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import logging, warnings, torch, minidynamo\n"
                      "logging.basicConfig(level=logging.DEBUG)\n"
                      "minidynamo.config.cache_size_limit = 1\n"
                      "@minidynamo.optimize\n"
                      "def f(x):\n"
                      "    return x + 1\n"
                      "f(torch.ones(2)); f(torch.ones(3)); f(torch.ones(4))\n"
                      "minidynamo.optimize(lambda x: print('eager') or x)(torch.ones(2))\n")
    env = {k: v for k, v in os.environ.items() if k != "MINIDYNAMO_LOGS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          check=True, timeout=120)
    assert proc.stdout == "eager\n"
    assert ":minidynamo" not in proc.stderr, proc.stderr  # basicConfig's LEVEL:name:message
    # the cache-size limit still reaches the user, once, as a warning
    assert proc.stderr.count("reached cache_size_limit (1)") == 1, proc.stderr
    assert "RuntimeWarning: minidynamo: f (" in proc.stderr


def test_env_variable(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import torch, minidynamo\n"
                      "@minidynamo.optimize\n"
                      "def f(x):\n"
                      "    return x + 1\n"
                      "f(torch.ones(2)); f(torch.ones(3))\n")
    env = dict(os.environ, MINIDYNAMO_LOGS="recompiles,+bytecode",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    err = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         check=True).stderr
    assert (f"[minidynamo.recompiles] recompiling f ({script}:2): tensor 'x' size mismatch at dim 0: "
            "expected 2, actual 3 [guard TENSOR_MATCH x]") in err
    assert f"[minidynamo.bytecode] f ({script}:2), normalized:" in err
    assert "[minidynamo.graph]" not in err
