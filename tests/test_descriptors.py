"""Descriptors of user classes on objects passed in: a Python `__set__` (and a property's
setter) takes `obj.name = v`, a Python `__get__` answers `obj.name`, a data descriptor with
no `__get__` leaves the read to the instance dictionary, `obj.__dict__[k] = v` writes past
the descriptors, and C descriptors handed in (`torch.Tensor.shape`, a `__slots__` member)
read through `d.__get__(obj)`. Each is compared with eager (values, the objects' state
after the call); a descriptor replaced on the class is not served a stale graph."""
import pytest
import torch
from helpers import CountingBackend, check

import minidynamo


class Doubling:
    def __set__(self, obj, value):
        obj.__dict__["field"] += value * 2


class WithDoubling:
    field = Doubling()

    def __init__(self):
        self.__dict__["field"] = 0


class Stored:
    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return obj.__dict__.get("_value", 0)

    def __set__(self, obj, value):
        obj.__dict__["_value"] = value


class WithStored:
    prop = Stored()

    def __init__(self):
        self.prop = 42


class SetOnly:
    def __set__(self, obj, value):
        obj.__dict__["field"] = value + 1


class WithSetOnly:
    field = SetOnly()

    def __init__(self):
        self.__dict__["field"] = 3


class Scaled:  # a non-data descriptor
    def __get__(self, obj, objtype=None):
        return 10 if obj is None else obj.base * 3


class WithScaled:
    value = Scaled()

    def __init__(self):
        self.base = 2


class WithProperty:
    def __init__(self):
        self._v = 1

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 5


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


def set_through_descriptor(x, foo):
    foo.field = 10
    return x + foo.field


def write_dict_then_read_descriptor(obj):
    obj.__dict__["extra"] = 99
    return obj.prop + obj.__dict__["extra"]


def write_dict_and_set(x, obj):
    obj.__dict__["extra"] = x.shape[0]
    obj.prop = 7
    return x * obj.prop, obj.extra


def read_set_only_descriptor(x, foo):
    return x + foo.field


def set_then_read_set_only_descriptor(x, foo):
    foo.field = 5
    return x + foo.field


def read_non_data_descriptor(x, obj):
    return x * obj.value


def set_property(x, obj):
    obj.v = 2
    return x + obj.v


def write_dict_under_a_reading_descriptor(x, obj):
    obj.__dict__["prop"] = 5
    return x + obj.prop


def getset_get(g, x):
    torch.sin(x)
    return g.__get__(x)


def member_get(g, s, x):
    return x + g.__get__(s)


def descriptor_of_another_class(g, x):
    return g.__get__(x)


@pytest.mark.parametrize("fn, make", [
    (set_through_descriptor, WithDoubling), (read_set_only_descriptor, WithSetOnly),
    (set_then_read_set_only_descriptor, WithSetOnly), (read_non_data_descriptor, WithScaled),
    (set_property, WithProperty), (write_dict_and_set, WithStored),
], ids=lambda v: getattr(v, "__name__", ""))
def test_descriptors_on_an_object_passed_in(fn, make):
    check(fn, (torch.zeros(2), make()), (torch.ones(2), make()), kind="graph")


def test_write_dict_then_read_descriptor():
    info = check(write_dict_then_read_descriptor, (WithStored(),), kind="constant", graphs=0)
    assert info.entries


def test_written_state_after_the_call():
    opt = minidynamo.optimize(backend="eager")(set_through_descriptor)
    a, b = WithDoubling(), WithDoubling()
    assert torch.equal(opt(torch.zeros(2), a), set_through_descriptor(torch.zeros(2), b))
    assert a.__dict__ == b.__dict__ == {"field": 20}  # the descriptor ran once, not again on write-back
    obj = WithStored()
    assert minidynamo.optimize(backend="eager")(write_dict_then_read_descriptor)(obj) == 141
    assert obj.__dict__ == {"_value": 42, "extra": 99}


def test_a_write_under_a_descriptor_that_reads_past_the_dictionary_is_eager():
    opt = minidynamo.optimize(backend="eager")(write_dict_under_a_reading_descriptor)
    a, b = WithStored(), WithStored()
    assert torch.equal(opt(torch.zeros(1), a), write_dict_under_a_reading_descriptor(torch.zeros(1), b))
    assert a.__dict__ == b.__dict__
    assert all(e.kind != "graph" for e in opt.cache_entries())


