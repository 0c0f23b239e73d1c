"""normalize(): one canonical instruction list on every Python version.

Runs without torch too (`python -m pytest --noconftest tests/test_instructions.py`),
so bytecode normalization can be checked on an interpreter that has only `bytecode`."""
import dis
import os
import sys
import types

import pytest

try:
    from minidynamo.instructions import normalize
except ImportError:  # no torch here: load the module alone, through a stub package
    import importlib.util
    _pkg_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "minidynamo")
    _pkg = types.ModuleType("minidynamo")
    _pkg.__path__ = [_pkg_dir]
    sys.modules["minidynamo"] = _pkg
    _spec = importlib.util.spec_from_file_location("minidynamo.instructions",
                                                   os.path.join(_pkg_dir, "instructions.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["minidynamo.instructions"] = _mod
    _spec.loader.exec_module(_mod)
    normalize = _mod.normalize

PY = sys.version_info[:2]

# Opcodes normalize() rewrites away on every version.
GONE = {
    "CACHE", "EXTENDED_ARG", "RESUME", "NOP", "PRECALL", "COPY_FREE_VARS",
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP_BACKWARD_NO_INTERRUPT",
    "JUMP_NO_INTERRUPT", "LOAD_METHOD", "CALL_METHOD", "RETURN_CONST", "LOAD_FAST_CHECK",
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "DUP_TOP",
    "DUP_TOP_TWO", "ROT_TWO",
    # 3.14
    "NOT_TAKEN", "LOAD_FAST_BORROW", "LOAD_FAST_BORROW_LOAD_FAST_BORROW", "LOAD_SMALL_INT",
    "POP_ITER", "LOAD_SPECIAL", "LOAD_COMMON_CONSTANT",
}
# dis's superinstructions and the pair each one is (CPython's documentation of each opcode)
FUSED = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
         "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
         "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
         "LOAD_FAST_BORROW_LOAD_FAST_BORROW": ("LOAD_FAST", "LOAD_FAST")}
JUMPS = {"JUMP", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
         "POP_JUMP_IF_NOT_NONE", "FOR_ITER", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
         "SETUP_FINALLY", "SETUP_WITH", "SEND", "JUMP_IF_NOT_EXC_MATCH"}


def raw_opnames(fn):
    return {i.opname for i in dis.get_instructions(fn)}


# --- a corpus that covers the per-version differences -------------------------------------
def c_loops(xs, n):
    total = 0
    for x in xs:
        if x is None:
            continue
        total += x
    i = 0
    while i < n:
        i += 1
        if i > 5:
            break
    return total, i


def c_calls(x, f):
    y = x.sum(dim=1)
    z = f(x, *y, k=1, **{"m": 2})
    return x.view(-1).t(), len(z), max(1, 2)


def c_closure(a):
    b = 2

    def inner(c):
        nonlocal b
        b += c
        return a + b
    return inner(1)


def c_strings(x, name):
    return f"{name}:{x!r:>10}|{x:.2f}"


def c_compare(a, b):
    return a < b <= 3, a == b, a != b, a > b, a >= b, a is b, a is not b, a in b, a not in b


def c_ops(a, b):
    r = (a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a @ b, a << b, a >> b, a & b, a | b, a ^ b)
    a += b
    a -= b
    a *= b
    a /= b
    a //= b
    a %= b
    a **= b
    a @= b
    a <<= b
    a >>= b
    a &= b
    a |= b
    a ^= b
    return r, -a, +a, ~a, not a


def c_try(x):
    try:
        y = x + 1
    except ValueError as e:
        y = e
    finally:
        x = 0
    return y


def c_with(x, cm):
    with cm:
        x = x + 1
    return x


def c_comprehensions(xs):
    return [x * 2 for x in xs if x], {x: 1 for x in xs}, {x for x in xs}


def c_loop_try(xs):
    for x in xs:
        try:
            xs = x
        except Exception:
            pass
    return 1


def c_swap_unpack(a, b):
    a, b = b, a
    first, *rest = a
    (c, d), e = a, b
    return a, b, first, rest, c, d, e


def c_bool(a, b):
    return (a and b) or (not a), a if b else None


def c_subscr(x, i):
    x[i] = x[1:2]
    x[1:3] = x[::2]
    del x[0]
    return x[i], x[:i]


CORPUS = [c_loops, c_calls, c_closure, c_strings, c_compare, c_ops, c_try, c_with,
          c_comprehensions, c_loop_try, c_swap_unpack, c_bool, c_subscr]


def all_codes(fn):
    todo, out = [fn.__code__], []
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


@pytest.mark.parametrize("fn", CORPUS, ids=lambda f: f.__name__)
def test_canonical_names_and_valid_targets(fn):
    for code in all_codes(fn):
        insts = normalize(code)
        names = {i.opname for i in insts}
        assert not names & GONE, (code.co_name, names & GONE)
        assert not any(n.startswith(("POP_JUMP_FORWARD", "POP_JUMP_BACKWARD", "INPLACE_"))
                       or (n.startswith("BINARY_") and n not in ("BINARY_OP", "BINARY_SUBSCR", "BINARY_SLICE"))
                       for n in names), names
        for k, inst in enumerate(insts):
            if inst.target is not None:
                assert inst.opname in JUMPS | {"SETUP_ASYNC_WITH"}, inst
                assert 0 <= inst.target < len(insts), (code.co_name, k, inst, len(insts))
            elif inst.opname in JUMPS - {"SEND"}:
                raise AssertionError(f"{inst} has no target")


def test_normalize_is_cached_per_code_object():
    assert normalize(c_loops.__code__) is normalize(c_loops.__code__)


def test_binary_ops_named_as_in_operator_module():
    assert "BINARY_OP" in raw_opnames(c_ops) or "BINARY_ADD" in raw_opnames(c_ops)
    args = [i.arg for i in normalize(c_ops.__code__) if i.opname == "BINARY_OP"]
    names = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift",
             "rshift", "and_", "or_", "xor"]
    assert args == [(n, False) for n in names] + [(n, True) for n in names]


