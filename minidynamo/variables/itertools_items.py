"""The items of the itertools iterators made inside the trace (lazy_iterators.py says
how they work); iterutils.py binds the arguments of the itertools callables to them."""
from __future__ import annotations

import itertools

from ..exc import unsupported
from .constant import ConstantVariable
from .lazy_iterators import (ModelItems, ModelIterator, advanced, decline_value, exprs, is_none, never, rich_equal,
                             tuple_expr)
from .lists import TupleVariable, iterator_of
from ..interpreter.operators import binary_op


# --- itertools: chaining, slicing, filtering -------------------------------------------
class ChainItems(ModelItems):
    """chain(*iterables) and chain.from_iterable(it): `source` yields the iterables, each
    turned into an iterator only when reached (a list changed before then is seen changed)."""

    __slots__ = ("source", "active")
    kind, name = itertools.chain, "chain"

    def __init__(self, tx, source):
        super().__init__(tx)
        self.source, self.active = source, None

    def produce(self):
        while self.source is not None:
            if self.active is None:
                iterable = self.source.next_item()
                if iterable is None:
                    self.source = None
                    return None
                self.active = iterator_of(self.tx, iterable)
            item = self.active.next_item()
            if item is not None:
                return item
            self.active = None
        return None

    def rebuild(self, rb):
        chain = self.bind(rb, itertools.chain, "chain")
        if self.source is None:
            return f"{chain}()"
        source = rb.expr(self.source)
        if self.active is not None:
            source = f"{chain}(({rb.expr(self.active)}, ), {source})"
        return f"{chain}.from_iterable({source})"


class IsliceItems(ModelItems):
    """islice: CPython's counters (`cnt` items read, `next` the next position to yield)."""

    __slots__ = ("it", "cnt", "next", "stop", "step")
    kind, name = itertools.islice, "islice"

    def __init__(self, tx, it, start, stop, step):
        super().__init__(tx)
        self.it, self.cnt, self.next, self.stop, self.step = it, 0, start, stop, step

    def produce(self):
        if self.it is None:
            return None
        while self.cnt < self.next:
            if self.it.next_item() is None:
                return self._empty()
            self.cnt += 1
        if self.stop is not None and self.cnt >= self.stop:
            return self._empty()
        item = self.it.next_item()
        if item is None:
            return self._empty()
        self.cnt += 1
        self.next += self.step
        if self.stop is not None and self.next > self.stop:
            self.next = self.stop
        return item

    def _empty(self):
        self.it = None  # CPython lets go of its source
        return None

    def rebuild(self, rb):
        islice = self.bind(rb, itertools.islice, "islice")
        if self.it is None:
            return f"{islice}((), 0)"
        stop = None if self.stop is None else self.stop - self.cnt  # counted from here on
        start = self.next - self.cnt
        return f"{islice}({rb.expr(self.it)}, {start!r}, {stop!r}, {self.step!r})"


class TakewhileItems(ModelItems):
    __slots__ = ("pred", "it", "stopped")
    kind, name, calls_code, sticky = itertools.takewhile, "takewhile", True, False

    def __init__(self, tx, pred, it):
        super().__init__(tx)
        self.pred, self.it, self.stopped = pred, it, False

    def produce(self):
        if self.stopped:
            return None
        item = self.it.next_item()
        if item is None:
            return None
        if self.call(self.pred, [item]).truthy(self.tx):
            return item
        self.stopped = True
        return None

    def rebuild(self, rb):
        source = "()" if self.stopped else rb.expr(self.it)
        return f"{self.bind(rb, itertools.takewhile, 'takewhile')}({rb.expr(self.pred)}, {source})"


class DropwhileItems(ModelItems):
    __slots__ = ("pred", "it", "started")
    kind, name, calls_code, sticky = itertools.dropwhile, "dropwhile", True, False

    def __init__(self, tx, pred, it):
        super().__init__(tx)
        self.pred, self.it, self.started = pred, it, False

    def produce(self):
        while (item := self.it.next_item()) is not None:
            if self.started:
                return item
            if not self.call(self.pred, [item]).truthy(self.tx):
                self.started = True
                return item
        return None

    def rebuild(self, rb):
        pred = self.bind(rb, never, "never") if self.started else rb.expr(self.pred)
        return f"{self.bind(rb, itertools.dropwhile, 'dropwhile')}({pred}, {rb.expr(self.it)})"


