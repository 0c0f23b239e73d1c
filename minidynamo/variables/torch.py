"""torch functions, modules and classes: calls become graph nodes run on fake tensors."""
from __future__ import annotations

import inspect
import types

import torch

from .unbound_methods import call_unbound_method
from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource
from .base import ObjectConstantVariable
from .constant import ConstantVariable, fold, is_constant_value
from .contexts import GradModeVariable, _set_grad
from .lists import BaseListVariable, TupleVariable
from .scalar_tensor_args import decompose_call
from .purity import is_checkpoint, is_compiler_disabled, is_operator, qualified_name
from .torch_queries import query_of
from .symbolic import SymNodeVariable
from .tensor import _METADATA_METHODS, TensorVariable
from .contexts import ContextDecoratedFunction, make_context_manager
from .dicts import DictVariable
from .function_modes import NO_BREAK, STACK_QUERIES, active, dispatch_call
from .functions import BaseFunctionVariable, UserMethodVariable, UserFunctionVariable
from .lazy_iterators import bind_args
from .objects import ClassVariable, construct
from .user_objects import _construct

# Pure functions of metadata that may be folded even with no tensor argument.
_PURE_NO_TENSOR = {
    torch.promote_types, torch.result_type, torch.can_cast, torch.finfo, torch.iinfo,
    torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.Size, torch.device,
}
# Calls that change global state or talk to the outside world: named in the refusal.
_SIDE_EFFECTS = {torch.manual_seed, torch.seed, torch.set_rng_state, torch.set_default_dtype,
                 torch.set_printoptions, torch.save, torch.load,
                 torch.use_deterministic_algorithms, torch.set_num_threads,
                 torch.set_float32_matmul_precision,
                 *filter(None, [getattr(torch, "set_default_device", None)])}
# Functions that run autograd's engine on the tensors: a break, as for Tensor.backward().
_RUNS_AUTOGRAD = {torch.autograd.grad: "computes gradients with autograd's engine",
                  torch.autograd.backward: "runs autograd's engine"}
# Attribute types of torch modules that are settings rather than fixed objects.
_FLAG_TYPES = (bool, int, float, str, type(None))
# Python functions of torch that are thin wrappers over operators: called on the fake
# tensors as they are (everything they do reaches the dispatcher).
_OPERATOR_WRAPPER_MODULES = {"torch.nn.functional", "torch.functional", "torch.nn.init",
                             "torch._tensor"}


def _settings_types() -> tuple:
    """Objects of torch.backends whose attributes are settings read through C getters
    (`torch.backends.cuda.matmul.allow_tf32`, `torch.backends.cudnn.conv.fp32_precision`):
    their `__getattr__` only reads, so an attribute is read now and guarded by reading it
    again."""
    import torch.backends
    import torch.backends.cuda
    return tuple(t for t in (getattr(torch.backends.cuda, "cuBLASModule", None),
                             getattr(torch.backends, "_FP32Precision", None)) if t is not None)


SETTINGS_TYPES = _settings_types()


def is_torch_object(value) -> bool:
    mod = getattr(value, "__module__", None) or ""
    if isinstance(value, types.ModuleType):
        return value.__name__ == "torch" or value.__name__.startswith("torch.")
    return mod == "torch" or mod.startswith("torch.") or mod.startswith("torch._C")


def _is_size(v) -> bool:
    return isinstance(v, TupleVariable) and v.tuple_type is torch.Size


def _has_tensor(values) -> bool:
    for v in values:
        if isinstance(v, TensorVariable):
            return True
        if isinstance(v, BaseListVariable) and _has_tensor(v.items):
            return True
        if isinstance(v, DictVariable) and _has_tensor(v.items.values()):
            return True
    return False


