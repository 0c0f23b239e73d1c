"""`self.count += 1` / `self.running.mul_(m).add_(x)` on buffers of a module passed in
(changed in place in the graph, the store of the same tensor a no-op as in eager), and
`x.grad` of leaf tensors passed in (None or a tensor, guarded). Differential against
eager; one graph where torch.compile keeps one."""
import pytest
import torch

from helpers import CountingBackend, check
import minidynamo


class Running(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("scratch", torch.zeros(4), persistent=False)

    def forward(self, x):
        self.count += 1
        self.running.mul_(0.9).add_(x)
        self.scratch += x
        return x + self.running * self.count


def test_buffers_updated_in_place():
    m_eager, m_opt = Running(), Running()
    backend = CountingBackend()
    opt = minidynamo.optimize(m_opt, backend=backend)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(opt(x), m_eager(x))
    for name in ("count", "running", "scratch"):
        torch.testing.assert_close(getattr(m_opt, name), getattr(m_eager, name))
    assert m_opt.state_dict().keys() == m_eager.state_dict().keys()
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]


def test_buffer_update_checked_differentially():
    m = Running()

    def f(x, m):
        return m(x), m.count.clone()

    check(f, (torch.randn(4), m), kind="graph")


class Replaces(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, x):
        self.count = self.count + 1  # a new tensor under the buffer's name
        self.scratch = x[:2] * self.count  # a non-persistent one stays non-persistent
        return x * self.count


def test_a_new_tensor_stored_as_the_buffer():
    m_eager, m_opt = Replaces(), Replaces()
    backend = CountingBackend()
    opt = minidynamo.optimize(m_opt, backend=backend)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(opt(x), m_eager(x))
        for name in ("count", "scratch"):
            torch.testing.assert_close(getattr(m_opt, name), getattr(m_eager, name))
    assert m_opt.state_dict().keys() == m_eager.state_dict().keys() == {"count"}
    assert backend.calls == 1 and [e.kind for e in opt.cache_entries()] == ["graph"]
    check(lambda x, m: (m(x), m.count), (torch.randn(4), Replaces()), kind="graph")


def test_a_buffer_made_a_parameter_recompiles():
    m_eager, m_opt = Replaces(), Replaces()
    opt = minidynamo.optimize(m_opt)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), m_eager(x))
    for m in (m_eager, m_opt):  # the name is a parameter's now: the store raises in eager
        del m._buffers["count"]
        m.count = torch.nn.Parameter(torch.zeros(()))
    with pytest.raises(TypeError) as expected:
        m_eager(x)
    with pytest.raises(TypeError) as got:
        opt(x)
    assert str(got.value) == str(expected.value)


def test_the_buffer_table_read_after_the_store_breaks():
    class Listing(Replaces):
        def forward(self, x):
            self.count = self.count + 1
            return x * sum(b.sum() for b in self.buffers())

    check(lambda x, m: m(x), (torch.randn(4), Listing()), kind="break", reason="side_effect")

    class HeldTable(Replaces):
        def forward(self, x):
            table = self._buffers
            self.count = self.count + 1
            return x * table["count"]

    check(lambda x, m: m(x), (torch.randn(4), HeldTable()), kind="break", reason="side_effect")


def test_grad_of_an_input():
    def f(x):
        if x.grad is None:
            return x * 2
        return x + x.grad

    with_grad = torch.randn(4, requires_grad=True)
    with_grad.grad = torch.randn(4)
    check(f, (torch.randn(4, requires_grad=True),), kind="graph")
    check(f, (with_grad,), kind="graph")


def test_grad_none_then_a_tensor_recompiles():
    backend = CountingBackend()

    def f(x):
        return x * 2 if x.grad is None else x - x.grad

    opt = minidynamo.optimize(f, backend=backend)
    x = torch.randn(3, requires_grad=True)
    torch.testing.assert_close(opt(x), f(x))
    x.grad = torch.ones(3)
    torch.testing.assert_close(opt(x), f(x))
    assert len(opt.cache_entries()) == 2


def test_grads_of_parameters():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    lin(torch.randn(5, 3)).sum().backward()

    def f(x):
        norms = [p.grad.norm() for p in lin.parameters()]
        return lin(x) * sum(norms)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(opt(x), f(x))
    lin.weight.grad.mul_(3)  # the same gradient tensor, changed: read again by the graph
    torch.testing.assert_close(opt(x), f(x))
    lin.bias.grad = None  # guarded: traced again, and eager's error raised as in eager
    assert [e.kind for e in opt.cache_entries()] == ["graph"] and backend.calls == 1
    try:
        f(x)
    except AttributeError as e:
        expected = str(e)
    try:
        opt(x)
    except AttributeError as e:
        assert str(e) == expected
    else:
        raise AssertionError("no AttributeError")


def test_version_read_breaks_with_a_reason():
    def f(x):
        v = x._version
        x.add_(1)
        return x * 2, x._version - v

    info = check(f, (torch.randn(4),), kind="break", reason="construct")
    assert "_version" in info.break_reason.detail
