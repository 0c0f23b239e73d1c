"""MINIDYNAMO_DUMP / config.dump_dir: one readable Python file per cache entry, runnable
with plain Python (no minidynamo) to see the same guard decision and run the entry."""
import os
import runpy
import subprocess
import sys
import warnings

import pytest
import torch
from helpers import same_outcome

import minidynamo
from kernels import capture_kernels as K
from minidynamo import dump

SCALE = 2


@pytest.fixture
def dump_dir(tmp_path):
    minidynamo.config.dump_dir = str(tmp_path)
    yield tmp_path
    minidynamo.config.dump_dir = None


def _run(path):
    """Run a dump with plain Python, minidynamo not importable; its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", str(path)], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def f(x, y, *, k=3):
    return torch.relu(x) * SCALE + y.sum() * k


def test_one_file_per_entry_runs_the_graph(dump_dir):
    opt = minidynamo.optimize(f)
    opt(torch.randn(8, 4), torch.randn(8, 4), k=2)
    opt(torch.randn(16, 4), torch.randn(16, 4), k=2)
    assert sorted(os.listdir(dump_dir)) == ["f_entry0.py", "f_entry1.py"]
    text = (dump_dir / "f_entry0.py").read_text()
    assert "minidynamo" not in text.split('"""', 2)[2].replace("minidynamo_", "")  # no import of it
    assert "def forward(self, x, y):" in text and "def f(x, y, *, k=_md_d):" in text
    assert "x.shape == (8, 4)" in text
    assert _run(dump_dir / "f_entry0.py") == "guards: pass\nthen: ran the entry, result: tensor (8, 4) torch.float32\n"
    assert _run(dump_dir / "f_entry1.py").endswith("result: tensor (16, 4) torch.float32\n")


def test_dump_decides_like_the_cache(dump_dir):
    opt = minidynamo.optimize(f)
    opt(torch.randn(8, 4), torch.randn(8, 4), k=2)
    ns = runpy.run_path(str(dump_dir / "f_entry0.py"))  # not as __main__: just the definitions
    x = torch.zeros(8, 4)
    assert ns["_first_failing"](x, x, k=2) is None
    assert ns["_first_failing"](x, x, k=5) == "k: type(k) is _md_int and k == 2"
    assert ns["_first_failing"](torch.zeros(9, 4), x, k=2).startswith("x: type(x) is _md_Tensor")
    out = ns["f"](x + 1, x, k=2)
    torch.testing.assert_close(out, torch.relu(x + 1) * SCALE)
    assert ns["f"](x, x, k=5) is ns["_MISS"]


def test_user_backend_entry_runs_its_graph_module(dump_dir):
    def backend(gm, example_inputs):
        return gm.forward

    def g(x, xs):
        return x * xs[0] + xs[1]
    minidynamo.optimize(backend=backend)(g)(torch.ones(3), [2, 5])
    text = (dump_dir / "g_entry0.py").read_text()
    assert "= Graph().forward" in text
    assert _run(dump_dir / "g_entry0.py") == "guards: pass\nthen: ran the entry, result: tensor (3,) torch.float32\n"


def test_eager_fallback_entry(dump_dir):
    def h(x):
        y = x
        try:
            print("side effect")  # inside a try: the frame cannot break, the call runs eagerly
        finally:
            pass
        return y
    minidynamo.optimize(h)(torch.ones(2))
    assert sorted(os.listdir(dump_dir)) == ["h_entry0.py"]
    text = (dump_dir / "h_entry0.py").read_text()
    assert "kind: eager" in text
    assert "runs eagerly because: [side_effect] print() writes output" in text
    assert _run(dump_dir / "h_entry0.py") == ("guards: pass\n"
                                              "then: h is not available outside the traced process\n")


def test_break_entry(dump_dir):
    def h(x):
        y = x * 2
        print("side effect")
        return y + 1
    opt = minidynamo.optimize(h)
    opt(torch.ones(2))
    (entry,) = opt.cache_entries()
    assert entry.kind == "break"
    (resume,) = entry.resumes
    # One file for the entry, one for its resume function's entry.
    assert sorted(os.listdir(dump_dir)) == sorted(["h_entry0.py", f"{resume.__name__}_entry0.py"])
    text = (dump_dir / "h_entry0.py").read_text()
    assert "kind: break" in text and "runs natively" in text
    # The dump runs the graph, then needs the native instruction (a function compiled at
    # the user's line) and the resume function, which only exist in the traced process.
    out = _run(dump_dir / "h_entry0.py")
    assert out.startswith("guards: pass\nthen: ") and \
        out.endswith(" is not available outside the traced process\n"), out


