"""Tests for minidynamo.triton.mutation: exact write sets on a corpus of real
Triton kernels, plus a differential check that launches kernels under Triton's
CPU interpreter and verifies every tensor that changed was reported written."""
import gc
import os
import sys
import weakref

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.runtime.errors import InterpreterError  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from kernels import mutation_corpus as corpus  # noqa: E402

from minidynamo.triton import mutation  # noqa: E402
from minidynamo.triton.mutation import MutationAnalysis, analyze_mutations  # noqa: E402

CASES = {c.name: c for c in corpus.CASES}
# The differential checks launch the corpus on CPU tensors, which takes Triton's interpreter.
# On a GPU machine (compiled mode) they run in a child process that has it.
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
in_interpreter = pytest.mark.skipif(not INTERPRETING, reason="compiled mode: run by "
                                    "test_differential_checks_in_an_interpreter_process")
RUNNABLE = [c for c in corpus.CASES if c.make is not None]


def _kernel_name(case):
    fn = case.kernel
    while not callable(getattr(fn, "__code__", None)) and hasattr(fn, "fn"):
        fn = fn.fn
    return fn.__name__


def test_corpus_size():
    assert len(CASES) == len(corpus.CASES) >= 25
    assert len(RUNNABLE) >= 8


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_write_sets(name):
    case = CASES[name]
    result = analyze_mutations(case.kernel)
    assert isinstance(result, MutationAnalysis)
    assert result.unknown is case.unknown, result.reason
    assert result.written == case.written
    if case.unknown:
        assert result.reason
        assert f"kernel '{_kernel_name(case)}'" in result.reason
        for word in case.reason_has:
            assert word in result.reason, result.reason
    else:
        assert result.reason is None


@in_interpreter
@pytest.mark.parametrize("name", [c.name for c in RUNNABLE])
def test_differential_against_interpreter(name):
    """Tensors a real launch changes must all be in ``written``."""
    case = CASES[name]
    torch.manual_seed(0)
    kwargs, grid = case.make()
    before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    try:
        case.kernel[grid](**kwargs)
    except InterpreterError as e:  # Triton 3.6's interpreter fails on some (3.8 runs them all)
        pytest.skip(f"this Triton's interpreter cannot run {name}: {e}")
    changed = {k for k, v in before.items() if not torch.equal(v, kwargs[k])}
    result = analyze_mutations(case.kernel)
    assert not result.unknown
    assert changed <= result.written, f"missed writes: {changed - result.written}"
    # every written corpus kernel really stores something new, so the check has teeth
    assert bool(changed) == bool(result.written)


@in_interpreter
def test_differential_check_detects_a_missed_write():
    kwargs, grid = corpus._std("x_ptr", "y_ptr", "out_ptr")
    before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    corpus.add_kernel[grid](**kwargs)
    changed = {k for k, v in before.items() if not torch.equal(v, kwargs[k])}
    assert changed == {"out_ptr"}


def test_wrappers_match_inner_kernel():
    inner = analyze_mutations(corpus.add_kernel)
    assert analyze_mutations(corpus.autotuned_add) == inner
    assert analyze_mutations(corpus.heuristic_inplace) == analyze_mutations(corpus.inplace_kernel)
    assert analyze_mutations(corpus.stacked_kernel).written == {"out_ptr", "y_ptr"}


def test_is_written():
    known = MutationAnalysis(frozenset({"out_ptr"}), False)
    assert known.is_written("out_ptr") and not known.is_written("x_ptr")
    unknown = analyze_mutations(corpus.unknown_call_kernel)
    assert unknown.unknown and unknown.is_written("x_ptr") and unknown.is_written("anything")


def test_scalars_and_constexprs_never_written():
    result = analyze_mutations(corpus.strided_2d_kernel)
    for name in ("M", "N", "stride_xm", "stride_om", "BM", "BN"):
        assert not result.is_written(name)
    assert not analyze_mutations(corpus.constexpr_branch_kernel).is_written("SHIFT")


