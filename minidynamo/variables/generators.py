"""Generator functions and generator expressions, inlined as they are consumed.

Calling a generator function (a generator expression is one, called on the iterator of its
first `for`) binds its arguments and makes a `GeneratorVariable`; no line of its body runs.
Its body is a translator of its own, suspended: each item pulled (FOR_ITER, next(), zip,
enumerate, `yield from`) runs it from where it stopped to its next `yield`, so its work and
the consumer's interleave as in CPython. Its `return` ends it (the value is what `yield
from` gives); a generator partly consumed and dropped never runs the rest of its body.

`send`, `throw` and `close` drive the body through generator_methods.py; an exception the
body raises is caught by its own handlers (the translator's `catch`), and one leaving the
body reaches the caller of send/throw/close (or of `yield from`) as CPython raises it there.

An exception leaving the body into `next(gen[, default])` (interpreter/opcodes/calls.py),
`gen.__next__()` called by the frame or the frame's `for` loop over it (FOR_ITER) is raised
at that instruction (generator_methods.next_step), where the frame may catch it.

What the trace cannot make exact declines, with the reason:
- an exception leaving the body into a consumer model (`list()`, `zip`, `sum`: the eager
  run raises it);
- a generator left suspended inside a try or with block when the trace ends (CPython
  runs its cleanup when the last reference goes, at a time the trace does not know). One
  that a `for y in gen(...)` loop alone held is closed where the loop drops it (a
  `break` or `return`: `dropped_by_loop`), as CPython's refcount frees it there;
- a generator that started and is still live after the trace (returned, or live at a graph
  break) where generator_rebuild.py cannot make it again at its yield (3.10's `yield from`
  or try blocks, finished). One that never started is made again by calling its function
  with the same arguments.
- consumers that CPython lets read the whole iterable first (`tuple()`, `sorted()`,
  `str.join`, `f(*gen)`, unpacking, slice assignment, `itertools.product`) read it
  through `iter_items`, which pulls the generator to its end first and the consumer then
  works through the items. Where the body, after an item was taken, changes something
  the consumer's work reads (a tensor in place, the grad mode, a yielded list), the drain
  declines. `x in gen` pulls up to the match, as
  CPython does (operators.contains). Consumers that act as they pull (`list.extend`, `+=`
  on a list, `deque.extend`, `dict.update`, `Counter.update`, `set.update`, `sum`) take an
  iterator's items one by one (lists.pulled_one_by_one), as CPython's C loops do: a body may
  read or write the container they fill.
"""
from __future__ import annotations

import types
import weakref

from ..exc import current_location, unsupported
from ..memory_facts import aliased_values, written_values
from ..interpreter.run_ends import _Yield
from .base import ObjectConstantVariable, VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .sets import SetVariable
from .lists import IteratorVariable, ListVariable, LiveItems, TupleVariable
from .tensor import TensorVariable
from .contexts import ContextManagerVariable, _Method
from .functions import BaseFunctionVariable, BoundMethodVariable
from .objects import UserObjectVariable
from .user_objects import NewObjectVariable, UserExitVariable
from .generator_methods import next_step
from .generator_rebuild import rebuild_started, advance_lines

# Generators pulling generators (each pull runs a translator inside the puller's): past
# this nesting the trace declines before Python's own recursion limit would stop it.
MAX_PULL_DEPTH = 40

# The generators each trace made (by its OutputGraph), for the checks at its end.
_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Registry:
    __slots__ = ("generators", "pulling")

    def __init__(self):
        self.generators: list = []
        self.pulling = 0  # generators running right now, one inside the other


def _registry(output) -> _Registry:
    reg = _MADE.get(output)
    if reg is None:
        reg = _MADE[output] = _Registry()
    return reg


class _GeneratorItems(LiveItems):
    """The generator's items as LiveItems (`at(i)`), for code that reads an iterator's
    items that way; each is pulled from the body when first asked for."""

    __slots__ = ("gen", "made")

    def __init__(self, gen: "GeneratorVariable"):
        super().__init__()
        self.gen = gen
        self.made: list = []

    def at(self, index: int):
        while len(self.made) <= index:
            item = self.gen.pull()
            if item is None:
                return None
            self.made.append(item)
        return self.made[index]


