"""NumPy functions, methods, attributes, indexing and operators in a trace: what each
becomes (a folded constant, a checked graph node: numpy_calls.py, a decline)."""
from __future__ import annotations

import operator

import numpy as np

from ..exc import attribute_error, unsupported
from .numpy_calls import (
    METHODS, NOT_CONSTANT, SIZE_ARGS, Arguments, Attribute, Method, NumpyNode, Slot, Spec, Strong,
    has_slot, quiet, small_size, spec_of,
)
from .numpy_checks import Expected, Result, check_call, check_values, dry_run, numpy_on, record, run_call
from .constant import ConstantVariable
from .lists import TupleVariable, ListVariable
from .numpy_calls import TORCH_OF
from .numpy_interop import (
    NumpyConstantVariable, NumpyNdarrayVariable, numpy_constant_of, numpy_constant_variable, refuse_write,
    tensor_to_ndarray,
)
from .tensor import TensorVariable


def is_random(fn) -> bool:
    owner = getattr(fn, "__self__", None)
    return (getattr(fn, "__module__", None) or "").startswith("numpy.random") or \
        isinstance(owner, (np.random.RandomState, np.random.Generator))


# Functions of constants only, folded: their results are immutable values.
_FOLDED = ("iinfo", "finfo", "dtype", "result_type", "promote_types", "can_cast", "issubdtype",
           "isscalar", "min_scalar_type")


def _is_folded(fn) -> bool:
    return any(getattr(np, n, None) is fn for n in _FOLDED) or (
        isinstance(fn, type) and issubclass(fn, np.generic))


def _constants(args, kwargs):
    pargs = [numpy_constant_of(a) for a in args]
    pkwargs = {k: numpy_constant_of(v) for k, v in kwargs.items()}
    if any(a is NOT_CONSTANT for a in (*pargs, *pkwargs.values())):
        return None

    def plain(v):
        return v.value if isinstance(v, Strong) else v
    return [plain(a) for a in pargs], {k: plain(v) for k, v in pkwargs.items()}


def fold_constant_call(fn, args, kwargs, what: str):
    """`fn(*args, **kwargs)` on constants, folded (fn is pure: a NumPy function of
    constants, a method of a NumPy constant, an operator)."""
    plain = _constants(args, kwargs)
    if plain is None:
        unsupported("call", f"{what} on values that are not constants is not traced")
    try:
        result = quiet(fn, *plain[0], **plain[1])
    except Exception as e:  # noqa: BLE001 - eager raises it
        unsupported("exceptions", f"{what} raised {type(e).__name__}: {e}", raised=attribute_error(e))
    return numpy_constant_variable(result, what)


def split_arguments(tx, args, kwargs, what: str) -> Arguments:
    """The call's arguments as a template of plain values, Slots for arrays and Strong
    NumPy scalars; declines anything else (a torch tensor, an object)."""
    arrays: list = []

    def convert(v):
        if isinstance(v, NumpyNdarrayVariable):
            arrays.append(v)
            return Slot(len(arrays) - 1, v.scalar)
        if isinstance(v, (TupleVariable, ListVariable)) and v.python_type() in (tuple, list):
            items = [convert(i) for i in v.items]
            return items if isinstance(v, ListVariable) else tuple(items)
        value = numpy_constant_of(v)
        if value is not NOT_CONSTANT:
            return value
        if isinstance(v, TensorVariable):
            unsupported("call", f"{what} with a torch.Tensor argument is not traced (NumPy would "
                                "convert the tensor to an array, reading its data)",
                        hint="convert it with .numpy() first, or call the torch function")
        unsupported("call", f"{what} with a {v.describe()} argument is not traced")

    return Arguments([convert(a) for a in args], {k: convert(v) for k, v in kwargs.items()}, arrays)


def _check_keywords(kwargs: dict, what: str):
    for key in ("out", "where"):
        if key in kwargs:
            unsupported("call", f"{what} with {key}= is not traced")


