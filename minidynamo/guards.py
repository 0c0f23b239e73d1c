"""Guards: the assumptions a trace made, compiled into one check function per cache entry.

Each guard is a Python boolean expression over a `Source`. `GuardSet.compile()` joins
them, cheapest first, into the source text of one function with the user's own signature
(so arguments bind exactly as in the original call), `exec`s it once, and keeps the text:
it is what `explain()` shows and what a failure is explained against.
"""
from __future__ import annotations

import math
import re
import types
from dataclasses import dataclass, field

import torch

from .sources import (LocalSource, Namespace, ObjectSource, ReadBeforeWrites, Source, TensorsSource,
                      TermsSource)

# Cost classes: structural checks run before the tensor checks they protect.
_COST = {"GLOBAL_STATE": -1, "TYPE_MATCH": 0, "ID_MATCH": 0, "EQUALS_MATCH": 0, "LEN_MATCH": 0,
         "DICT_KEYS": 0, "NO_HOOKS": 0, "TENSOR_MATCH": 1, "ALIAS_MATCH": 1, "NOT_IN_DICT": 0,
         "HASATTR": 0, "SHAPE_ENV": 2, "TENSOR_ALIASING": 2}


def _single_gpu() -> bool:
    """One visible CUDA device: `is_cuda` then pins the device (the count cannot change
    once CUDA is initialised, and a CUDA tensor exists, so it is)."""
    return torch.cuda.device_count() == 1


