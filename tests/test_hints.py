"""A decline says what to do about *that* construct: the hint fits the site, not only the
category (a logging call is not told to keep try/with outside, an untraced context manager is not told to
pass a result in, .backward() is not told to branch on shapes)."""
import logging

import pytest
import torch

import minidynamo

log = logging.getLogger("hints_test")
log.setLevel(logging.INFO)  # log.info below emits (below the level it would be a no-op)


def _logs(x):
    log.info("step")
    return x + 1


def _module_logging(x):
    logging.warning("step")
    return x + 1


def _untraced_manager(x):
    with torch.autograd.forward_ad.dual_level():
        return x + 1


def _backward(x):
    x.sum().backward()
    return x


def _autograd_grad(x):
    g, = torch.autograd.grad((x * x).sum(), x, create_graph=True)
    return g + 1


def _log_level(x):
    if log.getEffectiveLevel() <= logging.DEBUG:  # a read of the configuration, no record
        return x
    return x + 1


def _item(x):
    return x.sum().item() + 1  # explain runs a call that breaks: it must not raise


def _branch(x):
    if x.sum() > 0:
        return x
    return -x


@torch.compiler.disable
def _disabled(x):
    return x * 2


def _calls_disabled(x):
    return _disabled(x) + 1


CASES = [
    (_logs, "side_effect", "logging.Logger.info() emits a log record", "logging is output"),
    (_module_logging, "side_effect", "logging.warning() emits a log record", "logging is output"),
    (_untraced_manager, "call", "context manager torch.autograd.forward_ad.dual_level",
     "enter it around the optimized call"),
    (_backward, "call", "Tensor.backward() runs autograd", "call .backward() on what the optimized function returns"),
    (_autograd_grad, "call", "torch.autograd.grad() computes gradients with autograd's engine",
     "take gradients of what the optimized function returns"),
    (_item, "data_dependent", "Tensor.item()", "keep the value a tensor"),
    (_branch, "data_dependent", "truth value", "branch on shapes"),
    (_calls_disabled, "call", "wrapped by torch.compiler.disable", "the disabled function always runs eagerly"),
]


@pytest.mark.parametrize("fn,category,detail,hint", CASES, ids=[c[0].__name__ for c in CASES])
def test_the_hint_fits_the_construct(fn, category, detail, hint):
    x = torch.ones(2, requires_grad=fn in (_backward, _autograd_grad))
    reasons = minidynamo.explain(fn)(x).break_reasons
    reason = reasons[0]
    # Creating a context manager the trace declines breaks; the resume function then meets
    # the with statement over it, and runs eagerly as a whole: a second reason.
    assert [r.category for r in reasons[1:]] == (["exceptions"] if fn is _untraced_manager else []), reasons
    assert reason.category == category and detail in reason.detail, reason
    assert reason.hint.startswith(hint), reason
    assert reason.filename == __file__, reason  # the user's line, not a library's



def test_a_logging_configuration_read_is_not_called_a_log_record():
    reason = minidynamo.explain(_log_level)(torch.ones(2)).break_reasons[0]
    assert reason.category == "call", reason
    assert "logging.Logger.getEffectiveLevel() reads or changes logging's configuration" in reason.detail, reason


def test_autograd_grad_breaks_and_the_rest_is_right():
    x = torch.randn(3, requires_grad=True)
    want = _autograd_grad(x)
    got = minidynamo.optimize(_autograd_grad)(x)
    torch.testing.assert_close(got, want)
