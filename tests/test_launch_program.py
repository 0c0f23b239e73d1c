"""The launch program (triton/program.py): after the first call, an inlined graph's Triton
launches go straight to the compiled kernels, with scratch values in one buffer. Every
test compares against eager over several calls with changing inputs; the GPU ones also
check that the program is in use (or, where it must step aside, that results stay right)."""
import re
import sys

import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import triton

import minidynamo
from minidynamo.triton.scratch import SCRATCH_ALIGN, layout

_needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def gpu(test):
    """GPU-only: selected by `pytest -m gpu`, skipped without CUDA."""
    return pytest.mark.gpu(_needs_cuda(test))


def test_layout_shares_memory_between_values_not_live_together():
    a, b, c, d = object(), object(), object(), object()
    # a: [0, 2], b: [1, 4], c: [3, 5] (a is dead by then), d: [6, 7]
    offsets, total = layout({a: (0, 2, 100), b: (1, 4, 1000), c: (3, 5, 200), d: (6, 7, 1024)})
    assert offsets[a] != offsets[b]
    assert offsets[c] == offsets[a]  # reuses a's block (size rounded to the alignment)
    assert all(o % SCRATCH_ALIGN == 0 for o in offsets.values())
    assert offsets[d] in (offsets[a], offsets[b])  # both free by then; best fit is b's
    assert total == SCRATCH_ALIGN + 1024
    assert layout({}) == ({}, 0)


def chain(a, b):
    x = a
    for _ in range(5):
        o = torch.empty_like(x)
        K.add_kernel[lambda m: (triton.cdiv(o.numel(), m["BLOCK"]),)](x, b, o, o.numel(), BLOCK=64)
        x = o
    return x


def skip_read(a, b):
    # t1 is read two launches after it is made: its memory must not be reused meanwhile
    t1 = torch.empty_like(a)
    K.add_kernel[(4,)](a, b, t1, a.numel(), BLOCK=64)
    t2 = torch.empty_like(a)
    K.add_kernel[(4,)](t1, b, t2, a.numel(), BLOCK=64)
    t3 = torch.empty_like(a)
    K.add_kernel[(4,)](t2, t1, t3, a.numel(), BLOCK=64)
    out = torch.empty_like(a)
    K.add_kernel[(4,)](t3, t1, out, a.numel(), BLOCK=64)
    return out


def mixed(a, b):
    t = torch.empty_like(a)
    K.add_kernel[(4,)](a, b, t, a.numel(), BLOCK=64)
    r = torch.relu(t) * 2
    out = torch.empty_like(a)
    K.add_kernel[(4,)](r, t, out, a.numel(), BLOCK=64)
    return out, r


def tuned_chain(a, b):
    t = torch.empty_like(a)
    K.add_autotuned[lambda m: (triton.cdiv(a.numel(), m["BLOCK"]),)](a, b, t, a.numel())
    out = torch.empty_like(a)
    K.add_stack[lambda m: (triton.cdiv(a.numel(), m["BLOCK"]),)](t, b, out, a.numel())
    return out


def entry(opt):
    return opt.cache_entries()[0]


def run_calls(fn, make_args, calls=4):
    opt = minidynamo.optimize(fn)
    for i in range(calls):
        args = make_args(i)
        expected = fn(*[a.clone() for a in args])
        got = opt(*args)
        torch.testing.assert_close(got, expected)
    return opt


def _vectors(n=256, dev="cuda"):
    return lambda i: (torch.randn(n, device=dev), torch.randn(n, device=dev))


@pytest.mark.parametrize("fn", [chain, skip_read, mixed], ids=lambda f: f.__name__)
def test_results_match_eager_on_any_device(fn):
    run_calls(fn, _vectors(dev=K.DEVICE))


@gpu
@pytest.mark.parametrize("fn,scratch", [(chain, 4), (skip_read, 3), (mixed, 0)],
                         ids=["chain", "skip_read", "mixed"])
def test_program_is_used_with_scratch_values(fn, scratch):
    opt = run_calls(fn, _vectors())
    note = entry(opt).program_note
    assert "straight to the compiled kernels" in note, note
    assert f"{scratch} scratch value(s)" in note, note


