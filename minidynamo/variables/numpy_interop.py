"""NumPy code on tensors, traced into torch ops through torch._numpy.

`x.numpy()` of a traced tensor is an array *standing for that tensor* (NumpyNdarrayVariable:
the tensor tracker it is a view of). NumPy functions, methods and operators on such arrays
become graph nodes (numpy_calls.py), `torch.from_numpy(a)` is the tensor again, and an
array the function returns or carries across a graph break is `.numpy()` of a graph output:
a real numpy.ndarray, sharing memory where eager's would.

* NumPy scalars (what `np.sum(a)` returns) are tracked too: a 0-d tensor flagged `scalar`,
  rebuilt as `t.numpy()[()]`.
* An ndarray passed in is a graph input through `torch.from_numpy(x)`, guarded like a
  tensor (type, writeable, dtype, shape, strides).
* `np.iinfo`, `np.finfo`, `np.dtype`, NumPy scalar constructors on constants are folded.
* `np.random` reads and advances NumPy's own generator: never traced (a break runs the call),
  so the numbers are eager's.
* Writing to an array (`a[i] = v`, `a += b`) writes its tensor: an in-place graph node.

NumPy < 2 (value-based casting) or a missing torch._numpy: nothing is registered; arrays
and NumPy functions then decline as unknown objects.
"""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass

from ..dynamic import has_symbolic
from ..exc import unsupported
from ..sources import AttrSource, ObjectSource, Source
from .base import ObjectConstantVariable, VariableTracker
from .objects import ModuleVariable
from .constant import ConstantVariable, is_constant_value

try:
    import numpy as np
    import torch._numpy  # noqa: F401  (the implementation the graph nodes call)
    AVAILABLE = int(np.__version__.split(".")[0]) >= 2
except ImportError:  # NumPy not installed
    np = None
    AVAILABLE = False

import torch
from .builtins import BuiltinVariable
from .functions import BoundMethodVariable
from .lists import TupleVariable
from ..guards import Guard

_MUTATING_METHODS = {"fill", "sort", "resize", "put", "itemset", "setflags", "partition",
                     "__setitem__", "byteswap"}
_DATA_METHODS = {"item", "tolist", "tobytes", "tostring", "tofile", "dump", "dumps", "__bool__",
                 "__int__", "__float__", "__index__", "__repr__", "__str__", "__format__",
                 "__array__", "__iter__", "__contains__", "nonzero"}
_UNTRACED_ATTRS = {"flags", "base", "strides", "flat", "ctypes", "data", "__array_interface__"}


