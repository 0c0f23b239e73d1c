"""Logging calls in traced code (a tracker layer module, beside objects.py, which hands
these out when a `logging.Logger` passed in is read): `logger.debug(...)` and its kind
below the logger's level are no-ops guarded on `isEnabledFor`, and transformers'
`warning_once` is called again by the entry after the graph."""
from __future__ import annotations

import functools
import inspect
import logging
import types
from dataclasses import dataclass

from ..exc import unsupported
from ..guards import Guard
from ..sources import Source
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable, UserMethodVariable


# Logger methods whose whole effect, below the logger's level, is asking isEnabledFor
# (`logging.debug()` and the other module functions are not: they may configure the root
# logger first). None: the level is the call's first argument (`logger.log`).
LOGGER_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
                  "log": None}


@dataclass(frozen=True)
class EnabledForSource(Source):
    """`logger.isEnabledFor(level)`, asked again by the entry."""

    base: Source
    level: int

    def expr(self, ns):
        return f"{self.base.expr(ns)}.isEnabledFor({self.level!r})"

    def name(self, naming=None):
        return f"{self.base.name(naming)}.isEnabledFor({self.level!r})"

    @property
    def depth(self):
        return self.base.depth + 3  # after the guards on the class's methods


class LoggerCallVariable(UserMethodVariable):
    """`logger.debug(...)` (info, warning, error, exception, critical, log): below the
    logger's effective level the call does nothing, exactly (logging's own methods check
    isEnabledFor first and return), so it is a no-op guarded on isEnabledFor being False;
    at or above it, the record would be emitted: inlined, which declines as before."""

    __slots__ = ("name",)

    def __init__(self, logger, name):
        super().__init__(UserFunctionVariable(getattr(logging.Logger, name)), logger)
        self.name = name

    def call_function(self, tx, args, kwargs):
        logger = self.obj
        try:  # the arguments must bind (a missing msg raises even below the level)
            inspect.signature(self.func.fn).bind(logger.value, *args, **kwargs)
        except TypeError:
            return super().call_function(tx, args, kwargs)
        level = LOGGER_LEVELS[self.name]
        if level is None:
            if not args or not args[0].is_python_constant() or type(args[0].as_python_constant()) is not int:
                return super().call_function(tx, args, kwargs)
            level = args[0].as_python_constant()
        if logger.value.isEnabledFor(level):  # reads the level (and fills logging's cache)
            return super().call_function(tx, args, kwargs)
        tx.output.guards.add(Guard("EQUALS_MATCH", EnabledForSource(logger.source, level), False))
        return ConstantVariable(None)


def logs_once(static) -> bool:
    """transformers' (and diffusers', accelerate's) `Logger.warning_once` / `info_once`: an
    lru_cache over a method that logs, so a message is logged once per process."""
    wrapped = getattr(static, "__wrapped__", None)
    return type(static) is functools._lru_cache_wrapper and isinstance(wrapped, types.FunctionType) \
        and wrapped.__name__ in ("warning_once", "info_once") \
        and (wrapped.__module__ or "").split(".")[0] in ("transformers", "diffusers", "accelerate")


class LoggedOnceVariable(VariableTracker):
    """`logger.warning_once(msg)`: its only effect is output (a record logged the first time a
    message is seen), so the trace does not break for it: the entry makes the same call after
    the graph, in order with its other writes, and the lru_cache decides as in eager."""

    __slots__ = ("fn", "logger")

    def __init__(self, fn, logger):
        super().__init__(None)
        self.fn, self.logger = fn, logger

    def call_function(self, tx, args, kwargs):
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported("side_effect", f"{self.fn.__wrapped__.__name__}() with a value computed in the trace")
        values = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
        try:
            hash((*values, *named.items()))  # lru_cache hashes them: an unhashable one raises
        except TypeError:
            unsupported("exceptions", f"TypeError: unhashable argument to {self.fn.__wrapped__.__name__}()")
        tx.output.deferred_calls.append((self.fn, self.logger, values, named))
        return ConstantVariable(None)
