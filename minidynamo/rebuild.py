"""Trackers → real values at run time: the Python expressions an entry evaluates after
its graph to rebuild a return value, or the live stack and locals at a graph break.

A tensor made in the graph is one of the graph's outputs; a value with a source is read
back from its source (the same object); constants are written out; containers made
inside the trace are built anew. A mutable one (list, dict, set, iterator) is built
once into a temporary, so two references to it stay one object, as in eager.
"""
from __future__ import annotations

import itertools
import keyword
import types

from .exc import unsupported
from .sources import Namespace
from .variables.base import VariableTracker
from .variables.builtins import BuiltinVariable
from .variables.c_callables import OpaqueCallableVariable
from .variables.constant import ConstantVariable
from .variables.contexts import _Method, exit_across_break
from .variables.dicts import DictVariable, ObjectKey, SetVariable, has_object_keys
from .variables.functions import (BoundMethodVariable, NestedFunctionVariable, RealCellVariable,
                                  UserFunctionVariable, UserMethodVariable)
from .variables.lists import IteratorVariable, ListVariable, LiveItems, TupleVariable, tuple_maker
from .variables.objects import ClassVariable, ModuleVariable
from .variables.symbolic import SymNodeVariable
from .variables.tensor import TensorVariable
from .variables.torch import TorchVariable
from .variables.triton import TritonKernelVariable