class CompressItems(ModelItems):
    __slots__ = ("data", "selectors")
    kind, name, sticky = itertools.compress, "compress", False

    def __init__(self, tx, data, selectors):
        super().__init__(tx)
        self.data, self.selectors = data, selectors

    def produce(self):
        while True:
            datum = self.data.next_item()
            if datum is None:
                return None
            selector = self.selectors.next_item()
            if selector is None:
                return None
            if selector.truthy(self.tx):
                return datum

    def rebuild(self, rb):
        return f"{self.bind(rb, itertools.compress, 'compress')}({rb.expr(self.data)}, {rb.expr(self.selectors)})"


class StarmapItems(ModelItems):
    __slots__ = ("fn", "it")
    kind, name, calls_code, sticky = itertools.starmap, "starmap", True, False

    def __init__(self, tx, fn, it):
        super().__init__(tx)
        self.fn, self.it = fn, it

    def produce(self):
        item = self.it.next_item()
        return None if item is None else self.call(self.fn, item.iter_items(self.tx))

    def rebuild(self, rb):
        return f"{self.bind(rb, itertools.starmap, 'starmap')}({rb.expr(self.fn)}, {rb.expr(self.it)})"


class AccumulateItems(ModelItems):
    __slots__ = ("it", "fn", "initial", "total")
    kind, name, calls_code, sticky = itertools.accumulate, "accumulate", True, False

    def __init__(self, tx, it, fn, initial):
        super().__init__(tx)
        self.it, self.fn, self.initial, self.total = it, fn, initial, None

    def produce(self):
        if self.initial is not None:
            self.total, self.initial = self.initial, None
            return self.total
        item = self.it.next_item()
        if item is None:
            return None
        if self.total is None:
            self.total = item
        elif self.fn is None:
            self.total = binary_op(self.tx, "add", self.total, item)
        else:
            self.total = self.call(self.fn, [self.total, item])
        return self.total

    def rebuild(self, rb):
        made = f"{self.bind(rb, itertools.accumulate, 'accumulate')}({rb.expr(self.it)}, " \
               f"{'None' if self.fn is None else rb.expr(self.fn)}"
        if self.initial is not None:
            return f"{made}, initial={rb.expr(self.initial)})"
        if self.total is None:
            return made + ")"
        if is_none(self.total):  # initial=None means no initial value
            unsupported("construct", "an accumulate iterator whose running total is None cannot "
                                     "outlive the trace")
        return f"{self.bind(rb, advanced, 'advanced')}({made}, initial={rb.expr(self.total)}), 1)"


class PairwiseItems(ModelItems):
    __slots__ = ("it", "old")
    kind, name = getattr(itertools, "pairwise", None), "pairwise"

    def __init__(self, tx, it):
        super().__init__(tx)
        self.it, self.old = it, None

    def produce(self):
        if self.it is None:
            return None
        if self.old is None:
            self.old = self.it.next_item()
            if self.old is None:
                self.it = None
                return None
        new = self.it.next_item()
        if new is None:
            self.it = self.old = None
            return None
        pair, self.old = TupleVariable([self.old, new]), new
        return pair

    def rebuild(self, rb):
        pairwise = self.bind(rb, self.kind, "pairwise")
        if self.it is None:
            return f"{pairwise}(())"
        if self.old is None:
            return f"{pairwise}({rb.expr(self.it)})"
        chain = self.bind(rb, itertools.chain, "chain")
        return f"{pairwise}({chain}(({rb.expr(self.old)}, ), {rb.expr(self.it)}))"


class BatchedItems(ModelItems):
    __slots__ = ("it", "n", "strict")
    kind, name = getattr(itertools, "batched", None), "batched"

    def __init__(self, tx, it, n, strict):
        super().__init__(tx)
        self.it, self.n, self.strict = it, n, strict

    def produce(self):
        if self.it is None:
            return None
        batch = []
        while len(batch) < self.n and (item := self.it.next_item()) is not None:
            batch.append(item)
        if len(batch) < self.n:
            self.it = None
            if batch and self.strict:
                decline_value("batched(): incomplete batch")
        return TupleVariable(batch) if batch else None

    def rebuild(self, rb):
        source = "()" if self.it is None else rb.expr(self.it)
        strict = ", strict=True" if self.strict else ""
        return f"{self.bind(rb, self.kind, 'batched')}({source}, {self.n}{strict})"


