"""Guards and recompilation: what changes re-trace, what doesn't, the failure
explanations, the cache-size limit, and identity guards against id() reuse."""
import gc
import warnings

import pytest
import torch

import minidynamo
from helpers import CountingBackend

MODE = 1
G_SCALE = 2.0


def g_fn(x):
    return x + 1


def g_other(x):
    return x - 1


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


def opt_of(fn):
    backend = CountingBackend()
    return minidynamo.optimize(backend=backend)(fn), backend


def _reasons(opt):
    return [f.reason for f in opt.guard_failures()]


def test_same_shapes_do_not_recompile():
    opt, be = opt_of(lambda x: x * 2)
    for _ in range(3):
        opt(t(8))
    assert be.calls == 1 and len(opt.cache_entries()) == 1


def test_shape_change_recompiles_with_message():
    opt, be = opt_of(lambda x: x * 2)
    opt(t(8))
    opt(t(16))
    assert be.calls == 2 and len(opt.cache_entries()) == 2
    assert _reasons(opt) == ["tensor 'x' size mismatch at dim 0: expected 8, actual 16"]
    opt(t(8))
    opt(t(16))
    assert be.calls == 2  # both variants cached


def test_dtype_change_recompiles():
    opt, be = opt_of(lambda x: x + 1)
    opt(t(3))
    opt(torch.arange(3))
    assert be.calls == 2
    assert "dtype mismatch: expected torch.float32, actual torch.int64" in _reasons(opt)[0]


def test_requires_grad_change_recompiles():
    opt, be = opt_of(lambda x: x * 3)
    opt(t(3))
    out = opt(t(3).requires_grad_())
    assert out.requires_grad
    assert be.calls == 2
    assert "requires_grad mismatch" in _reasons(opt)[0]


def test_rank_and_stride_changes_recompile():
    opt, be = opt_of(lambda x: x + 1)
    opt(t(4, 3))
    opt(t(3, 4).t())
    assert "stride mismatch" in _reasons(opt)[0]
    opt(t(2, 2, 3))
    assert "rank mismatch" in _reasons(opt)[1]
    assert be.calls == 3


def test_constant_argument_change_recompiles():
    def f(x, k):
        return x * k

    opt, be = opt_of(f)
    torch.testing.assert_close(opt(torch.ones(2), 2), torch.full((2,), 2.0))
    torch.testing.assert_close(opt(torch.ones(2), 3), torch.full((2,), 3.0))
    torch.testing.assert_close(opt(torch.ones(2), 2), torch.full((2,), 2.0))
    assert be.calls == 2
    assert _reasons(opt) == ["k changed: expected 2, actual 3"]


def test_int_and_float_and_bool_constants_are_distinct():
    def f(x, k):
        return x * k, type(k).__name__

    opt, be = opt_of(f)
    assert opt(torch.ones(1), 1)[1] == "int"
    assert opt(torch.ones(1), 1.0)[1] == "float"
    assert opt(torch.ones(1), True)[1] == "bool"
    assert be.calls == 3


def test_global_constant_change_recompiles():
    global MODE

    def f(x):
        return x * 2 if MODE == 1 else x * 3

    opt, be = opt_of(f)
    x = torch.ones(2)
    try:
        assert opt(x).tolist() == [2.0, 2.0]
        MODE = 2
        assert opt(x).tolist() == [3.0, 3.0]
        assert be.calls == 2
        assert "global 'MODE' changed: expected 1, actual 2" in _reasons(opt)[0]
    finally:
        MODE = 1


def test_global_function_swapped_recompiles():
    global g_fn
    original = g_fn

    def f(x):
        return g_fn(x)

    opt, be = opt_of(f)
    x = torch.zeros(2)
    try:
        assert opt(x).tolist() == [1.0, 1.0]
        g_fn = g_other
        assert opt(x).tolist() == [-1.0, -1.0]
        assert be.calls == 2
        assert "global 'g_fn' is a different object" in _reasons(opt)[0]
    finally:
        g_fn = original


def test_closure_cell_contents_change_recompiles():
    k = 2

    def f(x):
        return x * k

    opt, be = opt_of(f)
    x = torch.ones(2)
    assert opt(x).tolist() == [2.0, 2.0]
    k = 5  # noqa: F841 - read through f's closure cell
    assert opt(x).tolist() == [5.0, 5.0]
    assert be.calls == 2
    assert "closure 'k' changed: expected 2, actual 5" in _reasons(opt)[0]


