"""transformers' `logger.warning_once(msg)` (an lru_cache on logging.Logger over a method that
logs): traced without a graph break, the call made after the graph, so the message is
logged exactly when eager logs it (the first time it is seen in the process)."""
from __future__ import annotations

import functools
import logging
import types

import pytest
import torch

import minidynamo
from helpers import CountingBackend


def _install():
    """A `Logger.warning_once` as transformers.utils.logging defines it (module named so)."""
    def warning_once(self, *args, **kwargs):
        self.warning(*args, **kwargs)

    warning_once.__module__ = "transformers.utils.logging"
    once = functools.lru_cache(None)(warning_once)
    logging.Logger.warning_once = once
    return once


@pytest.fixture
def logger():
    once = _install()
    log = logging.getLogger("minidynamo_test_logged_once")
    log.propagate = False
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    log.records = records
    yield log
    log.removeHandler(handler)
    once.cache_clear()
    del logging.Logger.warning_once


def test_warning_once_keeps_one_graph_and_logs_once(logger):
    def f(x, flag):
        y = x * 2
        logger.warning_once("deprecated flag")
        return y + 1 if flag else y

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(opt(x, True), x * 2 + 1)
    assert logger.records == ["deprecated flag"]
    torch.testing.assert_close(opt(x, True), x * 2 + 1)
    assert logger.records == ["deprecated flag"]  # the lru_cache: once per process, as eager
    assert backend.calls == 1
    assert [e.kind for e in opt.cache_entries()] == ["graph"]
    logging.Logger.warning_once.cache_clear()
    opt(x, True)
    assert logger.records == ["deprecated flag"] * 2  # the call is made on every call


def test_the_order_with_the_functions_output_is_eager_order(logger):
    def f(x):
        logger.warning_once("first")
        logger.warning_once("second %s", 3)
        logger.warning_once("first")
        return x + 1

    opt = minidynamo.optimize(f, backend=CountingBackend())
    opt(torch.randn(2))
    eager = list(logger.records)
    assert eager == ["first", "second 3"]


def test_a_message_computed_from_a_tensor_breaks(logger):
    def f(x):
        logger.warning_once(x)  # eager: lru_cache hashes the tensor; not a constant here
        return x + 1

    opt = minidynamo.optimize(f, backend=CountingBackend())
    x = torch.randn(2)
    torch.testing.assert_close(opt(x), x + 1)
    assert opt.cache_entries()[0].kind in ("break", "eager")
    assert len(logger.records) == 1


def test_another_lru_cached_logger_method_is_not_assumed(logger):
    def loud(self, msg):
        print("side effect")
        self.warning(msg)

    logging.Logger.loud_once = functools.lru_cache(None)(loud)  # not transformers': not modelled
    try:
        def f(x):
            logger.loud_once("m")
            return x + 1

        opt = minidynamo.optimize(f, backend=CountingBackend())
        opt(torch.randn(2))
        assert opt.cache_entries()[0].kind in ("break", "eager")
    finally:
        del logging.Logger.loud_once


def test_replacing_warning_once_recompiles(logger):
    def f(x):
        logger.warning_once("m")
        return x + 1

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    opt(torch.randn(2))
    calls = []
    logging.Logger.warning_once = types.MethodType(lambda self, *a: calls.append(a), logger).__func__
    opt(torch.randn(2))
    assert calls == [("m",)]
