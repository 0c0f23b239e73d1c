"""Python-version flags and the few version constants the interpreter needs."""
import sys

PY311 = sys.version_info >= (3, 11)
PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)
PY314 = sys.version_info >= (3, 14)
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# co_flags bits that make a code object something other than a plain function.
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ITERABLE_COROUTINE = 0x100
CO_ASYNC_GENERATOR = 0x200
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
