"""Guard kinds: one class per kind, holding all that kind means.

A guard is one assumption of a trace, a Python boolean expression over a `Source`.
`Guard(name, source, expected, meta)` builds the kind's class; `g.kind` is its name. Each
kind says, in one place: its cost class (`cost`: cheap structural checks run before the
tensor checks they protect), the expression it renders (`code`; `check_code` where the
entry runs another, torch's C tensor check), why a value fails it in plain words
(`mismatch`), what it requires (`describe`), what makes two guards one (`key`), which
sources its check reads (`reads`, for hoisting) and, for the past-the-limit dispatcher,
the values that identify a call when it keeps failing (`call_key`, cache.py).
Adding a kind is one subclass of `Guard`, named as the kind.

| kind | cost | checks | expected / meta |
|---|---|---|---|
| GLOBAL_STATE | -1 | process-wide torch state | the globalstate.GlobalState traced under |
| TYPE_MATCH | 0 | exact type | the type; meta symbol: an int traced symbolically |
| ID_MATCH | 0 | identity (`is`) | the object |
| EQUALS_MATCH | 0 | exact type and value | the value; meta type: a set's, guarded by a frozen copy |
| LEN_MATCH | 0 | exact type and length | the length; meta type |
| DICT_KEYS | 0 | exact type and keys in order | the keys; meta type |
| NO_HOOKS | 0 | hook dicts empty | meta attrs: the dicts' names |
| NOT_IN_DICT | 0 | no instance attribute | meta attr (None: none at all) |
| NOT_IN_GLOBALS | 0 | builtins' names not shadowed by globals | meta names: the set of names; source: the globals dict |
| HASATTR | 0 | has (not) an attribute | None: in `__dict__`; True/False: hasattr(); meta attr, module |
| TENSOR_MATCH | 1 | tensor type, dtype, device, layout, requires_grad | meta: the tensor's metadata, c_check |
| ALIAS_MATCH | 1 | two sources (not) one object | True/False; meta other: the other source |
| SHAPE_ENV | 2 | a shape environment's guard | its text (dynamic.render); meta inputs, terms, why |
| TENSOR_ALIASING | 2 | tensor inputs alias as traced | the aliasing.AliasingCheck |
"""
from __future__ import annotations

import math
import types
from typing import ClassVar

import torch

from .dynamic import render
from .guard_values import holds_type_blind_items, is_immutable, keys_are, typed_key, unequal_to_itself
from .tensor_checks import contiguous_strides, dispatch_keys, layout_checks, single_gpu
from .sources import Namespace, Source
from .triton.kernels import kernel_name

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement

KINDS: dict[str, type[Guard]] = {}  # kind name -> its class


class Guard:
    """One guard; `Guard("ID_MATCH", source, expected, meta)` builds an `ID_MATCH`."""
    kind: ClassVar[str] = ""  # the kind's name: its class's name
    cost: ClassVar[int] = 0  # cost class: lower runs first
    # What identifies a call for the past-the-limit dispatcher when this guard keeps
    # failing: the values it reads (`{}`: the guarded expression); None: not used there.
    call_key: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        KINDS[cls.kind] = cls

    def __new__(cls, kind=None, *args, **kwargs):
        if cls is Guard:
            cls = KINDS.get(kind)
            if cls is None:
                raise ValueError(f"unknown guard kind {kind!r} (known: {', '.join(KINDS)})")
        return object.__new__(cls)

    def __init__(self, kind: str, source: Source, expected: object = None, meta: dict | None = None):
        if kind != self.kind:
            raise ValueError(f"a {self.kind} guard built as {kind!r}")
        self.source = source
        self.expected = expected
        # Extra per-kind data (tensor metadata) kept for explaining failures.
        self.meta = {} if meta is None else meta

    def code(self, ns: Namespace) -> str:
        """The Python expression, shown to users and what a failure is explained against."""
        raise NotImplementedError(self.kind)

    def check_code(self, ns: Namespace) -> str:
        """The expression the entry function runs: `code()` unless the kind says otherwise."""
        return self.code(ns)

    def mismatch(self, actual, naming=None) -> tuple[str, str, str]:
        """(plain words, expected, actual) for why `actual` fails this guard; sources named
        with `naming` (user_names.Naming: the user's terms), as Source.name."""
        return f"{self.source.name(naming)}: guard {self.kind} failed", "", _short(actual)

    def explain(self, actual, naming=None) -> str:
        """Plain words for why `actual` fails this guard."""
        return self.mismatch(actual, naming)[0]

    def describe(self, naming=None) -> str:
        """What the guard requires, in words (`Tensor float32 cpu (8, 4)`, `== 2`)."""
        return self.kind

    def key(self) -> tuple:
        """Guards of one key are one guard (GuardSet keeps the first)."""
        return (self.kind, self.source)

    def reads(self) -> list:
        """The sources the check reads, each after the ones it is read through (kept:
        the entry's planning asks several times)."""
        reads = self.__dict__.get("_reads")
        if reads is None:
            reads = self._reads = chain(self.source)
        return reads

    def fixed_type(self) -> type | None:
        """The exact type this guard requires of its source's value, if it requires one."""
        return None

    def snapshot_role(self, module: bool) -> str | None:
        """What the fast tier makes of this guard where its source's value is fixed by a
        snapshot (guard_snapshot.py; `module`: the value was guarded as a plain module):
        "implied" (holds while the value is the same object), "absent" / "absent from
        tables" / "hooks" (its dict reads are in the snapshot), "alias" (implied where
        both sources are in the snapshot), "tensor" (the snapshot's one C tensor check),
        or None: it runs as it is."""
        return None

    def __repr__(self):
        return f"Guard({self.kind}, {self.source.name()})"


