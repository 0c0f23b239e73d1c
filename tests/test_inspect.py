"""Inspection: the exact plain-words message of each guard kind's failure, the recompile
records and error, the cache-size-limit warning, cache entries as text, explain() on
every kind of call, and the fallback reason of each category in exc.CATEGORIES."""
import copy
import inspect
import math
import re
import sys
import types
import warnings

import pytest
import torch

import minidynamo
from minidynamo.exc import CATEGORIES, HINTS
from helpers import CountingBackend, same
from kernels import capture_kernels as K
from kernels import mutation_corpus as MC

SCALE = 2


def helper(x):
    return x + 1


def other_helper(x):
    return x - 1


class Holder:
    def __init__(self):
        self.w = 2

    def m(self, x):
        return x * 3


class OtherHolder:
    def __init__(self):
        self.w = 2


def _failure(fn, first, second):
    """Call an optimized `fn` with `first`, then `second`; the one guard failure."""
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    opt(*first)
    opt(*second)
    (failure,) = opt.guard_failures()
    return failure


X = torch.ones(4, 3)
with_attr = Holder()
with_attr.m = lambda x: x  # an instance attribute shadowing the class's method

# (id, fn, first args, second args, kind, source, expected, actual, message)
GUARD_CASES = [
    ("dtype", lambda x: x + 1, (X,), (X.double(),), "TENSOR_MATCH", "x", "torch.float32", "torch.float64",
     "tensor 'x' dtype mismatch: expected torch.float32, actual torch.float64"),
    ("device", lambda x: x + 1, (X,), (torch.ones(4, 3, device="meta"),), "TENSOR_MATCH", "x", "cpu", "meta",
     "tensor 'x' device mismatch: expected cpu, actual meta"),
    ("rank", lambda x: x + 1, (X,), (torch.ones(12),), "TENSOR_MATCH", "x", "2", "1",
     "tensor 'x' rank mismatch: expected 2, actual 1"),
    ("size", lambda x: x + 1, (torch.ones(8),), (torch.ones(16),), "TENSOR_MATCH", "x", "8", "16",
     "tensor 'x' size mismatch at dim 0: expected 8, actual 16"),
    ("stride", lambda x: x + 1, (X,), (X.t().contiguous().t(),), "TENSOR_MATCH", "x", "3", "1",
     "tensor 'x' stride mismatch at dim 0: expected 3, actual 1"),
    ("requires_grad", lambda x: x + 1, (X,), (X.clone().requires_grad_(),), "TENSOR_MATCH", "x", "False", "True",
     "tensor 'x' requires_grad mismatch: expected False, actual True"),
    ("tensor_type", lambda x: x + 1, (X,), (torch.nn.Parameter(X.clone()),), "TENSOR_MATCH", "x", "Tensor",
     "Parameter", "tensor 'x' type mismatch: expected Tensor, actual Parameter"),
    ("equals", lambda x, k: x * k, (X, 2), (X, 3), "EQUALS_MATCH", "k", "2", "3",
     "k changed: expected 2, actual 3"),
    ("equals_type", lambda x, k: x * k, (X, 2), (X, 2.0), "EQUALS_MATCH", "k", "2 (int)", "2.0 (float)",
     "k changed: expected 2 (int), actual 2.0 (float)"),
    ("equals_bool", lambda x, k: x * k, (X, True), (X, 1), "EQUALS_MATCH", "k", "True (bool)", "1 (int)",
     "k changed: expected True (bool), actual 1 (int)"),
    ("equals_neg_zero", lambda x, k: x * k, (X, 0.0), (X, -0.0), "EQUALS_MATCH", "k", "0.0", "-0.0",
     "k changed: expected 0.0, actual -0.0"),
    ("type", lambda x, o: x * o.w, (X, Holder()), (X, OtherHolder()), "TYPE_MATCH", "o", "Holder", "OtherHolder",
     "o type changed: expected Holder, actual OtherHolder"),
    ("len", lambda x, xs: x * xs[0], (X, [1, 2]), (X, [1, 2, 3]), "LEN_MATCH", "xs", "2", "3",
     "xs length changed: expected 2, actual 3"),
    ("container_type", lambda x, xs: x * xs[0], (X, [1, 2]), (X, (1, 2)), "TYPE_MATCH", "xs", "list", "tuple",
     "xs type changed: expected list, actual tuple"),
    ("dict_keys", lambda x, d: x * sum(d.values()), (X, {"a": 1}), (X, {"a": 1, "b": 2}), "DICT_KEYS", "d",
     "['a']", "['a', 'b']", "d keys changed: expected ['a'], actual ['a', 'b']"),
    ("item", lambda x, d: x * d["a"], (X, {"a": 1}), (X, {"a": 5}), "EQUALS_MATCH", "d['a']", "1", "5",
     "d['a'] changed: expected 1, actual 5"),
    ("not_in_dict", lambda x, o: o.m(x), (X, Holder()), (X, with_attr), "NOT_IN_DICT", "o",
     "no instance attribute 'm'", "instance attribute 'm'",
     "o now has an instance attribute 'm' (shadowing its class's)"),
    ("alias_same", lambda x, y: x * 2 if x is y else x - y, (X, X), (X, X.clone()), "ALIAS_MATCH", "x",
     "the same object", "different objects",
     "x and y were the same object when traced, now different objects"),
    ("alias_different", lambda x, y: x * 2 if x is y else x - y, (X, X.clone()), (X, X), "ALIAS_MATCH", "x",
     "different objects", "the same object",
     "x and y were different objects when traced, now the same object"),
    ("id_function_arg", lambda fn, x: fn(x), (helper, X), (other_helper, X), "ID_MATCH", "fn",
     "function 'helper'", "function 'other_helper'",
     "fn is a different object: expected function 'helper', actual function 'other_helper'"),
    ("id_module_arg", lambda m, x: x * m.pi, (math, X), (types.SimpleNamespace(pi=3), X), "ID_MATCH", "m",
     "module 'math'", "SimpleNamespace namespace(pi=3)",
     "m is a different object: expected module 'math', actual SimpleNamespace namespace(pi=3)"),
    ("id_kernel_arg", lambda k, a, b: (k[(4,)](a, b, a, a.numel(), BLOCK=16), a)[1],
     (K.add_kernel, torch.ones(64, device=K.DEVICE), torch.ones(64, device=K.DEVICE)),
     (K.add_dns, torch.ones(64, device=K.DEVICE), torch.ones(64, device=K.DEVICE)),
     "ID_MATCH", "k", "kernel 'add_kernel'", "kernel 'add_dns'",
     "kernel 'add_kernel' is a different object (k was replaced)"),
]


