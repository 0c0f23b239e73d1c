"""Guard soundness: for each kind of source the trace reads (argument, default, global,
closure cell, attribute, container item, module attribute, kernel object, autotuner
configs), change the value between calls; the optimized function must never return a
result computed under the old value. Also: freed objects whose id is reused, tensors
resized or re-strided in place, requires_grad/dtype/device changes, in-place mutation of
a global tensor.

Known unsound cases found here live in tests/test_regressions.py (xfail, strict)."""
from __future__ import annotations

import functools
import types
import warnings

import pytest
import torch
from kernels import capture_kernels as K
from kernels.capture_kernels import DEVICE, tl, triton

import minidynamo
from helpers import same_outcome


def ones(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype)


# --- arguments -----------------------------------------------------------------------------

@pytest.mark.parametrize("values", [
    (2, 3, 2, -1, 0),
    (2.0, 2.5, -0.5, 2.0),
    (True, False, True),
    ("mul", "add", "mul"),
    ((1, 2), (1, 3), (1, 2, 3), (1, 2)),
    (None, 2, None),
    (torch.float32, torch.float64, torch.float32),
])
def test_argument_constant_changes(values):
    def f(x, k):
        if k is None:
            return x
        if isinstance(k, torch.dtype):
            return x.to(k)
        if isinstance(k, str):
            return x * 2 if k == "mul" else x + 2
        if isinstance(k, tuple):
            return x * len(k) + k[-1]
        return x * k + 1
    opt = minidynamo.optimize()(f)
    x = torch.arange(4.0)
    for v in values:
        same_outcome(f, opt, x, v)


def test_bool_and_int_are_different_constants():
    def f(x, k):
        return x * 10 if type(k) is bool else x * k
    opt = minidynamo.optimize()(f)
    x = torch.ones(3)
    for k in (True, 1, True, 1.0, 1):
        same_outcome(f, opt, x, k)


def test_argument_tensor_metadata_changes():
    def f(x):
        return x * 2 + x.shape[0], x.dtype, x.requires_grad, x.stride()
    opt = minidynamo.optimize()(f)
    base = torch.arange(12.0).reshape(3, 4)
    for x in [base, base.double(), base[:2], base.t(), base.t().contiguous().t(), base.t().contiguous(),
              base.clone().requires_grad_(), base, base.to(torch.float16), base.reshape(12)[::2],
              torch.empty(3, 4, device="meta"), base]:
        same_outcome(f, opt, x)


def test_requires_grad_flip_keeps_autograd():
    def f(x, w):
        return (x * w).sum(0)
    opt = minidynamo.optimize()(f)
    x = torch.randn(3, 2)
    for rg in (False, True, False, True):
        w = torch.randn(2, requires_grad=rg)
        out = opt(x, w)
        assert out.requires_grad is rg
        if rg:
            out.sum().backward()
            torch.testing.assert_close(w.grad, x.sum(0))


def test_same_shape_different_strides():
    def f(x):
        return x.cumsum(1) + x.stride()[0]
    opt = minidynamo.optimize()(f)
    a = torch.arange(6.0).reshape(2, 3)
    for x in [a, a.t().contiguous().t(), a, torch.as_strided(a.clone(), (2, 3), (1, 2)), a.t().contiguous().t()]:
        same_outcome(f, opt, x)


def test_resized_storage_is_seen():
    def f(x):
        return x * 2
    opt = minidynamo.optimize()(f)
    x = torch.ones(4)
    same_outcome(f, opt, x)
    x.resize_(7)
    x.fill_(3)
    same_outcome(f, opt, x)
    x.resize_(4)  # back to the first shape; contents are the new ones
    same_outcome(f, opt, x)
    x.set_(torch.arange(4.0))  # same shape, another storage
    same_outcome(f, opt, x)
    assert opt(x).tolist() == [0.0, 2.0, 4.0, 6.0]


def test_views_with_different_offsets_read_their_own_data():
    def f(x):
        return x + 1
    opt = minidynamo.optimize()(f)
    base = torch.arange(10.0)
    for i in range(5):
        same_outcome(f, opt, base[i:i + 4])