class GLOBAL_STATE(Guard):
    """expected: the globalstate.GlobalState traced under, which renders and explains itself."""
    cost = -1

    def code(self, ns):
        return self.expected.code(ns)

    def check_code(self, ns):
        return self.expected.check_code(ns)

    def mismatch(self, actual, naming=None):
        return self.expected.mismatch(actual)

    def describe(self, naming=None):
        return self.expected.describe()


class ID_MATCH(Guard):
    call_key = ("id({})",)

    def snapshot_role(self, module):
        return "implied"

    def code(self, ns):
        return f"{self.source.ref(ns)} is {ns.bind(self.expected, 'id')}"

    def mismatch(self, actual, naming=None):
        name = self.source.name(naming)
        kernel = _kernel_name(self.expected)
        if kernel is not None:
            return (f"kernel {kernel!r} is a different object ({name} was replaced)",
                    describe_object(self.expected), describe_object(actual))
        return _says(f"{name} is a different object", describe_object(self.expected), describe_object(actual))

    def describe(self, naming=None):
        return f"is {describe_object(self.expected)}"


class TYPE_MATCH(Guard):
    call_key = ("type({})",)

    def fixed_type(self):
        return self.expected if isinstance(self.expected, type) else None

    def snapshot_role(self, module):
        # A snapshot checks its modules' classes; other objects of a class defined in
        # Python may have their __class__ assigned, built-in types' instances may not.
        fixed = module or not (self.expected.__flags__ & _HEAPTYPE)
        return "implied" if fixed else None

    def code(self, ns):
        return f"type({self.source.ref(ns)}) is {ns.bind(self.expected, 'type')}"

    def mismatch(self, actual, naming=None):
        return _says(f"{self.source.name(naming)} type changed", self.expected.__name__, type(actual).__name__)

    def describe(self, naming=None):
        symbol = self.meta.get("symbol")  # an int argument traced symbolically
        return f"type is {self.expected.__qualname__}" + (f" (symbolic: {symbol})" if symbol else "")


class EQUALS_MATCH(Guard):
    call_key = ("type({})", "{}")

    def snapshot_role(self, module):
        same_type = self.meta.get("type", type(self.expected)) is type(self.expected)
        return "implied" if same_type and is_immutable(self.expected) else None

    def code(self, ns):
        e, v = self.source.ref(ns), self.expected
        t = ns.bind(self.meta.get("type", type(v)), "type")  # meta: a set guarded by a frozen copy
        if v is None or type(v) is bool:
            return f"{e} is {v!r}"
        exact = type(v) in (int, str, bytes) or (type(v) is float and v == v and abs(v) != float("inf"))
        lit = repr(v) if exact else ns.bind(v, "const")
        if unequal_to_itself(v):  # NaN (float, complex, NumPy scalars) never equals itself
            return f"type({e}) is {t} and {e} != {e}"
        if type(v) is float and v == 0.0:  # 0.0 == -0.0, but copysign/1/x tell them apart
            sign = ns.bind(math.copysign, "copysign")
            return f"type({e}) is {t} and {e} == 0.0 and {sign}(1.0, {e}) == {math.copysign(1.0, v)!r}"
        if type(v) in (tuple, list, frozenset, set, dict) and holds_type_blind_items(v):  # (1,) == (True,)
            return f"type({e}) is {t} and {e} == {lit} and {ns.bind(typed_key, 'typed_key')}({e}) == " \
                   f"{ns.bind(typed_key(v), 'typed')}"
        return f"type({e}) is {t} and {e} == {lit}"

    def mismatch(self, actual, naming=None):
        name, exp, act = self.source.name(naming), self.expected, actual
        if type(exp) is not type(act):  # 2 and 2.0, True and 1: the types tell them apart
            return _says(f"{name} changed", f"{exp!r} ({type(exp).__name__})",
                         f"{_short(act)} ({type(act).__name__})")
        return _says(f"{name} changed", repr(exp), _short(act))

    def describe(self, naming=None):
        return f"== {self.expected!r} ({type(self.expected).__name__})"


