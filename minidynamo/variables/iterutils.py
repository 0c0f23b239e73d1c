"""Models of itertools and functools made inside the trace."""
from __future__ import annotations