def test_numpy_node_of_the_graph_is_a_stand_in(dump_dir):
    """A graph calling one of the package's own callables (a NumPy node) names it as a
    global the dump binds to a stand-in: the file defines everything it reads."""
    np = pytest.importorskip("numpy")
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip("NumPy < 2: NumPy calls are not traced (value-based casting), no NumPy node")

    def g(x):
        return torch.from_numpy(np.sin(x.numpy())) + 1
    minidynamo.optimize(g)(torch.randn(3))
    text = (dump_dir / "g_entry0.py").read_text()
    assert "minidynamo_variables_numpy_calls_numpy_sin = _Unavailable('minidynamo_variables_numpy_calls_numpy_sin')" \
        in text
    ns = runpy.run_path(str(dump_dir / "g_entry0.py"))  # its definitions load
    assert ns["_first_failing"](torch.zeros(3)) is None


def test_triton_entry_decides_but_cannot_launch(dump_dir):
    def t(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        return o
    minidynamo.optimize(t)(torch.ones(64, device=K.DEVICE), torch.ones(64, device=K.DEVICE))
    out = _run(dump_dir / "t_entry0.py")
    assert out.startswith("guards: pass\nthen: ") and "not available outside the traced process" in out


def test_global_state_check_is_the_traced_state(dump_dir):
    def g(x):
        return x * 2
    opt = minidynamo.optimize(g)
    with torch.no_grad():
        opt(torch.ones(2))
    ns = runpy.run_path(str(dump_dir / "g_entry0.py"))
    assert ns["_first_failing"](torch.ones(2)).startswith("global torch state: ")
    assert ns["g"](torch.ones(2)) is ns["_MISS"]  # the entry itself: torch's C check of the state
    with torch.no_grad():
        assert ns["_first_failing"](torch.ones(2)) is None
        torch.testing.assert_close(ns["g"](torch.ones(2)), torch.full((2,), 2.0))
    assert _run(dump_dir / "g_entry0.py").startswith("guards: MISS at global torch state: ")


def test_env_variable(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import torch, minidynamo\n"
                      "def f(x, n):\n"
                      "    return x * n\n"
                      "minidynamo.optimize(f)(torch.ones(2), 3)\n")
    out_dir = tmp_path / "dumps"
    path = [os.path.dirname(os.path.dirname(minidynamo.__file__)), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, MINIDYNAMO_DUMP=str(out_dir), PYTHONPATH=os.pathsep.join(p for p in path if p))
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=120)
    assert os.listdir(out_dir) == ["f_entry0.py"]
    assert _run(out_dir / "f_entry0.py") == "guards: pass\nthen: ran the entry, result: tensor (2,) torch.float32\n"


@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_unwritable_dump_dir_warns_once_and_the_calls_go_on(tmp_path, monkeypatch, where):
    monkeypatch.setattr(dump, "_unwritable", set())
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    target = blocker if where == "a file" else blocker / "dumps"
    error = "FileExistsError" if where == "a file" else "NotADirectoryError"
    monkeypatch.setattr(minidynamo.config, "dump_dir", str(target))

    def h(x):
        print("side effect")
        return x - 1
    opt_f, opt_h = minidynamo.optimize(f), minidynamo.optimize(h)
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    with pytest.warns(RuntimeWarning) as rec:
        same_outcome(f, opt_f, x, y, k=2)
    (w,) = rec
    assert f"cannot write cache entry dumps to {str(target)!r}" in str(w.message) and error in str(w.message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: later entries of any function say nothing
        same_outcome(f, opt_f, torch.randn(16, 4), y[:1], k=2)
        same_outcome(h, opt_h, x)  # the entries of its resume function say nothing either
    assert [e.kind for e in opt_f.cache_entries()] == ["graph", "graph"]
    (entry,) = opt_h.cache_entries()
    assert entry.kind == "break" and [len(r.cache_entries()) for r in entry.resumes] == [1]
    assert blocker.read_text() == ""


def test_env_variable_naming_a_file(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import torch, minidynamo\n"
                      "def f(x, n):\n"
                      "    return x * n\n"
                      "opt = minidynamo.optimize(f)\n"
                      "print(opt(torch.ones(2), 3).tolist(), opt(torch.ones(2), 4).tolist())\n")
    path = [os.path.dirname(os.path.dirname(minidynamo.__file__)), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, MINIDYNAMO_DUMP=str(script), PYTHONPATH=os.pathsep.join(p for p in path if p))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "[3.0, 3.0] [4.0, 4.0]\n", proc.stderr
    assert proc.stderr.count("RuntimeWarning: minidynamo: cannot write cache entry dumps to") == 1, proc.stderr
    assert str(script) in proc.stderr
