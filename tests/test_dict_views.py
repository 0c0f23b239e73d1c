"""dict.keys()/values()/items() are live views: a view taken before the dict changes shows
the change, as CPython's do. Equality follows CPython (keys and items views compare like
sets, values views only by identity); iterating a dict that changes size raises in eager,
so the optimized call falls back."""
import torch

from helpers import Args, check, check_fallback


def t():
    return torch.arange(3.0)


def test_keys_view_sees_later_insertions():
    def f(x):
        d = {1: 2, 2: 3}
        k = d.keys()
        d[4] = x
        return x + len(k), 4 in k, 5 not in k, list(k), tuple(k), sorted(k), bool(k), str(k)

    check(f, t(), kind="graph")


def test_keys_view_sees_deletion_and_clear():
    def f(x):
        d = {"a": x, "b": x + 1}
        k, v, i = d.keys(), d.values(), d.items()
        del d["a"]
        first = (list(k), len(v), len(i))
        d.clear()
        return first, list(k), len(v), bool(i), x

    check(f, t(), kind="graph")


def test_values_view_is_live():
    def f(x):
        d = {"a": x}
        v = d.values()
        d["b"] = x * 2
        d["a"] = x + 10
        return len(d.values()), len(v), list(v), sum(v), max(len(v), 1)

    check(f, t(), kind="graph")


def test_values_view_membership_of_constants():
    def f(x):
        d = {"a": 1}
        v = d.values()
        d["b"] = 2
        return 2 in v, 3 in v, x + 1

    check(f, t(), kind="graph")


def test_items_view_is_live():
    def f(x):
        d = {"a": 1}
        i = d.items()
        d["b"] = 2
        d["a"] = 3
        return list(i), ("b", 2) in i, ("a", 1) in i, sorted(i), dict(i), x + 1

    check(f, t(), kind="graph")


def test_items_view_with_tensor_values_iterates_live():
    def f(x):
        d = {"a": x}
        i = d.items()
        d["b"] = x * 2
        return [k for k, _ in i], [v + 1 for _, v in i]

    check(f, t(), kind="graph")


def test_reversed_view_after_mutation():
    def f(x):
        d = {1: x, 2: x + 1}
        k, v, i = d.keys(), d.values(), d.items()
        d[3] = x + 2
        return list(reversed(k)), list(reversed(v)), [a for a, _ in reversed(i)]

    check(f, t(), kind="graph")


def test_keys_views_compare_like_sets():
    def f(x):
        d = {1: 2, 2: 3}
        k = d.keys()
        d2 = {2: 0, 1: 0}
        same_before = d2.keys() == k
        d[4] = 5
        return (same_before, d2.keys() == k, k == {1, 2, 4}, {1, 2, 4} == k, k != {1, 2},
                k == [1, 2, 4], k == d.keys(), k <= {1, 2, 4, 5}, x + 1)

    check(f, t(), kind="graph")


def test_items_views_compare_like_sets():
    def f(x):
        d = {1: 2}
        i = d.items()
        d[2] = 3
        return i == {(1, 2), (2, 3)}, i == {(1, 2)}, i == {2: 3, 1: 2}.items(), x + 1

    check(f, t(), kind="graph")


def test_values_views_compare_by_identity():
    def f(x):
        d = {1: 2}
        v = d.values()
        w = v
        return v == v, v == w, v != w, v == [2], x + 1

    def g(x):  # two views are two objects: never equal (declined: is-ness of two trackers)
        d = {1: 2}
        return d.values() == d.values(), x + 1

    check(f, t(), kind="graph")
    check(g, t(), kind="eager")


def test_set_operations_on_views():
    def f(x):
        d = {1: 2, 2: 3}
        k, i = d.keys(), d.items()
        d[4] = 5
        other = {2: 3, 9: 0}
        return (k & other.keys(), k | other.keys(), k - other.keys(), k ^ other.keys(),
                i & other.items(), i - other.items(), k.isdisjoint(other.keys()),
                k.isdisjoint({7}), x + 1)

    def with_a_set(x):
        d = {1: 2}
        k = d.keys()
        d[4] = 5
        return k & {1, 4}, k - {1}, {4, 7} | k, x + 1

    check(f, t(), kind="graph")
    check(with_a_set, t(), kind="graph")


def test_values_updated_while_iterating_items_are_read_live():
    def f(x):
        d = {0: x, 1: x}
        seen = []
        for k, v in d.items():
            seen.append(v)
            d[1] = v * 3  # key 1's value changes before the loop reaches it
        return seen

    def g(x):
        d = {0: x, 1: x}
        seen = []
        for v in d.values():
            seen.append(v + 1)
            d[1] = x * 5
        return seen

    def h(x):  # no step after the change, or over a copy: no error
        d = {0: x}
        for k in d:
            d[k + 1] = x
            break
        for k in list(d):
            d[k + 10] = x + k
        return d

    for fn in (f, g, h):
        check(fn, t(), kind="graph")


def test_dict_growing_while_iterated_raises_like_eager():
    def over_dict(x):
        d = {0: x}
        for k in d:
            d[k + 1] = x
        return d

    def over_keys(x):
        d = {0: x, 1: x}
        for k in d.keys():
            if k == 1:
                d[5] = x  # on the last item: the next step still raises
        return d

    def over_items(x):
        d = {0: x}
        for k, v in d.items():
            del d[k]
        return d

    def over_values(x):
        d = {0: x, 1: x}
        for v in d.values():
            d.pop(1, None)
        return d

    def with_next(x):
        d = {0: x, 1: x}
        it = iter(d)
        first = next(it)
        d[2] = x
        return first, next(it, None)

    for fn in (over_dict, over_keys, over_items, over_values, with_next):
        check_fallback(fn, t(), reason="exceptions")


def test_keys_replaced_at_same_size_while_iterated_falls_back():
    def f(x):
        d = {0: x, 1: x}
        out = []
        for k in d:
            out.append(k)
            if k == 0:
                d.pop(1)
                d[7] = x
        return out

    check_fallback(f, t(), reason="construct")


def test_views_of_argument_dicts():
    def f(d, x):
        k, v, i = d.keys(), d.values(), d.items()
        return x + len(k), list(k), "a" in k, "z" in k, [y * 2 for y in v], [a for a, _ in i], \
            k == {"a", "b"}

    args = [Args({"a": t(), "b": t() + 1}, t()), Args({"a": t() * 3, "b": t()}, t())]
    check(f, *args, kind="graph")
    check(f, Args({"a": t()}, t()), Args({"b": t(), "a": t()}, t()), kind="graph", same_entry=False)

    def g(d, x):  # the caller's dict outlives the call: the write is replayed on it after the graph
        k = d.keys()
        d["new"] = x
        return len(k)

    check(g, Args({"a": t()}, t()), kind="constant")  # the dict after the call is compared too


def test_a_view_is_neither_a_list_nor_returned_as_one():
    def f(x):
        d = {"a": x}
        return d.keys()[0]

    def g(x):
        d = {"a": x}
        return torch.stack(d.values())  # eager: TypeError, a view is not a sequence

    def h(x):  # eager returns the view itself: the optimized call runs eagerly
        d = {"a": x}
        k = d.keys()
        d["b"] = x
        return k, len(d)

    def i(x):
        d = {"a": 1}
        i = d.items()
        d["b"] = 2
        return (i, x + 1)

    check(f, t(), kind="eager", reason="exceptions")
    check(g, t(), kind="eager")
    check(h, t(), kind="eager", reason="construct")
    check(i, t(), kind="eager", reason="construct")
