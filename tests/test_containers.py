"""Constants, tuples, lists, dicts, sets and strings, differential against eager."""
import pytest
import torch

import minidynamo
from helpers import CountingBackend, assert_uses, by_version, check


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


# --- constants of every literal kind ----------------------------------------------
def consts(x):
    return (x + 1, 2.5, -3, 1e300, 0x10, 1_000_000, 10 ** 30, 3j, "s", b"b", None, True, False,
            ..., (1, (2, "a")), frozenset({1, 2}))


def test_constants_of_every_kind():
    assert_uses(consts, "LOAD_CONST")
    check(consts, t(), kind="graph")


def test_constant_only_function():
    def f(x):
        return {"a": 1, "b": (2.0, None)}, [True, "x"]

    check(f, t(), kind="constant")


# --- tuples ------------------------------------------------------------------------
def test_tuple_build_index_slice_len():
    def f(x, y):
        tup = (x, y, x * 2, 3)
        return tup[0] + tup[-2], tup[1:3], tup[::2], len(tup), 3 in tup[3:]

    assert_uses(f, "BUILD_TUPLE", by_version(py310=("BINARY_SUBSCR",), py314=("BINARY_OP []",)),
                by_version(py310=("BUILD_SLICE", "BINARY_SLICE"), py314=("LOAD_CONST slice",)))
    check(f, (t(), t()), kind="graph")


def test_in_on_tuple_with_tensors_raises_like_eager():
    def f(x, y):
        return 3 in (x, y, 3)  # x == 3 is a tensor: bool() of it raises in eager

    check(f, (t(), t()), kind="eager")


def test_dict_views_returned_fall_back():
    def f(x):
        d = {"a": x}
        return d.keys(), len(d.items()), "a" in d.keys(), x + 1

    check(f, t(), kind="eager", reason="construct")


def test_tuple_argument_unpack_and_len():
    def f(pair):
        a, b = pair
        return a * b, len(pair)

    assert_uses(f, "UNPACK_SEQUENCE")
    check(f, ((t(), t()),), kind="graph")


def test_tuple_concat_repeat_compare():
    def f(x):
        a = (1, 2) + (3,)
        b = (x,) * 2
        return a, b[0] + b[1], a == (1, 2, 3), a < (1, 3), (x, 1) + (2,)

    check(f, t(), kind="graph")


def test_starred_unpack():
    def f(x, y, z):
        first, *rest = (x, y, z)
        *init, last = [x, y, z]
        a, *mid, b = (1, 2, 3, 4, 5)
        return first + last, rest, init, mid, a + b

    assert_uses(f, "UNPACK_EX")
    check(f, (t(), t(), t()), kind="graph")


def test_starred_in_literals():
    def f(x, rest):
        a = (*rest, x)
        b = [x, *rest, *rest]
        c = {**{"k": x}, "j": 1}
        return a, b, c, x + 1

    assert_uses(f, ("LIST_EXTEND", "BUILD_TUPLE_UNPACK"), "DICT_UPDATE")
    check(f, (t(), (t(), t())), kind="graph")


def test_nested_unpack_and_swap():
    def f(x, y):
        (a, b), c = (x, y), 3
        a, b = b, a
        return a - b, c

    check(f, (t(), t()), kind="graph")


def test_unpack_wrong_length_raises_like_eager():
    def f(x):
        a, b = (x, x, x)
        return a, b

    check(f, t(), kind="eager", reason="exceptions")


# --- lists -------------------------------------------------------------------------
def test_list_methods_inside_function():
    def f(x):
        lst = [x]
        lst.append(x * 2)
        lst.extend([x + 1, x - 1])
        lst.insert(0, x * 0)
        last = lst.pop()
        first = lst.pop(0)
        lst.reverse()
        lst[0] = lst[0] + 10
        del lst[1]
        return lst, last, first, len(lst)

    assert_uses(f, "BUILD_LIST", "STORE_SUBSCR", "DELETE_SUBSCR")
    check(f, t(), kind="graph")


def test_list_slicing_and_slice_assignment():
    def f(x):
        lst = [x, x + 1, x + 2, x + 3, x + 4]
        lst[1:3] = [x * 10]
        return lst[1:], lst[:-1], lst[::-1], lst[1:4:2]

    assert_uses(f, ("STORE_SUBSCR", "STORE_SLICE"))
    check(f, t(), kind="graph")


def test_list_argument_read_only():
    def f(xs):
        total = xs[0]
        for v in xs[1:]:
            total = total + v
        return total, len(xs), xs[-1]

    check(f, ([t(), t(), t()],), kind="graph")


def test_list_in_and_not_in_constants():
    def f(x):
        names = ["a", "b", 3]
        return x + 1, "a" in names, 4 not in names, 3 in names

    assert_uses(f, "CONTAINS_OP")
    check(f, t(), kind="graph")


