"""Dynamic shapes, differential over many sizes: each program runs eagerly and optimized on
copies of the same inputs for sizes 2..12 and a few larger ones; results, exceptions and
printed output must be equal, and the number of cache entries / backend calls must be the
policy's: automatic (`dynamic=None`) a static entry then one symbolic entry, `dynamic=True`
one entry, `dynamic=False` one entry per size. Sizes 0 and 1 stay specialised."""
from __future__ import annotations

import contextlib
import copy
import io
import warnings

import pytest
import torch
import torch._dynamo
from helpers import CountingBackend, entry_tree, same
from kernels import capture_kernels as K
from kernels.capture_kernels import triton

import minidynamo

SIZES = (*range(2, 13), 17, 64)
# dynamic=False (and programs that specialise) make one entry per size: stay under
# config.cache_size_limit (8), past which new sizes run eagerly.
FEW_SIZES = tuple(range(2, 9))


def _outcome(fn, args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            return fn(*args), None, buf.getvalue()
        except Exception as e:  # noqa: BLE001 - the user's exception, compared below
            return None, e, buf.getvalue()


def compare(fn, opt, args, what):
    """fn and opt on copies of `args`: the same result (or exception) and printed output."""
    expected, e_exc, e_out = _outcome(fn, copy.deepcopy(args))
    got, o_exc, o_out = _outcome(opt, copy.deepcopy(args))
    assert (e_exc is None) == (o_exc is None), f"{what}: eager {e_exc!r}, optimized {o_exc!r}"
    if e_exc is not None:
        assert (type(o_exc), str(o_exc)) == (type(e_exc), str(e_exc)), what
    else:
        same(got, expected, what)
    assert o_out == e_out, f"{what}: printed {o_out!r}, eager printed {e_out!r}"


def over_sizes(fn, make, sizes=SIZES, dynamic=None):
    """optimize(fn) called with make(n) for each size, each compared with eager."""
    backend = CountingBackend()
    opt = minidynamo.optimize(fn, backend=backend, dynamic=dynamic)
    for n in sizes:
        compare(fn, opt, make(n), f"{getattr(fn, '__name__', fn)} at size {n}")
    return opt, backend


def rows(*tail):
    return lambda n: (torch.randn(n, *tail),)


def symbolic(entry) -> bool:
    return "symbolic sizes" in entry.describe()


def shape_of(entry, name="x") -> str:
    """How the entry's TENSOR_MATCH of input `name` reads: `tensor float32 cpu (s0, 3) ...`."""
    return next(g.describe() for g in entry.guards
                if g.kind == "TENSOR_MATCH" and g.source.name() == name)


# --- programs with no size-specialising code ------------------------------------------
def elementwise(x):
    return (x * 2 + 1).relu() - x.sigmoid() / 3


def reductions(x):
    return x.sum(0), x.mean(), x.amax(1), x.softmax(0), x.cumsum(0)


def matmul(x, w):
    return x @ w, x.t() @ x


def views(x):
    return x.view(x.shape[0], -1), x.view(-1), x.reshape(x.shape[0] * 2, -1), x.flatten(1)


def permutes(x):
    return x.permute(2, 0, 1).transpose(1, 2).contiguous(), x.transpose(0, 1) * 2


def expands(x):
    return x[:, :1].expand(x.shape[0], 5) + 0, x.unsqueeze(1).expand(-1, 4, -1).sum(1)


def unsqueezes(x):
    return x.unsqueeze(0).unsqueeze(-1).squeeze(0) * 2


def factories(x):
    n = x.shape[0]
    return (torch.zeros(n, 4) + x.sum(1, keepdim=True), x.new_zeros(n) + x[:, 0],
            torch.arange(n) * x[:, 1], torch.ones(n * 2).cumsum(0), torch.full((n,), 2.0))


def numel(x):
    return x.sum() / x.numel(), x.view(x.numel())


def size_scale(x):
    return x * x.size(0) + x.size(1)


def returns_size(x):
    return x + 1, x.shape[0], x.shape


def size_arithmetic(x):
    n = x.shape[0]
    values = (n * 2 + 1, n // 3, n % 4, -n, n / 2, n ** 2, n - 1)
    return x * (n % 4) + n // 3 - n / 2, values


def duck_add(x, y):
    return x + y, x * y.shape[0]


def broadcast(x, w):
    return x * w, x + w[:1]


AGNOSTIC = {
    "elementwise": (elementwise, rows(3)),
    "reductions": (reductions, rows(3)),
    "matmul": (matmul, lambda n: (torch.randn(n, 3), torch.randn(3, 4))),
    "views": (views, rows(2, 3)),
    "permutes": (permutes, rows(2, 3)),
    "expands": (expands, rows(3)),
    "unsqueezes": (unsqueezes, rows(3)),
    "factories": (factories, rows(3)),
    "numel": (numel, rows(3)),
    "size_scale": (size_scale, rows(3)),
    "returns_size": (returns_size, rows(3)),
    "size_arithmetic": (size_arithmetic, rows(3)),
    "duck_add": (duck_add, lambda n: (torch.randn(n, 3), torch.randn(n, 3))),
    "broadcast": (broadcast, lambda n: (torch.randn(n, 3), torch.randn(3))),
}


@pytest.mark.parametrize("name", list(AGNOSTIC))
def test_automatic_policy_traces_the_second_size_symbolically(name):
    fn, make = AGNOSTIC[name]
    opt, backend = over_sizes(fn, make)
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == ["graph", "graph"], [e.describe() for e in entries]
    assert backend.calls == 2
    assert [e.hit_count for e in entries] == [1, len(SIZES) - 1]
    assert not symbolic(entries[0]) and symbolic(entries[1])


@pytest.mark.parametrize("name", list(AGNOSTIC))
def test_dynamic_true_traces_once(name):
    fn, make = AGNOSTIC[name]
    opt, backend = over_sizes(fn, make, dynamic=True)
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == ["graph"] and backend.calls == 1
    assert entries[0].hit_count == len(SIZES) and symbolic(entries[0])


@pytest.mark.parametrize("name", list(AGNOSTIC))
def test_dynamic_false_traces_each_size(name):
    fn, make = AGNOSTIC[name]
    opt, backend = over_sizes(fn, make, FEW_SIZES, dynamic=False)
    entries = opt.cache_entries()
    assert len(entries) == backend.calls == len(FEW_SIZES)
    assert not any(symbolic(e) for e in entries)


def test_size_arithmetic_is_computed_by_the_graph():
    opt, _ = over_sizes(size_arithmetic, rows(3), dynamic=True)
    code = opt.cache_entries()[0].graph_code
    assert "size(0)" in code and "floordiv" in code and "mod" in code, code


def test_two_inputs_of_equal_size_are_related_by_a_guard():
    opt, _ = over_sizes(duck_add, lambda n: (torch.randn(n, 3), torch.randn(n, 3)), dynamic=True)
    exprs = opt.cache_entries()[0].guard_exprs
    assert any("x.size(0)" in e and "y.size(0)" in e for e in exprs), exprs
    # Sizes that differ: the same error as eager; a y of one row broadcasts, correctly.
    compare(duck_add, opt, (torch.randn(5, 3), torch.randn(4, 3)), "mismatched sizes")
    compare(duck_add, opt, (torch.randn(5, 3), torch.randn(1, 3)), "a y of one row")


def slice_from_one(x):
    return x[1:] - x[:-1], x[1:].sum(0)


@pytest.mark.parametrize("dynamic, sizes, entries", [
    (None, SIZES, 2), (True, SIZES[1:], 1), (True, SIZES, 2)])
def test_slice_from_one(dynamic, sizes, entries):
    # At size 2, x[1:] has one row: torch specialises that size as it does size 1, so
    # dynamic=True traced first at 2 needs a second entry (torch.compile too).
    opt, backend = over_sizes(slice_from_one, rows(3), sizes, dynamic=dynamic)
    assert len(opt.cache_entries()) == backend.calls == entries
    assert symbolic(opt.cache_entries()[-1])


def test_a_symbolic_entry_still_checks_dtype_and_layout():
    opt = minidynamo.optimize(size_scale, dynamic=True)
    groups = [lambda n: torch.randn(n, 3), lambda n: torch.randn(3, n).t(),
              lambda n: torch.randn(n, 3, dtype=torch.float64)]
    for make in groups:
        for n in SIZES:
            compare(size_scale, opt, (make(n),), f"size {n}")
    assert len(opt.cache_entries()) == len(groups)


def padded(x):
    n = x.shape[0]
    wide = torch.nn.functional.pad(x, (0, n))
    return wide, torch.nn.functional.interpolate(x[None, None], size=n * 2)


def test_functional_ops_with_symbolic_arguments():
    # torch.compile traces both into its graph (fake ops under the Python dispatcher); here
    # the fake op refuses symbolic sizes and the call breaks there. Correct either way.
    opt, _ = over_sizes(padded, rows(), dynamic=True)
    assert len(opt.cache_entries()) == 1


# --- slicing with symbolic bounds -------------------------------------------------------
def first_half(x):
    return x[: x.shape[0] // 2] * 2


@pytest.mark.parametrize("dynamic", [None, True])
def test_slice_with_a_symbolic_bound(dynamic):
    # torch.compile keeps the bound symbolic (2 entries automatic, 1 with dynamic=True);
    # here the bound is specialised under a guard (x.size(0) // 2 == k): one entry per
    # distinct half (5 automatic, 4 with dynamic=True), still correct. Counts are bounded,
    # not pinned: one entry per size would be correct too.
    opt, backend = over_sizes(first_half, rows(3), FEW_SIZES, dynamic=dynamic)
    assert 1 <= len(opt.cache_entries()) <= len(FEW_SIZES)
    assert backend.calls == len(opt.cache_entries())


# --- branches on sizes ------------------------------------------------------------------
def branchy(x):
    if x.shape[0] > 8:
        return x * 2
    return x - 1


def test_branch_on_a_size_automatic_makes_one_entry_per_side():
    opt, backend = over_sizes(branchy, rows(3))
    entries = opt.cache_entries()
    # as torch.compile: static 2, then symbolic "<= 8" at 3, then symbolic "> 8" at 9
    assert len(entries) == backend.calls == 3
    assert not symbolic(entries[0]) and symbolic(entries[1]) and symbolic(entries[2])
    assert [e.hit_count for e in entries] == [1, 6, len(SIZES) - 7]
    assert any("x.size(0) <= 8" in e for e in entries[1].guard_exprs), entries[1].guard_exprs
    assert any("9 <= x.size(0)" in e for e in entries[2].guard_exprs), entries[2].guard_exprs


def test_branch_on_a_size_dynamic_true_makes_one_entry_per_side():
    opt, backend = over_sizes(branchy, rows(3), dynamic=True)
    assert len(opt.cache_entries()) == backend.calls == 2


def test_branch_on_a_size_dynamic_false_makes_one_entry_per_size():
    opt, backend = over_sizes(branchy, rows(3), (*range(5, 12),), dynamic=False)
    assert len(opt.cache_entries()) == backend.calls == 7


def parity(x):
    if x.shape[0] % 2 == 0:
        return x.view(x.shape[0] // 2, -1)
    return x[1:].view(x.shape[0] // 2, -1)


def test_branch_on_parity_dynamic_true():
    opt, _ = over_sizes(parity, rows(3), dynamic=True)
    assert len(opt.cache_entries()) == 2


def test_guard_failure_names_the_size_that_failed_the_branch_guard():
    opt = minidynamo.optimize(branchy, dynamic=True)
    for n in (3, 10):
        compare(branchy, opt, (torch.randn(n, 3),), f"size {n}")
    failure = opt.guard_failures()[-1]
    assert failure.kind == "SHAPE_ENV", failure
    assert "x.size(0) = 10" in failure.reason and "x.size(0) <= 8" in failure.reason, failure.reason
    assert "x.size(0)" in failure.message()


# --- code that needs the number itself: specialised under a guard -----------------------
def loop_rows(x):
    acc = x[0]
    for i in range(x.shape[0]):
        acc = acc + x[i] * i
    return acc


def with_len(x):
    return x + len(x)


def with_int(x):
    return x * int(x.shape[0]), float(x.shape[0])


def last_rows(x):
    return x[x.shape[0] - 1:], torch.cat([x, x[: x.shape[0] - 1]])


def unbinds(x):
    return x.unbind(0), [r * 2 for r in x]


def python_values(x):
    n = x.shape[0]
    return str(n), [0] * n, {n: 1}, sum(x.shape), abs(-n), divmod(n, 3)


@pytest.mark.parametrize("fn", [loop_rows, unbinds, python_values], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_size_python_needs_as_a_number_makes_one_entry_per_size(fn, dynamic):
    # range(n), a tuple of n tensors, str(n), a list of n items, a dict key: the number is
    # baked in under a guard `x.size(0) == n`, as torch.compile does. Each later size must
    # miss that entry (a missing guard reused it: wrong results).
    opt, backend = over_sizes(fn, rows(3), FEW_SIZES, dynamic=dynamic)
    assert len(opt.cache_entries()) == len(FEW_SIZES)
    assert any("x.size(0) == 3" in e for e in opt.cache_entries()[1].guard_exprs)


@pytest.mark.parametrize("fn", [with_len, with_int, last_rows], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_size_specialised_where_torch_compile_keeps_it_symbolic(fn, dynamic):
    # torch.compile keeps len(x) and the bound of x[n - 1:] symbolic (2 entries automatic,
    # 1 with dynamic=True); here they specialise (one entry per size). Correct either
    # way: counts are bounded, not pinned.
    opt, backend = over_sizes(fn, rows(3), FEW_SIZES, dynamic=dynamic)
    assert 1 <= len(opt.cache_entries()) == backend.calls <= len(FEW_SIZES)


def test_math_ceil_of_a_size_stays_symbolic():
    import math

    def ceil_half(x):
        return x[: math.ceil(x.shape[0] / 2)]
    opt, _ = over_sizes(ceil_half, rows(3), FEW_SIZES, dynamic=True)
    assert len(opt.cache_entries()) == 1  # as torch.compile: the bound is a graph value
    assert "ceil" in opt.cache_entries()[0].graph_code


# --- sizes 0 and 1 ----------------------------------------------------------------------
def scaled_sum(x):
    return (x * 2).sum(0) + x.shape[0]


def test_sizes_zero_and_one_after_a_symbolic_entry_get_their_own_entries():
    opt, backend = over_sizes(scaled_sum, rows(2), (3, 4, 5, 1, 0, 1, 0, 6))
    entries = opt.cache_entries()
    # as torch.compile: static 3, symbolic (>= 2), then 1 and 0 each specialised
    assert len(entries) == backend.calls == 4
    assert [e.hit_count for e in entries] == [1, 3, 2, 2]
    assert symbolic(entries[1]) and not symbolic(entries[2]) and not symbolic(entries[3])


def test_dynamic_true_specialises_a_first_size_of_one():
    opt, _ = over_sizes(scaled_sum, rows(2), (1, *SIZES), dynamic=True)
    entries = opt.cache_entries()
    assert len(entries) == 2
    assert "cpu (1, s" in shape_of(entries[0]) and "cpu (s" in shape_of(entries[1])


def per_row(x):
    return x.sum(-1) * x.shape[1] + x.shape[0]


def test_dynamic_true_keeps_a_dimension_of_one_static():
    opt, _ = over_sizes(per_row, rows(1), dynamic=True)
    entries = opt.cache_entries()
    assert len(entries) == 1
    shape = shape_of(entries[0])
    assert "cpu (s" in shape and ", 1) symbolic sizes" in shape, shape
    compare(per_row, opt, (torch.randn(5, 4),), "a second dimension of 4")
    assert len(opt.cache_entries()) == 2


# --- marks ------------------------------------------------------------------------------
@pytest.mark.parametrize("mark", [minidynamo.mark_dynamic, torch._dynamo.mark_dynamic],
                         ids=["minidynamo", "torch._dynamo"])
@pytest.mark.parametrize("dynamic", [None, False])
def test_mark_dynamic_is_symbolic_from_the_first_call(mark, dynamic):
    backend = CountingBackend()
    opt = minidynamo.optimize(scaled_sum, backend=backend, dynamic=dynamic)
    for i, n in enumerate(SIZES):
        x = torch.randn(n, 2)
        if i == 0:
            mark(x, 0)
        compare(scaled_sum, opt, (x,), f"size {n}")
    entries = opt.cache_entries()
    assert len(entries) == backend.calls == 1 and symbolic(entries[0])


@pytest.mark.parametrize("mark", [minidynamo.mark_static, torch._dynamo.mark_static],
                         ids=["minidynamo", "torch._dynamo"])
@pytest.mark.parametrize("dynamic", [None, True])
def test_mark_static_stays_static(mark, dynamic):
    opt = minidynamo.optimize(scaled_sum, dynamic=dynamic)
    for n in FEW_SIZES:
        x = torch.randn(n, 2)
        mark(x, 0)
        compare(scaled_sum, opt, (x,), f"size {n}")
    entries = opt.cache_entries()
    assert len(entries) == len(FEW_SIZES)
    assert all(shape_of(e).startswith(f"tensor float32 cpu ({n}, ") for e, n in zip(entries, FEW_SIZES))


def test_mark_static_on_one_dimension_leaves_the_other_automatic():
    opt = minidynamo.optimize(per_row)
    for n in SIZES:
        x = torch.randn(4, n)
        minidynamo.mark_static(x, 0)
        compare(per_row, opt, (x,), f"size {n}")
    entries = opt.cache_entries()
    assert len(entries) == 2
    shape = shape_of(entries[1])
    assert "cpu (4, s" in shape, shape


# --- nn.Modules and autograd ------------------------------------------------------------
class Attention(torch.nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.d = d

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(self.d, dim=-1)
        scores = q @ k.transpose(-2, -1) / d ** 0.5
        causal = torch.ones(t, t).tril().bool()
        return scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v


MODULES = {
    "linear": (lambda: torch.nn.Linear(3, 5), rows(3)),
    "layernorm": (lambda: torch.nn.LayerNorm(3), rows(3)),
    "mlp": (lambda: torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.GELU(),
                                        torch.nn.Linear(8, 3)), lambda n: (torch.randn(2, n, 3),)),
    "attention": (Attention, lambda n: (torch.randn(2, n, 8),)),
    "conv1d": (lambda: torch.nn.Conv1d(4, 6, 3, padding=1), lambda n: (torch.randn(2, 4, n),)),
}


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("dynamic", [None, True])
def test_module_over_a_dynamic_dimension(name, dynamic):
    torch.manual_seed(0)
    make_module, make = MODULES[name]
    module = make_module()
    opt, backend = over_sizes(module, make, dynamic=dynamic)
    expected = 2 if dynamic is None else 1
    assert len(opt.cache_entries()) == backend.calls == expected


@pytest.mark.parametrize("name", ["linear", "attention", "conv1d"])
def test_gradients_over_a_dynamic_dimension(name):
    torch.manual_seed(0)
    make_module, make = MODULES[name]
    module = make_module()

    def loss(x):
        return module(x).tanh().sum() * x.shape[-1] / x.numel()
    backend = CountingBackend()
    opt = minidynamo.optimize(loss, backend=backend)
    for n in SIZES:
        (x,) = make(n)
        grads = []
        for f in (loss, opt):
            module.zero_grad()
            xi = x.clone().requires_grad_()
            value = f(xi)
            value.backward()
            grads.append((value.detach(), xi.grad, *[p.grad.clone() for p in module.parameters()]))
        same(grads[1], grads[0], f"size {n}")
    assert len(opt.cache_entries()) == backend.calls == 2


class ScaleBySize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w + x.shape[0]

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, (grad * x).sum(0)


def through_function(x, w):
    return ScaleBySize.apply(x, w).sin().sum()


@pytest.mark.parametrize("dynamic", [None, True])
def test_autograd_function_over_a_dynamic_dimension(dynamic):
    backend = CountingBackend()
    opt = minidynamo.optimize(through_function, backend=backend, dynamic=dynamic)
    for n in SIZES:
        x, w = torch.randn(n, 3), torch.randn(3)
        grads = []
        for f in (through_function, opt):
            xi, wi = x.clone().requires_grad_(), w.clone().requires_grad_()
            value = f(xi, wi)
            value.backward()
            grads.append((value.detach(), xi.grad, wi.grad))
        same(grads[1], grads[0], f"size {n}")
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == ["graph"] * (2 if dynamic is None else 1)


# --- graph breaks -----------------------------------------------------------------------
def prints_sizes(x):
    y = x * 2
    print("rows:", x.shape[0], y.shape, len(y.shape))
    return y + x.shape[0]


@pytest.mark.parametrize("dynamic, entries", [(None, 2), (True, 1)])
def test_graph_break_with_dynamic_sizes(dynamic, entries):
    opt, backend = over_sizes(prints_sizes, rows(3), dynamic=dynamic)
    top = opt.cache_entries()
    assert [e.kind for e in top] == ["break"] * entries
    # the resume function follows the same policy: as many entries of its own
    tree = entry_tree(opt, backend)
    assert len(tree) == backend.calls == 2 * entries
    assert symbolic(top[-1])


def reshape_pairs(x):
    return x.view(2, -1) * 2


def test_a_size_the_program_rejects_raises_as_eager():
    # odd sizes make view(2, -1) raise; the rest must still be right
    over_sizes(reshape_pairs, rows(3))
    over_sizes(reshape_pairs, rows(3), dynamic=True)


# --- Triton kernel launches -------------------------------------------------------------
def launch_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    K.add_kernel[(triton.cdiv(n, 16),)](x, y, out, n, BLOCK=16)
    return out


def both_vectors(n):
    return torch.randn(n), torch.randn(n)


def test_kernel_launch_with_static_sizes():
    opt, backend = over_sizes(launch_add, both_vectors, FEW_SIZES, dynamic=False)
    assert len(opt.cache_entries()) == backend.calls == len(FEW_SIZES)


@pytest.mark.parametrize("dynamic", [None, True])
def test_kernel_launch_with_a_dynamic_size(dynamic):
    # torch.compile passes n and the grid as symbolic values (2 entries automatic, 1 with
    # dynamic=True). A launch that specialises them needs one entry per size (then, past
    # cache_size_limit, runs eagerly); either way every result must be right.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cache_size_limit, if specialised
        opt, backend = over_sizes(launch_add, both_vectors, (*SIZES, 100, 1000), dynamic=dynamic)
    assert 1 <= len(opt.cache_entries()) == backend.calls <= minidynamo.config.cache_size_limit


# --- what the entries say ---------------------------------------------------------------
def test_describe_shows_symbolic_sizes_and_their_guards():
    opt, _ = over_sizes(size_scale, rows(3))
    entry = opt.cache_entries()[1]
    text = entry.describe()
    shape = shape_of(entry)
    assert shape.startswith("tensor float32 cpu (s") and ", 3) symbolic sizes" in shape, shape
    assert "2 <= x.size(0)" in entry.guard_exprs, entry.guard_exprs
    assert "x.size(0): 2 <= x.size(0)" in text, text
    assert "x.size(0)" in entry.graph_code, entry.graph_code


@pytest.mark.parametrize("how", ["dynamic_true", "mark_dynamic"])
def test_explain_shows_symbolic_sizes(how):
    x = torch.randn(4, 3)
    if how == "mark_dynamic":
        minidynamo.mark_dynamic(x, 0)
        fn = size_scale
    else:
        fn = minidynamo.optimize(size_scale, dynamic=True)
    out = minidynamo.explain(fn)(x)
    assert "symbolic sizes" in str(out), str(out)
    assert "x.size(0)" in out.graphs[0].code, out.graphs[0].code


def test_min_and_max_of_sizes_stay_symbolic():
    def clamp_rows(x):
        n = x.shape[0]
        k, m = min(n, 8), max(4, n)
        return x[:k].sum(0) * m, k, m
    opt = minidynamo.optimize(clamp_rows, dynamic=True)
    for n in (2, 3, 5, 8, 9, 17, 30):
        x = torch.randn(n, 3)
        got, expected = opt(x), clamp_rows(x)
        assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
        assert type(got[1]) is int and type(got[2]) is int
    assert len(opt.cache_entries()) == 1  # as torch.compile: sym_min/sym_max in the graph


def test_an_argument_that_was_a_tensor_is_a_symbolic_int_when_an_int():
    """An argument passed as a tensor, then an int, then a tensor again: its int is symbolic
    from its first int call (its kind varied), so a later int reuses that entry (3 traces for
    the 7 calls, as torch.compile's automatic dynamic), every result eager's."""
    def foo(x, y):
        return x * y

    backend = CountingBackend()
    opt = minidynamo.optimize(foo, backend=backend)
    calls = [(torch.randn(2), torch.randn(2)), (torch.randn(3), 3), (torch.randn(4), torch.randn(4)),
             (torch.randn(4), torch.randn(4)), (torch.randn(5), 4), (torch.randn(5), 4),
             (torch.randn(6), torch.randn(6))]
    for args in calls:
        same(opt(*args), foo(*args))
    assert len(opt.cache_entries()) == 3 and backend.calls == 3
    # an int argument that was only ever an int stays static until it changes
    opt2 = minidynamo.optimize(foo, backend=CountingBackend())
    opt2(torch.randn(3), 3)
    assert not any(e.symbolic for e in opt2.cache_entries())