class ZipLongestItems(ModelItems):
    __slots__ = ("iterators", "fill", "active")
    kind, name = itertools.zip_longest, "zip_longest"

    def __init__(self, tx, iterators, fill):
        super().__init__(tx)
        self.iterators, self.fill = list(iterators), fill
        self.active = len(self.iterators)

    def produce(self):
        if not self.iterators or self.active == 0:
            return None
        parts = []
        for i, it in enumerate(self.iterators):
            item = None if it is None else it.next_item()
            if it is not None and item is None:
                self.active -= 1
                if self.active == 0:
                    return None
                self.iterators[i] = None
            parts.append(self.fill if item is None else item)
        return TupleVariable(parts)

    def rebuild(self, rb):
        zl = self.bind(rb, itertools.zip_longest, "zip_longest")
        if not self.iterators or self.active == 0:
            return f"{zl}()"
        if any(it is None for it in self.iterators):
            unsupported("construct", "a zip_longest iterator with some of its iterators exhausted "
                                     "cannot outlive the trace")
        return f"{zl}({exprs(rb, self.iterators)}fillvalue={rb.expr(self.fill)})"


# --- itertools: infinite ----------------------------------------------------------------
class CountItems(ModelItems):
    __slots__ = ("current", "step")
    kind, name, infinite = itertools.count, "count", True

    def __init__(self, tx, start, step):
        super().__init__(tx)
        self.current, self.step = start, step

    @property
    def calls_code(self):  # counting tensors adds graph nodes: only while tracing
        return not (isinstance(self.current, ConstantVariable) and isinstance(self.step, ConstantVariable))

    def produce(self):
        value = self.current  # CPython computes the next value as it returns this one
        self.current = binary_op(self.tx, "add", value, self.step)
        return value

    def rebuild(self, rb):
        return f"{self.bind(rb, itertools.count, 'count')}({rb.expr(self.current)}, {rb.expr(self.step)})"


class RepeatItems(ModelItems):
    __slots__ = ("obj", "left")
    kind, name = itertools.repeat, "repeat"

    def __init__(self, tx, obj, times):
        super().__init__(tx)
        self.obj, self.left = obj, times  # None: forever

    @property
    def infinite(self):
        return self.left is None

    def produce(self):
        if self.left is None:
            return self.obj
        if self.left <= 0:
            return None
        self.left -= 1
        return self.obj

    def rebuild(self, rb):
        times = "" if self.left is None else f", {max(self.left, 0)}"
        return f"{self.bind(rb, itertools.repeat, 'repeat')}({rb.expr(self.obj)}{times})"


class CycleItems(ModelItems):
    __slots__ = ("it", "saved", "position")
    kind, name, infinite = itertools.cycle, "cycle", True

    def __init__(self, tx, it):
        super().__init__(tx)
        self.it, self.saved, self.position = it, [], 0

    def produce(self):
        if self.it is not None:
            item = self.it.next_item()
            if item is not None:
                self.saved.append(item)
                return item
            self.it = None  # the first pass is over: the saved items from now on
        if not self.saved:
            return None
        item = self.saved[self.position]
        self.position = (self.position + 1) % len(self.saved)
        return item

    def rebuild(self, rb):
        cycle = self.bind(rb, itertools.cycle, "cycle")
        if self.it is None:  # the saved items, from where it is
            return f"{cycle}({tuple_expr(rb, self.saved[self.position:] + self.saved[:self.position])})"
        if not self.saved:
            return f"{cycle}({rb.expr(self.it)})"
        chain = self.bind(rb, itertools.chain, "chain")
        made = f"{cycle}({chain}({tuple_expr(rb, self.saved)}, {rb.expr(self.it)}))"
        return f"{self.bind(rb, advanced, 'advanced')}({made}, {len(self.saved)})"


