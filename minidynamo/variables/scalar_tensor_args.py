"""Ops given a 0-d tensor where they take a Python number (`x.addcmul_(y, z, value=t)`,
`torch._foreach_lerp_(xs, ys, t)`, `torch._foreach_pow(t, xs)`): eager reads the number
with `t.item()`, which fake tensors cannot answer. As torch.compile does, such a call is
recorded as ops that keep `t` a tensor, so the graph holds no read of tensor data:

- `x.addcmul_(y, z, value=t)` → `x.addcmul_(t * y, z)` (`addcmul` likewise): the kernel
  computes `self + value * t1 * t2`, so `t * y` is the product it rounds first, and the same
  kernel the rest (the same bits as eager);
- `torch._foreach_lerp_(xs, ys, t)` → `x.lerp_(y, t)` for each pair (the same kernel
  with a tensor weight), returning `xs` itself as eager does;
- `torch._foreach_pow(t, xs)` → `[torch.pow(t, x) for x in xs]`.

Only where the result is the one eager computes: every tensor of one dtype (eager's
number does not take part in type promotion, a 0-d tensor of another dtype would), of one
device, the shapes each op needs alike, and a 0-d tensor that does not require grad
(eager's number is outside autograd); anything else is declined as before (a read of
tensor data)."""
from __future__ import annotations

import functools

import torch

from .lists import BaseListVariable, ListVariable, TupleVariable


def _fake(v):
    fake = getattr(v, "fake", None)
    return fake if isinstance(fake, torch.Tensor) else None


def _scalar_tensor(v):
    """The fake of `v` where `v` is a 0-d tensor (not a Python number), else None."""
    fake = _fake(v)
    return fake if fake is not None and fake.dim() == 0 else None


def _tensors(v) -> list | None:
    """The items of a list or tuple of tensors, else None."""
    if not isinstance(v, BaseListVariable) and not isinstance(v, TupleVariable):
        return None
    items = list(v.items)
    return items if all(_fake(i) is not None for i in items) else None


def _alike(*fakes, shapes: bool = True) -> bool:
    first = fakes[0]
    return all(f.dtype == first.dtype and f.device == first.device and (not shapes or f.shape == first.shape)
               for f in fakes)


def _addcmul(tx, self, args, kwargs, inplace: bool):
    if len(args) != 2 or set(kwargs) != {"value"}:
        return None
    t1, t2, value = args[0], args[1], kwargs["value"]
    scalar = _scalar_tensor(value)
    fakes = [_fake(self), _fake(t1), _fake(t2)]
    if scalar is None or None in fakes or not _alike(scalar, *fakes, shapes=False) \
            or not scalar.is_floating_point() or scalar.requires_grad:
        return None
    call = tx.output.call
    scaled = call("call_function", torch.mul, [value, t1], {}, what="torch.mul (addcmul's value * tensor1)")
    if inplace:
        return call("call_method", "addcmul_", [self, scaled, t2], {}, what="Tensor.addcmul_")
    return call("call_function", torch.addcmul, [self, scaled, t2], {}, what="torch.addcmul")


def _foreach_lerp_(tx, args, kwargs):
    if len(args) != 3 or kwargs:
        return None
    selfs, ends, weight = _tensors(args[0]), _tensors(args[1]), args[2]
    scalar = _scalar_tensor(weight)
    if scalar is None or selfs is None or ends is None or len(selfs) != len(ends) or not selfs:
        return None
    for s, e in zip(selfs, ends):
        if not _alike(_fake(s), _fake(e)) or not _alike(_fake(s), scalar, shapes=False) \
                or not scalar.is_floating_point() or scalar.requires_grad:
            return None
    for s, e in zip(selfs, ends):
        tx.output.call("call_method", "lerp_", [s, e, weight], {}, what="Tensor.lerp_ (_foreach_lerp_)")
    return args[0]


def _foreach_pow(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        return None
    base, exponents = args[0], _tensors(args[1])
    scalar = _scalar_tensor(base)
    if scalar is None or not exponents or scalar.requires_grad \
            or not all(_alike(scalar, _fake(e), shapes=False) for e in exponents):
        return None
    results = [tx.output.call("call_function", torch.pow, [base, e], {}, what="torch.pow (_foreach_pow)")
               for e in exponents]
    return TupleVariable(results) if _foreach_pow_returns() is tuple else ListVariable(results)


@functools.cache
def _foreach_pow_returns() -> type:
    """What torch._foreach_pow(number, tensors) returns (a tuple or a list, by torch's version)."""
    return type(torch._foreach_pow(1.0, [torch.zeros(())]))


_FUNCTIONS = {
    torch.addcmul: lambda tx, args, kwargs: _addcmul(tx, args[0], args[1:], kwargs, False) if args else None,
    torch._foreach_lerp_: _foreach_lerp_,
    torch._foreach_pow: _foreach_pow,
}


def decompose_call(tx, fn, args, kwargs):
    """`fn(*args, **kwargs)` as ops that keep a 0-d tensor argument a tensor, or None."""
    try:
        handler = _FUNCTIONS.get(fn)
    except TypeError:  # unhashable
        return None
    return None if handler is None else handler(tx, list(args), dict(kwargs))


def decompose_method(tx, self, name, args, kwargs):
    """`self.name(*args, **kwargs)` likewise, or None."""
    if name in ("addcmul_", "addcmul"):
        return _addcmul(tx, self, list(args), dict(kwargs), name == "addcmul_")
    return None

