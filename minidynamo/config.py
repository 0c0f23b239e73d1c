"""Settings, read at call time (tests may change them)."""
from __future__ import annotations

import os


class Config:
    def __init__(self):
        # Entries kept per function before new variants run eagerly.
        self.cache_size_limit: int = 8
        # Raise instead of re-tracing when a guard fails.
        self.error_on_recompile: bool = False
        # Where to write one readable Python file per cache entry (None: don't).
        self.dump_dir: str | None = os.environ.get("MINIDYNAMO_DUMP") or None
        # Reuse the compiled launcher path for Triton nodes when a GPU is present.
        self.fast_triton_launch: bool = True
        # Check tensor arguments with torch's C tensor check (False: the Python expressions).
        # Read when a function is traced.
        self.c_tensor_guards: bool = True

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"


config = Config()
