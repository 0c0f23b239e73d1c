"""TensorVariable: a tensor during the trace — an fx node plus its fake value.

Metadata (shape, dtype, device, ndim, ...) is read from the fake value and is static:
the TENSOR_MATCH guard on every graph input pins it. Reading tensor *data* declines.
"""
from __future__ import annotations

import inspect
import operator
import sys

import torch

from ..config import config
from ..dynamic import has_symbolic
from ..scalar_reads import scalar_read
from ..exc import unsupported
from ..guards import Guard
from ..sources import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable
from .storages import storage_of
from .functions import BoundMethodVariable
from .lists import TupleVariable
from .scalar_tensor_args import decompose_method
from .symbolic import SymNodeVariable

# Methods whose result is metadata, folded to a constant (no node).
_METADATA_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
    "element_size", "is_floating_point", "is_complex", "get_device",
    "__len__", "is_signed", "type", "is_inference",
}
# Methods that read data or leave the tensor world: always a fallback.
_DATA_METHODS = {
    "item": "reads a tensor value into Python", "tolist": "reads tensor values into Python",
    "numpy": "converts to NumPy", "data_ptr": "reads a memory address",
    "untyped_storage": "reads the storage", "storage": "reads the storage",
    "__bool__": "needs a tensor's truth value", "__int__": "reads a tensor value into Python",
    "__float__": "reads a tensor value into Python", "__index__": "reads a tensor value into Python",
    "__repr__": "prints data", "__str__": "prints data", "__format__": "formats data",
}
_VALUE_METHODS = {"item", "tolist", "numpy", "__int__", "__float__", "__index__"}
_VALUE_HINT = ("keep the value a tensor inside the optimized function (a 0-d tensor works in "
               "arithmetic), or return the tensor and read it outside")
# Methods that change a tensor's storage or its autograd metadata, which torch's compiling
# backends cannot replay on a graph input (AOTAutograd: an out-of-bounds storage, an expand
# error, a flag dropped): breaks, as torch.compile's. requires_grad_/detach_ that change
# nothing are no-ops (call_method).
_RESIZE_METHODS = {"resize_": "reallocates the storage", "resize_as_": "reallocates the storage"}
# Methods that run or change autograd outside the graph.
_AUTOGRAD_METHODS = {"backward": "runs autograd", "register_hook": "registers a hook"}
# Attributes pinned by the TENSOR_MATCH guard (type, dtype, device, shape, strides,
# requires_grad) or implied by them. Not grad_fn, storage_offset: not guarded (is_leaf: _is_leaf).
_METADATA_ATTRS = {"dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "is_nested", "is_cpu",
                   "is_mkldnn", "is_xpu", "is_mps", "is_sparse_csr",
                   "is_quantized", "is_meta", "layout", "itemsize", "nbytes"}
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "real", "imag", "data"}


def captures_scalars() -> bool:
    """config.capture_scalar_outputs, or torch.compile's setting of that name where
    torch._dynamo's config is loaded (never imported for this)."""
    if config.capture_scalar_outputs:
        return True
    torch_config = sys.modules.get("torch._dynamo.config")
    # (its settings as a dict: a name a torch release lacks is then no AttributeError,
    # which torch's config module logs as an error before raising)
    settings = getattr(torch_config, "_config", None)
    return isinstance(settings, dict) and "capture_scalar_outputs" in settings \
        and bool(torch_config.capture_scalar_outputs)


def _legacy_tensor_type(v) -> str | None:
    """The name Tensor.type() takes for a legacy tensor class (`torch.HalfTensor` is
    "torch.HalfTensor", `torch.cuda.FloatTensor` "torch.cuda.FloatTensor"), else None."""
    if not v.is_python_constant():
        return None
    cls = v.as_python_constant()
    if not isinstance(cls, type) or cls not in getattr(torch, "_tensor_classes", ()):
        return None
    return f"{cls.__module__}.{cls.__name__}"