@pytest.mark.parametrize("case", GUARD_CASES, ids=[c[0] for c in GUARD_CASES])
def test_guard_failure_message(case):
    _, fn, first, second, kind, source, expected, actual, message = case
    f = _failure(fn, first, second)
    assert f.reason == message
    assert (f.kind, f.source, f.expected, f.actual) == (kind, source, expected, actual)
    assert f.entry == 0 and f.function == "fn_lambda" and f.where.endswith(f":{fn.__code__.co_firstlineno}")
    assert f.message() == f"recompiling fn_lambda ({f.where}): {message} [guard {kind} {source}]"
    assert str(f) == f"fn_lambda: {message} (guard: {f.guard})"


def _global_failure(fn, name, new, *args):
    opt = minidynamo.optimize(backend=CountingBackend())(fn)
    opt(*args)
    old = globals()[name]
    globals()[name] = new
    try:
        opt(*args)
    finally:
        globals()[name] = old
    (failure,) = opt.guard_failures()
    return failure


def test_global_constant_changed():
    def f(x):
        return x * SCALE
    fail = _global_failure(f, "SCALE", 3, X)
    assert fail.reason == "global 'SCALE' changed: expected 2, actual 3"
    assert (fail.kind, fail.source, fail.expected, fail.actual) == ("EQUALS_MATCH", "global 'SCALE'", "2", "3")


def test_global_function_replaced():
    def f(x):
        return helper(x)
    fail = _global_failure(f, "helper", other_helper, X)
    assert fail.reason == ("global 'helper' is a different object: expected function 'helper', "
                           "actual function 'other_helper'")
    assert fail.kind == "ID_MATCH"


def test_global_module_replaced():
    def f(x):
        return x * math.pi
    fail = _global_failure(f, "math", types.SimpleNamespace(pi=3.0), X)
    assert fail.reason == ("global 'math' is a different object: expected module 'math', "
                           "actual SimpleNamespace namespace(pi=3.0)")


