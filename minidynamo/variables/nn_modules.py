"""torch.nn modules made inside the traced function, and the module containers.

*Parameterless modules* (activations, dropout, pooling, padding, reshaping, distances,
losses without weights; norms only with their affine parameters off): their constructor
stores its constant arguments and nothing else, so the trace makes the object for real, a
template private to this trace, and inlines its forward. A module that escapes (returned,
live at a graph break) is made again after the graph by the same constructor call, a new
object per call as in eager. Modules with parameters (Linear, Conv, BatchNorm, PReLU,
Embedding...) would allocate and randomly initialise them: declined, naming why.

*Containers* (`nn.Sequential`, `nn.ModuleList`, `nn.ModuleDict`) made in the trace are
trackers of their children (made in the trace or passed in); passed-in ones are read
through their `_modules`, a passed-in `nn.ParameterList` through its items (objects.py
calls `container_items` / `container_getitem`; builtins.py `reversed_children` and
`module_dict_items` for `reversed()` and `dict()`).
"""
from __future__ import annotations

import collections
import inspect
import operator

import torch

from ..exc import attribute_error, unsupported
from ..guards import Guard
from ..sources import ObjectSource
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .lists import iterator_of
from .objects import UserObjectVariable
from .functions import BoundMethodVariable
from .made_classes import class_expr
from ..interpreter.operators import contains
from .module_calls import call_new_module

nn = torch.nn

# Constructors that store their (constant) arguments only: no parameter, no buffer other
# than None, no random numbers (tests/test_torch_breadth.py checks each of them).
_PARAMETERLESS_NAMES = (
    # activations (not PReLU: a weight; not MultiheadAttention)
    "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU",
    "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU",
    "LogSigmoid", "Softplus", "Softshrink", "Tanhshrink", "Softsign", "Softmin", "Softmax",
    "Softmax2d", "LogSoftmax",
    # dropout (the random mask is an op of the graph, as for F.dropout)
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    # reshaping and resampling
    "Identity", "Flatten", "Unflatten", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "Fold", "Unfold",
    # pooling (not FractionalMaxPool: it may hold a tensor of samples)
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
    "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    # padding
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    # distances, normalisation without parameters
    "PairwiseDistance", "CosineSimilarity", "LocalResponseNorm",
    # losses (a `weight` argument is a tensor, not a constant: declined with it)
    "L1Loss", "MSELoss", "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
    "KLDivLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
    "HingeEmbeddingLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss",
    "PoissonNLLLoss", "GaussianNLLLoss", "MultiMarginLoss", "MultiLabelMarginLoss", "CTCLoss",
)
PARAMETERLESS = frozenset(filter(None, (getattr(nn, n, None) for n in _PARAMETERLESS_NAMES)))
# Norms that are parameterless only with these arguments false (their defaults for
# InstanceNorm): with them true they allocate weights or running statistics.
_CONDITIONAL_NAMES = {
    "LayerNorm": ("elementwise_affine",), "RMSNorm": ("elementwise_affine",), "GroupNorm": ("affine",),
    "InstanceNorm1d": ("affine", "track_running_stats"), "InstanceNorm2d": ("affine", "track_running_stats"),
    "InstanceNorm3d": ("affine", "track_running_stats"),
}
CONDITIONAL = {getattr(nn, n): flags for n, flags in _CONDITIONAL_NAMES.items() if hasattr(nn, n)}
CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)

_module_py = nn.modules.module
# Process-wide hooks that run while a module is built (a submodule, a buffer or a
# parameter registered, even None); those run while it is called are module_calls.py's.
_REGISTRATION_HOOKS = tuple(a for a in ("_global_module_registration_hooks", "_global_buffer_registration_hooks",
                                        "_global_parameter_registration_hooks") if hasattr(_module_py, a))
_MODULE_PY_SOURCE = ObjectSource(_module_py, "torch.nn.modules.module")


