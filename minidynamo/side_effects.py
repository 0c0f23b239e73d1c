"""Changes the trace made to objects from outside the frame: lists, dicts, and the plain
attributes it set on objects (`obj.count = n`, `config.problem_type = "regression"`), and
the cells of the frame a resume function was handed (`nonlocal` variables its closures share).

A trace never writes to a real object: it changes the object's tracker, and the entry
writes the final state back after the graph has run (`lst[:] = ...`, `d.clear();
d.update(...)`, `obj.count = ...`), in the order the objects were first changed, before a
graph break's native instruction or the return. So the object stays the same object, a
native instruction after the break sees the change, and a trace that declines has
changed nothing.

What the entry rebuilds after those writes (the return value, the values live at a
break) is read back from its source where it came from outside. A value read through
something the writes replace (the old `obj.cache`, `d['a']` before `d['a'] = 5`) is
therefore read into a temporary before any write (`read_before_writes`).

A tracker stands for one object only if no other name the trace read is that same
object: `mutation_guards` pins that with identity guards (and declines when two names
are one object, which the tracker model cannot follow).
"""
from __future__ import annotations

import collections
import keyword

from .exc import unsupported
from .guards import Guard
from .sources import AttrSource, ItemSource, ReadBeforeWrites, iterator_state
from .variables.cells import cell_alias_guards
from .variables.constant import ConstantVariable
from .variables.dicts import DictVariable
from .variables.lists import IteratorVariable, ListVariable, TupleVariable
from .variables.objects import UserObjectVariable

# The types of outside objects whose trackers the trace changes (dict trackers model the
# collections' dict types too; collections_types.DequeVariable has its own writeback).
_CONTAINER_TYPES = (list, dict, collections.OrderedDict, collections.defaultdict, collections.Counter,
                    collections.deque, set)


def mutation_guards(output) -> None:
    """Each changed container or object is not any other list, dict or object of its type
    the trace read, now and on every call the entry serves."""
    if not output.mutated:
        return
    cell_alias_guards(output)
    others = [(source, value, var) for source, (value, var) in output.wrapped.items()
              if type(value) in _CONTAINER_TYPES or isinstance(var, (UserObjectVariable, TupleVariable))]
    for var, what in output.mutated.values():
        mine = next(((s, v) for s, (v, w) in output.wrapped.items() if w is var), None)
        if mine is None:
            unsupported("side_effect", f"{what}: the changed object cannot be found again")
        source, value = mine
        for other_source, other, other_var in others:
            if other_var is var or type(other) is not type(value):
                continue
            if other is value:
                unsupported("side_effect", f"{what}, which is also reachable as {other_source.name()}")
            output.guards.add(Guard("ALIAS_MATCH", source, False, {"other": other_source}))


def writeback_lines(rb, output) -> list[str]:
    """Statements writing each changed object's final state back (after the graph).
    Every new content is computed first: an item read from its source (`d['a']`) must be
    read before any container is cleared."""
    read_before_writes(rb, output)
    contents, applies = [], []
    for var, _ in output.mutated.values():
        target = var.source.expr(rb.ns)
        custom = var.writeback  # other containers (deque): (contents, how to apply them)
        if custom is not None:
            temp = rb.temp()
            content, apply = custom(rb, target, temp)
            contents.append(f"{temp} = {content}")
            applies.append(apply)
        elif isinstance(var, UserObjectVariable):
            for name, value in var.stored.items():
                if isinstance(value, ConstantVariable):  # a literal or a bound constant: as it is
                    applies.append(f"{_attr(rb, target, name)} = {rb.expr(value)}")
                    continue
                temp = rb.temp()
                contents.append(f"{temp} = {rb.expr(value)}")
                applies.append(f"{_attr(rb, target, name)} = {temp}")
        elif isinstance(var, DictVariable):
            temp = rb.temp()
            body = ", ".join(f"{rb.key(k)}: {rb.expr(v)}" for k, v in var.items.items())
            contents.append(f"{temp} = {{{body}}}")
            applies.append(f"{target}.clear(); {target}.update({temp})")
        elif not var.loaded:  # only appended to: append the same items
            temp = rb.temp()
            contents.append(f"{temp} = [{', '.join(rb.expr(i) for i in var.appended)}]")
            applies.append(f"{target}.extend({temp})")
        else:
            temp = rb.temp()
            contents.append(f"{temp} = [{', '.join(rb.expr(i) for i in var.items)}]")
            applies.append(f"{target}[:] = {temp}")
    for var, attrs in output.tensor_attrs.values():  # `x.tag = value` on tensors
        target = rb.expr(var)  # the input by its name, or the graph's output
        for name, value in attrs.items():
            temp = rb.temp()
            contents.append(f"{temp} = {rb.expr(value)}")
            applies.append(f"{rb.ns.bind(setattr, 'setattr')}({target}, {name!r}, {temp})")
    return contents + applies + _iterator_lines(rb, output) + _deferred_call_lines(rb, output)


