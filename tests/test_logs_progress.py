"""Log channels a torch.compile user reaches for: torch's channel names, a graph break said
once however often the function recompiles, and a line for a compile that takes long."""
import logging
import time

import pytest
import torch

import minidynamo
from minidynamo import logs
from minidynamo.logs import CHANNELS, get_logger


@pytest.fixture(autouse=True)
def _restore_levels():
    saved = {ch: get_logger(ch).level for ch in CHANNELS}
    saved_parent = logging.getLogger("minidynamo").level
    yield
    for ch, level in saved.items():
        get_logger(ch).setLevel(level)
    logging.getLogger("minidynamo").setLevel(saved_parent)


def _messages(caplog, channel):
    return [r.getMessage() for r in caplog.records if r.name == f"minidynamo.{channel}"]


@pytest.mark.parametrize("torch_name, channel, level", [
    ("graph_code", "graph", logging.INFO), ("recompiles_verbose", "recompiles", logging.DEBUG),
    ("recompiles", "recompiles", logging.INFO), ("graph_breaks", "graph_breaks", logging.INFO),
    ("guards", "guards", logging.INFO)])
def test_torch_channel_names_are_taken(torch_name, channel, level):
    minidynamo.set_logs(torch_name)
    assert get_logger(channel).level == level
    assert all(get_logger(c).level == logs.OFF for c in CHANNELS if c != channel)


def test_graph_code_logs_the_graph(caplog):
    minidynamo.set_logs("graph_code")
    opt = minidynamo.optimize(lambda x: x.relu() + 1)
    x = torch.randn(3)
    with caplog.at_level(logging.INFO, logger="minidynamo"):
        torch.testing.assert_close(opt(x), x.relu() + 1)
    (msg,) = _messages(caplog, "graph")
    assert "relu" in msg


def test_an_unknown_name_lists_torch_names_too():
    with pytest.raises(ValueError, match="torch's names graph_code, recompiles_verbose"):
        minidynamo.set_logs("graph_cod")


def breaks_on_item(x, k):
    y = x * k
    n = y.sum().item()  # a graph break
    return y + n


def test_a_graph_break_is_logged_once_across_recompiles(caplog):
    minidynamo.set_logs("graph_breaks")
    opt = minidynamo.optimize(breaks_on_item, dynamic=False)
    with caplog.at_level(logging.INFO, logger="minidynamo"):
        for k in (1.5, 2.5, 3.5):  # a float argument: a recompile each time
            x = torch.ones(2)
            torch.testing.assert_close(opt(x, k), breaks_on_item(x, k))
    assert len(opt.cache_entries()) == 3
    breaks = _messages(caplog, "graph_breaks")
    assert len(breaks) == 1, breaks
    assert ".item()" in breaks[0] or "item" in breaks[0]


@pytest.fixture
def quick_progress(monkeypatch):
    monkeypatch.setattr(logs, "PROGRESS_AFTER_S", 0.05)


def test_a_long_compile_says_so_and_its_time(caplog, quick_progress):
    minidynamo.set_logs("progress")

    def slow_backend(gm, example_inputs):
        time.sleep(0.5)
        return gm.forward
    opt = minidynamo.optimize(lambda x: x + 1, backend=slow_backend)
    x = torch.ones(2)
    with caplog.at_level(logging.INFO, logger="minidynamo"):
        torch.testing.assert_close(opt(x), x + 1)
    lines = _messages(caplog, "progress")
    assert len(lines) == 2, lines
    assert lines[0].startswith("still compiling fn_lambda (") and "slow_backend')" in lines[0]
    assert lines[1].startswith("compiled fn_lambda (") and lines[1].endswith(" s")


def test_a_quick_compile_says_nothing(caplog, quick_progress):
    minidynamo.set_logs("progress")
    opt = minidynamo.optimize(lambda x: x - 1)
    x = torch.ones(2)
    with caplog.at_level(logging.INFO, logger="minidynamo"):
        torch.testing.assert_close(opt(x), x - 1)
    assert _messages(caplog, "progress") == []


def test_off_and_no_terminal_no_watch():
    minidynamo.set_logs()
    assert logs.compile_watch.begin(lambda: "never named") is None  # pytest's stderr is no tty
