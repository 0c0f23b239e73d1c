"""The one error vocabulary: `Unsupported` is how a trace declines a construct.

Every refusal goes through `unsupported(category, detail)`, which attaches the user's
file:line of the instruction being traced. Only the cache layer catches it.
"""
from __future__ import annotations

import contextvars

# Fixed categories: they are counted and shown by explain(), so keep the list short.
CATEGORIES = {
    "data_dependent": "control flow or a value that depends on tensor data",
    "side_effect": "a side effect that would outlive the call (I/O, global or outside-object writes)",
    "opcode": "an opcode the interpreter does not handle",
    "call": "a call into code the interpreter cannot trace",
    "exceptions": "try/except/with or a raised exception",
    "generator": "generators and coroutines",
    "torch_op": "a torch operation that failed or cannot be traced",
    "triton": "a Triton kernel launch that cannot be captured",
    "construct": "a Python construct the interpreter does not model",
    "backend": "the backend failed to compile the graph",
    "internal": "an internal error of minidynamo's, turned into a fallback by config.suppress_errors",
    "graph_break": "an explicit minidynamo.graph_break()",
    "cache_limit": "the function reached config.cache_size_limit: new variants run eagerly",
}

# What to change, per category: shown by explain() and the fallbacks log.
HINTS = {
    "data_dependent": "branch on shapes/dtypes instead of tensor values, or keep the "
                      "data-dependent part outside the optimized function",
    "side_effect": "move I/O and writes to globals or outside objects out of the optimized function",
    "opcode": "rewrite the construct with a simpler one (see docs/supported.md)",
    "call": "pass the result in as an argument, or call a Python or torch function instead",
    "exceptions": "the eager run raises or handles this; keep try/with/raise outside the optimized function",
    "generator": "build a list instead of using a generator",
    "torch_op": "check the op's arguments: it fails (or cannot run) on these shapes and dtypes",
    "triton": "see docs/triton.md for the launch forms that are captured",
    "construct": "see docs/supported.md for the constructs that are traced",
    "backend": "check the backend: it raised, or returned something that cannot run the graph",
    "internal": "this is a bug in minidynamo: please report it with the message",
    "graph_break": "remove the minidynamo.graph_break() call to capture the code around it as one graph",
    "cache_limit": "see opt.guard_failures() for the guard that keeps failing (often a changing size or "
                   "int argument), or raise minidynamo.config.cache_size_limit",
}

# (filename, lineno) of the instruction being traced; set by the translator.
current_location: contextvars.ContextVar = contextvars.ContextVar("minidynamo_location", default=None)


class Unsupported(Exception):
    """Raised when the interpreter declines a construct; the call then runs eagerly.

    Its fields, the only ones any module reads or sets (decisions read these, never the
    message text):
    - `category`: a key of CATEGORIES; `detail`: what was declined (the message users see);
      `where`: the user's `file:line: source` of the instruction; `hint`: what the user can
      do (by default, the category's hint).
    - `raised`: the Python exception class the eager run raises here, where a model of
      CPython catching it needs it (`raising`, `Raised`, every AttributeError: getattr's
      default and hasattr), else None.
    - `raised_at`: (translator, instruction index) of the frame the raise is in, innermost
      (the translator adds it as the error leaves that frame), else None.
    - `no_break`: why no frame may break for it (the whole call runs eagerly), else None.
    - `break_at`: (instruction index, step) where the frame being optimized could break for
      it (set by the root translator; breaks.py), else None.
    - `inside_call`: it was declined inside a call that frame made (breaks.py).
    - `reached_from`: the user's line whose call led into torch or the standard library,
      where it was declined there (the message says it from then on), else None.
    - `raised_args`: the args (trackers) of the `raised` exception where a model of a
      builtin raises exactly `raised(*raised_args)` (`builtin_raises`): the translator then
      raises it in the trace, where a handler of the traced code may catch it; else None.
    """

    def __init__(self, category: str, detail: str, where: str | None = None, hint: str | None = None,
                 *, raised: type | None = None, no_break: str | None = None):
        assert category in CATEGORIES, category
        self.category = category
        self.detail = detail
        self.where = where
        self.hint = hint or HINTS[category]
        self.raised = raised
        self.raised_at = None
        self.no_break = no_break
        self.break_at = None
        self.inside_call = False
        self.reached_from = None
        self.raised_args = None
        super().__init__(self._message())

    def raises(self, exc_class: type) -> bool:
        """Whether the eager run raises `exc_class` (or a subclass of it) here."""
        return self.raised is not None and issubclass(self.raised, exc_class)

    def _message(self) -> str:
        at = f" (at {self.where})" if self.where else ""
        return f"[{self.category}] {self.detail}{at}"

    def __str__(self):
        return super().__str__() + (f" (called from {self.reached_from})" if self.reached_from else "")

    def __reduce__(self):
        return (Unsupported, (self.category, self.detail, self.where, self.hint))