@gpu
def test_outputs_are_fresh_tensors_each_call():
    opt = minidynamo.optimize(chain)
    a, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    first = opt(a, b)
    a2 = a * 3
    second = opt(a2, b)
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(first, chain(a, b))
    torch.testing.assert_close(second, chain(a2, b))


@gpu
def test_misaligned_views_take_the_launcher_and_stay_correct():
    opt = minidynamo.optimize(chain)
    base = torch.randn(300, device="cuda")
    b = torch.randn(256, device="cuda")
    for offset in (0, 1, 4, 1, 0):  # 4 bytes off: not 16-byte aligned
        a = base[offset:offset + 256]
        torch.testing.assert_close(opt(a, b), chain(a, b))
    assert "straight to the compiled kernels" in entry(opt).program_note


@gpu
def test_autotuned_and_heuristic_kernels():
    opt = run_calls(tuned_chain, _vectors())
    assert "straight to the compiled kernels" in entry(opt).program_note
    # A changed autotuner choice makes the program step aside for the plain graph.
    K.add_autotuned.cache.clear()
    a, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    torch.testing.assert_close(opt(a, b), tuned_chain(a, b))


@gpu
def test_launch_hook_set_later_sees_every_launch():
    from triton import knobs
    opt = run_calls(chain, _vectors())
    a, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    expected = chain(a, b)
    seen = []

    def hook(metadata):
        seen.append(metadata)
    hooks = knobs.runtime.launch_enter_hook
    chained = hasattr(hooks, "add")  # Triton's HookChain; older ones take a plain callable
    if chained:
        hooks.add(hook)
    else:
        knobs.runtime.launch_enter_hook = hook
    try:
        got = opt(a, b)
    finally:
        if chained:
            hooks.remove(hook)
        else:
            knobs.runtime.launch_enter_hook = None
    torch.testing.assert_close(got, expected)
    assert len(seen) == 5  # every launch of the call, as in eager


@gpu
def test_side_stream():
    opt = run_calls(chain, _vectors())
    s = torch.cuda.Stream()
    a, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = opt(a, b)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(out, chain(a, b))


# --- the program's logic without a GPU: launchers given a stand-in resolution whose "C entry"
# runs add_kernel on raw CPU pointers, so layout, pointers and fallbacks are checked here too.

def _cpu_add(gx, gy, gz, stream, function, metadata, launch_metadata, enter_hook, exit_hook, px, py, po, n, block):
    import ctypes
    view = [torch.frombuffer((ctypes.c_float * n).from_address(p), dtype=torch.float32) for p in (px, py, po)]
    view[2].copy_(view[0] + view[1])
    _cpu_add.calls += 1


def _stand_in_state():
    import types

    from minidynamo.triton.resolved import LaunchState
    return LaunchState(device=-1, check_device=True, get_device=lambda: -1, get_stream=lambda dev: 0,
                       runtime=types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None),
                       enter_hook=None, exit_hook=None, debug=None, pre_run_hooks=[])


def _stand_in(record, **extra):
    """A resolution of an add_kernel launch whose entry is `_cpu_add` (CompiledKernel.run's
    argument convention), built as the launcher builds one: from the record's data."""
    from minidynamo.triton.entry import through_run
    from minidynamo.triton.resolved import CONSTANT, SCALAR, TENSOR, ParamSlot, ResolvedLaunch, ScalarSpec
    launcher = record.launcher()
    names = launcher.dynamic_names
    slots = []
    for name in K.add_kernel.arg_names:
        if name not in names:
            slots.append(ParamSlot(name, CONSTANT, value=record.constant_kwargs[name]))
        elif name == "n":
            n = extra.pop("n")
            slots.append(ParamSlot(name, SCALAR, names.index(name),
                                   spec=ScalarSpec(int, n == 1, n % 16 == 0 if n != 1 else None, "i32")))
        else:
            slots.append(ParamSlot(name, TENSOR, names.index(name), dtype=torch.float32, aligned=True))
    grid = None if launcher.grid_per_call else tuple(record.grid) + (1,) * (3 - len(record.grid))
    return ResolvedLaunch(record.name, names, tuple(slots), 1, None, through_run(_cpu_add, "stand-in"),
                          _stand_in_state(), grid=grid, grid_per_call=launcher.grid_per_call, **extra)


