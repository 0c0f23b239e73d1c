"""What makes an optimized function, for the layers below api.py that make them: the
cache (a resume function at a graph break), callees.py (a function called at a break)
and the frame hook (a frame under an eager region). api.py imports them all, so none
of them can import api.py: api.py fills these names once, when it is imported (before
any function is optimized)."""
from __future__ import annotations


def _unfilled(*args, **kwargs):
    raise RuntimeError("minidynamo.optimizing is filled by minidynamo.api when it is imported")


OptimizedFunction = _unfilled  # api.OptimizedFunction (the class; `_resume` makes a resume function's)
optimized_function = _unfilled  # callees.optimized_function: one per (function, backend)


def fill(optimized_function_class, optimized_function_of) -> None:
    global OptimizedFunction, optimized_function
    OptimizedFunction, optimized_function = optimized_function_class, optimized_function_of