class LEN_MATCH(Guard):
    call_key = ("type({})", "len({})")

    def fixed_type(self):
        return self.meta["type"]

    def snapshot_role(self, module):
        return "implied" if self.meta["type"] in (tuple, str, bytes, frozenset, range) else None

    def code(self, ns):
        e = self.source.ref(ns)
        return f"type({e}) is {ns.bind(self.meta['type'], 'type')} and len({e}) == {self.expected}"

    def mismatch(self, actual, naming=None):
        t, name = self.meta["type"], self.source.name(naming)
        if type(actual) is not t:
            return _says(f"{name} type changed", t.__name__, type(actual).__name__)
        return _says(f"{name} length changed", self.expected, len(actual))

    def describe(self, naming=None):
        return f"{self.meta['type'].__name__} of length {self.expected}"


class DICT_KEYS(Guard):
    call_key = ("type({})", "tuple({})")

    def fixed_type(self):
        return self.meta["type"]

    def code(self, ns):
        e = self.source.ref(ns)
        t = ns.bind(self.meta["type"], "type")
        keys = tuple(self.expected)
        by_id = self.meta.get("by_id")
        if by_id:  # keys hashed by identity (tensors, modules): those very objects
            return f"type({e}) is {t} and {ns.bind(keys_are, 'keys_are')}({e}, {ns.bind(keys, 'keys')}, {by_id!r})"
        literal = all(type(k) in (int, str, bool, bytes) or k is None for k in keys)
        # Keys that do not read back from their repr (dtypes, enums) are bound objects.
        check = f"type({e}) is {t} and tuple({e}) == {repr(keys) if literal else ns.bind(keys, 'keys')}"
        if holds_type_blind_items(keys):  # 1 == 1.0 == True: equal keys of other types are other keys
            check += f" and {ns.bind(typed_key, 'typed_key')}(tuple({e})) == {ns.bind(typed_key(keys), 'typed')}"
        return check

    def mismatch(self, actual, naming=None):
        t, name = self.meta["type"], self.source.name(naming)
        if type(actual) is not t:
            return _says(f"{name} type changed", t.__name__, type(actual).__name__)
        return _says(f"{name} keys changed", list(self.expected), _short(list(actual)))

    def describe(self, naming=None):
        return f"{self.meta['type'].__name__} with keys {list(self.expected)}"

    def snapshot_role(self, module):
        # A plain dict of the snapshot's region (a module's `_modules` iterated): its keys
        # are checked when the snapshot is taken, then held by the dict's version tag.
        return "keys" if self.meta["type"] is dict and not self.meta.get("by_id") \
            and not holds_type_blind_items(self.expected) else None


class HASATTR(Guard):
    """expected None: an instance attribute `attr`, whatever its value; True/False: whether
    hasattr() (a class's, through its MRO); meta module: a Module's own tables asked."""

    def code(self, ns):
        e, attr = self.source.ref(ns), self.meta["attr"]
        if self.expected is None:
            return f"{attr!r} in {e}.__dict__"
        if self.expected is False and self.meta.get("module"):
            # Module.__getattr__ raising costs microseconds: ask its tables and class instead
            tables = " and ".join(f"{attr!r} not in {e}.{t}" for t in ("__dict__", "_parameters", "_buffers",
                                                                         "_modules"))
            return f"{tables} and not {ns.bind(hasattr, 'hasattr')}({e}.__class__, {attr!r})"
        return f"{'' if self.expected else 'not '}{ns.bind(hasattr, 'hasattr')}({e}, {attr!r})"

    def snapshot_role(self, module):
        # A module's hasattr() that was False: absent from its tables (the snapshot's) and
        # from its class (a check of the class, once per class).
        return "absent from tables" if module and self.expected is False and self.meta.get("module") else None

    def mismatch(self, actual, naming=None):
        name, attr = self.source.name(naming), self.meta["attr"]
        if self.expected is False:
            return (f"{name} now has an attribute {attr!r}", f"no attribute {attr!r}", f"attribute {attr!r}")
        return (f"{name} no longer has an attribute {attr!r}", f"attribute {attr!r}", f"no attribute {attr!r}")

    def describe(self, naming=None):
        return f"{'no' if self.expected is False else 'has'} attribute {self.meta['attr']!r}"

    def key(self):
        return (self.kind, self.source, self.meta["attr"])


