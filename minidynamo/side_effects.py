"""Changes the trace made to lists and dicts from outside the frame.

A trace never writes to a real object: it changes the container's tracker, and the
entry writes the final contents back in place after the graph has run (`lst[:] = ...`,
`d.clear(); d.update(...)`), in the order the containers were first changed, before a
graph break's native instruction or the return. So the object stays the same object, a
native instruction after the break sees the change, and a trace that declines has
changed nothing.

A tracker stands for one object only if no other name the trace read is that same
object: `mutation_guards` pins that with identity guards (and declines when two names
are one object, which the tracker model cannot follow).
"""
from __future__ import annotations

import collections

from .exc import unsupported
from .guards import Guard
from .variables.dicts import DictVariable


# The types of outside objects whose trackers the trace changes (dict trackers model the
# collections' dict types too; collections_types.DequeVariable has its own writeback).
_CONTAINER_TYPES = (list, dict, collections.OrderedDict, collections.defaultdict, collections.Counter,
                    collections.deque)


def mutation_guards(output) -> None:
    """Each changed container is not any other list or dict the trace read, now and on
    every call the entry serves."""
    if not output.mutated:
        return
    containers = [(source, value, var) for source, (value, var) in output.wrapped.items()
                  if type(value) in _CONTAINER_TYPES]
    for var, what in output.mutated.values():
        mine = next(((s, v) for s, (v, w) in output.wrapped.items() if w is var), None)
        if mine is None:
            unsupported("side_effect", f"{what}: the changed object cannot be found again")
        source, value = mine
        for other_source, other, other_var in containers:
            if other_var is var or type(other) is not type(value):
                continue
            if other is value:
                unsupported("side_effect", f"{what}, which is also reachable as {other_source.name()}")
            output.guards.add(Guard("ALIAS_MATCH", source, False, {"other": other_source}))


def writeback_lines(rb, output) -> list[str]:
    """Statements writing each changed container's final contents back (after the graph).
    Every new content is computed first: an item read from its source (`d['a']`) must be
    read before any container is cleared."""
    contents, applies = [], []
    for var, _ in output.mutated.values():
        target = var.source.expr(rb.ns)
        temp = rb.temp()
        custom = getattr(var, "writeback", None)  # other containers (deque): (contents, how to apply them)
        if custom is not None:
            content, apply = custom(rb, target, temp)
            contents.append(f"{temp} = {content}")
            applies.append(apply)
        elif isinstance(var, DictVariable):
            body = ", ".join(f"{rb.key(k)}: {rb.expr(v)}" for k, v in var.items.items())
            contents.append(f"{temp} = {{{body}}}")
            applies.append(f"{target}.clear(); {target}.update({temp})")
        elif not var.loaded:  # only appended to: append the same items
            contents.append(f"{temp} = [{', '.join(rb.expr(i) for i in var.appended)}]")
            applies.append(f"{target}.extend({temp})")
        else:
            contents.append(f"{temp} = [{', '.join(rb.expr(i) for i in var.items)}]")
            applies.append(f"{target}[:] = {temp}")
    return contents + applies
