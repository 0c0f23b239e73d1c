"""The fast tier of an entry's guards: the module trees it read, checked as flat vectors.

An entry's guards read a model's modules by attribute paths from a root (`self`, a closure
cell, a global): `self.features.denseblock1.denselayer3.conv2.weight`. Walking each path in
Python (`Module.__getattr__` at every step) costs microseconds per guard, and a CNN has
thousands. But once the precise guards have passed for a root, what they read is fixed by
a few facts that C code can check in bulk:

- each value on a path is the object found in a dict the entry holds (a module's
  `__dict__`, its `_parameters` / `_buffers` / `_modules`, a plain dict), by identity,
  and each name resolved in a later table is absent from the earlier ones (`weight` is
  not in `conv.__dict__`, so `conv._parameters['weight']` is what `conv.weight` gives);
- each module keeps its class and its `__dict__` object, and has no hooks;
- each parameter and buffer keeps its metadata: one call of torch's C tensor check for all.

Where the Python has PEP 509 dict version tags (3.10, 3.11), the first fact is each dict's
version unchanged (one C call per dict, no item read back).

A `Plan`, made when the entry is built, names the sources of that region (paths through
plain modules and dicts, from a module root) and which guards the facts imply: identity,
a type that cannot change behind an unchanged identity, the value of an immutable, an
absent instance attribute, empty hooks, static tensor metadata. The entry's first tier
asks `Snapshots.fresh(roots)`: for a root whose snapshot holds, it binds the region's
values from it and runs only the other guards (the residual: class attributes, code
objects, global state, mutable containers, the inputs). Otherwise it runs every guard as
before and, where they pass, `take` snapshots what they read for that root (up to
`MAX_ROOTS` roots: one entry serving every layer of a model keeps one per layer).

Nothing here runs user code: snapshots read dicts, never attributes of the user's objects
(a module's `__dict__` and class are read through object's own descriptors).
"""
from __future__ import annotations

import itertools
import operator
import weakref
from collections import OrderedDict

import torch

from .guard_values import is_immutable
from .sources import AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource, ObjectSource

__all__ = ["VERSIONED", "Plan", "Snapshots", "plain_module_class"]

MAX_ROOTS = 64  # snapshots kept per entry (one per root object: a layer, a model)
# Snapshots taken of one root before giving up on it: a model whose forward sets its own
# attributes fails its snapshot on every call, and taking one costs more than it saves.
MAX_TAKES = 8
_TABLES = ("_parameters", "_buffers", "_modules")  # Module.__getattr__'s order
_ROOTS = (LocalSource, ClosureSource, GlobalSource, ObjectSource)
_PLAIN_DICTS = (dict, OrderedDict)  # dicts whose items C reads as stored (no __getitem__ of their own)

_is = operator.is_
_flat = itertools.chain.from_iterable
_call = getattr(operator, "call", None) or (lambda f, x: f(x))  # operator.call: 3.11+
_dict_attr = operator.attrgetter("__dict__")  # C; take() checks it reads what object's descriptor does


def _instance_dict(obj):
    """`obj.__dict__` through object's own descriptor (a class cannot override it)."""
    return object.__getattribute__(obj, "__dict__")


def plain_module_class(cls) -> bool:
    """A Module class whose attributes resolve as Module's: no `__getattr__` or
    `__getattribute__` of its own (those could answer anything)."""
    return (isinstance(cls, type) and issubclass(cls, torch.nn.Module)
            and cls.__getattr__ is torch.nn.Module.__getattr__
            and cls.__getattribute__ is object.__getattribute__)


def _on_class(cls, name: str) -> bool:
    return any(name in vars(k) for k in cls.__mro__)


def class_value(cls, name: str):
    """(value,) of `name` as instances of `cls` without an instance attribute of that name
    read it where that is the class's own plain immutable value (no descriptor, nothing of
    the metaclass in the way), else None."""
    for k in cls.__mro__:
        if name in vars(k):
            v = vars(k)[name]
            plain = not hasattr(type(v), "__get__") and not hasattr(type(cls), name)
            return (v,) if plain and is_immutable(v) else None
    return None


