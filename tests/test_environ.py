"""`os.environ` reads in a trace (variables/environ.py): constants under a guard on the
variable read, as torch.compile reads them (transformers' attention reads
TRANSFORMERS_SDPA_FORCE_GQA on every call); changing the variable recompiles."""
from __future__ import annotations

import os

import pytest
import torch

import minidynamo
from helpers import CountingBackend, check

NAME = "MINIDYNAMO_TEST_SCALE"


@pytest.fixture(autouse=True)
def clean_env():
    os.environ.pop(NAME, None)
    yield
    os.environ.pop(NAME, None)


def scaled(x):
    scale = float(os.environ.get(NAME, "2"))
    if NAME in os.environ:
        return x * scale + len(os.environ[NAME])
    return x * scale


def test_reads_are_constants_in_one_graph():
    check(scaled, torch.ones(3), kind="graph")
    os.environ[NAME] = "3.5"
    check(scaled, torch.ones(3), kind="graph")


def test_changing_the_variable_recompiles_with_the_reason():
    backend = CountingBackend()
    opt = minidynamo.optimize(scaled, backend=backend)
    x = torch.ones(3)
    torch.testing.assert_close(opt(x), scaled(x))
    os.environ[NAME] = "5"
    torch.testing.assert_close(opt(x), scaled(x))  # a stale entry would still scale by 2
    del os.environ[NAME]
    torch.testing.assert_close(opt(x), scaled(x))
    assert backend.calls == 2
    [failure] = opt.guard_failures()  # the third call takes the first entry again
    assert f"os.environ.get({NAME!r}) " in failure.message() and "()()" not in failure.message()


def missing(x):
    return x * len(os.environ[NAME])


def test_a_missing_variable_raises_eagers_key_error():
    check(missing, torch.ones(3), kind="eager")


def test_writes_decline():
    def f(x):
        os.environ[NAME] = "1"
        return x * 2

    check(f, torch.ones(3), kind="break")
