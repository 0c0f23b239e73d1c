"""Which tuple classes a tuple tracker models as they are: namedtuple classes
(`namedtuple_base`) and classes whose instances behave as tuples do
(`is_plain_tuple_type`). Plain functions of real classes, below every tracker (lists.py
asks them of its tuples; namedtuples.py models the classes)."""
from __future__ import annotations

import collections
import types
import typing

_REFERENCE = collections.namedtuple("_REFERENCE", "a")
_TUPLEGETTER = type(_REFERENCE.a)
# The functions collections.namedtuple puts on every class it makes share these code
# objects: the same code means the stock method (not one a user replaced).
_STOCK_CODES = {getattr(_REFERENCE, name).__code__: name for name in ("_replace", "_asdict", "__repr__", "__getnewargs__")}
_STOCK_CODES[_REFERENCE._make.__func__.__code__] = "_make"
# Class attributes that say nothing about how instances behave.
_DATA_DUNDERS = {
    "__slots__", "__doc__", "__module__", "__qualname__", "__dict__", "__weakref__", "__annotations__",
    "__orig_bases__", "__parameters__", "__firstlineno__", "__static_attributes__", "__classcell__",
    "__match_args__", "__annotate__", "__annotate_func__", "__annotations_cache__", "__type_params__",
    "__classdictcell__",  # 3.14: the class namespace's cell, for its lazily evaluated annotations
    "__slotnames__",  # copyreg caches it on a class whose instances were copied
    "__class_getitem__", "__init_subclass__", "__subclasshook__",  # about the class (G[int], subclassing)
}


def namedtuple_base(cls):
    """The class collections.namedtuple made that `cls` is or derives from, else None."""
    if not isinstance(cls, type) or not issubclass(cls, tuple) or cls is tuple:
        return None
    for c in cls.__mro__:
        d = c.__dict__
        if "_fields" in d and "_make" in d and "__new__" in d:
            new = getattr(d["__new__"], "__func__", None)
            if isinstance(new, types.FunctionType) and new.__globals__.get("_tuple_new") is tuple.__new__:
                return c
            return None
    return None


def _stock_name(value):
    fn = value.__func__ if isinstance(value, classmethod) else value
    return _STOCK_CODES.get(getattr(fn, "__code__", None))


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (a Python class statement)


def is_plain_tuple_type(t) -> bool:
    """Whether instances of the tuple type `t` behave as tuples do, so a tuple tracker
    models them: tuple itself, C tuple types (torch.Size, structseqs such as
    torch.return_types), and Python classes of which none in the MRO defines a dunder
    (==, hash, len, iteration, indexing stay tuple's) other than a namedtuple's generated
    ones."""
    if t is tuple:
        return True
    if not isinstance(t, type) or not issubclass(t, tuple):
        return False
    base = namedtuple_base(t)
    for c in t.__mro__:
        if c in (tuple, object, typing.Generic) or not c.__flags__ & _HEAPTYPE or "n_sequence_fields" in vars(c):
            continue
        for name, value in vars(c).items():
            if not _is_dunder(name) or name in _DATA_DUNDERS:
                continue
            if c is base and (name == "__new__" or _stock_name(value) is not None):
                continue
            return False
    return True
