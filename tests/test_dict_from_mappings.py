"""`dict(x)`, `d.update(x)`, `{**x}` where x is not a dict: CPython takes x as a mapping
(keys() and x[k]) when its class has `keys`, else as an iterable of pairs (`{**x}`: a
mapping only, else TypeError). Differential against eager: results, exceptions, and that a
mapping is never read as pairs (its 2-character keys would unpack as pairs)."""
from collections.abc import MutableMapping

import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


class TensorDict(MutableMapping):
    def __init__(self):
        self._dict = {}

    def __getitem__(self, key):
        return self._dict[key]

    def __setitem__(self, key, value):
        self._dict[key] = value

    def __delitem__(self, key):
        del self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self):
        return len(self._dict)


def mapping(**items):
    m = TensorDict()
    for k, v in items.items():
        m[k] = v
    return m


def test_dict_of_a_user_mapping_is_read_as_a_mapping():
    def f(x, m):
        d = dict(m)
        return x * d["ab"], sorted(d)

    opt = minidynamo.optimize(f, backend=CountingBackend())
    for _ in range(2):
        same_outcome(f, opt, torch.ones(2), mapping(ab=torch.full((2,), 3.0), cd=1))


def test_update_and_unpack_of_a_user_mapping():
    def f(x, m):
        d = {"z": 0}
        d.update(m)
        return x + len(d), {**m, "y": 1}

    opt = minidynamo.optimize(f, backend=CountingBackend())
    same_outcome(f, opt, torch.ones(2), mapping(ab=2, cd=3))


def test_dict_of_pairs_is_traced():
    def f(x, pairs):
        d = dict(pairs)
        return x * d["a"], d

    check(f, (torch.ones(2), ["ab", ("a", 3)]), kind="graph")


def test_pair_of_wrong_length_raises_eagers_value_error():
    def f(x, pairs):
        return x, dict(pairs)

    opt = minidynamo.optimize(f, backend=CountingBackend())
    e = same_outcome(f, opt, torch.ones(2), [("a", 1), "abc"])
    assert isinstance(e, ValueError)


def test_unpacking_pairs_into_a_dict_display_raises_eagers_type_error():
    def f(x, v):
        return x, {**v}

    opt = minidynamo.optimize(f, backend=CountingBackend())
    e = same_outcome(f, opt, torch.ones(1), [("a", 1)])
    assert isinstance(e, TypeError)
    same_outcome(f, opt, torch.ones(1), {"a": 1})