class TorchVariable(ObjectConstantVariable):
    """A torch module, function or class used by the traced code."""

    rebuild = ObjectConstantVariable.rebuild_as_itself

    def describe(self):
        name = getattr(self.value, "__qualname__", None) or getattr(self.value, "__name__", repr(self.value))
        mod = getattr(self.value, "__module__", None)
        return f"torch object {mod + '.' if mod else ''}{name}"

    def var_getattr(self, tx, name):
        attr = self.real_attr(name)
        source = AttrSource(self.source, name) if self.source is not None else None
        if type(attr) in _FLAG_TYPES and isinstance(self.value, types.ModuleType):
            # A setting (torch.backends.cudnn.deterministic, ...) users assign between
            # calls: read through its source, so it is guarded.
            if source is None:
                unsupported("construct", f"{qualified_name(self.value)}.{name}, a setting that "
                                         "could not be guarded here")
            return tx.wrap(attr, source)
        if is_constant_value(attr):
            return ConstantVariable(attr)  # dtypes, devices, layouts: never rebound
        if type(attr) in SETTINGS_TYPES:
            if source is None:
                unsupported("construct", f"{qualified_name(self.value)}.{name}, settings that "
                                         "could not be guarded here")
            tx.output.guards.add(Guard("ID_MATCH", source, attr))
            return TorchSettingsVariable(attr, source)
        if attr is torch.autograd.graph.disable_saved_tensors_hooks:
            return tx.wrap(attr, source)  # a region (library_contexts.py, through the registry)
        if callable(attr) or isinstance(attr, types.ModuleType):
            return TorchVariable(attr, source)
        return tx.wrap(attr, None)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        what = qualified_name(fn)
        for a in (*args, *kwargs.values()):  # an argument that takes the call over (a NumPy array)
            takeover = getattr(a, "call_torch_function", None)
            if takeover is not None:
                return takeover(tx, fn, args, kwargs)
        if active(tx) and (is_operator(fn) or _is_wrapper(fn) or _is_tensor_method(fn)):
            return dispatch_call(tx, fn, list(args), dict(kwargs))  # the entered torch function mode's handler
        if fn in STACK_QUERIES and active(tx):
            unsupported("call", f"{what}() under a torch function mode entered in the trace", no_break=NO_BREAK)
        if fn in _SIDE_EFFECTS:
            unsupported("side_effect", f"{what}() changes global state")
        if fn in _RUNS_AUTOGRAD:
            unsupported("call", f"{what}() {_RUNS_AUTOGRAD[fn]}",
                        hint="take gradients of what the optimized function returns, outside it")
        special = _special_call(fn)
        if special is not None:
            return special(tx, fn, list(args), dict(kwargs))
        modelled = tx.library_call(fn, args, kwargs)  # torch.utils._pytree.tree_flatten, torch.vmap, ...
        if modelled is not None:
            return modelled
        constant_args = all(a.is_python_constant() for a in args) and all(
            v.is_python_constant() for v in kwargs.values())
        query = query_of(fn)
        if query is not None and constant_args:
            return query.answer(tx, self, [a.as_python_constant() for a in args],
                                {k: v.as_python_constant() for k, v in kwargs.items()})
        if fn is torch.Size or (not _has_tensor(args) and not _has_tensor(kwargs.values())
                                and fn in _PURE_NO_TENSOR):
            if constant_args:
                return fold(tx, fn, [a.as_python_constant() for a in args],
                            {k: v.as_python_constant() for k, v in kwargs.items()}, what)
        if isinstance(fn, type) and (issubclass(fn, torch.nn.Parameter) or fn is _BUFFER):
            return make_parameter(tx, fn, args, kwargs)
        if isinstance(fn, type) and not issubclass(fn, torch.Tensor):
            if fn in (torch.no_grad, torch.enable_grad) and len(args) == 1 and not kwargs:
                return decorate_with_grad_mode(tx, args[0], fn is torch.enable_grad, fn)  # @torch.no_grad
            cm = make_context_manager(tx, fn, args, kwargs)
            if type(cm) is GradModeVariable:
                return GradModeFactoryVariable.like(cm)
            if cm is not None:
                return cm
            made = construct(tx, fn, args, kwargs)
            if made is not None:
                return made
            if hasattr(fn, "__enter__"):
                unsupported("call", f"the context manager {what} is not traced",
                            hint="enter it around the optimized call, or move the block into a helper "
                                 "called outside the optimized function")
            unsupported("call", f"creating a {what} object while tracing",
                        hint="create it outside the optimized function and pass it in")
        if is_checkpoint(fn):
            return tx.capture_checkpoint(list(args), dict(kwargs))
        if is_compiler_disabled(fn):
            unsupported("call", f"{what} is wrapped by torch.compiler.disable: it runs eagerly")
        if isinstance(fn, types.FunctionType) and (
                fn.__module__ not in _OPERATOR_WRAPPER_MODULES
                or fn.__name__.startswith("_") and not _has_tensor(args) and not _has_tensor(kwargs.values())):
            # (a private helper of those modules taking no tensor, such as
            # F._none_or_dtype(None), is plain Python too: it need not return a tensor)
            # Python code of torch's: interpreted like the user's, so whatever it calls
            # passes the same checks.
            return UserFunctionVariable(fn).call_function(tx, args, kwargs)
        result = call_unbound_method(tx, fn, args, kwargs)  # `torch.Tensor.add(x, 1)`
        if result is not None:
            return result
        if not (is_operator(fn) or isinstance(fn, types.FunctionType)
                or (isinstance(fn, type) and issubclass(fn, torch.Tensor))):
            # NOTE: declined before the call: a C function outside the dispatcher may
            # change state (set_eval_frame, CUDA streams, RNG) even on fake arguments.
            unsupported("call", f"{what} is not a torch operator or a known pure query; "
                                "calling it while tracing could change state")
        if fn is torch.Tensor and len(args) == 1 and _is_size(args[0]):
            # torch.Tensor(size) is an uninitialised tensor of that shape; the graph keeps a
            # Size only as a plain tuple, which torch.Tensor would take as data.
            args = list(args[0].items)
            if not args:  # torch.Tensor(torch.Size([])): 0-d, the default dtype
                return tx.output.call("call_function", torch.empty, [TupleVariable([])], {},
                                      what=what, fold_metadata=False)
        decomposed = decompose_call(tx, fn, args, kwargs)  # a 0-d tensor where a number goes
        if decomposed is not None:
            return decomposed
        tensor_in = _has_tensor(args) or _has_tensor(kwargs.values())
        return tx.output.call("call_function", fn, list(args), dict(kwargs),
                              what=what, fold_metadata=tensor_in)


