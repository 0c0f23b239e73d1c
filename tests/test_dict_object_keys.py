"""Dicts passed in whose keys are not constants: torch.Size keys (hashed by value), tensors,
parameters and modules (hashed by identity), in plain dicts and defaultdicts; `dict(m)` of a
MutableMapping. Differential against eager (results, the dict after the call), graph
counts, and the guards: another key object, another set of keys or another factory
between calls recompiles (or gives eager's answer), never a stale result."""
from collections import defaultdict
from collections.abc import MutableMapping

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check, same, same_outcome


def _opt(fn):
    backend = CountingBackend()
    return minidynamo.optimize(fn, backend=backend), backend


# --- torch.Size keys ----------------------------------------------------------------------
def test_size_keyed_cache_filled_across_calls():
    def fn(x, cached):
        if x.shape not in cached:
            cached[x.shape] = x
        return x + cached[x.shape]

    x1, x2 = torch.randn(2, 3), torch.randn(2, 3)
    opt, backend = _opt(fn)
    eager, got = {}, {}
    for x in (x1, x2):
        same(opt(x, got), fn(x, eager))
        assert list(got) == list(eager)
        assert got[x1.shape] is x1  # the tensor stored on the first call, kept
    assert backend.calls == 2  # the empty dict, then the one holding the size


def test_size_keyed_cache_with_sizes_that_change():
    def fn(x, cached):
        if x.shape not in cached:
            cached[x.shape] = x
        return x + cached[x.shape]

    opt, _ = _opt(fn)
    eager, got = {}, {}
    for n in (2, 4, 5, 4, 6, 2):  # sizes made dynamic on the way: the keys stay exact sizes
        x = torch.randn(n, 3)
        same(opt(x, got), fn(x, eager))
        assert list(got) == list(eager)
        assert all(type(k) is torch.Size for k in got)


def test_size_keys_checked_by_value():
    def fn(x, cached):
        return x * cached.get(x.shape, 0.5)

    opt, _ = _opt(fn)
    d = {torch.Size([2]): 3.0}
    same(opt(torch.ones(2), d), fn(torch.ones(2), d))
    d2 = {torch.Size([3]): 3.0}  # another size: eager reads the default
    same(opt(torch.ones(2), d2), fn(torch.ones(2), d2))
    same(opt(torch.ones(3), d2), fn(torch.ones(3), d2))


# --- keys hashed by identity --------------------------------------------------------------
def test_tensor_keys_iterated():
    def fn(x, d):
        out = x
        for k, v in d.items():
            out = out + k * v
        return out

    a, b = torch.randn(3), torch.randn(3)
    opt = minidynamo.optimize(fn, backend=(backend := CountingBackend()), fullgraph=True)
    x, d = torch.randn(3), {a: 2.0, b: 3.0}
    for _ in range(2):
        same(opt(x, d), fn(x, d))
    assert backend.calls == 1
    d[a] = 5.0  # a value changed: guarded
    same(opt(x, d), fn(x, d))
    same(opt(x, {b: 3.0, a: 2.0}), fn(x, {b: 3.0, a: 2.0}))  # another order


def test_lookup_of_an_argument_that_is_a_key():
    def fn(x, d):
        if x in d:
            return x * d[x]
        return x - 1

    x = torch.randn(2)
    opt, _ = _opt(fn)
    d = {x: 3.0}
    same(opt(x, d), fn(x, d))
    other = torch.randn(2)  # not a key of d: eager takes the other branch
    same(opt(other, d), fn(other, d))
    same(opt(x, d), fn(x, d))


def test_another_key_object_of_equal_value_is_not_the_traced_key():
    g = torch.ones(1)

    def fn(x, d):
        return x + d[g] if g in d else x * 10

    opt, backend = _opt(fn)
    x = torch.ones(2)
    same(opt(x, {g: 1.0}), fn(x, {g: 1.0}))
    twin = {torch.ones(1): 1.0}  # equal value, another object: not the key eager looks up
    same(opt(x, twin), fn(x, twin))
    assert backend.calls == 2
    same(opt(x, {g: 2.0}), fn(x, {g: 2.0}))


def test_changed_keys_recompile():
    def fn(x, d):
        return x * len(d), [v for v in d.values()]

    a, b = torch.randn(1), torch.randn(1)
    opt, backend = _opt(fn)
    x = torch.ones(2)
    for d in ({a: 1, "s": 2}, {a: 1, b: 2}, {b: 1, a: 2}, {a: 1, "s": 2, b: 3}):
        same(opt(x, d), fn(x, d))
    assert backend.calls == 4


