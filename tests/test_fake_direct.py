"""fakecache.direct: aten ops run straight to their meta kernels must give what
FakeTensorMode's own dispatch gives. Each example runs one call on fakes of the same real
tensors twice, under a stock FakeTensorMode and under the trace's mode (memory_facts.FactMode,
which takes the direct path), and compares every result's and argument's metadata:
size, stride, offset, dtype, device, storage sharing, autograd state, versions, or the
exception raised."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

from minidynamo import fakecache, memory_facts
from minidynamo.memory_facts import FactMode


def _index_put(x, y):
    x = x.clone()
    x[0] = y[0]
    return x


# (name, arity, call): calls over tensors of one shape (the second may be broadcast or
# transposed); many go through several aten ops, in-place ones included.
CALLS = [
    ("add", 2, lambda x, y: x + y), ("add scalar", 1, lambda x: x + 2),
    ("mul", 2, lambda x, y: x * y), ("sub alpha", 2, lambda x, y: torch.sub(x, y, alpha=2)),
    ("div", 2, lambda x, y: x / y), ("neg", 1, lambda x: -x), ("exp", 1, torch.exp),
    ("tanh", 1, torch.tanh), ("relu", 1, F.relu), ("gelu", 1, F.gelu), ("silu", 1, F.silu),
    ("softmax", 1, lambda x: F.softmax(x, -1)), ("log_softmax", 1, lambda x: F.log_softmax(x, 0)),
    ("sum dim", 1, lambda x: x.sum(-1)), ("mean keepdim", 1, lambda x: x.mean(0, keepdim=True)),
    ("amax", 1, lambda x: x.amax(-1)), ("pow", 1, lambda x: x.pow(2)), ("rsqrt", 1, torch.rsqrt),
    ("transpose", 1, lambda x: x.transpose(0, -1)), ("permute", 1, lambda x: x.permute(*range(x.dim() - 1, -1, -1))),
    ("unsqueeze", 1, lambda x: x.unsqueeze(1)), ("squeeze", 1, lambda x: x.unsqueeze(0).squeeze(0)),
    ("expand", 1, lambda x: x.unsqueeze(0).expand(3, *x.shape)), ("reshape", 1, lambda x: x.reshape(-1)),
    ("flatten", 1, lambda x: x.flatten()), ("contiguous", 1, lambda x: x.contiguous()),
    ("clone", 1, lambda x: x.clone()), ("t", 1, lambda x: x.t() if x.dim() <= 2 else x.mT),
    ("cat", 2, lambda x, y: torch.cat([x, y], 0)), ("stack", 2, lambda x, y: torch.stack([x, y], -1)),
    ("where", 2, lambda x, y: torch.where(x > 0, x, y)), ("masked_fill", 1, lambda x: x.masked_fill(x > 0, 1.0)),
    ("matmul", 2, lambda x, y: x @ y.mT), ("mm", 2, lambda x, y: x.flatten(0, -2) @ y.flatten(0, -2).t()),
    ("linear", 2, lambda x, y: F.linear(x, y.flatten(0, -2)[: x.shape[-1]].t())),
    ("layer_norm", 1, lambda x: F.layer_norm(x, x.shape[-1:])),
    ("to double", 1, lambda x: x.to(torch.float64)), ("type_as", 2, lambda x, y: x.type_as(y)),
    ("slice", 1, lambda x: x[..., 1:]), ("select", 1, lambda x: x[0]), ("narrow", 1, lambda x: x.narrow(-1, 0, 1)),
    ("chunk", 1, lambda x: x.chunk(2, -1)), ("split", 1, lambda x: x.split(1, 0)), ("unbind", 1, lambda x: x.unbind(0)),
    ("add_", 2, lambda x, y: x.add_(y)), ("mul_", 1, lambda x: x.mul_(2)), ("zero_", 1, lambda x: x.zero_()),
    ("copy_", 2, lambda x, y: x.copy_(y)), ("transpose_", 1, lambda x: x.transpose_(0, -1)),
    ("unsqueeze_", 1, lambda x: x.unsqueeze_(0)), ("index_put", 2, _index_put),
    ("detach", 1, lambda x: x.detach()), ("alias view_as", 2, lambda x, y: x.view_as(y)),
    ("ones_like", 1, torch.ones_like), ("empty_like", 1, torch.empty_like), ("new_zeros", 1, lambda x: x.new_zeros(3)),
    ("dropout eval", 1, lambda x: F.dropout(x, 0.5, training=False)),
    ("embedding", 2, lambda x, y: F.embedding(torch.zeros(x.shape, dtype=torch.long, device=x.device), y.flatten(0, -2))),
]


def _layout(real: torch.Tensor, how: str) -> torch.Tensor:
    if how == "transposed" and real.dim() >= 2:
        return real.transpose(0, -1).contiguous().transpose(0, -1)
    if how == "offset":
        return torch.cat([real.flatten(), real.flatten()])[1:real.numel() + 1].view(real.shape)
    if how == "expanded" and real.dim() >= 1:
        return real.select(0, 0).unsqueeze(0).expand(real.shape)
    if how == "channels_last" and real.dim() == 4:
        return real.contiguous(memory_format=torch.channels_last)
    return real


def _describe(v, args: list):
    """What a result says of itself: per tensor its metadata, which argument's storage it
    shares and its autograd state; per other value, the value."""
    if isinstance(v, (tuple, list)):
        return type(v).__name__, [_describe(x, args) for x in v]
    if not isinstance(v, torch.Tensor):
        return repr(v)
    shares = [i for i, a in enumerate(args) if a.untyped_storage()._cdata == v.untyped_storage()._cdata]
    return (type(v).__name__, tuple(v.shape), v.stride(), v.storage_offset(), v.dtype, v.device,
            v.untyped_storage().nbytes(), shares, v._is_view(), v.requires_grad, v.is_leaf,
            type(v.grad_fn).__name__, v.is_contiguous(), v.is_contiguous(memory_format=torch.channels_last))


def _run(mode: FakeTensorMode, call, reals: list, grad: bool):
    fakes = [mode.from_tensor(r) for r in reals]
    try:
        with mode, torch.set_grad_enabled(grad):
            out = call(*fakes)
    except Exception as e:  # eager raises it too: both paths must raise alike
        return "raised", type(e).__name__
    after = [(tuple(f.shape), f.stride(), f.storage_offset(), f._version) for f in fakes]
    return _describe(out, fakes), after, _write_through(mode, out, fakes)


def _write_through(mode, out, fakes):
    """A write to a tensor result: which arguments' version counters it moves (a view's
    is its base's), or what it raises."""
    if not isinstance(out, torch.Tensor):
        return None
    try:
        with mode, torch.no_grad():
            out.add_(1)
    except Exception as e:
        return "raised", type(e).__name__
    return out._version, [f._version for f in fakes]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=st.sampled_from(CALLS), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.int64]),
       layouts=st.tuples(*[st.sampled_from(["plain", "transposed", "offset", "expanded", "channels_last"])] * 2),
       broadcast=st.booleans(), requires_grad=st.booleans(), grad=st.booleans())
