"""Python builtins (len, isinstance, range, zip, min, ...) and pure functions from
math/operator: folded on constants, turned into graph ops on tensors where that is
what CPython would do (abs(x), sum of tensors, operator.add on tensors)."""
from __future__ import annotations

import builtins
import functools
import itertools
import math
import operator
import types

import torch

from ..exc import attribute_error, exception_made, READS_FRAME, Unsupported, unsupported
from .base import ObjectConstantVariable
from .attribute_builtins import getattr_call, hasattr_call
from .constant import ConstantVariable, fold
from .dicts import DictVariable
from .sets import SetVariable, set_made_from
from .lazy_iterators import make_call_until, make_filter, make_map
from .lists import pulled_one_by_one
from .lists import (BaseListVariable, IteratorVariable, ListVariable, ReversedItems, TupleVariable, iterator_of,
                    make_enumerate, make_zip)
from .nn_modules import module_dict_items, reversed_children
from .symbolic import SymNodeVariable, symbolic_result
from .tensor import TensorVariable, size_variable
from .functions import BaseFunctionVariable, BoundMethodVariable, PartialVariable, UserMethodVariable, UserFunctionVariable
from .objects import UserObjectVariable
from ..memory_facts import storage_of
from ..guards import Guard
from ..interpreter.operators import binary_op, compare, getitem, unary_op

# Builtins that are pure on constants: folded when every argument is a constant.
_PURE = {
    abs, all, any, bin, bool, callable, chr, complex, divmod, float, format, frozenset, hash,
    hex, int, len, max, min, oct, ord, pow, range, repr, round, slice, sorted, str, sum, tuple,
    bytes, isinstance, issubclass, type,
}
PURE_MODULES = {"math", "operator", "cmath", "_operator"}
# Builtins that read the calling frame (exc.READS_FRAME): always, or when called bare.
_FRAME_READERS = {locals, globals, eval, exec}
_FRAME_READERS_WITHOUT_ARGS = {vars, dir, super}
_OPERATOR_BINARY = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
    operator.floordiv: "floordiv", operator.mod: "mod", operator.pow: "pow",
    operator.matmul: "matmul", operator.and_: "and_", operator.or_: "or_", operator.xor: "xor",
    operator.lshift: "lshift", operator.rshift: "rshift",
}
_OPERATOR_COMPARE = {operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=",
                     operator.gt: ">", operator.ge: ">="}


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()


