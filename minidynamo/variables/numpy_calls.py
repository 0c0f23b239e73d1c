"""NumPy calls on traced arrays, as graph nodes running torch._numpy.

A NumPy function (or method, or operator) applied to arrays that stand for tensors
becomes one graph node: a `NumpyNode`, which wraps the node's tensors as
`torch._numpy.ndarray`s, calls torch._numpy's version and hands back the result's
tensors. This module holds what the trace knows of each function (`Spec`, `spec_of`),
what a call's arguments become (a template of plain values, `Slot`s for arrays, `Strong`
NumPy scalars: numpy_ops.split_arguments) and the node itself; numpy_checks.py checks each call against NumPy before
it is recorded.
"""
from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch._numpy as tnp

from ..exc import unsupported

# NumPy dtypes a torch tensor holds exactly (torch's unsigned types past uint8 have few
# kernels: declined).
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
           "float64", "complex64", "complex128")
TORCH_OF = {np.dtype(n): getattr(torch, n) for n in _DTYPES}
NUMPY_OF = {t: d for d, t in TORCH_OF.items()}


def numpy_dtype(torch_dtype: torch.dtype, what: str) -> np.dtype:
    dt = NUMPY_OF.get(torch_dtype)
    if dt is None:
        unsupported("call", f"{what}: a {torch_dtype} array is not traced "
                            f"(traced dtypes: {', '.join(_DTYPES)})")
    return dt


