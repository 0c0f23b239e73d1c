"""`MyFn().apply(x)`: an object of an autograd.Function subclass made in the traced code (the
older style, which torch still accepts with a DeprecationWarning). Its `apply` is the class's,
captured as one Function node like `MyFn.apply(x)`; what else such an object could do (escape
the call, other attributes, a class with an `__init__` of its own) is not modelled and gives
eager's results through a break or an eager run."""
import math
import warnings

import pytest
import torch
from helpers import check
from test_autograd_function import check_grad, t

pytestmark = pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")


class SaveForBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = foo + foo
        result = result + foo
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * math.sqrt(result.numel()) + result


class WithInit(torch.autograd.Function):
    def __init__(self):
        super().__init__()
        self.scale = 3.0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def object_apply(x):
    return SaveForBackward().apply(x) * 2


def object_apply_in_module_forward():
    class Wrapper(torch.nn.Module):
        def forward(self, foo):
            return SaveForBackward().apply(foo)
    return Wrapper()


def test_apply_of_an_object_made_inside_is_the_class_apply():
    check_grad(object_apply, t(2, 3))


def test_apply_of_an_object_made_in_a_module_forward():
    module = object_apply_in_module_forward()
    check_grad(lambda x: module(x), t(4))


def test_object_returned_runs_eagerly_with_eager_result():
    def made_and_returned(x):
        fn = SaveForBackward()
        return fn, x + 1

    info = check(made_and_returned, (torch.randn(3),), kind="eager", reason="construct")
    assert info.entries


def test_other_attributes_of_the_object_are_declined():
    def reads_forward(x):
        return SaveForBackward().forward is not None, x * 2

    check(reads_forward, (torch.randn(3),), kind="eager", reason="construct")


def test_a_class_with_its_own_init_is_not_modelled():
    def made_with_init(x):
        return WithInit().apply(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check(made_with_init, (torch.randn(3),), kind="break", reason="call")
