"""The demo (`python -m minidynamo.demo`) and the README's example run as they are, on
this machine (with no GPU: neither relies on TRITON_INTERPRET being set beforehand)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MINIDYNAMO_LOGS",
                                                             "MINIDYNAMO_DUMP")}
    env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


def test_demo_runs_and_shows_every_section():
    proc = subprocess.run([sys.executable, "-m", "minidynamo.demo"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for heading in ("1. The function", "2. Its graph", "3. Its guards", "4. A shape change",
                    "5. A graph break", "6. Triton kernels", "7. Speed"):
        assert f"=== {heading}" in out, f"missing section {heading!r}:\n{out}"
    assert "def forward(self, x, y):" in out
    assert "x.shape == (8, 4)" in out
    assert "tensor 'x' size mismatch at dim 0: expected 8, actual 16" in out
    assert "entry kind: break" in out and "breaks at: [side_effect] print() writes output" in out
    assert "then the print runs natively, then resume_in_chatty_at_" in out
    # Two calls, one print each: the native print runs once per call, the traces never print.
    assert out.splitlines().count("  (chatty prints while it runs)") == 2, out
    assert "| minidynamo" in out and "| torch.compile eager" in out


def test_readme_example_runs_as_a_script(tmp_path):
    text = open(os.path.join(ROOT, "README.md")).read()
    example = re.search(r"^```python\n(.*?)^```", text, re.S | re.M).group(1)
    script = tmp_path / "readme_example.py"
    script.write_text(example)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, *rest = proc.stdout.splitlines()
    assert first.startswith("f: tensor 'x' size mismatch at dim 0: expected 8, actual 16 (guard: ")
    assert rest[0].startswith(f"f ({script}:") and "1 graph, " in rest[0] and "symbolic sizes" in "\n".join(rest)
    # the grid is computed per call from the symbolic size (a graph value)
    assert "Triton launches:" in rest and any(
        line.startswith("    add_kernel[(") and line.endswith(", 1, 1)] writes: out_ptr") for line in rest), rest