def test_closure_tensor_is_read_at_call_time():
    w = torch.ones(2)

    def f(x):
        return x * w

    opt, be = opt_of(f)
    assert opt(torch.ones(2)).tolist() == [1.0, 1.0]
    w = torch.full((2,), 3.0)  # noqa: F841 - a new object of the same metadata
    assert opt(torch.ones(2)).tolist() == [3.0, 3.0]
    assert be.calls == 1


def test_list_length_change_recompiles():
    def f(xs):
        out = xs[0]
        for v in xs[1:]:
            out = out + v
        return out

    opt, be = opt_of(f)
    opt([t(2), t(2)])
    opt([t(2), t(2)])
    opt([t(2), t(2), t(2)])
    assert be.calls == 2
    assert "xs length changed: expected 2, actual 3" in _reasons(opt)[0]


def test_dict_keys_change_recompiles():
    def f(d):
        return sum(d.values(), torch.zeros(2))

    opt, be = opt_of(f)
    opt({"a": t(2)})
    opt({"a": t(2), "b": t(2)})
    assert be.calls == 2
    assert "keys changed" in _reasons(opt)[0]


def test_argument_type_change_recompiles():
    def f(x, k):
        return x * (k[0] if isinstance(k, tuple) else k)

    opt, be = opt_of(f)
    x = torch.ones(2)
    assert opt(x, 2).tolist() == [2.0, 2.0]
    assert opt(x, (3,)).tolist() == [3.0, 3.0]
    assert be.calls == 2


def test_module_attribute_change_recompiles():
    class M:
        def __init__(self):
            self.k = 2

    def f(m, x):
        return x * m.k

    opt, be = opt_of(f)
    m = M()
    x = torch.ones(1)
    assert opt(m, x).tolist() == [2.0]
    m.k = 4
    assert opt(m, x).tolist() == [4.0]
    assert be.calls == 2