class TensorVariable(VariableTracker):
    __slots__ = ("node", "fake", "cls")

    def __init__(self, node, fake, source=None, cls=torch.Tensor):
        super().__init__(source)
        self.node = node
        self.fake = fake
        self.cls = cls  # the real tensor's type: torch.Tensor or nn.Parameter (guarded)

    def python_type(self):
        return self.cls

    def rebuild(self, rb) -> str:
        if self.rebuild_new is not None:  # an object made after the graph from its outputs
            return super().rebuild(rb)
        return rb.graph_value(self)

    def as_fx_arg(self):
        return self.node

    def as_fake(self):
        return self.fake

    def describe(self):
        return f"tensor {self.node.name} {tuple(self.fake.shape)}"

    def truthy(self, tx):
        unsupported("data_dependent", f"the truth value of {self.describe()} depends on its data "
                    "(branching on a tensor: compute the condition with shapes, or mark the call to run eagerly)")

    def var_getattr(self, tx, name):
        fake = self.fake
        if name == "__class__":
            # The exact type: a graph input's is pinned by TENSOR_MATCH (subclasses other
            # than Parameter are declined as inputs); a computed tensor is a torch.Tensor.
            return tx.wrap(self.cls, None)
        own = self._own_attr(tx, name)
        if own is not None:
            return own
        if tx.output.function_modes:
            handled = tx.mode_dispatch_getattr(self, name)  # x.shape asks the mode
            if handled is not None:
                return handled
        if name == "shape":
            return size_variable(fake.shape, tx.output, self.node)
        if name in _METADATA_ATTRS:
            value = getattr(fake, name)
            if has_symbolic(value):  # nbytes of a tensor with symbolic sizes
                return tx.output.call("call_function", getattr, [self, ConstantVariable(name)], {},
                                      what=f"Tensor.{name}", fold_metadata=True)
            return ConstantVariable(value)
        if name in _TENSOR_ATTRS:
            return tx.output.call("call_function", getattr, [self, ConstantVariable(name)], {},
                                  what=f"Tensor.{name}")
        if name == "grad":
            real = tx.output.example_of(self) if self.source is not None else None
            if real is not None and (real.is_leaf or not real.requires_grad):
                # A leaf passed in: its gradient as it is now (nothing in a trace runs a
                # backward), guarded: None, or a tensor input of its own.
                return tx.wrap(real.grad, AttrSource(self.source, "grad"))
            unsupported("construct", "reading Tensor.grad of a tensor computed in the trace or not a leaf",
                        hint="gradients (an optimizer's step reads them) are not traced yet: call "
                             "optimizer.step() outside the optimized function; the forward and the "
                             "loss are captured")
        if name == "is_leaf":
            return self._is_leaf(tx)
        if not hasattr(self.cls, name):
            unsupported("exceptions", f"AttributeError: {self.cls.__name__!r} object has no attribute {name!r}",
                        raised=AttributeError)
        if name == "_version":
            unsupported("construct", "reading Tensor._version while tracing: it counts the in-place writes "
                                     "made at run time, which a graph does not replay one by one")
        if not callable(getattr(torch.Tensor, name)):  # grad_fn, is_leaf...: data, not methods
            unsupported("construct", f"reading Tensor.{name} while tracing")
        return BoundMethodVariable(self, name)

    def _is_leaf(self, tx):
        """`x.is_leaf`: a tensor the graph computes is one where autograd does not record it
        (the fake tensor's grad_fn says); one passed in that requires grad may be either
        (computed by the caller), guarded so; one that does not always is."""
        real = tx.output.example_of(self) if self.source is not None else None
        if real is None:
            return ConstantVariable(self.fake.grad_fn is None)
        if real.requires_grad:
            tx.output.guards.add(Guard("EQUALS_MATCH", AttrSource(self.source, "is_leaf"), real.is_leaf))
        return ConstantVariable(real.is_leaf)

    def _own_attr(self, tx, name):
        """An attribute set on an input tensor from Python (`x.scale = 2`), or None where
        Python reads the class's (shape, dtype, T, methods). For a name the class lacks
        what the trace found in the instance's `__dict__` is guarded: the attribute's value
        (its guards, as any value's; reading it fails while it is absent), or its absence:
        `not x.__dict__` (one check whatever the names; empty is the common case), else
        `'scale' not in x.__dict__`. A tensor the graph computed is a new object without
        attributes."""
        written = tx.output.tensor_attrs.get(self.node)
        if written is not None and name in written[1]:  # set earlier in this trace
            return written[1][name]
        attrs = self._instance_dict(tx, name)
        if attrs is None:
            return None
        if name in attrs:
            return tx.wrap(attrs[name], AttrSource(self.source, name))
        tx.output.guards.add(Guard("NOT_IN_DICT", self.source, None, {"attr": name if attrs else None}))
        return None

    def _instance_dict(self, tx, name):
        """The input tensor's `__dict__` where `name` is not the class's, else None (a computed
        tensor, or a name Python reads from the class)."""
        if self.source is None or inspect.getattr_static(self.cls, name, None) is not None:
            # NOTE: a method (`x.view`) is assumed not shadowed by an instance attribute:
            # guarding that would cost a check per method read, for a pattern no code uses
            # (guards.md).
            return None
        real = tx.output.example_of(self)
        return None if real is None else real.__dict__

    def has_attr(self, tx, name):
        """`hasattr(x, name)` for a name an input tensor's class lacks: whether its
        `__dict__` has it, guarded as such (not its value); None: ask `var_getattr`."""
        written = tx.output.tensor_attrs.get(self.node)
        if written is not None and name in written[1]:
            return True
        attrs = self._instance_dict(tx, name)
        if attrs is None:
            return None
        if name in attrs:
            tx.output.guards.add(Guard("HASATTR", self.source, None, {"attr": name}))
            return True
        tx.output.guards.add(Guard("NOT_IN_DICT", self.source, None, {"attr": name if attrs else None}))
        return False

    def call_method(self, tx, name, args, kwargs):
        if tx.output.function_modes:
            method = inspect.getattr_static(torch.Tensor, name, None)
            if method is not None:
                return tx.mode_dispatch_call(method, [self, *args], kwargs)
        if name in _AUTOGRAD_METHODS:
            unsupported("call", f"Tensor.{name}() {_AUTOGRAD_METHODS[name]}",
                        hint=f"call .{name}() on what the optimized function returns, outside it")
        if name == "numpy":
            array = tx.tensor_to_ndarray(self, args, kwargs)
            if array is not None:
                return array
        if name == "untyped_storage":  # its size, of a tensor passed in
            return storage_of(tx, self, args, kwargs)
        if name == "item" and not args and not kwargs and captures_scalars():
            return scalar_read(tx.output, self)
        if name in _DATA_METHODS:
            unsupported("data_dependent", f"Tensor.{name}() {_DATA_METHODS[name]}",
                        hint=_VALUE_HINT if name in _VALUE_METHODS else None)
        if name == "size" and not kwargs:
            if not args:
                return size_variable(self.fake.shape, tx.output, self.node)
        if name == "__setitem__":
            tx.output.call("call_function", operator.setitem, [self, *args], {},
                           what="tensor item assignment", allow_none=True)
            return ConstantVariable(None)
        if name == "__getitem__":
            return tx.output.call("call_function", operator.getitem, [self, *args], {},
                                  what="tensor indexing")
        if name in ("__contains__",):
            unsupported("data_dependent", "`in` on a tensor reads its data")
        if name in _RESIZE_METHODS:
            unsupported("construct", f"Tensor.{name}() {_RESIZE_METHODS[name]} of {self.describe()} "
                                     "(torch's backends do not replay it on inputs)")
        if name == "requires_grad_":
            return self._requires_grad_(args, kwargs)
        if name == "detach_" and not args and not kwargs:
            if not self.fake.requires_grad and self.fake.grad_fn is None:
                return self  # nothing to detach from
            unsupported("construct", f"detach_() changes the autograd metadata of {self.describe()} "
                                     "(not an op: torch's backends do not replay it)")
        if name == "new":
            name, args = _legacy_new(args)
        legacy = _legacy_tensor_type(args[0]) if name == "type" and args else None
        if legacy is not None:  # x.type(torch.HalfTensor)
            args = [ConstantVariable(legacy), *args[1:]]
        decomposed = decompose_method(tx, self, name, args, kwargs)  # a 0-d tensor where a number goes
        if decomposed is not None:
            return decomposed
        return tx.output.call("call_method", name, [self, *args], kwargs, what=f"Tensor.{name}",
                              fold_metadata=name in _METADATA_METHODS)

    def _requires_grad_(self, args, kwargs):
        """`t.requires_grad_(flag)`: a no-op where the flag is already `flag` (as
        torch.compile's); a change declines. The change is autograd metadata of the real
        tensor, not an op: torch's compiling backends drop it (an input stayed
        requires_grad=False, `(x * 2).detach().requires_grad_()` came back without grad),
        and an input the trace folds the flag of may be another name of the changed one
        (`a.requires_grad_(); b.requires_grad` with `b is a`), which no write-based
        aliasing guard covers."""
        if len(args) + len(kwargs) > 1 or (kwargs and "requires_grad" not in kwargs):
            unsupported("construct", "requires_grad_() with other arguments than one requires_grad")
        flag = (args or list(kwargs.values()) or [ConstantVariable(True)])[0]
        if not flag.is_python_constant() or type(flag.as_python_constant()) is not bool:
            unsupported("construct", "requires_grad_() with a flag that is not a constant bool")
        if flag.as_python_constant() == self.fake.requires_grad:
            return self
        unsupported("construct", f"requires_grad_({flag.as_python_constant()}) changes the autograd flag of "
                                 f"{self.describe()} (metadata, not an op: torch's backends do not replay it)")

    def store_attr(self, tx, name, value):
        """`t.requires_grad = flag`: a no-op where eager's is one (a leaf already so, or a
        tensor without grad set False); on a tensor computed with grad, the RuntimeError
        eager raises; a change declines as `requires_grad_()` does (autograd metadata, not an
        op). Other attributes of a tensor are not traced."""
        if name != "requires_grad":
            return self._set_python_attr(tx, name, value)
        if not value.is_python_constant():
            unsupported("construct", f"setting requires_grad of {self.describe()} to {value.describe()}")
        flag = value.as_python_constant()
        if type(flag) is not bool:
            unsupported("exceptions", "RuntimeError: requires_grad must be a bool")
        fake = self.fake
        if fake.grad_fn is not None:
            unsupported("exceptions", "RuntimeError: you can only change requires_grad flags of leaf variables.")
        if fake.requires_grad and self.source is not None:
            # a tensor passed in that requires grad may be a leaf or not (not guarded)
            unsupported("construct", f"setting requires_grad of {self.describe()}, passed in requiring grad")
        self._requires_grad_([value], {})

    def _set_python_attr(self, tx, name, value):
        """`x.tag = value`, an attribute of the tensor object itself (not the class's: `x.data`,
        `x.grad`, a property, decline): kept per tensor, read back by later reads in the
        trace, set on the real tensor by the entry after the graph."""
        if inspect.getattr_static(self.cls, name, None) is not None:
            unsupported("side_effect", f"setting Tensor.{name} on {self.describe()} (a tensor property "
                                       "or method, not a plain attribute)")
        output = tx.output
        if output.graph is not output.root_graph:
            unsupported("side_effect", f"setting attribute {name!r} on {self.describe()} inside a "
                                       "subgraph (an autograd.Function's or a higher-order op's body)")
        entry = output.tensor_attrs.get(self.node)
        if entry is None:
            entry = output.tensor_attrs[self.node] = [self, {}]
        elif entry[0].source is None and self.source is not None:
            entry[0] = self  # written back through the name the frame reads it by
        entry[1][name] = value

    def iter_items(self, tx):
        if self.fake.dim() == 0:
            unsupported("exceptions", "TypeError: iteration over a 0-d tensor")
        return [self.call_method(tx, "__getitem__", [ConstantVariable(i)], {})
                for i in range(self.fake.shape[0])]

    def __repr__(self):
        return f"TensorVariable({self.node.name})"