@dataclass(eq=False)
class Guard:
    kind: str
    source: Source
    expected: object = None
    # Extra per-kind data (tensor metadata) kept for explaining failures.
    meta: dict = field(default_factory=dict)

    def code(self, ns: Namespace) -> str:
        kind = self.kind
        if kind == "GLOBAL_STATE":  # expected: the globalstate.GlobalState traced under
            return self.expected.code(ns)
        if kind == "SHAPE_ENV":  # expected: the shape environment's expression (dynamic.py)
            from .dynamic import render
            return render(self.expected, self.meta["inputs"], ns)
        if kind == "TENSOR_ALIASING":  # expected: the aliasing.AliasingCheck of the traced inputs
            return f"{ns.bind(self.expected, 'check_aliasing')}({self.source.ref(ns)})"
        e = self.source.ref(ns)
        if kind == "ID_MATCH":
            return f"{e} is {ns.bind(self.expected, 'id')}"
        if kind == "TYPE_MATCH":
            return f"type({e}) is {ns.bind(self.expected, 'type')}"
        if kind == "EQUALS_MATCH":
            v = self.expected
            t = ns.bind(self.meta.get("type", type(v)), "type")  # meta: a set guarded by a frozen copy
            if v is None or type(v) is bool:
                return f"{e} is {v!r}"
            exact = type(v) in (int, str, bytes) or (type(v) is float and v == v and abs(v) != float("inf"))
            lit = repr(v) if exact else ns.bind(v, "const")
            if _unequal_to_itself(v):  # NaN (float, complex, NumPy scalars) never equals itself
                return f"type({e}) is {t} and {e} != {e}"
            if type(v) is float and v == 0.0:  # 0.0 == -0.0, but copysign/1/x tell them apart
                sign = ns.bind(math.copysign, "copysign")
                return f"type({e}) is {t} and {e} == 0.0 and {sign}(1.0, {e}) == {math.copysign(1.0, v)!r}"
            return f"type({e}) is {t} and {e} == {lit}"
        if kind == "LEN_MATCH":
            t = ns.bind(self.meta["type"], "type")
            return f"type({e}) is {t} and len({e}) == {self.expected}"
        if kind == "DICT_KEYS":
            t = ns.bind(self.meta["type"], "type")
            keys = tuple(self.expected)
            literal = all(type(k) in (int, str, bool, bytes) or k is None for k in keys)
            # Keys that do not read back from their repr (dtypes, enums) are bound objects.
            return f"type({e}) is {t} and tuple({e}) == {repr(keys) if literal else ns.bind(keys, 'keys')}"
        if kind == "HASATTR":  # expected None: an instance attribute `attr`, whatever its value;
            attr = self.meta["attr"]  # True/False: whether hasattr() (a class's, through its MRO)
            if self.expected is None:
                return f"{attr!r} in {e}.__dict__"
            if self.expected is False and self.meta.get("module"):
                # Module.__getattr__ raising costs microseconds: ask its tables and class instead
                tables = " and ".join(f"{attr!r} not in {e}.{t}" for t in ("__dict__", "_parameters", "_buffers",
                                                                             "_modules"))
                return f"{tables} and not {ns.bind(hasattr, 'hasattr')}({e}.__class__, {attr!r})"
            return f"{'' if self.expected else 'not '}{ns.bind(hasattr, 'hasattr')}({e}, {attr!r})"
        if kind == "NOT_IN_DICT":  # no instance attribute `attr` (None: none at all)
            attr = self.meta["attr"]
            return f"not {e}.__dict__" if attr is None else f"{attr!r} not in {e}.__dict__"
        if kind == "NO_HOOKS":  # every hook dict named is empty
            return "not (" + " or ".join(f"{e}.{a}" for a in self.meta["attrs"]) + ")"
        if kind == "ALIAS_MATCH":  # two sources are (or are not) the same object
            return f"{e} {'is' if self.expected else 'is not'} {self.meta['other'].ref(ns)}"
        if kind == "TENSOR_MATCH":
            m = self.meta
            device = m["device"]
            # `x.is_cpu` pins device type cpu, the only cpu device; `is_cuda` and the index
            # pin a GPU (each a fraction of the cost of building x.device and comparing it).
            if device.type == "cpu":
                on_device = f"{e}.is_cpu"
            elif device.type == "cuda" and device.index is not None:
                on_device = f"{e}.is_cuda" if _single_gpu() else \
                    f"{e}.is_cuda and {e}.get_device() == {device.index}"
            else:
                on_device = f"{e}.device == {ns.bind(device, 'device')}"
            parts = [
                f"type({e}) is {ns.bind(m['type'], 'type')}",
                f"{e}.dtype is {ns.bind(m['dtype'], 'dtype')}",
                on_device,
                *_layout_checks(e, m["shape"], m["stride"]),
                f"{e}.requires_grad is {m['requires_grad']!r}",
            ]
            if m.get("c_check") is None:  # the C check's dispatch keys tell inference tensors apart
                parts.append(f"{e}.is_inference() is {m.get('inference', False)!r}")
            return " and ".join(parts)
        raise AssertionError(kind)

    def check_code(self, ns: Namespace) -> str:
        """The expression the entry function runs: `code()`, or for a tensor torch's C check
        (stricter only in the dispatch keys; `mismatch` names those too)."""
        if self.kind == "GLOBAL_STATE":
            return self.expected.check_code(ns)
        c_check = self.meta.get("c_check") if self.kind == "TENSOR_MATCH" else None
        if c_check is None:
            return self.code(ns)
        e = self.source.ref(ns)
        return f"{ns.bind(c_check, 'check_' + e if e.isidentifier() else 'tensor_check')}({e})"

    def explain(self, actual) -> str:
        """Plain words for why `actual` fails this guard."""
        return self.mismatch(actual)[0]

    def mismatch(self, actual) -> tuple[str, str, str]:
        """(plain words, expected, actual) for why `actual` fails this guard."""
        name = self.source.name()
        kind = self.kind
        if kind == "GLOBAL_STATE":
            return self.expected.mismatch(actual)
        if kind == "TENSOR_MATCH":
            m = self.meta
            tname = _quoted(name)
            if type(actual) is not m["type"]:
                return _says(f"tensor {tname} type mismatch", m["type"].__name__, type(actual).__name__)
            if actual.dtype is not m["dtype"]:
                return _says(f"tensor {tname} dtype mismatch", m["dtype"], actual.dtype)
            if actual.device != m["device"]:
                return _says(f"tensor {tname} device mismatch", m["device"], actual.device)
            if actual.dim() != len(m["shape"]):
                return _says(f"tensor {tname} rank mismatch", len(m["shape"]), actual.dim())
            for d, (exp, act) in enumerate(zip(m["shape"], actual.shape)):
                if exp is not None and exp != act:
                    return _says(f"tensor {tname} size mismatch at dim {d}", exp, act)
            for d, (exp, act) in enumerate(zip(m["stride"], actual.stride())):
                if exp is not None and exp != act:
                    return _says(f"tensor {tname} stride mismatch at dim {d}", exp, act)
            if actual.requires_grad != m["requires_grad"]:
                return _says(f"tensor {tname} requires_grad mismatch", m["requires_grad"], actual.requires_grad)
            if actual.is_inference() != m.get("inference", False):
                return _says(f"tensor {tname} is_inference mismatch", m.get("inference", False), actual.is_inference())
            return _says(f"tensor {tname} dispatch keys differ from the traced call's (inference_mode, "
                         "a conj/neg view or a functorch transform)", *_dispatch_keys(m["c_check"], actual))
        if kind == "SHAPE_ENV":
            from .dynamic import render
            terms = ", ".join(f"{n} = {v}" for n, v in zip(self.meta["terms"], actual))
            return (f"{terms}: the entry needs {render(self.expected, self.meta['inputs'])}"
                    f"{self.meta.get('why', '')}", render(self.expected, self.meta["inputs"]), terms)
        if kind == "HASATTR":
            attr = self.meta["attr"]
            if self.expected is False:
                return (f"{name} now has an attribute {attr!r}", f"no attribute {attr!r}", f"attribute {attr!r}")
            return (f"{name} no longer has an attribute {attr!r}", f"attribute {attr!r}", f"no attribute {attr!r}")
        if kind == "TENSOR_ALIASING":  # actual: the tuple of tensors (source_reader reads `(a, b, c)`)
            why = self.expected.first_difference(actual) if isinstance(actual, tuple) else None
            return (f"tensor inputs alias differently than when traced: {why or 'unknown'}",
                    self.expected.describe(), why or "")
        if kind == "NO_HOOKS":
            added = [f"{a.strip('_').replace('_', ' ')} ({len(getattr(actual, a))})"
                     for a in self.meta["attrs"] if getattr(actual, a, None)]
            return (f"{name} now has hooks: {', '.join(added)} (traced anew: forward hooks go into the "
                    "graph, backward hooks break it)",
                    "no hooks", ", ".join(added))
        if kind == "NOT_IN_DICT":
            attr = self.meta["attr"]
            if attr is None:
                now = sorted(map(str, getattr(actual, "__dict__", {})))
                return (f"{name} now has instance attributes {_short(now)}", "no instance attributes",
                        f"instance attributes {_short(now)}")
            shadows = " (shadowing its class's)" if hasattr(type(actual), attr) else ""
            return (f"{name} now has an instance attribute {attr!r}{shadows}",
                    f"no instance attribute {attr!r}", f"instance attribute {attr!r}")
        if kind == "ALIAS_MATCH":
            same, other = "the same object", "different objects"
            was, now = (same, other) if self.expected else (other, same)
            return (f"{name} and {self.meta['other'].name()} were {was} when traced, now {now}",
                    was, now)
        if kind == "ID_MATCH":
            kernel = _kernel_name(self.expected)
            if kernel is not None:
                return (f"kernel {kernel!r} is a different object ({name} was replaced)",
                        describe_object(self.expected), describe_object(actual))
            return _says(f"{name} is a different object", describe_object(self.expected),
                         describe_object(actual))
        if kind == "TYPE_MATCH":
            return _says(f"{name} type changed", self.expected.__name__, type(actual).__name__)
        if kind == "EQUALS_MATCH":
            exp, act = self.expected, actual
            if type(exp) is not type(act):  # 2 and 2.0, True and 1: the types tell them apart
                return _says(f"{name} changed", f"{exp!r} ({type(exp).__name__})",
                             f"{_short(act)} ({type(act).__name__})")
            return _says(f"{name} changed", repr(exp), _short(act))
        if kind in ("LEN_MATCH", "DICT_KEYS"):
            t = self.meta["type"]
            if type(actual) is not t:
                return _says(f"{name} type changed", t.__name__, type(actual).__name__)
            if kind == "LEN_MATCH":
                return _says(f"{name} length changed", self.expected, len(actual))
            return _says(f"{name} keys changed", list(self.expected), _short(list(actual)))
        return f"{name}: guard {kind} failed", "", _short(actual)

    def describe(self) -> str:
        """What the guard requires, in words (`Tensor float32 cpu (8, 4)`, `== 2`)."""
        kind = self.kind
        if kind == "GLOBAL_STATE":
            return self.expected.describe()
        if kind == "TENSOR_MATCH":
            m = self.meta
            t = "tensor " if m["type"] is torch.Tensor else m["type"].__name__ + " "
            dtype = str(m["dtype"]).replace("torch.", "")
            symbols = m.get("symbols") or {}
            shape = "(" + ", ".join(str(symbols.get(d, s)) for d, s in enumerate(m["shape"])) + \
                ("," if len(m["shape"]) == 1 else "") + ")"
            if None in m["stride"] or None in m["shape"]:
                layout = "symbolic sizes"
            else:
                layout = "contiguous" if m["stride"] == contiguous_strides(m["shape"]) else f"stride {m['stride']}"
            grad = ", requires_grad" if m["requires_grad"] else ""
            return f"{t}{dtype} {m['device']} {shape} {layout}{grad}"
        if kind == "SHAPE_ENV":
            from .dynamic import render
            return render(self.expected, self.meta["inputs"])
        if kind == "EQUALS_MATCH":
            return f"== {self.expected!r} ({type(self.expected).__name__})"
        if kind == "ID_MATCH":
            return f"is {describe_object(self.expected)}"
        if kind == "TYPE_MATCH":
            symbol = self.meta.get("symbol")  # an int argument traced symbolically
            return f"type is {self.expected.__qualname__}" + (f" (symbolic: {symbol})" if symbol else "")
        if kind == "LEN_MATCH":
            return f"{self.meta['type'].__name__} of length {self.expected}"
        if kind == "DICT_KEYS":
            return f"{self.meta['type'].__name__} with keys {list(self.expected)}"
        if kind == "TENSOR_ALIASING":
            return self.expected.describe()
        if kind == "HASATTR":
            return f"{'no' if self.expected is False else 'has'} attribute {self.meta['attr']!r}"
        if kind == "NOT_IN_DICT":
            attr = self.meta["attr"]
            return "no instance attributes" if attr is None else f"no instance attribute {attr!r}"
        if kind == "NO_HOOKS":
            return "no hooks"
        if kind == "ALIAS_MATCH":
            return f"{'is' if self.expected else 'is not'} {self.meta['other'].name()}"
        return kind

    def __repr__(self):
        return f"Guard({self.kind}, {self.source.name()})"


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _layout_checks(e: str, shape: tuple, stride: tuple) -> list[str]:
    """Sizes and strides; with symbolic dimensions (None) only the static ones, one by
    one (the shape environment's guards relate the symbolic ones)."""
    if None not in shape and None not in stride:
        return [f"{e}.shape == {shape!r}", _strides_check(e, shape, stride)]
    checks = [f"{e}.dim() == {len(shape)}"]
    checks += [f"{e}.size({d}) == {s}" for d, s in enumerate(shape) if s is not None]
    checks += [f"{e}.stride({d}) == {s}" for d, s in enumerate(stride) if s is not None]
    return checks


