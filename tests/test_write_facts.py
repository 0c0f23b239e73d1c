"""What an op wrote and what its result shares, recorded on its node when it runs on fake
tensors (graph.py), and the passes that read it: cudagraphs' analysis and copy recording,
the launch program's fresh allocations, the fake-op memo; the same facts on Triton launch
nodes (from the kernel's source analysis) and on the functional pass's nodes."""
import pytest
import torch
from helpers import CountingBackend, check
from kernels import capture_kernels as K
from kernels.capture_kernels import triton

import minidynamo
from minidynamo import fakecache
from minidynamo.cudagraphs import CudaGraphRunner, analyse, reshaped_inputs
from minidynamo.memory_facts import aliased_values, written_values
from minidynamo.triton.capture import launch_record
from minidynamo.triton.functional import functionalize
from minidynamo.triton.program import fresh_allocations


def trace(fn, *args, ctx=None):
    """The GraphModule of fn(*args) (run on clones), traced with no fallback."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend, fullgraph=True)(fn)
    if ctx is None:
        opt(*[a.clone() for a in args])
    else:
        with ctx():
            opt(*[a.clone() for a in args])
    return backend.graphs[-1]


def facts(gm) -> list:
    """(target name, written value names, aliased value names) per call node."""
    out = []
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method"):
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
            w, a = written_values(n), aliased_values(n)
            out.append((name, None if w is None else [m.name for m in w],
                        None if a is None else [m.name for m in a]))
    return out


def _m(*shape):
    return torch.randn(*shape)


# --- the facts, per op family -----------------------------------------------------------
def out_kwarg(a, b, c):
    torch.add(a, b, out=c)
    return c


def relu_function(a):
    torch.relu_(a)
    return a * 1


def sigmoid_function(a):
    torch.sigmoid_(a)
    return a * 1


def add_method(a, b):
    a.add_(b)
    return a * 1


def set_item(a):
    a[0] = 1.0
    return a + 1


def iadd(a, b):
    a += b  # operator.iadd in the graph
    return a * 2


def views(a):
    return a.view(-1), a[1:], a.t()


def transpose_inplace(a):
    a.transpose_(0, 1)
    return a + 1


def aten_ops(a):
    b = torch.ops.aten.add.Tensor(a, 1)
    torch.ops.aten.mul_.Tensor(a, 2)
    return b


def split_views(a):
    return torch.split(a, 1)


def sort_fresh(a):
    values, indices = torch.sort(a)
    return values + 1, indices


def write_through_view(a):
    v = a[1:]
    v.mul_(2)
    return v + 1


def same_dtype(a):
    # float() of a float32 tensor and dropout in eval mode return `a` itself
    return a.float()[1:], torch.nn.functional.dropout(a, 0.5, training=False)[1:]


def foreach_inplace(a, b):
    torch._foreach_add_([a, b], 1)  # version counters of fakes miss these writes
    return a * 1


def batch_norm_train(x, mean, var):
    # writes the running statistics: no schema says so, no version counter shows it
    return torch.nn.functional.batch_norm(x, mean, var, training=True) * 1


def batch_norm_eval(x, mean, var):
    return torch.nn.functional.batch_norm(x, mean, var, training=False) * 1


def fresh_ops(a, b):
    return torch.relu(a) + b, a.clone(), a.sum(), torch.cat([a, b])


FACTS = [
    (out_kwarg, 3, [("add", ["c"], ["c"])]),
    (relu_function, 1, [("relu_", ["a"], ["a"]), ("mul", [], [])]),
    (sigmoid_function, 1, [("sigmoid_", ["a"], ["a"]), ("mul", [], [])]),
    (add_method, 2, [("add_", ["a"], ["a"]), ("mul", [], [])]),
    (set_item, 1, [("setitem", ["a"], []), ("add", [], [])]),
    (iadd, 2, [("iadd", ["a"], ["a"]), ("mul", [], [])]),
    (views, 1, [("view", [], ["a"]), ("getitem", [], ["a"]), ("t", [], ["a"])]),
    (transpose_inplace, 1, [("transpose_", ["a"], ["a"]), ("add", [], [])]),
    (aten_ops, 1, [("add.Tensor", [], []), ("mul_.Tensor", ["a"], ["a"])]),
    (split_views, 1, [("split", [], ["a"]), ("getitem", [], ["split"]), ("getitem", [], ["split"])]),
    (sort_fresh, 1, [("sort", [], []), ("getitem", [], []), ("getitem", [], []), ("add", [], [])]),
    (write_through_view, 1, [("getitem", [], ["a"]), ("mul_", ["getitem"], ["getitem"]), ("add", [], [])]),
    (fresh_ops, 2, [("relu", [], []), ("add", [], []), ("clone", [], []), ("sum", [], []), ("cat", [], [])]),
    (foreach_inplace, 2, [("_foreach_add_", ["a", "b"], ["a", "b"]), ("getitem", [], ["_foreach_add_"]),
                          ("getitem", [], ["_foreach_add_"]), ("mul", [], [])]),
    (batch_norm_train, 3, [("batch_norm", ["mean", "var"], []), ("mul", [], [])]),
    (batch_norm_eval, 3, [("batch_norm", [], []), ("mul", [], [])]),
    (same_dtype, 1, [("float", [], ["a"]), ("getitem", [], ["a"]), ("dropout", [], ["a"]),
                     ("getitem", [], ["a"])]),  # the result is `a`'s own tracker
]


def _args(fn, nargs):
    if fn in (batch_norm_train, batch_norm_eval):
        return [_m(4, 2), torch.zeros(2), torch.ones(2)]
    return [_m(2, 2) for _ in range(nargs)]


@pytest.mark.parametrize("fn,nargs,want", FACTS, ids=[f[0].__name__ for f in FACTS])
def test_recorded_facts(fn, nargs, want):
    args = _args(fn, nargs)
    assert facts(trace(fn, *args)) == want
    check(fn, tuple(args), kind="graph")  # and the graph does what eager does


@pytest.mark.parametrize("fn", [relu_function, out_kwarg, set_item, foreach_inplace, batch_norm_train],
                         ids=lambda f: f.__name__)
def test_facts_under_inference_mode(fn):
    # Inference tensors keep no version counter: the writes come from the ops' schemas.
    args = _args(fn, fn.__code__.co_argcount)
    got = facts(trace(fn, *args, ctx=torch.inference_mode))
    assert got == next(w for f, _, w in FACTS if f is fn)


def test_set_moves_a_value_onto_an_input():
    def f(b):
        k = torch.empty(0)
        k.set_(b)
        return k.add_(1) * 1, k
    gm = trace(f, _m(3))
    assert facts(gm)[1] == ("set_", ["empty"], ["empty", "b"])
    written, aliasing, _ = analyse(gm)
    assert written == {0} and aliasing == ["empty"]  # k.add_ writes b


def launches(graph) -> list:
    return [n for n in graph.nodes if launch_record(n) is not None]


def meta_facts(node) -> tuple:
    return node.meta.get("writes"), node.meta.get("aliases")


def test_triton_launch_writes_come_from_the_kernel_source():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[lambda m: (triton.cdiv(o.numel(), m["BLOCK"]),)](a, b, o, o.numel(), BLOCK=64)
        K.scale_inplace[(4,)](a, 2.0, a.numel())
        return o
    gm = trace(f, torch.randn(64, device=K.DEVICE), torch.randn(64, device=K.DEVICE))
    add, scale = launches(gm.graph)
    assert [m.name for m in add.all_input_nodes] == ["a", "b", "empty_like"]
    assert meta_facts(add) == ((2,), ()) and meta_facts(scale) == ((0,), ())  # a launch returns None
    got = facts(gm)
    assert got[1][1:] == (["empty_like"], []) and got[2][1:] == (["a"], [])
    assert analyse(gm)[0] == {0}


def test_launch_with_one_tensor_as_several_arguments_writes_it_once():
    def f(a, b):
        K.add_kernel[(4,)](b, a, a, a.numel(), BLOCK=16)  # a read and written: one input node
        return a * 1
    gm = trace(f, torch.randn(64, device=K.DEVICE), torch.randn(64, device=K.DEVICE))
    (launch,) = launches(gm.graph)
    assert [m.name for m in launch.all_input_nodes] == ["b", "a"]
    assert meta_facts(launch) == ((1,), ())
    assert analyse(gm)[0] == {0}


def test_launch_the_analysis_cannot_decide_writes_every_tensor_argument():
    from kernels import mutation_corpus as corpus
    def f(x, out):
        corpus.unknown_call_kernel[(1,)](x, out, 16, BLOCK=16)
        return out * 1
    gm = trace(f, torch.randn(16, device=K.DEVICE), torch.zeros(16, device=K.DEVICE))
    (launch,) = launches(gm.graph)
    assert meta_facts(launch) == ((0, 1), ())
    assert analyse(gm)[0] == {0, 1}


class _LaunchesInBodies(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, out):
        K.add_kernel[(4,)](x, y, out, x.numel(), BLOCK=16)  # writes an outer value
        return out * 1

    @staticmethod
    def backward(ctx, g):
        gx = torch.empty_like(g)
        K.add_kernel[(4,)](g, g, gx, g.numel(), BLOCK=16)
        return gx, None, None


def test_launch_facts_in_a_body_name_the_bodys_own_inputs():
    # In a body, outer values become the body's placeholders: positions count those.
    def f(x, y, out):
        return _LaunchesInBodies.apply(x, y, out)
    x = torch.randn(64, device=K.DEVICE, requires_grad=True)
    gm = trace(f, x, torch.randn(64, device=K.DEVICE), torch.zeros(64, device=K.DEVICE))
    fwd, bwd = [m for _, m in gm.named_children()]
    (launch,) = launches(fwd.graph)
    assert [m.op for m in launch.all_input_nodes] == ["placeholder"] * 3
    assert meta_facts(launch) == ((2,), ()) and [m.name for m in written_values(launch)] == ["out"]
    (launch,) = launches(bwd.graph)
    assert [m.name for m in launch.all_input_nodes] == ["grad_0", "empty_like"]
    assert meta_facts(launch) == ((1,), ())


def test_functional_pass_records_facts_on_the_nodes_it_makes():
    def f(a, b):
        o = torch.empty_like(a)
        K.add_kernel[(4,)](a, b, o, a.numel(), BLOCK=16)
        K.scale_inplace[(4,)](a, 2.0, a.numel())
        return o
    gm = trace(f, torch.randn(64, device=K.DEVICE), torch.randn(64, device=K.DEVICE))
    functionalize(gm)
    got = [(n.name, meta_facts(n)) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert got == [
        ("empty_like", ((), ())),
        ("add_kernel_launch_functional", ((), ())), ("getitem", ((), ())),
        ("copy_", ((0,), (0,))),  # copy_(empty_like, getitem): writes its target, returns it
        ("scale_inplace_launch_functional", ((), ())), ("getitem_1", ((), ())),
        ("copy__1", ((0,), (0,))),
    ]
    assert facts(gm)[3][1:] == (["empty_like"], ["empty_like"])
    assert analyse(gm)[0] == {0}  # the copy_ into `a`; b is only read


# --- cudagraphs: what the analysis reports --------------------------------------------
@pytest.mark.parametrize("fn,nargs,written,aliasing", [
    (out_kwarg, 3, {2}, []),
    (relu_function, 1, {0}, []),
    (sigmoid_function, 1, {0}, []),
    (set_item, 1, {0}, []),
    (iadd, 2, {0}, []),
    (write_through_view, 1, {0}, []),
    (aten_ops, 1, {0}, []),
    (foreach_inplace, 2, {0, 1}, []),
    (batch_norm_train, 3, {1, 2}, []),
    (batch_norm_eval, 3, set(), []),
    (views, 1, set(), ["view", "getitem", "t"]),
    (split_views, 1, set(), ["getitem", "getitem_1"]),
    (fresh_ops, 2, set(), []),
], ids=lambda v: getattr(v, "__name__", None))
def test_analyse_reports_written_inputs_and_aliasing_outputs(fn, nargs, written, aliasing):
    gm = trace(fn, *_args(fn, nargs))
    got_written, got_aliasing, _ = analyse(gm)
    assert got_written == written and got_aliasing == aliasing


def test_inputs_changing_shape_in_place_cannot_be_recorded():
    args = [_m(2, 3)]
    gm = trace(transpose_inplace, *args)
    assert reshaped_inputs(gm, args) == ["a"]
    gm = trace(relu_function, *args)
    assert reshaped_inputs(gm, args) == []


# Past MAX_RECORDINGS a call with new addresses replays a recording over our own copies of
# the inputs: a write the analysis misses lands in the copy, not in the caller's tensor.
# The stand-in replay (test_cudagraphs.py) runs the graph on the recording's inputs.
class _ReplayIntoStatic:
    def __init__(self, compiled, inputs, outputs):
        self.compiled, self.inputs, self.outputs = compiled, inputs, outputs

    def replay(self):
        for static, new in zip(self.outputs, self.compiled(*self.inputs)):
            static.copy_(new)


@pytest.fixture
def stand_in(monkeypatch):
    def capture(self, rec):  # like a CUDA capture, writes nothing: the replay does
        outputs = tuple(self.compiled(*[t.clone() for t in rec.inputs]))
        return _ReplayIntoStatic(self.compiled, rec.inputs, outputs), outputs
    monkeypatch.setattr(CudaGraphRunner, "_capture", capture)
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))
    monkeypatch.setattr(minidynamo.cudagraphs, "MAX_RECORDINGS", 1)


def out_write(a, b, c):
    torch.add(a, b, out=c)
    return a * 2


def relu_write(a, b):
    torch.relu_(a)
    return a + b


def view_write(a, b):
    a[1:].sigmoid_()
    return b * 2


@pytest.mark.parametrize("fn", [out_write, relu_write, view_write, foreach_inplace, batch_norm_train],
                         ids=lambda f: f.__name__)
def test_writes_reach_the_caller_past_the_recording_limit(stand_in, fn):
    opt = minidynamo.optimize(mode="cudagraphs")(fn)
    n = fn.__code__.co_argcount
    for _ in range(6):  # new addresses every call: one recording, then past the limit
        args = [torch.randn(8) for _ in range(n)] if fn is not batch_norm_train else \
            [torch.randn(4, 2), torch.randn(2), torch.rand(2) + 0.5]
        want_args = [a.clone() for a in args]
        want = fn(*want_args)
        got = opt(*args)
        torch.testing.assert_close(got, want)
        for g, w in zip(args, want_args):
            torch.testing.assert_close(g, w)
    r = opt.cache_entries()[0].compiled
    # Inputs it writes are never copied into buffers of a recording: only those it reads.
    assert r.writes_inputs and all(not set(rec.staged) & r.written for rec in r.copy_recordings.values())


def test_graph_writing_nothing_uses_the_copy_recording(stand_in):
    opt = minidynamo.optimize(mode="cudagraphs")(fresh_ops)
    for _ in range(4):
        a, b = torch.randn(3), torch.randn(3)
        got = opt(a, b)
        for g, w in zip(got, fresh_ops(a, b)):
            torch.testing.assert_close(g, w)
    r = opt.cache_entries()[0].compiled
    assert not r.writes_inputs and r.copy_recording is not None and r.replays == 2


# --- the launch program's fresh allocations ------------------------------------------
def test_fresh_allocations_are_new_storages_no_torch_op_moves():
    def f(a, b):
        e = torch.empty_like(a)
        s = a + b
        c = a.clone()
        v = c[1:]  # a view: not an allocation of its own
        values, _ = torch.sort(b)
        w = torch.empty_like(a)
        w.add_(1)  # written by a torch op: set_ or resize_ could have moved it
        torch.mul(a, 2, out=s)  # s was fresh when made; a write by a torch op too
        return e, s, c, v, values, w
    nodes = list(trace(f, _m(4), _m(4)).graph.nodes)
    names = {n.name for n in fresh_allocations(nodes)}
    assert names == {"empty_like", "clone", "getitem_1", "getitem_2"}


# --- the fake-op memo: eligibility from the facts ---------------------------------------
def test_memo_takes_ops_whose_first_run_wrote_nothing_and_made_a_new_tensor():
    fakecache._results.clear()
    trace(lambda a: torch.nn.functional.softplus(a).clone(), _m(3))
    memo = {k[1] for k in fakecache._results}
    assert torch.nn.functional.softplus in memo and "clone" in memo
    fakecache._results.clear()
    trace(lambda a, b, c: (torch.add(a, b, out=c), a.view(3), a.add_(1), a.contiguous()),
          _m(3), _m(3), _m(3))
    assert not fakecache._results  # a write, a view, in-place, and `a` itself
    trace(batch_norm_train, *_args(batch_norm_train, 3))
    assert torch.nn.functional.batch_norm not in {k[1] for k in fakecache._results}
    trace(batch_norm_eval, *_args(batch_norm_eval, 3))
    assert torch.nn.functional.batch_norm in {k[1] for k in fakecache._results}


def test_memo_hit_records_the_same_facts():
    fakecache._results.clear()
    first = trace(fresh_ops, _m(2, 2), _m(2, 2))
    assert fakecache._results
    again = trace(fresh_ops, _m(2, 2), _m(2, 2))  # from the memo
    assert facts(again) == facts(first)
    def meta(gm):
        return [(n.meta.get("writes"), n.meta.get("aliases")) for n in gm.graph.nodes]
    assert meta(again) == meta(first)


def test_memo_keeps_aliasing_that_depends_on_metadata():
    # contiguous()/to() return the tensor itself when nothing changes, else a new one:
    # the memo keys on strides and dtype, so a hit for one never serves the other.
    def f(a):
        return a.contiguous(), a.to(torch.float32)
    fakecache._results.clear()
    arg_sets = [torch.randn(3, 4).t(), torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3)]
    got = [facts(trace(f, a)) for a in arg_sets]
    assert got[0] == [("contiguous", [], []), ("to", [], ["a"])]
    assert got[1] == [("contiguous", [], ["a"]), ("to", [], [])]
    assert got[2] == [("contiguous", [], ["a"]), ("to", [], ["a"])]
    check(f, *[(a,) for a in arg_sets], kind="graph", same_entry=False)
