"""The ```python blocks of docs/coming_from_torch_compile.md run in order in one namespace
(their asserts are the checks), with their line numbers in the markdown file."""
import os
import re

import minidynamo

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "coming_from_torch_compile.md")


def test_examples_run():
    text = open(DOC).read()
    blocks = [(text.count("\n", 0, m.start(1)), m.group(1))
              for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]
    assert len(blocks) >= 4
    ns = {"__name__": "coming_from_torch_compile_md"}
    try:
        for offset, code in blocks:
            exec(compile("\n" * offset + code, DOC, "exec"), ns)  # noqa: S102 - the docs' own examples
    finally:
        minidynamo.config.error_on_recompile = False
