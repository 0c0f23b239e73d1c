"""Differential fuzzing: generated functions (tests/fuzzgen.py) run eagerly and optimized
over a sequence of calls with changing shapes, dtypes, layouts and outside state; results,
exceptions (type and message), printed output, side effects (how often each ran), input
mutations and returned-input identity must all match.

The quick test runs in the normal suite (deterministic examples). The long run:
`pytest -m fuzz --hypothesis-profile=long` (tox -e fuzz).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import linecache
import random
import traceback
import warnings
from dataclasses import dataclass

import pytest
import torch
from fuzzgen import HypothesisChooser, RandomChooser, generate, make_inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidynamo

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# Registered here too (tests/conftest.py registers them first, since pytest loads the
# profile named by --hypothesis-profile before test modules are imported).
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=_SUPPRESS,
                          print_blob=True)
QUICK_EXAMPLES = 40


# --- loading a generated program -----------------------------------------------------------

def load(program, tag=""):
    """exec the program under a filename registered with linecache, so tracebacks, the
    `where` of a fallback and explain() show its lines. Each load is a fresh module (its
    own SIDE list, globals and objects), so eager and optimized runs never share state."""
    digest = hashlib.sha1(program.source.encode()).hexdigest()[:12]
    filename = f"/fuzz/fuzzgen_{digest}{tag}.py"
    linecache.cache[filename] = (len(program.source), None, program.source.splitlines(True), filename)
    ns = {"__name__": f"fuzzgen_{digest}{tag}", "__file__": filename}
    exec(compile(program.source, filename, "exec"), ns)
    return ns, filename


def call_args(program, spec, x, y):
    if program.signature == "plain":
        return (x, y, spec.n, spec.scale), {}
    if program.signature == "defaults":
        if spec.n == 2 and spec.scale == 1.5:
            return (x, y), {}  # both defaults
        return (x, y), {"n": spec.n, "scale": spec.scale}
    return (x, y), {"n": spec.n, "scale": spec.scale}


def set_state(ns, spec):
    ns["SCALE"] = spec.SCALE
    ns["CFG"]["s"] = spec.CFG_s
    ns["CFG"]["mode"] = spec.CFG_mode
    ns["OBJ"].s = spec.OBJ_s
    ns["_set_cl"](spec.CL)


@dataclass
class Outcome:
    result: object = None
    exc: BaseException | None = None
    stdout: str = ""
    side: list = None
    gbox: int = 0


def run_once(ns, fn, args, kwargs, seed) -> Outcome:
    out = Outcome()
    side_before, gbox_before = len(ns["SIDE"]), ns["GBOX"]["count"]
    buf = io.StringIO()
    torch.manual_seed(seed)  # random ops must draw the same numbers
    with contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out.result = fn(*args, **kwargs)
        except minidynamo.Unsupported:
            raise  # never reaches the user without fullgraph=True
        except Exception as e:  # noqa: BLE001 - compared with eager's
            out.exc = e
    out.stdout = buf.getvalue()
    out.side = ns["SIDE"][side_before:]
    out.gbox = ns["GBOX"]["count"] - gbox_before
    return out


def outside_state(ns):
    """What the function may have written outside itself."""
    return {"SIDE": list(ns["SIDE"]), "GBOX": dict(ns["GBOX"]), "GW": ns["GW"], "OBJ.w": ns["OBJ"].w,
            "OBJ.s": ns["OBJ"].s, "CFG": dict(ns["CFG"]), "SCALE": ns["SCALE"]}


# --- comparison ----------------------------------------------------------------------------

def _tensors(v, acc):
    if isinstance(v, torch.Tensor):
        acc.append(v)
    elif isinstance(v, (tuple, list)):
        for i in v:
            _tensors(i, acc)
    elif isinstance(v, dict):
        for i in v.values():
            _tensors(i, acc)
    return acc


def _storage(t):
    return t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)


def compare_aliasing(e, o, eager_inputs, opt_inputs, where):
    """Which result tensors are the same object, and which share an input's storage, as in eager."""
    te, to = _tensors(e, []), _tensors(o, [])
    for i in range(len(te)):
        for j in range(i + 1, len(te)):
            assert (te[i] is te[j]) == (to[i] is to[j]), \
                f"{where}: results {i} and {j} are {'' if te[i] is te[j] else 'not '}one object in eager"
        for k, (ei, oi) in enumerate(zip(eager_inputs, opt_inputs)):
            shares_e = _storage(te[i]) == _storage(ei)
            shares_o = _storage(to[i]) == _storage(oi)
            assert shares_e == shares_o, \
                f"{where}: result tensor {i} {'shares' if shares_e else 'does not share'} input {k}'s storage in eager"