def test_global_kernel_replaced():
    global KERNEL
    KERNEL = K.add_kernel

    def f(a, b):
        o = torch.empty_like(a)
        KERNEL[(4,)](a, b, o, a.numel(), BLOCK=16)
        return o
    fail = _global_failure(f, "KERNEL", K.add_dns, torch.ones(64, device=K.DEVICE), torch.ones(64, device=K.DEVICE))
    assert fail.reason == "kernel 'add_kernel' is a different object (global 'KERNEL' was replaced)"
    assert (fail.expected, fail.actual) == ("kernel 'add_kernel'", "kernel 'add_dns'")


def test_closure_changed():
    k = 2

    def f(x):
        return x * k
    opt = minidynamo.optimize(f)
    opt(X)
    k = 5  # noqa: F841 - read through the closure
    opt(X)
    assert opt.guard_failures()[0].reason == "closure 'k' changed: expected 2, actual 5"


def test_unreadable_source():
    opt = minidynamo.optimize(lambda x, d: x * d["a"])
    opt(X, {"a": 1})

    class Weird(dict):
        pass
    opt(X, Weird(a=1))
    assert opt.guard_failures()[0].reason == "d type changed: expected dict, actual Weird"


def test_failure_records_time_and_newest_entry():
    opt = minidynamo.optimize(lambda x: x + 1, dynamic=False)
    opt(torch.ones(2))
    opt(torch.ones(3))
    opt(torch.ones(4))
    first, second = opt.guard_failures()
    assert first.time <= second.time
    assert (first.entry, second.entry) == (0, 1)  # compared against the newest entry
    assert second.reason == "tensor 'x' size mismatch at dim 0: expected 3, actual 4"


def test_error_on_recompile_has_the_log_message(caplog):
    fn = lambda x: x + 1  # noqa: E731
    opt = minidynamo.optimize(fn)
    opt(torch.ones(2))
    minidynamo.config.error_on_recompile = True
    try:
        with pytest.raises(minidynamo.RecompileError) as info:
            opt(torch.ones(3))
    finally:
        minidynamo.config.error_on_recompile = False
    where = f"{__file__}:{fn.__code__.co_firstlineno}"
    assert str(info.value) == (f"recompiling fn_lambda ({where}): tensor 'x' size mismatch at dim 0: "
                               "expected 2, actual 3 [guard TENSOR_MATCH x]")
    assert str(info.value) == opt.guard_failures()[0].message()
    assert len(opt.cache_entries()) == 1


def test_cache_limit_warns_once_naming_the_guard():
    minidynamo.config.cache_size_limit = 3
    opt = minidynamo.optimize(lambda x, k: x * k, dynamic=False)  # an entry per value of k
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(6):
            opt(X, k)
    msgs = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    assert len(msgs) == 1
    assert msgs[0].startswith("minidynamo: fn_lambda (")
    assert msgs[0].endswith("reached cache_size_limit (3); the guard that keeps failing: EQUALS_MATCH on k "
                            "(3 of 3 recompiles), last: k changed: expected 2, actual 3. "
                            "New variants run eagerly.")
    assert len(opt.cache_entries()) == 3 and len(opt.guard_failures()) == 3


# --- cache entries as text ------------------------------------------------------------
def test_cache_entry_describe():
    def f(x, k):
        return torch.relu(x) * k
    opt = minidynamo.optimize(f)
    opt(X, 2)
    opt(X, 2)
    (entry,) = opt.cache_entries()
    assert entry.hit_count == 2 and entry.compile_time_ms > 0
    text = entry.describe()
    lines = text.splitlines()
    assert re.fullmatch(r"graph entry: 2 hits, compiled in \d+\.\d ms, 4 guards", lines[0])
    assert lines[1:5] == ["  global torch state: grad mode=True, default dtype=float32, default device=cpu, "
                          "autocast off",
                          "  k: == 2 (int)", "  global 'torch': is module 'torch'",
                          "  x: tensor float32 cpu (4, 3) contiguous"]
    assert lines[5] == "def forward(self, x):"
    assert "relu = torch.relu(x)" in text and str(entry) == text
    assert entry.graph_code.startswith("def forward(self, x):")
    assert "k == 2" in entry.describe(guards="code")
    assert entry.guard_text().splitlines() == entry.guard_exprs
    assert repr(entry) == "<CacheEntry graph f: 4 guards, 2 hits>"


def test_eager_entry_describe():
    def f(x):
        y = x
        try:
            print("side effect")  # inside a try: the frame cannot break, the call runs eagerly
        finally:
            pass
        return y + 1
    opt = minidynamo.optimize(f)
    opt(X)
    (entry,) = opt.cache_entries()
    assert entry.kind == "eager" and entry.graph_code is None
    lines = entry.describe().splitlines()
    assert lines[0].startswith("eager fallback entry: 1 hits")
    assert lines[-1].startswith("runs eagerly: [side_effect] print() writes output (at ")


