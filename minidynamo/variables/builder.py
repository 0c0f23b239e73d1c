"""VariableBuilder: a real value read from the frame → a tracker, plus the guards that
pin what the trace may assume about it. Also wraps values the trace itself produced
(fake op results, folded constants), which need no guards."""
from __future__ import annotations

import contextlib
import enum
import functools
import sys
import types

import torch

from ..dynamic import has_symbolic
from ..exc import READS_FRAME, unsupported
from ..guards import Guard
from ..sources import AttrSource, ItemSource, IteratorSource, LocalSource, iterator_state
from .autograd import FunctionApplyVariable, is_function_apply
from .builtins import BuiltinVariable, is_builtin_callable
from .constant import ConstantVariable, is_constant_value
from .contexts import GradModeExit, null_exit, wrap_exit
from .dicts import DictVariable
from .enums import wrap_member
from .sets import SetVariable
from .cached_functions import CachedFunctionVariable
from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
from .library_contexts import ContextManagerDecoratorVariable
from .lists import IteratorVariable, ListVariable, TupleVariable
from .namedtuples import is_plain_tuple_type
from .objects import ClassVariable, ModuleVariable, UserObjectVariable
from .tensor import TensorVariable, size_variable
from .torch import TorchVariable, is_torch_object
from .torch_queries import query_of
from .typing_forms import TypeHintVariable, is_type_hint
from .attribute_protocols import own_setattr
from .functions import BoundMethodVariable
from .symbolic import SymNodeVariable, specialise


def wrap(tx, value, source):
    """Wrap a real value. With a source, guards are installed and the result is memoized
    per source, so a list read twice is one tracker (aliasing preserved)."""
    if source is None:
        return _wrap(tx, value, None)
    memo = tx.output.wrapped
    hit = memo.get(source)
    if hit is not None and hit[0] is value:
        return hit[1]
    if type(value) in (list, dict) or _shared_object(value):  # one object reached by two names is one tracker
        seen = tx.output.containers.get(id(value))
        if seen is not None and seen[0] is value:
            _guard(tx, "ALIAS_MATCH", source, True, other=seen[2])
            memo[source] = (value, seen[1])
            return seen[1]
    var = _wrap(tx, value, source)
    memo[source] = (value, var)
    if type(value) in (list, dict) or _shared_object(value) and isinstance(var, UserObjectVariable):
        tx.output.containers[id(value)] = (value, var, source)
    return var


def _shared_object(value) -> bool:
    """An object of a user class with a __setattr__ of its own (a config): its writes are kept on one tracker."""
    return not isinstance(value, (type, torch.nn.Module, torch.Tensor)) and type(value).__module__ != "builtins" \
        and hasattr(type(value), "__dict__") and own_setattr(type(value)) is not None


def _is_argument(source) -> bool:
    """An argument of the frame, an item of one (a tuple of sizes), or what a closure passed
    as one closes over (`g.__closure__[0].cell_contents`): the ints torch.compile makes
    dynamic too (not globals, the frame's own closure or attributes of objects)."""
    while True:
        if isinstance(source, ItemSource):
            source = source.base
        elif isinstance(source, AttrSource) and source.attr == "cell_contents" \
                and isinstance(source.base, ItemSource) and isinstance(source.base.base, AttrSource) \
                and source.base.base.attr == "__closure__":
            source = source.base.base.base
        else:
            return isinstance(source, LocalSource)


def _guard(tx, kind, source, expected=None, **meta):
    if source is not None:
        tx.output.guards.add(Guard(kind, source, expected, meta))