def _is_wrapper(fn) -> bool:
    """A thin operator wrapper of torch's in Python (`F.relu`): called as one node."""
    return isinstance(fn, types.FunctionType) and fn.__module__ in _OPERATOR_WRAPPER_MODULES \
        and not fn.__name__.startswith("_")


def _is_tensor_method(fn) -> bool:
    name = getattr(fn, "__name__", None)
    return isinstance(name, str) and inspect.getattr_static(torch.Tensor, name, None) is fn


class TorchSettingsVariable(ObjectConstantVariable):
    """`torch.backends.cuda.matmul` and the like: each attribute read is a setting, read
    now and guarded by reading it again (assigning it between calls recompiles)."""

    def describe(self):
        return f"torch settings object {type(self.value).__qualname__}"

    def var_getattr(self, tx, name):
        value = self.real_attr(name)  # a C getter: reads, changes nothing
        if type(value) not in _FLAG_TYPES:
            unsupported("construct", f"{name!r} of {self.describe()} is not a setting")
        return tx.wrap(value, AttrSource(self.source, name))


# --- torch's checks: has_torch_function, _assert_async, _assert_scalar ----------------
def _overrides_torch_function(v) -> bool:
    """What torch's C `has_torch_function` finds for one argument while no torch function
    mode is active: True only for an object whose type is neither exactly Tensor nor a
    basic Python type and has a `__torch_function__` other than torch's disabled one."""
    if isinstance(v, SymNodeVariable):
        return False  # SymInt, SymFloat, SymBool: no __torch_function__ (not specialised)
    if isinstance(v, TensorVariable):
        cls = v.python_type()  # the exact type: TENSOR_MATCH guards it for inputs
        if cls is torch.Tensor or getattr(cls, "__torch_function__", None) is torch._C._disabled_torch_function_impl:
            return False  # (nn.Parameter disables it)
        unsupported("call", f"has_torch_function of a {cls.__qualname__}, a tensor subclass that "
                            "overrides torch functions")
    if isinstance(v, ConstantVariable):  # an immutable value, guarded by value and type
        return torch._C._has_torch_function_unary(v.value)
    t = v.python_type()
    if t in (list, tuple, dict, set, frozenset):  # basic types: never asked for the attribute
        return False
    unsupported("call", f"has_torch_function of {v.describe()} (only tensors, sizes and constants "
                        "are answered while tracing)")


