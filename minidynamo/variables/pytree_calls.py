"""torch's pytree functions (`torch.utils._pytree`) called in a trace: `tree_flatten`,
`tree_unflatten`, `tree_leaves`, `tree_structure`, `tree_map`, and a `TreeSpec`'s methods.

A spec depends only on the structure, never on the leaves. So the tracked structure is
made real: builtin containers (tuples, lists, dicts, namedtuples, OrderedDicts,
defaultdicts, deques) with constant keys become the real containers, every leaf becomes
a stand-in object, and torch's own function runs on that. No program code runs (pytree
only reads those containers; a namedtuple class that makes instances its own way is
declined), and the spec it gives is a constant. What comes back is mapped to trackers: a
stand-in to its leaf, a container the trace passed in to that very tracker, a container
pytree made to a new tracker of its kind. A function given as `tree_map`'s func runs in
the trace, once per leaf, in pytree's order.

Declined, with the reason: `is_leaf=` given, and a node of a type registered with pytree
other than those builtins (transformers' `ModelOutput`, a registered dataclass).
"""
from __future__ import annotations

import types
from collections import OrderedDict, defaultdict, deque, namedtuple

import torch
import torch.utils._pytree as pytree

from ..exc import unsupported
from ..guards import Guard
from .base import ObjectConstantVariable
from .builtins import BuiltinVariable
from .collections_types import DefaultDictVariable, OrderedDictVariable
from .constant import ConstantVariable, is_constant_value
from .deques import DequeVariable
from .dict_keys import has_object_keys
from .dicts import DictVariable
from .lists import BaseListVariable, ListVariable, TupleVariable
from .namedtuples import _make_namedtuple, is_plain_namedtuple


class TreeSpecVariable(ObjectConstantVariable):
    """A `TreeSpec`: a constant (made from stand-ins in the trace, or passed in and pinned
    by identity). Attributes and queries are answered from it; `unflatten` and
    `flatten_up_to` run as the functions below do."""

    __slots__ = ()

    def describe(self):
        return f"pytree spec {self.value!r}".replace("\n", "")

    def rebuild(self, rb) -> str:
        if self.source is not None:
            return self.source.expr(rb.ns)
        # eager makes a new spec per call: made again from a tree of that structure
        template = self.value.unflatten([0] * self.value.num_leaves)
        return f"{rb.ns.bind(pytree.tree_structure, 'tree_structure')}({rb.ns.bind(template, 'tree')})"

    def var_getattr(self, tx, name):
        if name in _SPEC_METHODS:
            return super().method_getattr(tx, name)
        if name in ("children_specs", "_children"):
            return ListVariable([TreeSpecVariable(s) for s in getattr(self.value, name)])
        if name in _SPEC_VALUES:
            return tx.wrap_constant_result(getattr(self.value, name), f"TreeSpec.{name}")
        unsupported("construct", f"attribute {name!r} of a pytree TreeSpec")

    def call_method(self, tx, name, args, kwargs):
        spec = self.value
        if name == "unflatten" and len(args) == 1 and not kwargs:
            return unflatten(tx, args[0], spec)
        if name == "flatten_up_to" and len(args) == 1 and not kwargs:
            tree = Structure()
            return ListVariable([tree.back(tx, s) for s in _run(spec.flatten_up_to, tree.real(args[0]))])
        if name in ("is_leaf", "children", "child") and not kwargs and all(a.is_python_constant() for a in args):
            result = _run(getattr(spec, name), *[a.as_python_constant() for a in args])
            if name == "is_leaf":
                return ConstantVariable(result)
            return TreeSpecVariable(result) if name == "child" else ListVariable(
                [TreeSpecVariable(s) for s in result])
        unsupported("call", f"TreeSpec.{name} with these arguments is not traced")


_SPEC_METHODS = ("unflatten", "flatten_up_to", "is_leaf", "children", "child")
_SPEC_VALUES = ("num_leaves", "num_nodes", "num_children", "type", "context", "_context")


class _Leaf:
    """A leaf's stand-in: pytree takes any object of an unregistered class as a leaf."""

    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var