def test_write_through_an_object_key_is_visible_after_the_call():
    lin = torch.nn.Linear(2, 2)

    def fn(x, d):
        d[lin] = d[lin] + 1
        d[x] = x * 2
        return lin(x) * d[lin]

    x = torch.randn(2)
    eager_d, opt_d = {lin: 1.0, "n": 2}, {lin: 1.0, "n": 2}
    opt, backend = _opt(fn)
    same(opt(x, opt_d), fn(x, eager_d))
    assert backend.calls == 1
    assert list(opt_d) == list(eager_d) == [lin, "n", x]
    assert opt_d[lin] == eager_d[lin] == 2.0
    same(opt_d[x], eager_d[x])


def test_module_keys_with_fullgraph():
    a, b = torch.nn.Linear(2, 2), torch.nn.ReLU()
    scales = {a: 2.0, b: 3.0}

    def fn(x):
        for m, s in scales.items():
            x = m(x) * s
        return x

    opt = minidynamo.optimize(fn, backend=CountingBackend(), fullgraph=True)
    x = torch.randn(3, 2)
    same(opt(x), fn(x))
    scales[b] = 5.0  # a value changed: read again (guarded)
    same(opt(x), fn(x))


def test_key_with_its_own_hash_is_not_traced_but_runs_as_eager():
    class K:
        def __init__(self, n):
            self.n = n

        def __hash__(self):
            return hash(self.n)

        def __eq__(self, other):
            return isinstance(other, K) and other.n == self.n

    def fn(x, d):
        for v in d.values():
            x = x * v
        return x

    opt, _ = _opt(fn)
    d = {K(1): 2.0, "a": 3.0}
    same_outcome(fn, opt, torch.ones(2), d)
    strict = minidynamo.optimize(fn, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(minidynamo.Unsupported):
        strict(torch.ones(2), d)


# --- defaultdicts passed in ------------------------------------------------------------------
@pytest.mark.parametrize("factory", [dict, list, tuple, set, lambda: dict(), "closure"])
def test_defaultdict_with_a_parameter_key(factory):
    if factory == "closure":
        def factory():
            return dict()
    param = torch.nn.Parameter(torch.ones(2, 2))

    def fn(x, dd):
        dd["a"] = x + 1
        dd[param] = 123
        dd["c"] = x * 2
        return dd["b"], dd

    eager_dd, opt_dd = defaultdict(factory), defaultdict(factory)
    x = torch.randn(2, 2)
    opt, backend = _opt(fn)
    for _ in range(2):  # a new dict, then one holding the keys the first call added
        ref, got = fn(x, eager_dd), opt(x, opt_dd)
        same(got[0], ref[0])
        assert got[1] is opt_dd
        assert list(opt_dd) == list(eager_dd)
        same(opt_dd["a"], eager_dd["a"])
        assert opt_dd[param] == 123
    assert backend.calls == 2


def test_defaultdict_factory_change_recompiles():
    key = torch.ones(1)

    def fn(x, dd):
        return x + 1, dd["missing"], dd[key]

    opt, backend = _opt(fn)
    x = torch.ones(2)
    for factory in (list, int, list):
        eager_dd, opt_dd = defaultdict(factory, {key: 1}), defaultdict(factory, {key: 1})
        same(opt(x, opt_dd), fn(x, eager_dd))
        assert list(opt_dd) == list(eager_dd)
    assert backend.calls == 2


# --- dict() of a MutableMapping -------------------------------------------------------------
class TensorDict(MutableMapping):
    def __init__(self):
        self._dict = {}

    def add(self, key, value):
        self._dict[key] = value

    def items(self):
        return self._dict.items()

    def __delitem__(self, key):
        del self._dict[key]

    def __getitem__(self, key):
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self):
        return len(self._dict)

    def __setitem__(self, key, value):
        self._dict[key] = value


def test_dict_of_a_mutable_mapping_traces_and_follows_its_contents():
    td = TensorDict()
    td.add("a", torch.ones(4) * 2)

    def fn(x):
        d = dict(td)
        return x * d["a"], len(d)

    opt = minidynamo.optimize(fn, backend=CountingBackend(), fullgraph=True)
    x = torch.randn(4)
    same(opt(x), fn(x))
    td.add("b", 1)  # another key: traced again
    same(opt(x), fn(x))
    td["a"] = torch.full((4,), 5.0)  # another tensor under the key
    same(opt(x), fn(x))


# --- defaultdicts made in the trace --------------------------------------------------------
def _closure_factory():
    return dict()


@pytest.mark.parametrize("factory", [dict, list, tuple, set, lambda: dict(), _closure_factory])
def test_defaultdict_made_inside_with_each_kind_of_factory(factory):
    def fn(x):
        dd = defaultdict(factory)
        dd["a"] = x + 1
        dd["c"] = x * 2
        return dd["b"], dd, dd["a"] + dd["c"]

    check(fn, (torch.randn(2, 2),), kind="graph", graphs=1)