def test_direct_meta_matches_fake_tensor_mode(call, shape, dtype, layouts, broadcast, requires_grad, grad):
    name, arity, fn = call
    reals = []
    for i in range(arity):
        s = [1] * len(shape) if i == 1 and broadcast else shape
        r = torch.randn(s).to(dtype) if dtype.is_floating_point else torch.randint(0, 3, s, dtype=dtype)
        r = _layout(r, layouts[i])
        if requires_grad and dtype.is_floating_point and i == 0:
            r = r.detach().requires_grad_(True)
        reals.append(r)
    before = dict(_stats)
    want = _run(FakeTensorMode(), fn, reals, grad)
    got = _run(FactMode(), fn, reals, grad)
    assert got == want, name
    _stats["examples"] += 1
    _stats["direct"] += _taken[0] - before.get("taken", 0)
    _stats["taken"] = _taken[0]


_stats = {"examples": 0, "direct": 0, "taken": 0}
_taken = [0]


@pytest.fixture(autouse=True, scope="module")
def _count_direct():
    """Count the ops that took the direct path, so the comparison is known to test it."""
    real = fakecache.direct

    def counting(mode, func, args, kwargs):
        r = real(mode, func, args, kwargs)
        if r is not fakecache.SLOW:
            _taken[0] += 1
        return r
    memory_facts.direct = counting
    yield
    memory_facts.direct = real


