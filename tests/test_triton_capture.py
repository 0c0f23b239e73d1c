"""Triton kernel launches captured as graph nodes: launch forms, grid forms, arguments,
autotune/heuristics, recompiles, fallbacks — each differential against eager (kernels
run through Triton's interpreter on CPU)."""
import contextlib
import functools
import io

import pytest
import torch
from helpers import same_outcome
from kernels import capture_kernels as K
from kernels.capture_kernels import DEVICE, tl, triton

import minidynamo


def launches(opt, entry=-1):
    e = opt.cache_entries()[entry]
    assert e.kind == "graph", f"expected a captured graph, got {e.kind}: {e.reason}"
    return [n for n in e.gm.graph.nodes if n.op == "call_function" and "triton_kernel" in n.target.__name__]


def run_both(fn, *args, backend="eager", expect_graph=True, **kw):
    """Run eagerly and optimized (twice) on cloned inputs; compare results, input
    mutations and printed output."""
    opt = minidynamo.optimize(backend=backend)(fn)

    def clone(v):
        return v.clone() if isinstance(v, torch.Tensor) else v
    eager_args = [clone(a) for a in args]
    out_e = io.StringIO()
    with contextlib.redirect_stdout(out_e):
        expected = fn(*eager_args, **kw)
    for _ in range(2):
        opt_args = [clone(a) for a in args]
        out_o = io.StringIO()
        with contextlib.redirect_stdout(out_o):
            got = opt(*opt_args, **kw)
        torch.testing.assert_close(got, expected)
        for a, b in zip(opt_args, eager_args):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(a, b)
        assert out_o.getvalue() == out_e.getvalue()
    kinds = [e.kind for e in opt.cache_entries()]
    assert len(kinds) == 1, kinds
    if expect_graph:
        assert kinds == ["graph"], opt.cache_entries()[0].reason
    return opt


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device=DEVICE)


# --- launch forms -----------------------------------------------------------------
def test_tuple_grid_and_torch_ops_mixed():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        return torch.relu(o) + a
    opt = run_both(f, t(50), t(50))
    (node,) = launches(opt)
    assert set(node.kwargs["kwargs"]) == {"x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"}
    code = opt.cache_entries()[0].gm.code
    assert "add_kernel_launch" in code and "triton_kernel_wrapper_mutation" in code and "(4, 1, 1)" in code


@pytest.mark.parametrize("form", ["lambda", "list", "named", "local_def", "partial", "object", "rank2"])
def test_grid_forms(form):
    def f(a, b):
        o = torch.empty_like(a)
        n = a.numel()
        if form == "lambda":
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        elif form == "list":
            grid = [triton.cdiv(n, 16)]
        elif form == "named":
            grid = K.grid_1d
        elif form == "local_def":
            def grid(meta):
                return (triton.cdiv(meta["n"], meta["BLOCK"]),)
        elif form == "partial":
            grid = functools.partial(K._cdiv_grid, n, 16)
        elif form == "object":
            grid = K.GRID_OBJECT
        else:
            grid = (triton.cdiv(n, 16), 1)
        K.add_kernel[grid](a, b, o, n, BLOCK=16)
        return o
    a, b = t(70), t(70)
    if form == "list" and DEVICE == "cpu":
        # Triton's interpreter itself rejects list grids (GPU Triton takes them): the
        # captured launch normalizes the grid, so compare against the expected sum.
        opt = minidynamo.optimize(f)
        torch.testing.assert_close(opt(a, b), a + b)
    else:
        opt = run_both(f, a, b)
    assert launches(opt)[0].kwargs["grid"] == [(5, 1, 1)]


def test_run_method_and_partials():
    def f(a, b):
        o1, o2, o3 = torch.empty_like(a), torch.empty_like(a), torch.empty_like(a)
        K.add_kernel.run(a, b, o1, a.numel(), BLOCK=16, grid=(4,), warmup=False)
        launch = functools.partial(K.add_kernel[(4,)], BLOCK=16)
        launch(a, b, o2, a.numel())
        K.PARTIAL_LAUNCH(a, o1, o3, a.numel())
        return o1, o2, o3
    opt = run_both(f, t(64), t(64))
    assert len(launches(opt)) == 3


def helper_launch(a, b, block):
    o = torch.empty_like(a)
    K.add_kernel[(triton.cdiv(a.numel(), block),)](a, b, o, a.numel(), BLOCK=block)
    return o


def test_launches_in_helpers_and_loops_read_and_write_same_tensors():
    def f(a, b):
        x = a.clone()
        for i in range(3):
            K.scale_inplace[(4,)](x, 2.0, x.numel())
            x = x + i
        y = helper_launch(x, b, 16)
        x.mul_(0.5)
        K.scale_inplace[(4,)](x, -1.0, x.numel(), BLOCK=16)
        return x, y
    opt = run_both(f, t(64), t(64))
    assert len(launches(opt)) == 5


def test_input_mutation_is_seen_by_caller_in_order():
    def f(a):
        a.add_(1)
        K.scale_inplace[(4,)](a, 3.0, a.numel())
        a.sub_(2)
        return a.sum()
    run_both(f, t(64))


