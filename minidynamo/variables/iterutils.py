"""Models of itertools and functools made inside the trace: calling an itertools class
(register_constructor), `itertools.tee`, `chain.from_iterable`, and the builtins that
make lazy iterators (map, filter, iter(callable, sentinel)), all through lazy_iterators.py
and itertools_items.py."""
from __future__ import annotations

import functools
import itertools
import numbers
import sys
from dataclasses import dataclass

from .._compat import PY314
from ..exc import unsupported
from ..sources import Source
from .base import VariableTracker
from .constant import ConstantVariable
from .itertools_items import (AccumulateItems, BatchedItems, ChainItems, CombinatoricItems, CompressItems,
                              CountItems, CycleItems, DropwhileItems, GroupbyItems, GroupbyState, IsliceItems,
                              PairwiseItems, RepeatItems, StarmapItems, TakewhileItems, TeeBuffer, TeeItems,
                              ZipLongestItems)
from .lazy_iterators import (ModelIterator, bind_args, decline_type, decline_value, int_arg, is_none,
                             make_call_until, make_filter, make_map)
from .lists import IteratorVariable, TupleVariable, iterator_of, make_enumerate, make_zip
from .objects import ClassVariable
from .builder import _guard
from .builtins import BuiltinVariable
from .tensor import TensorVariable
from ..interpreter.operators import compare

__all__ = ["make_map", "make_filter", "make_call_until", "make_tee", "chain_from_iterable", "make_cmp_to_key"]


def _product(tx, args, kwargs):
    if set(kwargs) - {"repeat"}:
        decline_type("product() got an unexpected keyword argument")
    repeat = int_arg(kwargs.get("repeat", ConstantVariable(1)), "product(repeat=)")
    if repeat < 0:
        decline_value("repeat argument cannot be negative")
    pools = [list(a.iter_items(tx)) for a in args] * repeat
    return CombinatoricItems(tx, itertools.product, pools, None)


def _choose(kind, default_r=False):
    def make(tx, args, kwargs):
        iterable, r = bind_args(kind.__name__, args, kwargs, ("iterable", "r"),
                                {"r": ConstantVariable(None)} if default_r else None)
        pool = list(iterable.iter_items(tx))
        r = int_arg(r, f"{kind.__name__}(r=)", allow_none=default_r)
        if r is None:
            r = len(pool)
        if r < 0:
            decline_value("r must be non-negative")
        return CombinatoricItems(tx, kind, [pool], r)
    return make


def _chain(tx, args, kwargs):
    if kwargs:
        decline_type("chain() takes no keyword arguments")
    return ChainItems(tx, IteratorVariable(list(args)))


def chain_from_iterable(tx, args, kwargs):
    (iterable,) = bind_args("from_iterable", args, kwargs, ("iterable",), keywords=False)
    return ModelIterator(ChainItems(tx, iterator_of(tx, iterable)))