def test_cache_size_limit_warns_once_and_runs_eagerly():
    minidynamo.config.cache_size_limit = 2

    def f(x, k):
        return x + k

    be = CountingBackend()
    opt = minidynamo.optimize(f, backend=be, dynamic=False)
    x = torch.zeros(1)
    opt(x, 1.0)  # static: each float a constant (automatically, a changing one becomes symbolic)
    opt(x, 2.0)
    with pytest.warns(RuntimeWarning, match="cache_size_limit"):
        assert opt(x, 3.0).tolist() == [3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert opt(x, 4.0).tolist() == [4.0]  # no second warning, still correct
    assert be.calls == 2 and len(opt.cache_entries()) == 2


def test_error_on_recompile():
    opt, _ = opt_of(lambda x: x + 1)
    opt(t(2))
    minidynamo.config.error_on_recompile = True
    try:
        with pytest.raises(minidynamo.RecompileError, match="size mismatch"):
            opt(t(3))
    finally:
        minidynamo.config.error_on_recompile = False


def test_identity_guard_not_fooled_by_id_reuse():
    """A function passed in is guarded by identity; a new function allocated at the
    address of a dead one must still miss (the entry keeps the old one alive)."""
    def f(fn, x):
        return fn(x)

    opt, be = opt_of(f)
    x = torch.ones(2)
    results = []
    for i in range(6):
        fn = eval(f"lambda v: v * {i}")  # a fresh function object each round
        results.append(opt(fn, x).tolist())
        del fn
        gc.collect()
    assert results == [[float(i)] * 2 for i in range(6)]


def test_object_identity_guard_for_modules():
    class Scale(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    def f(m, x):
        return m(x)

    opt, be = opt_of(f)
    x = torch.ones(2)
    for k in (2, 3, 2):
        m = Scale(k)
        assert opt(m, x).tolist() == [float(k)] * 2
        del m
        gc.collect()


def test_guard_text_is_readable():
    def f(x, k):
        return x * k

    opt, _ = opt_of(f)
    opt(t(2, 2), 3)
    text = opt.cache_entries()[0].guard_text()
    assert "k == 3" in text
    assert "x.shape == (2, 2)" in text


def test_defaults_changed_recompiles():
    def f(x, k=2):
        return x * k

    opt, be = opt_of(f)
    x = torch.ones(1)
    assert opt(x).tolist() == [2.0]
    f.__defaults__ = (5,)
    assert opt(x).tolist() == [5.0]
    assert be.calls == 2


def test_unused_list_contents_are_not_guarded():
    """Guards come with use: a list only passed through is not guarded on its length."""
    def f(x, xs):
        return x + 1, xs

    opt, be = opt_of(f)
    lst = [1]
    opt(t(2), lst)
    lst.append(2)
    out = opt(t(2), lst)
    assert out[1] is lst
    assert be.calls == 1


# --- torch's C tensor check in the entry --------------------------------------------------

def _double_plus(x):
    return x * 2 + 1


@pytest.mark.skipif(not minidynamo.guards._c_checks_work(), reason="this torch has no usable C tensor check")
def test_entry_checks_tensors_in_c_and_explains_like_python():
    opt, backend = opt_of(_double_plus)
    x = t()
    torch.testing.assert_close(opt(x), _double_plus(x))
    entry = opt.cache_entries()[0]
    assert "_md_check_x(x)" in entry.source_text and "x.shape" not in entry.source_text
    assert "x.shape == (4, 3)" in entry.guard_text()  # users read the Python form
    reasons = []
    for other in (t(5, 3), t().double(), t(3, 4).t(), t().requires_grad_()):
        opt, _ = opt_of(_double_plus)
        opt(x)
        torch.testing.assert_close(opt(other), _double_plus(other))
        reasons += [f.reason for f in opt.guard_failures()]
    assert reasons == ["tensor 'x' size mismatch at dim 0: expected 4, actual 5",
                       "tensor 'x' dtype mismatch: expected torch.float32, actual torch.float64",
                       "tensor 'x' stride mismatch at dim 0: expected 3, actual 1",
                       "tensor 'x' requires_grad mismatch: expected False, actual True"], reasons


@pytest.mark.skipif(not minidynamo.guards._c_checks_work(), reason="this torch has no usable C tensor check")
@pytest.mark.parametrize("case", ["inference_mode", "conj"])
def test_dispatch_key_changes_retrace_and_say_so(case):
    """What the Python expression cannot see: a call under inference_mode (autograd keys
    excluded) or a conjugate view. Each gets its own entry, results as eager."""
    fn = _double_plus if case == "inference_mode" else (lambda x: x * (2 + 1j))
    # inference_mode is global state too, and that is checked first.
    says = ("global torch state changed: grad mode: traced with True, now False; inference mode: "
            "traced with False, now True") if case == "inference_mode" else \
        "tensor 'x' dispatch keys differ from the traced call's"
    opt, backend = opt_of(fn)
    x = t() if case == "inference_mode" else torch.randn(4, 3, dtype=torch.complex64)
    torch.testing.assert_close(opt(x), fn(x))
    if case == "inference_mode":
        with torch.inference_mode():
            got, want = opt(x), fn(x)
    else:
        got, want = opt(x.conj()), fn(x.conj())
    torch.testing.assert_close(got, want)
    (failure,) = opt.guard_failures()
    assert failure.reason.startswith(says), failure.reason
    assert failure.expected != failure.actual, failure
    if case == "conj":
        assert "DispatchKeySet" in failure.actual, failure
    assert len(opt.cache_entries()) == 2
    torch.testing.assert_close(opt(x), fn(x))  # the first entry still serves the first form
    assert opt.cache_entries()[0].hit_count == 2


def test_c_tensor_guards_can_be_switched_off():
    minidynamo.config.c_tensor_guards = False
    try:
        opt, _ = opt_of(_double_plus)
        x = t()
        torch.testing.assert_close(opt(x), _double_plus(x))
        assert "x.shape == (4, 3)" in opt.cache_entries()[0].source_text
    finally:
        minidynamo.config.c_tensor_guards = True


_DTYPE_TABLE = {torch.float32: 0, torch.bfloat16: 1}


def test_a_dict_keyed_by_dtypes_is_guarded_by_its_keys():
    """Keys whose repr is no expression (torch.float32) are compared as bound objects:
    written out, the guard could never pass and the first call failed."""
    def f(x):
        return x + _DTYPE_TABLE[x.dtype]
    opt, backend = opt_of(f)
    for _ in range(2):
        torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))
    assert len(opt.cache_entries()) == 1 and backend.calls == 1
    _DTYPE_TABLE[torch.float16] = 2
    try:
        torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))
        assert "keys changed" in opt.guard_failures()[-1].reason
    finally:
        del _DTYPE_TABLE[torch.float16]