def test_a_replaced_descriptor_is_not_stale():
    class Local:
        field = Doubling()

        def __init__(self):
            self.__dict__["field"] = 0

    opt = minidynamo.optimize(backend="eager")(set_through_descriptor)
    assert torch.equal(opt(torch.zeros(1), Local()), torch.full((1,), 20.0))
    Local.field = SetOnly()
    expected = set_through_descriptor(torch.zeros(1), Local())
    assert torch.equal(opt(torch.zeros(1), Local()), expected)
    assert torch.equal(expected, torch.full((1,), 11.0))
    del Local.field
    expected = set_through_descriptor(torch.zeros(1), Local())
    assert torch.equal(opt(torch.zeros(1), Local()), expected)


def test_a_descriptor_getter_changed_on_its_class_is_not_stale():
    class Local:
        value = Scaled()

        def __init__(self):
            self.base = 2

    opt = minidynamo.optimize(backend="eager")(read_non_data_descriptor)
    assert torch.equal(opt(torch.ones(1), Local()), torch.full((1,), 6.0))
    Scaled.__get__, old = (lambda self, obj, objtype=None: 100), Scaled.__get__
    try:
        assert torch.equal(opt(torch.ones(1), Local()), torch.full((1,), 100.0))
    finally:
        Scaled.__get__ = old


def _compare(fn, *args):
    """Eager and optimized (fullgraph) on the same arguments (descriptors cannot be copied)."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend, fullgraph=True)(fn)
    expected = fn(*args)
    for _ in range(2):
        got = opt(*args)
        assert type(got) is type(expected) and got == expected, (got, expected)
    return backend, opt


@pytest.mark.parametrize("g", [torch.Tensor.shape, torch.Tensor.dtype, torch.Tensor.requires_grad],
                         ids=lambda g: g.__name__)
def test_getset_descriptor_get(g):
    backend, opt = _compare(getset_get, g, torch.ones(2, 2))
    assert backend.calls == 1 and len(opt.cache_entries()) == 1


def test_member_descriptor_get():
    opt = minidynamo.optimize(backend="eager", fullgraph=True)(member_get)
    for v in (5, 7):
        assert torch.equal(opt(Slotted.x, Slotted(v), torch.ones(1)), member_get(Slotted.x, Slotted(v), torch.ones(1)))


def test_another_descriptor_is_not_served_a_stale_graph():
    opt = minidynamo.optimize(backend="eager")(getset_get)
    x = torch.ones(2, 3)
    assert opt(torch.Tensor.shape, x) == x.shape
    assert opt(torch.Tensor.dtype, x) is x.dtype


def test_a_descriptor_of_another_class_raises_as_eager():
    opt = minidynamo.optimize(backend="eager")(descriptor_of_another_class)
    with pytest.raises(TypeError) as eager:
        descriptor_of_another_class(Slotted.x, torch.ones(1))
    with pytest.raises(TypeError) as got:
        opt(Slotted.x, torch.ones(1))
    assert str(got.value) == str(eager.value)


def test_an_instance_attribute_shadowing_a_non_data_descriptor_is_not_stale():
    opt = minidynamo.optimize(backend="eager")(read_non_data_descriptor)
    obj = WithScaled()
    assert torch.equal(opt(torch.ones(1), obj), torch.full((1,), 6.0))
    obj.__dict__["value"] = 100
    assert torch.equal(opt(torch.ones(1), obj), read_non_data_descriptor(torch.ones(1), obj))


def test_a_subclass_shadowing_the_descriptor_later_is_not_stale():
    class Base:
        field = Doubling()

    class Sub(Base):
        def __init__(self):
            self.__dict__["field"] = 0

    opt = minidynamo.optimize(backend="eager")(set_through_descriptor)
    assert torch.equal(opt(torch.zeros(1), Sub()), torch.full((1,), 20.0))
    Sub.field = SetOnly()
    a, b = Sub(), Sub()
    assert torch.equal(opt(torch.zeros(1), a), set_through_descriptor(torch.zeros(1), b))
    assert vars(a) == vars(b)