def _guard_no_global_hooks(tx, attrs, what):
    """No process-wide hook of `attrs` is set (decline if one is), and none gets added."""
    present = [a for a in attrs if getattr(_module_py, a)]
    if present:
        unsupported("call", f"{what}: process-wide module hooks are set ({', '.join(present)}), which are "
                            "not traced")
    tx.output.guards.add(Guard("NO_HOOKS", _MODULE_PY_SOURCE, None, {"attrs": attrs}))


def is_module_tracker(v) -> bool:
    """A module: made in the trace (torch.nn's, a container, a user subclass: user_modules.py)
    or passed in."""
    if isinstance(v, NewContainerVariable) or isinstance(v, UserObjectVariable) and isinstance(v.value, nn.Module):
        return True
    is_module = getattr(v, "is_module", None)  # (user_objects.py imports this module's importers)
    return is_module is not None and is_module()


# --- parameterless modules ------------------------------------------------------------
def why_not_parameterless(cls, pargs, pkwargs) -> str | None:
    """Why making `cls(*pargs, **pkwargs)` in the trace is declined (None: it is pure)."""
    if cls in PARAMETERLESS:
        return None
    flags = CONDITIONAL.get(cls)
    if flags is None:
        if hasattr(cls, "reset_parameters"):
            return "its constructor allocates and initialises parameters or buffers (randomly, for most)"
        return "only parameterless torch.nn modules are made in the trace, and this one is not known to be one"
    try:
        bound = inspect.signature(cls.__init__).bind(None, *pargs, **pkwargs)
    except TypeError as e:
        unsupported("exceptions", f"TypeError: {cls.__qualname__}(): {e}")
    bound.apply_defaults()
    on = [f for f in flags if bound.arguments.get(f)]
    if on:
        return f"with {' and '.join(f + '=True' for f in on)} it allocates parameters or running statistics"
    return None


class NewModuleVariable(UserObjectVariable):
    """A parameterless torch.nn module made by the trace: `value` is a template made now
    (private to this trace); the constructor's arguments make it again if it escapes."""

    __slots__ = ("ctor_args", "ctor_kwargs")

    def __init__(self, template, args, kwargs):
        super().__init__(template, None)
        self.ctor_args = list(args)
        self.ctor_kwargs = dict(kwargs)

    def describe(self):
        return f"{type(self.value).__qualname__} made in the trace"

    def var_getattr(self, tx, name):
        inst = self.value.__dict__
        if name in inst and not is_constant_value(inst[name]):
            # The hook and submodule tables: a write through a copy would not reach the
            # module the forward reads.
            unsupported("construct", f"{name!r} of a {self.describe()} (its internal state is not traced)")
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name, value):
        unsupported("construct", f"setting {name!r} on a {self.describe()}")

    def call_function(self, tx, args, kwargs):
        # A fresh module has no hooks of its own; the process-wide ones are traced.
        return call_new_module(tx, self, args, kwargs, lambda a, k: self.call_method(tx, "forward", a, k))

    def rebuild_new(self, rb):
        args = [rb.expr(a) for a in self.ctor_args] + [f"{k}={rb.expr(v)}" for k, v in self.ctor_kwargs.items()]
        return f"{rb.ns.bind(type(self.value), 'cls')}({', '.join(args)})"


def _make_parameterless(tx, cls, args, kwargs):
    if not all(_constant(a) for a in args) or not all(_constant(v) for v in kwargs.values()):
        unsupported("call", f"creating a {cls.__qualname__} with arguments that are not constants")
    pargs = [a.as_python_constant() for a in args]
    pkwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
    why = why_not_parameterless(cls, pargs, pkwargs)
    if why is not None:
        unsupported("call", f"creating a {cls.__module__}.{cls.__qualname__} inside the function: {why}",
                    hint="create the module outside the optimized function and pass it in (or make "
                         "it an attribute of the calling module)")
    _guard_no_global_hooks(tx, _REGISTRATION_HOOKS, f"creating a {cls.__qualname__}")
    try:
        template = cls(*pargs, **pkwargs)  # stores the arguments: nothing else happens
    except Exception as e:  # a bad argument: the eager run raises it for real
        unsupported("exceptions", f"{cls.__qualname__}() raised {type(e).__name__}: {e}", raised=attribute_error(e))
    if any(p is not None for p in template._parameters.values()) or any(
            b is not None for b in template._buffers.values()) or template._modules:
        unsupported("call", f"{cls.__qualname__}({pargs}, {pkwargs}) made parameters, buffers or submodules")
    return NewModuleVariable(template, args, kwargs)