def call_function(tx, fn, args, kwargs):
    """`fn(*args, **kwargs)` for a NumPy function `fn`."""
    name = getattr(fn, "__name__", repr(fn))
    what = f"{getattr(fn, '__module__', None) or 'numpy'}.{name}()"
    if is_random(fn):
        unsupported("side_effect", f"{what} reads and advances NumPy's global random state: it runs "
                                   "natively, as in eager (a trace never runs it)",
                    hint="pass the random array in as an argument to keep one graph")
    if _is_folded(fn):
        return fold_constant_call(fn, args, kwargs, what)
    found = spec_of(fn)
    if found is None:
        unsupported("call", f"{what} is not traced (no model of it in the NumPy support)")
    spec, tnp_fn, dotted = found
    short = dotted.rpartition(".")[2]
    _check_keywords(kwargs, what)
    if short == "asarray" and len(args) == 1 and not kwargs and isinstance(args[0], NumpyNdarrayVariable) \
            and not args[0].scalar:
        return args[0]  # the array itself, as NumPy returns it
    if short in _LIKE and _is_tensor(args[0] if args else kwargs.get("a")):
        return _like_tensor(tx, short, args, kwargs, what)
    call = split_arguments(tx, args, kwargs, what)
    label = "numpy_" + dotted.removeprefix("numpy.").replace(".", "_")
    if not call.arrays and short == "arange":
        return _arange(tx, label, tnp_fn, call, what)
    if not call.arrays and short not in SIZE_ARGS:
        # Only constants: NumPy's own answer. A scalar is a folded constant; an array is
        # made by the graph (arrays are mutable: never constants).
        out, _ = numpy_on(fn, (call.args, call.kwargs), [])
        if not isinstance(out, (Exception, np.ndarray, tuple, list)):
            return numpy_constant_variable(out, what)
    probe_template = None
    if short in SIZE_ARGS:
        pos, key = SIZE_ARGS[short]
        pargs, pkwargs = list(call.args), dict(call.kwargs)
        if key in pkwargs:
            pkwargs[key] = small_size(pkwargs[key])
        elif len(pargs) > pos:
            pargs[pos] = small_size(pargs[pos])
        probe_template = (pargs, pkwargs)
    return run_call(tx, label, tnp_fn, fn, call, spec, what, probe_template)


# np.*_like(tensor, ...): NumPy converts the tensor (Tensor.__array__: `t.numpy()`, with its
# errors) and makes a new C-ordered array of its shape, as the factory would: the factory
# and its keywords past the prototype.
_LIKE = {"ones_like": ("ones", ("dtype",)), "zeros_like": ("zeros", ("dtype",)),
         "full_like": ("full", ("fill_value", "dtype"))}


def _is_tensor(v) -> bool:
    return isinstance(v, TensorVariable)


def _like_tensor(tx, short, args, kwargs, what: str):
    factory, names = _LIKE[short]
    tensor, rest, named = (args[0], list(args[1:]), dict(kwargs)) if args else (kwargs["a"], [], {
        k: v for k, v in kwargs.items() if k != "a"})
    if len(rest) > len(names) or set(named) - set(names) or set(names[:len(rest)]) & set(named):
        unsupported("call", f"{what} of a torch.Tensor with these arguments is not traced")
    named.update(zip(names, rest))
    if factory == "full" and "fill_value" not in named:
        unsupported("exceptions", f"TypeError: {short}() missing 1 required positional argument: 'fill_value'")
    array = tensor_to_ndarray(tx, tensor, [], {})  # eager's errors (requires grad, a GPU tensor)
    if "dtype" not in named or (named["dtype"].is_python_constant() and named["dtype"].as_python_constant() is None):
        named["dtype"] = NumpyConstantVariable(array.np_dtype)
    shape = TupleVariable([ConstantVariable(int(n)) for n in array.shape])
    if factory == "full":
        return call_function(tx, np.full, [shape, named.pop("fill_value")], named)
    return call_function(tx, getattr(np, factory), [shape], named)


def _arange(tx, label, tnp_fn, call: Arguments, what: str):
    """np.arange of Python numbers: int64, or float64 if any is a float (or `dtype=`)."""
    values = [*call.args, *(v for k, v in call.kwargs.items() if k in ("start", "stop", "step"))]
    if set(call.kwargs) - {"start", "stop", "step", "dtype"} or not all(type(v) in (int, float) for v in values):
        unsupported("call", f"{what} with arguments other than Python numbers is not traced")
    if "dtype" in call.kwargs:
        dt = np.dtype(call.kwargs["dtype"])
    else:
        dt = np.dtype(np.float64 if any(type(v) is float for v in values) else np.int64)
    node = NumpyNode(label, tnp_fn, (call.args, call.kwargs), copy=False)
    expected = Expected([Result(dt, False, 1)], None)
    bounds = (0, call.args[0], 1) if len(call.args) == 1 else (*call.args, 1)[:3]
    if not call.kwargs and len(bounds) == 3 and bounds[2] and abs((bounds[1] - bounds[0]) / bounds[2]) <= 1 << 14:
        # Small enough to compare with NumPy's own values (the length of a float range).
        want, _ = numpy_on(np.arange, (call.args, {}), [])
        why = check_values(node, Expected([], None, want), [], what)
        if why is not None:
            unsupported("call", f"torch._numpy's {what} differs from NumPy's ({why}): not traced")
    return record(tx, node, call, expected, Spec(), what)