def test_dtype_and_device_changes():
    def f(x):
        return (x * 3).sum(), x.device, x.dtype
    opt = minidynamo.optimize()(f)
    for x in [torch.ones(4), torch.ones(4, dtype=torch.int32), torch.ones(4, device="meta"),
              torch.ones(4, dtype=torch.bfloat16), torch.ones(4)]:
        same_outcome(f, opt, x)


def test_argument_replaced_by_non_tensor():
    def f(x):
        return x * 2
    opt = minidynamo.optimize()(f)
    for x in [torch.ones(2), 3, torch.ones(2), [1], 2.5, "ab"]:
        same_outcome(f, opt, x)


# --- defaults ------------------------------------------------------------------------------

def test_defaults_tuple_replaced():
    def f(x, k=2, *, shift=1):
        return x * k + shift
    opt = minidynamo.optimize()(f)
    x = torch.ones(3)
    same_outcome(f, opt, x)
    f.__defaults__ = (5,)
    same_outcome(f, opt, x)
    f.__kwdefaults__ = {"shift": -4}
    same_outcome(f, opt, x)
    f.__defaults__ = (2,)
    same_outcome(f, opt, x)


def test_mutable_default_contents_changed():
    def f(x, cfg={"s": 2.0}, ts=[torch.ones(3)]):  # noqa: B006 - the point of the test
        return x * cfg["s"] + ts[0]
    opt = minidynamo.optimize()(f)
    x = torch.ones(3)
    same_outcome(f, opt, x)
    f.__defaults__[0]["s"] = 7.0
    same_outcome(f, opt, x)
    f.__defaults__[1][0] = torch.full((3,), 10.0)
    same_outcome(f, opt, x)
    f.__defaults__[1][0].mul_(2)  # in-place on the default tensor
    same_outcome(f, opt, x)


def test_default_tensor_replaced():
    W = torch.ones(3)

    def f(x, w=W):
        return x + w
    opt = minidynamo.optimize()(f)
    x = torch.zeros(3)
    same_outcome(f, opt, x)
    f.__defaults__ = (torch.full((3,), 4.0),)
    same_outcome(f, opt, x)
    f.__defaults__ = (torch.full((5,), 4.0),)  # a shape mismatch now: both raise
    same_outcome(f, opt, x)


# --- globals -------------------------------------------------------------------------------

G_SCALE = 2
G_W = torch.ones(3)
G_FN = torch.relu
G_MOD = None


def read_globals(x):
    return G_FN(x * G_SCALE + G_W)


def test_global_constant_tensor_function_changes():
    global G_SCALE, G_W, G_FN
    opt = minidynamo.optimize()(read_globals)
    x = torch.tensor([-3.0, 0.5, 2.0])
    saved = G_SCALE, G_W, G_FN
    try:
        same_outcome(read_globals, opt, x)
        G_SCALE = 3
        same_outcome(read_globals, opt, x)
        G_W = torch.full((3,), -1.0)
        same_outcome(read_globals, opt, x)
        G_W.add_(5)  # in-place: new contents must be seen
        same_outcome(read_globals, opt, x)
        G_FN = torch.sigmoid
        same_outcome(read_globals, opt, x)
        G_FN = lambda t: t * 100  # noqa: E731
        same_outcome(read_globals, opt, x)
        G_SCALE = 2.5
        same_outcome(read_globals, opt, x)
        G_W = torch.ones(2)  # shape mismatch: both raise
        same_outcome(read_globals, opt, x)
        del G_W  # NameError: both raise
        same_outcome(read_globals, opt, x)
    finally:
        G_SCALE, G_W, G_FN = saved


def test_inplace_mutation_of_global_tensor_between_calls():
    def f(x):
        return x @ G_W
    opt = minidynamo.optimize()(f)
    x = torch.ones(2, 3)
    saved = G_W.clone()
    try:
        for i in range(4):
            G_W.copy_(torch.arange(3.0) * i)
            same_outcome(f, opt, x)
        G_W.resize_(3)
        same_outcome(f, opt, x)
    finally:
        G_W.copy_(saved)
    assert len(opt.cache_entries()) == 1


