"""Python builtins (len, isinstance, range, zip, min, ...) and pure functions from
math/operator: folded on constants, turned into graph ops on tensors where that is
what CPython would do (abs(x), sum of tensors, operator.add on tensors)."""
from __future__ import annotations

import builtins
import functools
import math
import operator

from ..exc import READS_FRAME, unsupported
from .base import ObjectConstantVariable
from .constant import ConstantVariable, fold
from .dicts import DictVariable, SetVariable
from .lists import IteratorVariable, ListVariable, PulledItems, ReversedItems, TupleVariable, iterator_of
from .tensor import TensorVariable

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


class BuiltinVariable(ObjectConstantVariable):
    """A Python builtin or pure function used as a value."""

    def describe(self):
        return f"builtin {getattr(self.value, '__name__', self.value)!r}"

    def var_getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(self.value.__name__)
        if isinstance(self.value, type) and hasattr(self.value, name):
            attr = getattr(self.value, name)
            from .builder import wrap
            return wrap(tx, attr, None)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        if isinstance(fn, type) and issubclass(fn, BaseException):  # only ever made to be raised
            unsupported("exceptions", f"raising {fn.__name__} (the eager run raises it)")
        handler = _HANDLERS.get(fn)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if fn in _OPERATOR_BINARY and len(args) == 2 and not kwargs:
            from ..interpreter.operators import binary_op
            return binary_op(tx, _OPERATOR_BINARY[fn], args[0], args[1])
        if fn in _OPERATOR_COMPARE and len(args) == 2 and not kwargs:
            from ..interpreter.operators import compare
            return compare(tx, _OPERATOR_COMPARE[fn], args[0], args[1])
        if fn is operator.getitem and len(args) == 2:
            from ..interpreter.operators import getitem
            return getitem(tx, args[0], args[1])
        if fn is operator.neg and len(args) == 1:
            from ..interpreter.operators import unary_op
            return unary_op(tx, "neg", args[0])
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
        return ConstantVariable(int(obj.fake.shape[0]))
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
    t = _python_type_of(tx, obj)
    try:
        return ConstantVariable(issubclass(t, cls))
    except TypeError as e:
        unsupported("exceptions", f"TypeError: {e}")


def _type(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    from .builder import wrap
    return wrap(tx, _python_type_of(tx, args[0]), None)


def _iterable_call(ctor):
    def handler(tx, args, kwargs):
        if kwargs or len(args) > 1:
            return None
        items = args[0].iter_items(tx) if args else []
        if ctor is tuple:
            return TupleVariable(items)
        if ctor is list:
            return ListVariable(items)
        if ctor is set or ctor is frozenset:
            s = SetVariable(set_type=ctor)
            for i in items:
                s.values.add(i.as_python_constant())
            return s
        return None
    return handler


def _dict(tx, args, kwargs):
    d = DictVariable({})
    if len(args) > 1:
        return None
    if args:
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
    return IteratorVariable(PulledItems([iterator_of(tx, args[0])],
                                        lambda i, parts: TupleVariable([ConstantVariable(start + i), parts[0]])))


def _zip(tx, args, kwargs):
    strict = kwargs.get("strict")
    if set(kwargs) - {"strict"}:
        return None
    if strict is not None and strict.as_python_constant():
        lists = [a.iter_items(tx) for a in args]  # read at once: the lengths are compared first
        if len({len(x) for x in lists}) > 1:
            unsupported("exceptions", "ValueError: zip() arguments have different lengths")
        return IteratorVariable([TupleVariable(list(t)) for t in zip(*lists)])
    iterators = [iterator_of(tx, a) for a in args]
    if not iterators:
        return IteratorVariable([])
    return IteratorVariable(PulledItems(iterators, lambda i, parts: TupleVariable(list(parts))))


def _reversed(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    (seq,) = args
    if isinstance(seq, ListVariable):
        return IteratorVariable(ReversedItems(seq.items))
    reverse = getattr(seq, "reversed_items", None)  # dicts and their views
    if reverse is not None:
        return IteratorVariable(reverse(tx))
    return IteratorVariable(list(reversed(seq.iter_items(tx))))


def _iter(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
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
    from ..interpreter.operators import binary_op
    items = args[0].iter_items(tx)
    acc = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in items:
        acc = binary_op(tx, "add", acc, item)
    return acc


def _minmax(fn):
    def handler(tx, args, kwargs):
        if kwargs:
            return None
        items = args[0].iter_items(tx) if len(args) == 1 else list(args)
        if all(i.is_python_constant() for i in items):
            return fold(tx, fn, [[i.as_python_constant() for i in items]], {}, f"{fn.__name__}()")
        unsupported("data_dependent", f"{fn.__name__}() over tensors compares tensor values")
    return handler


def _abs(tx, args, kwargs):
    if len(args) == 1 and isinstance(args[0], TensorVariable):
        return tx.output.call("call_function", operator.abs, args, {}, what="abs()")
    return None


def _getattr(tx, args, kwargs):
    if len(args) not in (2, 3) or not args[1].is_python_constant():
        return None
    from ..exc import Unsupported
    name = args[1].as_python_constant()
    if len(args) == 3:
        try:
            return args[0].var_getattr(tx, name)
        except Unsupported as e:
            if e.category == "exceptions" and "AttributeError" in e.detail:
                return args[2]
            raise
    return args[0].var_getattr(tx, name)


def _hasattr(tx, args, kwargs):
    if len(args) != 2 or not args[1].is_python_constant():
        return None
    from ..exc import Unsupported
    try:
        args[0].var_getattr(tx, args[1].as_python_constant())
        return ConstantVariable(True)
    except Unsupported as e:
        if e.category == "exceptions" and "AttributeError" in e.detail:
            return ConstantVariable(False)
        raise


def _partial(tx, args, kwargs):
    if not args:
        return None
    from .functions import PartialVariable
    return PartialVariable(args[0], args[1:], kwargs)


def _scalar_ctor(fn):
    def handler(tx, args, kwargs):
        if len(args) == 1 and isinstance(args[0], TensorVariable):
            unsupported("data_dependent", f"{fn.__name__}() of a tensor reads its value")
        return None
    return handler


def _bool(tx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return ConstantVariable(args[0].truthy(tx))
    return None


_HANDLERS = {
    len: _len, isinstance: _isinstance, type: _type, tuple: _iterable_call(tuple),
    list: _iterable_call(list), set: _iterable_call(set), frozenset: _iterable_call(frozenset),
    dict: _dict, range: _range, enumerate: _enumerate, zip: _zip, reversed: _reversed,
    iter: _iter, next: _next, sum: _sum, min: _minmax(min), max: _minmax(max), abs: _abs,
    getattr: _getattr, hasattr: _hasattr, functools.partial: _partial,
    int: _scalar_ctor(int), float: _scalar_ctor(float), bool: _bool, math.floor: None,
}
_HANDLERS = {k: v for k, v in _HANDLERS.items() if v is not None}


def is_builtin_callable(value) -> bool:
    if value is functools.partial:
        return True
    if isinstance(value, type) and value.__module__ == "builtins":
        return True
    if type(value) is type(len) and getattr(value, "__module__", None) in ("builtins", *PURE_MODULES):
        return True
    return value in _PURE if _hashable(value) else False


def _hashable(v):
    try:
        hash(v)
        return True
    except TypeError:
        return False


_ = builtins