def call_method(tx, array, name, args, kwargs):
    """`array.name(*args, **kwargs)`."""
    owner = "ndarray" if not array.scalar else f"numpy.{array.np_dtype.type.__name__}"
    what = f"{owner}.{name}()"
    spec = METHODS.get(name)
    if spec is None:
        unsupported("call", f"{what} is not traced (no model of it in the NumPy support)")
    _check_keywords(kwargs, what)
    if name == "astype" and "copy" in kwargs:
        spec = Spec(memory="either")
    if array.scalar and spec.layout:
        spec = Spec()  # a NumPy scalar's reshape/transpose: checked like any call
    call = split_arguments(tx, [array, *args], kwargs, what)
    return run_call(tx, f"numpy_ndarray_{name}", Method(name), Method(name), call, spec, what)


def call_attribute(tx, array, name):
    """`array.T`, `.real`, `.imag`: views of the array."""
    what = f"ndarray.{name}"
    call = split_arguments(tx, [array], {}, what)
    return run_call(tx, f"numpy_ndarray_{name}", Attribute(name), Attribute(name), call, Spec(), what)


def call_getitem(tx, array, key):
    """`array[key]`: basic indexing is a view (a NumPy scalar when every axis gets an
    integer), an index array or list makes a copy."""
    what = "ndarray indexing"
    if array.scalar:
        unsupported("call", "indexing a NumPy scalar is not traced")
    call = split_arguments(tx, [array, key], {}, what)
    parts = call.args[1] if type(call.args[1]) is tuple else (call.args[1],)
    if any(type(p) is bool or isinstance(p, (Strong, str)) for p in parts):
        unsupported("call", f"{what} with a boolean, string or NumPy scalar index is not traced")
    slots = [p for p in parts if isinstance(p, Slot)]
    if any(p.scalar or call.arrays[p.index].np_dtype.kind not in "iu" for p in slots):
        unsupported("call", f"{what} with a boolean or 0-d index array is not traced")
    advanced = bool(slots) or any(type(p) is list for p in parts)
    scalar = all(type(p) is int for p in parts) and len(parts) == len(array.shape)
    # A NumPy scalar is a copy too: a later write to the array must not change it.
    views = frozenset() if advanced or scalar else frozenset({0})
    result = Result(array.np_dtype, scalar, -1, views)
    node = NumpyNode("numpy_ndarray_getitem", operator.getitem, (call.args, {}), copy=not views)
    out = dry_run(tx, node, call, None, what)
    result.ndim = out[0].dim()
    if out[0].dtype != array.tensor.fake.dtype:
        unsupported("call", f"torch._numpy's {what} changes the dtype: not traced")
    return record(tx, node, call, Expected([result], None), Spec(), what)


def _apart(obj, value):
    """`value`, copied if it shares memory with the array written: NumPy reads all of an
    overlapping operand before it writes (torch refuses, or reads what it wrote)."""
    import torch._numpy as tnp
    if isinstance(value, tnp.ndarray) and \
            value.tensor.untyped_storage()._cdata == obj.tensor.untyped_storage()._cdata:
        return tnp.ndarray(value.tensor.clone())
    return value


def _setitem(obj, key, value):
    obj[key] = _apart(obj, value)
    return obj  # written in place: the node's result is the array itself


class _Inplace:
    def __init__(self, op):
        self.op = op

    def __call__(self, obj, other):
        return self.op(obj, _apart(obj, other))


def call_setitem(tx, array, key, value):
    """`array[key] = value`: the array's tensor written in place."""
    what = "ndarray item assignment"
    if array.scalar:
        unsupported("exceptions", "TypeError: NumPy scalars do not support item assignment")
    refuse_write(array, what)
    call = split_arguments(tx, [array, key, value], {}, what)
    stored = call.args[2]
    if not isinstance(stored, Slot):
        if has_slot(stored):
            unsupported("call", f"{what} of a list holding arrays is not traced")
        # NumPy converts the value to the array's dtype (a Python int out of range raises);
        # an array value is cast unsafely. Shapes are the fake run's to check.
        target = np.empty((1,), array.np_dtype)
        out, _ = numpy_on(target.__setitem__, ([0, stored], {}), [])
        if isinstance(out, Exception):
            unsupported("exceptions", f"{what} raised {type(out).__name__}: {out}", raised=attribute_error(out))
    _run_inplace(tx, "numpy_ndarray_setitem", _setitem, call, what)