def test_stored_value_provenance_is_ignored():
    # out = load(x) + load(y) is stored; only the pointer operand counts
    assert analyze_mutations(corpus.add_kernel).written == {"out_ptr"}
    assert analyze_mutations(corpus.gather_scatter_kernel).written == {"out_ptr"}


@pytest.mark.parametrize("bad", [3, None, "kernel", object(), torch.zeros(1)])
def test_bad_argument_raises_type_error(bad):
    with pytest.raises(TypeError, match="analyze_mutations"):
        analyze_mutations(bad)


def test_source_unavailable_is_unknown():
    ns = {}
    exec("def generated(x_ptr):\n    pass\n", ns)
    result = analyze_mutations(ns["generated"])
    assert result.unknown and "kernel 'generated'" in result.reason
    assert "source code is not available" in result.reason


def _plain_with_exec(x_ptr):
    exec("tl.store(x_ptr, 1.0)")


def _plain_with_try(x_ptr):
    try:
        tl.store(x_ptr, 1.0)
    except Exception:
        pass


def _plain_with_lambda(x_ptr):
    f = lambda p: p  # noqa: E731
    tl.store(f(x_ptr), 1.0)


def _plain_attr_assign(x_ptr):
    tl.some_attr = x_ptr


@pytest.mark.parametrize("fn, words", [
    (_plain_with_exec, ["exec", "locals"]),
    (_plain_with_try, ["Try"]),
    (_plain_with_lambda, ["Lambda"]),
    (_plain_attr_assign, ["tl.some_attr"]),
])
def test_unmodelled_constructs_are_unknown_not_errors(fn, words):
    result = analyze_mutations(fn)
    assert result.unknown
    assert f"kernel '{fn.__name__}': line " in result.reason
    for word in words:
        assert word in result.reason, result.reason


def test_reason_line_number_points_at_construct():
    result = analyze_mutations(corpus.unknown_call_kernel)
    line = int(result.reason.split("line ")[1].split(":")[0])
    import inspect
    lines, start = inspect.getsourcelines(corpus.unknown_call_kernel.fn)
    assert "py_helper" in lines[line - start]


def test_results_are_cached_and_do_not_keep_kernels_alive():
    def make():
        @triton.jit
        def transient(x_ptr, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)
        return transient

    control = weakref.ref(make().fn)
    gc.collect()
    if control() is not None:  # compiled-mode Triton 3.9 keeps every JITFunction in a registry
        pytest.skip("this Triton keeps jit functions alive itself")
    k = make()
    first = analyze_mutations(k)
    assert analyze_mutations(k) is not None and analyze_mutations(k) == first
    assert k.fn in mutation._CACHE
    ref = weakref.ref(k.fn)
    del k
    gc.collect()
    assert ref() is None
    assert all(f.__name__ != "transient" for f in list(mutation._CACHE.keys()))


_COMPILED_MODE_CHECK = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "0"
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from triton.runtime.jit import JITFunction
from kernels import mutation_corpus as corpus
from minidynamo.triton.mutation import analyze_mutations
assert isinstance(corpus.add_kernel, JITFunction), type(corpus.add_kernel)
for case in corpus.CASES:
    r = analyze_mutations(case.kernel)
    assert (r.written, r.unknown) == (case.written, case.unknown), (case.name, r)
    assert all(w in (r.reason or "") for w in case.reason_has), (case.name, r)
line = int(analyze_mutations(corpus.unknown_call_kernel).reason.split("line ")[1].split(":")[0])
import linecache
assert "py_helper(x_ptr)" in linecache.getline(corpus.__file__, line), line
print("ok")
"""


def test_compiled_mode_jit_functions_give_same_answers():
    """Without the interpreter, @triton.jit returns JITFunction (source via ``.src``)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    proc = subprocess.run([sys.executable, "-c", _COMPILED_MODE_CHECK, os.path.dirname(
        os.path.abspath(__file__)), root], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.skipif(INTERPRETING, reason="this process runs the differential checks itself")
def test_differential_checks_in_an_interpreter_process():
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                           "differential_against or missed_write", os.path.abspath(__file__)],
                          cwd=root, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " failed" not in proc.stdout and " passed" in proc.stdout, proc.stdout[-3000:]


