"""The `match` statement's instructions (3.10+): what a pattern asks of its subject —
its length, whether its class is a mapping or a sequence, the values of a mapping's keys,
a class pattern's attributes — asked of the subject's tracker as the builtins ask it
(`len`, `isinstance`, attribute reads), so a pattern guards what eager's match reads."""
from __future__ import annotations

from collections import OrderedDict, defaultdict

from ..._compat import PY311
from ...exc import Unsupported, unsupported
from ...variables.builtins import BuiltinVariable
from ...variables.constant import ConstantVariable
from ...variables.dicts import DictVariable
from ...variables.lists import TupleVariable

# CPython tests type flags, not isinstance: a class is a mapping or sequence for `match`
# when it or a base sets the flag (dict, list, tuple, range, deque, collections.abc's
# registrations); str, bytes and bytearray never are.
_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
# Set on int, str, list, dict... and inherited: one positional sub-pattern is the subject.
_TPFLAGS_MATCH_SELF = 1 << 22


def _flag_of(tx, subject, flag: int) -> ConstantVariable:
    return ConstantVariable(bool(_class_of(tx, subject).__flags__ & flag))


def _class_of(tx, subject) -> type:
    return BuiltinVariable(type).call_function(tx, [subject], {}).as_python_constant()


def _plain_mapping(v) -> bool:
    """A dict whose get() and items are dict's own (`contains` then `getitem` read it as
    CPython's `get(key, dummy)` does)."""
    return type(v) is DictVariable and v.dict_type in (dict, OrderedDict, defaultdict)


def _attribute(tx, subject, name: str):
    """`getattr(subject, name)`, or None where it raises AttributeError (no match)."""
    try:
        return subject.var_getattr(tx, name)
    except Unsupported as e:
        if e.raises(AttributeError):
            return None
        raise


class MatchOps:
    def GET_LEN(self, inst):
        self.push(BuiltinVariable(len).call_function(self, [self.stack[-1]], {}))

    def MATCH_MAPPING(self, inst):
        self.push(_flag_of(self, self.stack[-1], _TPFLAGS_MAPPING))

    def MATCH_SEQUENCE(self, inst):
        self.push(_flag_of(self, self.stack[-1], _TPFLAGS_SEQUENCE))

    def MATCH_KEYS(self, inst):
        """Keys (a constant tuple) looked up in the subject: the tuple of their values, or
        None when one is missing (3.10 pushes a bool after it as well)."""
        keys, subject = self.stack[-1], self.stack[-2]
        if not _plain_mapping(subject):
            unsupported("opcode", f"a mapping pattern over {subject.describe()} (CPython calls its get())")
        values = []
        for key in keys.as_python_constant():
            key_var = ConstantVariable(key)
            if not self.contains(subject, key_var).as_python_constant():
                values = None
                break
            values.append(self.getitem(subject, key_var))
        found = TupleVariable(values) if values is not None else ConstantVariable(None)
        self.push(found)
        if not PY311:
            self.push(ConstantVariable(values is not None))

    def COPY_DICT_WITHOUT_KEYS(self, inst):  # 3.10: `**rest` of a mapping pattern
        keys, subject = self.stack[-1], self.stack[-2]
        if not _plain_mapping(subject):
            unsupported("opcode", f"`**rest` of a mapping pattern over {subject.describe()}")
        rest = DictVariable(dict(subject.items))
        for key in keys.as_python_constant():
            rest.items.pop(key, None)
        self.stack[-1] = rest

    def MATCH_CLASS(self, inst):
        """`case Cls(p0, p1, kw=p2)`: the subject is an instance of Cls and has the
        attributes (`Cls.__match_args__` names the positional ones): their values as a
        tuple, else None (3.10: the tuple or the subject, then a bool)."""
        names, cls_var, subject = self.pop(), self.pop(), self.pop()
        count = inst.arg
        cls = cls_var.as_python_constant() if cls_var.is_python_constant() else None
        if not isinstance(cls, type):
            unsupported("opcode", f"a class pattern over {cls_var.describe()}")
        values = None
        if BuiltinVariable(isinstance).call_function(self, [subject, cls_var], {}).as_python_constant():
            values = self._class_pattern_values(subject, cls_var, cls, count, names.as_python_constant())
        if PY311:
            self.push(TupleVariable(values) if values is not None else ConstantVariable(None))
        else:
            self.push(TupleVariable(values) if values is not None else subject)
            self.push(ConstantVariable(values is not None))

    def _class_pattern_values(self, subject, cls_var, cls, count: int, keywords: tuple):
        """CPython's match_class: `__match_args__` names the positional attributes (read
        from the class, guarded as read); without it, a builtin like int (its subclasses
        too) matches one positional sub-pattern against the subject itself."""
        match_args, match_self = (), False
        if count:
            found = _attribute(self, cls_var, "__match_args__")
            if found is None:
                match_self = bool(cls.__flags__ & _TPFLAGS_MATCH_SELF)
            else:
                match_args = found.as_python_constant() if found.is_python_constant() else None
                if type(match_args) is not tuple:
                    unsupported("exceptions", f"TypeError: {cls.__name__}.__match_args__ must be a tuple",
                                raised=TypeError)
            allowed = 1 if match_self else len(match_args)
            if count > allowed:
                unsupported("exceptions", f"TypeError: {cls.__name__}() accepts {allowed} positional "
                                          f"sub-pattern{'' if allowed == 1 else 's'} ({count} given)", raised=TypeError)
        positional = [None] if match_self else list(match_args[:count])
        values = []
        for name in (*positional, *keywords):
            value = subject if name is None else _attribute(self, subject, name)
            if value is None:
                return None
            values.append(value)
        return values