class Plan:
    """The region of one entry's sources the fast tier reads from snapshots, in order
    (each after the one it is read through), and how each is read from its base."""

    def __init__(self, guards: list, also: list):
        types = {}
        for g in guards:
            t = g.fixed_type()
            if t is not None:
                types.setdefault(g.source, t)
        for s in itertools.chain((g.source for g in guards), also):
            for x in _chain(s):
                if isinstance(x, ObjectSource):
                    types.setdefault(x, type(x.obj))
        self.types = types
        wanted: dict = {}
        for g in guards:
            for s in g.reads():
                wanted.setdefault(s, None)
        for s in also:
            for x in _chain(s):
                wanted.setdefault(x, None)
        self.steps: dict = {}  # source -> ("root",) | ("attr", name) | ("class",) | ("item", key)
        self.modules: set = set()  # the region's sources guarded as plain modules
        for s in sorted(wanted, key=lambda s: s.depth):
            step = self._step(s)
            if step is not None:
                self.steps[s] = step
                if plain_module_class(types.get(s)):
                    self.modules.add(s)
        self.sources = list(self.steps)
        self.index = {s: i for i, s in enumerate(self.sources)}
        self.roots = [s for s in self.sources if self.steps[s][0] == "root"]

    def _step(self, s):
        if isinstance(s, _ROOTS) or _is_args_item(s):
            return ("root",) if plain_module_class(self.types.get(s)) else None
        base = getattr(s, "base", None)
        if base not in self.steps:
            return None
        if type(s) is AttrSource:
            if base not in self.modules:
                return None
            if s.attr == "__class__":
                return ("class",)
            if s.attr == "__dict__":
                return None
            if _on_class(self.types[base], s.attr):
                # A plain immutable value of the class (`gradient_checkpointing = False`):
                # the snapshot holds it absent from the instance, and its guards read it
                # from the class, once per class; methods and descriptors are read live.
                return ("class attr", s.attr) if class_value(self.types[base], s.attr) is not None else None
            return ("attr", s.attr)
        if type(s) is ItemSource and type(s.key) in (str, int):
            is_table = type(base) is AttrSource and base.attr in _TABLES and self.steps[base][0] == "attr"
            if is_table or self.types.get(base) is dict:
                return ("item", s.key)
            if self.types.get(base) is tuple and type(s.key) is int:
                return ("tuple item", s.key)  # fixed by the tuple's identity: nothing to read
        return None

    def class_of(self, s):
        """The class a `m.__class__` source of the region is (its module's guarded type)."""
        return self.types.get(s.base) if self.steps.get(s) == ("class",) else None

    def __len__(self):
        return len(self.sources)


def _chain(source) -> list:
    out = []
    while source is not None:
        out.append(source)
        source = getattr(source, "base", None)
    return out[::-1]


def _is_args_item(s) -> bool:
    return type(s) is ItemSource and isinstance(s.base, LocalSource) and type(s.key) is int


class Snapshot:
    """What the guards read for one root, as vectors checked in C (see the module doc)."""

    __slots__ = ("root_refs", "root_types", "root_dicts", "values", "getters", "gdicts", "expected", "absent_dicts", "absent_keys",
                 "mods", "types", "mdicts", "hook_dicts", "hook_getters", "hook_owners", "tensors", "tensor_check",
                 "sized", "sizes", "keyed_dicts", "keyed_keys", "vdicts", "versions", "empties", "__weakref__")

    def holds(self, roots) -> bool:
        for root, ref, cls, d in zip(roots, self.root_refs, self.root_types, self.root_dicts):
            if root is not ref() or type(root) is not cls or _dict_attr(root) is not d:
                return False
        if self.versions is not None:  # no dict read changed since: same items, same absent keys
            if list(map(_dict_version, self.vdicts)) != self.versions or any(self.empties):
                return False
        elif not self.read_back():
            return False
        return (all(map(_is, map(type, self.mods), self.types))
                and all(map(_is, map(_dict_attr, self.mods), self.mdicts))
                and not any(self.hook_dicts)
                and (self.tensor_check is None or self.tensor_check(*self.tensors)))

    def read_back(self) -> bool:
        """The dicts read give the same objects, and lack the names found absent; the
        modules' hook dicts (those they hold now) are empty; the dicts whose keys were
        guarded have them in order. (With version tags, `holds` needs none of this.)"""
        return (all(map(_is, _flat(map(_call, self.getters, self.gdicts)), self.expected))
                and list(map(len, self.sized)) == self.sizes
                and not any(map(dict.__contains__, self.absent_dicts, self.absent_keys))
                and not any(_flat(map(map, self.hook_getters, self.hook_owners)))
                and list(map(tuple, self.keyed_dicts)) == self.keyed_keys)