# --- arrays ---------------------------------------------------------------------------
class NumpyNdarrayVariable(VariableTracker):
    """A numpy.ndarray (or, `scalar`, a NumPy scalar) whose data is the tensor of `tensor`
    (a TensorVariable): the two share memory, as `x.numpy()` and `x` do."""

    __slots__ = ("tensor", "scalar", "readonly")
    owns_operators = True

    def __init__(self, tensor, scalar: bool = False, source=None, readonly: bool = False):
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar
        self.readonly = readonly  # NumPy refuses writes (`.imag` of a real array, its views)
        numpy_calls.numpy_dtype(tensor.fake.dtype, "an array")

    @property
    def np_dtype(self):
        return numpy_calls.NUMPY_OF[self.tensor.fake.dtype]

    @property
    def shape(self) -> tuple:
        return tuple(int(n) for n in self.tensor.fake.shape)

    def python_type(self):
        return self.np_dtype.type if self.scalar else np.ndarray

    def describe(self):
        kind = f"NumPy {self.np_dtype} scalar" if self.scalar else f"ndarray {self.np_dtype} {self.shape}"
        return f"{kind} ({self.tensor.describe()})"

    def truthy(self, tx):
        unsupported("data_dependent", f"the truth value of {self.describe()} depends on its data")

    def as_fx_arg(self):
        unsupported("call", f"{self.describe()} passed to a torch operation (torch functions take "
                            "tensors, not arrays)", hint="convert it with torch.from_numpy(a) first")

    as_fake = as_fx_arg

    # --- rebuilt after the graph: .numpy() of the tensor, sharing its memory
    def rebuild_new(self, rb):
        if self.readonly:
            return f"{rb.ns.bind(_read_only, 'read_only')}({rb.expr(self.tensor)}.numpy())"
        return f"{rb.expr(self.tensor)}.numpy()" + ("[()]" if self.scalar else "")

    # --- attributes
    def var_getattr(self, tx, name):
        if name == "shape":
            return _constant_tuple(self.shape)
        if name == "ndim":
            return ConstantVariable(len(self.shape))
        if name == "size":
            return ConstantVariable(int(self.tensor.fake.numel()))
        if name == "dtype":
            return NumpyConstantVariable(self.np_dtype)
        if name in ("itemsize", "nbytes"):
            return ConstantVariable(int(self.np_dtype.itemsize * (1 if name == "itemsize" else self.tensor.fake.numel())))
        if name == "strides":
            return _constant_tuple(self.strides())
        if name in ("T", "mT", "real", "imag") and not self.scalar:
            if name == "imag" and self.np_dtype.kind != "c":
                return _imag_of_real(tx, self)
            return _operations().call_attribute(tx, self, name)
        if name in _UNTRACED_ATTRS:
            unsupported("call", f"ndarray.{name} is not traced")
        cls = self.python_type()
        if not hasattr(cls, name):
            unsupported("exceptions", f"AttributeError: {cls.__name__!r} object has no attribute {name!r}",
                        raised=AttributeError)
        if not callable(getattr(cls, name)):
            unsupported("call", f"ndarray.{name} is not traced")
        return BoundMethodVariable(self, name)

    def strides(self) -> tuple:
        """NumPy's strides (bytes) of the array: its tensor's, times the item size."""
        if self.scalar:
            return ()
        strides = self.tensor.fake.stride()
        if has_symbolic(strides):
            unsupported("call", f"ndarray.strides of {self.describe()} with symbolic strides is not traced")
        return tuple(int(s) * self.np_dtype.itemsize for s in strides)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args and not kwargs:
            if not self.shape:
                unsupported("exceptions", "TypeError: len() of unsized object")
            return ConstantVariable(self.shape[0])
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name in _DATA_METHODS:
            unsupported("data_dependent", f"ndarray.{name}() reads array data into Python",
                        hint="keep the value an array inside the optimized function, or return it")
        if name in _MUTATING_METHODS:
            unsupported("call", f"ndarray.{name}() changes the array in place: not traced")
        return _operations().call_method(tx, self, name, args, kwargs)

    def getitem(self, tx, key):
        return _operations().call_getitem(tx, self, key)

    def setitem(self, tx, key, value):
        _operations().call_setitem(tx, self, key, value)

    def iter_items(self, tx):
        if not self.shape:
            unsupported("exceptions", "TypeError: iteration over a 0-d array")
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.shape[0])]

    # --- operators (interpreter/operators.py hands them over: owns_operators)
    def apply_operator(self, tx, name, operands, inplace=False):
        return _operations().call_operator(tx, name, operands, inplace)

    # --- torch functions given an array (torch/py hands them over)
    def call_torch_function(self, tx, fn, args, kwargs):
        return torch_function_on_array(tx, fn, args, kwargs)

    def __repr__(self):
        return f"NumpyNdarrayVariable({self.tensor.node.name}{', scalar' if self.scalar else ''})"


def _constant_tuple(values):
    return TupleVariable([ConstantVariable(v) for v in values])


def _read_only(array):
    """`array`, made read-only (how the entry rebuilds a read-only array)."""
    array.flags.writeable = False
    return array


def _imag_of_real(tx, array):
    """`a.imag` of a real array: NumPy makes a new read-only array of zeros laid out as `a`
    (order K; torch's zeros_like keeps the layout of a dense tensor, as NumPy's)."""
    if not _dense(array.tensor.fake):
        unsupported("call", "ndarray.imag of a real array that is not dense is not traced")
    zeros = tx.output.call("call_function", torch.zeros_like, [array.tensor], {}, what="ndarray.imag")
    return NumpyNdarrayVariable(zeros, readonly=True)