def _iterator_lines(rb, output) -> list[str]:
    """Iterators passed in that the trace advanced: the real one takes as many items, as
    eager's did (a list, tuple or range iterator the trace exhausted: all that are left; a
    zip or enumerate: also each next() that found nothing, which pulls its iterators)."""
    return [f"{rb.ns.bind(advance, 'advance')}({source.expr(rb.ns)}, {n}, {misses})"
            for source, (n, misses) in _advanced_iterators(output)]


def _advanced_iterators(output) -> list:
    """(source, (items to take, next() calls finding nothing)) per iterator passed in
    that the trace advanced."""
    found = []
    for source, (obj, var) in output.iterators.items():
        own = var.source.original if isinstance(var.source, ReadBeforeWrites) else var.source
        if not isinstance(var, IteratorVariable) or own is not source:
            continue
        if var.python_type() in (zip, enumerate):
            n, misses = var.index, var.done
        else:
            n, misses = (None if var.done else var.index - iterator_state(obj)[1]), 0
        if n != 0 or misses:
            found.append((source, (n, misses)))
    return found


def advance(it, n, misses: int = 0) -> None:
    """Take `n` items from iterator `it` (None: all that are left), then ask `misses` times more."""
    if n is None:
        for _ in it:
            pass
    else:
        for _ in range(n):
            next(it)
    for _ in range(misses):
        next(it, None)


def _deferred_call_lines(rb, output) -> list[str]:
    """The calls the trace left for after the graph (`logger.warning_once(msg)`), in order."""
    lines = []
    for fn, obj, args, kwargs in output.deferred_calls:
        parts = [obj.source.expr(rb.ns), *(rb.expr(ConstantVariable(a)) for a in args),
                 *(f"{k}={rb.expr(ConstantVariable(v))}" for k, v in kwargs.items())]
        lines.append(f"{rb.ns.bind(fn, 'deferred')}({', '.join(parts)})")
    return lines


def _attr(rb, target: str, name: str) -> str:
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"{target}.{name}"
    return f"{rb.ns.bind(getattr, 'getattr')}({target}, {name!r})"  # not an assignment target


# --- values read through what the writes replace --------------------------------------
def read_before_writes(rb, output) -> None:
    """Trackers from outside whose source reads through something the writes replace (an
    attribute set, a dict key or list slot that ends up holding another value) are read
    into temporaries first, and rebuilt from those: `old = obj.cache; obj.cache = new;
    return old` returns the old object, as eager does. (Constants are rebuilt by value.)"""
    advanced = {source for source, _ in _advanced_iterators(output)}  # what is read through them moves on
    if not output.mutated and not advanced:
        return
    read_first(rb, output.wrapped, (_replaced_sources(output) if output.mutated else set()) | advanced)


def read_first(rb, wrapped: dict, replaced: set) -> None:
    """Each tracker of `wrapped` (source -> (value, tracker)) read through one of the
    `replaced` sources is read into a temporary first and rebuilt from it."""
    if not replaced:
        return
    for source, (_, var) in wrapped.items():
        original = var.source.original if isinstance(var.source, ReadBeforeWrites) else var.source
        if original != source or isinstance(var, ConstantVariable) or not _under(original, replaced):
            continue  # (a tracker reached by two names is rebuilt from its first; the entry's
            # code may be written more than once: from the original each time)
        temp = rb.temp()
        rb.prelude.append(f"{temp} = {original.expr(rb.ns)}")  # before anything the entry writes
        var.source = ReadBeforeWrites(original, temp)


def _replaced_sources(output) -> set:
    """The sources the writes make name another object than the one the trace read there:
    `obj.name` for an attribute the trace set (to another value), `d[k]` / `lst[i]` of a
    changed dict or list whose final item there is another."""
    replaced = set()
    for holder, _ in output.mutated.values():  # a cell of an outer scope the trace assigned (functions.py)
        own = getattr(holder, "replaced_sources", None)
        if own is not None:
            replaced |= own(output)
    for source, (_, var) in output.wrapped.items():
        base = getattr(source, "base", None)
        owner = output.mutated.get(id(_tracker_at(output, base))) if base is not None else None
        if owner is None:
            continue
        holder = owner[0]
        if holder.replaces is not None:  # a cell the trace assigned (functions.py)
            if holder.replaces(source, var):
                replaced.add(source)
        elif isinstance(holder, UserObjectVariable):
            if isinstance(source, AttrSource) and source.attr in holder.stored and holder.stored[source.attr] is not var:
                replaced.add(source)
        elif isinstance(source, ItemSource) and holder.writeback is None:
            if not _holds(holder, source.key, var):
                replaced.add(source)
    return replaced


def _tracker_at(output, source):
    hit = output.wrapped.get(source)
    return None if hit is None else hit[1]


def _holds(container, key, var) -> bool:
    """Whether the changed container's final item at `key` is `var`."""
    if isinstance(container, DictVariable):
        return container.items.get(key) is var
    if isinstance(container, ListVariable) and container.loaded and type(key) is int:
        return key < len(container.items) and container.items[key] is var
    return isinstance(container, ListVariable) and not container.loaded  # only appended to


def _under(source, replaced: set) -> bool:
    while source is not None:
        if source in replaced:
            return True
        source = getattr(source, "base", None)
    return False
