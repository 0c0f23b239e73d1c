"""Tensor semantics the fakes do not model on their own: what eager raises or writes that a
fake run of the same op would not."""
import io
import contextlib

import torch

from helpers import check, check_fallback


def test_inplace_on_expand_caught():
    # add_ on an expand raises in eager (overlapping elements); fakes do not check, so the
    # graph raised outside the try.
    def f(x):
        y = x.expand(3, 4)
        try:
            y.add_(1)
        except RuntimeError:
            return x * 5
        return y

    check_fallback(f, torch.randn(3, 1), reason="torch_op")


def test_zero_on_expand_still_eager_semantics():
    # zero_ and fill_ on an expand are allowed eagerly: the decline keeps that too.
    def f(x):
        y = x.clone()
        y.expand(3, 4).zero_()
        return y, x + 1

    with contextlib.redirect_stderr(io.StringIO()):
        check(f, torch.randn(3, 1), kind="break")