def test_list_concat_repeat_iadd():
    def f(x):
        a = [1, 2] + [3]
        b = [x] * 3
        a += [4]
        a *= 2
        return a, b, [0] * 4, b[0] + 1

    check(f, t(), kind="graph")


def test_list_copy_is_independent():
    def f(x):
        a = [x, 1]
        b = a.copy()
        c = list(a)
        b.append(2)
        c[1] = 5
        return a, b, c, c[0] - 1

    check(f, t(), kind="graph")


def test_list_aliasing_inside_function():
    def f(x):
        a = [x]
        b = a
        b.append(x + 1)
        return a, len(a), a is b

    check(f, t(), kind="graph")


def test_list_index_count_sort_on_constants():
    def f(x):
        lst = [3, 1, 2, 3]
        i = lst.index(2)
        c = lst.count(3)
        lst.sort()
        lst.sort(reverse=True)
        return x * i, c, lst, sorted([5, 4]), lst.remove(1), lst

    check(f, t(), kind="graph")


def test_list_pop_empty_raises_like_eager():
    def f(x):
        lst = []
        return lst.pop()

    # The call that raises breaks the graph: it runs natively and raises there.
    check(f, t(), kind="break", reason="exceptions")


def test_list_index_out_of_range_raises_like_eager():
    def f(x):
        return [x][3]

    check(f, t(), kind="eager", reason="exceptions")


# --- dicts -------------------------------------------------------------------------
def test_dict_literals_and_indexing():
    def f(x, y):
        d = {"x": x, "y": y, 1: 2}
        e = dict(a=x, b=3)
        return d["x"] + e["a"], d[1], len(d), "y" in d, "z" not in d

    assert_uses(f, ("BUILD_MAP", "BUILD_CONST_KEY_MAP"))
    check(f, (t(), t()), kind="graph")


def test_dict_methods_inside_function():
    def f(x):
        d = {"a": x}
        d["b"] = x * 2
        d.update({"c": x + 1})
        d.update(e=4)
        got = d.get("a"), d.get("missing"), d.get("missing", 7)
        popped = d.pop("b")
        d.setdefault("f", 9)
        keys = list(d.keys())
        vals = list(d.values())
        items = list(d.items())
        del d["c"]
        return d, got, popped, keys, vals, items

    check(f, t(), kind="graph")


def test_dict_iteration_over_items_and_keys():
    def f(x):
        d = {"a": 1, "b": 2}
        out = x
        for k, v in d.items():
            out = out * v
        names = [k for k in d]
        return out, names

    check(f, t(), kind="graph")


def test_dict_argument_read():
    def f(cfg, x):
        return x * cfg["scale"] + cfg["bias"], cfg.get("missing", 0), sorted(cfg)

    check(f, ({"scale": 2.0, "bias": 1.0}, t()), kind="graph")


def test_dict_of_tensors_argument():
    def f(d):
        return {k: v * 2 for k, v in d.items()}

    check(f, ({"a": t(), "b": t(2)},), kind="graph")


def test_dict_missing_key_raises_like_eager():
    def f(x):
        return {"a": x}["b"]

    check(f, t(), kind="eager", reason="exceptions")


def test_dict_copy_and_merge():
    def f(x):
        a = {"a": x}
        b = a.copy()
        b["b"] = 1
        c = {**a, **b, "c": 2}
        return a, b, c, x + 1

    check(f, t(), kind="graph")


# --- sets --------------------------------------------------------------------------
def test_set_literals_and_comprehension():
    def f(x):
        s = {1, 2, 3}
        s.add(4)
        u = {i % 3 for i in range(7)}
        return x + len(s), 2 in s, s | {9}, s & {1, 9}, u

    assert_uses(f, "BUILD_SET", "SET_ADD")
    check(f, t(), kind="graph")


# --- strings -----------------------------------------------------------------------
def test_fstrings_of_constants():
    def f(x):
        n, name, r = x.shape[0], "w", 2.5
        return f"{name}{n}", f"{r:.3f}|{n!r}|{name!s:>4}|{name!a}", x * n

    assert_uses(f, ("FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC"), "BUILD_STRING")
    check(f, t(), kind="graph")


def test_percent_and_format_of_constants():
    def f(x):
        n = x.shape[1]
        return "%d-%s" % (n, "a"), "{}:{k}".format(n, k="v"), "ab".upper() + "c".join(["x", "y"]), x + n

    check(f, t(), kind="graph")


def test_format_of_tensor_breaks():
    def f(x):
        return f"{x}"

    check(f, t(), kind="break", reason="data_dependent")


