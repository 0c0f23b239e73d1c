"""The ```python blocks of docs/inspecting.md run in order in one namespace (their
asserts are the checks); each block keeps its line numbers in the markdown file, so
reasons and logs point into the document."""
import os
import re

import minidynamo

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "inspecting.md")


def _blocks():
    text = open(DOC).read()
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        yield text.count("\n", 0, m.start(1)), m.group(1)


def test_inspecting_md_examples_run(capsys):
    blocks = list(_blocks())
    assert len(blocks) >= 8
    ns = {"__name__": "inspecting_md"}
    limit = minidynamo.config.cache_size_limit
    try:
        for offset, code in blocks:
            exec(compile("\n" * offset + code, DOC, "exec"), ns)  # noqa: S102 - the docs' own examples
    finally:
        minidynamo.config.cache_size_limit = limit
        minidynamo.config.error_on_recompile = False
        minidynamo.set_logs()
    out = capsys.readouterr().out
    assert "tensor 'x' size mismatch at dim 0: expected 8, actual 16" in out
    assert f"at {DOC}:" in out  # the fallback's line is in the document
