"""The demo (`python -m minidynamo.demo`) runs and shows each of its sections."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_runs_and_shows_every_section():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "minidynamo.demo"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for heading in ("1. The function", "2. Its graph", "3. Its guards", "4. A shape change",
                    "5. A function that cannot be traced", "6. Triton kernels", "7. Speed"):
        assert f"=== {heading}" in out, f"missing section {heading!r}:\n{out}"
    assert "def forward(self, x, y):" in out
    assert "x.shape == (8, 4)" in out
    assert "tensor 'x' size mismatch at dim 0: expected 8, actual 16" in out
    assert "entry kind: eager" in out and "[side_effect] print()" in out
    assert "| minidynamo" in out and "| torch.compile eager" in out