def format_location(loc) -> str | None:
    if loc is None:
        return None
    import linecache
    filename, lineno = loc
    where = f"{filename}:{lineno}"
    text = linecache.getline(filename, lineno).strip() if lineno else ""
    return f"{where}: {text}" if text else where


def unsupported(category: str, detail: str, hint: str | None = None, no_break: str | None = None,
                raised: type | None = None):
    """Raise Unsupported for the instruction being traced. Never returns. `no_break` says
    why no frame of the call may break for it: the whole call then runs eagerly. `raised`:
    the exception class the eager run raises (see Unsupported)."""
    raise Unsupported(category, detail, format_location(current_location.get()), hint,
                      raised=raised, no_break=no_break)


def raising(exc_class: type, detail: str):
    """Decline a `raise` of `exc_class` (the eager run raises it). The error says which
    class (`raised`), and the translator adds where (`raised_at`: the frame and the index of
    its instruction), so a caller that models CPython catching it (the sequence protocol's
    IndexError: variables/iteration_protocol.py) can tell it escaped unhandled."""
    raise Unsupported("exceptions", detail, format_location(current_location.get()), raised=exc_class)


def builtin_raises(exc_class: type, args: list, detail: str):
    """A model of a builtin raising `exc_class(*args)` (`d[k]`'s KeyError(k)), as CPython
    does, before any effect of the call: the translator raises it in the trace (a handler
    of the traced code may catch it), else it declines like `raising`."""
    e = Unsupported("exceptions", detail, format_location(current_location.get()), raised=exc_class)
    e.raised_args = list(args)
    raise e


def attribute_error(e: BaseException) -> type | None:
    """`raised` for a decline of an exception `e` that a fold raised: its class where it
    is an AttributeError (getattr's default and hasattr catch those), else None."""
    return type(e) if isinstance(e, AttributeError) else None


class Raised(Unsupported):
    """An exception raised in the trace (`value`: its ExceptionVariable), on its way to a
    handler. The translator whose handler covers the instruction it passes through catches
    it (interpreter/opcodes/exceptions.py); one that leaves the frame being optimized is a
    decline like any other, so the eager run raises it. `origin` is where it was raised
    (translator, instruction index), `through` the call it last left a frame through
    (caller translator, index of its call), `catchable` whether every frame it passed was
    one the trace models exactly (else no frame may catch it any more), `may_be_caught`
    whether a frame it left had a try or with block around it that the trace did not
    enter (CPython might have caught it there)."""

    def __init__(self, value, origin, detail: str):
        super().__init__("exceptions", detail, format_location(current_location.get()), raised=value.exc_type)
        self.value = value
        self.origin = origin
        self.through = None
        self.catchable = True
        self.may_be_caught = False


def exception_made(tx, exc_class: type):
    """Decline making an exception object (only ever made to be raised): where the next
    instruction raises it (`raise IndexError(...)`), as `raising` does."""
    detail = f"raising {exc_class.__qualname__} (the eager run raises it)"
    insts, at = tx.instructions, tx.ip
    if at < len(insts) and insts[at].opname == "RAISE_VARARGS" and insts[at].arg == 1:
        raising(exc_class, detail)
    unsupported("exceptions", detail)


# Calls whose result depends on the frame that makes them: run natively in a graph break's
# helper they would see that helper's frame (its locals, globals, class cell), so they never
# break; a call reaching one runs eagerly whole.
READS_FRAME = "it reads the calling frame, which a graph break would replace"


class BackendError(RuntimeError):
    """A backend raised or returned something that cannot run the graph."""


class InternalError(RuntimeError):
    """A bug in minidynamo itself: raised to the caller (never a silent fallback) unless
    `config.suppress_errors` turns it into a logged eager fallback."""

    @classmethod
    def while_tracing(cls, fn, error: BaseException) -> "InternalError":
        """Name the user's function, the file:line and instruction being traced, and the error."""
        at, inst = getattr(error, "_minidynamo_at", None) or (None, None)
        code = fn.__code__
        where = at or f"{code.co_filename}:{code.co_firstlineno}"
        what = f", instruction {inst!r}" if inst is not None else ""
        return cls(f"minidynamo internal error while tracing {fn.__qualname__} (at {where}{what}): "
                   f"{type(error).__name__}: {error}. This is a bug in minidynamo; "
                   "minidynamo.config.suppress_errors = True runs such calls eagerly instead.")