def test_compare_op_arg_is_the_symbol():
    args = [i.arg for i in normalize(c_compare.__code__) if i.opname == "COMPARE_OP"]
    assert args == ["<", "<=", "==", "!=", ">", ">="]
    ops = [(i.opname, i.arg) for i in normalize(c_compare.__code__) if i.opname in ("IS_OP", "CONTAINS_OP")]
    assert ops == [("IS_OP", 0), ("IS_OP", 1), ("CONTAINS_OP", 0), ("CONTAINS_OP", 1)]


def test_load_global_and_method_form():
    insts = normalize(c_calls.__code__)
    attrs = [i.arg for i in insts if i.opname == "LOAD_ATTR"]
    # x.view(-1) and .t() are method calls with positional arguments only; x.sum(dim=1)
    # is a method call from 3.11 on and a plain attribute load + CALL_FUNCTION_KW on 3.10.
    assert (True, "view") in attrs and (True, "t") in attrs
    assert ((False, "sum") if PY < (3, 11) else (True, "sum")) in attrs
    globals_ = [i.arg for i in insts if i.opname == "LOAD_GLOBAL"]
    assert all(isinstance(a, tuple) and len(a) == 2 for a in globals_)
    assert {a[1] for a in globals_} >= {"len", "max"}
    calls = {i.opname for i in insts} & {"CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_KW",
                                         "CALL_FUNCTION_EX"}
    expected = {"CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX"} if PY < (3, 11) else (
        {"CALL", "CALL_FUNCTION_EX", "CALL_KW"} if PY >= (3, 13) else {"CALL", "CALL_FUNCTION_EX"})
    assert calls == expected


def _local_accesses(insts):
    return [(o, a) for o, a in insts if o in ("LOAD_FAST", "STORE_FAST")]


def test_fused_local_ops_are_split():
    raw = list(dis.get_instructions(c_swap_unpack))
    if PY >= (3, 14):
        assert {"LOAD_FAST_BORROW_LOAD_FAST_BORROW", "STORE_FAST_STORE_FAST"} <= {i.opname for i in raw}
    elif PY >= (3, 13):
        assert {"LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"} <= {i.opname for i in raw}
    expected = []
    for i in raw:  # dis's own view, fused pairs expanded in order
        op = i.opname
        if op in ("LOAD_FAST_CHECK", "LOAD_FAST_BORROW"):
            op = "LOAD_FAST"
        if op in FUSED:
            first, second = FUSED[op]
            expected += [(first, i.argval[0]), (second, i.argval[1])]
        else:
            expected.append((op, i.argval))
    got = [(i.opname, i.arg) for i in normalize(c_swap_unpack.__code__)]
    assert _local_accesses(got) == _local_accesses(expected)
    assert _local_accesses(got)[:4] == [("LOAD_FAST", "b"), ("LOAD_FAST", "a")] + _local_accesses(got)[2:4]


def test_stack_shuffles_are_copy_and_swap():
    raw = raw_opnames(c_compare)
    assert ("DUP_TOP" in raw) == (PY < (3, 11))
    names = {i.opname for i in normalize(c_compare.__code__)}
    assert "COPY" in names and "SWAP" in names or "ROT_THREE" in names


def _loop_exit_targets(fn):
    insts = normalize(fn.__code__)
    return insts, [i.target for i in insts if i.opname == "FOR_ITER"]


def test_for_iter_exhaustion_target_is_after_the_loop():
    def f(xs):
        for x in xs:
            pass
        return 7

    insts, targets = _loop_exit_targets(f)
    assert len(targets) == 1
    after = insts[targets[0]]
    assert after.opname == "LOAD_CONST" and after.arg == 7, insts
    if PY >= (3, 12):
        assert "END_FOR" in raw_opnames(f)