class NOT_IN_DICT(Guard):
    """No instance attribute `attr` (None: none at all)."""

    def snapshot_role(self, module):
        return "absent" if module and self.meta["attr"] is not None else None

    def code(self, ns):
        e, attr = self.source.ref(ns), self.meta["attr"]
        return f"not {e}.__dict__" if attr is None else f"{attr!r} not in {e}.__dict__"

    def mismatch(self, actual, naming=None):
        name, attr = self.source.name(naming), self.meta["attr"]
        if attr is None:
            now = sorted(map(str, getattr(actual, "__dict__", {})))
            return (f"{name} now has instance attributes {_short(now)}", "no instance attributes",
                    f"instance attributes {_short(now)}")
        shadows = " (shadowing its class's)" if hasattr(type(actual), attr) else ""
        return (f"{name} now has an instance attribute {attr!r}{shadows}",
                f"no instance attribute {attr!r}", f"instance attribute {attr!r}")

    def describe(self, naming=None):
        attr = self.meta["attr"]
        return "no instance attributes" if attr is None else f"no instance attribute {attr!r}"

    def key(self):
        return (self.kind, self.source, self.meta["attr"])


class NOT_IN_GLOBALS(Guard):
    """Builtins read by name: no global of theirs shadows them (source: the globals; meta
    names: the set of names, which the trace fills as it reads them). One C call per
    globals dict, whatever the number of names."""

    def _names(self) -> frozenset:
        return frozenset(self.meta["names"])

    def code(self, ns):
        return f"{ns.bind(self._names(), 'builtin_names')}.isdisjoint({self.source.ref(ns)})"

    def mismatch(self, actual, naming=None):
        shadowed = sorted(n for n in self._names() if n in actual)
        return (f"the global {', '.join(map(repr, shadowed))} now shadows the builtin",
                f"builtins {sorted(self._names())}", f"globals {shadowed}")

    def describe(self, naming=None):
        return f"no global named {', '.join(sorted(self._names()))}"

    def key(self):
        return (self.kind, self.source)


class NO_HOOKS(Guard):
    """Every hook dict named (meta attrs) is empty."""

    def snapshot_role(self, module):
        return "hooks" if module else None

    def code(self, ns):
        e = self.source.ref(ns)
        return "not (" + " or ".join(f"{e}.{a}" for a in self.meta["attrs"]) + ")"

    def mismatch(self, actual, naming=None):
        added = [f"{a.strip('_').replace('_', ' ')} ({len(getattr(actual, a))})"
                 for a in self.meta["attrs"] if getattr(actual, a, None)]
        return (f"{self.source.name(naming)} now has hooks: {', '.join(added)} (traced anew: forward hooks go into "
                "the graph, backward hooks break it)",
                "no hooks", ", ".join(added))

    def describe(self, naming=None):
        return "no hooks"

    def key(self):
        return (self.kind, self.source, self.meta["attrs"])


class ALIAS_MATCH(Guard):
    """Two sources are (expected True) or are not the same object; meta other: the other."""
    cost = 1

    def snapshot_role(self, module):
        return "alias"  # implied where the other is fixed by the snapshot too

    def code(self, ns):
        return f"{self.source.ref(ns)} {'is' if self.expected else 'is not'} {self.meta['other'].ref(ns)}"

    def mismatch(self, actual, naming=None):
        same, other = "the same object", "different objects"
        was, now = (same, other) if self.expected else (other, same)
        return (f"{self.source.name(naming)} and {self.meta['other'].name(naming)} were {was} when traced, "
                f"now {now}", was, now)

    def describe(self, naming=None):
        return f"{'is' if self.expected else 'is not'} {self.meta['other'].name(naming)}"

    def key(self):
        return (self.kind, self.source, self.meta["other"])

    def reads(self):
        return chain(self.source) + chain(self.meta["other"])