# --- arguments -------------------------------------------------------------------------
def test_views_slices_and_strided_args():
    def f(x):
        src = x[::2]
        out = torch.empty(src.shape[0], device=x.device)
        K.strided_copy[(triton.cdiv(src.shape[0], 16),)](src, out, src.shape[0], src.stride(0), BLOCK=16)
        col = x.view(8, 8)[:, 1]
        out2 = torch.empty(8, device=x.device)
        K.strided_copy[(1,)](col, out2, 8, col.stride(0), BLOCK=16)
        return out, out2
    run_both(f, t(64))


@pytest.mark.skipif(not K.BOOL_ARGS, reason="Triton 3.6's interpreter cannot take a bool kernel argument (eager fails too)")
def test_scalar_kinds_constexpr_and_launch_options():
    def f(x, bias, neg):
        o = torch.empty_like(x)
        K.options_kernel[(4,)](x, o, x.numel(), bias, True, None, 16, NEG=neg, num_warps=2)
        return o
    opt = run_both(f, t(64), 0.5, True)
    node = launches(opt)[0]
    assert node.kwargs["kwargs"]["NEG"] is True and node.kwargs["kwargs"]["bias"] == 0.5


def test_parameters_named_kernel_and_grid():
    def f(x):
        o = torch.empty_like(x)
        K.clash_kernel[(4,)](x, o, x.numel(), BLOCK=16)
        K.clash_kernel[(4,)](o, o, n=x.numel(), BLOCK=16)
        return o
    run_both(f, t(64))


def test_do_not_specialize_and_2d_grid():
    def f(x, y):
        o = torch.empty_like(x)
        K.add_dns[(4,)](x, y, o, x.numel(), BLOCK=16)
        m = x.view(4, 16)
        acc = torch.zeros(4, device=x.device)
        K.row_sum_2d[(4, 16)](m, acc, m.stride(0), COLS=16)
        return o, acc
    run_both(f, t(64), t(64))


# --- autotune and heuristics ---------------------------------------------------------
def test_autotune_grid_uses_chosen_config():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_autotuned[lambda meta: (triton.cdiv(a.numel(), meta["BLOCK"]),)](a, b, o, a.numel())
        return o
    opt = run_both(f, t(100), t(100))
    assert launches(opt)[0].kwargs["grid"] == [(7, 1, 1), (4, 1, 1)]


def test_heuristics_and_stack():
    def f(a, b):
        o1, o2 = torch.empty_like(a), torch.empty_like(a)
        K.add_heuristic[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, b, o1, a.numel())
        K.add_stack[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, b, o2, a.numel())
        return o1, o2
    run_both(f, t(48), t(48))
    run_both(f, t(64), t(64))


def test_prune_configs_and_reset_to_zero():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_pruned[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, b, o, a.numel())
        acc = torch.zeros(1, device=a.device)
        K.sum_into[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, acc, a.numel())
        return o, acc
    run_both(f, t(40), t(40))


def test_replacing_autotune_configs_recompiles():
    kern = triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"],
                           do_bench=K.last_config_wins())(K.add_kernel)  # a tuner of its own to edit

    def f(a, b):
        o = torch.zeros_like(a)
        kern[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, b, o, a.numel())
        return o
    opt = minidynamo.optimize(f)
    a, b = t(100), t(100)
    torch.testing.assert_close(opt(a, b), a + b)
    kern.configs = [triton.Config({"BLOCK": 64})]
    kern.cache.clear()
    torch.testing.assert_close(opt(a, b), a + b)
    assert len(opt.cache_entries()) == 2
    assert "configs" in opt.guard_failures()[-1].reason


# --- guards and recompiles --------------------------------------------------------------
def test_constexpr_change_recompiles_repeat_does_not():
    def f(a, b, block):
        o = torch.empty_like(a)
        K.add_kernel[(triton.cdiv(a.numel(), block),)](a, b, o, a.numel(), BLOCK=block)
        return o
    opt = minidynamo.optimize(f)
    a, b = t(64), t(64)
    for block in (16, 16, 32, 32, 16):
        torch.testing.assert_close(opt(a, b, block), a + b)
    assert len(opt.cache_entries()) == 2
    assert "block" in opt.guard_failures()[0].reason
    opt(t(128), t(128), 16)
    assert len(opt.cache_entries()) == 3


GLOBAL_KERNEL = K.add_kernel


def test_swapping_global_kernel_recompiles():
    global GLOBAL_KERNEL

    def f(a, b):
        o = torch.empty_like(a)
        GLOBAL_KERNEL[(4,)](a, b, o, a.numel(), BLOCK=16)
        return o
    opt = minidynamo.optimize(f)
    a, b = t(64), t(64)
    opt(a, b)
    GLOBAL_KERNEL = K.add_dns
    try:
        torch.testing.assert_close(opt(a, b), a + b)
    finally:
        GLOBAL_KERNEL = K.add_kernel
    assert len(opt.cache_entries()) == 2
    assert opt.guard_failures()[0].reason == ("kernel 'add_kernel' is a different object "
                                              "(global 'GLOBAL_KERNEL' was replaced)")