def compare(e, o, eager_inputs, opt_inputs, where="result"):
    for i, inp in enumerate(eager_inputs):
        if e is inp:
            assert o is opt_inputs[i], f"{where}: eager returned input {i} itself, optimized did not"
            return
    if isinstance(o, torch.Tensor) and any(o is inp for inp in opt_inputs):
        raise AssertionError(f"{where}: optimized returned an input itself, eager a new tensor")
    assert type(e) is type(o), f"{where}: {type(e).__name__} (eager) != {type(o).__name__} (optimized)"
    if isinstance(e, torch.Tensor):
        meta_e = (e.dtype, tuple(e.shape), e.device, e.requires_grad, e.stride())
        meta_o = (o.dtype, tuple(o.shape), o.device, o.requires_grad, o.stride())
        assert meta_e == meta_o, f"{where}: tensor metadata {meta_e} (eager) != {meta_o} (optimized)"
        torch.testing.assert_close(o.detach(), e.detach(), equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif isinstance(e, (tuple, list)):
        assert len(e) == len(o), f"{where}: length {len(e)} != {len(o)}"
        for i, (a, b) in enumerate(zip(e, o)):
            compare(a, b, eager_inputs, opt_inputs, f"{where}[{i}]")
    elif isinstance(e, dict):
        assert list(e) == list(o), f"{where}: keys {list(e)} != {list(o)}"
        for k in e:
            compare(e[k], o[k], eager_inputs, opt_inputs, f"{where}[{k!r}]")
    elif isinstance(e, float) and e != e:
        assert o != o, f"{where}: nan (eager) != {o!r}"
    else:
        assert e == o and type(e) is type(o), f"{where}: {e!r} (eager) != {o!r} (optimized)"


def _frames_in(exc, filename):
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]


def check_program(program, backend="eager"):
    ns_e, file_e = load(program, "")
    ns_o, filename = load(program, "_opt")
    fn = ns_e["fuzz_fn"]
    opt = minidynamo.optimize(backend=backend)(ns_o["fuzz_fn"])
    has_unsupported = any(f.startswith("U:") for f in program.features)
    prev = None
    try:
        for i, spec in enumerate(program.calls):
            what = f"call {i} ({spec!r})"
            set_state(ns_e, spec)
            set_state(ns_o, spec)
            ex, ey = make_inputs(spec)
            ox, oy = make_inputs(spec)
            eargs, ekw = call_args(program, spec, ex, ey)
            oargs, okw = call_args(program, spec, ox, oy)
            expected = run_once(ns_e, fn, eargs, ekw, seed=1000 + i)
            n_entries = len(opt.cache_entries())
            got = run_once(ns_o, opt, oargs, okw, seed=1000 + i)

            if (expected.exc is None) != (got.exc is None):
                raise AssertionError(
                    f"{what}: eager {'raised ' + repr(expected.exc) if expected.exc else 'returned'}, "
                    f"optimized {'raised ' + repr(got.exc) if got.exc else 'returned'}") from (got.exc or expected.exc)
            if expected.exc is not None:
                assert type(got.exc) is type(expected.exc), f"{what}: {got.exc!r} != {expected.exc!r}"
                assert str(got.exc).replace("_opt.py", ".py") == str(expected.exc), \
                    f"{what}: {got.exc!r} != {expected.exc!r}"
                # the user's traceback still shows the user's own lines
                if _frames_in(expected.exc, file_e):
                    frames = _frames_in(got.exc, filename)
                    assert frames, f"{what}: traceback of the optimized call lost {filename}"
                    assert frames[-1].line == _frames_in(expected.exc, file_e)[-1].line
            else:
                compare(expected.result, got.result, (ex, ey), (ox, oy), f"{what}: result")
                compare_aliasing(expected.result, got.result, (ex, ey), (ox, oy), f"{what}: result")
            assert got.stdout == expected.stdout, f"{what}: printed {got.stdout!r}, eager {expected.stdout!r}"
            assert got.side == expected.side, f"{what}: side effects {got.side!r}, eager {expected.side!r}"
            assert got.gbox == expected.gbox, f"{what}: GBOX writes {got.gbox}, eager {expected.gbox}"
            for name, a, b in (("x", ex, ox), ("y", ey, oy)):
                compare(a, b, (), (), f"{what}: input {name} after the call")
            compare(outside_state(ns_e), outside_state(ns_o), (), (), f"{what}: outside state")

            entries = opt.cache_entries()
            assert 1 <= len(entries) <= minidynamo.config.cache_size_limit, f"{what}: {len(entries)} entries"
            same_as_prev = prev is not None and {k: v for k, v in vars(spec).items() if k != "seed"} == \
                {k: v for k, v in vars(prev).items() if k != "seed"}
            if same_as_prev and not has_unsupported and "mutate_global" not in program.features:
                assert len(entries) == n_entries, f"{what}: same inputs and state, yet re-traced"
            prev = spec
        for entry in opt.cache_entries():
            assert entry.kind in ("graph", "eager", "constant"), entry.kind
            if entry.kind == "eager":
                reason = entry.reason
                assert isinstance(reason, minidynamo.Unsupported), reason
                assert reason.category in minidynamo.exc.CATEGORIES
                # `where` names the generated file and shows its line
                if reason.where is not None and reason.where.startswith(filename):
                    lineno = int(reason.where[len(filename) + 1:].split(":")[0])
                    assert linecache.getline(filename, lineno).strip() in reason.where
        return opt
    finally:
        linecache.cache.pop(filename, None)
        linecache.cache.pop(file_e, None)


