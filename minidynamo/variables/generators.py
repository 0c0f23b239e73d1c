"""Generator functions and generator expressions, inlined as they are consumed."""
from __future__ import annotations
