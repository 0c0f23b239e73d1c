"""Past config.cache_size_limit: calls go to the entry that took their key before, or
straight to the original function, after one lookup (not through every entry's guards),
with results and side effects exactly as eager."""
import warnings

import pytest
import torch

import minidynamo
from minidynamo.codegen import MISS


@pytest.fixture(autouse=True)
def _limit():
    saved = minidynamo.config.cache_size_limit
    minidynamo.config.cache_size_limit = 3
    warnings.simplefilter("ignore", RuntimeWarning)
    yield
    minidynamo.config.cache_size_limit = saved


def scaled(x, s):
    return x * s + 1


def test_values_past_the_limit_run_eagerly_and_entries_still_hit():
    opt = minidynamo.optimize(scaled, dynamic=False)
    x = torch.ones(3)
    values = [i / 4 for i in range(12)]
    for _ in range(3):  # first pass fills the cache; later passes go through the lookup
        for v in values:
            assert torch.equal(opt(x, v), scaled(x, v))
    entries = opt.cache_entries()
    assert len(entries) == 3
    # each of the first three values hit its own entry on every pass
    assert [e.hit_count for e in entries] == [3, 3, 3]
    assert type(opt).__call__.__name__ == "scaled"  # the past-the-limit dispatcher


def test_a_call_whose_key_was_eager_but_passes_an_entry_is_still_right():
    opt = minidynamo.optimize(scaled)
    for v in (0.5, 1.5, 2.5, 3.5):
        opt(torch.ones(2), v)
    # same key (s == 3.5) with another tensor: eager anyway, and right
    assert torch.equal(opt(torch.ones(2, dtype=torch.float64), 3.5),
                       scaled(torch.ones(2, dtype=torch.float64), 3.5))
    # a key seen in an entry, with a tensor that entry's guards reject: tried again, right
    y = torch.ones(5)
    assert torch.equal(opt(y, 0.5), scaled(y, 0.5))


def test_keyed_by_the_tensor_that_keeps_changing():
    opt = minidynamo.optimize(lambda x: x.sum(0) * 2, dynamic=False)
    shapes = [(n, 2) for n in range(2, 10)]
    for _ in range(2):
        for s in shapes:
            t = torch.arange(s[0] * s[1], dtype=torch.float32).reshape(s)
            assert torch.equal(opt(t), t.sum(0) * 2)
    assert len(opt.cache_entries()) == 3


def test_keyword_arguments_and_errors_past_the_limit():
    opt = minidynamo.optimize(scaled)
    for v in (1.0, 2.0, 3.0, 4.0):
        opt(torch.ones(2), s=v)
    assert torch.equal(opt(s=5.0, x=torch.ones(2)), scaled(torch.ones(2), 5.0))
    with pytest.raises(TypeError) as eager:
        scaled(torch.ones(2), 5.0, 1)
    with pytest.raises(TypeError) as optimized:
        opt(torch.ones(2), 5.0, 1)
    assert str(optimized.value) == str(eager.value)


def test_reset_returns_to_tracing():
    opt = minidynamo.optimize(scaled)
    for v in (1.0, 2.0, 3.0, 4.0):
        opt(torch.ones(2), v)
    opt.reset()
    opt(torch.ones(2), 9.0)
    assert len(opt.cache_entries()) == 1 and opt.cache_entries()[0].kind == "graph"
    assert opt.cache_entries()[0].run(torch.ones(2), 9.0) is not MISS


def test_side_effects_once_past_the_limit():
    log = []

    def f(x, s):
        log.append(s)
        return x + s
    opt = minidynamo.optimize(f)
    for v in (1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 1.0):
        opt(torch.ones(1), v)
    assert log == [1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 1.0]