def test_global_module_swapped():
    global G_MOD
    m1 = types.ModuleType("m1")
    m1.K = 2
    m2 = types.ModuleType("m2")
    m2.K = 5

    def f(x):
        return x * G_MOD.K
    opt = minidynamo.optimize()(f)
    x = torch.ones(2)
    try:
        for m in (m1, m2, m1):
            G_MOD = m
            same_outcome(f, opt, x)
        m1.K = 9  # module attribute changed in place
        same_outcome(f, opt, x)
        m1.K = torch.full((2,), 3.0)
        same_outcome(f, opt, x)
        del m1.K
        same_outcome(f, opt, x)
    finally:
        G_MOD = None


def test_global_of_another_module_read_by_inlined_helper():
    helpers = types.ModuleType("soundness_helpers")
    exec("import torch\nFACTOR = 2\ndef scale(t):\n    return t * FACTOR\n", helpers.__dict__)

    def f(x):
        return helpers.scale(x) + 1
    opt = minidynamo.optimize()(f)
    x = torch.ones(3)
    for v in (2, 3, 3, 2.5, torch.tensor(4.0), 2):
        helpers.FACTOR = v
        same_outcome(f, opt, x)


def test_global_dict_keys_and_values():
    cfgs = {"a": 1.0, "b": 2.0}

    def f(x, cfg):
        out = x
        for k, v in cfg.items():
            out = out * v if k == "a" else out + v
        return out
    opt = minidynamo.optimize()(f)
    x = torch.ones(2)
    same_outcome(f, opt, x, cfgs)
    cfgs["a"] = 3.0
    same_outcome(f, opt, x, cfgs)
    cfgs["c"] = 1.0
    same_outcome(f, opt, x, cfgs)
    del cfgs["a"]
    cfgs["a"] = 3.0  # same keys, another order
    same_outcome(f, opt, x, cfgs)


# --- closures ------------------------------------------------------------------------------

def test_closure_cell_changes():
    def make():
        k = 2
        w = torch.ones(2)
        fn = torch.relu

        def f(x):
            return fn(x * k + w)

        def set_(**kw):
            nonlocal k, w, fn
            k = kw.get("k", k)
            w = kw.get("w", w)
            fn = kw.get("fn", fn)
        return f, set_
    f, set_ = make()
    opt = minidynamo.optimize()(f)
    x = torch.tensor([-1.0, 1.0])
    same_outcome(f, opt, x)
    for change in ({"k": 3}, {"w": torch.full((2,), -5.0)}, {"fn": torch.tanh}, {"k": 3.5},
                   {"w": torch.ones(2, 2)}, {"fn": lambda t: -t}, {"k": 2}):
        set_(**change)
        same_outcome(f, opt, x)


def test_closure_cell_emptied():
    def make():
        def f(x):
            return x * k
        k = 2
        return f
    f = make()
    opt = minidynamo.optimize()(f)
    same_outcome(f, opt, torch.ones(2))
    f.__closure__[0].cell_contents = 4
    same_outcome(f, opt, torch.ones(2))
    del f.__closure__[0].cell_contents  # NameError in both
    same_outcome(f, opt, torch.ones(2))


# --- attributes and items -------------------------------------------------------------------

class Holder:
    def __init__(self, s=2.0, w=None):
        self.s = s
        self.w = torch.ones(3) if w is None else w

    def apply(self, x):
        return x * self.s + self.w


class OtherHolder(Holder):
    def apply(self, x):
        return x - self.s


def test_object_attribute_changes():
    def f(x, obj):
        return obj.apply(x) + obj.s
    opt = minidynamo.optimize()(f)
    x = torch.arange(3.0)
    obj = Holder()
    same_outcome(f, opt, x, obj)
    obj.s = 5.0
    same_outcome(f, opt, x, obj)
    obj.w = torch.full((3,), 7.0)
    same_outcome(f, opt, x, obj)
    obj.w.mul_(2)
    same_outcome(f, opt, x, obj)
    obj.__class__ = OtherHolder  # the method now comes from another class
    same_outcome(f, opt, x, obj)
    del obj.s
    same_outcome(f, opt, x, obj)


