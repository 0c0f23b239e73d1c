"""Module and tensor state changed between calls, probed against eager: what the fakes or
the guards must see of parameters, gradients and the state a call leaves behind."""
import torch

import minidynamo
from helpers import CountingBackend


def test_param_data_of_new_shape_with_stale_grad():
    # `p.data = t` of another shape leaves p.grad of the old one: the forward runs eagerly
    # (only backward fails), so the call must too, not fail making the fake.
    def run(f, x):
        out = [f(x).sum()]
        out[0].backward()
        m.weight.data = torch.ones(4, 3)
        m.bias.data = torch.ones(4)
        out.append(f(x))
        return out

    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    expected = run(lambda t: m(t), x)
    for backend in (CountingBackend(), "aot_eager"):
        m = torch.nn.Linear(3, 2)
        m.load_state_dict(state)
        got = run(minidynamo.optimize(lambda t: m(t), backend=backend), x)
        assert torch.allclose(got[0], expected[0]) and torch.allclose(got[1], expected[1])