def _has_torch_function(tx, fn, args, kwargs):
    """`torch._C._has_torch_function(seq)`, `_unary(x)`, `_variadic(*xs)` (re-exported by
    torch.overrides), which torch's Python wrappers ask first: a constant. What it depends
    on besides the arguments' types (torch function enabled, the function mode stack) is
    global state, which every entry checks."""
    if kwargs:
        unsupported("exceptions", f"TypeError: {fn.__name__}() takes no keyword arguments")
    if fn is torch._C._has_torch_function_variadic:
        elems = args
    elif len(args) != 1:
        unsupported("exceptions", f"TypeError: {fn.__name__}() takes exactly one argument ({len(args)} given)")
    elif fn is torch._C._has_torch_function_unary:
        elems = args
    elif isinstance(args[0], BaseListVariable):
        elems = args[0].unpack_sequence(tx)
    else:
        unsupported("call", f"{fn.__name__}() of {args[0].describe()} (a tuple or list is answered)")
    if torch._C._is_torch_function_mode_enabled() or active(tx):
        unsupported("call", "has_torch_function() while a torch function mode is active (the mode "
                            "would handle the call)")
    if not torch._C._is_torch_function_enabled():
        return ConstantVariable(False)
    return ConstantVariable(any(_overrides_torch_function(v) for v in elems))


def _assert_async(tx, fn, args, kwargs):
    """`torch._assert_async(cond[, msg])` of a tensor: a graph node with no result, which
    raises what eager raises when the graph runs (never removed: the graph keeps every op)."""
    if not args or not isinstance(args[0], TensorVariable):
        return _call_op(tx, fn, args, kwargs)  # eager's TypeError, raised on the fakes
    return tx.output.call("call_function", fn, args, kwargs, what=qualified_name(fn), allow_none=True)


def _assert_scalar(tx, fn, args, kwargs):
    """`torch._assert_scalar(cond, msg)` of a bool or a symbolic bool: decided now (a
    symbolic one becomes a guard); False raises eager's RuntimeError in the eager run."""
    cond, msg = bind_args("_assert_scalar", args, kwargs, ("self", "assert_msg"), {})
    if not (isinstance(cond, SymNodeVariable) or isinstance(cond, ConstantVariable)) or not msg.is_python_constant():
        return _call_op(tx, fn, args, kwargs)
    if cond.truthy(tx):
        return ConstantVariable(None)
    unsupported("exceptions", f"RuntimeError: {msg.as_python_constant()}")


def _set_grad_enabled(tx, fn, args, kwargs):
    """`torch._C._set_grad_enabled(mode)` (what torch's own grad-mode managers and user
    managers' `__enter__`/`__exit__` call): the mode set from here on, in the trace and as a
    node of the graph, as the statement form of `torch.set_grad_enabled` does."""
    if len(args) != 1 or kwargs or not args[0].is_python_constant():
        unsupported("call", "torch._C._set_grad_enabled with a mode known only at run time")
    mode = args[0].as_python_constant()
    if type(mode) is not bool:
        unsupported("exceptions", f"TypeError: set_grad_enabled(): argument 'enabled' must be bool, not "
                                  f"{type(mode).__name__}")
    _set_grad(tx, mode, always=True)
    return ConstantVariable(None)


def _call_op(tx, fn, args, kwargs):
    return tx.output.call("call_function", fn, args, kwargs, what=qualified_name(fn))


_SPECIAL_CALLS = {
    torch._C._has_torch_function: _has_torch_function,
    torch._C._has_torch_function_unary: _has_torch_function,
    torch._C._has_torch_function_variadic: _has_torch_function,
    torch._assert_async: _assert_async,
    torch._C._set_grad_enabled: _set_grad_enabled,
    **({torch._assert_scalar: _assert_scalar} if hasattr(torch, "_assert_scalar") else {}),
}


def _special_call(fn):
    try:
        return _SPECIAL_CALLS.get(fn)
    except TypeError:  # unhashable
        return None


# --- nn.Parameter and nn.Buffer made in the trace --------------------------------------
_BUFFER = getattr(torch.nn, "Buffer", None)  # torch 2.5+


