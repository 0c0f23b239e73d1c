"""The attribute-reading builtins in a trace: `getattr` (with a default) and `hasattr`
with a constant name, as the attribute reads they stand for (`setattr`, `delattr`: the
writes, object_builtins.py). Each returns None where it is not modelled (builtins.py then
declines the call)."""
from __future__ import annotations

from ..exc import Unsupported
from .constant import ConstantVariable


def getattr_call(tx, args, kwargs):
    if len(args) not in (2, 3) or not args[1].is_python_constant():
        return None
    name = args[1].as_python_constant()
    if len(args) == 3:
        try:
            return args[0].var_getattr(tx, name)
        except Unsupported as e:
            if e.raises(AttributeError):
                return args[2]
            raise
    return args[0].var_getattr(tx, name)


def hasattr_call(tx, args, kwargs):
    if len(args) != 2 or not args[1].is_python_constant():
        return None
    asked = getattr(args[0], "has_attr", None)  # answered and guarded without reading the value
    answer = asked(tx, args[1].as_python_constant()) if asked is not None else None
    if answer is not None:
        return ConstantVariable(answer)
    try:
        args[0].var_getattr(tx, args[1].as_python_constant())
        return ConstantVariable(True)
    except Unsupported as e:
        if e.raises(AttributeError):
            return ConstantVariable(False)
        raise