class BuiltinVariable(ObjectConstantVariable):
    """A Python builtin or pure function used as a value."""

    rebuild = ObjectConstantVariable.rebuild_as_itself

    def describe(self):
        return f"builtin {getattr(self.value, '__name__', self.value)!r}"

    def var_getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(self.value.__name__)
        if isinstance(self.value, type) and hasattr(self.value, name):
            attr = getattr(self.value, name)
            return tx.wrap(attr, None)
        if isinstance(self.value, type) and not self.value.__flags__ & _HEAP_TYPE:
            # A static type (int, str, list) takes no new attributes: the miss needs no guard.
            unsupported("exceptions", f"AttributeError: type object {self.value.__name__!r} has no attribute "
                        f"{name!r}", raised=AttributeError)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        if isinstance(fn, type) and issubclass(fn, BaseException):  # only ever made to be raised
            exception_made(tx, fn)
        if tx.output.function_modes and fn not in _NO_TORCH_FUNCTION and any(
                isinstance(a, TensorVariable) for a in (*args, *kwargs.values())):
            # len(x), float(x), iter(x)...: eager hands Tensor.__len__ and the like to the mode
            unsupported("call", f"{fn.__name__}() of a tensor under a torch function mode entered in the trace",
                        no_break="a torch function mode entered in the traced code is active here")
        handler = _HANDLERS.get(fn) or tx.registry.BUILTIN_HANDLERS.get(fn)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if fn in _OPERATOR_BINARY and len(args) == 2 and not kwargs:
            return binary_op(tx, _OPERATOR_BINARY[fn], args[0], args[1])
        if fn in _OPERATOR_COMPARE and len(args) == 2 and not kwargs:
            return compare(tx, _OPERATOR_COMPARE[fn], args[0], args[1])
        if fn is operator.getitem and len(args) == 2:
            return getitem(tx, args[0], args[1])
        if fn in _OPERATOR_UNARY and len(args) == 1 and not kwargs:
            return unary_op(tx, _OPERATOR_UNARY[fn], args[0])
        if fn is operator.abs and len(args) == 1 and not kwargs:  # the builtin, by another name
            return BuiltinVariable(abs).call_function(tx, args, kwargs)
        if fn in _SYMBOLIC_MATH and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable):
            # math.ceil(n / 2) of a symbolic size: a symbolic int (SymFloat's __ceil__)
            return symbolic_result(tx, "call_function", fn, [args[0].as_fx_arg()], fn(args[0].sym))
        pure = fn in _PURE or getattr(fn, "__module__", None) in PURE_MODULES
        if pure and all(a.is_python_constant() for a in args) and all(
                v.is_python_constant() for v in kwargs.values()):
            return fold(tx, fn, [a.as_python_constant() for a in args],
                        {k: v.as_python_constant() for k, v in kwargs.items()}, f"{fn.__name__}()")
        if getattr(fn, "__module__", None) in ("math",) and any(isinstance(a, TensorVariable) for a in args):
            unsupported("data_dependent", f"math.{fn.__name__} on a tensor reads its value")
        if fn in _FRAME_READERS or (fn in _FRAME_READERS_WITHOUT_ARGS and not args and not kwargs):
            unsupported("construct", f"{fn.__name__}() is not traced", no_break=READS_FRAME)
        if fn is print:
            unsupported("side_effect", "print() writes output")
        if fn in (open, input, exec, eval, compile, globals, locals, vars, setattr, delattr, id):
            unsupported("side_effect" if fn in (open, input, setattr, delattr) else "construct",
                        f"{fn.__name__}() is not traced")
        unsupported("call", f"{self.describe()} with arguments "
                    f"({', '.join(a.describe() for a in args)})")


_SYMBOLIC_MATH = (math.ceil, math.floor, math.trunc)
_OPERATOR_UNARY = {operator.neg: "neg", operator.pos: "pos", operator.invert: "invert", operator.inv: "invert"}
# Builtins that never ask a torch function mode about a tensor argument.
_NO_TORCH_FUNCTION = {isinstance, type, id, callable, hasattr, getattr, issubclass}


def _const_args(args):
    return all(a.is_python_constant() for a in args)