def test_direct_path_was_compared():
    """Runs after the property test (file order): most of its calls took the direct path."""
    if _stats["examples"] == 0:
        pytest.skip("the property test did not run")
    assert _stats["direct"] >= _stats["examples"]


@pytest.mark.parametrize("func, direct", [
    (torch.ops.aten.mm.default, True), (torch.ops.aten.add.Tensor, True), (torch.ops.aten.transpose.int, True),
    (torch.ops.aten.addmm.default, False),  # a Python decomposition in FakeTensorMode
    (torch.ops.aten.empty.memory_format, False),  # a constructor: its own fake rule
    (torch.ops.aten._to_copy.default, False), (torch.ops.aten.convolution.default, False),
    (torch.ops.aten.size.default, False), (torch.ops.aten.lift_fresh.default, False),
    (torch.ops.prims.view_of.default, False),
])
def test_routes(func, direct):
    assert fakecache._route(FakeTensorMode(), func) is direct


def test_constants_and_other_modes_take_the_slow_path():
    mode, other = FactMode(), FakeTensorMode()
    x = mode.from_tensor(torch.randn(2, 3))
    assert fakecache.direct(mode, torch.ops.aten.mm.default, (x, x.t()), {}) is not fakecache.SLOW
    y = other.from_tensor(torch.randn(3, 2))
    assert fakecache.direct(mode, torch.ops.aten.mm.default, (x, y), {}) is fakecache.SLOW
    with mode:
        c = torch.tensor(2.0)  # a constant of the mode
    assert c.constant is not None
    assert fakecache.direct(mode, torch.ops.aten.add.Tensor, (c, c), {}) is fakecache.SLOW
    assert fakecache.direct(mode, torch.ops.aten.add.Tensor, (x, torch.ones(2, 3)), {}) is fakecache.SLOW


def test_a_fake_rule_registered_later_is_followed():
    """A rule torch registers after a route was decided (torch.export does, for a while)
    decides that op's route again: the op then takes FakeTensorMode's path."""
    from torch._subclasses import fake_impls
    mode = FactMode()
    x = mode.from_tensor(torch.randn(2, 3))
    op = torch.ops.aten.mm.default
    assert fakecache.direct(mode, op, (x, x.t()), {}) is not fakecache.SLOW
    fake_impls.op_implementations_checks.append((lambda func: func is op, lambda *a, **k: NotImplemented))
    try:
        assert fakecache.direct(mode, op, (x, x.t()), {}) is fakecache.SLOW
    finally:
        fake_impls.op_implementations_checks.pop()
    assert fakecache.direct(mode, op, (x, x.t()), {}) is not fakecache.SLOW


def _factor(n: int, draw) -> list:
    """A random shape of `n` elements (size-1 dims anywhere, one -1 maybe)."""
    primes, p = [], 2
    while n > 1:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    shape = []
    for q in draw(st.permutations(primes)):
        if shape and draw(st.booleans()):
            shape[-1] *= q
        else:
            shape.append(q)
    for _ in range(draw(st.integers(0, 2))):
        shape.insert(draw(st.integers(0, len(shape))), 1)
    if shape and draw(st.booleans()):
        shape[draw(st.integers(0, len(shape) - 1))] = -1
    return shape


def _counting(fn, hits):
    def counted(*a):
        r = fn(*a)
        if r is not fakecache.SLOW:
            hits[0] += 1
        return r
    return counted


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), shape=st.lists(st.integers(1, 6), min_size=0, max_size=4),
       dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.int64]),
       layout=st.sampled_from(["plain", "plain", "transposed", "offset", "expanded"]),
       requires_grad=st.booleans(), grad=st.booleans())
