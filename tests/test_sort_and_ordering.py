"""`list.sort(key=, reverse=)` on lists holding tensors, the ordering of tuples and lists
(`<` item by item, as CPython compares sequences: `sorted(d.items())`), and attribute
misses on builtin types (`hasattr(int, name)`, which dataclasses.astuple asks): traced
into one graph, against eager."""
import torch
from helpers import CountingBackend, check, same_outcome

import minidynamo


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (3,)), generator=g)


def test_list_sort_with_a_key_over_items_holding_tensors():
    def f(x):
        items = [(3, x), (1, x * 2), (2, x + 1)]
        items.sort(key=lambda p: p[0], reverse=True)
        names = ["bb", "a", "ccc"]
        names.sort(key=len)
        plain = [3, 1, 2]
        plain.sort()
        return [p[1] for p in items], names, plain

    check(f, t(3), kind="graph", graphs=1)


def test_list_sort_key_sees_the_list_empty_and_changing_it_raises():
    def reads(x):
        items = [x, x * 2]
        seen = []
        items.sort(key=lambda v: seen.append(len(items)) or 0)
        return items, seen

    def changes(x):
        items = [x, x * 2]
        items.sort(key=lambda v: items.append(v) or 0)
        return items

    check(reads, t(3), kind="graph", graphs=1)
    for fn in (changes,):
        same_outcome(fn, minidynamo.optimize(fn, backend=CountingBackend()), t(3))


def test_list_sort_by_tensor_values_breaks():
    def f(x, y):
        items = [x, y]
        items.sort(key=lambda v: v.sum())
        return items

    check(f, (t(3), t(3, seed=1)), kind="break", reason="data_dependent")


def test_sequence_ordering_item_by_item():
    def f(x):
        d = {"b": x, "a": x * 2, "c": x + 1}
        pairs = sorted(d.items())
        return ([k for k, _ in pairs], pairs[0][1], max(d.items())[0], (1, 2) < (1, 3), [1, 2] >= [1, 2],
                (1, "a") > (1,), (x.shape[0], 1) <= (3, 0), sorted([(2, "b"), (1, "z"), (2, "a")]))

    check(f, t(3), kind="graph", graphs=1)


def test_ordering_decided_by_tensors_breaks_and_mixed_kinds_raise():
    def by_tensor(x, y):
        return (x, 1) < (y, 2)

    def mixed(x):
        return x + 1, (1, 2) < [1, 3]

    check(by_tensor, (t(3), t(3, seed=1)), kind="eager")
    same_outcome(mixed, minidynamo.optimize(mixed, backend=CountingBackend()), t(3))


def test_attribute_misses_on_builtin_types():
    def f(x):
        return (x + 1, hasattr(int, "__dataclass_fields__"), hasattr(type(3), "bit_length"),
                hasattr(str, "nope"), getattr(list, "missing", 5))

    check(f, t(3), kind="graph", graphs=1)