def test_global_object_attribute():
    obj = Holder(3.0)

    def f(x):
        return x * obj.s
    opt = minidynamo.optimize()(f)
    for s in (3.0, 4.0, torch.tensor(2.0), 4.0):
        obj.s = s
        same_outcome(f, opt, torch.ones(2))


def test_container_items_change():
    def f(x, xs, t, d):
        return xs[0] * t[1] + d["k"] + len(xs)
    opt = minidynamo.optimize()(f)
    x = torch.ones(2)
    xs, d = [torch.ones(2), 3.0], {"k": 1.0}
    same_outcome(f, opt, x, xs, (0, 2.0), d)
    xs[0] = torch.full((2,), 5.0)
    same_outcome(f, opt, x, xs, (0, 2.0), d)
    same_outcome(f, opt, x, xs, (0, 4.0), d)
    d["k"] = torch.full((2,), -1.0)
    same_outcome(f, opt, x, xs, (0, 4.0), d)
    xs.append(1)
    same_outcome(f, opt, x, xs, (0, 4.0), d)
    same_outcome(f, opt, x, xs, (0, 4.0, 5), d)
    del d["k"]
    same_outcome(f, opt, x, xs, (0, 4.0), d)


def test_nested_containers():
    def f(x, cfg):
        return x * cfg["layers"][1]["scale"] + cfg["layers"][0]["bias"]
    opt = minidynamo.optimize()(f)
    cfg = {"layers": [{"bias": 1.0, "scale": 2.0}, {"scale": 3.0}]}
    x = torch.ones(2)
    same_outcome(f, opt, x, cfg)
    cfg["layers"][1]["scale"] = -1.0
    same_outcome(f, opt, x, cfg)
    cfg["layers"][0] = {"bias": torch.ones(2) * 9}
    same_outcome(f, opt, x, cfg)
    cfg["layers"].reverse()
    same_outcome(f, opt, x, cfg)


def test_module_parameters_buffers_and_training_flag():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)
            self.register_buffer("offset", torch.zeros(2))

        def forward(self, x):
            y = self.lin(x) + self.offset
            return y * 2 if self.training else y
    m = M()

    def f(mod, x):
        return mod(x)
    opt = minidynamo.optimize()(f)
    x = torch.randn(4, 3)
    with torch.no_grad():
        same_outcome(f, opt, m, x)
        m.eval()
        same_outcome(f, opt, m, x)
        m.lin.weight.mul_(3)
        same_outcome(f, opt, m, x)
        m.offset = torch.full((2,), 4.0)
        same_outcome(f, opt, m, x)
        m.lin = torch.nn.Linear(3, 2)
        same_outcome(f, opt, m, x)
        m.lin.weight = torch.nn.Parameter(torch.ones(2, 3))
        same_outcome(f, opt, m, x)
        m.train()
        same_outcome(f, opt, m, x)


# --- freed objects, reused ids ---------------------------------------------------------------

def test_freed_object_id_reused_by_new_object():
    class Thing:
        pass

    def f(x, o):
        return x * o.s + o.k
    opt = minidynamo.optimize()(f)
    x = torch.ones(2)
    ids = set()
    for i in range(30):
        o = Thing()
        o.s, o.k = float(i % 3), i % 2
        ids.add(id(o))
        same_outcome(f, opt, x, o)
        del o  # freed here (refcount): its id is free for the next object
    assert len(ids) < 30  # ids really were reused


def test_freed_global_tensor_and_function_ids_reused():
    holder = {}

    def f(x):
        return holder["fn"](x) + holder["w"]
    opt = minidynamo.optimize()(f)
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # new functions each time: past the cache limit
        for i in range(20):
            holder["w"] = torch.full((2,), float(i))
            holder["fn"] = (lambda k: lambda t: t * k)(i)
            same_outcome(f, opt, x)
            holder.clear()


def test_freed_kernel_like_objects_in_a_loop():
    def f(x, fn):
        return fn(x)
    opt = minidynamo.optimize()(f)
    x = torch.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(20):
            fn = functools.partial(torch.add, other=float(i))
            same_outcome(f, opt, x, fn)
            del fn