def test_break_entry_describe():
    def f(x):
        print("side effect")
        return x + 1
    opt = minidynamo.optimize(f)
    opt(X)
    (entry,) = opt.cache_entries()
    assert entry.kind == "break" and entry.reason is None
    (resume,) = entry.resumes
    lines = entry.describe().splitlines()
    assert lines[0].startswith("graph break entry: 1 hits")
    assert lines[-2].startswith("breaks at: [side_effect] print() writes output (at ")
    assert lines[-1] == f"  then runs that instruction natively and continues in {resume.__name__} (1 entries)"


# --- explain ----------------------------------------------------------------------------
def test_explain_graph_report():
    def f(x, y, *, k=3):
        return torch.relu(x) * SCALE + y.sum() * k
    out = minidynamo.explain(f)(X, X.clone(), k=2)
    assert out.graph_count == 1 and out.ops_per_graph == [5] and out.kind == "graph"
    assert out.break_reasons == [] and out.compile_time_ms > 0
    by_source = {g.source: g for g in out.guards}
    assert out.guard_sources == [g.source for g in out.guards]
    assert by_source["k"].code == "type(k) is _md_int and k == 2" and by_source["k"].kind == "EQUALS_MATCH"
    assert by_source["global 'SCALE'"].description == "== 2 (int)"
    assert by_source["x"].description == "tensor float32 cpu (4, 3) contiguous"
    assert "x.shape == (4, 3)" in by_source["x"].code
    text = str(out).splitlines()
    assert re.fullmatch(r"f \(.*test_inspect\.py:\d+\): 1 graph, 5 ops, 7 guards, traced in \d+\.\d ms",
                        text[0])
    assert text[1] == "graph 0 (5 ops):" and text[2] == "    def forward(self, x, y):"
    guards_at = text.index("guards:")
    assert text[guards_at + 1:] == [
        "    global torch state  grad mode=True, default dtype=float32, default device=cpu, autocast off",
        "    k                   == 2 (int)",
        "    global 'torch'      is module 'torch'",
        "    global 'SCALE'      == 2 (int)",
        "    f.__kwdefaults__    is dict {'k': 3}",
        "    x                   tensor float32 cpu (4, 3) contiguous",
        "    y                   tensor float32 cpu (4, 3) contiguous",
    ]
    assert len(text) < 20  # compact


def test_explain_leaves_the_real_cache_and_backend_alone():
    be = CountingBackend()

    @minidynamo.optimize(backend=be)
    def f(x):
        return x * 2
    f(X)
    x = torch.ones(5)
    out = minidynamo.explain(f)(x)
    assert out.graph_count == 1 and be.calls == 1
    assert len(f.cache_entries()) == 1 and f.guard_failures() == []
    assert f.cache_entries()[0].hit_count == 1
    assert x.tolist() == [1.0] * 5


def test_explain_does_not_run_side_effects(capsys):
    calls = []

    def f(x):
        calls.append(1)  # traced: the real call replays it after the graph
        return x
    out = minidynamo.explain(f)(X)
    assert calls == [] and out.kind == "constant" and out.break_reasons == []

    def g(x):
        y = x
        calls.append(1)
        try:
            print("side effect")  # inside a try: the frame cannot break
        finally:
            pass
        return y
    out = minidynamo.explain(g)(X)
    assert calls == [] and out.kind == "eager" and capsys.readouterr().out == ""
    (reason,) = out.break_reasons
    assert reason.category == "side_effect"


def test_explain_runs_a_call_that_breaks_once(capsys):
    calls = []

    def f(x):
        y = x + 1
        print("side effect")  # breaks: what comes after depends on real values
        calls.append(1)
        return y
    out = minidynamo.explain(f)(X)
    assert calls == [1] and capsys.readouterr().out == "side effect\n"
    assert out.kind == "break" and out.graph_break_count == 1
    assert [r.category for r in out.break_reasons] == ["side_effect"]


def test_explain_constant_and_lambda():
    out = minidynamo.explain(lambda a, b: a + b)(2, 3)
    assert out.kind == "constant" and out.graph_count == 0 and out.name == "fn_lambda"
    assert "no tensor work (no graph)" in str(out).splitlines()[0]