def _wrap(tx, value, source):
    if isinstance(value, torch.Tensor):
        if source is None:
            unsupported("construct", "a tensor that is not reachable from the function's inputs, "
                                     "globals or closures")
        if torch._C._functorch.peek_interpreter_stack() is not None:
            # Its tensors are functorch's wrappers (batched, grad-tracking): not traced. The
            # entries traced outside the transform miss on them (their dispatch keys differ).
            unsupported("construct", "a tensor inside a torch.func transform (vmap, grad, jvp) is not traced")
        return tx.output.add_input(source, value)
    if type(value) is torch.Size:
        _guard(tx, "EQUALS_MATCH", source, value)
        return size_variable(value)
    if type(value) in (int, float) and _is_argument(source):
        var = tx.output.add_int_input(source, value)  # symbolic where the policy says so
        if var is not None:
            _guard(tx, "TYPE_MATCH", source, type(value), symbol=str(var.sym))
            return var
    if is_constant_value(value) and type(value) is not tuple and type(value) is not frozenset:
        _guard(tx, "EQUALS_MATCH", source, value)
        return ConstantVariable(value, source)
    # registry.WRAPPERS: the models of real values kept with their trackers (the registry
    # imports every tracker module, and they import wrap from here: reached through tx)
    for predicate, factory, identity in tx.registry.WRAPPERS:
        if predicate(value):
            if identity:
                _guard(tx, "ID_MATCH", source, value)
            return factory(tx, value, source)
    if (isinstance(value, tuple) and is_plain_tuple_type(type(value))) or type(value) is list:
        def items():  # run when the trace first looks inside (the length guard with it)
            _guard(tx, "LEN_MATCH", source, len(value), type=type(value))
            return [wrap(tx, v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
        if source is None:
            return TupleVariable(items(), None, tuple_type=type(value)) if isinstance(value, tuple) \
                else ListVariable(items())
        _guard(tx, "TYPE_MATCH", source, type(value))
        if isinstance(value, tuple):
            return TupleVariable((), source, tuple_type=type(value), lazy=items, size=len(value))
        return ListVariable((), source, lazy=items, size=len(value))
    if type(value) is dict:
        # Keys hashed by value (torch.Size too), or classes (hashed and compared by identity:
        # a dict from types to backends, handlers...). Others (tensors, modules hashed by
        # identity): identity_keys.py.
        if not all(is_constant_value(k) or type(k) is torch.Size or _identity_hashed_class(k) for k in value):
            return tx.registry.DICT_WITH_OBJECT_KEYS(tx, value, source)

        def entries():
            # a snapshot: wrapping a value may import a module (sys.modules grows meanwhile)
            items = tuple(value.items())
            _guard(tx, "DICT_KEYS", source, tuple(k for k, _ in items), type=dict)
            return {k: wrap(tx, v, ItemSource(source, k) if source else None) for k, v in items}
        if source is None:
            return DictVariable(entries())
        _guard(tx, "TYPE_MATCH", source, dict)
        return DictVariable({}, source, lazy=entries, size=len(value), real=value)
    if type(value) in (set, frozenset) and all(is_constant_value(v) for v in value):
        if source is None and type(value) is frozenset:  # a constant of the code: that very object
            return SetVariable(shadow=value, set_type=frozenset)
        # A set changes in place: guard and trace its members now, in their order (equal sets
        # made otherwise iterate otherwise).
        order = tuple(value)
        _guard(tx, "DICT_KEYS", source, order, type=type(value))
        return SetVariable(set(order), source, set_type=type(value), order=order if source else None)
    if type(value) is functools.partial:  # a subclass may call otherwise: modeled as an object
        _guard(tx, "TYPE_MATCH", source, type(value))
        if source is not None:
            _guard(tx, "LEN_MATCH", AttrSource(source, "args"), len(value.args), type=tuple)
        sub = (lambda a: AttrSource(source, a)) if source else (lambda a: None)
        func = wrap(tx, value.func, sub("func"))
        args = [wrap(tx, v, ItemSource(sub("args"), i) if source else None) for i, v in enumerate(value.args)]
        # The real keywords dict, guarded and written back as any dict passed in.
        kw = wrap(tx, value.keywords, sub("keywords")) if source else {
            k: wrap(tx, v, None) for k, v in value.keywords.items()}
        return PartialVariable(func, args, kw, source, real=value if source is not None else None)
    if isinstance(value, functools._lru_cache_wrapper) and isinstance(
            getattr(value, "__wrapped__", None), types.FunctionType):
        _guard(tx, "ID_MATCH", source, value)
        return CachedFunctionVariable(value, source)
    if value is contextlib.contextmanager:  # applied in the trace (library_contexts.py)
        _guard(tx, "ID_MATCH", source, value)
        return ContextManagerDecoratorVariable()
    if isinstance(value, types.FunctionType) and is_torch_object(value) and query_of(value) is not None:
        _guard(tx, "ID_MATCH", source, value)  # a torch query reached by name: answered, not inlined
        return TorchVariable(value, source)
    if isinstance(value, types.FunctionType):
        if source is not None and _made_per_call(value):
            # A lambda or inner def is a new object on every call (one handed to a resume
            # function, too): pin what the trace uses of it, not its identity; the contents
            # of its cells are read (and guarded) through it when the trace uses them.
            _guard(tx, "TYPE_MATCH", source, types.FunctionType)
            _guard(tx, "ID_MATCH", AttrSource(source, "__code__"), value.__code__)
            _guard(tx, "ID_MATCH", AttrSource(source, "__globals__"), value.__globals__)
            _guard(tx, "EQUALS_MATCH", AttrSource(source, "__defaults__"), value.__defaults__)
            _guard(tx, "EQUALS_MATCH", AttrSource(source, "__kwdefaults__"), value.__kwdefaults__)
            _guard(tx, "EQUALS_MATCH", AttrSource(source, "__dict__"), {})
            return UserFunctionVariable(value, source, by_code=True)
        _guard(tx, "ID_MATCH", source, value)
        return UserFunctionVariable(value, source)
    if is_function_apply(value):  # `my_op = MyFunction.apply` at import
        _guard(tx, "TYPE_MATCH", source, type(value))
        cls_source = AttrSource(source, "__self__") if source is not None else None
        if source is not None:
            _guard(tx, "ID_MATCH", cls_source, value.__self__)
            _guard(tx, "EQUALS_MATCH", AttrSource(source, "__name__"), "apply")
        return FunctionApplyVariable(value.__self__, source, cls_source)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        _guard(tx, "TYPE_MATCH", source, types.MethodType)
        func = wrap(tx, value.__func__, AttrSource(source, "__func__") if source else None)
        obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        return UserMethodVariable(func, obj, source)
    if type(value) in _GRAD_MODE_MANAGERS:
        # `torch.no_grad()` handed in (`with ctx:`): an object of torch's Python class, whose
        # __enter__/__exit__ are inlined as a user manager's (its `prev` written back).
        _guard(tx, "TYPE_MATCH", source, type(value))
        return UserObjectVariable(value, source)
    # An nn.Module instance (torch's own included) is an object whose forward is inlined.
    if is_torch_object(value) and (callable(value) or isinstance(value, types.ModuleType)) \
            and not isinstance(value, torch.nn.Module):
        _guard(tx, "ID_MATCH", source, value)
        if isinstance(value, type) and not issubclass(value, torch.Tensor) and not is_builtin_callable(value):
            if issubclass(value, torch.nn.Module):
                return ClassVariable(value, source)
        return TorchVariable(value, source)
    if type(value) is types.BuiltinMethodType and type(getattr(value, "__self__", None)) in (list, dict) \
            and source is not None:  # `lst.append` handed over a graph break
        _guard(tx, "TYPE_MATCH", source, types.BuiltinMethodType)
        _guard(tx, "EQUALS_MATCH", AttrSource(source, "__name__"), value.__name__)
        return BoundMethodVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)
    if value is sys._getframe or value is getattr(sys, "_getframemodulename", None):
        unsupported("construct", f"sys.{value.__name__} is not traced", no_break=READS_FRAME)
    if is_builtin_callable(value):
        _guard(tx, "ID_MATCH", source, value)
        return BuiltinVariable(value, source)
    if isinstance(value, types.ModuleType):
        _guard(tx, "ID_MATCH", source, value)
        return ModuleVariable(value, source)
    if isinstance(value, type):
        _guard(tx, "ID_MATCH", source, value)
        return ClassVariable(value, source)
    if isinstance(value, GradModeExit) or value is null_exit:  # a region split by a graph break
        _guard(tx, "TYPE_MATCH", source, type(value))
        if isinstance(value, GradModeExit):
            _guard(tx, "EQUALS_MATCH", AttrSource(source, "prev"), value.prev)
        else:
            _guard(tx, "ID_MATCH", source, value)
        return wrap_exit(value)
    if type(value) in _ITERATORS and source is not None:
        return _wrap_iterator(tx, value, source)
    if isinstance(value, (types.GeneratorType, types.CoroutineType)):
        unsupported("generator", f"a {type(value).__name__} object")
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        unsupported("call", f"C function {getattr(value, '__qualname__', value)!r} is not traced")
    if type(value).__module__ == "builtins" and not hasattr(value, "__dict__"):
        unsupported("construct", f"a {type(value).__name__} object is not traced")
    _guard(tx, "TYPE_MATCH", source, type(value))
    return UserObjectVariable(value, source)


_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))
_GRAD_MODE_MANAGERS = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def _identity_hashed_class(k) -> bool:
    """A class whose metaclass keeps type's identity __eq__ and __hash__."""
    import typing
    return isinstance(k, type) and type(k).__eq__ is type.__eq__ and type(k).__hash__ is type.__hash__ \
        or isinstance(k, typing._SpecialForm)


