"""The ```python blocks of docs/dynamic_shapes.md run in order in one namespace (their
asserts are the checks)."""
import os
import re

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "dynamic_shapes.md")


def test_dynamic_shapes_md_examples_run():
    text = open(DOC).read()
    blocks = [(text.count("\n", 0, m.start(1)), m.group(1))
              for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]
    assert len(blocks) >= 5
    ns = {"__name__": "dynamic_shapes_md"}
    for offset, code in blocks:
        exec(compile("\n" * offset + code, DOC, "exec"), ns)  # noqa: S102 - the docs' own examples