def _constant(v) -> bool:
    return v.is_python_constant() and is_constant_value(v.as_python_constant())


# --- containers made in the trace -----------------------------------------------------
class _ModuleTable(DictVariable):
    """The `_modules` of a container made in the trace (its views iterate it live)."""

    def rebuild_new(self, rb):
        unsupported("construct", "the module table of a container made in the trace would outlive it")


class NewContainerVariable(VariableTracker):
    """`nn.Sequential(...)`, `nn.ModuleList(...)`, `nn.ModuleDict(...)` made by the trace."""

    __slots__ = ("cls", "table")

    def __init__(self, cls, children: dict):
        super().__init__(None)
        self.cls = cls
        self.table = _ModuleTable(children)

    @property
    def children(self) -> dict:
        return self.table.items

    def python_type(self):
        return self.cls

    def describe(self):
        return f"{self.cls.__qualname__} made in the trace"

    def _is_dict(self):
        return self.cls is nn.ModuleDict

    def iter_items(self, tx):
        return self.table.call_method(tx, "keys" if self._is_dict() else "values", [], {}).iter_items(tx)

    def truthy(self, tx):
        return bool(self.children)  # no __bool__: __len__ decides

    def getitem(self, tx, key):
        return _getitem(tx, self.cls, self.children, key, self.describe())

    def var_getattr(self, tx, name):
        if name in self.children:  # Module.__getattr__ finds submodules by name
            return self.children[name]
        if name == "training":
            return ConstantVariable(True)
        if name in _METHODS[self.cls]:
            return BoundMethodVariable(self, name)
        unsupported("construct", f"attribute {name!r} of a {self.describe()}")

    def call_method(self, tx, name, args, kwargs):
        n = len(args) + len(kwargs)
        if name == "__len__" and n == 0:
            return ConstantVariable(len(self.children))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__iter__" and n == 0:
            return iterator_of(tx, self)
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return contains(tx, self, args[0])
        if name in ("keys", "values", "items") and self._is_dict() and n == 0:
            return self.table.call_method(tx, name, [], {})
        if name == "append" and len(args) == 1 and not kwargs and self.cls is not nn.ModuleDict:
            self._add(tx, [args[0]])
            return self
        if name == "extend" and len(args) == 1 and not kwargs and self.cls is not nn.ModuleDict:
            self._add(tx, list(args[0].iter_items(tx)))
            return self
        unsupported("call", f"method {name!r} of a {self.describe()}")

    def _add(self, tx, modules):
        _guard_no_global_hooks(tx, _REGISTRATION_HOOKS, f"adding to a {self.describe()}")
        for m in modules:
            _check_module(m, self.cls)
            self.children[str(len(self.children))] = m

    def call_function(self, tx, args, kwargs):
        if self.cls is not nn.Sequential:
            unsupported("exceptions", f"NotImplementedError: Module [{self.cls.__name__}] is missing the "
                                      "required \"forward\" function")
        return call_new_module(tx, self, args, kwargs, lambda a, k: self._forward(tx, a, k))

    def _forward(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            unsupported("exceptions", "TypeError: Sequential.forward() takes one input")
        out = args[0]
        for child in list(self.children.values()):
            out = child.call_function(tx, [out], {})
        return out

    def rebuild_new(self, rb):
        cls = class_expr(rb, self.cls)
        items = list(self.children.items())
        if self.cls is nn.ModuleDict:
            return f"{cls}({{{', '.join(f'{k!r}: {rb.expr(v)}' for k, v in items)}}})"
        if self.cls is nn.ModuleList:
            return f"{cls}([{', '.join(rb.expr(v) for _, v in items)}])"
        if [k for k, _ in items] == [str(i) for i in range(len(items))]:
            return f"{cls}({', '.join(rb.expr(v) for _, v in items)})"
        pairs = ", ".join(f"({k!r}, {rb.expr(v)})" for k, v in items)
        return f"{cls}({rb.ns.bind(collections.OrderedDict, 'OrderedDict')}([{pairs}]))"


_METHODS = {
    nn.Sequential: ("append", "extend", "__len__", "__getitem__", "__iter__", "__contains__"),
    nn.ModuleList: ("append", "extend", "__len__", "__getitem__", "__iter__", "__contains__"),
    nn.ModuleDict: ("keys", "values", "items", "__len__", "__getitem__", "__iter__", "__contains__"),
}


def _check_module(v, cls):
    if not is_module_tracker(v):
        unsupported("call", f"a {cls.__qualname__} of {v.describe()} (only modules are traced as its entries)")


def _getitem(tx, cls, children: dict, key, what):
    """container[key] as torch's Sequential / ModuleList / ModuleDict answer it: an int
    (negative counts from the end), a slice (a new container: Sequential keeps the keys,
    ModuleList renumbers them), a ModuleDict key."""
    if not key.is_python_constant():
        unsupported("construct", f"indexing a {what} with {key.describe()}")
    k = key.as_python_constant()
    if cls is nn.ModuleDict:
        if type(k) is not str or k not in children:
            unsupported("exceptions", f"KeyError: {k!r}")
        return children[k]
    if isinstance(k, slice):
        picked = list(children.items())[k]
        if cls is nn.ModuleList:
            return NewContainerVariable(cls, {str(i): v for i, (_, v) in enumerate(picked)})
        return NewContainerVariable(cls, dict(picked))
    try:
        i = operator.index(k)
    except TypeError as e:
        unsupported("exceptions", f"TypeError: {e}")
    size = len(children)
    if not -size <= i < size:
        unsupported("exceptions", f"IndexError: index {i} is out of range")
    return list(children.values())[i % size]


def _make_container(tx, cls, args, kwargs):
    if cls is not nn.Sequential and set(kwargs) == {"modules"} and not args:
        args, kwargs = [kwargs["modules"]], {}
    if kwargs:
        unsupported("call", f"{cls.__qualname__} with keyword arguments {sorted(kwargs)}")
    if cls is nn.Sequential:
        if len(args) == 1 and isinstance(args[0], DictVariable):
            if args[0].dict_type is not collections.OrderedDict:
                unsupported("call", "nn.Sequential of a dict that is not an OrderedDict")
            children = dict(args[0].items)
        else:
            children = {str(i): a for i, a in enumerate(args)}
    elif len(args) > 1:
        unsupported("exceptions", f"TypeError: {cls.__qualname__}() takes at most one argument")
    elif not args or (args[0].is_python_constant() and args[0].as_python_constant() is None):
        children = {}
    elif cls is nn.ModuleList:
        children = {str(i): m for i, m in enumerate(args[0].iter_items(tx))}
    elif isinstance(args[0], DictVariable):
        children = dict(args[0].items)
    else:
        children = {}
        for pair in args[0].iter_items(tx):
            kv = pair.unpack_sequence(tx)
            if len(kv) != 2 or not kv[0].is_python_constant():
                unsupported("construct", "a ModuleDict made of items that are not (name, module) pairs")
            children[kv[0].as_python_constant()] = kv[1]
    for name, m in children.items():
        _check_module(m, cls)
        if type(name) is not str:
            unsupported("exceptions", f"TypeError: module name should be a string. Got {type(name).__name__}")
    _guard_no_global_hooks(tx, _REGISTRATION_HOOKS, f"creating a {cls.__qualname__}")
    _check_names(cls, children)
    return NewContainerVariable(cls, children)


def _check_names(cls, children):
    """add_module's checks of each name (no '.', not empty, not an attribute of the
    class), made on an empty container of the same class with stand-in modules."""
    scratch = cls()
    for name in children:
        try:
            scratch.add_module(name, _STAND_IN)
        except Exception as e:  # the eager run raises it for real
            unsupported("exceptions", f"{type(e).__name__}: {e}", raised=attribute_error(e))


_STAND_IN = nn.Identity()


def _construct(tx, cls, args, kwargs):
    if cls in CONTAINERS:
        return _make_container(tx, cls, args, kwargs)
    return _make_parameterless(tx, cls, args, kwargs)


def _is_torch_nn_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, nn.Module) and cls.__module__.startswith("torch.nn.")