def _made_per_call(fn) -> bool:
    """A nested function (`f.<locals>.g`, a lambda, 3.10's `<listcomp>`) whose defaults are
    constants and that carries no attributes: its code, globals, defaults and the contents
    of its cells (read through it) say all a trace uses of it."""
    return "<" in fn.__qualname__ and not fn.__dict__ and all(is_constant_value(d) for d in (fn.__defaults__ or ())) \
        and all(is_constant_value(d) for d in (fn.__kwdefaults__ or {}).values())


def _wrap_iterator(tx, value, source):
    """A list, tuple or range iterator (a resume function gets the loop's iterator): the
    sequence it walks, guarded like any value, and its position, guarded by value. One
    object reached twice is one tracker (advancing it through either name is one walk)."""
    seen = tx.output.iterators
    for other_source, (obj, var) in seen.items():
        _guard(tx, "ALIAS_MATCH", source, obj is value, other=other_source)
        if obj is value:
            return var
    _guard(tx, "TYPE_MATCH", source, type(value))
    seq, pos = iterator_state(value)
    seq_var = wrap(tx, seq, IteratorSource(source, "seq"))
    _guard(tx, "EQUALS_MATCH", IteratorSource(source, "pos"), pos)
    if isinstance(seq_var, ListVariable):
        var = IteratorVariable(seq_var.items, owner=seq_var)
    else:
        var = IteratorVariable(list(seq_var.iter_items(tx)))
    var.index = pos
    var.source = source  # the real iterator: advanced after the graph as the trace advanced it (side_effects.py)
    seen[source] = (value, var)
    return var