def test_string_methods_and_indexing():
    def f(x):
        s = "hello world"
        return s.split(), s[1:4], s.startswith("he"), len(s), s.replace("o", "0"), x * len(s)

    check(f, t(), kind="graph")


# --- returning nested structures ------------------------------------------------------
def test_return_nested_structures():
    def f(x, y):
        return {"a": [x, (y, 1)], "b": {"c": (x + y, None)}}, [[], ()], ((x,),)

    check(f, (t(), t()), kind="graph")


def test_return_tensor_twice_is_one_object():
    def f(x):
        y = x + 1
        return y, y, [y]

    info = check(f, t(), kind="graph")
    out = info.opt(torch.randn(4, 3))
    assert out[0] is out[1] is out[2][0]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_tuple_of_varying_length(n):
    def f(xs):
        return sum(xs[1:], xs[0] * 0) if xs else 0

    args = tuple(torch.randn(2) for _ in range(max(n, 1)))[:n] if n else ()
    check(f, (args,), kind="graph" if n else "constant")


def test_list_input_returned():
    def f(xs):
        return xs[0] + 1, xs
    check(f, ([t(), t()],), kind="graph")



def test_live_iteration():
    def f(x):
        lst = [x]
        for v in lst:
            if len(lst) < 3:
                lst.append(v + 1)
        return lst
    check(f, t(), kind="graph")



def test_zip_star():
    def f(x):
        pairs = [(x, 1), (x + 1, 2)]
        a, b = zip(*pairs)
        return a, b
    check(f, t(), kind="graph")



def test_isinstance_containers():
    def f(x, xs, d):
        return x + 1, isinstance(xs, list), isinstance(d, dict), isinstance(xs, (tuple, dict)), type(xs) is list
    check(f, (t(), [1], {"a": 1}), kind="graph")



def test_dict_int_keys_order():
    def f(x):
        d = {3: x, 1: x + 1}
        d[2] = x * 2
        return list(d.items()), d
    check(f, t(), kind="graph")



def test_setitem_list_of_tensor_slices():
    def f(x):
        out = [None] * 3
        for i in range(3):
            out[i] = x[i]
        return torch.stack(out)
    check(f, t(), kind="graph")


_BACKENDS = {torch.Tensor: "torch", list: "list"}


def test_global_dict_keyed_by_classes():
    # einops keeps {tensor type: backend}; a key is a class, hashed by identity
    def f(x):
        return x * 2 if _BACKENDS.get(type(x)) == "torch" else x

    check(f, t(3), kind="graph")


def test_nested_def_with_generic_annotation():
    def f(x):
        def grid(meta) -> tuple[int, ...]:
            return (meta,)
        return x + grid(1)[0]

    check(f, t(3), kind="graph")


def test_torch_query_imported_by_name_is_answered_not_inlined():
    from torch.autograd import _is_checkpoint_valid

    def f(x):
        return x + 1 if _is_checkpoint_valid() else x

    check(f, t(3), kind="graph")


# --- `key in d` for a dict from outside: that key's presence, not every entry -----------------
def module_loaded(x):
    import sys
    return x + 1 if "json" in sys.modules else x - 1


def key_present(x, d):
    return x * 2 if "scale" in d else x + 1


def test_membership_in_sys_modules_guards_that_key_only():
    import importlib
    import sys
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(module_loaded)
    x = torch.ones(3)
    assert torch.equal(opt(x), module_loaded(x))
    importlib.import_module("colorsys")  # another module imported: the entry still holds
    assert torch.equal(opt(x), module_loaded(x))
    assert backend.calls == 1
    saved = sys.modules.pop("json", None)
    try:  # the key's presence changed: a new entry, eager's answer
        assert torch.equal(opt(x), module_loaded(x))
        assert backend.calls == 2
    finally:
        if saved is not None:
            sys.modules["json"] = saved


def test_membership_in_a_dict_passed_in_follows_the_dict():
    check(key_present, (t(), {"other": 1}), (t(), {"scale": 2, "other": 1}), (t(), {}), kind="graph",
          graphs=2, same_entry=False)


def module_name_length(x):
    import sys
    return x + len(sys.modules["json"].__name__)  # importlib.util.find_spec's read


def test_reading_one_entry_of_sys_modules_guards_that_entry_only():
    import importlib
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(module_name_length)
    x = torch.ones(3)
    assert torch.equal(opt(x), module_name_length(x))
    importlib.import_module("colorsys")
    assert torch.equal(opt(x), module_name_length(x))
    assert backend.calls == 1


def default_of_a_missing_key(x, d):
    return x + d.get("missing", 2) + d["present"]


def test_one_key_reads_of_a_dict_passed_in():
    check(default_of_a_missing_key, (t(), {"present": 1}), (t(), {"present": 3, "other": 0}), kind="graph",
          graphs=2, same_entry=False)