def make_function(code, fn_globals, qualname, defaults, kwdefaults, closure):
    """A function made by MAKE_FUNCTION during the trace, made again for real."""
    fn = types.FunctionType(code, fn_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    return fn


def list_iterator(items: list, index: int):
    """An iterator over the list object `items` that has already yielded `index` items."""
    it = iter(items)
    it.__setstate__(index)
    return it


class Rebuilder:
    """`expr(tracker)` → an expression; `prelude` holds the statements it needs first
    (temporaries for mutable containers). A graph output is `out_name[i]`, or with
    `node_ref` the name the inlined graph code gives that node; `nodes` lists them."""

    def __init__(self, ns: Namespace, out_name: str, node_ref=None):
        self.ns = ns
        self.out_name = out_name
        self.node_ref = node_ref
        self.nodes: list = []
        self._index: dict = {}
        self.prelude: list[str] = []
        self._built: dict = {}  # id(tracker) → temporary holding the object built for it
        self._keep: list = []  # the trackers behind _built's ids
        self._building: set = set()
        self._temps = itertools.count()
        self._owners: dict = {}  # id(a list tracker's items) → the tracker (see prepare)
        self.exits: dict = {}  # id(exit tracker) → the name of a region's exit entered at a break

    def keep(self, v) -> None:
        """Keep tracker `v` alive as long as this rebuilder (its id is a key here)."""
        self._keep.append(v)

    def temp(self) -> str:
        name = f"{self.ns.prefix}t{next(self._temps)}"
        self.ns.reserve(name)
        return name

    def expr(self, v: VariableTracker) -> str:
        if isinstance(v, (TensorVariable, SymNodeVariable)) and not hasattr(v, "rebuild_new"):  # graph values
            if v.node.op == "placeholder" and v.source is not None:
                return v.source.expr(self.ns)  # an input returned unchanged: the same object
            i = self._index.get(v.node)
            if i is None:
                i = self._index[v.node] = len(self.nodes)
                self.nodes.append(v.node)
            return f"{self.out_name}[{i}]" if self.node_ref is None else self.node_ref(v.node)
        if isinstance(v, TritonKernelVariable) and v.grid is not None:  # kernel[grid]: the kernel's source
            if v.source is None:
                unsupported("triton", f"{v.describe()} is not reachable from the frame")
            return f"{v.source.expr(self.ns)}[{self.expr(v.grid)}]"
        if v.source is not None and not isinstance(v, ConstantVariable):
            return v.source.expr(self.ns)  # containers/objects from outside: same object
        if isinstance(v, ConstantVariable):
            value = v.value
            if type(value) in (int, str, bool, bytes) or value is None:
                return repr(value)
            return self.ns.bind(value, "c")
        if isinstance(v, TupleVariable):
            inner = "".join(self.expr(i) + ", " for i in v.items)
            if v.tuple_type is tuple:
                return f"({inner})"
            return f"{self.ns.bind(tuple_maker(v.tuple_type), 't')}(({inner}))"
        if isinstance(v, (ListVariable, DictVariable, SetVariable, IteratorVariable, NestedFunctionVariable)) \
                or hasattr(v, "rebuild_new"):
            return self._mutable(v)
        if isinstance(v, (BuiltinVariable, ClassVariable, TorchVariable, ModuleVariable)):
            return self.ns.bind(v.as_python_constant(), "c")
        if isinstance(v, UserFunctionVariable):
            return self.ns.bind(v.fn, "fn")
        if isinstance(v, OpaqueCallableVariable):  # a real C callable reached without a source
            return self.ns.bind(v.value, "c")
        if isinstance(v, BoundMethodVariable):  # x.item, lst.append: looked up again on the object
            name = v.name
            if name.isidentifier() and not keyword.iskeyword(name):
                return f"{self.expr(v.obj)}.{name}"
            return f"{self.ns.bind(getattr, 'getattr')}({self.expr(v.obj)}, {name!r})"
        if isinstance(v, _Method) and v.name == "__exit__":  # a with region a graph break splits
            if id(v) in self.exits:  # entered again after the graph (regions.py)
                return self.exits[id(v)]
            real = exit_across_break(v)
            if real is None:
                unsupported("exceptions", f"a graph break inside a with block over {v.cm.describe()}")
            return self.ns.bind(real, "exit")
        if isinstance(v, UserMethodVariable):
            return f"{self.ns.bind(types.MethodType, 'MethodType')}({self.expr(v.func)}, {self.expr(v.obj)})"
        unsupported("construct", f"{v.describe()}, which exists only inside the trace, would have to "
                                 "outlive it")

    def _mutable(self, v) -> str:
        name = self._built.get(id(v))
        if name is not None:
            return name
        if id(v) in self._building:
            unsupported("construct", f"{v.describe()} contains itself")
        self._building.add(id(v))
        try:
            value = self._build(v)
        finally:
            self._building.discard(id(v))
        name = self._built[id(v)] = self.temp()
        self._keep.append(v)
        self.prelude.append(f"{name} = {value}")
        fill = getattr(v, "rebuild_fill", None)
        if fill is not None:  # after the temporary exists, so what it holds may refer to it
            self.prelude.extend(fill(self, name))
        return name

    def _build(self, v) -> str:
        if hasattr(v, "rebuild_new"):
            # A tracker of an object made in the trace, outside this module's containers:
            # `rebuild_new(rb)` is the expression making it, `rebuild_fill(rb, name)` (optional)
            # the statements that fill it once it is bound to `name`.
            return v.rebuild_new(self)
        if isinstance(v, ListVariable):
            return "[" + ", ".join(self.expr(i) for i in v.items) + "]"
        if isinstance(v, DictVariable):
            body = ", ".join(f"{self.key(k)}: {self.expr(x)}" for k, x in v.items.items())
            return "{" + body + "}" if v.dict_type is dict else f"{self.ns.bind(v.dict_type, 't')}({{{body}}})"
        if isinstance(v, SetVariable):
            if has_object_keys(v.values):  # members hashed by identity: the objects of this call
                members = "".join(self.key(k) + ", " for k in v.values)
                return f"{self.ns.bind(v.python_type(), 't')}(({members}))"
            return f"{self.ns.bind(v.python_type(), 't')}({self.ns.bind(frozenset(v.values), 'c')})"
        if isinstance(v, NestedFunctionVariable):
            return self._function(v)
        return self._iterator(v)

    def _function(self, v: NestedFunctionVariable) -> str:
        cells = []
        for cell in (v.closure.items if v.closure is not None else ()):
            # A cell of a function from outside is that cell; a cell of a frame in the trace
            # is made once for real (functions.CellVariable) or passed on (its source).
            cells.append(self.ns.bind(cell.cell, "cell") if isinstance(cell, RealCellVariable) else self.expr(cell))
        closure = f"({''.join(c + ', ' for c in cells)})" if cells else "None"
        defaults = self.expr(v.defaults_var) if v.defaults_var is not None else "None"
        kwdefaults = self.expr(v.kwdefaults_var) if v.kwdefaults_var is not None else "None"
        return (f"{self.ns.bind(make_function, 'make_function')}({self.ns.bind(v.code, 'code')}, "
                f"{self.ns.bind(v.globals, 'G')}, {v.name!r}, {defaults}, {kwdefaults}, {closure})")

    def _iterator(self, v: IteratorVariable) -> str:
        owner = v.owner if v.owner is not None else self._list_owning(v.items)
        if owner is not None:  # iterating a list made in the trace: the same list, live
            return f"{self.ns.bind(list_iterator, 'list_iterator')}({self.expr(owner)}, {v.index})"
        if v.rest is None:  # read once: pulling live items advances what they pull from
            if isinstance(v.items, LiveItems):
                v.rest = []
                while (item := v.items.at(v.index + len(v.rest))) is not None:
                    v.rest.append(item)
            else:
                v.rest = list(v.items[v.index:])
        rest = v.rest
        ints = [r.value for r in rest if isinstance(r, ConstantVariable) and type(r.value) is int]
        if len(ints) == len(rest) and len(rest) >= 2:
            step = ints[1] - ints[0]
            if step and all(b - a == step for a, b in zip(ints, ints[1:])):
                return f"{self._iter}({self.ns.bind(range, 'range')}({ints[0]}, {ints[-1] + step}, {step}))"
        return f"{self._iter}((" + "".join(self.expr(r) + ", " for r in rest) + "))"

    @property
    def _iter(self) -> str:
        return self.ns.bind(iter, "iter")

    def prepare(self, roots) -> None:
        """Note which list trackers own the item lists iterators walk, among everything
        reachable from `roots`, so an iterator over one is rebuilt over that same list."""
        seen, todo = set(), list(roots)
        while todo:
            v = todo.pop()
            if id(v) in seen or v is None:
                continue
            seen.add(id(v))
            if isinstance(v, ListVariable) and v.source is None:
                self._owners[id(v.items)] = v
            if isinstance(v, (ListVariable, TupleVariable)) and v.source is None:
                todo.extend(v.items)
            elif isinstance(v, DictVariable) and v.source is None:
                todo.extend(v.items.values())

    def _list_owning(self, items):
        return self._owners.get(id(items))

    def key(self, k) -> str:
        if type(k) is ObjectKey:  # an object hashed by identity: rebuilt from its tracker
            return self.expr(k.var)
        return repr(k) if type(k) in (int, str, bool) or k is None else self.ns.bind(k, "k")

