"""NumPy code on tensors, traced into torch ops through torch._numpy."""
from __future__ import annotations
