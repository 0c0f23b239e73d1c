"""Objects of user classes made inside the trace."""
from __future__ import annotations
