"""Objects passed in whose class defines `__getattribute__` / `__setattr__` in Python
(transformers' PretrainedConfig maps names through `attribute_map`): the hooks are inlined
where CPython calls them, `super().__getattribute__` / `object.__setattr__` inside them are
the generic lookup and store, guards read past the hooks. Each case is compared with
eager (results, exceptions, the arguments' state after the call) and each guard is shown
to recompile, with the new answer, when what it pinned changes."""
from __future__ import annotations

import functools

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


def optimized(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


# --- reading through the class's __getattribute__ ----------------------------------------
class Lying:
    """Its `a` is not what its instance dictionary holds."""

    def __init__(self):
        self.a = 1

    def __getattribute__(self, k):
        if k == "a":
            return 100
        return super().__getattribute__(k)


class Holder(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return x * self.c.a


def test_getattribute_answers_through_a_module_attribute():
    m, x = Holder(Lying()), t()
    opt, backend = optimized(m)
    assert torch.equal(opt(x), x * 100) and torch.equal(opt(x), m(x))
    assert backend.calls == 1


def test_getattribute_answers_for_an_argument():
    def f(c, x):
        return x * c.a

    info = check(f, (Lying(), t()), kind="graph")
    assert info.graphs == 1


class Mapped:
    """attribute_map style: names read under another name."""

    attribute_map = {"hidden": "hidden_size", "heads": "num_heads"}

    def __init__(self, hidden_size=4, num_heads=2):
        self.hidden_size = hidden_size
        self.num_heads = num_heads

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)


class UsesConfig(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, x):
        return x * self.config.hidden + self.config.heads - self.config.hidden_size


def test_remapped_names_read_through_module_attributes():
    m, x = UsesConfig(Mapped(hidden_size=3, num_heads=5)), t()
    opt, backend = optimized(m)
    assert torch.equal(opt(x), m(x)) and torch.equal(opt(x), x * 3 + 5 - 3)
    assert backend.calls == 1
    m.config.hidden = 7  # through the class's __setattr__: hidden_size
    assert torch.equal(opt(x), x * 7 + 5 - 7) and backend.calls == 2


def test_object_getattribute_called_directly():
    class Direct:
        def __init__(self):
            self.w = 2.0

        def __getattribute__(self, k):
            if k == "w":
                return object.__getattribute__(self, "w") * 10
            return object.__getattribute__(self, k)

    def f(c, x):
        return x * c.w

    check(f, (Direct(), t()), kind="graph")


# --- writing through the class's __setattr__ ---------------------------------------------
def test_setattr_remaps_then_stores_and_the_write_is_seen_after_and_next_call():
    def f(c, x):
        if c.heads == 2:
            c.heads = 8  # Mapped.__setattr__: num_heads
        c.hidden = c.hidden + 1
        return x * c.num_heads + c.hidden_size

    c = Mapped()
    opt, backend = optimized(f)
    expected = Mapped()
    x = t()
    for _ in range(3):
        want = f(expected, x)
        got = opt(c, x)
        assert torch.equal(got, want)
        assert vars(c) == vars(expected)  # the writes, under the mapped names
    assert c.num_heads == 8 and c.hidden_size == 7 and "heads" not in vars(c) and "hidden" not in vars(c)
    assert all(e.kind == "graph" for e in opt.cache_entries())
    check(f, (Mapped(), t()), kind="graph", same_entry=False)


class CountsWrites:
    """A __setattr__ with an effect of its own: the write-back must not run it again."""

    def __init__(self):
        object.__setattr__(self, "writes", 0)

    def __setattr__(self, key, value):
        object.__setattr__(self, "writes", object.__getattribute__(self, "writes") + 1)
        object.__setattr__(self, key, value)


def test_writes_are_written_back_past_the_class_setattr():
    def f(c, x):
        c.scale = 3
        c.shift = 1
        return x * c.scale + c.shift

    c = CountsWrites()
    opt, backend = optimized(f)
    assert torch.equal(opt(c, t()), t() * 3 + 1)
    assert vars(c) == {"writes": 2, "scale": 3, "shift": 1}
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]
    check(f, (CountsWrites(), t()), kind="graph")


