"""Collect ``bench_*.py`` files under bench/ as test modules (pytest's default
pattern is ``test_*.py``)."""
import pytest


def pytest_collect_file(file_path, parent):
    # Files named on the command line are collected by pytest already.
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") \
            and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