class MadeParameterVariable(TensorVariable):
    """`torch.nn.Parameter(data, requires_grad)` (a subclass of it, or `torch.nn.Buffer(data)`)
    made in the trace. Eager's is a new leaf sharing data's storage, detached from data's
    autograd history. In the graph it is `data.detach()` (the same storage, no history); the
    object itself is made after the graph from that output (`rebuild_new`), so what the call
    returns, or a graph break hands on, is the real type and a leaf. The trace answers
    isinstance, type(), requires_grad, is_leaf, grad and .data from what it knows.

    One that requires grad and is an operand of a graph op is made in the graph instead,
    when the first op takes it (`Parameter(detached, True)`, marked `made_parameter`): the
    ops' gradients must reach that very object, which the graph then returns. Torch's
    compiling backends would not keep it a leaf, so such a graph runs as it is there
    (torch_backends.py)."""

    __slots__ = ("plain", "grad_needed", "persistent", "output", "made_in_graph")

    def __init__(self, output, plain: TensorVariable, cls, requires_grad: bool, persistent=None):
        fake = plain.fake
        if requires_grad:
            with fake.fake_mode:
                fake = fake.detach().requires_grad_(True)
        super().__init__(plain.node, fake, None, cls=cls)
        self.output = output
        self.plain = plain  # the graph's data.detach(): a plain tensor of the same storage
        self.grad_needed = requires_grad
        self.persistent = persistent  # a Buffer's (None: a Parameter)
        self.made_in_graph = False

    def describe(self):
        return f"{self.cls.__name__} made in the trace ({self.node.name}, {tuple(self.fake.shape)})"

    def as_fx_arg(self):
        if self.grad_needed and not self.made_in_graph:
            if self.persistent is not None:  # a Buffer is a plain tensor: the leaf is made as eager does
                made = self.output.call("call_function", _remade_buffer,
                                        [self.plain, ConstantVariable(True), ConstantVariable(self.persistent)],
                                        {}, what="nn.Buffer()")
            else:
                made = self.output.call("call_function", self.cls, [self.plain, ConstantVariable(True)], {},
                                        what=f"{self.cls.__name__}()")
            made.node.meta["made_parameter"] = True
            self.node, self.fake, self.made_in_graph = made.node, made.fake, True
        return self.node

    def isinstance_of(self, cls):
        """isinstance(b, nn.Buffer) asks the object (Buffer's metaclass reads _is_buffer)."""
        if _BUFFER is not None and isinstance(cls, type) and issubclass(cls, _BUFFER):
            return self.persistent is not None
        return None

    def var_getattr(self, tx, name):
        if name in ("requires_grad", "is_leaf"):
            return ConstantVariable(self.grad_needed if name == "requires_grad" else True)
        if name in ("grad", "grad_fn"):
            return ConstantVariable(None)  # a new leaf: no gradient yet, no history
        if name == "data":  # a new plain tensor over the same storage
            return tx.output.call("call_method", "detach", [self.plain], {}, what=f"{self.cls.__name__}.data")
        if self.persistent is not None and name in ("persistent", "_is_buffer"):
            return ConstantVariable(self.persistent if name == "persistent" else True)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in _METADATA_METHODS:  # sizes, strides, dim(): the data's
            return self.plain.call_method(tx, name, args, kwargs)
        if name == "requires_grad_" and len(args) + len(kwargs) <= 1:
            flag = (args or list(kwargs.values()) or [ConstantVariable(True)])[0]
            if not flag.is_python_constant() or self.made_in_graph:
                unsupported("construct", f"requires_grad_() on the {self.describe()} after an op used it")
            grad = bool(flag.as_python_constant())
            if grad and not (self.plain.fake.is_floating_point() or self.plain.fake.is_complex()):
                unsupported("exceptions", "RuntimeError: only Tensors of floating point dtype can require gradients")
            self.grad_needed = grad  # a leaf's flag: eager flips it in place
            fake = self.plain.fake
            with fake.fake_mode:
                self.fake = fake.detach().requires_grad_(grad)
            return self
        return super().call_method(tx, name, args, kwargs)

    def rebuild_new(self, rb) -> str:
        if self.made_in_graph:  # the graph's own object
            return rb.expr(TensorVariable(self.node, self.fake))
        data = rb.expr(self.plain)
        if self.persistent is not None:
            return f"{rb.ns.bind(_remade_buffer, 'remade_buffer')}({data}, {self.grad_needed!r}, " \
                   f"{self.persistent!r})"
        return f"{rb.ns.bind(self.cls, 'parameter_type')}({data}, {self.grad_needed!r})"

    def __repr__(self):
        return f"MadeParameterVariable({self.cls.__name__}, {self.node.name}, requires_grad={self.grad_needed})"


def _remade_buffer(data, requires_grad: bool, persistent: bool):
    """nn.Buffer(data) as eager made it from `data` detached: requiring grad where eager's
    data did."""
    return _BUFFER(data.requires_grad_(requires_grad) if requires_grad else data, persistent=persistent)