# --- guards ----------------------------------------------------------------------------
def test_patching_the_class_getattribute_recompiles():
    class P:
        def __init__(self):
            self.a = 1

        def __getattribute__(self, k):
            if k == "a":
                return 2
            return super().__getattribute__(k)

    def f(c, x):
        return x * c.a

    opt, backend = optimized(f)
    x, c = t(), P()
    assert torch.equal(opt(c, x), x * 2)
    P.__getattribute__ = lambda self, k: 5 if k == "a" else object.__getattribute__(self, k)
    assert torch.equal(opt(c, x), x * 5) and backend.calls == 2
    del P.__getattribute__  # the generic lookup again: the instance's own 1
    assert torch.equal(opt(c, x), x * 1) and backend.calls == 3


def test_changing_the_attribute_recompiles():
    def f(c, x):
        return x * c.hidden

    opt, backend = optimized(f)
    x, c = t(), Mapped(hidden_size=2)
    assert torch.equal(opt(c, x), x * 2)
    assert torch.equal(opt(c, x), x * 2) and backend.calls == 1
    object.__setattr__(c, "hidden_size", 6)
    assert torch.equal(opt(c, x), x * 6) and backend.calls == 2
    Mapped.attribute_map = {**Mapped.attribute_map, "hidden": "num_heads"}
    try:
        assert torch.equal(opt(c, x), x * c.num_heads) and backend.calls == 3
    finally:
        Mapped.attribute_map = {"hidden": "hidden_size", "heads": "num_heads"}


class Heterogeneous:
    """transformers' HeterogeneousConfigMixin: the instance dictionary read generically."""

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            return spec[key]
        return super().__getattribute__(key)


def test_instance_dict_get_absent_then_present_recompiles():
    def f(c, x):
        return x * c.scale

    opt, backend = optimized(f)
    x, c = t(), Heterogeneous(scale=2.0, **{f"other{i}": i for i in range(60)})
    assert torch.equal(opt(c, x), x * 2.0)
    entry = opt.cache_entries()[0].source_text
    assert "'_spec' in" in entry and "other5" not in entry  # the key read, not every key
    c.other7 = 70  # a key not read: no recompile
    assert torch.equal(opt(c, x), x * 2.0) and backend.calls == 1
    c._spec = {"scale": 9.0}  # the key appears: recompile, the spec answers
    assert torch.equal(opt(c, x), x * 9.0) and backend.calls == 2
    c._spec = {"scale": 4.0}
    assert torch.equal(opt(c, x), x * 4.0) and backend.calls == 3
    check(f, (Heterogeneous(scale=1.5, _spec={"scale": 3.0}), t()), kind="graph")
    check(f, (Heterogeneous(scale=1.5), t()), kind="graph")


def test_instance_dict_membership_and_item():
    class D:
        def __init__(self):
            self.a = 2

        def __getattribute__(self, key):
            d = object.__getattribute__(self, "__dict__")
            if key == "a" and "b" in d:
                return d["b"]
            return d[key] if key in d else object.__getattribute__(self, key)

    def f(c, x):
        return x * c.a

    opt, backend = optimized(f)
    x, c = t(), D()
    assert torch.equal(opt(c, x), x * 2)
    c.b = 5
    assert torch.equal(opt(c, x), x * 5) and backend.calls == 2
    check(f, (D(), t()), kind="graph")


# --- what declines -----------------------------------------------------------------------
class Hiding:
    secret = 3  # (a class attribute: the differential check walks the instance's own)

    def __init__(self):
        self.public = 2

    def __getattribute__(self, k):
        if k == "secret":
            raise AttributeError(f"{k} is hidden")
        return super().__getattribute__(k)


def test_getattribute_raising_attribute_error_breaks_with_the_same_exception():
    def f(c, x):
        x = x * c.public
        return x * c.secret

    check(f, (Hiding(), t()), kind="break")
    opt, _ = optimized(f)
    err = same_outcome(f, opt, Hiding(), t())
    assert isinstance(err, AttributeError)


def test_hasattr_through_a_raising_getattribute():
    def f(c, x):
        return x + (1 if hasattr(c, "secret") else 2) + (10 if hasattr(c, "public") else 20)

    info = check(f, (Hiding(), t()), kind="graph")
    assert info.graphs == 1


def test_getattribute_catching_attribute_error_declines_not_defaults():
    class Catching:
        def __getattribute__(self, k):
            try:
                return super().__getattribute__(k)
            except AttributeError:
                return 7

    def f(c, x):
        return x * getattr(c, "missing", 1)

    opt, _ = optimized(f)
    assert torch.equal(opt(Catching(), t()), t() * 7)  # not the default 1
    assert same_outcome(f, opt, Catching(), t()) is not None


