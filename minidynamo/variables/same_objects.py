"""Which of the objects a trace reached by name are one object: the trace relies on it
(a dict key hashed by identity, `a is b` on functions guarded by their code), and one
guard per entry checks the same pattern holds on every call it serves."""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..guards import Guard
from ..sources import Source


def same_objects(objects: tuple, pattern: tuple) -> bool:
    """Whether `objects` are one object exactly where `pattern` says: each position holds
    the index of the first object it is (as the trace saw them)."""
    first: dict = {}
    return tuple(first.setdefault(id(o), i) for i, o in enumerate(objects)) == pattern


@dataclass(eq=False)
class SameObjectsSource(Source):
    """`same_objects((a, b, ...), pattern)` over every source whose object the trace hashed
    by identity (or otherwise relied on being one object, or not); it grows during the
    trace and is rendered when the entry is generated."""

    sources: list
    pattern: list

    def expr(self, ns):
        objects = "".join(s.expr(ns) + ", " for s in self.sources)
        return f"{ns.bind(same_objects, 'same_objects')}(({objects}), {tuple(self.pattern)!r})"

    def name(self, naming=None):
        return f"which of {', '.join(s.name(naming) for s in self.sources)} are one object"

    @property
    def depth(self):  # after the guards that make each of them readable
        return max((s.depth for s in self.sources), default=0) + 1


# One per trace (OutputGraph): sources noted so far, their objects, the guard once it exists.
_noted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Noted:
    __slots__ = ("source", "objects", "guard")

    def __init__(self):
        self.source = SameObjectsSource([], [])
        self.objects: list = []
        self.guard = None


def note_identity(tx, source, obj) -> None:
    """The trace relies on which objects `source` is and is not, among those noted."""
    if source is None:
        return
    noted = _noted.get(tx.output)
    if noted is None:
        noted = _noted[tx.output] = _Noted()
    if source in noted.source.sources:
        return
    first = next((i for i, o in enumerate(noted.objects) if o is obj), len(noted.objects))
    noted.source.sources.append(source)
    noted.source.pattern.append(first)
    noted.objects.append(obj)
    if noted.guard is None and len(noted.objects) > 1:
        noted.guard = Guard("EQUALS_MATCH", noted.source, True)
        tx.output.guards.add(noted.guard)
