"""Operators on trackers: one table from operator name to `operator.*` function, folded
on constants, recorded as graph nodes on tensors, structural on tuples and lists."""
from __future__ import annotations

import operator

import torch

from ..exc import Unsupported, unsupported
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable, fold
from ..variables.dicts import DictVariable, DictViewVariable
from ..variables.function_modes import dispatch_operator
from ..variables.dict_keys import MIRRORED
from ..variables.sets import SetVariable
from ..variables.same_objects import note_identity
from ..variables.lists import BaseListVariable, IteratorVariable, ListVariable, TupleVariable
from ..variables.tensor import TensorVariable
from ..variables.user_objects import InstanceAttributes, user_binary, user_class, user_compare
from ..guards import Guard
from ..sources import ObjectSource
from ..variables.lists import pulled_one_by_one
from ..variables.objects import UserObjectVariable

BINARY = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
    "and_", "or_", "xor")}
INPLACE = {name: getattr(operator, "i" + name.rstrip("_")) for name in BINARY}
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "matmul": "@", "lshift": "<<", "rshift": ">>", "and_": "&", "or_": "|",
          "xor": "^"}
COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
           ">": operator.gt, ">=": operator.ge}
UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}


def _is_tensor(v):
    return isinstance(v, TensorVariable)


def _operators_of(*operands):
    """The operand that implements Python's operators itself (`owns_operators`: NumPy
    arrays and constants), if any: `v.apply_operator(tx, name, operands, inplace)`."""
    for v in operands:
        if getattr(v, "owns_operators", False):
            return v
    return None


_SET_INPLACE = {"or_": "update", "and_": "intersection_update", "sub": "difference_update",
                "xor": "symmetric_difference_update"}


def binary_op(tx, name: str, a: VariableTracker, b: VariableTracker, inplace: bool = False):
    sym = SYMBOL[name] + ("=" if inplace else "")
    own = _operators_of(a, b)
    if own is not None:
        return own.apply_operator(tx, name, [a, b], inplace)
    result = user_binary(tx, name, a, b, inplace)
    if result is not None:
        return result
    if _is_tensor(a) or _is_tensor(b):
        fn = INPLACE[name] if inplace and _is_tensor(a) else BINARY[name]
        handled = dispatch_operator(tx, fn, [a, b])
        if handled is not None:
            return handled
        return tx.output.call("call_function", fn, [a, b], {}, what=f"tensor {sym}")
    if a.is_python_constant() and b.is_python_constant() and not isinstance(
            a, (ListVariable, DictVariable)) and not isinstance(b, (ListVariable, DictVariable)):
        av, bv = a.as_python_constant(), b.as_python_constant()
        if type(av) in (tuple, frozenset) or type(bv) in (tuple, frozenset) or isinstance(
                a, SetVariable) or isinstance(b, SetVariable):
            pass  # sequences of trackers are handled structurally below
        else:
            made = fold(tx, BINARY[name], [av, bv], {}, f"{type(av).__name__} {sym} {type(bv).__name__}")
            if isinstance(made, SetVariable):  # dict views: made by CPython from what the program holds
                made.order = MIRRORED
            return made
    if isinstance(a, BaseListVariable):
        if name == "add" and isinstance(b, BaseListVariable) and type(a) is type(b):
            if inplace and isinstance(a, ListVariable):
                a.check_mutable("+=", tx)
                a.items.extend(b.items)
                return a
            if isinstance(a, ListVariable):
                return a.new_like(a.items + b.items)
            # torch.Size + tuple and tuple + torch.Size are both a torch.Size
            size = torch.Size in (a.python_type(), b.python_type())
            return TupleVariable(a.items + b.items, tuple_type=torch.Size if size else tuple)
        if name == "add" and inplace and isinstance(a, ListVariable):
            a.check_mutable("+=", tx)
            a.items.extend(pulled_one_by_one(tx, b))  # a generator body sees each append
            return a
        if name == "mul" and b.is_python_constant() and isinstance(b.as_python_constant(), int):
            n = b.as_python_constant()
            if inplace and isinstance(a, ListVariable):
                a.check_mutable("*=", tx)
                a.items[:] = a.items * n
                return a
            return a.new_like(a.items * n)
    if name == "mul" and isinstance(b, BaseListVariable) and a.is_python_constant():
        return binary_op(tx, name, b, a)
    if isinstance(a, SetVariable) and isinstance(b, SetVariable):
        if inplace and a.python_type() is set and name in _SET_INPLACE:  # s |= t changes s itself
            a.update_with(tx, _SET_INPLACE[name], [b])
            return a
        made = a.apply_set_operator(tx, name, b)
        if made is not None:
            return made
    sets = (SetVariable, DictVariable, DictViewVariable)  # a keys/items view acts as a set here
    if isinstance(a, sets) and isinstance(b, sets) and a.is_python_constant() and b.is_python_constant():
        made = fold(tx, BINARY[name], [a.as_python_constant(), b.as_python_constant()], {},
                    f"{sym} on {a.describe()}")
        if isinstance(made, SetVariable) and all(not isinstance(v, SetVariable) or v.mirrors() for v in (a, b)):
            made.order = MIRRORED  # made by CPython's own operation from what the program holds
        return made
    if isinstance(a, BaseListVariable) and name == "mod":
        pass
    if a.is_python_constant() and isinstance(a.as_python_constant(), str) and name == "mod":
        return fold(tx, operator.mod, [a.as_python_constant(), b.as_python_constant()], {}, "str %")
    unsupported("construct", f"{a.describe()} {sym} {b.describe()}")