def _lookup_with(self, bonus, key):
    value = object.__getattribute__(self, key)
    return value + bonus if key == "a" else value


def test_getattribute_that_is_no_python_function_declines():
    class Partial:
        __getattribute__ = functools.partialmethod(_lookup_with, 10)

        def __init__(self):
            self.a = 1

    def f(c, x):
        return x * c.a

    info = check(f, (Partial(), t()), kind="break")
    assert "__getattribute__" in str(info.break_reason)


# --- a PretrainedConfig in small, and the real one -----------------------------------------
class MiniConfigMixin:
    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_heterogeneity_spec")
        if spec is not None and key in spec and not super().__getattribute__("allow_global"):
            raise ValueError(f"{key!r} is per layer")
        return super().__getattribute__(key)


class MiniConfig(MiniConfigMixin):
    attribute_map: dict = {"num_classes": "num_labels"}
    problem_type = None
    allow_global = False

    def __init__(self, hidden_size=4, num_labels=2):
        self.hidden_size = hidden_size
        self.num_labels = num_labels

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    @property
    def use_return_dict(self):
        return self.num_classes > 1


class Classifier(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lin = torch.nn.Linear(config.hidden_size, config.num_classes)

    def forward(self, x, labels):
        logits = self.lin(x)
        if self.config.problem_type is None:
            self.config.problem_type = "single_label_classification" if self.config.num_classes > 1 \
                else "regression"
        if self.config.problem_type == "single_label_classification":
            loss = torch.nn.functional.cross_entropy(logits, labels)
        else:
            loss = logits.sum()
        return loss, self.config.use_return_dict


def test_mini_pretrained_config_classifier_trains_in_one_graph():
    torch.manual_seed(0)
    m = Classifier(MiniConfig())
    x, labels = t(5, 4), torch.tensor([0, 1, 1, 0, 1])
    opt, backend = optimized(m)
    loss, flag = opt(x, labels)
    assert flag is True and m.config.problem_type == "single_label_classification"
    assert torch.allclose(loss, torch.nn.functional.cross_entropy(m.lin(x), labels))
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]
    opt(x, labels)  # problem_type changed: one recompile, as torch.compile
    assert backend.calls == 2
    opt(x, labels)
    assert backend.calls == 2
    m.config._heterogeneity_spec = {"num_labels": 3}
    with pytest.raises(ValueError, match="per layer"):
        opt(x, labels)

    def f(c, x):
        if c.problem_type is None:
            c.problem_type = "regression"
        c.num_classes = c.num_classes + 1
        return x * c.num_labels

    check(f, (MiniConfig(), t()), kind="graph")


def test_real_bert_config():
    transformers = pytest.importorskip("transformers")

    def f(config, x):
        if config.problem_type is None:
            config.problem_type = "single_label_classification"
        return x * config.hidden_size

    opt, backend = optimized(f)
    c, x = transformers.BertConfig(hidden_size=8), t()
    assert torch.equal(opt(c, x), x * 8)
    assert c.problem_type == "single_label_classification" and "problem_type" in vars(c)
    kinds = [e.kind for e in opt.cache_entries()]
    assert torch.equal(opt(c, x), x * 8)
    c.hidden_size = 16
    assert torch.equal(opt(c, x), x * 16)
    assert kinds[0] == "graph", opt.cache_entries()[0].reason


def test_c_getattribute_that_is_not_generic_declines():
    import threading

    class PerThread(threading.local):  # _thread._local's lookup: the calling thread's dict
        def __init__(self):
            self.a = 3

    def f(c, x):
        return x * c.a

    opt, _ = optimized(f)
    c = PerThread()
    assert torch.equal(opt(c, t()), t() * 3)
    entry = opt.cache_entries()[0]
    assert entry.kind in ("break", "eager") and "_local" in str(entry.break_reason or entry.reason)



_SCHEMA = torch.ops.aten.add.Tensor._schema  # a pybind11 object: its properties' getters are C


def test_a_property_computed_in_c_breaks_with_its_reason():
    # (pybind11 classes such as ProcessGroup or FunctionSchema): the getter is no Python
    # function to inline; the read runs natively at a graph break, as eager reads it.
    assert not isinstance(type(_SCHEMA).__dict__["name"].fget, type(lambda: 0))

    def f(x):
        return x * len(_SCHEMA.name)

    check(f, torch.ones(3), kind="break", reason="construct")
