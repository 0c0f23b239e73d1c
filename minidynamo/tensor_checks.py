"""The text of a tensor guard's checks (guard_kinds.TENSOR_MATCH): sizes and strides
rendered as the cheapest exact Python test, and torch's C check's own words for a
dispatch-key mismatch. Imports nothing of the package."""
from __future__ import annotations

import re

import torch

__all__ = ["contiguous_strides", "dispatch_keys", "layout_checks", "single_gpu", "strides_check"]


def single_gpu() -> bool:
    """One visible CUDA device: `is_cuda` then pins the device (the count cannot change
    once CUDA is initialised, and a CUDA tensor exists, so it is)."""
    return torch.cuda.device_count() == 1


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def layout_checks(e: str, shape: tuple, stride: tuple) -> list[str]:
    """Sizes and strides; with symbolic dimensions (None) only the static ones, one by
    one (the shape environment's guards relate the symbolic ones)."""
    if None not in shape and None not in stride:
        return [f"{e}.shape == {shape!r}", strides_check(e, shape, stride)]
    checks = [f"{e}.dim() == {len(shape)}"]
    checks += [f"{e}.size({d}) == {s}" for d, s in enumerate(shape) if s is not None]
    checks += [f"{e}.stride({d}) == {s}" for d, s in enumerate(stride) if s is not None]
    return checks


def strides_check(e: str, shape: tuple, stride: tuple) -> str:
    """`x.is_contiguous()` where, given the shape checked just before it, that holds
    exactly when the strides are the expected ones: contiguous strides and every size
    above 1 (contiguity ignores the stride of a size-1 dim; any size-0 dim makes every
    stride contiguous). Otherwise the strides themselves."""
    if stride == contiguous_strides(shape) and all(size > 1 for size in shape):
        return f"{e}.is_contiguous()"
    return f"{e}.stride() == {stride!r}"


def dispatch_keys(c_check, actual) -> tuple[str, str]:
    """(expected, actual) key sets, from the C check's own verbose answer."""
    said = c_check.__self__.check_verbose(actual, tensor_check_names=["x"]) if c_check is not None else ""
    found = re.search(r"expected (.*), actual (.*)$", said if isinstance(said, str) else "")
    return found.groups() if found else ("the traced call's", "others")
