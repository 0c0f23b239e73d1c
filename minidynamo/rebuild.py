"""Trackers → real values at run time: the Python expressions an entry evaluates after
its graph to rebuild a return value, or the live stack and locals at a graph break.

A tensor made in the graph is one of the graph's outputs; a value with a source is read
back from its source (the same object); constants are written out; containers made
inside the trace are built anew. A mutable one (list, dict, set, iterator) is built
once into a temporary, so two references to it stay one object, as in eager.
"""
from __future__ import annotations

import itertools

from .exc import unsupported
from .sources import Namespace
from .variables.base import VariableTracker
from .variables.dicts import DictVariable, ObjectKey, ValueKey
from .variables.lists import ListVariable, TupleVariable
from .variables.made_classes import holds_made, made_tracker


class Rebuilder:
    """`expr(tracker)` → an expression; `prelude` holds the statements it needs first
    (temporaries for mutable containers). A graph output is named `node_ref(node)`: the
    entry's local for it, which the graph's code (or the unpacking of the compiled graph's
    outputs) assigns; `nodes` lists them, in the order first named."""

    def __init__(self, ns: Namespace, node_ref):
        self.ns = ns
        self.node_ref = node_ref
        self.nodes: list = []
        self._named: set = set()  # the nodes in `nodes`
        self.prelude: list[str] = []
        self._built: dict = {}  # id(tracker) → temporary holding the object built for it
        self._keep: list = []  # the trackers behind _built's ids
        self._building: set = set()
        self._temps = itertools.count()
        self._owners: dict = {}  # id(a list tracker's items) → the tracker (see prepare)
        self.exits: dict = {}  # id(exit tracker) → the name of a region's exit entered at a break

    def keep(self, v) -> None:
        """Keep tracker `v` alive as long as this rebuilder (its id is a key here)."""
        self._keep.append(v)

    def temp(self) -> str:
        name = f"{self.ns.prefix}t{next(self._temps)}"
        while name in self.ns.values:  # an object bound after a hint of "t" (`_md_t2`)
            name = f"{self.ns.prefix}t{next(self._temps)}"
        self.ns.reserve(name)
        return name

    def expr(self, v: VariableTracker) -> str:
        return v.rebuild(self)

    def graph_value(self, v) -> str:
        """A tensor or symbolic int of the graph: an input returned unchanged is the same
        object; anything else is one of the graph's outputs."""
        if v.node.op == "placeholder" and v.source is not None:
            return v.source.expr(self.ns)
        if v.node not in self._named:
            self._named.add(v.node)
            self.nodes.append(v.node)
        return self.node_ref(v.node)

    def built_once(self, v) -> str:
        """An object made in the trace (`v.rebuild_new`), built once into a temporary, so two
        references to it stay one object, as in eager."""
        name = self._built.get(id(v))
        if name is not None:
            return name
        if id(v) in self._building:
            unsupported("construct", f"{v.describe()} contains itself")
        self._building.add(id(v))
        try:
            value = v.rebuild_new(self)
        finally:
            self._building.discard(id(v))
        name = self._built[id(v)] = self.temp()
        self._keep.append(v)
        self.prelude.append(f"{name} = {value}")
        # after the temporary exists, so what it holds may refer to it
        self.prelude.extend(v.rebuild_fill(self, name))
        return name

    def is_building(self, v) -> bool:
        """Whether `v` is being built now (what it holds is being rebuilt)."""
        return id(v) in self._building

    def prepare(self, roots) -> None:
        """Note which list trackers own the item lists iterators walk, among everything
        reachable from `roots`, so an iterator over one is rebuilt over that same list."""
        seen, todo = set(), list(roots)
        while todo:
            v = todo.pop()
            if id(v) in seen or v is None:
                continue
            seen.add(id(v))
            if isinstance(v, ListVariable) and v.source is None:
                self._owners[id(v.items)] = v
            if isinstance(v, (ListVariable, TupleVariable)) and v.source is None:
                todo.extend(v.items)
            elif isinstance(v, DictVariable) and v.source is None:
                todo.extend(v.items.values())

    def list_owning(self, items):
        """The list tracker (made in the trace) whose live items `items` are, if any."""
        return self._owners.get(id(items))

    def key(self, k) -> str:
        if type(k) is ObjectKey:  # an object hashed by identity: rebuilt from its tracker
            # (a key of a dict passed in the trace never read as a value: the object
            # itself, which the entry's guards pin)
            return self.expr(k.var) if k.has_var else self.ns.bind(k.obj, "k")
        if type(k) is ValueKey:  # an object hashed by value: rebuilt from its tracker
            if not k.fresh():  # its table holds it under the hash of fields it no longer has
                unsupported("construct", f"a {k.cls.__qualname__} key whose fields changed after it was hashed")
            return self.expr(k.var)
        if holds_made(k):  # a class the trace made (in a tuple): the one made for this call
            made = made_tracker(k)
            return self.expr(made) if made is not None else f"({''.join(self.key(x) + ', ' for x in k)})"
        return repr(k) if type(k) in (int, str, bool) or k is None else self.ns.bind(k, "k")