def test_view_shortcut_matches_fake_tensor_mode(data, shape, dtype, layout, requires_grad, grad):
    """x.view(shape) of exactly contiguous tensors takes fakecache._view; others, and its
    replays from the memo, must still give what FakeTensorMode gives, aliasing included."""
    r = _layout(torch.randn(shape).to(dtype), layout)
    if requires_grad and dtype.is_floating_point:
        r = r.detach().requires_grad_(True)
    numel = r.numel()
    target = _factor(numel, data.draw) if numel else [0, -1]
    if data.draw(st.booleans()):
        target = [numel + 1]  # not a view of it: both raise
    fn = lambda x: x.view(target)  # noqa: E731
    hits = [0]
    real = fakecache._SHORTCUTS[torch.ops.aten.view.default]
    fakecache._SHORTCUTS[torch.ops.aten.view.default] = _counting(real, hits)
    try:
        want = _run(FakeTensorMode(), fn, [r], grad)
        got = _run(FactMode(), fn, [r], grad)
    finally:
        fakecache._SHORTCUTS[torch.ops.aten.view.default] = real
    assert got == want, (shape, r.stride(), target)
    _shortcut_stats["view"] += hits[0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 5), k=st.integers(1, 5), n=st.integers(1, 5),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64]),
       bias=st.sampled_from(["1d", "2d", "2d transposed", "row", "scalar"]),
       m1t=st.booleans(), m2t=st.booleans(), scale=st.sampled_from([None, (1, 1), (0.5, 2), (0, 1)]),
       requires_grad=st.booleans(), grad=st.booleans(), twice=st.booleans())
def test_addmm_shortcut_matches_fake_tensor_mode(m, k, n, dtype, bias, m1t, m2t, scale, requires_grad,
                                                 grad, twice):
    """addmm(bias, m1, m2) takes fakecache._addmm for one floating dtype, beta = alpha = 1
    and a 1-d or contiguous bias; every case must give what FakeTensorMode gives (a second
    call replays the memo)."""
    def make(shape, transposed=False):
        t = torch.randn(shape[::-1]).t() if transposed else torch.randn(shape)
        t = t.to(dtype) if dtype.is_floating_point else t.to(torch.int64)
        return t.detach().requires_grad_(True) if requires_grad and dtype.is_floating_point else t
    b = {"1d": lambda: make((n,)), "2d": lambda: make((m, n)), "2d transposed": lambda: make((m, n), True),
         "row": lambda: make((1, n)), "scalar": lambda: make(())}[bias]()
    reals = [b, make((m, k), m1t), make((k, n), m2t)]
    kw = {} if scale is None else {"beta": scale[0], "alpha": scale[1]}

    def fn(x, y, z):
        out = torch.addmm(x, y, z, **kw)
        return torch.addmm(x, y, z, **kw) if twice else out
    hits = [0]
    real = fakecache._SHORTCUTS[torch.ops.aten.addmm.default]
    fakecache._SHORTCUTS[torch.ops.aten.addmm.default] = _counting(real, hits)
    try:
        want = _run(FakeTensorMode(), fn, reals, grad)
        got = _run(FactMode(), fn, reals, grad)
    finally:
        fakecache._SHORTCUTS[torch.ops.aten.addmm.default] = real
    assert got == want, (m, k, n, dtype, bias, scale)
    _shortcut_stats["addmm"] += hits[0]


_shortcut_stats = {"view": 0, "addmm": 0}


def test_shortcuts_were_compared():
    """Runs after the property tests (file order): the shortcuts were taken, many times."""
    if not any(_shortcut_stats.values()):
        pytest.skip("the property tests did not run")
    assert _shortcut_stats["view"] >= 50 and _shortcut_stats["addmm"] >= 30, _shortcut_stats


def test_memo_replays_what_fake_tensor_mode_made():
    """Ops left to FakeTensorMode are memoized by argument metadata: the second call of each
    replays (the argument itself, a view of its storage, a fresh tensor), and the results
    match a stock FakeTensorMode's, views sharing their base's storage and version."""
    calls = [lambda x: x.to(torch.float32), lambda x: x[:, 1:], lambda x: x[1],
             lambda x: torch.addmm(x[0], x, x, beta=2), lambda x: x.new_empty((2, 3)),
             lambda x: x.view(-1, 1), lambda x: x.t().reshape(-1)]
    replays = [0]
    for transposed in (False, True):
        r = torch.randn(3, 3)
        r = r.t() if transposed else r
        fakecache._memo.clear()
        for fn in calls:
            want = _run(FakeTensorMode(), fn, [r], True)
            first = _run(FactMode(), fn, [r], True)
            real = memory_facts.replay
            memory_facts.replay = _counting(real, replays)
            try:
                second = _run(FactMode(), fn, [r], True)
            finally:
                memory_facts.replay = real
            assert first == want and second == want
    assert replays[0] >= 8, replays