def test_a_recompile_records_why_every_entry_missed():
    # The stride change misses entry 0 by stride, entry 1 by size and stride: both are named,
    # each against its own entry, led by the closest (entry 0: the same shape).
    opt = minidynamo.optimize(lambda x: x * 2, dynamic=False)
    opt(torch.randn(4, 3))
    opt(torch.randn(5, 3))
    opt(torch.randn(3, 4).t())
    first, second = opt.guard_failures()
    assert first.others == () and first.entry == 0
    assert (second.entry, [o.entry for o in second.others]) == (0, [1])
    assert "stride mismatch" in second.reason
    assert "size mismatch at dim 0: expected 5, actual 4" in second.others[0].reason
    lines = second.message().splitlines()
    assert lines[1].startswith("  entry 0: tensor 'x' stride") and lines[2].startswith("  entry 1: tensor 'x' size mismatch")


@pytest.mark.parametrize("nan", [float("nan"), complex("nan"), complex(1.0, float("nan"))])
def test_nan_constants_of_every_scalar_type_are_guarded(nan):
    opt = minidynamo.optimize(lambda x, s: x + 1)
    opt(torch.ones(1), nan)
    opt(torch.ones(1), nan)
    opt(torch.ones(1), 2.0)
    assert len(opt.cache_entries()) == 2


def test_nan_numpy_scalar_is_guarded():
    np = pytest.importorskip("numpy")
    opt = minidynamo.optimize(lambda x, s: x + 1)
    opt(torch.ones(1), np.float64("nan"))
    opt(torch.ones(1), np.float64("nan"))
    assert len(opt.cache_entries()) == 1


def test_attribute_and_aliasing_guards_read_as_python():
    def f(a, c):
        a.add_(getattr(a, "step", 1))
        return c * 2 if hasattr(c, "doubled") else c
    opt = minidynamo.optimize(f)
    opt(torch.zeros(3), torch.zeros(3))
    entry = opt.cache_entries()[0]
    text = entry.guard_text().splitlines()
    assert "not a.__dict__" in text and "not c.__dict__" in text
    check = next(line for line in text if "check_aliasing" in line)
    assert check.endswith("check_aliasing((a, c, ))")
    kinds = {g.kind: g for g in entry.guards}
    assert kinds["TENSOR_ALIASING"].describe().startswith("separate memory")
    # the common case costs one set of storage addresses; aliasing goes to the exact check
    checker = kinds["TENSOR_ALIASING"].expected
    x = torch.zeros(3)
    assert checker((x, torch.zeros(3))) and checker((x[:1], x[1:])) and not checker((x, x))
    assert checker.first_difference((x, x[1:])) == ("a (written by the graph) and c were separate memory "
                                                    "when traced, now overlapping views of one storage")


def test_aliasing_guard_only_where_an_input_is_written():
    opt = minidynamo.optimize(lambda a, b: a + b)
    opt(torch.zeros(3), torch.zeros(3))
    assert all(g.kind != "TENSOR_ALIASING" for g in opt.cache_entries()[0].guards)
    opt = minidynamo.optimize(lambda a, b: (a.add_(1), b)[1] + 0)
    opt(torch.zeros(3), torch.zeros(3))
    assert any(g.kind == "TENSOR_ALIASING" for g in opt.cache_entries()[0].guards)


def test_python_tensor_guard_tells_inference_tensors_apart(monkeypatch):
    """Without torch's C tensor check (its dispatch keys tell them apart), the Python
    expression checks is_inference(): a folded `x.is_inference()` is not served to the other kind."""
    monkeypatch.setattr(minidynamo.config, "c_tensor_guards", False)

    def f(x):
        return x * 2 if x.is_inference() else x
    opt = minidynamo.optimize(f)
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2))
    with torch.inference_mode():
        y = torch.ones(2)
    torch.testing.assert_close(opt(y), f(y))
    assert opt.guard_failures()[-1].reason == "tensor 'x' is_inference mismatch: expected False, actual True"



def _kinds_in_use() -> set:
    """Every kind name the package builds a guard of: `Guard("KIND", ...)`, builder's
    `_guard(tx, "KIND", ...)`."""
    import pathlib
    import re
    root = pathlib.Path(minidynamo.__file__).parent
    pattern = re.compile(r'(?:Guard\(|_guard\(\w+, )"([A-Z_]+)"')
    return {k for path in root.rglob("*.py") for k in pattern.findall(path.read_text())}


