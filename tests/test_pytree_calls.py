"""torch.utils._pytree's functions called in traced code (variables/pytree_calls.py):
flatten / unflatten round trips, tree_map with traced functions, specs as constants, and
the declines (is_leaf=, registered node types of the program's). Differential: each runs
eagerly and optimized and compares results, side effects and graph counts; torch.compile's
graph counts for the same functions agree."""
import collections
import dataclasses
from collections import OrderedDict, defaultdict, deque

import pytest
import torch
import torch.utils._pytree as pytree
from helpers import CountingBackend, check
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

import minidynamo

Point = collections.namedtuple("Point", "x y")


class Box:
    def __init__(self, t):
        self.t = t


def _t(*shape):
    return torch.randn(*shape or (3,))


def round_trip(x, y):
    leaves, spec = pytree.tree_flatten((x, {"a": y, "b": [x, 2, None]}, Point(y, "s")))
    leaves = [leaf * 2 if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    return pytree.tree_unflatten(leaves, spec), spec.num_leaves, spec.num_nodes


def imported_names(x, y):
    leaves, spec = tree_flatten([x, (y, 3)])
    return tree_unflatten([leaf + 1 if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves], spec)


def collections_round_trip(x, y):
    tree = OrderedDict(b=x, a=deque([y, x], maxlen=4))
    tree["c"] = defaultdict(list, {"k": y})
    leaves, spec = pytree.tree_flatten(tree)
    out = pytree.tree_unflatten([leaf.sin() for leaf in leaves], spec)
    return (type(out), list(out), out["b"], list(out["a"]), type(out["a"]), out["a"].maxlen, dict(out["c"]),
            type(out["c"]), out["c"].default_factory)


def map_lambda(x, y):
    return pytree.tree_map(lambda t: t * 3 + 1, {"p": Point(x, y), "q": [y]})


def map_torch_function(x, y):
    return tree_map(torch.neg, (x, [y, x]))


def map_several_trees(x, y):
    return pytree.tree_map(lambda a, b: a + b, [x, (y, x)], [y, (x, y)])


def map_with_prefix(x, y):
    # the second tree holds a whole list where the first holds a leaf
    return pytree.tree_map(lambda a, b: a * len(b), [x, y], [[1, 2], [3]])


def map_only(x, y):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.cos(), {"t": x, "n": 4, "l": [y, "s"]})


def leaves_and_structure(x, y):
    tree = {"a": (x, y), "b": [y]}
    spec = pytree.tree_structure(tree)
    return sum(pytree.tree_leaves(tree)), spec == pytree.tree_structure({"a": (1, 2), "b": [3]}), \
        spec != pytree.tree_structure([x]), spec.num_leaves, spec.num_children, spec.is_leaf()


def spec_methods(x, y):
    spec = pytree.tree_structure((x, [y, y]))
    parts = spec.flatten_up_to(((x + 1), [y, x]))
    return spec.unflatten([x, y, x * 2]), parts, spec.child(1).num_leaves, len(spec.children())


def spec_returned(x, y):
    leaves, spec = pytree.tree_flatten({"k": [x, y]})
    return leaves[0] + leaves[1], spec


def user_object_leaf(x, y):
    box = Box(x)
    leaves, spec = pytree.tree_flatten([box, y])
    out = pytree.tree_unflatten(leaves, spec)
    return out[0] is box, out[0].t + out[1], spec.num_leaves


def leaf_list_kept(x, y):
    inner = [x, y]
    out = pytree.tree_map(lambda a, b: (a, b), [x], [inner])
    out[0][1].append(x)  # the very list passed in: flatten_up_to keeps it whole
    return inner, x + 1


def mismatch(x, y):
    return pytree.tree_map(lambda a, b: a + b, [x, y], [x])


def appended_calls(x, y):
    seen = []
    out = pytree.tree_map(lambda t: seen.append(t.shape) or t + 1, {"b": x, "a": [y, x]})
    return out, seen


def torch_structures(x, y):
    # a torch.return_types result and a torch.Size: nodes torch registers with pytree
    leaves, spec = pytree.tree_flatten([torch.max(x, 0), x.shape, (y, 1.5)])
    out = pytree.tree_unflatten([leaf * 2 for leaf in leaves], spec)
    return out, type(out[0]), type(out[1]), spec.num_leaves


CASES = [torch_structures, round_trip, imported_names, collections_round_trip, map_lambda, map_torch_function, map_several_trees,
         map_with_prefix, map_only, leaves_and_structure, spec_methods, spec_returned, user_object_leaf,
         leaf_list_kept, appended_calls]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_pytree_call_traced(fn):
    check(fn, (_t(), _t()), (_t(), _t()), kind="graph")


def test_returned_spec_is_a_fresh_equal_spec():
    opt = minidynamo.optimize(backend=CountingBackend())(spec_returned)
    x, y = _t(), _t()
    _, first = opt(x, y)
    _, second = opt(x, y)
    assert first == second == spec_returned(x, y)[1] and first is not second


SPEC = pytree.tree_structure({"a": [0, (0, 0)], 1: 0})


def test_spec_passed_in():
    def f(leaves, spec):
        return pytree.tree_unflatten([t * 2 for t in leaves], spec), spec.num_leaves

    check(f, ([_t(), _t(), _t()], pytree.tree_structure([0, (0, 0)])), kind="graph")

    def g(leaves):  # a global spec, with a key that is no str: pinned by identity
        return pytree.tree_unflatten([t * 2 for t in leaves], SPEC), SPEC.num_leaves

    check(g, ([_t(), _t(), _t(), _t()],), kind="graph")


def test_spec_handed_over_a_break():
    def f(x, y):
        leaves, spec = pytree.tree_flatten({"k": [x, y]})
        minidynamo.graph_break()
        return pytree.tree_unflatten([leaf + 1 for leaf in leaves], spec)

    check(f, (_t(), _t()), (_t(), _t()), kind="break", graphs=1)


def test_structure_mismatch_raises_as_eager():
    check(mismatch, (_t(), _t()), kind="break", reason="exceptions")


def test_is_leaf_declines_with_reason():
    def f(x, y):
        leaves, _ = pytree.tree_flatten([x, (y, x)], is_leaf=lambda n: isinstance(n, tuple))
        return [leaf if isinstance(leaf, tuple) else leaf + 1 for leaf in leaves]

    info = check(f, (_t(), _t()), kind="break", reason="call")
    assert "is_leaf" in info.entries[0].break_reason.detail


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


pytree.register_dataclass(Pair)


def test_registered_user_node_declines_with_reason():
    def f(x, y):
        leaves, spec = pytree.tree_flatten([Pair(x, y)])
        return pytree.tree_unflatten([leaf + 1 for leaf in leaves], spec)

    info = check(f, (_t(), _t()), kind="break", reason="call")
    assert "registered with pytree" in info.entries[0].break_reason.detail


def _torch_compile_graphs(fn, *args) -> int:
    torch._dynamo.reset()
    try:
        return torch._dynamo.explain(fn)(*args).graph_count
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("fn", [round_trip, map_lambda, map_several_trees, spec_methods], ids=lambda f: f.__name__)
def test_graphs_as_torch_compile(fn):
    backend = CountingBackend()
    x, y = _t(), _t()
    minidynamo.optimize(backend=backend)(fn)(x, y)
    assert backend.calls == _torch_compile_graphs(fn, x, y) == 1