# --- itertools: combinatorics ------------------------------------------------------------
class CombinatoricItems(ModelItems):
    """product, combinations, combinations_with_replacement, permutations: CPython reads
    the pools whole when the object is made; the positions come from the real iterator
    over index ranges, the items are the pools' trackers."""

    __slots__ = ("kind", "name", "pools", "r", "positions", "count")

    def __init__(self, tx, kind, pools, r):
        super().__init__(tx)
        self.kind, self.name = kind, kind.__name__
        self.pools, self.r, self.count = pools, r, 0
        ranges = [range(len(p)) for p in pools]
        self.positions = kind(*ranges) if kind is itertools.product else kind(ranges[0], r)

    def produce(self):
        indices = next(self.positions, None)
        if indices is None:
            return None
        self.count += 1
        if self.kind is itertools.product:
            return TupleVariable([pool[i] for pool, i in zip(self.pools, indices)])
        return TupleVariable([self.pools[0][i] for i in indices])

    def rebuild(self, rb):
        pools = exprs(rb, [TupleVariable(p) for p in self.pools])
        made = f"{self.bind(rb, self.kind, self.name)}({pools}" + \
            ("" if self.kind is itertools.product else f"{self.r!r}") + ")"
        return f"{self.bind(rb, advanced, 'advanced')}({made}, {self.count})"


# --- itertools: shared sources (tee, groupby) --------------------------------------------
class TeeBuffer:
    """What the iterators of one tee() share: the items read so far from the source."""

    __slots__ = ("it", "items", "ended")

    def __init__(self, it):
        self.it, self.items, self.ended = it, [], False

    def get(self, i: int):
        while len(self.items) <= i:
            item = self.it.next_item()
            if item is None:
                self.ended = True
                return None
            self.items.append(item)
        return self.items[i]


class TeeItems(ModelItems):
    __slots__ = ("buffer", "position")
    kind, name, sticky = type(itertools.tee(())[0]), "tee", False

    def __init__(self, tx, buffer, position=0):
        super().__init__(tx)
        self.buffer, self.position = buffer, position

    def produce(self):
        item = self.buffer.get(self.position)
        if item is not None:
            self.position += 1
        return item

    def copy(self):
        return ModelIterator(TeeItems(self.tx, self.buffer, self.position))

    def rebuild(self, rb):
        if not self.buffer.ended:
            unsupported("construct", "a tee iterator whose source is still being read cannot "
                                     "outlive the trace (its siblings share that source)")
        rest = tuple_expr(rb, self.buffer.items[self.position:])
        return f"{self.bind(rb, itertools.tee, 'tee')}({rest}, 1)[0]"


class GroupbyState:
    """CPython's groupby object: the target key, the current key and value (None: NULL),
    and which grouper is current (an older one yields nothing more)."""

    __slots__ = ("tx", "it", "key", "tgtkey", "currkey", "currvalue", "current")

    def __init__(self, tx, it, key):
        self.tx, self.it, self.key = tx, it, key
        self.tgtkey = self.currkey = self.currvalue = self.current = None

    def step(self) -> bool:
        value = self.it.next_item()
        if value is None:
            return False
        key = value if self.key is None else self.key.call_function(self.tx, [value], {})
        self.currvalue, self.currkey = value, key
        return True


class GroupbyItems(ModelItems):
    __slots__ = ("state",)
    kind, name, calls_code, sticky = itertools.groupby, "groupby", True, False

    def __init__(self, tx, state):
        super().__init__(tx)
        self.state = state

    def produce(self):
        s = self.state
        s.current = None
        while True:  # skip the rest of the current group
            if s.currkey is not None:
                if s.tgtkey is None or not rich_equal(self.tx, s.tgtkey, s.currkey):
                    break
            if not s.step():
                return None
        s.tgtkey = s.currkey
        grouper = GrouperItems(self.tx, s, s.tgtkey)
        s.current = grouper
        return TupleVariable([s.currkey, ModelIterator(grouper)])

    def rebuild(self, rb):
        unsupported("construct", "a groupby iterator cannot outlive the trace")


class GrouperItems(ModelItems):
    __slots__ = ("state", "tgtkey")
    kind, name, calls_code, sticky = type(next(itertools.groupby([0]))[1]), "groupby group", True, False

    def __init__(self, tx, state, tgtkey):
        super().__init__(tx)
        self.state, self.tgtkey = state, tgtkey

    def produce(self):
        s = self.state
        if s.current is not self:
            return None
        if s.currvalue is None and not s.step():
            return None
        if not rich_equal(self.tx, self.tgtkey, s.currkey):
            return None
        value, s.currvalue = s.currvalue, None
        return value

    def rebuild(self, rb):
        unsupported("construct", "a groupby group cannot outlive the trace")