def _legacy_new(args: list) -> tuple[str, list]:
    """`Tensor.new(torch.Size([3, 4]))` makes a 3x4 tensor, `Tensor.new((3, 4))` one holding
    3 and 4. An fx node keeps a Size argument as a plain tuple (and lowering does the same,
    so the fake run agrees with the graph): a Size is passed as the sizes themselves,
    `new(3, 4)`, and an empty one, a 0-d tensor, as `new_empty(())`."""
    if len(args) == 1 and isinstance(args[0], TupleVariable) and args[0].tuple_type is torch.Size:
        sizes = args[0].items
        return ("new", list(sizes)) if sizes else ("new_empty", [TupleVariable([])])
    return "new", args


def size_variable(shape, output=None, node=None) -> VariableTracker:
    """A torch.Size: constants, and for symbolic sizes of the tensor `node`, one
    `node.size(d)` each (pruned after the trace if unused)."""
    items = []
    for d, s in enumerate(shape):
        if has_symbolic(s):
            if output is None:
                unsupported("construct", "a symbolic size without the tensor it belongs to")
            items.append(SymNodeVariable(output.sym_node("call_method", "size", (node, d), s), s))
        else:
            items.append(ConstantVariable(int(s)))
    return TupleVariable(items, tuple_type=torch.Size)
