"""Modules and other objects hashed by identity as dict keys and set members in the
optimized function (torch's named_modules()/children() keep a set of modules): one graph,
differential against eager, and guarded on which of them are one object."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import minidynamo
from helpers import Args, CountingBackend, check


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (2, 3)), generator=g)


def model(seed=0, shared=False):
    torch.manual_seed(seed)
    inner = nn.Linear(3, 3)
    return nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Sequential(inner, inner if shared else nn.Linear(3, 3)))


def test_for_loop_over_modules_of_a_module_passed_in():
    def f(m, x):
        for mod in m.modules():
            if isinstance(mod, nn.Linear):
                x = mod(x)
        return x, [name for name, _ in m.named_modules()], [type(c).__name__ for c in m.children()]

    check(f, Args(model(), t()), Args(model(1), t()), kind="graph", graphs=1)


def test_children_into_dicts_keyed_by_name_and_by_module():
    def f(m, x):
        by_name = dict(m.named_children())
        index = {c: i for i, c in enumerate(m.children())}
        return by_name["0"](x), index[m[1]], index[by_name["2"]], len(index), m[0] in index, m[2][0] in index

    check(f, Args(model(), t()), Args(model(1), t()), kind="graph", graphs=1)


def test_dict_keyed_by_modules_returned_holds_this_calls_modules():
    def f(m):
        return {c: type(c).__name__ for c in m.children()}, {m[0], m[1]}

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    for seed in (0, 1):  # the same entry serves another model: its modules are the keys
        m = model(seed)
        got, members = opt(m)
        assert list(got) == list(m.children()) and list(got.values()) == ["Linear", "ReLU", "Sequential"]
        assert members == {m[0], m[1]}
    assert len(opt.cache_entries()) == 1 and opt.cache_entries()[0].kind == "constant"


def test_shared_modules_are_counted_once_and_guarded():
    def f(m, x):
        seen = set()
        for mod in m.modules():
            seen.add(mod)
        count = 0
        for _ in m.modules():
            count += 1
        return len(seen), count, m[2][0](x)

    # Traced on a model whose inner Linear is shared: another model with two separate ones
    # counts one more module, so the identity guard must send it to a new trace.
    info = check(f, Args(model(shared=True), t()), Args(model(shared=False), t()), kind="graph", graphs=2,
                 same_entry=False)
    assert len(info.entries) == 2
    assert "one object" in str(info.opt.guard_failures()[-1]), info.opt.guard_failures()


def test_objects_made_in_the_trace_as_keys():
    class Tag:
        def __init__(self, name):
            self.name = name

    def f(x):
        a, b = Tag("a"), Tag("b")
        d = {a: x, b: x + 1}
        s = {a}
        return d[a] + d[b], a in s, b in s, len(d), [k.name for k in d], (d, s)

    def keys_kept(x):  # the dict and set returned hold the objects rebuilt for them
        return f(x)[:-1]

    check(keys_kept, t(), kind="graph", graphs=1)
    d, s = minidynamo.optimize(f)(t())[-1]
    a, b = d
    assert (a.name, b.name) == ("a", "b") and s == {a}
    torch.testing.assert_close(d[b], t() + 1)


def test_modules_and_constants_mixed_as_keys():
    def f(m, x):
        d = {"first": 0, m[0]: 1, 2: m[1]}
        d[m[2]] = x * 2
        return d[m[0]], d[2](x), d[m[2]], list(d.values())[0], "first" in d, m in d

    check(f, Args(model(), t()), kind="graph", graphs=1)


class HashedByName(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.name = name

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, HashedByName) and other.name == self.name


def test_a_class_with_its_own_hash_is_not_keyed_by_identity():
    def f(m, x):
        return {m: 1}[m] + x

    info = check(f, Args(HashedByName("a"), t()), kind="eager", reason="construct")
    assert "__hash__" in str(info.entries[0].reason)


def test_patching_hash_onto_the_class_recompiles():
    class Plain(nn.Module):
        pass

    def f(m, x):
        return len({m, m}) + x

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    m = Plain()
    torch.testing.assert_close(opt(m, t()), f(m, t()))
    Plain.__hash__ = lambda self: 1
    try:
        torch.testing.assert_close(opt(m, t()), f(m, t()))
        assert "__hash__" in str(opt.guard_failures()[-1]), opt.guard_failures()
        assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph", "eager"]
    finally:
        del Plain.__hash__


def test_iterating_a_set_of_modules_declines():
    def f(m, x):
        members = {m[0], m[1]}
        for mod in members:  # CPython's order follows the modules' addresses
            x = x + 1
        return x

    pytest.importorskip("torch")
    info = check(f, Args(model(), t()), kind="eager", reason="construct")
    assert info.graphs == 0


def test_parameters_walk_their_memo_of_tensors():
    def f(m, x):
        names = [n for n, _ in m.named_parameters()]
        return x.to(next(m.parameters()).dtype) * 2, names, [p.shape for p in m.parameters()]

    check(f, Args(model(), t()), Args(model(1), t()), kind="graph", graphs=1)


def test_tied_parameters_are_counted_once_and_guarded():
    def tied(seed):
        m = model(seed)
        m[2][1].weight = m[0].weight
        return m

    def f(m, x):
        return len(list(m.parameters())), x * 2

    info = check(f, Args(tied(0), t()), Args(model(0), t()), kind="graph", graphs=2, same_entry=False)
    assert "one object" in str(info.opt.guard_failures()[-1]), info.opt.guard_failures()


def test_tensors_given_are_keys_made_ones_decline():
    def given(x, y):
        d = {x: 1, y: 2}
        return d[x] + d[y], x in d, len({x, x}), list(d.values()), [k is x for k in d]

    def made(x):
        y = x + 1
        return {y: 1}[y]

    check(given, (t(), t(seed=1)), kind="constant")
    same = t()
    check(given, Args(same, same), kind="constant")  # one tensor twice: one key
    check(made, t(), kind="eager", reason="construct")
    opt = minidynamo.optimize(lambda x, y: {x: 1, y: 2})
    opt(t(), t(seed=1))
    x, y = t(), t(seed=1)
    d = opt(x, y)  # the cached entry: this call's tensors are the keys
    assert len(opt.cache_entries()) == 1 and list(d) == [x, y] and [k is x for k in d] == [True, False]


REGISTERED = {nn.Linear, nn.ReLU}


def test_a_global_set_of_classes_is_read_and_guarded_by_its_members():
    def f(m, x):
        hits = 0
        for mod in m.children():
            if type(mod) in REGISTERED:
                hits += 1
        return x * hits

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    m = model()
    torch.testing.assert_close(opt(m, t()), f(m, t()))
    REGISTERED.add(nn.Sequential)
    try:
        torch.testing.assert_close(opt(m, t()), f(m, t()))
    finally:
        REGISTERED.discard(nn.Sequential)
    assert backend.calls == 2
    check(f, Args(model(), t()), kind="graph", graphs=1)


TREE = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(3, 3)))


def test_module_iterators_consumed_whole_and_sets_of_children():
    def f(x):
        n = len(list(TREE.modules())) + len(list(TREE.children())) + len(set(TREE.children()))
        return x * n

    check(f, torch.ones(3), kind="graph")