def _dense(fake) -> bool:
    """Whether the tensor's elements fill its memory exactly (in some order of dims)."""
    if has_symbolic(fake.shape) or has_symbolic(fake.stride()):
        return False
    expected = 1
    for stride, size in sorted((int(s), int(n)) for n, s in zip(fake.shape, fake.stride()) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def refuse_write(array, what: str, message: str = "assignment destination is read-only"):
    """The ValueError NumPy raises for a write to a read-only array."""
    if array.readonly:
        unsupported("exceptions", f"{what}: ValueError: {message}", raised=ValueError)


def tensor_to_ndarray(tx, tensor, args, kwargs):
    """`x.numpy()`: an array over the same memory (a detached alias of the tensor, so the
    graph's aliasing shows writes through either), or the error eager raises."""
    if args or kwargs:
        unsupported("call", "Tensor.numpy() with arguments (force=) is not traced")
    fake = tensor.fake
    if fake.requires_grad:
        unsupported("exceptions", "RuntimeError: Can't call numpy() on Tensor that requires grad. "
                                  "Use tensor.detach().numpy() instead.")
    if fake.device.type != "cpu":
        unsupported("exceptions", f"TypeError: can't convert {fake.device.type} device type tensor to numpy")
    if fake.layout is not torch.strided or fake.is_conj() or fake.is_neg():
        unsupported("call", "Tensor.numpy() of a sparse, conjugated or negated view is not traced")
    numpy_calls.numpy_dtype(fake.dtype, "Tensor.numpy()")
    alias = tx.output.call("call_method", "detach", [tensor], {}, what="Tensor.numpy()")
    return NumpyNdarrayVariable(alias)


# torch functions that take an array: how each makes its tensor.
def torch_function_on_array(tx, fn, args, kwargs):
    what = f"torch.{getattr(fn, '__name__', fn)}"
    arrays = [a for a in (*args, *kwargs.values()) if isinstance(a, NumpyNdarrayVariable)]
    first = args[0] if args else None
    if not isinstance(first, NumpyNdarrayVariable) or len(arrays) != 1 or len(args) != 1:
        unsupported("call", f"{what} with a NumPy array argument is not traced")
    if fn is torch.from_numpy and not kwargs:
        if first.scalar:
            unsupported("exceptions", f"TypeError: expected np.ndarray (got numpy.{first.np_dtype.type.__name__})")
        return _sharing_tensor(tx, first, what)
    if fn in (torch.as_tensor, torch.asarray) and not kwargs and not first.scalar:
        return _sharing_tensor(tx, first, what)
    if (fn is torch.tensor and set(kwargs) <= {"dtype"}) or (fn in (torch.as_tensor, torch.asarray) and not kwargs):
        # a copy (as_tensor of a NumPy scalar too; with a dtype it may share memory: declined)
        copy = tx.output.call("call_method", "clone", [first.tensor], {}, what=what)
        if "dtype" in kwargs:
            return tx.output.call("call_method", "to", [copy, kwargs["dtype"]], {}, what=what)
        return copy
    unsupported("call", f"{what} of a NumPy array with these arguments is not traced")


def _sharing_tensor(tx, array, what: str):
    """A tensor over the array's memory. Over a read-only array torch warns (once in the
    process): the entry makes the same warning after the graph, through a tiny read-only
    array of its own."""
    if array.readonly:
        tx.output.deferred_calls.append((torch.from_numpy, _READ_ONLY_PROBE, [], {}))
    return tx.output.call("call_method", "detach", [array.tensor], {}, what=what)


class _ReadOnlyProbe:
    """What a deferred call takes its first argument from (`source`)."""

    def __init__(self):
        probe = np.zeros(1, dtype=np.float32) if np is not None else None
        if probe is not None:
            probe.flags.writeable = False
        self.source = ObjectSource(probe, "a read-only array")


# --- arrays passed in -----------------------------------------------------------------
# The arrays each trace read from the frame, per OutputGraph: (array, source, tracker).
_array_inputs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class FromNumpySource(Source):
    """The tensor over an ndarray argument's memory: `torch.from_numpy(x)`."""

    base: Source

    def expr(self, ns):
        return f"{ns.bind(torch.from_numpy, 'from_numpy')}({self.base.expr(ns)})"

    def name(self, naming=None):
        return f"from_numpy({self.base.name(naming)})"

    @property
    def depth(self):
        return self.base.depth + 1


def wrap_ndarray_input(tx, value, source):
    """An ndarray read from the frame: a graph input over its memory, guarded like a tensor."""
    if source is None:
        unsupported("construct", "a NumPy array that is not reachable from the function's inputs")
    guards = tx.output.guards
    guards.add(Guard("TYPE_MATCH", source, np.ndarray))
    writeable = bool(value.flags.writeable)
    guards.add(Guard("EQUALS_MATCH", AttrSource(AttrSource(source, "flags"), "writeable"), writeable))
    guards.add(Guard("ID_MATCH", AttrSource(source, "dtype"), value.dtype))
    if not writeable:  # torch.from_numpy warns on every call
        unsupported("call", f"a read-only NumPy array ({source.name()}) is not traced")
    if value.dtype not in numpy_calls.TORCH_OF or value.dtype is not np.dtype(value.dtype.name):
        unsupported("call", f"a NumPy array of dtype {value.dtype} ({source.name()}) is not traced")
    same = _same_array_input(tx, value, source)
    if same is not None:
        return same
    try:
        tensor = torch.from_numpy(value)
    except (TypeError, ValueError) as e:  # negative strides, unaligned memory
        # The eager entry this makes must not take arrays that torch.from_numpy accepts.
        guards.add(Guard("EQUALS_MATCH", AttrSource(source, "strides"), value.strides))
        unsupported("call", f"NumPy array {source.name()}: {e}")
    var = NumpyNdarrayVariable(tx.output.add_input(FromNumpySource(source), tensor), source=source)
    _array_inputs.setdefault(tx.output, []).append((value, source, var))
    return var


def _same_array_input(tx, value, source):
    """One array object reached through two names is one tracker (as for tensors); which
    arrays are the same object is guarded."""
    for other_value, other_source, var in _array_inputs.get(tx.output, ()):
        tx.output.guards.add(Guard("ALIAS_MATCH", source, other_value is value, {"other": other_source}))
        if other_value is value:
            return var
    return None


# --- numpy modules, functions, classes, constants ----------------------------------------
class NumpyModuleVariable(ModuleVariable):
    """`numpy`, `numpy.linalg`, `numpy.fft`, `numpy.random`: attributes as any module's."""

    def rebuild_new(self, rb):
        return rb.ns.bind(self.value, "np")


class NumpyCallableVariable(ObjectConstantVariable):
    """A NumPy function, ufunc or class (np.sum, np.add, np.float32, np.iinfo)."""

    def describe(self):
        return f"numpy function {_qualified(self.value)}"

    def var_getattr(self, tx, name):
        attr = self.real_attr(name)
        return numpy_constant_variable(attr, f"{_qualified(self.value)}.{name}")

    def call_function(self, tx, args, kwargs):
        return _operations().call_function(tx, self.value, args, kwargs)

    def rebuild_new(self, rb):
        return rb.ns.bind(self.value, "np_fn")


class NumpyConstantVariable(ObjectConstantVariable):
    """An immutable NumPy value known at trace time: a dtype, a scalar constant, an
    iinfo/finfo. Operations on it are folded (NumPy's own, on constants: pure)."""

    owns_operators = True

    def describe(self):
        return f"NumPy constant {self.value!r}"

    def as_fx_arg(self):
        """A NumPy scalar of a dtype tensors hold, as the argument of a torch op (torch
        takes it as a number; the graph's code builds it as its own type)."""
        if isinstance(self.value, np.generic) and self.value.dtype in numpy_calls.TORCH_OF:
            return self.value
        return super().as_fx_arg()

    as_fake = as_fx_arg

    def var_getattr(self, tx, name):
        attr = self.real_attr(name)
        if callable(attr):
            return BoundMethodVariable(self, name)
        return numpy_constant_variable(attr, f"{type(self.value).__name__}.{name}")

    def call_method(self, tx, name, args, kwargs):
        return _operations().fold_constant_call(getattr(self.value, name), args, kwargs,
                                              f"{type(self.value).__name__}.{name}()")

    def apply_operator(self, tx, name, operands, inplace=False):
        # `c += x` of a constant is `c + x`; `t += c` of a tensor writes the tensor
        return _operations().call_operator(tx, name, operands, inplace and operands[0] is not self)

    def rebuild_new(self, rb):
        return rb.ns.bind(self.value, "np_const")


def numpy_constant_variable(value, what: str):
    """A value folded from NumPy constants, as a tracker."""
    if isinstance(value, (np.generic, np.dtype, np.finfo, np.iinfo)):
        return NumpyConstantVariable(value)
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, type) and value.__module__.split(".")[0] == "numpy":
        return NumpyCallableVariable(value)
    if type(value) is tuple and all(is_constant_value(v) or isinstance(v, np.generic) for v in value):
        return TupleVariable([numpy_constant_variable(v, what) for v in value])
    unsupported("call", f"{what} gives a {type(value).__name__}, which is not traced")