def _len(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    (obj,) = args
    if isinstance(obj, (TupleVariable, ListVariable)):
        return ConstantVariable(len(obj.items))
    if isinstance(obj, DictVariable):
        return ConstantVariable(len(obj.items))
    if isinstance(obj, SetVariable):
        return ConstantVariable(len(obj.values))
    if isinstance(obj, TensorVariable):
        if obj.fake.dim() == 0:
            unsupported("exceptions", "TypeError: len() of a 0-d tensor")
        return size_variable(obj.fake.shape[:1], tx.output, obj.node).items[0]  # symbolic: x.size(0)
    if obj.is_python_constant():
        return fold(tx, len, [obj.as_python_constant()], {}, "len()")
    return obj.call_method(tx, "__len__", [], {})


def _python_type_of(tx, v):
    t = v.python_type()
    return t


def _isinstance(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        return None
    obj, classes = args
    if not classes.is_python_constant():
        unsupported("construct", "isinstance() with a non-constant class argument")
    cls = classes.as_python_constant()
    asked = getattr(obj, "isinstance_of", None)  # an object whose class's metaclass decides (nn.Buffer)
    answer = asked(cls) if asked is not None else None
    if answer is not None:
        return ConstantVariable(answer)
    t = _python_type_of(tx, obj)
    try:
        return ConstantVariable(issubclass(t, cls))
    except TypeError as e:
        unsupported("exceptions", f"TypeError: {e}")


def _type(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    return tx.wrap(_python_type_of(tx, args[0]), None)


def _iterable_call(ctor):
    def handler(tx, args, kwargs):
        if kwargs or len(args) > 1:
            return None
        if ctor is set or ctor is frozenset:
            return set_made_from(tx, ctor, args[0] if args else None)
        items = args[0].iter_items(tx) if args else []
        if ctor is tuple:
            return TupleVariable(items)
        if ctor is list:
            return ListVariable(items)
        return None
    return handler


def _dict(tx, args, kwargs):
    d = DictVariable({})
    if len(args) > 1:
        return None
    if args:
        mapping = module_dict_items(tx, args[0])  # a ModuleDict: read through keys() and d[k]
        if mapping is not None:
            d.items.update(mapping)
        else:
            d.update_from(tx, args[0])
    d.items.update(kwargs)
    return d


def _range(tx, args, kwargs):
    if kwargs or not _const_args(args):
        bad = [a for a in args if not a.is_python_constant()]
        if bad:
            unsupported("data_dependent", f"range() over {bad[0].describe()}")
        return None
    return fold(tx, range, [a.as_python_constant() for a in args], {}, "range()")


def _enumerate(tx, args, kwargs):
    if not args or len(args) > 2:
        return None
    start = args[1].as_python_constant() if len(args) == 2 else kwargs.get("start", ConstantVariable(0)).as_python_constant()
    return make_enumerate(iterator_of(tx, args[0]), start)


def _zip(tx, args, kwargs):
    strict = kwargs.get("strict")
    if set(kwargs) - {"strict"}:
        return None
    iterators = [iterator_of(tx, a) for a in args]
    if not iterators:
        return IteratorVariable([])
    strict = strict is not None and strict.as_python_constant()  # lengths checked as they run out
    return make_zip(iterators, strict)


def _reversed(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    (seq,) = args
    if isinstance(seq, ListVariable):
        return IteratorVariable(ReversedItems(seq.items))
    make = getattr(seq, "make_iterator", None)  # a deque: its own reverse iterator type
    if make is not None:
        return make(tx, reverse=True)
    reverse = getattr(seq, "reversed_items", None)  # dicts and their views
    if reverse is not None:
        return IteratorVariable(reverse(tx))
    if isinstance(seq, TupleVariable) or (seq.is_python_constant() and isinstance(
            seq.as_python_constant(), (range, str, bytes, tuple))):
        return IteratorVariable(list(reversed(seq.iter_items(tx))))
    children = reversed_children(tx, seq)  # nn.Sequential, ModuleList, ParameterList
    if children is not None:
        return IteratorVariable(children)
    if isinstance(seq, (IteratorVariable, SetVariable)):  # no __reversed__, no sequence protocol
        unsupported("exceptions", f"TypeError: {seq.python_type().__name__!r} object is not reversible")
    return None


def _iter(tx, args, kwargs):
    if kwargs or not 1 <= len(args) <= 2:
        return None
    if len(args) == 2:  # iter(callable, sentinel)
        if not is_callable(args[0]):
            unsupported("exceptions", "TypeError: iter(v, w): v must be callable")
        return make_call_until(tx, args[0], args[1])
    return iterator_of(tx, args[0])


def _next(tx, args, kwargs):
    if not args or not isinstance(args[0], IteratorVariable) or kwargs:
        return None
    item = args[0].next_item()
    if item is None:
        if len(args) == 2:
            return args[1]
        unsupported("exceptions", "StopIteration from next()")
    return item


def _sum(tx, args, kwargs):
    if _const_args(args) and all(v.is_python_constant() for v in kwargs.values()):
        return None  # folded by the generic path
    acc = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in pulled_one_by_one(tx, args[0]):  # CPython adds each item before taking the next
        acc = binary_op(tx, "add", acc, item)
    return acc


def _minmax(fn):
    name = fn.__name__
    op = "<" if fn is min else ">"  # CPython: replace the best when `key(item) op best_key`

    def handler(tx, args, kwargs):
        if set(kwargs) - {"key", "default"}:
            unsupported("exceptions", f"TypeError: {name}() got an unexpected keyword argument")
        if len(args) == 2 and not kwargs and any(isinstance(a, SymNodeVariable) for a in args) and all(
                isinstance(a, SymNodeVariable) and a.python_type() is int
                or type(getattr(a, "value", None)) is int for a in args):
            # min(n, 8) of sizes: symbolic (torch's sym_min), not one entry per value of n.
            # Ints only: the result is one of the two ints either way, as eager's.
            sym_fn = torch.sym_min if fn is min else torch.sym_max
            return symbolic_result(tx, "call_function", sym_fn, [a.as_fx_arg() for a in args],
                                   sym_fn(*[a.as_fake() for a in args]))
        if not args:
            unsupported("exceptions", f"TypeError: {name} expected at least 1 argument, got 0")
        key = kwargs.get("key")
        key = None if key is None or _is_none(key) else key
        default = kwargs.get("default")
        if default is not None and len(args) > 1:
            unsupported("exceptions", f"TypeError: Cannot specify a default for {name}() with multiple "
                                      "positional arguments")
        # Read as CPython reads it: one item, then its key, then the next item.
        it = iterator_of(tx, args[0]) if len(args) == 1 else IteratorVariable(list(args))
        best = best_key = None
        while (item := it.next_item()) is not None:
            k = item if key is None else key.call_function(tx, [item], {})
            if best is None:
                best, best_key = item, k
                continue
            better = order_compare(tx, op, k, best_key)
            if isinstance(better, TensorVariable):
                best, best_key = _select(tx, name, better, item, best, k, best_key, key is None)
            elif better.truthy(tx):
                best, best_key = item, k
        if best is None:
            if default is not None:
                return default
            unsupported("exceptions", f"ValueError: {name}() arg is an empty sequence")
        return best
    return handler


def _select(tx, name, better, item, best, k, best_key, keyless):
    """min/max where `better` (a tensor comparison of the keys) picks: eager takes its truth
    value, which needs one element; the pick is torch.where on both the items and the keys,
    which gives eager's values, dtype, shape and gradients (a new tensor, not the object)."""
    if better.fake.numel() != 1:
        unsupported("exceptions", "RuntimeError: Boolean value of Tensor with more than one value "
                                  f"is ambiguous ({name}() compares tensors)")
    new_item = _where(tx, name, better, item, best, exact=True)
    new_key = new_item if keyless else _where(tx, name, better, k, best_key, exact=False)
    return new_item, new_key


def _where(tx, name, cond, a, b, exact):
    import torch
    if not (isinstance(a, TensorVariable) and isinstance(b, TensorVariable)):
        unsupported("data_dependent", f"{name}() picks between {a.describe()} and {b.describe()} by "
                                      "a tensor comparison (which one depends on the data)")
    fa, fb = a.fake, b.fake
    same = (fa.shape, fa.dtype, fa.device) == (fb.shape, fb.dtype, fb.device)
    if exact:  # the result is one of them in eager: everything about it must not depend on which
        same = same and fa.requires_grad == fb.requires_grad and a.cls is torch.Tensor \
            and b.cls is torch.Tensor and torch.broadcast_shapes(cond.fake.shape, fa.shape) == fa.shape
    elif fa.dtype != fb.dtype:
        same = False
    elif fa.numel() == 1 and fb.numel() == 1:
        same = True  # keys are only compared: one element of one dtype is all that counts
    if not same:
        unsupported("data_dependent", f"{name}() picks between {a.describe()} and {b.describe()}, "
                                      "which differ in type, shape, dtype, device or requires_grad, "
                                      "by a tensor comparison")
    if exact:
        for v in (a, b):
            if v.node.op == "placeholder":  # eager returns that very input object
                unsupported("data_dependent", f"{name}() picks between tensors passed in by a tensor "
                                              "comparison: which object it returns depends on the data")
    picked = tx.output.call("call_function", torch.where, [cond, a, b], {}, what=f"{name}() of tensors")
    if exact:  # eager's result is one of a, b: writes and `is` on any of them must not be traced
        tx.output.picked_storages.update(storage_of(v.fake) for v in (a, b, picked))
    return picked


def _is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def _sorted(tx, args, kwargs):
    if len(args) != 1:
        unsupported("exceptions", f"TypeError: sorted expected 1 argument, got {len(args)}")
    if set(kwargs) - {"key", "reverse"}:
        unsupported("exceptions", "TypeError: sort() got an unexpected keyword argument")
    items = list(args[0].iter_items(tx))  # CPython: a new list of the items, then list.sort
    return ListVariable(sort_items(tx, items, kwargs.get("key"), kwargs.get("reverse")))


def sort_items(tx, items: list, key=None, reverse=None) -> list:
    """`items` in the order list.sort(key=, reverse=) leaves them: the key is called on each
    item first, in order; then CPython's own sort orders them, so the comparisons are the
    ones CPython makes, in its order: on the constant keys themselves, or else each one
    traced (a comparison of tensors reads their data and declines)."""
    key = None if key is None or _is_none(key) else key
    if reverse is not None and not reverse.is_python_constant():
        unsupported("data_dependent", f"sort(reverse=) is {reverse.describe()}")
    rev = bool(reverse.as_python_constant()) if reverse is not None else False
    keys = [item if key is None else key.call_function(tx, [item], {}) for item in items]
    if all(k.is_python_constant() for k in keys):
        values = [k.as_python_constant() for k in keys]
        sort_key = values.__getitem__
    else:
        def sort_key(i):
            return _TracedKey(tx, keys[i])
    try:
        order = sorted(range(len(keys)), key=sort_key, reverse=rev)
    except Unsupported:
        raise
    except Exception as e:  # the eager run raises it for real
        unsupported("exceptions", f"sort() raised {type(e).__name__}: {e}", raised=attribute_error(e))
    return [items[i] for i in order]


class _TracedKey:
    """A sort key whose `<` (all CPython's sort asks) is traced on the key trackers."""

    __slots__ = ("tx", "value")

    def __init__(self, tx, value):
        self.tx, self.value = tx, value

    def __lt__(self, other):
        return order_compare(self.tx, "<", self.value, other.value).truthy(self.tx)


def order_compare(tx, op, a, b):
    """`a op b` as min, max and sort compare keys: functools.cmp_to_key's keys call their
    function, anything else is an ordinary comparison."""
    from .iterutils import KeyWrapperVariable  # a cycle: iterutils builds on this module
    if isinstance(a, KeyWrapperVariable):
        return a.compare(tx, op, b)
    return compare(tx, op, a, b)


def is_callable(v) -> bool:
    """callable(v): whether v's type has a __call__ (the real object's, where there is one)."""
    if isinstance(v, (ObjectConstantVariable, UserObjectVariable)):
        return callable(v.value)
    if isinstance(v, (BaseFunctionVariable, BoundMethodVariable, PartialVariable, UserMethodVariable)):
        return True
    if isinstance(v, (TensorVariable, BaseListVariable, DictVariable, SetVariable, IteratorVariable)):
        return False
    return any("__call__" in vars(k) for k in v.python_type().__mro__)


def _callable(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        unsupported("exceptions", "TypeError: callable() takes exactly one argument")
    return ConstantVariable(is_callable(args[0]))


def _any_all(fn):
    wanted = fn is any  # the truth value that ends the loop early

    def handler(tx, args, kwargs):
        if len(args) != 1 or kwargs:
            return None
        it = iterator_of(tx, args[0])
        while (item := it.next_item()) is not None:
            if item.truthy(tx) == wanted:
                return ConstantVariable(wanted)
        return ConstantVariable(not wanted)
    return handler


def _reduce(tx, args, kwargs):
    if kwargs:
        unsupported("exceptions", "TypeError: reduce() takes no keyword arguments")
    if not 2 <= len(args) <= 3:
        unsupported("exceptions", f"TypeError: reduce expected 2 or 3 arguments, got {len(args)}")
    fn, seq = args[0], args[1]
    it = iterator_of(tx, seq)
    result = args[2] if len(args) == 3 else None
    while (item := it.next_item()) is not None:
        result = item if result is None else fn.call_function(tx, [result, item], {})
    if result is None:
        unsupported("exceptions", "TypeError: reduce() of empty iterable with no initial value")
    return result


def _copied(make):
    """A handler of lazy_iterators, given its own list and dict of the arguments."""
    def handler(tx, args, kwargs):
        return make(tx, list(args), dict(kwargs))
    return handler


def _abs(tx, args, kwargs):
    if len(args) == 1 and isinstance(args[0], TensorVariable):
        return tx.output.call("call_function", operator.abs, args, {}, what="abs()")
    return None


def _partial(tx, args, kwargs):
    if not args:
        return None
    func = args[0]
    if isinstance(func, PartialVariable):  # partial(partial(f, a, k=1), b) is partial(f, a, b, k=1)
        return PartialVariable(func.func, func.args + list(args[1:]), {**func.keywords.items, **kwargs})
    return PartialVariable(func, args[1:], kwargs)


def _scalar_ctor(fn):
    def handler(tx, args, kwargs):
        if len(args) == 1 and isinstance(args[0], TensorVariable):
            unsupported("data_dependent", f"{fn.__name__}() of a tensor reads its value")
        return None
    return handler


def _id(tx, args, kwargs):
    """id() of an object the entry pins by identity (a module, a user object or a function
    reached from the frame): a constant under an ID_MATCH guard, as torch.compile answers
    it. Tensors and objects made in the trace decline: their identity is new each call."""
    if len(args) != 1 or kwargs or args[0].source is None:
        return None
    v = args[0]
    value = v.value if isinstance(v, UserObjectVariable) else v.fn if isinstance(v, UserFunctionVariable) else None
    if value is None:
        return None
    tx.output.guards.add(Guard("ID_MATCH", v.source, value))
    return ConstantVariable(id(value))


def _bool(tx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return ConstantVariable(args[0].truthy(tx))
    return None


_HANDLERS = {
    len: _len, isinstance: _isinstance, type: _type, tuple: _iterable_call(tuple),
    list: _iterable_call(list), set: _iterable_call(set), frozenset: _iterable_call(frozenset),
    dict: _dict, range: _range, enumerate: _enumerate, zip: _zip, reversed: _reversed,
    iter: _iter, next: _next, sum: _sum, min: _minmax(min), max: _minmax(max), abs: _abs,
    getattr: getattr_call, hasattr: hasattr_call, functools.partial: _partial,
    int: _scalar_ctor(int), float: _scalar_ctor(float), bool: _bool, math.floor: None,
    map: _copied(make_map), filter: _copied(make_filter), sorted: _sorted, callable: _callable,
    any: _any_all(any), all: _any_all(all), functools.reduce: _reduce,
    id: _id,  # (itertools.tee, chain.from_iterable, functools.cmp_to_key: registry.BUILTIN_HANDLERS)
}
# C functions outside builtins that are traced as builtins (itertools' classes are classes:
# iterutils registers their constructors).
_TRACED_C_FUNCTIONS = (functools.reduce, functools.cmp_to_key, itertools.tee)


def _is_from_iterable(value) -> bool:
    """itertools.chain.from_iterable (a new bound method on every attribute read)."""
    return type(value) is type(len) and getattr(value, "__self__", None) is itertools.chain \
        and value.__name__ == "from_iterable"
_HANDLERS = {k: v for k, v in _HANDLERS.items() if v is not None}


def is_builtin_callable(value) -> bool:
    if value is functools.partial or any(value is f for f in _TRACED_C_FUNCTIONS) or _is_from_iterable(value):
        return True
    if isinstance(value, type) and value.__module__ == "builtins":
        return True
    if type(value) is type(len) and getattr(value, "__module__", None) in ("builtins", *PURE_MODULES):
        return True
    return value in _PURE if _hashable(value) else False


def _hashable(v):
    """Whether `v` hashes, asked only of objects hashed in C: a class's own Python
    `__hash__` is user code (never run by a trace; one may read attributes `__init__` has
    not set yet), and no such object is a builtin."""
    if isinstance(type(v).__hash__, types.FunctionType):
        return False
    try:
        hash(v)
        return True
    except TypeError:
        return False


_ = builtins
