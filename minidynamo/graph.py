"""OutputGraph: the torch.fx graph one trace builds, its inputs, guards and side tables.

Tensor work becomes fx nodes; each node's result is computed on fake tensors (never on
real data) so the trace knows shapes, dtypes and devices without running anything.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)

from .exc import unsupported
from .fakecache import input_fake, op_key, op_result, remember
from .guards import GuardSet, tensor_guard
from .sources import Source


@dataclass
class GraphInput:
    source: Source
    node: fx.Node
    example: torch.Tensor


class OutputGraph:
    def __init__(self, name: str):
        self.name = name
        self.graph = fx.Graph()
        self.fake_mode = FakeTensorMode()
        self.inputs: list[GraphInput] = []
        self._input_by_source: dict = {}
        self._input_by_id: dict = {}
        self.guards = GuardSet()
        # Side table for Triton launches: owned by this graph, released with it.
        from .triton.capture import KernelTable
        self.kernels = KernelTable()
        self.op_count = 0
        # Trackers of values read from the frame, per source (aliasing preserved).
        self.wrapped: dict = {}

    # --- inputs ------------------------------------------------------------------
    def add_input(self, source: Source, value: torch.Tensor):
        """A tensor read from the frame becomes a placeholder, guarded by TENSOR_MATCH."""
        from .variables.tensor import TensorVariable
        existing = self._input_by_source.get(source)
        if existing is not None:
            return existing
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            # A subclass may override any op (__torch_function__): its calls are not plain aten.
            unsupported("construct", f"a tensor subclass ({type(value).__qualname__}) as {source.name()}")
        self.guards.add(tensor_guard(source, value))
        same = self._input_by_id.get(id(value))
        if same is not None and same[0] is value:
            # The same tensor object reached twice: one fake keeps aliasing visible.
            fake = same[1].fake
        else:
            fake = input_fake(self.fake_mode, value)
        node = self.graph.placeholder(_placeholder_name(source, len(self.inputs)))
        self.inputs.append(GraphInput(source, node, value))
        var = TensorVariable(node, fake, source, cls=type(value))
        self._input_by_source[source] = var
        self._input_by_id[id(value)] = (value, var)
        return var

    # --- nodes -------------------------------------------------------------------
    def call(self, kind: str, target, args: list, kwargs: dict, *, what: str,
             fold_metadata: bool = False, allow_none: bool = False):
        """Record one tensor operation. `kind` is 'call_function' or 'call_method'."""
        from .variables.builder import wrap_fake_result
        fx_args, fake_args = _lower(args), _fake(args)
        fx_kwargs, fake_kwargs = _lower(kwargs), _fake(kwargs)
        key = op_key(kind, target, fake_args, fake_kwargs, self.fake_mode)
        result = None if key is None else op_result(key, self.fake_mode)
        try:
            if result is None:
                with self.fake_mode:
                    if kind == "call_method":
                        result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                    else:
                        result = target(*fake_args, **fake_kwargs)
                if key is not None:
                    remember(key, result)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            unsupported("data_dependent", f"{what} depends on tensor data ({type(e).__name__})")
        except NotImplementedError as e:
            unsupported("torch_op", f"{what} cannot run on fake tensors: {_first_line(e)}")
        except Exception as e:  # a shape mismatch and the like: eager will raise it for real
            unsupported("torch_op", f"{what} raised {type(e).__name__}: {_first_line(e)}")
        if not _contains_tensor(result):
            if result is None and allow_none:
                pass
            elif fold_metadata and result is not None:
                return wrap_fake_result(self, None, result, what)
            else:
                unsupported("torch_op", f"{what} returned {type(result).__name__}, not a tensor "
                                        "(results that are not tensors are only folded for metadata queries)")
        node = self.graph.create_node(kind, target, tuple(fx_args), fx_kwargs)
        node.meta["val"] = result  # fake value: device/shape for graph passes (cudagraphs)
        self.op_count += 1
        if isinstance(result, torch.Tensor):
            # An in-place op (x.add_(1), x += 1, out=y) returns its argument: the result is
            # that same tracker, so `y is x` holds and the input is returned as itself.
            for a in _flat(args, kwargs):
                if getattr(a, "fake", None) is result:
                    return a
        return wrap_fake_result(self, node, result, what)

    def example_of(self, var):
        """The real tensor behind a placeholder tracker, or None for computed tensors."""
        for inp in self.inputs:
            if inp.node is var.node:
                return inp.example
        return None

    def getitem_node(self, node: fx.Node, index: int) -> fx.Node:
        return self.graph.create_node("call_function", operator.getitem, (node, index), {})


def _placeholder_name(source: Source, n: int) -> str:
    raw = source.name().replace("global ", "G_").replace("closure ", "C_")
    cleaned = "".join(c if c.isalnum() else "_" for c in raw).strip("_") or "input"
    if cleaned[0].isdigit():
        cleaned = "i_" + cleaned
    return f"L_{cleaned}" if not cleaned.isidentifier() else cleaned


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _contains_tensor(v) -> bool:
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)):
        return any(_contains_tensor(x) for x in v)
    return False


def _flat(args, kwargs):
    from .variables.dicts import DictVariable
    from .variables.lists import BaseListVariable
    todo = list(args) + list(kwargs.values())
    while todo:
        v = todo.pop()
        if isinstance(v, BaseListVariable):
            todo.extend(v.items)
        elif isinstance(v, DictVariable):
            todo.extend(v.items.values())
        else:
            yield v


def _lower(v):
    """Trackers → fx arguments (nodes for tensors, plain values for constants)."""
    from .variables.base import VariableTracker
    if isinstance(v, dict):
        return {k: _lower(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_lower(x) for x in v] if isinstance(v, list) else tuple(_lower(x) for x in v)
    if isinstance(v, VariableTracker):
        return v.as_fx_arg()
    return v


def _fake(v):
    from .variables.base import VariableTracker
    if isinstance(v, dict):
        return {k: _fake(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_fake(x) for x in v] if isinstance(v, list) else tuple(_fake(x) for x in v)
    if isinstance(v, VariableTracker):
        return v.as_fake()
    return v