class Snapshots:
    """One entry's snapshots, by root. `fresh(*roots)`: the region's values where a
    snapshot of these roots holds, else None; `take(roots, values)`: after the precise
    guards passed with these values (the plan's sources, in order), snapshot them.
    `hooks`: (source, hook dict names) that must be empty; `absent`: (source, name, tables)
    of instance attributes that must be missing (with `tables`, from the module's
    parameters, buffers and submodules too); `tensors`: sources under one C tensor check;
    `keyed`: (source, keys) of plain dicts whose keys, in order, are checked when a
    snapshot is taken and held by their version tags after (only where tags exist)."""

    def __init__(self, plan: Plan, hooks, absent, tensors, tensor_meta, keyed=()):
        self.plan = plan
        self.keyed = [(plan.index[s], keys) for s, keys in keyed]
        self.hooks = [(plan.index[s], names) for s, names in hooks]
        self.absent = [(plan.index[s], name, tables) for s, name, tables in absent]
        self.tensors = [plan.index[s] for s in tensors]
        self.tensor_meta = tensor_meta  # (sizes, strides) per tensor
        self.root_index = [plan.index[s] for s in plan.roots]
        self.root_set = set(self.root_index)
        self.by_root: dict = {}
        self.takes: dict = {}  # root ids -> snapshots taken of them
        self.refused = 0  # roots whose reads could not be snapshotted (the precise tier stays)

    def fresh(self, *roots):
        """The region's values but the roots', in the plan's order, or None."""
        snap = self.by_root.get(tuple(map(id, roots)))
        if snap is None:
            return None
        try:
            if snap.holds(roots):
                return snap.values
        except Exception:  # a dict or table gone: the precise guards decide
            pass
        return None

    def take(self, roots, values) -> bool:
        """Always True (it is the last term of the precise tier's `and`)."""
        key = tuple(map(id, roots))
        if key not in self.by_root and len(self.by_root) >= MAX_ROOTS:
            return True
        taken = self.takes.get(key, 0)
        if taken >= MAX_TAKES:
            return True
        self.takes[key] = taken + 1
        if taken == 0:
            for root in roots:  # a snapshot holds the tree's dicts: drop it with the root
                weakref.finalize(root, self._forget, key)
        try:
            snap = self._snapshot(roots, values)
        except Exception:
            snap = None
        if snap is None:
            self.refused += 1
            self.by_root.pop(key, None)
            return True
        self.by_root[key] = snap
        return True

    def _forget(self, key):
        self.by_root.pop(key, None)
        self.takes.pop(key, None)

    def _snapshot(self, roots, values) -> Snapshot | None:
        plan = self.plan
        if len(values) != len(plan.sources) or any(values[i] is not r for i, r in zip(self.root_index, roots)):
            return None
        reads: dict = {}  # id(dict) -> (dict, {key: value})
        absent: dict = {}  # (id(dict), key) -> dict
        mods: dict = {}  # id(module) -> module

        def read(d, key, value):
            entry = reads.setdefault(id(d), (d, {}))[1]
            if key in entry and entry[key] is not value:
                raise _Refuse
            entry[key] = value

        def found(d, key, value) -> bool:
            """Whether `key` is in `d`; where it is, it must hold `value`, now a read."""
            if key not in d:
                return False
            if d[key] is not value:
                raise _Refuse
            read(d, key, value)
            return True

        def module(m):
            if not plain_module_class(type(m)):
                raise _Refuse
            mods[id(m)] = m
            return _instance_dict(m)

        for i, s in enumerate(plan.sources):
            step, v = plan.steps[s], values[i]
            if step[0] == "root":
                continue
            base = values[plan.index[s.base]]
            if step[0] == "class":
                module(base)
                if v is not type(base):
                    raise _Refuse
            elif step[0] == "attr":
                d = module(base)
                name = step[1]
                if found(d, name, v):
                    continue
                absent[(id(d), name)] = d
                for table in _TABLES:
                    t = d.get(table)
                    if type(t) not in _PLAIN_DICTS:
                        raise _Refuse
                    read(d, table, t)
                    if found(t, name, v):
                        break
                    absent[(id(t), name)] = t
                else:
                    raise _Refuse
            elif step[0] == "class attr":
                d = module(base)
                on_class = class_value(type(base), step[1])
                if step[1] in d or on_class is None or on_class[0] is not v:
                    raise _Refuse
                absent[(id(d), step[1])] = d
            elif step[0] == "tuple item":
                if type(base) is not tuple or base[step[1]] is not v:
                    raise _Refuse
            else:  # item of a plain dict (a module's table, or a dict guarded as one)
                if type(base) not in _PLAIN_DICTS or not found(base, step[1], v):
                    raise _Refuse
        # With version tags, a module's hook dicts are read from its __dict__ like any value
        # (identity, held by the version), then checked empty. Without, the dicts the
        # module holds now are checked empty, whichever they are: one look-up each, no
        # comparison (nothing else reads them).
        hook_dicts = {}
        hook_owners: dict = {}  # name -> {id(module __dict__): module __dict__}
        for i, names in self.hooks:
            d = module(values[i])
            for name in names:
                hook = d[name]
                if hook:
                    raise _Refuse
                if _dict_version is not None:
                    read(d, name, hook)
                    hook_dicts[id(hook)] = hook
                if _dict_version is None:
                    hook_owners.setdefault(name, {})[id(d)] = d
        for i, name, tables in self.absent:  # tables: Module.__getattr__'s too (a hasattr() that was False)
            d = module(values[i])
            places = [d]
            for table in _TABLES if tables else ():
                t = d.get(table)
                read(d, table, t)
                places.append(t)
            for t in places:
                if type(t) not in _PLAIN_DICTS or name in t:
                    raise _Refuse
                absent[(id(t), name)] = t
        keyed = {}  # the dicts whose keys the guards list: versions hold them, else read back
        for i, keys in self.keyed:
            d = values[i]
            if type(d) is not dict or tuple(d) != keys:  # (its type: fixed by its identity)
                raise _Refuse
            keyed[id(d)] = (d, keys)
        for v in values:  # their classes are checked (TYPE_MATCH implied)
            if plain_module_class(type(v)):
                module(v)

        snap = Snapshot()
        # The roots are held weakly (the snapshot goes with them) and checked apart.
        snap.root_refs = tuple(weakref.ref(r) for r in roots)
        snap.root_types = tuple(type(r) for r in roots)
        snap.root_dicts = tuple(_instance_dict(r) for r in roots)
        for r in roots:
            mods.pop(id(r), None)
        snap.values = tuple(v for i, v in enumerate(values) if i not in self.root_set)
        snap.getters, snap.gdicts, snap.expected = [], [], []
        for d, entry in reads.values():
            getter = _getter(list(entry))
            snap.getters.append(getter)
            snap.gdicts.append(d)
            snap.expected.extend(getter(entry))
        # A dict all of whose keys are read has no other key while its size holds: its
        # absent names need no look-up (a module's tables, mostly).
        whole = {i for i, (d, entry) in reads.items() if len(d) == len(entry)}
        snap.sized = [reads[i][0] for i in whole]
        snap.sizes = [len(d) for d in snap.sized]
        snap.absent_dicts = [d for (i, _), d in absent.items() if i not in whole]
        snap.absent_keys = [k for (i, k) in absent if i not in whole]
        snap.mods = list(mods.values())
        snap.types = [type(m) for m in snap.mods]
        snap.mdicts = [_instance_dict(m) for m in snap.mods]  # holds() below: attrgetter agrees
        snap.hook_dicts = list(hook_dicts.values())
        snap.hook_getters = [operator.itemgetter(name) for name in hook_owners]  # one name: the item
        snap.hook_owners = [list(owners.values()) for owners in hook_owners.values()]
        snap.keyed_dicts = [d for d, _ in keyed.values()]
        snap.keyed_keys = [keys for _, keys in keyed.values()]
        snap.tensors = tuple(values[i] for i in self.tensors)
        snap.tensor_check = _tensor_check(snap.tensors, self.tensor_meta) if snap.tensors else None
        if snap.tensors and snap.tensor_check is None:
            return None
        snap.versions = None
        if not snap.read_back() or not snap.holds(roots):  # what was read must read back the same
            return None
        if _dict_version is not None:  # then each dict's version says it is unchanged
            vdicts = {id(d): d for d in snap.gdicts}
            vdicts.update((id(d), d) for d in snap.absent_dicts)
            vdicts.update((id(d), d) for d in snap.sized)
            vdicts.update((i, d) for i, (d, _) in keyed.items())
            snap.vdicts = list(vdicts.values())
            snap.versions = list(map(_dict_version, snap.vdicts))
            # An empty dict filled from a dict by `update` keeps its version on 3.12+.
            snap.empties = [d for d in snap.vdicts if not d]
        return snap