def compare(tx, op: str, a: VariableTracker, b: VariableTracker):
    own = _operators_of(a, b)
    if own is not None:
        return own.apply_operator(tx, op, [a, b])
    result = user_compare(tx, op, a, b)
    if result is not None:
        return result
    if _is_tensor(a) or _is_tensor(b):
        handled = dispatch_operator(tx, COMPARE[op], [a, b])
        if handled is not None:
            return handled
        return tx.output.call("call_function", COMPARE[op], [a, b], {}, what=f"tensor {op}")
    if a.is_python_constant() and b.is_python_constant():
        return fold(tx, COMPARE[op], [a.as_python_constant(), b.as_python_constant()], {},
                    f"{a.describe()} {op} {b.describe()}")
    if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable) and op in ("==", "!="):
        # Item by item, identical items equal without __eq__ (as CPython compares sequences).
        equal = type(a) is type(b) and len(a.items) == len(b.items) and all(
            is_same(x, y, tx) or compare(tx, "==", x, y).truthy(tx) for x, y in zip(a.items, b.items))
        return ConstantVariable(equal if op == "==" else not equal)
    if op in _ORDERINGS and _same_sequence_kind(a, b):
        return _sequence_order(tx, op, a, b)
    if isinstance(a, DictVariable) and isinstance(b, DictVariable) and op in ("==", "!="):
        equal = a.equals(tx, b)  # values as CPython compares them; two OrderedDicts by order too
        return ConstantVariable(equal if op == "==" else not equal)
    if op in ("==", "!="):
        # Without a user __eq__/__ne__ on either side (user_compare), == falls back to identity.
        for v in (a, b):
            dunder = "__eq__" if op == "==" else "__ne__"
            if isinstance(v, UserObjectVariable) and getattr(type(v.value), dunder) is not getattr(object, dunder):
                unsupported("call", f"{type(v.value).__qualname__}.{dunder} is not traced")
        same = is_same(a, b, tx)
        if same is not None:
            return ConstantVariable(same if op == "==" else not same)
    unsupported("construct", f"comparing {a.describe()} {op} {b.describe()}")


_ORDERINGS = ("<", "<=", ">", ">=")


def _same_sequence_kind(a, b) -> bool:
    """Two tuples (named or not) or two lists: what CPython orders item by item."""
    return (isinstance(a, TupleVariable) and isinstance(b, TupleVariable)) or (
        type(a) is ListVariable and type(b) is ListVariable)


def _sequence_order(tx, op: str, a, b):
    """CPython's sequence ordering: the first pair of items that are not identical and not
    equal (`==` read as a bool, as CPython does) decides with `op`; if one sequence runs
    out first, the lengths decide."""
    for x, y in zip(a.items, b.items):
        if is_same(x, y, tx) or compare(tx, "==", x, y).truthy(tx):
            continue
        return compare(tx, op, x, y)
    return ConstantVariable(COMPARE[op](len(a.items), len(b.items)))