@pytest.fixture
def stand_in_resolution(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("the GPU tests use real resolution")
    from minidynamo.entries import CacheEntry
    from minidynamo.triton import program
    monkeypatch.setattr(program, "DEVICE_TYPES", ("cuda", "cpu"))
    original = CacheEntry.after_first_call

    def after_first_call(entry):
        for record in entry.kernels:
            record.launcher()._variants = [(None, _stand_in(record))]
        return original(entry)
    monkeypatch.setattr(CacheEntry, "after_first_call", after_first_call)
    _cpu_add.calls = 0


def chain_grid4(a, b):
    x = a
    for _ in range(5):
        o = torch.empty_like(x)
        K.add_kernel[(4,)](x, b, o, o.numel(), BLOCK=64)
        x = o
    return x


def skip_read_cpu(a, b):
    return skip_read(a, b)


def mixed_cpu(a, b):
    return mixed(a, b)


@pytest.mark.parametrize("fn,scratch,launches", [(chain_grid4, 4, 5), (skip_read_cpu, 3, 4), (mixed_cpu, 0, 2)],
                         ids=["chain", "skip_read", "mixed"])
def test_program_logic_with_a_stand_in_entry(stand_in_resolution, fn, scratch, launches):
    opt = run_calls(fn, _vectors(dev="cpu"), calls=3)
    note = entry(opt).program_note
    assert f"{scratch} scratch value(s)" in note and f"{launches} launch(es)" in note, note
    assert _cpu_add.calls == 2 * launches  # the first call ran the plain graph


def test_fixed_size_values_are_empty_like_of_a_broadcast_shape(stand_in_resolution):
    # The scratch buffer and the returned value (an empty_like of a scratch value): each an
    # empty_like of a bound one-element tensor broadcast to its shape, compact as eager's.
    opt = run_calls(chain_grid4, _vectors(dev="cpu"), calls=3)
    text = entry(opt).source_text
    assert text.count("empty_like(_md_shape_of") == 2 and "empty_strided" not in text, text
    out = opt(torch.randn(256), torch.randn(256))
    assert out.shape == (256,) and out.stride() == (1,) and out.dtype == torch.float32


def transposed_with_dtype(a, b):
    t = torch.empty_like(a, dtype=torch.float32)  # a's strides (transposed), not compact ones
    K.add_kernel[(4,)](a, b, t, a.numel(), BLOCK=64)
    x = torch.empty_like(t)
    K.add_kernel[(4,)](t, b, x, a.numel(), BLOCK=64)
    return t, x


def test_strided_values_keep_empty_strided(stand_in_resolution):
    # A broadcast shape would give compact strides: a value with a's transposed strides
    # is allocated with its own.
    def make(i):
        return torch.randn(16, 8).t(), torch.randn(16, 8).t()
    opt = run_calls(transposed_with_dtype, make, calls=3)
    a, b = make(0)
    t, x = opt(a, b)
    assert t.stride() == a.stride() == x.stride()
    text = entry(opt).source_text
    assert "empty_strided((8, 16), (1, 8)" in text, text


def test_program_logic_misaligned_inputs_go_through_the_launcher(stand_in_resolution):
    opt = run_calls(chain_grid4, _vectors(dev="cpu"), calls=2)
    base, b = torch.randn(300), torch.randn(256)
    calls = _cpu_add.calls
    a = base[1:257]  # 4 bytes off 16-byte alignment: launches with it take the launcher
    torch.testing.assert_close(opt(a, b), chain_grid4(a, b))
    assert _cpu_add.calls == calls + 4  # the other four launches read aligned values
    a = base[4:260]  # aligned again
    torch.testing.assert_close(opt(a, b), chain_grid4(a, b))
    assert _cpu_add.calls == calls + 9


def test_program_logic_threads_get_their_own_scratch(stand_in_resolution):
    import threading
    opt = run_calls(skip_read_cpu, _vectors(dev="cpu"), calls=2)  # program built, single thread
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        try:
            for _ in range(30):
                a, b = torch.randn(256, generator=g), torch.randn(256, generator=g)
                t1 = a + b  # skip_read in torch ops (Triton's interpreter is not thread-safe)
                t2 = t1 + b
                torch.testing.assert_close(opt(a, b), (t2 + t1) + t1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[0]
    assert _cpu_add.calls >= 4 + 4 * 30 * 4  # every call after the first ran the program


def test_program_note_on_cpu_says_why_not_used():
    if torch.cuda.is_available():
        pytest.skip("CPU interpreter path")
    opt = run_calls(chain, _vectors(dev="cpu"), calls=2)
    note = entry(opt).program_note
    assert note.startswith("not used:") and "interpreter" in note, note
    assert "launch program: not used" in entry(opt).describe()


def fresh_feed(a, b):
    r = torch.relu(a)  # a new allocation, whatever `a` is: aligned by the allocator
    o = torch.empty_like(a)
    K.add_kernel[(4,)](r, b, o, a.numel(), BLOCK=64)
    return o


def test_program_tests_alignment_only_of_values_that_are_not_fresh(stand_in_resolution):
    opt = run_calls(fresh_feed, _vectors(dev="cpu"), calls=2)
    base, b = torch.randn(300), torch.randn(256)
    for off in (1, 0, 3):  # a misaligned `a` still gives an aligned relu(a)
        a = base[off:off + 256]
        calls = _cpu_add.calls
        torch.testing.assert_close(opt(a, b), fresh_feed(a, b))
        assert _cpu_add.calls == calls + 1
    text = entry(opt).source_text
    tests = re.findall(r"(\w+) & 15", text)
    assert len(tests) == 1 and f"{tests[0]} = b.data_ptr()" in text, text  # b's only


def chain_any_size(a, b):
    # t's size is symbolic (one graph for every size of a), the launches touch 256 elements
    t = torch.empty_like(a)
    K.add_kernel[(4,)](a, b, t, 256, BLOCK=64)
    out = torch.empty_like(a)
    K.add_kernel[(4,)](t, b, out, 256, BLOCK=64)
    return out[:256]


def test_program_logic_scratch_sized_per_call(stand_in_resolution):
    opt = minidynamo.optimize(chain_any_size, dynamic=True)
    b = torch.randn(256)
    for i, n in enumerate((300, 400, 300, 1000, 257)):
        a = torch.randn(n)
        torch.testing.assert_close(opt(a, b), chain_any_size(a, b))
        assert _cpu_add.calls == 2 * i  # the program from the second call on
    assert len(opt.cache_entries()) == 1
    note = entry(opt).program_note
    assert "1 scratch value(s) in a per-call number of bytes" in note, note
    text = entry(opt).source_text
    line = next(x for x in text.splitlines() if "nbytes" in x and "=" in x)
    assert "a.size(0)" in line and "& -256" in line, text  # t's bytes, from a's size, rounded


# --- launches whose grid and sizes are values of the graph (launchers with a per-call grid),
# on emulated Triton launches (launcher_emulation.py), in graphs built as the trace makes
# them (launch_graphs.py): one program for every size.

@pytest.fixture
def emu(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("the GPU runs the real launch path")
    import launcher_emulation as E

    from minidynamo.triton import program
    from minidynamo.triton import resolve as resolve_module
    emulation = E.Emulation()
    internals = emulation.internals()
    monkeypatch.setattr(resolve_module, "internals", lambda: internals)
    monkeypatch.setattr(program, "DEVICE_TYPES", ("cuda", "cpu"))
    return emulation


def _enable(launcher):
    launcher._enabled, launcher.fallback_reason = True, None  # resolve as on a GPU


def _emulated_chain(emu):
    import launch_graphs as G
    import launcher_emulation as E
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"],
                            do_bench=E.last_config_wins())(emu.jit(E.add))
    return G.chain_graph(emu.jit(E.add), tuned=tuned, setup=_enable)


def test_program_with_per_call_grids_and_sizes(emu):
    import launch_graphs as G
    graph, table = _emulated_chain(emu)
    plain = G.plain_function(graph)
    tuned = table.records[1].kernel
    program = text = None
    for i, n in enumerate([300, 256, 1000, 300, 48, 17, 256, 300, 1]):
        a, b = emu.track(torch.randn(n), torch.randn(n))
        expected = (a + b) + b + b
        if i < 2:
            got = plain(a, b)  # resolves the launchers: odd n, then n divisible by 16
            torch.testing.assert_close(got, expected)
            continue
        if program is None:  # built from each launcher's newest variant (n divisible by 16)
            program, text = G.program_function(graph)
        replays, direct = emu.replays, emu.calls_from("program")
        new_key = (n, *["torch.float32"] * 3) not in tuned.cache
        got = program(a, b)
        assert got is not None  # the global state held
        torch.testing.assert_close(got, expected)
        if n == 1:  # Triton's constexpr 1: a new specialisation for each launch
            continue
        # Every launch replays a compiled kernel, but the autotuner tunes a new key.
        assert emu.replays == replays + 3 - new_key, text
        # Straight from the program where n is divisible by 16, else through the launcher.
        assert emu.calls_from("program") - direct == (3 - new_key if n % 16 == 0 else 0), text
    # Scratch bytes and grids per call, from a's size and the graph's size nodes.
    assert "nbytes" in text and "a.size(0)" in text, text


def test_program_with_per_call_grids_steps_aside_on_global_state(emu):
    import launch_graphs as G
    graph, table = _emulated_chain(emu)
    plain = G.plain_function(graph)
    for n in (64, 64):
        plain(*emu.track(torch.randn(n), torch.randn(n)))
    program, text = G.program_function(graph)
    a, b = emu.track(torch.randn(64), torch.randn(64))
    assert program(a, b) is not None
    table.records[1].kernel.configs = list(table.records[1].kernel.configs)  # a new config list
    assert program(a, b) is None, text  # the entry runs the plain graph instead
    torch.testing.assert_close(plain(a, b), a + b + b + b)


@gpu
def test_gpu_program_with_per_call_grids_and_sizes():
    import launch_graphs as G
    graph, table = G.chain_graph(K.add_kernel, tuned=K.add_autotuned, device="cuda", launches=5)
    plain = G.plain_function(graph)
    program = text = None
    for i, n in enumerate([300, 256, 1000, 300, 48, 17, 256, 4096, 1]):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        expected = a + b + b + b + b + b
        if i < 2:
            got = plain(a, b)
        else:
            if program is None:
                program, text = G.program_function(graph)
            got = program(a, b)
            assert got is not None, text
        torch.testing.assert_close(got, expected)
    assert "entry_add_kernel(" in text and "nbytes" in text, text
    # The plain launches: one ordinary call per class of n (odd, divisible by 16, 1); the
    # autotuned one tunes each new n.
    calls = [r.launcher().ordinary_calls for r in table]
    assert calls == [3, 3, 7, 3, 3], [r.launcher().describe() for r in table]


def test_a_bug_building_the_program_is_said_not_hidden(stand_in_resolution, monkeypatch):
    # an exception from the program's builder is minidynamo's own bug: built after the
    # first call returned, it is warned about (not silent) and the plain graph kept
    from minidynamo import convert

    def broken(*args, **kwargs):
        raise KeyError("a bug")
    monkeypatch.setattr(convert, "program_lines", broken)
    a, b = _vectors(dev="cpu")(0)
    opt = minidynamo.optimize(chain_grid4)
    with pytest.warns(RuntimeWarning, match="launch program of chain_grid4: KeyError"):
        torch.testing.assert_close(opt(a, b), chain_grid4(a, b))
    for _ in range(2):
        torch.testing.assert_close(opt(a, b), chain_grid4(a, b))
    assert "could not be built (KeyError" in entry(opt).program_note