# --- fallbacks ---------------------------------------------------------------------------
def test_launch_then_print_runs_kernel_once_and_prints_once():
    def f(x):
        K.scale_inplace[(4,)](x, 2.0, x.numel())
        print("scaled", x.shape[0])
        return x
    opt = run_both(f, t(64), expect_graph=False)
    e = opt.cache_entries()[0]
    assert e.kind == "break" and e.break_reason.category == "side_effect"
    # The launch is in the graph before the print.
    nodes = [n for n in e.gm.graph.nodes if n.op == "call_function" and "triton_kernel" in n.target.__name__]
    assert len(nodes) == 1, e.gm.code


def test_launch_then_print_without_a_break_runs_kernel_once():
    def f(x):
        try:  # a decline inside a try body: the whole call runs eagerly
            K.scale_inplace[(4,)](x, 2.0, x.numel())
            print("scaled", x.shape[0])
        finally:
            pass
        return x
    opt = run_both(f, t(64), expect_graph=False)
    e = opt.cache_entries()[0]
    assert e.kind == "eager" and e.reason.category == "side_effect"


def test_kernel_defined_inside_function_falls_back_with_reason():
    def f(x):
        @triton.jit
        def inner(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
        inner[(1,)](x, x.numel(), BLOCK=64)
        return x
    out = minidynamo.explain(f)(t(64))
    (reason,) = out.break_reasons
    assert reason.category == "triton" and "defined inside the traced function" in reason.detail


def test_argument_triton_rejects_breaks_naming_kernel():
    def f(x):
        o = torch.empty_like(x)
        K.add_kernel[(4,)]([x], x, o, x.numel(), BLOCK=16)
        return o
    # The launch breaks the graph and runs natively: Triton's own error, as in eager.
    opt = minidynamo.optimize(f)
    same_outcome(f, opt, t(64))
    (entry,) = opt.cache_entries()
    reason = entry.break_reason
    assert entry.kind == "break" and reason.category == "triton"
    assert "add_kernel" in reason.detail and "x_ptr" in reason.detail


def test_untraceable_grid_falls_back_naming_kernel():
    def f(x):
        o = torch.empty_like(x)
        K.add_kernel[lambda m: (int(x.sum()),)](x, x, o, x.numel(), BLOCK=16)
        return o
    (reason,) = minidynamo.explain(f)(t(64)).break_reasons
    assert reason.category in ("triton", "data_dependent") and "add_kernel" in reason.detail


# --- functional form and side table --------------------------------------------------------
def test_functional_form_matches_eager_and_clones_only_written():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        K.scale_inplace[(4,)](a, 2.0, a.numel())
        return o, a
    opt = run_both(f, t(64), t(64), backend="functional_eager")
    gm = opt.cache_entries()[0].gm
    fnodes = [n for n in gm.graph.nodes if n.op == "call_function"
              and getattr(n.target, "__name__", "") == "triton_kernel_wrapper_functional"]
    assert [n.kwargs["tensors_to_clone"] for n in fnodes] == [["out_ptr"], ["x_ptr"]]


def test_functional_form_keeps_aliasing_between_written_params():
    def f(x):
        K.clash_kernel[(4,)](x, x, x.numel(), BLOCK=16)  # reads and writes the same tensor
        return x
    run_both(f, t(64), backend="functional_eager")


def test_side_table_is_owned_by_the_graph():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        return o
    opt = minidynamo.optimize(f)
    opt(t(64), t(64))
    gm = opt.cache_entries()[0].gm
    assert len(gm._minidynamo_kernels) == 1
    assert gm._minidynamo_kernels.records[0].kernel is K.add_kernel
    out = minidynamo.explain(f)(t(64), t(64))
    assert out.triton_launches and "add_kernel" in out.triton_launches[0]
    assert "writes: out_ptr" in out.triton_launches[0]


def test_config_pre_hook_and_restore_value_run_as_in_eager():
    def f(x, acc):
        K.accumulate_hooked[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](x, acc, x.numel())
        K.double_inplace[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](x, x.numel())
        return acc + 0, x
    run_both(f, t(40), t(40))


class _CachingAutotuner(triton.runtime.autotuner.Autotuner):
    """A library's own autotuner subclass (fla's CachedAutotuner is one)."""

    def run(self, *args, **kwargs):
        self.runs = getattr(self, "runs", 0) + 1
        return super().run(*args, **kwargs)


# autotune(heuristics(jit)) as add_stack, with the autotuner of the library's class
_subclassed = _CachingAutotuner(K.add_stack.fn, K.add_stack.fn.arg_names,
                                [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], ["n"],
                                None, None, do_bench=K.last_config_wins())


def test_autotuner_subclass_defined_outside_triton_is_a_kernel():
    def f(a, b):
        o = torch.empty_like(a)
        _subclassed[lambda m: (triton.cdiv(m["n"], m["BLOCK"]),)](a, b, o, a.numel())
        return o
    opt = run_both(f, t(64), t(64))
    assert len(launches(opt)) == 1
    assert _subclassed.runs >= 1  # its own run() chose the config