def numpy_constant_of(v):
    """The plain value of a constant tracker as it goes into a NumPy call, or _NOT_CONSTANT."""
    if isinstance(v, (ConstantVariable, NumpyConstantVariable)):
        return numpy_calls.constant_argument(v.value)
    if isinstance(v, NumpyCallableVariable) and isinstance(v.value, type) and issubclass(v.value, np.generic):
        return v.value
    if isinstance(v, BuiltinVariable) and v.value in (int, float, bool, complex):
        return v.value
    return numpy_calls.NOT_CONSTANT


def _qualified(fn) -> str:
    mod = getattr(fn, "__module__", None) or "numpy"
    return f"{mod}.{getattr(fn, '__name__', fn)}"


# --- registration -----------------------------------------------------------------------
def _is_numpy_module(v) -> bool:
    return isinstance(v, types.ModuleType) and v.__name__.partition(".")[0] == "numpy"


def _is_numpy_object(v) -> bool:
    """Modules, functions, ufuncs, classes and dtypes of NumPy: fixed objects (identity)."""
    t = type(v)
    if t is np.ufunc or t.__name__ == "_ArrayFunctionDispatcher" or isinstance(v, np.dtype):
        return True
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)) or \
            t.__name__ == "cython_function_or_method":
        return (getattr(v, "__module__", None) or "").partition(".")[0] == "numpy"
    return _is_numpy_module(v)


