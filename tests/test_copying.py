"""copy.deepcopy / copy.copy in a trace (variables/copying.py), differential: the copy is
a new object made in the trace, the original (passed in) is left as eager leaves it, a
copy that escapes is a real independent object, and what the model cannot copy breaks.
Also the type hints a strict dataclass validator reads (variables/typing_forms.py)."""
from __future__ import annotations

import copy
import dataclasses
import types
import typing

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


def optimized(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


class Config:
    def __init__(self, scale=2, nested=None):
        self.scale = scale
        self.labels = {0: "a", 1: "b"}
        self.sizes = [3, 4]
        self.nested = nested


class Mapped:
    """A config whose names are mapped by its own __getattribute__ (as transformers')."""

    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 3
        self.layers = 2

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in Mapped.attribute_map:
            key = Mapped.attribute_map[key]
        object.__setattr__(self, key, value)


# --- objects passed in ---------------------------------------------------------------
def test_deepcopy_of_a_config_passed_in_leaves_it_alone():
    def f(x, cfg):
        c = copy.deepcopy(cfg)
        c.scale = 5
        c.labels[2] = "c"
        c.sizes.append(9)
        return x * c.scale + len(c.labels) + len(c.sizes) + cfg.scale

    check(f, (t(), Config()), kind="graph")


def test_deepcopy_returned_is_a_real_independent_object():
    def f(x, cfg):
        c = copy.deepcopy(cfg)
        c.sizes.append(1)
        return x + 1, c

    check(f, (t(), Config(nested=Config(scale=7))), kind="graph")
    opt, _ = optimized(f)
    cfg = Config(nested=Config())
    _, c = opt(t(), cfg)
    assert type(c) is Config and c is not cfg and c.nested is not cfg.nested
    assert c.labels is not cfg.labels and c.labels == cfg.labels and c.sizes == [3, 4, 1] and cfg.sizes == [3, 4]


def test_deepcopy_of_an_instance_dict():
    def f(x, cfg):
        d = copy.deepcopy(cfg.__dict__)
        d["scale"] = 10
        d.pop("nested")
        return x * d["scale"], d

    check(f, (t(), Config()), kind="graph")


def test_values_and_keys_of_the_original_are_guarded():
    def f(x, cfg):
        c = copy.deepcopy(cfg)
        return x * c.scale + len(vars(c))

    opt, backend = optimized(f)
    cfg, x = Config(), t()
    assert torch.equal(opt(x, cfg), f(x, cfg))
    cfg.scale = 3
    assert torch.equal(opt(x, cfg), f(x, cfg))
    cfg.extra = 1  # a new key: the copy has one more attribute
    assert torch.equal(opt(x, cfg), f(x, cfg))
    assert backend.calls == 3


def test_one_object_reached_twice_is_copied_once():
    def f(x, cfg):
        pair = copy.deepcopy([cfg.sizes, cfg.sizes, cfg])
        pair[0].append(5)
        return x + len(pair[1]), pair[2].sizes is pair[0]

    check(f, (t(), Config()), kind="graph")


def test_shallow_copy_shares_the_items():
    def f(x, cfg):
        c = copy.copy(cfg)
        c.scale = 4  # the copy's own attribute
        c.sizes.append(1)  # the list both share: the original's, written back
        return x * c.scale + cfg.scale, c

    check(f, (t(), Config()), kind="graph")


# --- objects made in the trace --------------------------------------------------------------
def test_sharing_and_cycles_inside_the_copy_are_kept():
    def f(x):
        inner = [1, 2]
        outer = {"a": inner, "b": inner, "t": (inner, 3)}
        outer["self"] = outer
        c = copy.deepcopy(outer)
        c["a"].append(3)
        return x + len(c["b"]), c["self"] is c, c["t"][0] is c["a"], c["t"] is outer["t"], inner, c["b"]

    check(f, t(), kind="graph")


def test_tuples_of_constants_stay_the_same_object():
    def f(x):
        k = (1, "a")
        return x + 1, copy.deepcopy(k) is k, copy.copy([k])[0] is k

    check(f, t(), kind="graph")


def test_deepcopy_of_an_object_made_in_the_trace_then_delattr_and_setattr():
    def f(x):
        a = Config(scale=3)
        b = copy.deepcopy(a)
        delattr(b, "nested")
        setattr(b, "depth", 2)
        del b.labels[0]
        return x * b.scale + b.depth, hasattr(b, "nested"), a.labels, b

    check(f, t(), kind="graph")


def test_delattr_of_a_missing_attribute_raises_as_eager():
    def f(x):
        b = copy.copy(Config())
        delattr(b, "missing")
        return x

    check(f, t(), kind="break", reason="exceptions")


def test_class_with_its_own_getattribute_and_setattr():
    def f(x, cfg):
        c = copy.deepcopy(cfg)
        c.hidden = 7  # mapped to width by its __setattr__
        return x * c.hidden + cfg.hidden, c

    check(f, (t(), Mapped()), kind="graph")

    def g(x):
        c = copy.deepcopy(Mapped())
        return x * c.hidden, c

    check(g, t(), kind="graph")


# --- what breaks ---------------------------------------------------------------------------
class OwnDeepcopy(Config):
    def __deepcopy__(self, memo):  # (the test helper's clones of the arguments go through it too)
        new = type(self).__new__(type(self))
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        new.scale += 1
        return new


def test_a_class_that_copies_itself_breaks():
    def f(x, cfg):
        c = copy.deepcopy(cfg)
        return x * c.scale

    check(f, (t(), OwnDeepcopy()), kind="break", reason="construct")


def test_patching_the_class_with_a_copy_hook_recompiles():
    class Patched(Config):
        pass

    def f(x, cfg):
        return x * copy.deepcopy(cfg).scale

    opt, backend = optimized(f)
    cfg, x = Patched(), t()
    assert torch.equal(opt(x, cfg), x * 2)
    Patched.__deepcopy__ = lambda self, memo: Config(scale=11)
    assert torch.equal(opt(x, cfg), x * 11)  # a new trace, which breaks at the copy
    assert opt.cache_entries()[-1].kind == "break"


def test_a_memo_of_the_callers_breaks():
    def f(x, cfg):
        memo = {}
        c = copy.deepcopy(cfg, memo)
        return x * c.scale

    check(f, (t(), Config()), kind="break", reason="construct")


def test_deepcopy_of_a_tensor_breaks():
    def f(x):
        y = copy.deepcopy(x)
        return y + 1

    check(f, t(), kind="break", reason="construct")


# --- type hints read by validators ------------------------------------------------------------
@dataclasses.dataclass
class Hinted:
    width: int | None = None
    names: typing.Optional[list[str]] = None


def _check_hint(name, value, hint):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        if not any(value is None if a is type(None) else isinstance(value, typing.get_origin(a) or a) for a in args):
            raise TypeError(f"{name}: {value!r} is not {hint}")


def test_type_hints_as_constants():
    def f(x, obj):
        for field in dataclasses.fields(obj):
            _check_hint(field.name, getattr(obj, field.name), field.type)
        return x + 1, typing.get_args(Hinted.__annotations__["names"])

    check(f, (t(), Hinted(width=3, names=["a"])), kind="graph")
    check(f, (t(), Hinted(width="bad")), kind="graph")  # the TypeError raised as eager raises it


# --- transformers ------------------------------------------------------------------------------
def test_real_config_text_config_copy():
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers.PretrainedConfig, "get_text_config"):
        pytest.skip("this transformers has no get_text_config")

    def f(x, config):
        text = config.get_text_config(decoder=True)
        return x * text.num_hidden_layers, text is config

    cfg = transformers.BartConfig(d_model=8, encoder_layers=3, decoder_layers=2, vocab_size=16)
    before = copy.deepcopy(vars(cfg))
    opt, backend = optimized(f)
    x = t()
    expected = f(x, cfg)
    got = opt(x, cfg)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert vars(cfg) == before
    assert [e.kind for e in opt.cache_entries()] == ["graph"], opt.cache_entries()[0].reason