def test_explain_triton_launch():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        return o
    out = minidynamo.explain(f)(torch.ones(64, device=K.DEVICE), torch.ones(64, device=K.DEVICE))
    (launch,) = out.launches
    assert (launch.kernel, launch.grid, launch.writes, launch.unknown_reason) == \
        ("add_kernel", (4, 1, 1), ["out_ptr"], None)
    assert launch.kernel_object is K.add_kernel and launch.mutation == "out_ptr"
    assert out.triton_launches == ["add_kernel[(4, 1, 1)] writes: out_ptr"]
    text = str(out)
    assert "Triton launches:\n    add_kernel[(4, 1, 1)] writes: out_ptr" in text
    assert "    global 'K'.add_kernel  is kernel 'add_kernel'" in text


def test_explain_triton_unknown_mutation():
    def f(x):
        o = torch.empty_like(x)
        MC.impure_asm_kernel[(1,)](x, o, x.numel(), BLOCK=16)
        return o
    out = minidynamo.explain(f)(torch.ones(16, dtype=torch.int32, device=K.DEVICE))
    (launch,) = out.launches
    assert launch.writes is None and "inline_asm_elementwise" in launch.unknown_reason
    assert launch.mutation.startswith("unknown (")
    assert "writes: unknown (" in str(out)


def test_explain_rejects_what_optimize_rejects():
    with pytest.raises(TypeError, match="minidynamo.explain got the class int"):
        minidynamo.explain(int)


# --- fallback categories ----------------------------------------------------------------
class Plain:
    __slots__ = ("a",)  # objects made in the trace are rebuilt through their __dict__


def c_data_dependent(x):
    if x.sum() > 0:  # marker
        return x + 1
    return x


def c_side_effect(x):
    print("hello")  # marker
    return x


def c_call(x):
    o = Plain()  # marker
    return x + (o is None)


ERROR = ValueError("no")


def c_exceptions(x):
    raise ERROR  # marker


def c_generator(x):
    g = (v for v in [x, x])
    return x * g.gi_running + next(g)  # marker


def c_torch_op(x):
    return x @ x  # marker


def c_triton(x):
    import triton
    import triton.language as tl

    @triton.jit  # marker
    def inner(x_ptr, n, BLOCK: tl.constexpr):  # marker
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
    inner[(1,)](x, x.numel(), BLOCK=64)
    return x


def c_construct(x):
    class Local(metaclass=type):  # marker
        pass
    return x


def c_graph_break(x):
    y = x + 1
    minidynamo.graph_break()  # marker
    return y * 2


def c_opcode(x, p):
    match p:  # noqa: E999  # marker
        case [a, b]:  # marker
            return x + a + b
    return x


def _marker_lines(fn):
    lines, start = inspect.getsourcelines(fn)
    return {start + i for i, line in enumerate(lines) if "# marker" in line}


# (category, function, arguments, detail); the first ones break (the declined instruction is
# a call, a jump or a store of the function's own frame), the others run eagerly as a whole.
# c_triton breaks at the decorator (its frame's cell `tl` goes to the resume function, which
# captures the launch of the kernel made for real).
BREAKS = ("data_dependent", "side_effect", "call", "graph_break", "generator", "triton")
FALLBACKS = [
    ("data_dependent", c_data_dependent, (X,),
     "the truth value of tensor gt () depends on its data (branching on a tensor: compute the condition "
     "with shapes, or mark the call to run eagerly)"),
    ("side_effect", c_side_effect, (X,), "print() writes output"),
    ("call", c_call, (X,), "creating a Plain object while tracing: Plain defines __slots__"),
    ("graph_break", c_graph_break, (X,), "minidynamo.graph_break()"),
    ("exceptions", c_exceptions, (X,), "a raise statement (the exception is raised by the eager run)"),
    ("generator", c_generator, (X,), "attribute 'gi_running' of a generator expression"),
    ("torch_op", c_torch_op, (X,), "tensor @ raised RuntimeError: a and b must have same reduction dim, "
                                   "but got [4, 3] X [4, 3]."),
    ("triton", c_triton, (torch.ones(64, device=K.DEVICE),), "triton.jit() inside the traced function: a kernel defined inside "
                                            "the traced function is not captured (define it at module level)"),
    ("construct", c_construct, (X,), "a class statement with keywords (metaclass): a metaclass or "
                                     "__init_subclass__ arguments are not traced"),
    ("opcode", c_opcode, (X, [1, 2]),
     f"opcode MATCH_SEQUENCE is not supported (Python {sys.version_info[0]}.{sys.version_info[1]})"),
]