# --- Triton: kernel objects and autotuner configs -------------------------------------------

@triton.jit
def sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) - tl.load(y_ptr + offs, mask=m), mask=m)


KERNEL = K.add_kernel


def launch_global_kernel(a, b):
    out = torch.empty_like(a)
    KERNEL[(triton.cdiv(a.numel(), 16),)](a, b, out, a.numel(), BLOCK=16)
    return out


def test_global_kernel_swapped():
    global KERNEL
    opt = minidynamo.optimize()(launch_global_kernel)
    a, b = torch.arange(20.0, device=DEVICE), torch.ones(20, device=DEVICE)
    try:
        for k in (K.add_kernel, sub_kernel, K.add_kernel, sub_kernel):
            KERNEL = k
            same_outcome(launch_global_kernel, opt, a, b)
    finally:
        KERNEL = K.add_kernel


def test_kernel_passed_as_argument_and_in_closure():
    def make(kern):
        def f(a, b):
            out = torch.empty_like(a)
            kern[(2,)](a, b, out, a.numel(), BLOCK=16)
            return out

        def set_(k):
            nonlocal kern
            kern = k
        return f, set_
    f, set_ = make(K.add_kernel)
    opt = minidynamo.optimize()(f)
    a, b = torch.arange(20.0, device=DEVICE), torch.ones(20, device=DEVICE)
    for k in (K.add_kernel, sub_kernel, K.add_kernel):
        set_(k)
        same_outcome(f, opt, a, b)

    def g(kern, a, b):
        out = torch.empty_like(a)
        kern[(2,)](a, b, out, a.numel(), BLOCK=16)
        return out
    opt = minidynamo.optimize()(g)
    for k in (K.add_kernel, sub_kernel, K.add_dns, sub_kernel):
        same_outcome(g, opt, k, a, b)


def _autotuned():
    return triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                           do_bench=K.last_config_wins())(K.add_kernel)


def test_autotuner_configs_replaced():
    kern = _autotuned()

    def f(a, b):
        out = torch.zeros_like(a)
        kern[lambda meta: (triton.cdiv(a.numel(), meta["BLOCK"]),)](a, b, out, a.numel())
        return out
    opt = minidynamo.optimize()(f)
    a, b = torch.arange(100.0, device=DEVICE), torch.ones(100, device=DEVICE)
    same_outcome(f, opt, a, b)
    kern.configs = [triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 4})]
    kern.cache.clear()
    same_outcome(f, opt, a, b)
    kern.configs.append(triton.Config({"BLOCK": 2}))  # same list, longer
    kern.cache.clear()
    same_outcome(f, opt, a, b)


def test_grid_reads_globals_and_object_attributes():
    block = {"B": 16}

    def f(a, b):
        out = torch.zeros_like(a)
        K.add_kernel[lambda meta: (triton.cdiv(a.numel(), block["B"]),)](a, b, out, a.numel(), BLOCK=16)
        return out
    opt = minidynamo.optimize()(f)
    a, b = torch.arange(64.0, device=DEVICE), torch.ones(64, device=DEVICE)
    for v in (16, 32, 64, 16):
        block["B"] = v
        same_outcome(f, opt, a, b)
    grid = K.GridObject(16)

    def g(a, b):
        out = torch.zeros_like(a)
        K.add_kernel[grid](a, b, out, a.numel(), BLOCK=16)
        return out
    opt = minidynamo.optimize()(g)
    for v in (16, 32, 64, 16):
        grid.block = v
        same_outcome(g, opt, a, b)


def test_kernel_constant_argument_from_outside_changes():
    def f(x, alpha, cfg):
        y = x.clone()
        K.scale_inplace[(triton.cdiv(y.numel(), cfg["B"]),)](y, alpha, y.numel(), BLOCK=cfg["B"])
        return y
    opt = minidynamo.optimize()(f)
    x = torch.arange(40.0, device=DEVICE)
    for alpha, block in ((2.0, 16), (3.0, 16), (3.0, 32), (1, 32), (0.5, 16)):
        same_outcome(f, opt, x, alpha, {"B": block})
