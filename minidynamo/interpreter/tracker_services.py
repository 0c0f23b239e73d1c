"""What the trackers ask of the translator (`tx`) that lives above them: the generic
operators (interpreter/operators.py), which tracker models which real object
(variables/registry.py), iterating a user object (iteration_protocol.py), sorting
(builtins.sort_items), checkpointed calls (checkpoint.py), pytree and vmap calls (pytree_calls.py, vmap_calls.py),
folded results (builder.wrap_constant_result) and `x.numpy()` (numpy_interop.py).
Each of those modules imports the trackers, so a tracker module cannot import it: it
calls `tx.compare(...)` instead, as it calls `tx.wrap(...)`."""
from __future__ import annotations

from ..variables import checkpoint, function_modes, numpy_interop, pytree_calls, registry, vmap_calls
from ..variables.builder import wrap_constant_result
from ..variables.builtins import sort_items
from ..variables.torch import TorchVariable
from ..variables.iteration_protocol import drain, user_iterator
from . import operators


class TrackerServices:
    """Mixed into InstructionTranslator."""

    registry = registry  # its tables: WRAPPERS, CONSTRUCTORS, BUILTIN_HANDLERS, IDENTITY_KEYS

    def function_mode_call(self, fn, args: list, kwargs: dict):
        """A call of `TorchFunctionMode.__enter__`/`__exit__` (function_modes.py), else None."""
        model = function_modes.MODE_FUNCTIONS.get(fn)
        return None if model is None else model(self, args, kwargs)

    def library_call(self, fn, args: list, kwargs: dict):
        """A call of a modelled `torch.utils._pytree` function (pytree_calls.py) or of
        `torch.vmap` (vmap_calls.py), else None."""
        try:
            handler = pytree_calls.CALLS.get(fn) or vmap_calls.CALLS.get(fn)
        except TypeError:  # unhashable
            return None
        return None if handler is None else handler(self, list(args), dict(kwargs))

    def torch_callable(self, fn):
        """`fn`, a function or method of torch's, called as the trace calls torch's (a thin
        Python wrapper such as `Tensor.__rsub__` on fakes, not inlined)."""
        return TorchVariable(fn)

    def mode_dispatch_call(self, fn, args: list, kwargs: dict):
        """A torch function or Tensor method handed to the entered torch function modes, or None."""
        return function_modes.dispatch_call(self, fn, args, kwargs)

    def mode_dispatch_getattr(self, tensor, name: str):
        """A tensor attribute read handed to the entered torch function modes, or None."""
        return function_modes.dispatch_getattr(self, tensor, name)

    def compare(self, op: str, a, b):
        return operators.compare(self, op, a, b)

    def is_same(self, a, b):
        """`a is b` when the trace can decide it, else None."""
        return operators.is_same(a, b, self)

    def contains(self, container, item):
        return operators.contains(self, container, item)

    def getitem(self, obj, key):
        return operators.getitem(self, obj, key)

    def binary_op(self, name: str, a, b, inplace: bool = False):
        return operators.binary_op(self, name, a, b, inplace)

    def unary_op(self, name: str, a):
        return operators.unary_op(self, name, a)

    def sort_items(self, items: list, key=None, reverse=None) -> list:
        """`items` in the order list.sort(key=, reverse=) leaves them."""
        return sort_items(self, items, key, reverse)

    def user_iterator(self, v):
        """iter(v) for an object of a user class with a Python `__iter__`, else None."""
        return user_iterator(self, v)

    def drain(self, iterator) -> list:
        return drain(self, iterator)

    def wrap_constant_result(self, result, what: str):
        return wrap_constant_result(result, what, self)

    def capture_checkpoint(self, args: list, kwargs: dict):
        """`torch.utils.checkpoint.checkpoint(*args, **kwargs)` (variables/checkpoint.py)."""
        return checkpoint.capture_checkpoint(self, args, kwargs)

    def tensor_to_ndarray(self, tensor, args, kwargs):
        """`x.numpy()`, or None where NumPy (2 or later) or torch._numpy is missing."""
        if not numpy_interop.AVAILABLE:
            return None
        return numpy_interop.tensor_to_ndarray(self, tensor, args, kwargs)