def _strides_check(e: str, shape: tuple, stride: tuple) -> str:
    """`x.is_contiguous()` where, given the shape checked just before it, that holds
    exactly when the strides are the expected ones: contiguous strides and every size
    above 1 (contiguity ignores the stride of a size-1 dim; any size-0 dim makes every
    stride contiguous). Otherwise the strides themselves."""
    if stride == contiguous_strides(shape) and all(size > 1 for size in shape):
        return f"{e}.is_contiguous()"
    return f"{e}.stride() == {stride!r}"


def _dispatch_keys(c_check, actual) -> tuple[str, str]:
    """(expected, actual) key sets, from the C check's own verbose answer."""
    said = c_check.__self__.check_verbose(actual, tensor_check_names=["x"]) if c_check is not None else ""
    found = re.search(r"expected (.*), actual (.*)$", said if isinstance(said, str) else "")
    return found.groups() if found else ("the traced call's", "others")


def _kernel_name(obj) -> str | None:
    if not (type(obj).__module__ or "").startswith("triton"):
        return None
    from triton.runtime.jit import KernelInterface
    if not isinstance(obj, KernelInterface):  # triton.cdiv and other helpers are not kernels
        return None
    from .triton.capture import kernel_name
    try:
        return kernel_name(obj)
    except Exception:
        return None