def test_for_iter_target_in_nested_loops():
    def f(xs):
        n = 0
        for x in xs:
            for y in xs:
                n += 1
            n -= 100
        return n

    insts, targets = _loop_exit_targets(f)
    inner_exit = insts[targets[1]]
    outer_exit = insts[targets[0]]
    assert (inner_exit.opname, inner_exit.arg) == ("LOAD_FAST", "n")
    assert insts[targets[1] + 1].opname == "LOAD_CONST" and insts[targets[1] + 1].arg == 100
    assert (outer_exit.opname, outer_exit.arg) == ("LOAD_FAST", "n")
    assert insts[targets[0] + 1].opname == "RETURN_VALUE"


def test_backward_jump_targets_loop_head_with_try_inside():
    insts = normalize(c_loop_try.__code__)
    head = next(k for k, i in enumerate(insts) if i.opname == "FOR_ITER")
    backs = [i.target for k, i in enumerate(insts) if i.opname == "JUMP" and i.target <= k]
    assert backs and all(b == head for b in backs), insts


def test_try_is_marked():
    names = [i.opname for i in normalize(c_try.__code__)]
    if PY >= (3, 11):
        assert "SETUP_EXCEPT" in names
        # The mark comes before the first instruction of the protected body.
        k = names.index("SETUP_EXCEPT")
        assert names[k + 1:k + 3] == ["LOAD_FAST", "LOAD_CONST"]
    else:
        assert "SETUP_FINALLY" in names


def test_comprehension_cleanup_is_not_a_try():
    for code in all_codes(c_comprehensions):
        names = {i.opname for i in normalize(code)}
        assert "SETUP_EXCEPT" not in names and "SETUP_FINALLY" not in names, code.co_name
    if PY >= (3, 12):
        assert "LOAD_FAST_AND_CLEAR" in raw_opnames(c_comprehensions)


def test_with_is_visible():
    names = {i.opname for i in normalize(c_with.__code__)}
    assert names & {"SETUP_WITH", "BEFORE_WITH"}


def test_extended_arg_is_folded():
    n = 300
    src = "def big(x):\n" + "".join(f"    v{i} = {i} * 1.5\n" for i in range(n)) + \
          "    if x:\n        return v299\n    return v0\n"
    ns = {}
    exec(compile(src, "<big>", "exec"), ns)
    raw = [i.opname for i in dis.get_instructions(ns["big"])]
    assert "EXTENDED_ARG" in raw
    insts = normalize(ns["big"].__code__)
    assert "EXTENDED_ARG" not in {i.opname for i in insts}
    consts = [i.arg for i in insts if i.opname == "LOAD_CONST" and isinstance(i.arg, float)]
    assert consts == [i * 1.5 for i in range(n)]  # folded by the compiler: 300 constants
    stores = [i.arg for i in insts if i.opname == "STORE_FAST"]
    assert stores == [f"v{i}" for i in range(n)]
    jump = next(i for i in insts if i.opname.startswith("POP_JUMP_IF"))
    assert 0 <= jump.target < len(insts)


def test_long_forward_jump_with_extended_arg():
    body = "".join(f"        y = y + {i}\n" for i in range(200))
    src = f"def long_jump(x):\n    y = 0\n    if x:\n{body}    return y\n"
    ns = {}
    exec(compile(src, "<long>", "exec"), ns)
    insts = normalize(ns["long_jump"].__code__)
    jump = next(i for i in insts if i.opname.startswith("POP_JUMP_IF"))
    target = insts[jump.target]
    assert (target.opname, target.arg) == ("LOAD_FAST", "y")
    assert insts[jump.target + 1].opname == "RETURN_VALUE"


def test_return_const_is_split():
    def f():
        return None

    insts = normalize(f.__code__)
    assert [i.opname for i in insts] == ["LOAD_CONST", "RETURN_VALUE"]


def test_cells_by_name():
    insts = normalize(c_closure.__code__)
    derefs = {i.arg for i in insts if i.opname in ("LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE")}
    assert "b" in derefs
    inner = next(k for k in c_closure.__code__.co_consts if isinstance(k, types.CodeType))
    inner_ops = [(i.opname, i.arg) for i in normalize(inner)]
    assert ("STORE_DEREF", "b") in inner_ops and ("LOAD_DEREF", "a") in inner_ops


def test_line_numbers_kept():
    insts = normalize(c_loops.__code__)
    lines = {i.lineno for i in insts if i.lineno is not None}
    first = c_loops.__code__.co_firstlineno
    assert first + 1 in lines and first + 11 in lines


def test_prologue_make_cell_dropped_comprehension_make_cell_kept():
    def f(x):
        return [lambda: k + x for k in range(2)]

    insts = normalize(f.__code__)
    cells = [i.arg for i in insts if i.opname == "MAKE_CELL"]
    # 3.12+ inlines the comprehension: its variable gets a fresh cell on every run.
    assert cells == (["k"] if PY >= (3, 12) else [])
    if PY >= (3, 12):
        k = next(n for n, i in enumerate(insts) if i.opname == "MAKE_CELL")
        assert (insts[k - 1].opname, insts[k - 1].arg) == ("LOAD_FAST_AND_CLEAR", "k")