def _wrap_numpy_object(tx, value, source):
    if isinstance(value, types.ModuleType):
        return NumpyModuleVariable(value, source)
    if isinstance(value, np.dtype):
        return NumpyConstantVariable(value, source)
    return NumpyCallableVariable(value, source)


def _is_numpy_value(v) -> bool:
    """Arrays and NumPy scalars passed in: guarded by what they hold, not identity."""
    return type(v) is np.ndarray or isinstance(v, np.generic)


def _wrap_numpy_value(tx, value, source):
    if type(value) is np.ndarray:
        return wrap_ndarray_input(tx, value, source)
    if value != value:  # NaN never equals itself: no guard on the value could hold
        if source is not None:
            tx.output.guards.add(Guard("TYPE_MATCH", source, type(value)))
        unsupported("call", f"a NaN NumPy scalar ({type(value).__name__}) is not traced")
    if source is not None:
        tx.output.guards.add(Guard("EQUALS_MATCH", source, value))  # type and value
    return NumpyConstantVariable(value, source)


_READ_ONLY_PROBE = _ReadOnlyProbe()

if AVAILABLE:
    from . import numpy_calls


def _operations():
    """numpy_ops.py: what a NumPy call, method or operator on the trackers above becomes."""
    from . import numpy_ops  # it builds on these trackers (a cycle)
    return numpy_ops