def _run_inplace(tx, label, target, call: Arguments, what: str):
    array = call.arrays[0]
    node = NumpyNode(label, target, (call.args, {}), copy=False)
    dry_run(tx, node, call, None, what)
    result = tx.output.call("call_function", node, [a.tensor for a in call.arrays], {}, what=what)
    if result is not array.tensor:
        unsupported("call", f"{what} did not write the array in place in torch._numpy: not traced")
    return array


# Python operators → the ufunc NumPy's ndarray dunder methods call.
OPERATOR_UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
    "lshift": np.left_shift, "rshift": np.right_shift, "and_": np.bitwise_and,
    "or_": np.bitwise_or, "xor": np.bitwise_xor,
    "<": np.less, "<=": np.less_equal, "==": np.equal, "!=": np.not_equal, ">": np.greater,
    ">=": np.greater_equal, "neg": np.negative, "pos": np.positive, "invert": np.invert,
}
_INPLACE = {name: getattr(operator, "i" + name.rstrip("_")) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
    "and_", "or_", "xor")}
_OPERATORS = {
    **{name: getattr(operator, name) for name in _INPLACE},
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
    ">=": operator.ge, "neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
}


def _torch_scalar(v) -> bool:
    """A NumPy scalar constant torch takes as a number beside a tensor (`t + np.float32(x)`):
    one of the dtypes a tensor holds."""
    return isinstance(v, NumpyConstantVariable) and isinstance(v.value, np.generic) and v.value.dtype in TORCH_OF


def _tensor_operator(tx, name, operands, inplace):
    """A Python operator between tensors and NumPy scalars: the same operator in the graph,
    the NumPy scalar itself its argument (NumPy defers to the tensor's reflected method, as
    torch's `__array_priority__` asks; the fake run and the graph see the same scalar)."""
    if len(operands) != 2:
        unsupported("call", f"operator {name} on a tensor and a NumPy scalar is not traced")
    fn = _INPLACE[name] if inplace and name in _INPLACE and _is_tensor(operands[0]) else _OPERATORS[name]
    return tx.output.call("call_function", fn, operands, {}, what=f"tensor {name} NumPy scalar")


def call_operator(tx, name, operands, inplace=False):
    """A Python operator with a NumPy array or constant among its operands: the ufunc
    ndarray's dunder method calls, folded when every operand is a constant."""
    if any(isinstance(v, TensorVariable) for v in operands):
        if all(isinstance(v, TensorVariable) or _torch_scalar(v) for v in operands):
            return _tensor_operator(tx, name, operands, inplace)
        unsupported("call", f"operator {name} between a NumPy value and a torch tensor is not traced "
                            "(torch's rules for NumPy operands are its own)",
                    hint="convert one side first (torch.from_numpy(a), t.numpy(), float(s))")
    if _constants(operands, {}) is not None:
        return fold_constant_call(_OPERATORS[name], operands, {}, f"operator {name}")
    ufunc = OPERATOR_UFUNCS[name]
    for v in operands:
        if not (isinstance(v, (NumpyNdarrayVariable, ListVariable, TupleVariable))
                or numpy_constant_of(v) is not NOT_CONSTANT):
            unsupported("call", f"operator {name} with {v.describe()} is not traced")
    first = operands[0]
    if not (inplace and isinstance(first, NumpyNdarrayVariable) and not first.scalar):
        return call_function(tx, ufunc, operands, {})
    # a += b: NumPy's add(a, b, out=a), the result cast to a's dtype (same_kind).
    what = f"ndarray {name} (in place)"
    refuse_write(first, what, "output array is read-only")
    call = split_arguments(tx, operands, {}, what)

    def numpy_inplace(a, b):
        return ufunc(a, b, out=a)
    label = f"numpy_inplace_{ufunc.__name__}"
    check_call(label, _Inplace(_INPLACE[name]), numpy_inplace, call, Spec(elementwise=True), what)
    return _run_inplace(tx, label, _Inplace(_INPLACE[name]), call, what)
