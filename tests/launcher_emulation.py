"""Triton's compile-and-launch path emulated on CPU, so launcher resolution, the generated
replay code and its checks run without a GPU.

Kernels are real ``JITFunction``s (with real ``Autotuner``/``Heuristics`` around them),
but `JITFunction.run` is replaced per kernel: it binds the arguments, computes Triton's
own specialisation key (``native_specialize_impl``, options, constexprs), "compiles" one
`EmulatedKernel` per key and launches it. An emulated kernel's launcher object checks
every argument of every call against the specialisation it was compiled for — a replay
that passes a misaligned pointer, an int that Triton would specialise differently or a
wrong constexpr fails the test — and then runs the kernel's Python function in Triton's
interpreter, looking tensors up by data pointer (`Emulation.track`)."""
from __future__ import annotations

import inspect
import itertools
import types

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from minidynamo.triton import resolve as resolve_module
from minidynamo.triton.launcher import make_launcher


_DTYPES = {"*fp32": torch.float32, "*fp16": torch.float16, "*bf16": torch.bfloat16, "*i32": torch.int32,
           "*i64": torch.int64, "*fp64": torch.float64}


class SpecialisationError(AssertionError):
    pass


class EmulatedRun:
    """The compiled kernel's launcher object (``CompiledKernel.run``): it has scratch
    memory, so the replay goes through it rather than a C entry."""

    global_scratch_size = 1

    def __init__(self, kernel: EmulatedKernel):
        self.kernel = kernel

    def __call__(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_, *args):
        k = self.kernel
        if function != k.function or metadata is not k.packed_metadata:
            raise SpecialisationError("launched with another kernel's function or metadata")
        named = {}
        replay = False
        for p, v, spec in zip(k.jit.params, args, k.spec):
            if p.is_constexpr:
                if type(v) is not type(spec[1]) or v != spec[1]:
                    raise SpecialisationError(f"constexpr {p.name}={v!r}, compiled for {spec[1]!r}")
            elif spec[0].startswith("*"):
                if not isinstance(v, torch.Tensor):
                    replay = True
                    v = k.emulation.tensor_at(v, spec[0])
                got = _specialise(p, v)
                if got != spec:
                    raise SpecialisationError(f"pointer {p.name}: {got}, compiled for {spec}")
            else:
                got = _specialise(p, v)
                if got != spec:
                    raise SpecialisationError(f"{p.name}={v!r} is {got}, compiled for {spec}")
            named[p.name] = v
        import sys
        caller = sys._getframe(1).f_code.co_name  # the program, a launcher's variant, Triton's run
        k.emulation.launches.append((k, (gx, gy, gz), replay, caller))
        k.interpreted.run(grid=(gx, gy, gz), warmup=False, **named)


def _specialise(param, v) -> tuple:
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    return tuple(native_specialize_impl(BaseBackend, v, param.is_const, not param.do_not_specialize,
                                        not param.do_not_specialize_on_alignment))


class EmulatedKernel:
    """One compiled specialisation (what ``CompiledKernel`` gives a launcher)."""

    _ids = itertools.count(1000)

    def __init__(self, emulation, jit, spec, options):
        self.emulation, self.jit, self.spec, self.options = emulation, jit, spec, options
        self.src = types.SimpleNamespace(fn=jit)
        self.function = next(self._ids)
        self.packed_metadata = ("metadata", self.function)
        self.run = EmulatedRun(self)
        self.interpreted = emulation.interpreted(jit)


class Emulation:
    def __init__(self):
        self.compiled: dict = {}
        self.launches: list = []     # (kernel, grid, replayed, calling function) per launch
        self.memory: dict = {}       # data pointer -> tensor
        self._interpreted: dict = {}
        self.runtime = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None, debug=False,
                                             add_stages_inspection_hook=None)
        self.device = -1  # what a CPU tensor's get_device() says

    # -- tensors
    def track(self, *tensors):
        for t in tensors:
            self.memory[t.data_ptr()] = t
        return tensors[0] if len(tensors) == 1 else tensors

    def tensor_at(self, ptr: int, pointer_type: str):
        """The tracked tensor at `ptr`, else (memory the test did not make, a launch
        program's scratch buffer) a one-element view of it: the interpreter reads and
        writes through the pointer, whatever the tensor's size."""
        t = self.memory.get(ptr)
        if t is None:
            import ctypes
            dtype = _DTYPES[pointer_type]
            raw = (ctypes.c_byte * dtype.itemsize).from_address(ptr)
            t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype)
        return t

    def interpreted(self, jit):
        f = self._interpreted.get(jit)
        if f is None:
            f = self._interpreted[jit] = InterpretedFunction(jit.fn)
        return f

    # -- counts
    @property
    def replays(self) -> int:
        return sum(1 for launch in self.launches if launch[2])

    def calls_from(self, function: str) -> int:
        return sum(1 for launch in self.launches if launch[3] == function)

    @property
    def compiles(self) -> int:
        return len(self.compiled)

    # -- Triton's side
    def internals(self):
        return resolve_module.Internals(JITFunction=JITFunction, Autotuner=Autotuner, Heuristics=Heuristics,
                                        runtime=self.runtime, get_stream=lambda dev: 0,
                                        get_device=lambda: self.device, specialisation_checked=True)

    def jit(self, fn) -> JITFunction:
        """`fn` as a JITFunction whose launches are emulated."""
        jit = JITFunction(fn)
        signature = inspect.signature(fn)
        emulation = self

        def run(*args, grid, warmup, **kwargs):
            options = {k: v for k, v in kwargs.items() if k not in jit.arg_names}
            bound = signature.bind(*args, **{k: v for k, v in kwargs.items() if k in jit.arg_names})
            bound.apply_defaults()
            values = dict(bound.arguments)
            spec = tuple(("constexpr", values[p.name]) if p.is_constexpr else _specialise(p, values[p.name])
                         for p in jit.params)
            key = (jit, spec, tuple(sorted(options.items())))
            kernel = emulation.compiled.get(key)
            if kernel is None:
                kernel = emulation.compiled[key] = EmulatedKernel(emulation, jit, spec, options)
            if not warmup:
                g = grid(values) if callable(grid) else grid
                g = tuple(g) + (1,) * (3 - len(g))
                kernel.run(*g, 0, kernel.function, kernel.packed_metadata, None, None, None, *values.values())
            return kernel
        jit.run = run
        return jit

    def launcher(self, kernel, grid, constants: dict, names: tuple, *, grid_per_call: bool = False):
        """A launcher that resolves as on a GPU (the interpreter's set-up would disable it)."""
        lau = make_launcher(kernel, grid, constants, names, grid_per_call=grid_per_call)
        lau._enabled, lau.fallback_reason = True, None
        return lau


def last_config_wins():
    c = itertools.count()

    def bench(fn, quantiles=None, **_):
        fn()
        t = 100.0 - next(c)
        return [t, t, t] if quantiles else t
    return bench


# -- kernels (Python functions; `Emulation.jit` makes them kernels)

def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def scale(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * alpha)
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


def marker(out_ptr, n, BLOCK: tl.constexpr):
    # out[pid] = BLOCK for each program: shows which config ran, with which grid.
    pid = tl.program_id(0)
    tl.store(out_ptr + pid + tl.arange(0, 1), tl.full((1,), BLOCK, tl.int32))


def heuristic_block(args):
    return min(triton.next_power_of_2(args["n"]), 64)


def heuristic_even(args):
    return args["n"] % args["BLOCK"] == 0