def make_parameter(tx, cls, args, kwargs):
    """`cls(data=None, requires_grad=True)` for nn.Parameter and its subclasses (that add no
    __new__, __init__ or torch function handling of their own), `nn.Buffer(data=None, *,
    persistent=True)`."""
    name = cls.__name__
    if cls is _BUFFER:
        if len(args) > 1:
            unsupported("exceptions", f"TypeError: Buffer.__new__() takes from 1 to 2 positional "
                                      f"arguments but {len(args) + 1} were given")
        data, persistent = bind_args(name, args, kwargs, ("data", "persistent"),
                                     {"data": ConstantVariable(None), "persistent": ConstantVariable(True)})
        requires_grad = None  # the data's
    else:
        own = [k for k in ("__new__", "__init__", "__torch_function__", "__torch_dispatch__")
               if getattr(cls, k, None) is not getattr(torch.nn.Parameter, k, None)]
        if own:
            unsupported("call", f"creating a {name} (a Parameter subclass with its own {own[0]}) while tracing",
                        hint="create it outside the optimized function and pass it in")
        data, requires_grad = bind_args(name, args, kwargs, ("data", "requires_grad"),
                                        {"data": ConstantVariable(None), "requires_grad": ConstantVariable(True)})
        persistent = None
    flags = [v for v in (requires_grad, persistent) if v is not None]
    if not all(v.is_python_constant() for v in flags):
        unsupported("data_dependent", f"{name}() with a flag that is not a constant")
    if isinstance(data, ConstantVariable) and data.value is None:
        data = tx.output.call("call_function", torch.empty, [ConstantVariable(0)], {}, what=f"{name}()")
    if type(data) is not TensorVariable:
        unsupported("call", f"{name}() of {data.describe()} while tracing",
                    hint="create it outside the optimized function and pass it in")
    plain = tx.output.call("call_method", "detach", [data], {}, what=f"{name}()")
    if requires_grad is None:
        grad = bool(data.fake.requires_grad)
        persistent = bool(persistent.as_python_constant())
    else:
        grad = bool(requires_grad.as_python_constant())
        persistent = None
    if grad and not (plain.fake.is_floating_point() or plain.fake.is_complex()):
        unsupported("exceptions", "RuntimeError: Only Tensors of floating point and complex dtype can "
                                  "require gradients")
    return MadeParameterVariable(tx.output, plain, cls if requires_grad is not None else torch.Tensor, grad, persistent)


# --- grad-mode context managers used as decorators ------------------------------------
class GradModeFactoryVariable(GradModeVariable):
    """`torch.no_grad()`, `torch.enable_grad()`, `torch.set_grad_enabled(mode)` made in
    the trace: the context manager of contexts.py, which is also a decorator."""

    @classmethod
    def like(cls, cm):
        made = cls(cm.enabled, cm.manager_type)
        made.prev = cm.prev  # set_grad_enabled(mode) has already set the mode
        return made

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            unsupported("exceptions", f"TypeError: {self.manager_type.__name__}() as a decorator takes "
                                      "one function")
        if self.manager_type is torch.set_grad_enabled and self.prev is not None:
            self.exit(tx)  # its __call__ puts back the mode from before it was made
        return decorate_with_grad_mode(tx, args[0], self.enabled, self.manager_type)


def decorate_with_grad_mode(tx, fn, enabled: bool, manager_type):
    """`torch.no_grad()(fn)` and the like: what calling the result does is a grad-mode
    region around the call of `fn`."""
    if isinstance(fn, ClassVariable) or (isinstance(fn, TorchVariable) and isinstance(fn.value, type)):
        unsupported("call", f"decorating a class with {manager_type.__name__}")
    if not isinstance(fn, (BaseFunctionVariable, UserMethodVariable)):
        unsupported("call", f"decorating {fn.describe()} with {manager_type.__name__}")
    plain = fn.func if isinstance(fn, UserMethodVariable) else fn
    code = plain.get_code() if hasattr(plain, "get_code") else None
    if code is None or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        # A generator is wrapped so that each step runs in the mode: not modelled.
        unsupported("call", f"decorating {fn.describe()} with {manager_type.__name__} (only plain "
                            "functions are traced as grad-mode regions)")
    return ContextDecoratedFunction(GradModeVariable(enabled, manager_type), fn)


def _is_distribution_class(cls) -> bool:
    return isinstance(cls, type) and cls.__module__.startswith("torch.distributions.") \
        and issubclass(cls, torch.distributions.Distribution)


def _make_distribution(tx, cls, args, kwargs):
    """A torch.distributions object is a plain Python object (its parameters are tensors,
    its shapes Sizes): made in the trace as a user class's object is (user_objects.py);
    sampling is a random op of the graph, as torch.randn is."""
    return _construct(tx, cls, args, kwargs)