# --- what the trace knows of each function ------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """layout: a pure layout change (reshape, transpose): the argument's dtype, values not
    checked. memory: "either" where NumPy returns a view when the argument's layout allows
    one, by the same rule as torch (reshape, ravel): torch's answer is taken; otherwise
    NumPy's answer on the stand-ins holds. fix="cast": a result whose dtype differs may be
    cast to NumPy's (an fft computed in 64 bits). standin: "special" (awkward values), "eye" (identity matrices: inverses and solves),
    "ones" (indices and counts). elementwise: a ufunc, whose values are also checked on
    every pair of awkward values (a division by zero, INT_MIN // -1)."""

    layout: bool = False
    memory: str | None = None
    fix: str | None = None
    standin: str = "special"
    elementwise: bool = False


_PLAIN = Spec()
_LAYOUT = Spec(layout=True)
_LAYOUT_EITHER = Spec(layout=True, memory="either")
_EYE = Spec(standin="eye")
_ONES = Spec(standin="ones")
_FFT = Spec(fix="cast")

# Functions of the numpy namespace (ufuncs are found by type, below).
_NP_FUNCTIONS = {
    **dict.fromkeys([
        "sum", "prod", "cumsum", "cumprod", "mean", "std", "var", "max", "min", "amax", "amin",
        "argmax", "argmin", "any", "all", "ptp", "median", "average", "count_nonzero", "where", "concatenate", "stack", "vstack", "hstack",
        "dstack", "column_stack", "meshgrid", "clip", "dot", "outer", "inner", "tensordot",
        "einsum", "roll", "diff", "cross", "sort", "round", "around", "tril", "triu", "diag",
        "trace", "kron", "isclose", "ones_like", "zeros_like", "full_like", "copy", "array",
        "atleast_1d", "atleast_2d", "atleast_3d", "ascontiguousarray", "ones", "zeros",
        "full", "eye", "identity", "linspace", "arange", "flip", "fliplr", "flipud"], _PLAIN),
    **dict.fromkeys(["tile", "repeat", "take", "take_along_axis"], _ONES),
    **dict.fromkeys(["transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims"], _LAYOUT),
    **dict.fromkeys(["reshape", "ravel"], _LAYOUT_EITHER),
    "asarray": Spec(memory="either"),
}
_LINALG_FUNCTIONS = {**dict.fromkeys(["inv", "det", "solve", "pinv", "matrix_power"], _EYE),
                     "norm": _PLAIN}
_FFT_FUNCTIONS = {**dict.fromkeys(["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2",
                                   "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfft", "ihfft"], _FFT),
                  **dict.fromkeys(["fftshift", "ifftshift"], _PLAIN)}
# Methods of ndarray (and of NumPy scalars).
METHODS = {
    **dict.fromkeys(["sum", "prod", "cumsum", "cumprod", "mean", "std", "var", "max", "min", "argmax", "argmin", "any", "all", "clip", "round", "dot",
                     "trace", "conj", "conjugate", "astype", "copy", "flatten"], _PLAIN),
    "repeat": _ONES,
    **dict.fromkeys(["transpose", "swapaxes", "squeeze"], _LAYOUT),
    **dict.fromkeys(["reshape", "ravel"], _LAYOUT_EITHER),
}
# Factories whose size argument the stand-in call makes small (their dtype never depends
# on it): (position, keyword).
SIZE_ARGS = {"ones": (0, "shape"), "zeros": (0, "shape"), "full": (0, "shape"), "eye": (0, "N"),
             "identity": (0, "n"), "linspace": (2, "num")}


def small_size(size):
    """A size of the same rank as `size`, at most 2 along each axis."""
    if type(size) in (tuple, list):
        return type(size)(min(s, 2) if type(s) is int else s for s in size)
    return min(size, 2) if type(size) is int else size


# torch's lcm divides INT_MIN by -1 for some arguments (the process dies: SIGFPE), and
# gcd of INT_MIN is negative.
_UNTRACED_UFUNCS = {"lcm", "gcd"}

_table: dict | None = None


def spec_of(fn):
    """(Spec, torch._numpy callable, dotted name) of a NumPy function, or None."""
    global _table
    if _table is None:
        table = {}
        for module, tmodule, functions in ((np, tnp, _NP_FUNCTIONS), (np.linalg, tnp.linalg, _LINALG_FUNCTIONS),
                                           (np.fft, tnp.fft, _FFT_FUNCTIONS)):
            for name, spec in functions.items():
                npf, tf = getattr(module, name, None), getattr(tmodule, name, None)
                if npf is not None and callable(tf):
                    table[id(npf)] = (npf, spec, tf, f"{module.__name__}.{name}")
        for name in dir(np):
            uf = getattr(np, name)
            if isinstance(uf, np.ufunc) and id(uf) not in table and uf.__name__ not in _UNTRACED_UFUNCS:
                tf = getattr(tnp, uf.__name__, None) or getattr(tnp, name, None)
                if callable(tf):
                    spec = Spec(elementwise=True)
                    table[id(uf)] = (uf, spec, tf, f"numpy.{uf.__name__}")
        _table = table
    hit = _table.get(id(fn))
    return None if hit is None or hit[0] is not fn else hit[1:]


# --- arguments: trackers → a template, arrays apart -----------------------------------------
class Slot:
    """Where an array argument goes in a call's template."""

    __slots__ = ("index", "scalar")

    def __init__(self, index: int, scalar: bool):
        self.index = index
        self.scalar = scalar


class Strong:
    """A NumPy scalar constant: typed like an array in promotion (a Python float is not)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


@dataclass
class Arguments:
    args: list
    kwargs: dict
    arrays: list  # NumpyNdarrayVariable, in slot order


NOT_CONSTANT = object()
_PLAIN_TYPES = (int, float, complex, bool, str, type(None), type(Ellipsis))


def constant_argument(value):
    """A constant as it goes into a template, or NOT_CONSTANT."""
    if isinstance(value, np.generic):
        return Strong(value)
    if type(value) in _PLAIN_TYPES or isinstance(value, np.dtype) or (
            isinstance(value, type) and (issubclass(value, np.generic) or value in (int, float, bool, complex))):
        return value
    if type(value) is slice and all(type(x) in (int, type(None)) for x in (value.start, value.stop, value.step)):
        return value
    return NOT_CONSTANT


def fill(template, fill_slot, fill_strong=lambda v: v):
    """The template with each Slot and Strong replaced."""
    def go(v):
        if isinstance(v, Slot):
            return fill_slot(v)
        if isinstance(v, Strong):
            return fill_strong(v.value)
        if type(v) is tuple:
            return tuple(go(x) for x in v)
        if type(v) is list:
            return [go(x) for x in v]
        if type(v) is dict:
            return {k: go(x) for k, x in v.items()}
        return v
    return go(template)


def has_slot(template) -> bool:
    found = []
    fill(template, lambda s: found.append(s))
    return bool(found)


def quiet(fn, *args, **kwargs):
    """A NumPy call without its floating-point warnings (the trace reports nothing)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --- the node ---------------------------------------------------------------------------------
def tnp_constant(v):
    """A dtype as torch._numpy takes it: by name."""
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if type(v) in (tuple, list):
        return type(v)(tnp_constant(x) for x in v)
    if type(v) is dict:
        return {k: tnp_constant(x) for k, x in v.items()}
    return v


def _storage(t: torch.Tensor):
    return t.untyped_storage()._cdata


class NumpyNode:
    """What a graph node calls: `target` (torch._numpy's function) on the node's tensors as
    torch._numpy arrays, per `template` (args, kwargs). The corrections that make it agree
    with NumPy: `dtype` passed as `dtype=`; `input_cast`: integer and bool arguments cast
    to it first (NumPy computes a float mean of integers in float64); `cast`: results cast
    to these dtypes; `copy`: a result sharing memory with an argument is copied (NumPy
    returns new memory)."""

    def __init__(self, label: str, target, template, copy: bool, dtype=None, input_cast=None, cast=None):
        self.__name__ = self.__qualname__ = label
        self.target = target
        self.template = tnp_constant(template)
        self.copy = copy
        self.dtype = dtype
        self.input_cast = input_cast
        self.cast = cast

    def variant(self, template=None, **changes) -> "NumpyNode":
        fields = {"copy": self.copy, "dtype": self.dtype, "input_cast": self.input_cast, "cast": self.cast}
        fields.update(changes)
        return NumpyNode(self.__name__, self.target, template if template is not None else self.template,
                         **fields)

    def __repr__(self):
        return f"<{self.__name__}>"

    def __call__(self, *tensors):
        cast_in = self.input_cast

        def fill_slot(slot):
            t = tensors[slot.index]
            if cast_in is not None and not (t.is_floating_point() or t.is_complex()):
                t = t.to(cast_in)
            return tnp.ndarray(t)

        def fill_strong(value):
            return tnp.ndarray(torch.tensor(value.item(), dtype=TORCH_OF[value.dtype]))
        args, kwargs = fill(self.template, fill_slot, fill_strong)
        if self.dtype is not None:
            kwargs = {**kwargs, "dtype": self.dtype}
        out = self.target(*args, **kwargs)
        many = type(out) in (tuple, list)
        results = [_plain(r.tensor if isinstance(r, tnp.ndarray) else r) for r in (out if many else (out,))]
        if self.cast is not None:
            results = [r.to(dt) if r.dtype != dt else r for r, dt in zip(results, self.cast)]
        if self.copy:
            storages = {_storage(t) for t in tensors}
            results = [r.clone() if isinstance(r, torch.Tensor) and _storage(r) in storages else r
                       for r in results]
        return tuple(results) if many else results[0]


def accepts_dtype(target) -> bool:
    """Whether torch._numpy's function (or ndarray method) takes `dtype=`."""
    fn = getattr(tnp.ndarray, target.name, None) if isinstance(target, Method) else target
    try:
        return "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _plain(r):
    """A result NumPy can hold: conjugate and negative views resolved (ifft's result is one)."""
    if isinstance(r, torch.Tensor) and (r.is_conj() or r.is_neg()):
        return r.resolve_conj().resolve_neg()
    return r


class Method:
    """Calls method `name` of its first argument (a torch._numpy.ndarray)."""

    def __init__(self, name):
        self.name = name

    def __call__(self, obj, *args, **kwargs):
        return getattr(obj, self.name)(*args, **kwargs)


class Attribute:
    def __init__(self, name):
        self.name = name

    def __call__(self, obj):
        return getattr(obj, self.name)
