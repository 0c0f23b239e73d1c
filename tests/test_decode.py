"""decode.items(code) is the `bytecode` library's item list, item for item (positions,
names, arguments, line numbers, labels and protected ranges), on thousands of code objects:
every function this process has loaded and a set made to stress the decoder (EXTENDED_ARG,
long jumps, nested try/with/async, match, f-strings, closures, super())."""
import dis
import gc
import sys
import textwrap
import types

import bytecode as bc
import pytest

from minidynamo import decode

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 decodes through the library")

MAX_CODES = 6000

MANY_CONSTS = ("def many_consts(x):\n    total = 0\n"
               + "".join(f"    total += x * {i}.5 + {i}\n    if total > {i}: total -= {i}\n" for i in range(300))
               + "    return total\n")
STRESS = MANY_CONSTS + textwrap.dedent('''
    import contextlib

    def deep(a, *args, k=1, **kw):
        cell = [a]
        def inner(b):
            nonlocal cell
            cell = cell + [b]
            return [c + b for c in cell if c]
        try:
            with contextlib.nullcontext() as m, open(__file__) as f:
                for i in range(3):
                    try:
                        if i == 1:
                            continue
                        raise ValueError(i)
                    except (ValueError, TypeError) as e:
                        cell.append(e)
                    except Exception:
                        raise
                    finally:
                        cell.append(f"{i!r:>4}{i!s}{i:{k}}")
        except* OSError as eg:
            cell.append(eg)
        match args:
            case [x, *rest] if x > 0:
                cell.append(rest)
            case {"a": y, **others}:
                cell.append(others)
            case str() | bytes():
                pass
        return inner, {k: v for k, v in kw.items()}, (lambda q=a: q)()

    async def agen(xs):
        async with contextlib.AsyncExitStack() as stack:
            async for x in xs:
                yield await x
        return

    class Child(dict):
        def method(self):
            return super().keys(), super().__class__, __class__

    def gen():
        x = yield 1
        yield from range(x)
        return [i for i in range(x) if i] if x else None
    ''')


def _stress_codes():
    return [compile(STRESS, "<stress>", "exec")]


def _all_codes() -> list:
    seen, todo = {}, _stress_codes()
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType:
            todo.append(obj.__code__)
    while todo and len(seen) < MAX_CODES:
        code = todo.pop()
        if id(code) in seen:
            continue
        seen[id(code)] = code
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return list(seen.values())


def _same_arg(a, b, pos_a, pos_b) -> bool:
    if isinstance(a, decode.LABEL) or isinstance(b, decode.LABEL):
        return isinstance(a, decode.LABEL) and isinstance(b, decode.LABEL) and pos_a[id(a)] == pos_b[id(b)]
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_arg(x, y, pos_a, pos_b) for x, y in zip(a, b))
    return type(a) is type(b) and (a is b or a == b)


def _compare(code) -> str | None:
    """None when both lists agree, else where they differ first."""
    mine = decode.items(code)
    theirs = list(bc.Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    if len(mine) != len(theirs):
        return f"{len(mine)} items, library {len(theirs)}"
    pos_a = {id(x): i for i, x in enumerate(mine)}
    pos_b = {id(x): i for i, x in enumerate(theirs)}
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if isinstance(b, bc.Label):
            ok = isinstance(a, decode.Label)
        elif isinstance(b, bc.TryBegin):
            ok = (isinstance(a, decode.TryBegin) and pos_a[id(a.target)] == pos_b[id(b.target)]
                  and a.push_lasti == b.push_lasti and a.stack_depth == b.stack_depth)
        elif isinstance(b, bc.TryEnd):
            ok = isinstance(a, decode.TryEnd) and pos_a[id(a.entry)] == pos_b[id(b.entry)]
        else:
            ok = (isinstance(a, decode.Instr) and a.name == b.name and a.lineno == b.lineno
                  and _same_arg(a.arg, b.arg, pos_a, pos_b))
        if not ok:
            return f"item {i}: {a!r} vs library {b!r}"
    return None


def test_items_match_the_library():
    codes = _all_codes()
    assert len(codes) > 1000
    bad = []
    for code in codes:
        try:
            why = _compare(code)
        except Exception as e:  # noqa: BLE001 - report it with the code object
            why = f"{type(e).__name__}: {e}"
        if why:
            bad.append(f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno}): {why}")
    assert not bad, f"{len(bad)} of {len(codes)} differ:\n" + "\n".join(bad[:10])


def test_extended_args_and_long_jumps_are_covered():
    code = next(c for c in _stress_codes()[0].co_consts if getattr(c, "co_name", "") == "many_consts")
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(code))
    assert _compare(code) is None