@st.composite
def programs(draw, allow_triton=True):
    return generate(HypothesisChooser(draw), allow_triton=allow_triton)


BACKENDS = ["eager", "functional_eager", "graph_module"]


def _backend(name):
    if name == "graph_module":
        return lambda gm, example_inputs: gm  # a custom backend: the module itself
    return name


@settings(max_examples=QUICK_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS,
          database=None)
@given(program=programs(), backend=st.sampled_from(BACKENDS))
def test_fuzz_quick(program, backend):
    check_program(program, _backend(backend))


@pytest.mark.fuzz
@given(program=programs(), backend=st.sampled_from(BACKENDS))
def test_fuzz_long(program, backend):
    if settings.get_current_profile_name() == "default":
        pytest.skip("the long fuzz run: pytest -m fuzz --hypothesis-profile=long (tox -e fuzz)")
    check_program(program, _backend(backend))


# --- the generator itself ------------------------------------------------------------------

def test_generator_covers_every_construct():
    """Over a few hundred seeds, every statement kind and Triton form is generated, and
    every program compiles."""
    from fuzzgen import SUPPORTED_KINDS, UNSUPPORTED_KINDS
    seen = set()
    for seed in range(400):
        p = generate(RandomChooser(seed))
        compile(p.source, f"<seed {seed}>", "exec")
        seen |= p.features
    wanted = {k for k, _ in SUPPORTED_KINDS} | {"U:" + k for k, _ in UNSUPPORTED_KINDS} | \
        {f"triton{i}" for i in range(9)} | {"sig:plain", "sig:defaults", "sig:varargs"}
    assert wanted <= seen, sorted(wanted - seen)


@pytest.mark.parametrize("seed", range(12))
def test_fuzz_seeds(seed):
    """A few fixed programs from the random chooser (reproduce one: python tests/fuzzgen.py SEED)."""
    check_program(generate(RandomChooser(seed)), _backend(random.Random(seed).choice(BACKENDS)))


def test_fuzz_traces_most_programs_without_unsupported():
    """The generator's supported subset really is traced: programs with no unsupported
    construct end in graph (or constant) entries, not eager fallbacks."""
    kinds = []
    for seed in range(100, 130):
        p = generate(RandomChooser(seed), unsupported_percent=0)
        opt = check_program(p)
        kinds += [(e.kind, str(e.reason)) for e in opt.cache_entries()]
    eager = [r for k, r in kinds if k == "eager"]
    # a traced user error (an IndexError on n, a shape mismatch) is a legitimate fallback
    unexpected = [r for r in eager if "[exceptions]" not in r and "[torch_op]" not in r]
    assert not unexpected, unexpected