def _islice(tx, args, kwargs):
    if kwargs:
        decline_type("islice() takes no keyword arguments")
    if not 2 <= len(args) <= 4:
        decline_type("islice expected 2 to 4 arguments")
    it = iterator_of(tx, args[0])
    bounds = [int_arg(a, "an islice index", allow_none=True) for a in args[1:]]
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (bounds + [1])[:3]
    start, step = 0 if start is None else start, 1 if step is None else step
    if start < 0 or (stop is not None and stop < 0):
        decline_value("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    if step < 1:
        decline_value("Step for islice() must be a positive integer or None.")
    return IsliceItems(tx, it, start, stop, step)


def _zip_longest(tx, args, kwargs):
    if set(kwargs) - {"fillvalue"}:
        decline_type("zip_longest() got an unexpected keyword argument")
    fill = kwargs.get("fillvalue", ConstantVariable(None))
    return ZipLongestItems(tx, [iterator_of(tx, a) for a in args], fill)


def _number(v, what: str):
    if isinstance(v, TensorVariable):
        return v
    if not v.is_python_constant() or not isinstance(v.as_python_constant(), numbers.Number):
        decline_type(f"a number is required ({what})")
    return v


def _count(tx, args, kwargs):
    start, step = bind_args("count", args, kwargs, ("start", "step"),
                            {"start": ConstantVariable(0), "step": ConstantVariable(1)})
    start, step = _number(start, "count start"), _number(step, "count step")
    fast = [v.as_python_constant() if isinstance(v, ConstantVariable) else None for v in (start, step)]
    if isinstance(fast[0], int) and isinstance(fast[1], int) and fast[1] == 1:
        start = ConstantVariable(int(fast[0]))  # CPython's fast mode counts in plain ints (count(True): 1, 2...)
    return CountItems(tx, start, step)


def _repeat(tx, args, kwargs):
    obj, times = bind_args("repeat", args, kwargs, ("object", "times"), {"times": None})
    return RepeatItems(tx, obj, None if times is None else max(int_arg(times, "repeat(times=)"), 0))


def _cycle(tx, args, kwargs):
    (iterable,) = bind_args("cycle", args, kwargs, ("iterable",), keywords=False)
    return CycleItems(tx, iterator_of(tx, iterable))


def _accumulate(tx, args, kwargs):
    iterable, fn, initial = bind_args("accumulate", args, kwargs, ("iterable", "func", "initial"),
                                      {"func": ConstantVariable(None), "initial": ConstantVariable(None)})
    if len(args) > 2:
        decline_type("accumulate() takes at most 2 positional arguments")
    return AccumulateItems(tx, iterator_of(tx, iterable), None if is_none(fn) else fn,
                           None if is_none(initial) else initial)


def _two(kind, make):
    def factory(tx, args, kwargs):
        fn, iterable = bind_args(kind.__name__, args, kwargs, ("predicate", "iterable"), keywords=False)
        return make(tx, fn, iterator_of(tx, iterable))
    return factory


def _compress(tx, args, kwargs):
    data, selectors = bind_args("compress", args, kwargs, ("data", "selectors"))
    return CompressItems(tx, iterator_of(tx, data), iterator_of(tx, selectors))


def _pairwise(tx, args, kwargs):
    (iterable,) = bind_args("pairwise", args, kwargs, ("iterable",), keywords=False)
    return PairwiseItems(tx, iterator_of(tx, iterable))


def _batched(tx, args, kwargs):
    names = ("iterable", "n", "strict") if sys.version_info >= (3, 13) else ("iterable", "n")
    bound = bind_args("batched", args, kwargs, names, {"strict": ConstantVariable(False)})
    n = int_arg(bound[1], "batched(n=)")
    if n < 1:
        decline_value("n must be at least one")
    strict = len(bound) > 2 and bound[2].truthy(tx)
    return BatchedItems(tx, iterator_of(tx, bound[0]), n, strict)


def _filterfalse(tx, args, kwargs):
    return make_filter(tx, args, kwargs, keep=False).items


def make_tee(tx, args, kwargs):
    if kwargs:
        decline_type("tee() takes no keyword arguments")
    if not 1 <= len(args) <= 2:
        decline_type("tee expected 1 or 2 arguments")
    n = int_arg(args[1], "tee n") if len(args) == 2 else 2
    if n < 0:
        decline_value("n must be >= 0")
    it = iterator_of(tx, args[0])
    if n == 0:
        return TupleVariable([])
    if isinstance(it, ModelIterator) and isinstance(it.items, TeeItems):
        # A tee of a tee copies it, as CPython; up to 3.13 the first result is the tee
        # itself, 3.14 copies it for the first result too.
        first = it.items.copy() if PY314 else it
    else:
        first = it = ModelIterator(TeeItems(tx, TeeBuffer(it)))
    return TupleVariable([first] + [it.items.copy() for _ in range(n - 1)])


def _groupby(tx, args, kwargs):
    iterable, key = bind_args("groupby", args, kwargs, ("iterable", "key"), {"key": ConstantVariable(None)})
    return GroupbyItems(tx, GroupbyState(tx, iterator_of(tx, iterable), None if is_none(key) else key))


_FACTORIES = {
    itertools.product: _product,
    itertools.combinations: _choose(itertools.combinations),
    itertools.combinations_with_replacement: _choose(itertools.combinations_with_replacement),
    itertools.permutations: _choose(itertools.permutations, default_r=True),
    itertools.chain: _chain,
    itertools.islice: _islice,
    itertools.zip_longest: _zip_longest,
    itertools.count: _count,
    itertools.repeat: _repeat,
    itertools.cycle: _cycle,
    itertools.accumulate: _accumulate,
    itertools.starmap: _two(itertools.starmap, lambda tx, fn, it: StarmapItems(tx, fn, it)),
    itertools.takewhile: _two(itertools.takewhile, lambda tx, fn, it: TakewhileItems(tx, fn, it)),
    itertools.dropwhile: _two(itertools.dropwhile, lambda tx, fn, it: DropwhileItems(tx, fn, it)),
    itertools.filterfalse: _filterfalse,
    itertools.compress: _compress,
    itertools.groupby: _groupby,
}
if hasattr(itertools, "pairwise"):
    _FACTORIES[itertools.pairwise] = _pairwise
if hasattr(itertools, "batched"):
    _FACTORIES[itertools.batched] = _batched


def _construct(tx, cls, args, kwargs):
    made = _FACTORIES[cls](tx, list(args), dict(kwargs))
    return made if isinstance(made, VariableTracker) else ModelIterator(made)



_KEY_WRAPPER = type(functools.cmp_to_key(lambda a, b: 0))


class KeyWrapperVariable(VariableTracker):
    """functools.cmp_to_key(cmp) (obj None) and the keys calling it makes, K(obj): two keys
    compare as `cmp(a.obj, b.obj) op 0`, cmp called when CPython calls it."""

    __slots__ = ("cmp", "obj")

    def __init__(self, cmp, obj=None):
        super().__init__(None)
        self.cmp, self.obj = cmp, obj

    def python_type(self):
        return _KEY_WRAPPER

    def describe(self):
        return "functools.cmp_to_key key" if self.obj is not None else "functools.cmp_to_key object"

    def call_function(self, tx, args, kwargs):
        (obj,) = bind_args("K", args, kwargs, ("obj",))
        return KeyWrapperVariable(self.cmp, obj)

    def var_getattr(self, tx, name):
        if name == "obj" and self.obj is not None:
            return self.obj
        return super().var_getattr(tx, name)

    def compare(self, tx, op, other):
        if not isinstance(other, KeyWrapperVariable) or self.obj is None or other.obj is None:
            decline_type("other argument must be K instance")
        result = self.cmp.call_function(tx, [self.obj, other.obj], {})
        return compare(tx, op, result, ConstantVariable(0))

    def rebuild_new(self, rb):
        made = f"{rb.ns.bind(functools.cmp_to_key, 'cmp_to_key')}({rb.expr(self.cmp)})"
        return made if self.obj is None else f"{made}({rb.expr(self.obj)})"


def make_cmp_to_key(tx, args, kwargs):
    (cmp,) = bind_args("cmp_to_key", args, kwargs, ("mycmp",))
    return KeyWrapperVariable(cmp)


class ChainClassVariable(ClassVariable):
    """itertools.chain as a value: its `from_iterable` is a new bound method on every read,
    so it is not wrapped through a source (an identity guard on it would never hold)."""

    def var_getattr(self, tx, name):
        if name == "from_iterable":
            return BuiltinVariable(itertools.chain.from_iterable)
        return super().var_getattr(tx, name)


def reduced_args(obj) -> tuple:
    """The arguments `obj.__reduce__()` says a zip or enumerate object would be made again
    with, now: its iterators (and enumerate's next count), read without advancing them."""
    return obj.__reduce__()[1]


def reduced_shape(obj) -> tuple:
    """What a zip's or enumerate's state is made of besides its parts: how many iterators,
    and zip's strict flag."""
    reduced = obj.__reduce__()
    return len(reduced[1]), len(reduced) > 2 and bool(reduced[2])


@dataclass(frozen=True)
class ReducedSource(Source):
    """Argument `part` of `reduced_args(base)` (an iterator a zip or enumerate pulls from,
    or enumerate's next count), or with part "shape", `reduced_shape(base)`."""

    base: Source
    part: object

    def expr(self, ns):
        if self.part == "shape":
            return f"{ns.bind(reduced_shape, 'reduced_shape')}({self.base.expr(ns)})"
        return f"{ns.bind(reduced_args, 'reduced_args')}({self.base.expr(ns)})[{self.part}]"

    def name(self, naming=None):
        if self.part == "shape":
            return f"the number of iterators of {self.base.name(naming)}"
        return f"argument {self.part} of {self.base.name(naming)}"

    @property
    def depth(self):
        return self.base.depth + 1


def _wrap_pulled(tx, value, source):
    """A zip or enumerate object passed in (a resume function gets a loop's, made again at a
    break): the iterators it pulls from, wrapped through their sources (a list iterator is
    the list and its position, guarded), enumerate's count guarded by value, zip's strict
    flag and the number of its iterators by the type and the arguments' count. One object
    reached twice is one tracker."""
    seen = tx.output.iterators
    for other_source, (obj, var) in seen.items():
        _guard(tx, "ALIAS_MATCH", source, obj is value, other=other_source)
        if obj is value:
            return var
    _guard(tx, "TYPE_MATCH", source, type(value))
    reduced = value.__reduce__()
    args = reduced[1]
    _guard(tx, "EQUALS_MATCH", ReducedSource(source, "shape"), reduced_shape(value))
    if type(value) is enumerate:
        inner = _pulled_iterator(tx, args[0], ReducedSource(source, 0))
        count = tx.wrap(args[1], ReducedSource(source, 1))
        if not count.is_python_constant():
            unsupported("construct", f"an enumerate object counting from {count.describe()}")
        var = make_enumerate(iterator_of(tx, inner), count.as_python_constant())
    else:
        iterators = [iterator_of(tx, _pulled_iterator(tx, it, ReducedSource(source, i))) for i, it in enumerate(args)]
        var = make_zip(iterators, len(reduced) > 2 and bool(reduced[2]))
    var.source = source  # the real one: pulled after the graph as often as the trace pulled it (side_effects.py)
    seen[source] = (value, var)
    return var


def _pulled_iterator(tx, it, source):
    """An iterator a zip or enumerate passed in pulls from: made again where it outlives
    the trace, not read back through the zip (which an exhausted one no longer holds)."""
    var = tx.wrap(it, source)
    if isinstance(var, IteratorVariable) and var.source is source:
        var.source = None
    return var


def _wrap_chain_class(tx, value, source):
    return ChainClassVariable(value, source)