class GeneratorVariable(IteratorVariable):
    """A generator object made in the trace. `frame` is the translator over its body;
    `state` is "created" (not started), "suspended" (at a yield), "running", "done" or
    "failed" (a decline or error went through its body)."""

    __slots__ = ("frame", "fn_var", "args", "kwargs", "state", "return_value", "registry", "made_at", "loop_owner")

    def __init__(self, frame, fn_var, args: list, kwargs: dict):
        super().__init__(None)
        self.items = _GeneratorItems(self)
        self.frame = frame
        self.fn_var = fn_var  # the generator function (to describe it, and to make it again)
        self.args, self.kwargs = list(args), dict(kwargs)
        self.state = "created"
        self.return_value: VariableTracker = ConstantVariable(None)
        self.registry = _registry(frame.output)
        self.registry.generators.append(self)
        self.made_at = None  # (translator, index) of the call of its own function that made it
        self.loop_owner = None  # the translator whose for loop alone holds it
        # CPython's gi_exc_state: a generator's body handles only its own exceptions (a
        # bare raise outside its handlers declines; a throw chains only to its own).
        frame.exc_info = None

    # --- what it is -------------------------------------------------------------------
    def python_type(self):
        return types.GeneratorType

    def describe(self):
        name = self.frame.code.co_name
        if name == "<genexpr>":
            return "generator expression"
        return f"generator {getattr(self.frame.code, 'co_qualname', name)!r}"

    def truthy(self, tx):
        return True  # a generator object is always true

    # --- running it ----------------------------------------------------------------
    def pull(self, sent=None):
        """Run the body to its next yield (`sent`: the value of the yield it is suspended
        at, None for next()): the yielded tracker, or None once it returned."""
        state = self.state
        if state == "done":
            return None
        if state == "running":
            unsupported("exceptions", f"ValueError: {self.describe()} already executing")
        if state == "failed":
            unsupported("generator", f"{self.describe()} pulled again after a decline inside it")
        if state == "suspended":
            self.frame.push(ConstantVariable(None) if sent is None else sent)  # the value of the yield
        return self.run_body()

    def run_body(self):
        """Run the body from where it stands (its stack and ip set up) to its next yield:
        the yielded tracker, or None once it returned (`return_value`). Anything raised
        out of it (an exception that left the body, a decline) marks it "failed": the
        methods that model the exception leaving (generator_methods.py) mark it "done"."""
        if current_location.get() is None:
            # Only a rebuild reads items after the trace (an enumerate or zip over this
            # generator that outlives it): the body would run at the wrong time.
            unsupported("generator", f"{self.describe()} would run after the trace (inside an "
                                     "iterator that outlives it)")
        registry = self.registry
        if registry.pulling >= MAX_PULL_DEPTH:
            unsupported("generator", f"generators pulling generators more than {MAX_PULL_DEPTH} deep")
        self.state = "running"
        registry.pulling += 1
        try:
            value = self.frame.run()
        except _Yield as y:
            self.state = "suspended"
            return y.value
        except BaseException:
            self.state = "failed"
            raise
        finally:
            registry.pulling -= 1
        self.state = "done"
        self.return_value = value
        return None

    def next_from(self, tx):
        """`next(gen)` by `tx`'s call instruction (generator_methods.next_step): an exception
        leaving the body is raised there, where `tx` may catch it."""
        return next_step(tx, self)

    def iter_items(self, tx):
        """Every item left, the body run to its end now (see the module docstring for when
        that is not CPython's order and declines)."""
        graph = self.frame.output.graph
        items, snapshots = [], []
        while True:
            before = _last_node(graph)
            item = self.next_item()
            if items:  # the body ran after an item was taken: the consumer's work comes later
                node = _write_to_earlier_value(graph, before)
                if node is not None:
                    unsupported("generator", f"{self.describe()} consumed whole changes state after "
                                             f"yielding ({_node_text(node)}): the consumer would see "
                                             "the change too early",
                                hint="iterate over it with a for loop, or build a list first")
            if item is None:
                break
            items.append(item)
            snapshots.append(_snapshot(item, self))
        for item, snap in zip(items, snapshots):
            if _snapshot(item, self) != snap:
                unsupported("generator", f"{self.describe()} consumed whole changes {item.describe()} "
                                         "after yielding it: the consumer would see the change too early",
                            hint="iterate over it with a for loop, or yield copies")
        return items

    def unpack_sequence(self, tx):
        return self.iter_items(tx)

    def reversed_items(self, tx):
        unsupported("exceptions", "TypeError: 'generator' object is not reversible")

    # --- methods ---------------------------------------------------------------------
    def var_getattr(self, tx, name):
        if name in ("__next__", "__iter__", "send", "throw", "close"):
            return BoundMethodVariable(self, name)
        if name in ("__name__", "__qualname__"):
            # CPython names a generator after its function (not its code object).
            fn = getattr(self.fn_var, "fn", None)
            if fn is not None:
                return ConstantVariable(getattr(fn, name))
            code = self.frame.code
            value = code.co_name if name == "__name__" else getattr(code, "co_qualname", None)
            if value is None:  # 3.10: MAKE_FUNCTION's qualified name is not kept
                unsupported("generator", f"__qualname__ of a {self.describe()} made by a nested function")
            return ConstantVariable(value)
        if not hasattr(types.GeneratorType, name):
            unsupported("exceptions", f"AttributeError: 'generator' object has no attribute {name!r}",
                        raised=AttributeError)
        unsupported("generator", f"attribute {name!r} of a {self.describe()}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__iter__" and not args and not kwargs:
            return self
        if name == "__next__" and not args and not kwargs:
            item = self.next_from(tx)
            if item is None:
                tx.throw(tx.made_here(StopIteration), f"StopIteration from next() on an exhausted {self.describe()}")
            return item
        if name == "send" and len(args) == 1 and not kwargs:
            return send(tx, self, args[0])
        if name == "close" and not args and not kwargs:
            return close(tx, self)
        if name == "throw":
            return throw(tx, self, args, kwargs)
        if name in ("send", "close"):
            unsupported("generator", f"{name}() on a {self.describe()} is not traced")
        return super().call_method(tx, name, args, kwargs)

    # --- at the end of the trace -------------------------------------------------------
    def rebuild_new(self, rb) -> str:
        """The generator made again after the graph: one that never started by calling its
        function with the same arguments (no line of its body has run); one suspended at a
        yield by running a copy of its code to that yield (generator_rebuild.py)."""
        if self.state != "created":
            return rebuild_started(self, rb)
        fn = rb.expr(self.fn_var)
        args = "".join(rb.expr(a) + ", " for a in self.args)
        if self.kwargs:
            kw = ", ".join(f"{k!r}: {rb.expr(v)}" for k, v in self.kwargs.items())
            args += f"**{{{kw}}}"
        return f"{fn}({args})"

    def rebuild_fill(self, rb, name: str) -> list:
        if self.state == "created":
            return []
        return advance_lines(rb, name)

    def dropped_by_loop(self, tx) -> None:
        """Its for loop, the only holder, dropped it early (a break or return): CPython
        frees it there, and freeing a suspended generator closes it, so its `finally` and
        with exits run now, before the code after the loop."""
        self.loop_owner = None
        if not self.suspended_in_cleanup():
            return  # closing it would run nothing
        outcome = close_outcome(self)
        if type(outcome) is Failed:  # CPython reports it as unraisable and goes on
            unsupported("generator", f"closing {self.describe()} dropped by its for loop raised "
                                     f"{outcome.value.exc_type.__name__} (CPython prints it as unraisable)")

    def suspended_in_cleanup(self) -> bool:
        """Suspended inside a try or with block: closing it would run code."""
        if self.state != "suspended":
            return False
        inst = getattr(self.frame, "yield_inst", None)
        if inst is None or inst.in_try:
            return True
        # A with block keeps its bound __exit__ on the stack (3.10's SETUP_WITH too).
        return any(isinstance(v, (_Method, ContextManagerVariable, UserExitVariable)) for v in self.frame.stack)

    def __repr__(self):
        return f"GeneratorVariable({self.describe()}, {self.state})"


def check_at_trace_end(output, where: str) -> None:
    """Decline when a generator the trace made is left suspended inside a try or with
    block: CPython runs that cleanup when the generator goes away, at a time the trace
    does not know (and it may change the state the rest of the function runs in)."""
    reg = _MADE.get(output)
    if reg is None:
        return
    for gen in reg.generators:
        if gen.suspended_in_cleanup():
            unsupported("generator", f"{gen.describe()} is left suspended inside a try or with block "
                                     f"{where}: CPython runs that block's cleanup when the generator "
                                     "goes away",
                        hint="consume the generator to its end inside the optimized function")


# --- whether a drain is CPython's order ------------------------------------------------

def _last_node(graph):
    for node in reversed(graph.nodes):
        return node
    return None


def _write_to_earlier_value(graph, before):
    """A node made after `before` that writes a tensor made before it (or may: unknown
    facts, a state change), or None. Writes to tensors the same step made are harmless:
    no item taken earlier can be or view them."""
    step: set = set()
    node = before.next if before is not None else next(iter(graph.nodes), None)
    while node is not None and node.op != "root":
        step.add(node)
        if node.op in ("call_function", "call_method", "call_module"):
            written = written_values(node)
            if written is None or not all(_made_in(w, step) for w in written):
                return node
        node = node.next
    return None


def _made_in(node, step: set) -> bool:
    """`node` and everything it views were made in this step."""
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in step:
            return False
        shared = aliased_values(n) if n.op != "placeholder" else None
        if shared is None:
            return False
        todo.extend(shared)
    return True


def _node_text(node) -> str:
    target = getattr(node.target, "__name__", None) or str(node.target)
    return f"{target}()"


class _Unknown(Exception):
    pass


def _snapshot(v, gen, seen=None):
    """What a consumer could read of an item later (Python-level contents): equal before
    and after the drain when nothing changed it. Tensors are left to the graph check."""
    if isinstance(v, (TensorVariable, ConstantVariable, ObjectConstantVariable)):
        return ()
    if isinstance(v, BaseFunctionVariable):
        return ()
    seen = set() if seen is None else seen
    if id(v) in seen:
        return ("cycle",)
    seen.add(id(v))
    if isinstance(v, TupleVariable):
        return ("tuple", v.loaded and tuple(_snapshot(i, gen, seen) for i in v.items))
    if isinstance(v, ListVariable):
        if not v.loaded:
            return ("lazy list", v._size, tuple(map(id, v.appended or ())))
        return ("list", tuple(map(id, v.items)), tuple(_snapshot(i, gen, seen) for i in v.items))
    if isinstance(v, DictVariable):
        if v._lazy is not None:
            return ("lazy dict",)
        items = v.items
        return ("dict", tuple((k, id(x)) for k, x in items.items()),
                tuple(_snapshot(x, gen, seen) for x in items.values()))
    if isinstance(v, SetVariable):
        return ("set", frozenset(v.values))
    if isinstance(v, UserObjectVariable) and v.source is not None:  # a module reached from the frame
        return ("object", tuple((k, id(x)) for k, x in v.stored.items()))
    if type(v) is NewObjectVariable:  # an object made in the trace: its attributes, as a dict's items
        attrs = v.attrs
        return ("new object", tuple((k, id(x)) for k, x in attrs.items()),
                tuple(_snapshot(x, gen, seen) for x in attrs.values()))
    own = getattr(v, "consumer_snapshot", None)  # a tracker that says what can be read of it
    if own is not None:
        return own(lambda item: _snapshot(item, gen, seen))
    unsupported("generator", f"{gen.describe()} consumed whole yields {v.describe()}, whose later "
                             "changes the trace cannot compare",
                hint="iterate over it with a for loop, or build a list first")


from .generator_methods import Failed, close, close_outcome, send, throw  # noqa: E402 - they drive the tracker above