@pytest.mark.parametrize("category,fn,args,detail", FALLBACKS, ids=[c[0] for c in FALLBACKS])
def test_fallback_reason(category, fn, args, detail):
    out = minidynamo.explain(fn)(*args)
    if category == "opcode" and out.kind != "eager":
        pytest.skip("the match statement is traced now; no other opcode is known to be declined")
    kind = "break" if category in BREAKS else "eager"
    assert out.kind == kind, out
    reason, *later = out.break_reasons
    # c_generator's resume function gets the generator object: it runs eagerly, for the same reason.
    assert [r.category for r in later] == (["generator"] if category == "generator" else []), later
    assert (reason.category, reason.detail) == (category, detail)
    assert reason.hint == HINTS[category] and reason.filename == __file__
    assert reason.lineno in _marker_lines(fn)
    assert reason.where.startswith(f"{__file__}:{reason.lineno}: ")
    text = str(out).splitlines()
    if kind == "eager":
        if reason.no_break:  # why the graph could not break there instead, last
            assert text.pop() == f"    no graph break there: {reason.no_break}"
        assert text[-3:] == [f"runs eagerly: [{category}] {detail}", f"    at {reason.where}",
                             f"    hint: {HINTS[category]}"]
        assert out.graph_break_count == 0
    else:
        at = text.index(f"graph break: [{category}] {detail}")
        assert text[at + 1:at + 3] == [f"    at {reason.where}", f"    hint: {HINTS[category]}"]
        assert "after the breaks:" in text[at + 3:] and out.graph_break_count == 1
    # The real call: the same reason on its entry, the same outcome as eager.
    opt = minidynamo.optimize(fn)
    raises = {"exceptions": ValueError, "torch_op": RuntimeError}.get(category)
    if raises is None:
        same(opt(*copy.deepcopy(args)), fn(*copy.deepcopy(args)))
    else:
        with pytest.raises(raises):
            opt(*args)
    entry = opt.cache_entries()[0]
    why = entry.break_reason if kind == "break" else entry.reason
    assert entry.kind == kind and (why.category, why.detail) == (category, detail)


def test_backend_failure_reason():
    def failing_backend(gm, example_inputs):
        raise ValueError("cannot compile")
    out = minidynamo.explain(lambda x: x + 1, backend=failing_backend)(X)
    (reason,) = out.break_reasons
    assert reason.category == "backend" and reason.where is None
    assert reason.detail == ("minidynamo backend 'test_backend_failure_reason.<locals>.failing_backend' "
                             "raised ValueError: cannot compile")
    assert out.graph_count == 1 and reason.hint == HINTS["backend"]


def test_every_category_has_a_test_and_a_hint():
    covered = {c[0] for c in FALLBACKS} | {"backend", "internal", "cache_limit"}  # internal: test_internal_errors.py
    assert covered == set(CATEGORIES) == set(HINTS)


def test_explain_names_itself_for_a_bad_target():
    with pytest.raises(TypeError, match=r"^minidynamo\.explain needs a function or another callable, got int"):
        minidynamo.explain(42)


def test_explain_raises_the_binding_error_eager_raises():
    ran = []

    def f(x, y):
        ran.append(1)
        return x + y

    with pytest.raises(TypeError) as eager:
        f(torch.ones(2))
    with pytest.raises(TypeError) as explained:
        minidynamo.explain(f)(torch.ones(2))
    assert str(explained.value) == str(eager.value) and not ran
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        minidynamo.explain(f)(torch.ones(2), torch.ones(2), z=1)


def test_explain_after_the_cache_limit_says_the_call_runs_eagerly():
    limit = minidynamo.config.cache_size_limit
    minidynamo.config.cache_size_limit = 2
    try:
        opt = minidynamo.optimize(lambda x: x * 2, dynamic=False)
        with pytest.warns(RuntimeWarning, match="cache_size_limit"):
            for n in (1, 2, 3):
                opt(torch.ones(n))
        out = minidynamo.explain(opt)(torch.ones(4))
        assert out.kind == "eager" and out.graph_count == 0
        (reason,) = out.break_reasons
        assert reason.category == "cache_limit" and "runs eagerly" in reason.detail
        assert reason.hint == HINTS["cache_limit"]
        assert minidynamo.explain(opt)(torch.ones(2)).kind == "graph"  # an entry takes it
    finally:
        minidynamo.config.cache_size_limit = limit