# --- containers passed in (UserObjectVariable with a source) --------------------------
def passed_container_class(obj):
    """The container class whose item and iteration protocol `obj` follows unchanged,
    or None."""
    for cls in (*CONTAINERS, nn.ParameterList):
        if isinstance(obj, cls):
            t = type(obj)
            if t.__iter__ is cls.__iter__ and t.__getitem__ is cls.__getitem__ and t.__len__ is cls.__len__:
                return cls
    return None


def container_items(tx, var, cls):
    """What iterating the passed-in container `var` yields (its `_modules`, guarded; a
    ParameterList's items, as its `__iter__` reads them: `self[i]` for i below its length)."""
    if cls is nn.ParameterList:
        return [_parameter_list_item(tx, var, i) for i in range(_parameter_list_len(tx, var))]
    table = var.var_getattr(tx, "_modules")
    return table.call_method(tx, "keys" if cls is nn.ModuleDict else "values", [], {}).iter_items(tx)


def container_getitem(tx, var, cls, key):
    if cls is not type(var.value) and key.is_python_constant() and isinstance(key.as_python_constant(), slice):
        unsupported("construct", f"slicing a {type(var.value).__qualname__} (it makes an object of that class)")
    if cls is nn.ParameterList:
        k = key.as_python_constant() if key.is_python_constant() else None
        if isinstance(k, slice):
            unsupported("construct", "slicing a ParameterList (it makes a ParameterList)")
        positions = {str(i): i for i in range(_parameter_list_len(tx, var))}  # as ModuleList indexes
        return _parameter_list_item(tx, var, _getitem(tx, nn.ModuleList, positions, key, var.describe()))
    table = var.var_getattr(tx, "_modules")
    return _getitem(tx, cls, table.items, key, var.describe())