def _says(what: str, expected, actual) -> tuple[str, str, str]:
    expected, actual = str(expected), str(actual)
    return f"{what}: expected {expected}, actual {actual}", expected, actual


def _quoted(name: str) -> str:
    """`'x'` for a plain name; names that quote themselves (`global 'W'`) as they are."""
    return name if "'" in name else repr(name)


def describe_object(obj) -> str:
    """`function 'g'`, `module 'torch'`, `kernel 'add_kernel'`, `class 'Foo'`, or a short repr."""
    kernel = _kernel_name(obj)
    if kernel is not None:
        return f"kernel {kernel!r}"
    if isinstance(obj, types.ModuleType):
        return f"module {obj.__name__!r}"
    if isinstance(obj, type):
        return f"class {obj.__qualname__!r}"
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return f"function {getattr(obj, '__qualname__', obj.__name__)!r}"
    return f"{type(obj).__name__} {_short(obj)}"


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def tensor_guard(source: Source, t: torch.Tensor, fake=None) -> Guard:
    """TENSOR_MATCH of input `t`; with a `fake` of symbolic dimensions, those sizes and
    the strides that depend on them are left to the shape environment's guards."""
    shape, stride, symbols = tuple(t.shape), tuple(t.stride()), {}
    if fake is not None:
        from .dynamic import is_symbolic, static_or_none
        shape, stride = static_or_none(fake.shape), static_or_none(fake.stride())
        symbols = {d: str(s) for d, s in enumerate(fake.shape) if is_symbolic(s)}
    meta = dict(type=type(t), dtype=t.dtype, device=t.device, shape=shape, stride=stride,
                requires_grad=t.requires_grad, c_check=c_tensor_check(t, shape, stride), symbols=symbols,
                inference=t.is_inference())
    return Guard("TENSOR_MATCH", source, None, meta)