class Structure:
    """One call's mapping between trackers and the real structure pytree sees."""

    def __init__(self):
        self.origin: dict = {}  # id(real container) -> the tracker it was made from
        self.keep: list = []  # those containers, alive while their ids are keys

    def real(self, var):
        """The real structure of `var`: its builtin containers real, leaves stand-ins."""
        if isinstance(var, ConstantVariable) and is_constant_value(var.value) and type(var.value) not in _NODE_CONSTANTS:
            return var.value  # (immutable: the value itself is as good a leaf, and torch.Size takes ints)
        made = self._container(var)
        if made is None:
            return _Leaf(var)
        self.origin[id(made)] = var
        self.keep.append(made)
        return made

    def _container(self, var):
        kind = type(var)
        if kind is ListVariable:
            return [self.real(i) for i in var.items]
        if kind is TupleVariable:
            cls = var.tuple_type
            if cls is tuple:
                return tuple(self.real(i) for i in var.items)
            if pytree.is_namedtuple_class(cls):
                if not is_plain_namedtuple(cls):
                    unsupported("call", f"a pytree holding a {cls.__qualname__}, a namedtuple class that makes "
                                        "its instances its own way, is not traced")
                return tuple.__new__(cls, [self.real(i) for i in var.items])
        if isinstance(var, TupleVariable) and var.tuple_type is torch.Size:
            if not var.is_python_constant():
                unsupported("call", "a pytree holding a torch.Size with symbolic sizes is not traced")
            return var.as_python_constant()
        if isinstance(var, TupleVariable) and pytree.is_structseq_class(var.tuple_type):  # torch.return_types
            return var.tuple_type([self.real(i) for i in var.items])
        if kind in (DictVariable, OrderedDictVariable, DefaultDictVariable) and var.dict_type in _DICT_TYPES:
            items = var.items
            if has_object_keys(items):
                unsupported("call", "a pytree holding a dict whose keys are objects is not traced "
                                    "(the spec would hold them)")
            pairs = [(k, self.real(v)) for k, v in items.items()]
            if kind is DefaultDictVariable:
                factory = var.factory
                if not factory.is_python_constant():
                    unsupported("call", f"a pytree holding a defaultdict whose factory is {factory.describe()}")
                return defaultdict(factory.as_python_constant(), pairs)
            return var.dict_type(pairs)
        if kind is DequeVariable:
            return deque([self.real(i) for i in var.items], var.maxlen)
        if isinstance(var, ConstantVariable) and type(var.value) in _NODE_CONSTANTS:
            return _NODE_CONSTANTS[type(var.value)](self.real(ConstantVariable(v)) for v in var.value)
        cls = _type_of(var)
        if cls is not None and (namedtuple if pytree.is_namedtuple_class(cls) else cls) in pytree.SUPPORTED_NODES:
            unsupported("call", f"a pytree holding a {cls.__qualname__} (a node type registered with pytree) "
                                "is not traced", hint="pass the tensors it holds in a tuple, list or dict")
        return None

    def back(self, tx, obj):
        """The tracker of what pytree returned: a leaf's own, a container's from the trace,
        or a new one for a container pytree made."""
        if type(obj) is _Leaf:
            return obj.var
        found = self.origin.get(id(obj))
        if found is not None:
            return found
        cls = type(obj)
        if cls is list:
            return ListVariable([self.back(tx, i) for i in obj])
        if cls is tuple:
            return TupleVariable([self.back(tx, i) for i in obj])
        if pytree.is_namedtuple_class(cls):
            made = _make_namedtuple(tx, cls, [self.back(tx, i) for i in obj], {})
            if made is None:
                unsupported("call", f"making a {cls.__qualname__} from a pytree is not traced")
            return made
        if pytree.is_structseq_class(cls):
            return tx.wrap(cls, None).call_function(tx, [TupleVariable([self.back(tx, i) for i in obj])], {})
        if cls is dict:
            return DictVariable({k: self.back(tx, v) for k, v in obj.items()})
        if cls is OrderedDict:
            return OrderedDictVariable({k: self.back(tx, v) for k, v in obj.items()})
        if cls is defaultdict:
            factory = ConstantVariable(None) if obj.default_factory is None else tx.wrap_constant_result(
                obj.default_factory, "a defaultdict's factory")
            return DefaultDictVariable({k: self.back(tx, v) for k, v in obj.items()}, factory)
        if cls is deque:
            return DequeVariable([self.back(tx, i) for i in obj], obj.maxlen)
        if cls is torch.Size:
            return TupleVariable([ConstantVariable(i) for i in obj], tuple_type=torch.Size)
        if is_constant_value(obj):
            return ConstantVariable(obj)
        unsupported("call", f"a pytree node of type {cls.__qualname__} made by unflattening is not traced")


_DICT_TYPES = (dict, OrderedDict, defaultdict)
_NODE_CONSTANTS = {tuple: tuple, list: list}  # a folded constant holding items


def _type_of(var):
    try:
        return var.python_type()
    except Exception:  # noqa: BLE001 - a tracker whose type is not known is no node pytree knows
        return None


