"""Models of the collections types made inside the trace (OrderedDict, defaultdict, deque, namedtuple, Counter)."""
from __future__ import annotations