# --- randomized check against a path-enumerating reference --------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402

_VARS = 3
_PARAMS = ("a_ptr", "b_ptr", "c_ptr")
_var = hst.integers(0, _VARS - 1)
_simple = hst.one_of(
    hst.tuples(hst.just("copy"), _var, _var),
    hst.tuples(hst.just("offset"), _var, _var),
    hst.tuples(hst.just("aug"), _var),
    hst.tuples(hst.just("where"), _var, _var, _var),
    hst.tuples(hst.just("swap"), _var, _var),
    hst.tuples(hst.just("store"), _var),
)
_block = hst.lists(_simple, min_size=1, max_size=4)
_stmt = hst.one_of(
    _simple, _simple,
    hst.tuples(hst.just("if"), _block),
    hst.tuples(hst.just("ifelse"), _block, _block),
    hst.tuples(hst.just("loop"), _block),
)


def _render(stmts, indent):
    pad = "    " * indent
    out = []
    for s in stmts:
        op = s[0]
        if op == "copy":
            out.append(f"{pad}v{s[1]} = v{s[2]}")
        elif op == "offset":
            out.append(f"{pad}v{s[1]} = v{s[2]} + offs * 2")
        elif op == "aug":
            out.append(f"{pad}v{s[1]} += 4")
        elif op == "where":
            out.append(f"{pad}v{s[1]} = tl.where(offs < 2, v{s[2]}, v{s[3]})")
        elif op == "swap":
            out.append(f"{pad}v{s[1]}, v{s[2]} = v{s[2]}, v{s[1]}")
        elif op == "store":
            out.append(f"{pad}tl.store(v{s[1]} + offs, tl.load(v{(s[1] + 1) % _VARS} + offs))")
        elif op in ("if", "ifelse"):
            out.append(f"{pad}if pid == 0:")
            out += _render(s[1], indent + 1)
            if op == "ifelse":
                out.append(f"{pad}else:")
                out += _render(s[2], indent + 1)
        else:
            out.append(f"{pad}for _ in range(2):")
            out += _render(s[1], indent + 1)
    return out


def _reference(stmts, states, written):
    """Enumerate every path (both sides of each `if`, loops run exactly twice)."""
    for s in stmts:
        op, nxt = s[0], []
        for st in states:
            st = dict(st)
            if op in ("copy", "offset"):
                st[s[1]] = st[s[2]]
            elif op == "where":
                st[s[1]] = st[s[2]] | st[s[3]]
            elif op == "swap":
                st[s[1]], st[s[2]] = st[s[2]], st[s[1]]
            elif op == "store":
                written |= st[s[1]]
            if op == "if":
                nxt += [st] + _reference(s[1], [st], written)
            elif op == "ifelse":
                nxt += _reference(s[1], [st], written) + _reference(s[2], [st], written)
            elif op == "loop":
                nxt += _reference(s[1] + s[1], [st], written)
            else:
                nxt.append(st)
        states = nxt
    return states


def _has_loop(stmts):
    return any(s[0] == "loop" for s in stmts)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(hst.lists(_stmt, min_size=1, max_size=6))
def test_random_pointer_programs_match_path_reference(stmts):
    stmts = stmts + [("store", 0)]  # observe v0 after every branch and loop
    import importlib.util
    import tempfile

    lines = ["import triton.language as tl", "", "", "def fuzz_kernel(a_ptr, b_ptr, c_ptr):",
             "    pid = tl.program_id(0)", "    offs = tl.arange(0, 4)"]
    lines += [f"    v{i} = {_PARAMS[i]}" for i in range(_VARS)]
    lines += _render(stmts, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fuzz_case.py")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        spec = importlib.util.spec_from_file_location(f"fuzz_case_{abs(hash(path))}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        result = analyze_mutations(module.fuzz_kernel)
    expected = set()
    _reference(stmts, [{i: frozenset([_PARAMS[i]]) for i in range(_VARS)}], expected)
    assert not result.unknown, result.reason
    if _has_loop(stmts):  # the analysis also covers 0, 1, 3, ... iterations
        assert expected <= result.written
    else:
        assert result.written == expected
