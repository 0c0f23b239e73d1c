"""nn.Module subclasses with a `__getattr__` of their own, passed in: CPython calls the
class's hook (not Module's) where the instance and the class lack a name, so the hook
answers even for a name the module's tables hold; `super().__getattr__(name)` is Module's
lookup in the tables, whose AttributeError the hook may catch. Compared with eager; a
table changed after the trace is not served a stale graph."""
import torch
from helpers import check

import minidynamo


class Fallback(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("a", torch.nn.Parameter(torch.ones(4) * 2))

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)  # Module's tables
        except AttributeError:
            if name == "a_copy":
                return self.a
            raise

    def forward(self, x):
        return x * self.a * self.a_copy


class Overriding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._parameters["w"] = torch.nn.Parameter(torch.ones(4))

    def __getattr__(self, name):
        if name == "w":
            return 7
        return super().__getattr__(name)

    def forward(self, x):
        return x * self.w


class Missing(Fallback):
    def forward(self, x):
        return x + self.b


class Defaulted(Fallback):
    def forward(self, x):
        return x + getattr(self, "b", 3), hasattr(self, "a_copy"), hasattr(self, "c")


def call(mod, x):
    return mod(x)


def test_hook_falling_back_from_module_lookup():
    check(call, (Fallback(), torch.ones(4)), (Fallback(), torch.randn(4)), kind="graph", same_entry=False)


def test_hook_answers_before_the_module_tables():
    check(call, (Overriding(), torch.ones(4)), kind="graph")


def test_a_name_nowhere_raises_as_eager():
    check_eager = minidynamo.optimize(backend="eager")(call)
    for fn in (call, check_eager):
        try:
            fn(Missing(), torch.ones(4))
        except AttributeError as e:
            assert str(e) == "'Missing' object has no attribute 'b'"
        else:
            raise AssertionError("no AttributeError")


def test_getattr_default_and_hasattr_through_the_hook():
    check(call, (Defaulted(), torch.ones(4)), kind="graph")


def test_a_parameter_registered_later_is_not_stale():
    mod = Fallback()
    opt = minidynamo.optimize(backend="eager")(call)
    x = torch.ones(4)
    assert torch.equal(opt(mod, x), call(mod, x))
    mod._parameters["a_copy"] = torch.nn.Parameter(torch.full((4,), 5.0))  # (the hook answers hasattr)
    assert torch.equal(opt(mod, x), call(mod, x))
    assert torch.equal(call(mod, x), torch.full((4,), 10.0))
