"""Tracebacks in the user's terms: an exception raised by the user's code (or by a library it
calls) that passes through minidynamo's machinery — cache dispatch, guard functions, the
driver of resume functions — leaves it without those frames, so the traceback reads as
the eager one does, with one frame of the package at the top (where the optimized call was
entered). An exception raised by the package itself (bad input, `fullgraph`, an internal
error) keeps every frame: there the package's frames are the story.
`config.full_tracebacks = True` keeps every frame always."""
from __future__ import annotations

import os
import types

from .config import config

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _ours(tb) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith("<minidynamo") or filename.startswith(_PACKAGE_DIR)


def trimmed(exc: BaseException) -> BaseException:
    """`exc`, its traceback without the package's frames when the innermost frame (where it
    was raised) is not the package's. Called by generated functions and the API's call as
    the exception leaves them; they re-raise it, which puts their own frame back on top."""
    if config.full_tracebacks:
        return exc
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if not frames or _ours(frames[-1]):
        return exc
    kept = [tb for tb in frames if not _ours(tb)]
    if len(kept) == len(frames):
        return exc
    new = None
    for tb in reversed(kept):
        new = types.TracebackType(new, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    return exc.with_traceback(new)