def test_every_guard_kind_is_one_class():
    """Each kind in use is a Guard subclass named as the kind, holding its cost, code,
    explanation and key; `Guard(name, ...)` builds it and `kind` is its name."""
    from minidynamo.guard_kinds import KINDS, Guard
    from minidynamo.sources import LocalSource
    used = _kinds_in_use()
    assert len(used) >= 13 and used <= set(KINDS), used - set(KINDS)
    for name, cls in KINDS.items():
        assert issubclass(cls, Guard) and cls.__name__ == name == cls.kind
        assert isinstance(cls.cost, int)
        assert cls.code is not Guard.code, name  # each kind renders its own expression
        for member in ("mismatch", "key", "describe", "check_code", "reads"):
            assert callable(getattr(cls, member)), (name, member)
        assert cls.call_key is None or all("{}" in k for k in cls.call_key)
        g = Guard(name, LocalSource("x"), None, {"attr": "a", "attrs": ("_h",), "other": LocalSource("y")})
        assert type(g) is cls and isinstance(g, Guard) and g.kind == name and g.key()[:2] == (name, g.source)
    with pytest.raises(ValueError, match="unknown guard kind 'NO_SUCH_KIND'"):
        Guard("NO_SUCH_KIND", LocalSource("x"))


class _Holder:
    def m(self):
        return 1


class _OtherHolder:
    pass


def test_guard_kinds_explain_failures_in_the_same_words():
    """The plain words of a failing guard, kind by kind, as the recompile records say them."""
    from minidynamo.guards import Guard, tensor_guard
    from minidynamo.sources import LocalSource

    def says(guard, actual):
        return guard.explain(actual)
    x, y, o = LocalSource("x"), LocalSource("y"), LocalSource("o")
    assert says(tensor_guard(x, torch.zeros(8)), torch.zeros(16)) == \
        "tensor 'x' size mismatch at dim 0: expected 8, actual 16"
    assert says(Guard("EQUALS_MATCH", LocalSource("k"), 2), 3) == "k changed: expected 2, actual 3"
    assert says(Guard("EQUALS_MATCH", LocalSource("k"), True), 1) == \
        "k changed: expected True (bool), actual 1 (int)"
    assert says(Guard("TYPE_MATCH", o, _Holder), _OtherHolder()) == \
        "o type changed: expected _Holder, actual _OtherHolder"
    xs = LocalSource("xs")
    assert says(Guard("LEN_MATCH", xs, 2, {"type": list}), [1, 2, 3]) == "xs length changed: expected 2, actual 3"
    assert says(Guard("LEN_MATCH", xs, 2, {"type": list}), (1, 2)) == "xs type changed: expected list, actual tuple"
    assert says(Guard("DICT_KEYS", LocalSource("d"), ("a",), {"type": dict}), {"a": 1, "b": 2}) == \
        "d keys changed: expected ['a'], actual ['a', 'b']"
    with_attr = _Holder()
    with_attr.m = 2
    assert says(Guard("NOT_IN_DICT", o, None, {"attr": "m"}), with_attr) == \
        "o now has an instance attribute 'm' (shadowing its class's)"
    assert says(Guard("ALIAS_MATCH", x, True, {"other": y}), None) == \
        "x and y were the same object when traced, now different objects"
    assert says(Guard("ID_MATCH", LocalSource("fn"), g_fn), g_other) == \
        "fn is a different object: expected function 'g_fn', actual function 'g_other'"
    assert says(Guard("HASATTR", o, False, {"attr": "k"}), None) == "o now has an attribute 'k'"
    lin = torch.nn.Linear(2, 2)
    handle = lin.register_forward_hook(lambda *a: None)
    try:
        assert says(Guard("NO_HOOKS", LocalSource("m"), None, {"attrs": ("_forward_hooks",)}), lin) == \
            ("m now has hooks: forward hooks (1) (traced anew: forward hooks go into the graph, "
             "backward hooks break it)")
    finally:
        handle.remove()


def test_guard_set_dedups_by_the_kinds_key():
    """One guard per kind and source, told apart further by what the kind says (the
    attribute a HASATTR asks about, the other source of an ALIAS_MATCH)."""
    from minidynamo.guards import Guard, GuardSet
    from minidynamo.sources import LocalSource
    o, gs = LocalSource("o"), GuardSet()
    gs.add(Guard("TYPE_MATCH", o, _Holder))
    gs.add(Guard("TYPE_MATCH", o, _Holder))
    gs.add(Guard("HASATTR", o, False, {"attr": "a"}))
    gs.add(Guard("HASATTR", o, False, {"attr": "b"}))
    gs.add(Guard("HASATTR", o, False, {"attr": "b"}))
    gs.add(Guard("ALIAS_MATCH", o, False, {"other": LocalSource("p")}))
    gs.add(Guard("GLOBAL_STATE", o, None))
    assert [g.kind for g in gs.ordered()] == ["GLOBAL_STATE", "TYPE_MATCH", "HASATTR", "HASATTR", "ALIAS_MATCH"]