def shape_guard(text: str, inputs: list, terms: list, why: str = "") -> Guard:
    """One guard of the shape environment: `text` with input tokens (dynamic.render);
    `terms`, the sizes it reads, by name and expression (what a failure shows)."""
    from .sources import TermsSource
    return Guard("SHAPE_ENV", TermsSource(tuple(t for t, _ in terms), tuple(e for _, e in terms), tuple(inputs)), text,
                 {"inputs": inputs, "terms": [t for t, _ in terms], "why": why})


def c_tensor_check(t: torch.Tensor, shape=None, stride=None):
    """torch's C check of one tensor (`TensorGuards(t).check`, what torch.compile's guards
    were built on; kept as one bound method so every `check_code` binds the same name):
    type, dtype, device, sizes, strides, requires_grad — and the dispatch keys as the
    calling thread sees them, so an inference_mode call or a conj/neg view fails it too.
    A third of the Python expression's cost. None where unavailable or switched off
    (`config.c_tensor_guards`): the Python expression checks instead."""
    from .config import config
    if not config.c_tensor_guards or not _c_checks_work():
        return None
    try:
        return _TensorGuards(t, dynamic_dims_sizes=[list(t.shape if shape is None else shape)],
                             dynamic_dims_strides=[list(t.stride() if stride is None else stride)]).check
    except Exception:  # a layout without strides, or a tensor the check does not take
        return None


_TensorGuards = None
_c_checks_ok: bool | None = None


def _c_checks_work() -> bool:
    """The internal API exists and answers as the Python expression does (checked once)."""
    global _c_checks_ok, _TensorGuards
    if _c_checks_ok is None:
        _c_checks_ok = False
        try:
            from torch._C._dynamo.guards import TensorGuards
            x = torch.zeros(2, 3)
            g = TensorGuards(x, dynamic_dims_sizes=[[2, 3]], dynamic_dims_strides=[[3, 1]])
            others = [torch.zeros(3, 2), torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2).t(),
                      torch.zeros(2, 3, requires_grad=True), torch.nn.Parameter(torch.zeros(2, 3)), 2, None]
            if g.check(x) is True and g.check(torch.ones(2, 3)) is True and \
                    not any(g.check(o) for o in others):
                _TensorGuards, _c_checks_ok = TensorGuards, True
        except Exception:
            pass
    return _c_checks_ok