def _run(fn, *args):
    """torch's pytree function on stand-ins; what it raises (a structure mismatch) declines."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - eager raises it for real
        unsupported("exceptions", f"{type(e).__name__}: {e}", raised=type(e) if type(e) in (
            ValueError, TypeError, IndexError, KeyError) else None)


def _no_is_leaf(name: str, kwargs: dict):
    is_leaf = kwargs.pop("is_leaf", None)
    if is_leaf is not None and not (isinstance(is_leaf, ConstantVariable) and is_leaf.value is None):
        unsupported("call", f"torch.utils._pytree.{name} with is_leaf= is not traced",
                    hint="flatten without is_leaf, or keep such leaves out of the tree")
    if kwargs:
        unsupported("call", f"torch.utils._pytree.{name} with keywords {sorted(kwargs)} is not traced")


def flatten(tx, tree):
    structure = Structure()
    leaves, spec = _run(pytree.tree_flatten, structure.real(tree))
    return [structure.back(tx, leaf) for leaf in leaves], spec


def _leaf_items(tx, leaves) -> list:
    if isinstance(leaves, BaseListVariable):
        return list(leaves.items)
    return list(tx.drain(leaves) if leaves.python_type() not in (list, tuple) else leaves.unpack_sequence(tx))


def unflatten(tx, leaves, spec):
    items = _leaf_items(tx, leaves)
    structure = Structure()
    # every leaf as it is, containers included: a stand-in each, never looked into
    return structure.back(tx, _run(spec.unflatten, [_Leaf(i) for i in items]))


def _spec_of(var):
    if not isinstance(var, TreeSpecVariable):
        unsupported("call", f"torch.utils._pytree.tree_unflatten with {var.describe()} as the spec is not traced")
    return var.value


def tree_flatten(tx, args, kwargs):
    tree, = _arguments("tree_flatten", args, kwargs, ("tree",))
    leaves, spec = flatten(tx, tree)
    return TupleVariable([ListVariable(leaves), TreeSpecVariable(spec)])


def tree_leaves(tx, args, kwargs):
    tree, = _arguments("tree_leaves", args, kwargs, ("tree",))
    return ListVariable(flatten(tx, tree)[0])


def tree_structure(tx, args, kwargs):
    tree, = _arguments("tree_structure", args, kwargs, ("tree",))
    return TreeSpecVariable(flatten(tx, tree)[1])


def tree_unflatten(tx, args, kwargs):
    leaves, spec = _arguments("tree_unflatten", args, kwargs, ("leaves", "treespec"), is_leaf=False)
    if isinstance(leaves, TreeSpecVariable) and not isinstance(spec, TreeSpecVariable):
        leaves, spec = spec, leaves  # torch takes the two either way round
    return unflatten(tx, leaves, _spec_of(spec))


def tree_map(tx, args, kwargs):
    if len(args) < 2:
        unsupported("call", "torch.utils._pytree.tree_map without func and tree is not traced")
    func, tree, *rests = args
    _no_is_leaf("tree_map", dict(kwargs))
    leaves, spec = flatten(tx, tree)
    columns = [leaves]
    for rest in rests:
        structure = Structure()
        columns.append([structure.back(tx, s) for s in _run(spec.flatten_up_to, structure.real(rest))])
    mapped = [func.call_function(tx, list(row), {}) for row in zip(*columns)]
    return unflatten(tx, ListVariable(mapped), spec)


def tree_map_only(tx, args, kwargs):
    """`func` on the leaves that are instances of the given types (or pass the given
    predicate), the other leaves kept, as torch's map_only does."""
    if len(args) != 3:
        unsupported("call", "torch.utils._pytree.tree_map_only without (types, func, tree) is not traced")
    which, func, tree = args
    _no_is_leaf("tree_map_only", dict(kwargs))
    by_type = which.is_python_constant() and isinstance(which.as_python_constant(), (type, tuple, types.UnionType))
    leaves, spec = flatten(tx, tree)
    mapped = []
    for leaf in leaves:
        chosen = BuiltinVariable(isinstance).call_function(tx, [leaf, which], {}) if by_type \
            else which.call_function(tx, [leaf], {})
        mapped.append(func.call_function(tx, [leaf], {}) if chosen.truthy(tx) else leaf)
    return unflatten(tx, ListVariable(mapped), spec)


def _arguments(name, args, kwargs, names, is_leaf=True):
    """The arguments `names`, bound as torch's signature binds them; a trailing `is_leaf`
    (positional or keyword) must be None."""
    args, kwargs = list(args), dict(kwargs)
    if is_leaf:
        if len(args) > len(names):
            kwargs["is_leaf"] = args.pop(len(names))
        _no_is_leaf(name, {"is_leaf": kwargs.pop("is_leaf")} if "is_leaf" in kwargs else {})
    bound = args + [kwargs.pop(n) for n in names[len(args):] if n in kwargs]
    if kwargs or len(bound) != len(names):
        unsupported("call", f"torch.utils._pytree.{name} called with these arguments is not traced")
    return bound


CALLS = {
    pytree.tree_flatten: tree_flatten,
    pytree.tree_unflatten: tree_unflatten,
    pytree.tree_leaves: tree_leaves,
    pytree.tree_structure: tree_structure,
    pytree.tree_map: tree_map,
    pytree.tree_map_only: tree_map_only,
}


def is_treespec(value) -> bool:
    return isinstance(value, pytree.TreeSpec)


def wrap_treespec(tx, value, source):
    """A spec reached from outside: guarded by value where equal specs unflatten alike (a
    spec handed over a graph break is a new object per call), else by identity (dict keys
    1 and True are equal, yet make different dicts)."""
    kind = "EQUALS_MATCH" if _str_keys_only(value) else "ID_MATCH"
    tx.output.guards.add(Guard(kind, source, value))
    return TreeSpecVariable(value, source)


def _str_keys_only(spec) -> bool:
    context = spec._context
    if spec.type is defaultdict:
        context = context[1]
    if spec.type in (dict, OrderedDict, defaultdict) and not all(type(k) is str for k in context):
        return False
    return all(_str_keys_only(child) for child in spec._children)
