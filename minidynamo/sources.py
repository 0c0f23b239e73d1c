"""Sources: where a value the trace used comes from, as a Python expression.

A source renders to an expression over the optimized function's own parameters (the
generated guard and run functions have the user's signature, so an argument is just its
name) and over objects bound into the generated code's namespace (a module's globals
dict, a closure cell, a function object).
"""
from __future__ import annotations

import keyword
import math
import sys
import types
from dataclasses import dataclass
from .dynamic import render


class Namespace:
    """Names for objects that generated code refers to: `_md_g0`, `_md_g1`, ..."""

    def __init__(self, prefix: str = "_md_"):
        self.prefix = prefix
        self.values: dict[str, object] = {}
        self._by_id: dict[int, str] = {}
        self._reserved: set[str] = set()  # local variable names of the generated code
        self._tried: dict[str, int] = {}  # base -> the last number a fresh name of it took
        # Sources whose value the code being rendered has already put in a local (guards.py
        # hoists a prefix many guards share): `Source.ref` renders those as the local.
        self.hoisted: dict = {}

    def reserve(self, name: str) -> None:
        self._reserved.add(name)

    def local(self, hint: str) -> str:
        """A fresh local variable name for generated code."""
        name = self._fresh(self.prefix + hint)
        self._reserved.add(name)
        return name

    def _fresh(self, base: str) -> str:
        """`base`, or `base2`, `base3`, ...: the first that names nothing yet (numbers
        go on from the last one taken: thousands of `_md_p<n>` locals in a big entry)."""
        n = self._tried.get(base, 1)
        name = base if n == 1 else f"{base}{n}"
        while name in self.values or name in self._reserved:
            n += 1
            name = f"{base}{n}"
        self._tried[base] = n
        return name

    def bind(self, obj, hint: str = "o") -> str:
        """The name `obj` has here, a fresh one that says what it is (`_readable`) if none."""
        name = self._by_id.get(id(obj))
        if name is not None and self.values[name] is obj:
            return name
        if type(obj).__name__ == "device":  # torch.device: equal values share one name
            for existing, value in self.values.items():
                if type(value) is type(obj) and value == obj:
                    return existing
        return self._add(obj, _readable(obj, hint))

    def bind_as(self, obj, hint: str) -> str:
        """`bind`, but a fresh name says what the object is for (`hint`, made an identifier),
        not what it is: launch code names a C entry `entry_<kernel>`, whatever its own name."""
        name = self._by_id.get(id(obj))
        if name is not None and self.values[name] is obj:
            return name
        return self._add(obj, identifier(hint))

    def const(self, value, hint: str) -> str:
        """`value` written as a literal where one is the same value, else `bind_as`."""
        text = literal(value)
        return text if text is not None else self.bind_as(value, hint)

    def _add(self, obj, base: str) -> str:
        name = self._fresh(self.prefix + base)
        self.values[name] = obj
        self._by_id[id(obj)] = name
        return name


def identifier(text: str, default: str | None = None) -> str:
    """`text` as a name for generated code: each character that cannot be in a name becomes
    `_`; a result that is empty or starts with a digit is `default`, or else gets a `_` in
    front. The package's one cleaner of names (Namespace, triton/'s launch code)."""
    cleaned = "".join(c if c.isalnum() else "_" for c in text)
    if cleaned and not cleaned[0].isdigit():
        return cleaned
    return default if default is not None else "_" + cleaned


def literal(value) -> str | None:
    """`value` written as code, where a literal is the same value (None, bool, int, str, a
    finite float), else None."""
    t = type(value)
    if value is None or t in (bool, int, str):
        return repr(value)
    if t is float and math.isfinite(value):
        return repr(value)
    return None