def is_same(a: VariableTracker, b: VariableTracker, tx=None):
    """`a is b` when it can be decided at trace time, else None."""
    if a is b:
        return True
    if a.is_python_constant() and b.is_python_constant():
        try:
            same = a.as_python_constant() is b.as_python_constant()
        except Exception:
            return None
        if tx is not None and (getattr(a, "by_code", False) or getattr(b, "by_code", False)):
            # functions made per call are guarded by their code, not identity: pin the answer
            note_identity(tx, a.source, a.as_python_constant())
            note_identity(tx, b.source, b.as_python_constant())
        return same
    if _is_tensor(a) and _is_tensor(b):
        if a.node is b.node:
            return True
        if tx is None:
            return None
        if tx.output.picked(a) or tx.output.picked(b):
            unsupported("data_dependent", "`is` on a tensor min()/max() picked by a tensor comparison "
                                          "(eager's pick is one of the candidates)")
        # Two graph inputs: the answer is whether the caller passed one object twice,
        # which the next call may not do: guard it.
        ea, eb = tx.output.example_of(a), tx.output.example_of(b)
        if ea is None or eb is None:
            return False  # a computed tensor is never an input (in-place results are their input's tracker)
        same = ea is eb
        tx.output.guards.add(Guard("ALIAS_MATCH", a.source, same, {"other": b.source}))
        return same
    if a.is_python_constant() or b.is_python_constant():
        # A constant (None, a class...) is never a list, tensor or function made in the trace.
        c = a if a.is_python_constant() else b
        other = b if c is a else a
        if isinstance(other, (TensorVariable, BaseListVariable, DictVariable)):
            return False
        if c.as_python_constant() is None:
            return False
    if isinstance(a, UserObjectVariable) and isinstance(b, UserObjectVariable):
        same = a.value is b.value
        if tx is not None and (a.source is not None or b.source is not None):  # `e is Color.RED`
            tx.output.guards.add(Guard("ALIAS_MATCH", a.source or ObjectSource(a.value, a.describe()), same,
                                       {"other": b.source or ObjectSource(b.value, b.describe())}))
        return same
    if isinstance(a, InstanceAttributes) or isinstance(b, InstanceAttributes):
        return False  # an object made in the trace is itself only (a is b was caught above)
    # One object has one type: trackers of different Python types are different objects.
    # (Two trackers of one type may stand for one object reached two ways: undecided.)
    try:
        ta, tb = a.python_type(), b.python_type()
    except Unsupported:
        return None
    return False if ta is not tb else None


def contains(tx, container: VariableTracker, item: VariableTracker):
    custom = getattr(container, "contains", None)  # `name in os.environ`
    if custom is not None:
        return custom(tx, item)
    if isinstance(container, (DictVariable, SetVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    if _is_tensor(container):
        unsupported("data_dependent", "`in` on a tensor reads its data")
    if user_class(container) is not None:
        return ConstantVariable(container.call_method(tx, "__contains__", [item], {}).truthy(tx))
    if container.is_python_constant() and item.is_python_constant() and not isinstance(container, BaseListVariable):
        return fold(tx, operator.contains, [container.as_python_constant(), item.as_python_constant()], {}, "in")
    # An iterator (a generator too) is pulled one item at a time: CPython stops at the match.
    items = iter(container.next_item, None) if isinstance(container, IteratorVariable) else container.iter_items(tx)
    for x in items:
        if is_same(x, item, tx) or compare(tx, "==", x, item).truthy(tx):
            return ConstantVariable(True)
    return ConstantVariable(False)


def getitem(tx, obj: VariableTracker, key: VariableTracker):
    if _is_tensor(obj):
        return obj.call_method(tx, "__getitem__", [key], {})
    custom = getattr(obj, "getitem", None)  # containers, kernel[grid]
    if custom is not None:
        return custom(tx, key)
    if obj.is_python_constant() and key.is_python_constant():
        return fold(tx, operator.getitem, [obj.as_python_constant(), key.as_python_constant()], {}, "[]")
    return obj.call_method(tx, "__getitem__", [key], {})


def setitem(tx, obj: VariableTracker, key: VariableTracker, value: VariableTracker):
    if _is_tensor(obj):
        obj.call_method(tx, "__setitem__", [key, value], {})
    elif callable(getattr(obj, "setitem", None)):  # lists, dicts, deques, arrays: their own models
        obj.setitem(tx, key, value)
    elif user_class(obj) is not None:  # a class with __setitem__ (in Python)
        obj.call_method(tx, "__setitem__", [key, value], {})
    else:
        unsupported("side_effect" if obj.source is not None else "construct",
                    f"item assignment on {obj.describe()}")


def unary_op(tx, name: str, a: VariableTracker):
    if _operators_of(a) is not None:
        return a.apply_operator(tx, name, [a])
    if user_class(a) is not None and name in UNARY:
        return a.call_method(tx, f"__{name}__", [], {})
    if _is_tensor(a):
        handled = dispatch_operator(tx, UNARY[name], [a])
        if handled is not None:
            return handled
        return tx.output.call("call_function", UNARY[name], [a], {}, what=f"tensor unary {name}")
    if a.is_python_constant():
        return fold(tx, UNARY[name], [a.as_python_constant()], {}, f"unary {name}")
    unsupported("construct", f"unary {name} of {a.describe()}")