class GuardSet:
    """The guards of one trace; deduplicated by (kind, source)."""

    def __init__(self):
        self._guards: dict = {}
        self._plan: dict | None = None  # source -> local, once planned (plan_hoisting)

    def add(self, guard: Guard) -> None:
        key = (guard.kind, guard.source, guard.meta.get("other"), guard.meta.get("attr"),
               guard.meta.get("attrs"), guard.expected if guard.kind == "SHAPE_ENV" else None)
        if key not in self._guards:
            self._guards[key] = guard

    def __iter__(self):
        return iter(self.ordered())

    def __len__(self):
        return len(self._guards)

    def ordered(self) -> list[Guard]:
        # Stable: a container's structural guard keeps its place before guards on its items.
        return sorted(self._guards.values(), key=lambda g: (_COST[g.kind], g.source.depth))

    def expressions(self, ns: Namespace) -> list[str]:
        """Python expressions, one per guard: shown to users, and what a failure is explained by."""
        return [g.code(ns) for g in self.ordered()]

    def plan_hoisting(self, ns: Namespace, also=()) -> dict:
        """Name the values to fetch once per call (see check_expressions): those several
        guards read, or a guard and one of `also` (the graph's inputs, a model's parameters
        reached through the same modules), each given a local here. The entry's body may
        read them (`ns.hoisted`) once the guards have passed."""
        guards = self.ordered()
        counts: dict = {}
        for reads in [_reads(g) for g in guards] + [_chain(s) for s in also]:
            for s in set(reads):
                counts[s] = counts.get(s, 0) + 1
        read_by_guards = {s for g in guards for s in _reads(g)}
        self._plan = {}
        for g in guards:
            for s in _reads(g):
                if counts[s] > 1 and s not in self._plan and not isinstance(s, _PLAIN_SOURCES) \
                        and s in read_by_guards:
                    self._plan[s] = ns.local("p")
        return dict(self._plan)

    def check_expressions(self, ns: Namespace) -> list[str]:
        """What the entry function runs, in order: one check per guard (C checks for tensors
        where available), and before the first guard reading a value that several guards
        read (`model.layers[0]`, reached through Module.__getattr__ at each step), an
        assignment of it to a local, `(_md_p3 := ...) is _md_p3`, which later checks read:
        each shared prefix is fetched once per call, where it first was."""
        if getattr(self, "_plan", None) is None:
            self.plan_hoisting(ns)
        plan = self._plan
        out: list[str] = []
        ns.hoisted = assigned = {}
        try:
            for g in self.ordered():
                for prefix in _reads(g):
                    name = plan.get(prefix)
                    if name is not None and prefix not in assigned:
                        out.append(f"({name} := {prefix.ref(ns)}) is {name}")
                        assigned[prefix] = name
                out.append(g.check_code(ns))
        finally:
            ns.hoisted = {}
        return out


def _chain(source) -> list:
    """`source` and the sources it is read through, outermost first (`m`, `m.layers`, ...)."""
    out = []
    while isinstance(source, Source):
        out.append(source)
        source = getattr(source, "base", None)
    return out[::-1]


# Sources whose expression is a name already (or a tuple of others): nothing to hoist.
_PLAIN_SOURCES = (LocalSource, ObjectSource, ReadBeforeWrites, TensorsSource, TermsSource)


def _reads(guard: Guard) -> list:
    """The sources a guard's check reads, each after the ones it is read through."""
    roots = [guard.source, guard.meta.get("other")]
    if isinstance(guard.source, TensorsSource):
        roots = [*guard.source.sources, guard.meta.get("other")]
    return [s for root in roots if isinstance(root, Source) for s in _chain(root)]


def _unequal_to_itself(v) -> bool:
    """A NaN of any scalar type: `v != v`."""
    if isinstance(v, (tuple, frozenset, str, bytes)):
        return False
    try:
        return bool(v != v)
    except Exception:  # a value whose != is not a truth value
        return False