def _readable(obj, hint: str) -> str:
    """A name that says what the object is: `Tensor`, `float32`, `cpu`, `G_mymodule`."""
    import torch
    if isinstance(obj, torch.dtype):
        text = str(obj).replace("torch.", "")
    elif isinstance(obj, torch.device):
        text = str(obj)
    elif isinstance(obj, types.ModuleType):
        text = obj.__name__
    elif type(obj) is tuple and hint == "id":
        text = "tuple"
    elif obj is sys.modules:
        text = "sys_modules"
    elif isinstance(obj, dict) and hint == "G":
        text = "G_" + str(obj.get("__name__", "globals"))
    elif isinstance(obj, types.BuiltinMethodType) and not isinstance(obj.__self__, (types.ModuleType, type(None))):
        text = hint  # a C object's bound method (a tensor check): its own name says little
    elif isinstance(obj, type) or callable(obj) and hasattr(obj, "__name__"):
        text = getattr(obj, "__name__", hint)
    else:
        text = hint
    return identifier(text, default=hint)


class Source:
    """Base: `expr(ns)` is a Python expression that fetches the value at call time."""

    def expr(self, ns: Namespace) -> str:
        raise NotImplementedError

    def ref(self, ns: Namespace) -> str:
        """`expr(ns)`, or the local the value is already in (`ns.hoisted`)."""
        hoisted = ns.hoisted
        return (hoisted and hoisted.get(self)) or self.expr(ns)

    def name(self, naming=None) -> str:
        """A human-readable name for messages (`x`, `G['SCALE']`, `x[0]`, `obj.w`); with a
        `naming` (user_names.Naming) its roots read in the user's terms (`tokens` for
        `args[0]`, `self` for the module's closure cell) and the rest composes on them."""
        raise NotImplementedError

    @property
    def depth(self) -> int:
        return 0

    def __str__(self):
        return self.name()


@dataclass(frozen=True)
class LocalSource(Source):
    local: str

    def expr(self, ns):
        return self.local

    def name(self, naming=None):
        return self.local if naming is None else naming.local(self.local)


@dataclass(frozen=True, eq=False)
class GlobalSource(Source):
    global_name: str
    globals_dict: dict

    def expr(self, ns):
        return f"{ns.bind(self.globals_dict, 'G')}[{self.global_name!r}]"

    def name(self, naming=None):
        return f"global {self.global_name!r}"

    def __eq__(self, other):
        return (isinstance(other, GlobalSource) and other.global_name == self.global_name
                and other.globals_dict is self.globals_dict)

    def __hash__(self):
        return hash((self.global_name, id(self.globals_dict)))


@dataclass(frozen=True, eq=False)
class ClosureSource(Source):
    """The contents of one closure cell (the cell object itself is fixed per function)."""

    cell: object
    var_name: str

    def expr(self, ns):
        return f"{ns.bind(self.cell, 'cell')}.cell_contents"

    def name(self, naming=None):
        named = naming.cell(self.cell) if naming is not None else None
        return f"closure {self.var_name!r}" if named is None else named

    def __eq__(self, other):
        return isinstance(other, ClosureSource) and other.cell is self.cell

    def __hash__(self):
        return hash(id(self.cell))


@dataclass(frozen=True, eq=False)
class ObjectSource(Source):
    """A fixed object the trace holds (a function, a module): guards use it by identity."""

    obj: object
    label: str

    def expr(self, ns):
        return ns.bind(self.obj, "obj")

    def name(self, naming=None):
        return self.label

    def __eq__(self, other):
        return isinstance(other, ObjectSource) and other.obj is self.obj

    def __hash__(self):
        return hash(id(self.obj))


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def __hash__(self):  # paths are deep and hashed often (guard planning): computed once
        h = self.__dict__.get("_hash")
        return _cached_hash(self, (AttrSource, self.base, self.attr)) if h is None else h

    def expr(self, ns):
        if self.attr.isidentifier() and not keyword.iskeyword(self.attr):
            return f"{self.base.ref(ns)}.{self.attr}"
        return f"getattr({self.base.ref(ns)}, {self.attr!r})"

    def name(self, naming=None):
        return f"{self.base.name(naming)}.{self.attr}"

    @property
    def depth(self):
        return _cached_depth(self)


@dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    key: object  # an int index or a constant dict key

    def __hash__(self):
        h = self.__dict__.get("_hash")
        return _cached_hash(self, (ItemSource, self.base, self.key)) if h is None else h

    def expr(self, ns):
        if type(self.key) in (int, str, bool, float, type(None)):
            return f"{self.base.ref(ns)}[{self.key!r}]"
        return f"{self.base.ref(ns)}[{ns.bind(self.key, 'key')}]"

    def name(self, naming=None):
        if naming is not None and type(self.base) is LocalSource:  # `args[0]` read as `tokens`
            named = naming.item(self.base.local, self.key)
            if named is not None:
                return named
        return f"{self.base.name(naming)}[{self.key!r}]"

    @property
    def depth(self):
        return _cached_depth(self)


def _cached_hash(source, fields) -> int:
    h = source.__dict__.get("_hash")
    if h is None:
        h = hash(fields)
        object.__setattr__(source, "_hash", h)
    return h


def _cached_depth(source) -> int:
    d = source.__dict__.get("_depth")
    if d is None:
        d = source.base.depth + 1
        object.__setattr__(source, "_depth", d)
    return d


def iterator_state(it) -> tuple:
    """(sequence, position) of a list, tuple or range iterator, read without advancing it."""
    reduced = it.__reduce__()
    if len(reduced) < 3:  # exhausted
        return (), 0
    return reduced[1][0], reduced[2] or 0  # 3.13: a range iterator's range starts where it is


@dataclass(frozen=True)
class InDictSource(Source):
    """Whether `key` is in the dict `base` (an instance dictionary read past the class's
    hooks, a dict passed in)."""

    base: Source
    key: str

    def expr(self, ns):
        return f"({self.key!r} in {self.base.expr(ns)})"

    def name(self, naming=None):
        return f"{self.key!r} in {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


@dataclass(frozen=True)
class IteratorSource(Source):
    """The sequence a list/tuple/range iterator walks (`part="seq"`) or its position."""

    base: Source
    part: str

    def expr(self, ns):
        return f"{ns.bind(iterator_state, 'iterator_state')}({self.base.ref(ns)})[{int(self.part == 'pos')}]"

    def name(self, naming=None):
        return f"{'position' if self.part == 'pos' else 'sequence'} of iterator {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


@dataclass(frozen=True, eq=False)
class CallSource(Source):
    """The result of calling a pure query with no arguments (`torch.jit.is_tracing()`)."""

    fn: object
    label: str

    def expr(self, ns):
        return f"{ns.bind(self.fn, 'query')}()"

    def name(self, naming=None):
        return f"{self.label}()"

    def __eq__(self, other):
        return isinstance(other, CallSource) and other.fn is self.fn

    def __hash__(self):
        return hash(id(self.fn))


@dataclass(frozen=True)
class ReadBeforeWrites(Source):
    """A value from outside that the entry read into `temp` before its writes replaced
    where it came from (`original`): rebuilt from `temp`, named as `original`."""

    original: Source
    temp: str

    def expr(self, ns):
        return self.temp

    def name(self, naming=None):
        return self.original.name(naming)

    @property
    def depth(self):
        return self.original.depth


@dataclass(frozen=True, eq=False)
class TermsSource(Source):
    """The sizes a shape-environment guard reads, as one tuple (`(x.size(0), y.size(1))`):
    `terms` (shape_guards.Term) over the sources of the symbolic inputs, `inputs`."""

    terms: tuple
    inputs: tuple = ()

    def expr(self, ns):
        return "(" + "".join(render(t, self.inputs, ns) + ", " for t in self.terms) + ")"

    def term_names(self, naming=None) -> list:
        """Each term's name (`x.size(0)`), the input's name composed as any source's."""
        return [render(t, self.inputs, naming=naming) for t in self.terms]

    def name(self, naming=None):
        return ", ".join(self.term_names(naming))


@dataclass(frozen=True)
class TensorsSource(Source):
    """Several tensors read together (the aliasing guard's inputs), as one tuple:
    `(a, b, self.w, )`."""

    sources: tuple

    def expr(self, ns):
        return "(" + "".join(s.ref(ns) + ", " for s in self.sources) + ")"

    def name(self, naming=None):
        return ", ".join(s.name(naming) for s in self.sources)

    @property
    def depth(self):
        return max(s.depth for s in self.sources)
