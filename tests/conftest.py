"""Shared fixtures: Triton's CPU interpreter when there is no GPU, a counting backend,
and a clean minidynamo cache around every test."""
import glob
import os
import sys


def _has_cuda() -> bool:
    # Decided without importing torch: TRITON_INTERPRET must be set before anything
    # imports triton, and importing torch first is harmless but slow to get wrong.
    # A container may expose only its own GPU's node (/dev/nvidia3, say).
    return bool(glob.glob("/dev/nvidia[0-9]*")) or bool(os.environ.get("CUDA_VISIBLE_DEVICES", "").strip("-1 "))


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

import minidynamo  # noqa: E402
from helpers import CountingBackend  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_minidynamo():
    import torch.distributions
    minidynamo.reset()
    limit = minidynamo.config.cache_size_limit
    # torch.compile's first call turns distribution argument validation off process-wide
    # (torch/_dynamo/eval_frame.py): a test comparing with it must not change later tests.
    validate = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(validate)
    minidynamo.config.cache_size_limit = limit
    minidynamo.reset()


@pytest.fixture
def counting_backend():
    """A backend `(gm, example_inputs) -> gm.forward` that counts calls and keeps graphs."""
    return CountingBackend()


# Hypothesis profiles for tests/test_fuzz.py. Registered here because pytest loads the
# profile named by --hypothesis-profile (tox -e fuzz: `long`) before test modules import.
try:
    from hypothesis import HealthCheck as _HealthCheck
    from hypothesis import settings as _hyp_settings
except ImportError:  # hypothesis is a test extra; only the fuzz tests need it
    pass
else:
    _hyp_settings.register_profile(
        "long", max_examples=2000, deadline=None, print_blob=True,
        suppress_health_check=[_HealthCheck.too_slow, _HealthCheck.data_too_large,
                               _HealthCheck.filter_too_much])