def wrap_fake_result(output, node, result, what: str):
    """A fake op result → trackers; tuples of tensors are split with getitem nodes."""
    if isinstance(result, torch.Tensor):
        return TensorVariable(node, result)
    if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        if node is not None:
            return SymNodeVariable(node, result)
        return ConstantVariable(specialise(result))  # no node: a value the environment knows
    if type(result) is torch.Size and not (node is not None and has_symbolic(result)):
        return size_variable(result)
    if isinstance(result, (tuple, list)):
        items = []
        for i, r in enumerate(result):
            if isinstance(r, torch.Tensor):
                items.append(TensorVariable(output.getitem_node(node, i), r))
            elif node is not None and has_symbolic(r):
                items.append(SymNodeVariable(output.getitem_node(node, i), r))
            elif node is None or not isinstance(r, (tuple, list)):
                items.append(wrap_fake_result(output, None, r, what))
            else:
                unsupported("torch_op", f"{what} returned nested sequences")
        if isinstance(result, list):
            return ListVariable(items)
        fields = getattr(type(result), "__match_args__", None) if type(result) is not tuple else None
        plain = torch.Size if type(result) is torch.Size else tuple
        return TupleVariable(items, tuple_type=plain) if fields is None else \
            NamedResultVariable(items, fields, type(result))
    if is_constant_value(result):
        return ConstantVariable(result)
    unsupported("torch_op", f"{what} returned a {type(result).__name__}")