def _probe_dict_version():
    """torch's C `dict_version` where it changes on every change of a dict's items, and of
    an object's attributes through its `__dict__`; else None. On 3.10/3.11 it is the PEP
    509 tag; on 3.12+ torch's stand-in, a number a dict watcher bumps: CPython 3.13.0 runs
    specialized attribute stores past the watchers (then None), and no Python notifies a
    watcher when an empty dict is filled by `update` from a dict (`PyDict_EVENT_CLONED`,
    which torch's callback ignores): snapshots check the dicts that were empty by their
    length, beside the versions."""
    try:
        from torch._C._dynamo.guards import dict_version
        d, o = {"a": 1}, OrderedDict(a=1)
        for change in (lambda: d.__setitem__("b", 2), lambda: d.__setitem__("b", 3), lambda: d.pop("b"),
                       lambda: d.update(a=[]), lambda: d.setdefault("c", 1), lambda: d.clear(),
                       lambda: o.__setitem__("a", 2), lambda: o.__delitem__("a")):
            before = dict_version(d), dict_version(o)
            change()
            if (dict_version(d), dict_version(o)) == before:
                return None
        return dict_version if _sees_attribute_writes(dict_version) else None
    except Exception:
        return None


class _Plain:
    pass


def _store(obj, value):
    obj.k = value


