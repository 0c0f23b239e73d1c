"""The launcher calls a compiled kernel's C entry directly where it recognises how the
kernel's launcher object calls it. Checked here without a GPU: the direct call must pass
exactly what the launcher object's own ``__call__`` passes, for Triton's CUDA launcher
class as installed and for the older convention (hooks inside ``*args``)."""
import pytest

pytest.importorskip("triton")

from minidynamo.triton.entry import N_STANDARD, entry_call, render_call  # noqa: E402


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


class OlderLauncher:
    """The calling convention of Triton 3.6's CudaLauncher (metadata and hooks in *args)."""

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        def scratch(size):
            return None if size == 0 else bytearray(size)
        global_scratch = scratch(self.global_scratch_size)
        profile_scratch = scratch(self.profile_scratch_size)
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    global_scratch, profile_scratch, *args)


class Unknown(OlderLauncher):
    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        print("side effect")
        self.launch(gridX, gridY, gridZ, stream, function, *args)


def _stub(cls, **extra):
    obj = object.__new__(cls)
    obj.__dict__.update(dict(global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
                             profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=True,
                             num_ctas=1, gsan_enabled=False, arg_annotations=("a",),
                             kernel_signature=b"sig", launch=Recorder()), **extra)
    return obj


class _Names:
    def __init__(self):
        self.scope = {}

    def const(self, value, hint):
        name = f"B{len(self.scope)}"
        self.scope[name] = value
        return name


def _direct(obj, args):
    entry = entry_call(obj)
    assert entry.is_c_entry, entry.why_not_c_entry
    names = _Names()
    exprs = [names.const(v, "arg") for v in args]
    eval(render_call(entry, exprs[:N_STANDARD], exprs[N_STANDARD:], names), names.scope)
    return obj.launch.calls.pop()


ARGS = (4, 1, 1, 77, "fn", "packed", None, None, None, 1000, 2000, 1024)


def _same_as_own_call(obj):
    own = type(obj).__call__
    own(obj, *ARGS)
    expected = obj.launch.calls.pop()
    assert _direct(obj, ARGS) == expected
    return expected


def test_direct_call_matches_the_older_convention():
    got = _same_as_own_call(_stub(OlderLauncher))
    assert got[:9] == (4, 1, 1, 77, "fn", False, True, None, None)


def test_direct_call_matches_the_installed_triton_launcher(monkeypatch):
    nvidia = pytest.importorskip("triton.backends.nvidia.driver")
    from triton.runtime.driver import driver
    monkeypatch.setattr(driver, "_active", object(), raising=False)  # __call__ reads driver.active
    _same_as_own_call(_stub(nvidia.CudaLauncher))


def test_scratch_memory_or_unknown_code_keeps_the_ordinary_entry():
    entry = entry_call(_stub(OlderLauncher, global_scratch_size=64))
    assert not entry.is_c_entry and "scratch" in entry.why_not_c_entry
    entry = entry_call(_stub(Unknown))
    assert not entry.is_c_entry and "unrecognised statement" in entry.why_not_c_entry
    assert "print" in entry.why_not_c_entry
    entry = entry_call(_stub(OlderLauncher, gsan_enabled=True))
    assert not entry.is_c_entry and "gsan" in entry.why_not_c_entry


def test_ordinary_entry_passes_the_standard_arguments():
    from minidynamo.triton.entry import through_run
    assert entry_call(_stub(Unknown)).arguments == through_run(None, "").arguments
    run = Recorder()
    names = _Names()
    exprs = [names.const(v, "arg") for v in ARGS]
    eval(render_call(through_run(run, "test"), exprs[:N_STANDARD], exprs[N_STANDARD:], names), names.scope)
    assert run.calls == [ARGS]