class NamedResultVariable(TupleVariable):
    """torch.return_types (values, indices): a tuple whose fields are also attributes."""

    __slots__ = ("fields",)

    def __init__(self, items, fields, result_type=tuple):
        super().__init__(items, tuple_type=result_type)  # returned as torch.return_types.*
        self.fields = tuple(fields)

    def var_getattr(self, tx, name):
        if name in self.fields:
            return self.items[self.fields.index(name)]
        return super().var_getattr(tx, name)


# --- torch.return_types (C struct sequences) -----------------------------------------------
def is_structseq(cls) -> bool:
    """A struct sequence type of torch's op results (`torch.return_types.max`)."""
    return isinstance(cls, type) and issubclass(cls, tuple) and cls.__module__ == "torch.return_types" \
        and hasattr(cls, "n_sequence_fields")


def make_structseq(tx, cls, args, kwargs):
    """`torch.return_types.max((values, indices))`: a tuple of that type over the items."""
    if kwargs or len(args) != 1 or not isinstance(args[0], (TupleVariable, ListVariable)) \
            or cls.n_fields != cls.n_sequence_fields:
        return None
    items = list(args[0].items)
    if len(items) != cls.n_fields:
        unsupported("exceptions", f"TypeError: {cls.__qualname__}() takes a {cls.n_fields}-sequence "
                                  f"({len(items)}-sequence given)")
    return NamedResultVariable(items, cls.__match_args__, cls)


def wrap_constant_result(result, what: str, tx=None):
    """The result of folding a pure function on constants (with `tx`, an enum member too:
    `Color['RED']`, a fixed object held by identity)."""
    if is_constant_value(result) and type(result) is not tuple:
        return ConstantVariable(result)
    if isinstance(result, tuple):
        return TupleVariable([wrap_constant_result(r, what, tx) for r in result], tuple_type=type(result)
                             if type(result) is not tuple else tuple)
    if type(result) is list:
        return ListVariable([wrap_constant_result(r, what, tx) for r in result])
    if type(result) is dict:
        return DictVariable({k: wrap_constant_result(v, what, tx) for k, v in result.items()})
    if type(result) in (set, frozenset):
        made = SetVariable(shadow=result, set_type=type(result))  # the table CPython made
        made.order = None  # whether it is the program's depends on what it was made from
        return made
    if isinstance(result, type):
        return ClassVariable(result)
    if is_builtin_callable(result):
        return BuiltinVariable(result)
    if isinstance(result, (torch.finfo, torch.iinfo)):
        return ConstantVariable(result)
    if tx is not None and isinstance(result, enum.Enum):
        return wrap_member(tx, result)
    if is_type_hint(result):  # `tuple[int, ...]`, `A | B` in an annotation or a cast()
        return TypeHintVariable(result)
    if type(result) in _SEQUENCE_ITERATORS:  # `range(3).__iter__()`: a new iterator over constants
        seq, pos = iterator_state(result)
        if len(seq) - pos <= 4096:
            return IteratorVariable([wrap_constant_result(v, what, tx) for v in list(seq)[pos:]])
    unsupported("construct", f"{what} returned a {type(result).__name__}, which is not traced")


_SEQUENCE_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))