class HashedByValue:
    def __init__(self, n):
        self.n = n  # __hash__ reads it: hashing the object before this line raises

    def __hash__(self):
        return hash(self.n)

    def __eq__(self, other):
        return isinstance(other, HashedByValue) and other.n == self.n


def test_a_key_made_inside_whose_class_hashes_in_python_runs_as_eager():
    def fn(x, d):
        return x * d[HashedByValue(1)]

    opt, _ = _opt(fn)
    for _ in range(2):  # its __init__ is never hashed half made (the frame optimized on its own)
        same_outcome(fn, opt, torch.ones(2), {HashedByValue(1): 2.0})


# --- constant keys equal across types -----------------------------------------------------
@pytest.mark.parametrize("first,then", [(1, True), (True, 1), (1, 1.0), (0, False), (2.0, 2)])
def test_keys_equal_but_of_another_type_recompile(first, then):
    """1 == 1.0 == True: a dict whose key is equal to the traced one but of another type is
    another dict to the trace (what it reads of the key, its repr or type, differs)."""
    def fn(x, d):
        out = []
        for k in d:
            out.append((repr(k), type(k).__name__))
        return x + len(out), out

    opt, backend = _opt(fn)
    x = torch.ones(2)
    for d in ({first: "a", "b": 2}, {then: "a", "b": 2}, {first: "a", "b": 2}):
        same_outcome(fn, opt, x, d)
    assert len(opt.cache_entries()) == 2
    assert "keys changed" in str(opt.guard_failures()[0])


# --- function keys ------------------------------------------------------------------------
def _double(t):
    return t * 2


def _triple(t):
    return t * 3


HANDLERS = {_double: 1, _triple: 2, len: 3}


def test_function_keys_found_by_the_function_itself():
    """A function is hashed by identity; `fn in d` and `d[fn]` over a dict passed in (or a
    global) whose keys are functions find the real key: eager's answer, not a miss."""
    def fn(x, f, table):
        hit = f in table
        return (x + table[f] if hit else x - 5), HANDLERS[_triple], len in HANDLERS, _double in table

    check(fn, (torch.randn(3), _double, {_double: 1}), (torch.randn(3), _triple, {_double: 1}),
          kind="graph", same_entry=False)


def test_another_function_as_the_key_recompiles():
    def fn(x, table):
        return x + table.get(_double, 0)

    opt, backend = _opt(fn)
    x = torch.randn(3)
    same_outcome(fn, opt, x, {_double: 1})
    same_outcome(fn, opt, x, {_triple: 1})  # same keys' count and types, another function
    assert backend.calls == 2


def test_function_keys_iterated_and_called():
    """Keys that are functions, iterated and called: each the function itself (its code
    guarded: a new `__code__` on the same function traces again)."""
    table = {_double: 1, _triple: 2}

    def fn(x):
        for f in table:
            x = f(x) + table[f]
        return x, [f.__name__ for f in table]

    opt, backend = _opt(fn)
    same_outcome(fn, opt, torch.randn(3))
    assert backend.calls == 1 and opt.cache_entries()[0].kind == "graph"
    old = _double.__code__
    try:
        _double.__code__ = (lambda t: t - 100).__code__
        same_outcome(fn, opt, torch.randn(3))
    finally:
        _double.__code__ = old
    assert backend.calls == 2


# --- sets of functions --------------------------------------------------------------------
HOOKS = {_double, _triple}


@pytest.mark.parametrize("hooks", [{_double}, {_triple}, {_double, _triple}, set(), frozenset({_triple, len})])
def test_sets_of_functions_passed_in(hooks):
    """Membership by the function itself; iteration in the set's own order (guarded: another
    set of the same functions made in another order iterates otherwise); calling members."""
    def fn(x, fs):
        y = x + (10 if _double in fs else 0)
        for f in sorted((f for f in fs if f is not len), key=lambda f: f.__name__):
            y = f(y)
        return y, len(fs), _triple in HOOKS, [f.__name__ for f in HOOKS]

    check(fn, (torch.randn(3), hooks), (torch.randn(3), type(hooks)(hooks)), kind="graph")


def test_set_of_functions_changed_between_calls_recompiles():
    hooks = {_double}

    def fn(x):
        for f in hooks:
            x = f(x)
        return x

    opt, backend = _opt(fn)
    x = torch.randn(3)
    same_outcome(fn, opt, x)
    hooks.add(_triple)
    same_outcome(fn, opt, x)
    hooks.discard(_double)
    same_outcome(fn, opt, x)
    assert backend.calls == 3
