"""Differential testing: run a function eagerly and optimized (twice, to hit the cache) on
independent copies of the same arguments and require identical behaviour: results,
raised exceptions, printed output, identity of returned inputs, aliasing, and the state
the arguments are left in."""
from __future__ import annotations

import contextlib
import copy
import dis
import io
import sys
import types
from dataclasses import dataclass, field

import pytest
import torch

import minidynamo
from minidynamo.exc import Raised

PY = sys.version_info[:2]


class CountingBackend:
    """`(gm, example_inputs) -> gm.forward`, counting calls and keeping the graphs."""

    def __init__(self):
        self.graphs: list = []
        self.example_inputs: list = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward

    @property
    def calls(self) -> int:
        return len(self.graphs)

    def ops(self, i: int = -1) -> list:
        """The call targets of graph i (functions and method names), in order."""
        return [n.target for n in self.graphs[i].graph.nodes if n.op in ("call_function", "call_method")]


class Args:
    """One argument set with keywords: `Args(x, 2, scale=3)`."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self):
        return f"Args({self.args!r}, {self.kwargs!r})"


@dataclass
class Info:
    backend: CountingBackend
    opt: object
    entries: list = field(default_factory=list)

    @property
    def graphs(self) -> int:
        return self.backend.calls

    @property
    def kinds(self) -> list:
        return [e.kind for e in self.entries]

    @property
    def tree(self) -> list:
        """Every entry: the function's, its resume functions' (recursively) and those of
        the callees a break optimized on their own (see `entry_tree`)."""
        return entry_tree(self.opt, self.backend)

    @property
    def break_reason(self):
        """The Unsupported the first entry broke at (kind "break")."""
        return self.entries[0].break_reason


def entry_tree(opt, backend=None, seen=None) -> list:
    """The cache entries of `opt` and, recursively, of the resume functions of its break
    entries; with `backend`, also those of the callees a break optimized on their own with
    it (a declined call inside a called Python function runs that function optimized)."""
    top = seen is None
    seen = set() if seen is None else seen
    if id(opt) in seen:
        return []
    seen.add(id(opt))
    out = []
    for e in opt.cache_entries():
        out.append(e)
        if e.kind == "break":
            for r in e.resumes:
                out += entry_tree(r, None, seen)
    if top and backend is not None:
        from minidynamo.callees import optimized_callees
        for c in optimized_callees(backend):
            out += entry_tree(c, None, seen)
    return out


@dataclass
class Outcome:
    result: object = None
    exc: BaseException | None = None
    stdout: str = ""


def _run(fn, args, kwargs) -> Outcome:
    out = Outcome()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            out.result = fn(*args, **kwargs)
        except minidynamo.Unsupported:
            raise  # only fullgraph=True may raise it; check() never asks for that
        except Exception as e:  # noqa: BLE001 - the user's exception is compared, not judged
            out.exc = e
    out.stdout = buf.getvalue()
    return out


def _paths(obj, path=(), acc=None, seen=None):
    """id(object) -> path, for every object reachable from the arguments."""
    if acc is None:
        acc, seen = {}, set()
    if id(obj) in seen:
        return acc
    seen.add(id(obj))
    acc.setdefault(id(obj), path)
    if isinstance(obj, (list, tuple)):
        for i, x in enumerate(obj):
            _paths(x, path + (i,), acc, seen)
    elif isinstance(obj, dict):
        for k, x in obj.items():
            _paths(x, path + (k,), acc, seen)
    elif isinstance(obj, torch.nn.Module):
        for k, x in list(obj.named_parameters()) + list(obj.named_buffers()):
            _paths(x, path + (("attr", k),), acc, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (type, types.FunctionType, types.ModuleType)):
        for k, x in vars(obj).items():
            _paths(x, path + (("attr", k),), acc, seen)
    return acc


def _at(root, path):
    obj = root
    for p in path:
        if isinstance(p, tuple) and p and p[0] == "attr":
            for part in p[1].split("."):
                obj = getattr(obj, part)
        else:
            obj = obj[p]
    return obj


def _storage(t: torch.Tensor):
    return t.untyped_storage().data_ptr()


def _tensor_storages(root, paths: dict):
    return {(_storage(o), o.device): p for o, p in ((_at(root, p), p) for p in paths.values())
            if isinstance(o, torch.Tensor)}


# Immutable values whose identity Python does not promise (deepcopy shares them).
_ATOMS = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device, range, slice)


class _Compare:
    """Deep comparison of an eager value with an optimized one, given both argument roots."""

    def __init__(self, eager_root, opt_root, what):
        self.eager_root = eager_root
        self.opt_root = opt_root
        self.what = what
        self.eager_paths = _paths(eager_root)
        self.opt_ids = {id(_at(opt_root, p)): p for p in self.eager_paths.values()}
        self.eager_storages = _tensor_storages(eager_root, self.eager_paths)
        self.opt_storages = _tensor_storages(opt_root, self.eager_paths)

    def fail(self, where, msg):
        raise AssertionError(f"{self.what}{where or ''}: {msg}")

    def __call__(self, e, o, where="", check_identity=True):
        if check_identity:
            path = self.eager_paths.get(id(e)) if not isinstance(e, _ATOMS) else None
            if path is not None:
                if o is not _at(self.opt_root, path):
                    self.fail(where, f"eager returned the input object at {path!r}; the optimized "
                                     f"call returned a different object ({type(o).__name__})")
                check_identity = False  # an input: its state is compared separately
            elif id(o) in self.opt_ids and not isinstance(o, _ATOMS):
                self.fail(where, f"the optimized call returned the input at {self.opt_ids[id(o)]!r}, "
                                 "eager returned a new object")
        if type(e) is not type(o):
            self.fail(where, f"type {type(e).__name__} (eager) != {type(o).__name__} (optimized)")
        if isinstance(e, torch.Tensor):
            self.tensor(e, o, where, check_identity)
        elif isinstance(e, (list, tuple)):
            if len(e) != len(o):
                self.fail(where, f"length {len(e)} != {len(o)}: {e!r} vs {o!r}")
            for i, (a, b) in enumerate(zip(e, o)):
                self(a, b, f"{where}[{i}]", check_identity)
        elif isinstance(e, dict):
            if list(e) != list(o):
                self.fail(where, f"keys {list(e)} != {list(o)}")
            for k in e:
                self(e[k], o[k], f"{where}[{k!r}]", check_identity)
        elif isinstance(e, torch.nn.Module):
            self(dict(e.state_dict()), dict(o.state_dict()), f"{where}.state_dict()", False)
        elif isinstance(e, types.FunctionType):
            # Equal code, not the same object: torch 2.15's context decorators give each
            # decorated function a code object of its own (`code.replace(co_name=...)`).
            if e.__code__ != o.__code__ or getattr(e, "__wrapped__", e) is not e and (
                    getattr(e, "__wrapped__").__code__ != getattr(o, "__wrapped__", o).__code__):
                self.fail(where, f"function {e.__qualname__} != {o.__qualname__}")
        elif isinstance(e, types.MethodType):
            if e.__func__ is not o.__func__:
                self.fail(where, f"method {e.__qualname__} != {o.__qualname__}")
            self(e.__self__, o.__self__, f"{where}.__self__", check_identity)
        elif isinstance(e, float) and e != e:
            if o == o:
                self.fail(where, f"nan != {o!r}")
        elif hasattr(e, "__dict__") and not isinstance(e, (type, types.FunctionType, types.ModuleType,
                                                           types.MethodType)):
            self(dict(vars(e)), dict(vars(o)), f"{where}.__dict__", check_identity)
        elif e != o and e is not o:
            self.fail(where, f"{e!r} (eager) != {o!r} (optimized)")

    def tensor(self, e, o, where, check_identity):
        if (e.dtype, e.shape, e.device, e.requires_grad) != (o.dtype, o.shape, o.device, o.requires_grad):
            self.fail(where, f"tensor metadata {(e.dtype, tuple(e.shape), e.device, e.requires_grad)} != "
                             f"{(o.dtype, tuple(o.shape), o.device, o.requires_grad)}")
        torch.testing.assert_close(o, e, equal_nan=True, msg=lambda m: f"{self.what}{where}: {m}")
        if check_identity:
            # A view of an input must stay a view of the same input (writes through it show).
            src = self.eager_storages.get((_storage(e), e.device))
            if src is not None:
                target = _at(self.opt_root, src)
                if _storage(o) != _storage(target):
                    self.fail(where, f"eager returned a view of the input at {src!r}; the optimized "
                                     "result does not alias it")
                if e.stride() != o.stride() or e.storage_offset() != o.storage_offset():
                    self.fail(where, "a view of an input has different strides/offset")


def _clone(args, kwargs):
    return copy.deepcopy((list(args), dict(kwargs)))


def check(fn, *arg_sets, kind, graphs=None, backend=None, reason=None, fullgraph_check=True,
          same_entry=True):
    """Run `fn` eagerly and optimized on copies of each argument set and compare everything.

    kind: the cache entry kind every call must end up in ("graph", "eager", "constant",
      or "break": the function's own entries break; the entries of their resume functions
      may be of any kind, and the second call must trace nothing anywhere in that tree).
    graphs: expected number of backend calls over all argument sets, the graphs of resume
      functions and of callees included (default: one per entry for kind="graph", 0 for
      "eager" and "constant"; not checked for "break" unless given).
    reason: for kind="eager", the Unsupported category the fallback must have; for
      kind="break", the category of the decline every entry of the function broke at.
    same_entry: all argument sets must hit one cache entry (no recompile).
    Unless kind="eager" (or fullgraph_check=False), the first argument set is also run
      under fullgraph=True: what traced whole must trace whole there too, and what broke
      must raise Unsupported there (fullgraph=True never breaks), of category `reason`.
    Returns Info (backend, the optimized function, its entries).
    """
    assert kind in ("graph", "eager", "constant", "break"), kind
    backend = backend or CountingBackend()
    opt = minidynamo.optimize(backend=backend)(fn)
    for n, arg_set in enumerate(arg_sets):
        if not isinstance(arg_set, Args):
            arg_set = Args(*arg_set) if isinstance(arg_set, tuple) else Args(arg_set)
        eager_args, eager_kwargs = _clone(arg_set.args, arg_set.kwargs)
        expected = _run(fn, eager_args, eager_kwargs)
        if n == 0:
            first_exc = expected.exc
        for attempt in ("first call", "second call (cache hit)"):
            entries_before = len(opt.cache_entries())
            tree_before = (len(entry_tree(opt, backend)), getattr(backend, "calls", None))
            opt_args, opt_kwargs = _clone(arg_set.args, arg_set.kwargs)
            got = _run(opt, opt_args, opt_kwargs)
            what = f"{fn.__name__}, argument set {n}, {attempt}"
            if (expected.exc is None) != (got.exc is None):
                raise AssertionError(f"{what}: eager {'raised ' + repr(expected.exc) if expected.exc else 'returned'}"
                                     f", optimized {'raised ' + repr(got.exc) if got.exc else 'returned'}") \
                    from (got.exc or expected.exc)
            if expected.exc is not None:
                assert type(got.exc) is type(expected.exc), f"{what}: {got.exc!r} != {expected.exc!r}"
                assert str(got.exc) == str(expected.exc), f"{what}: {got.exc!r} != {expected.exc!r}"
            assert got.stdout == expected.stdout, f"{what}: printed {got.stdout!r}, eager {expected.stdout!r}"
            roots = (eager_args, eager_kwargs), (opt_args, opt_kwargs)
            if expected.exc is None:
                _Compare(*roots, f"{what}: result")(expected.result, got.result)
            _Compare(*roots, f"{what}: arguments after the call")(roots[0], roots[1], check_identity=False)
            entries = opt.cache_entries()
            if attempt.startswith("second"):
                assert len(entries) == entries_before, f"{what}: re-traced instead of hitting the cache"
                if kind == "break":
                    tree_after = (len(entry_tree(opt, backend)), getattr(backend, "calls", None))
                    assert tree_after == tree_before, (f"{what}: a resume function traced again "
                                                       f"(entries, graphs) {tree_before} -> {tree_after}")
            assert entries and entries[-1].kind == kind or any(e.kind == kind for e in entries), \
                f"{what}: entry kinds {[e.kind for e in entries]}, expected {kind!r}" + _why(entries[-1:])
    entries = opt.cache_entries()
    bad = [e for e in entries if e.kind != kind]
    assert not bad, f"entry kinds {[e.kind for e in entries]}, expected all {kind!r}" + _why(bad)
    if same_entry:
        assert len(entries) == 1, f"{len(entries)} cache entries, expected one: {opt.guard_failures()}"
    if graphs is None and kind != "break":
        graphs = len(entries) if kind == "graph" else 0
    if graphs is not None:
        assert backend.calls == graphs, (f"backend called {backend.calls} times, expected {graphs} "
                                         f"(entry kinds {[e.kind for e in entry_tree(opt, backend)]})")
    if kind == "eager":
        if reason is not None:
            assert entries[0].reason.category == reason, entries[0].reason
    elif kind == "break":
        for e in entries:
            assert e.break_reason is not None and e.reason is None, e
            assert e.resumes, f"a break entry without resume functions: {e.break_reason}"
            if reason is not None:
                assert e.break_reason.category == reason, e.break_reason
    if kind != "eager" and fullgraph_check:
        # What traced without a fallback must also trace under fullgraph=True; what broke
        # must be refused there, with the same category.
        strict = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(fn)
        first = arg_sets[0] if isinstance(arg_sets[0], Args) else (
            Args(*arg_sets[0]) if isinstance(arg_sets[0], tuple) else Args(arg_sets[0]))
        a, k = _clone(first.args, first.kwargs)
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                strict(*a, **k)
            except minidynamo.Unsupported as e:
                if kind != "break":
                    raise
                if reason is not None:
                    assert e.category == reason, f"fullgraph=True refused with {e}, the break was {reason!r}"
            except Exception as e:  # noqa: BLE001 - the user's own exception, already compared
                # A false torch._check that nothing in the traced code catches runs eagerly
                # under fullgraph=True (torch.compile raises it too): eager's exception.
                escaped = entries and all(isinstance(x.break_reason, Raised) and not x.break_reason.may_be_caught
                                          and x.break_reason.origin[0].code.co_name == "_check_with"
                                          for x in entries)
                if kind == "break" and not (escaped and type(first_exc) is type(e) and str(first_exc) == str(e)):
                    raise AssertionError("fullgraph=True ran a call that broke without Unsupported")
            else:
                if kind == "break":
                    raise AssertionError("fullgraph=True traced a call that broke: fullgraph never breaks")
    return Info(backend, opt, entries)


def _why(entries) -> str:
    return "".join(f"\n  fallback: {e.reason}" for e in entries if e.reason) + "".join(
        f"\n  break: {e.break_reason}" for e in entries if e.break_reason)


def check_fallback(fn, *arg_sets, reason=None, **kw):
    """A construct that must run eagerly as a whole call (it cannot break: inside a `with`
    block or a `try`, a frame with cell variables...); fullgraph=True must refuse it with
    `reason`."""
    info = check(fn, *arg_sets, kind="eager", reason=reason, **kw)
    first = arg_sets[0] if isinstance(arg_sets[0], Args) else (
        Args(*arg_sets[0]) if isinstance(arg_sets[0], tuple) else Args(arg_sets[0]))
    strict = minidynamo.optimize(backend=CountingBackend(), fullgraph=True)(fn)
    a, k = _clone(first.args, first.kwargs)
    with pytest.raises(minidynamo.Unsupported) as e:
        with contextlib.redirect_stdout(io.StringIO()):
            strict(*a, **k)
    if reason is not None:
        assert e.value.category == reason, e.value
    return info


# --- opcodes ------------------------------------------------------------------------
def opnames(fn, nested=True) -> set:
    """The opnames `fn` uses. 3.14's subscript (BINARY_OP with the [] operator, which
    replaced BINARY_SUBSCR) also counts as "BINARY_OP []", and its constant slices
    (x[1:3] loads a slice object) as "LOAD_CONST slice"."""
    code = fn.__code__ if hasattr(fn, "__code__") else fn
    names = set()
    todo = [code]
    while todo:
        c = todo.pop()
        for i in dis.get_instructions(c):
            names.add(i.opname)
            if i.opname == "BINARY_OP" and i.argrepr == "[]":
                names.add("BINARY_OP []")
            elif i.opname == "LOAD_CONST" and isinstance(i.argval, slice):
                names.add("LOAD_CONST slice")
        if nested:
            todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def assert_uses(fn, *required, nested=True):
    """Each requirement is an opname, or a tuple of alternatives (one must appear): the
    test really exercises that opcode on the running Python (STYLE.md point 7)."""
    names = opnames(fn, nested)
    for req in required:
        alts = (req,) if isinstance(req, str) else tuple(req)
        assert names & set(alts), (f"{getattr(fn, '__name__', fn)} uses none of {alts} on Python "
                                   f"{PY[0]}.{PY[1]}; it has {sorted(names)}")


def by_version(**table):
    """by_version(py310=..., py311=..., ..., py314=...): the newest key <= running."""
    best = None
    for key in sorted(table):
        major, minor = int(key[2]), int(key[3:])
        if (major, minor) <= PY:
            best = table[key]
    return best


def same(got, expected, where="result"):
    """Equal values of the same type; tensors also of the same dtype, shape, device and
    requires_grad; containers item by item."""
    assert type(got) is type(expected), f"{where}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert (got.dtype, got.shape, got.device, got.requires_grad) == \
            (expected.dtype, expected.shape, expected.device, expected.requires_grad), where
        if expected.device.type != "meta":
            torch.testing.assert_close(got.detach(), expected.detach(), equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), where
        for k in expected:
            same(got[k], expected[k], f"{where}[{k!r}]")
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def same_outcome(fn, opt, *args, **kwargs):
    """The plain call and the optimized one, now: both raise the same exception type and
    message (returned), or both return the same result (`same`; the optimized one returned)."""
    try:
        expected = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as info:
            opt(*args, **kwargs)
        assert str(info.value) == str(e)
        return info.value
    got = opt(*args, **kwargs)
    same(got, expected)
    return got