class TENSOR_MATCH(Guard):
    """meta: type, dtype, device, shape, stride (None: symbolic), requires_grad, inference,
    symbols, and c_check, torch's C check of the tensor (None: the Python expression)."""
    cost = 1
    call_key = ("type({})", "{}.dtype", "{}.device", "{}.shape", "{}.stride()", "{}.requires_grad")

    def code(self, ns):
        e, m = self.source.ref(ns), self.meta
        device = m["device"]
        # `x.is_cpu` pins device type cpu, the only cpu device; `is_cuda` and the index
        # pin a GPU (each a fraction of the cost of building x.device and comparing it).
        if device.type == "cpu":
            on_device = f"{e}.is_cpu"
        elif device.type == "cuda" and device.index is not None:
            on_device = f"{e}.is_cuda" if single_gpu() else \
                f"{e}.is_cuda and {e}.get_device() == {device.index}"
        else:
            on_device = f"{e}.device == {ns.bind(device, 'device')}"
        parts = [
            f"type({e}) is {ns.bind(m['type'], 'type')}",
            f"{e}.dtype is {ns.bind(m['dtype'], 'dtype')}",
            on_device,
            *layout_checks(e, m["shape"], m["stride"]),
            f"{e}.requires_grad is {m['requires_grad']!r}",
        ]
        if m.get("c_check") is None:  # the C check's dispatch keys tell inference tensors apart
            parts.append(f"{e}.is_inference() is {m.get('inference', False)!r}")
        return " and ".join(parts)

    def snapshot_role(self, module):
        m = self.meta
        static = None not in m["shape"] and None not in m["stride"] and not m.get("symbols")
        return "tensor" if static and m.get("c_check") is not None else None

    def check_code(self, ns):
        """torch's C check where there is one (stricter only in the dispatch keys;
        `mismatch` names those too)."""
        c_check = self.meta.get("c_check")
        if c_check is None:
            return self.code(ns)
        e = self.source.ref(ns)
        return f"{ns.bind(c_check, 'check_' + e if e.isidentifier() else 'tensor_check')}({e})"

    def mismatch(self, actual, naming=None):
        m = self.meta
        tname = _quoted(self.source, naming)
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
                     "a conj/neg view or a functorch transform)", *dispatch_keys(m["c_check"], actual))

    def describe(self, naming=None):
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


class SHAPE_ENV(Guard):
    """expected: the shape environment's expression (shape_guards.ShapeExpr, dynamic.render)
    over meta inputs (their sources); the source, a TermsSource of the sizes it reads; meta why."""
    cost = 2
    call_key = ("{}",)

    def code(self, ns):
        return render(self.expected, self.meta["inputs"], ns)

    def mismatch(self, actual, naming=None):
        terms = ", ".join(f"{n} = {v}" for n, v in zip(self.source.term_names(naming), actual))
        needs = self.describe(naming)
        return f"{terms}: the entry needs {needs}{self.meta.get('why', '')}", needs, terms

    def describe(self, naming=None):
        return render(self.expected, self.meta["inputs"], naming=naming)

    def key(self):
        return (self.kind, self.source, self.expected)


class TENSOR_ALIASING(Guard):
    """expected: the aliasing.AliasingCheck of the traced inputs; the source, a
    TensorsSource of them (read as one tuple)."""
    cost = 2

    def code(self, ns):
        return f"{ns.bind(self.expected, 'check_aliasing')}({self.source.ref(ns)})"

    def mismatch(self, actual, naming=None):  # actual: the tuple of tensors (source_reader reads `(a, b, c)`)
        names = [s.name(naming) for s in self.source.sources]
        why = self.expected.first_difference(actual, names) if isinstance(actual, tuple) else None
        return (f"tensor inputs alias differently than when traced: {why or 'unknown'}",
                self.expected.describe(names), why or "")

    def describe(self, naming=None):
        return self.expected.describe([s.name(naming) for s in self.source.sources])

    def reads(self):
        return [s for source in self.source.sources for s in chain(source)]


def chain(source) -> list:
    """`source` and the sources it is read through, outermost first (`m`, `m.layers`, ...)."""
    out = []
    while isinstance(source, Source):
        out.append(source)
        source = getattr(source, "base", None)
    return out[::-1]


def _kernel_name(obj) -> str | None:
    if not (type(obj).__module__ or "").startswith("triton"):
        return None
    from triton.runtime.jit import KernelInterface  # triton is optional: imported only for its objects
    if not isinstance(obj, KernelInterface):  # triton.cdiv and other helpers are not kernels
        return None
    try:
        return kernel_name(obj)
    except Exception:
        return None


def _says(what: str, expected, actual) -> tuple[str, str, str]:
    expected, actual = str(expected), str(actual)
    return f"{what}: expected {expected}, actual {actual}", expected, actual


def _quoted(source: Source, naming) -> str:
    """The name of `source` in quotes (`'x'`), or as it is where its name in code quotes
    itself (`global 'W'`, `closure 'mod'.w`, read as `self.w`)."""
    named = source.name(naming)
    return named if "'" in source.name() else f"'{named}'"


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