def _add(obj):
    obj.q = 1


def _delete(obj):
    del obj.q


def _sees_attribute_writes(dict_version) -> bool:
    """Whether attribute stores, additions and deletions through the interpreter's
    specialized instructions (warmed on other objects first) change the version of a
    plain object's and a module's `__dict__`, read before or after the dict was made."""
    for cls in (_Plain, torch.nn.Module):
        warm = [cls() for _ in range(8)]
        for _ in range(64):
            for w in warm:
                _store(w, 0)
                _add(w)
                _delete(w)
        for made_first in (False, True):
            obj = cls()
            _store(obj, 0)
            if made_first:
                obj.__dict__  # noqa: B018 (materializes the dict before the stores)
            d = _instance_dict(obj)
            for write in (lambda: _store(obj, 5), lambda: _add(obj), lambda: _delete(obj),
                          lambda: object.__setattr__(obj, "k", 6), lambda: setattr(obj, "k", 7)):
                before = dict_version(d)
                write()
                if dict_version(d) == before:
                    return False
    return True


_dict_version = _probe_dict_version()
VERSIONED = _dict_version is not None  # snapshots hold dicts by their versions


def _getter(keys):
    """itemgetter giving a tuple even of one key (itemgetter(k) gives the item itself)."""
    keys = list(keys)
    return operator.itemgetter(*(keys * 2 if len(keys) == 1 else keys))


class _Refuse(Exception):
    """A read the snapshot cannot take as planned (resolved elsewhere, changed type)."""




def _tensor_check(tensors, meta):
    """torch's C check of all `tensors` at once (their metadata now: the precise guards
    just passed on them), or None where it is unavailable."""
    try:
        from torch._C._dynamo.guards import TensorGuards
        check = TensorGuards(*tensors, dynamic_dims_sizes=[list(s) for s, _ in meta],
                             dynamic_dims_strides=[list(st) for _, st in meta]).check
        return check if check(*tensors) is True else None
    except Exception:
        return None
