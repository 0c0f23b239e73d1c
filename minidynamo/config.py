"""Settings, read at call time (tests may change them).

Each setting is one annotated line of `Config` (its type, its default, a comment above);
assignments are checked against it, as torch's config does: an unknown name is an
AttributeError naming the close match, a value of another type a TypeError.
"""
import difflib
import os
import types


class Config:
    # Entries kept per function before new variants run eagerly.
    cache_size_limit: int = 8
    # Raise instead of re-tracing when a guard fails.
    error_on_recompile: bool = False
    # Where to write one readable Python file per cache entry (None: don't); MINIDYNAMO_DUMP.
    dump_dir: str | os.PathLike | None = None
    # Reuse the compiled launcher path for Triton nodes when a GPU is present.
    fast_triton_launch: bool = True
    # Check tensor arguments with torch's C tensor check (False: the Python expressions).
    # Read when a function is traced.
    c_tensor_guards: bool = True
    # Check the module trees an entry read from per-root snapshots, in bulk, where they
    # hold (guards.md: the fast tier); False: every guard walks its path on every call.
    # Read when a function is traced.
    snapshot_guards: bool = True
    # Keep `t.item()` in the graph as a value read at run time (an unbacked symbol of the
    # shape environment), as torch.compile's setting of this name (which is read too):
    # arithmetic with it is traced, a branch or a size made from it breaks. False: break.
    capture_scalar_outputs: bool = False
    # Turn minidynamo's internal errors into logged eager fallbacks.
    suppress_errors: bool = False
    # Keep minidynamo's own frames in the tracebacks of exceptions the user's code raises
    # (False: they are dropped, user_tracebacks.py; the package's own errors keep them).
    full_tracebacks: bool = False

    def __init__(self):
        for name in _SETTINGS:
            object.__setattr__(self, name, getattr(Config, name))
        self.dump_dir = os.environ.get("MINIDYNAMO_DUMP") or None

    def __setattr__(self, name, value):
        if name not in _SETTINGS:
            raise AttributeError(_unknown(name))
        kinds = _SETTINGS[name]
        if not _fits(value, kinds):
            raise TypeError(f"minidynamo.config.{name} must be {_describe(kinds)}, "
                            f"not {type(value).__name__} ({value!r})")
        object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only reached for names that are not settings
        raise AttributeError(_unknown(name))

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"


_SETTINGS = {name: kind.__args__ if isinstance(kind, types.UnionType) else (kind,)
             for name, kind in Config.__annotations__.items()}


def _fits(value, kinds) -> bool:
    if value is None:
        return type(None) in kinds
    if type(value) is bool:  # True is an int to Python, not a size here
        return bool in kinds
    return any(k is not bool and k is not type(None) and isinstance(value, k) for k in kinds) or (
        float in kinds and type(value) is int)


def _describe(kinds) -> str:
    return " or ".join("None" if k is type(None) else k.__name__ for k in kinds)


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, _SETTINGS, n=1)
    return (f"minidynamo.config has no setting {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; settings: {', '.join(_SETTINGS)}")


config = Config()
