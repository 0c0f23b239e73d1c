"""`torch.return_types.max((values, indices))` and its kind made in the trace: a tuple of
that type (its fields read by name, returned as that type), one graph; a sequence of
another length is eager's TypeError."""
import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


def made_from_a_tuple(x, y):
    return torch.return_types.max((x, y))


def made_from_a_list_and_read_by_name(x, y):
    r = torch.return_types.max([x * 2, y])
    return r.values + r.indices, r[0], type(r).__name__, tuple(r)


def sort_as_a_tuple(x, y):
    return tuple(torch.return_types.sort((2 * x, y - 1)))


def test_struct_sequences_made_in_the_trace():
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    check(made_from_a_tuple, (x, y), kind="constant")  # no tensor work: the inputs returned
    for fn in (made_from_a_list_and_read_by_name, sort_as_a_tuple):
        check(fn, (x, y), kind="graph")


def test_struct_sequence_of_another_length_raises_eagers_type_error():
    def f(x):
        return torch.return_types.max((x,))

    opt = minidynamo.optimize(f, backend=CountingBackend())
    assert isinstance(same_outcome(f, opt, torch.ones(2)), TypeError)
