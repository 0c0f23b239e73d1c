"""Constructs of PyTorch's own Dynamo function tests that minidynamo now traces whole:
`OrderedDict.fromkeys(..., value=...)` (OrderedDict's takes keywords, dict's does not) and
`torch._C._is_any_autocast_enabled()` (a query of the process-wide state the entry guards)."""
import collections

import torch

from helpers import check


def test_ordered_dict_fromkeys_takes_a_value_keyword():
    def f(x):
        d = collections.OrderedDict.fromkeys(("a", "b"), value=x)
        return d["a"] + d["b"], list(d)

    check(f, torch.randn(3), kind="graph")


def test_dict_fromkeys_refuses_keywords_as_eager_does():
    def f(x):
        return dict.fromkeys(("a",), value=x)

    check(f, torch.randn(3), kind="break", reason="exceptions")  # the call raises natively, as eager


def test_is_any_autocast_enabled_is_a_guarded_query():
    def f(x):
        return x * 2 if torch._C._is_any_autocast_enabled() else x - 1

    check(f, torch.randn(3), kind="graph")


def test_tensor_type_with_a_legacy_tensor_class():
    def f(a, b):
        m = a.type(torch.HalfTensor)
        return b.type(m.type()), m.dtype

    check(f, (torch.randn(3), torch.randn(3)), kind="graph")