def _parameter_list_len(tx, var) -> int:
    return var.var_getattr(tx, "_size").as_python_constant()  # its __len__ (guarded by value)


def _parameter_list_item(tx, var, i: int):
    return var.var_getattr(tx, str(i))  # its __getitem__: getattr(self, str(i))


def reversed_children(tx, var):
    """`reversed(c)` of a Sequential, ModuleList or ParameterList (made in the trace or
    passed in): they have no `__reversed__`, so CPython walks `__len__`/`__getitem__`,
    which give the items in reverse order. None for other values (a ModuleDict's
    `__getitem__` takes names, not positions)."""
    if isinstance(var, NewContainerVariable):
        return None if var.cls is nn.ModuleDict else list(var.children.values())[::-1]
    if isinstance(var, UserObjectVariable) and var.source is not None:
        cls = passed_container_class(var.value)
        if cls is not None and cls is not nn.ModuleDict and not hasattr(type(var.value), "__reversed__"):
            return list(container_items(tx, var, cls))[::-1]
    return None


def module_dict_items(tx, var):
    """`dict(d)` of a ModuleDict (made in the trace or passed in): a mapping (it has
    keys()), so dict() reads `d[k]` for each of `d.keys()`. None for other values."""
    if isinstance(var, NewContainerVariable):
        return dict(var.children) if var.cls is nn.ModuleDict else None
    if isinstance(var, UserObjectVariable) and var.source is not None and \
            passed_container_class(var.value) is nn.ModuleDict and type(var.value).keys is nn.ModuleDict.keys:
        return dict(var.var_getattr(tx, "_modules").items)
    return None
