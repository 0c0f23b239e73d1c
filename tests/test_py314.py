"""The bytecode Python 3.14 changed, traced like eager: the opcodes it adds (LOAD_FAST_BORROW
and its superinstruction, LOAD_SMALL_INT, NOT_TAKEN, POP_ITER, LOAD_SPECIAL,
LOAD_COMMON_CONSTANT), BINARY_OP's subscript, CALL_FUNCTION_EX without an arg, PEP 649's
__annotate__ functions, t-strings. Every test runs on every Python (the same source is
other bytecode there); on 3.14 each also asserts that its opcodes really appear."""
import contextlib
import itertools
import types

import pytest
import torch
import minidynamo
from helpers import PY, CountingBackend, assert_uses, check

PY314 = PY >= (3, 14)


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 3)), generator=g)


def uses_314(fn, *ops, nested=True):
    """On 3.14: `fn` really uses each of `ops` (an opname or a tuple of alternatives)."""
    if PY314:
        assert_uses(fn, *ops, nested=nested)


def nested_code_names(fn) -> set:
    todo, names = [fn.__code__], set()
    while todo:
        code = todo.pop()
        names.add(code.co_name)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


# --- locals and small ints ------------------------------------------------------------------
def small_ints_and_borrowed_locals(x, y):
    a = x * 2 + y * 3
    b, c = y, x  # STORE_FAST_STORE_FAST over LOAD_FAST_BORROW_LOAD_FAST_BORROW
    return a - 1, x + y, a * 255, -5, b - c, (x, y)[1]


def test_small_ints_and_borrowed_locals():
    uses_314(small_ints_and_borrowed_locals, "LOAD_SMALL_INT", "LOAD_FAST_BORROW",
             "LOAD_FAST_BORROW_LOAD_FAST_BORROW")
    check(small_ints_and_borrowed_locals, (t(), t(seed=1)), kind="graph", graphs=1)


# --- conditional jumps: NOT_TAKEN after each ----------------------------------------------------
def branches(x, flag, n):
    if flag:
        x = x + 1
    else:
        x = x - 1
    if n is None:
        return x
    while n > 0:
        x = x * 2
        n -= 1
    return x if n == 0 else -x


@pytest.mark.parametrize("flag,n", [(True, 2), (False, None), (0, 0)])
def test_branches_both_ways(flag, n):
    uses_314(branches, "NOT_TAKEN", ("POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE"))
    check(branches, (t(), flag, n), kind="graph", graphs=1)


# --- for loops: POP_ITER after the loop and on break ----------------------------------------------
def loops(x, xs):
    total = x
    for v in xs:
        total = total + v
    for i, v in enumerate(xs):
        if i == 1:
            break
        total = total * v
    for v in reversed(xs):
        if v is None:
            break
    else:
        total = total - 1
    return total, [v * 2 for v in xs], {k: v for k, v in zip("ab", xs)}


def test_for_loops_pop_the_iterator():
    uses_314(loops, "POP_ITER", "END_FOR")
    check(loops, (t(), [1.5, 2.0, 3.0]), kind="graph", graphs=1)


# --- subscripts: BINARY_OP [] (BINARY_SUBSCR up to 3.13) ----------------------------------------
def subscripts(x, d, xs, lo, hi):
    row = x[1]
    part = x[1:3]  # a constant slice: LOAD_CONST slice(1, 3) on 3.14
    window = xs[lo:hi]  # BINARY_SLICE
    xs[lo:hi] = [7, 8]  # STORE_SLICE
    return row, part, d["k"] * x[0, 2], window, xs, (x, d)[0][-1], x[..., lo]


def test_subscripts():
    uses_314(subscripts, "BINARY_OP []", "LOAD_CONST slice", "BINARY_SLICE", "STORE_SLICE")
    check(subscripts, (t(), {"k": 2.5}, [1, 2, 3, 4], 1, 3), kind="graph", graphs=1)


def subscript_of_a_missing_key(d):
    return d["missing"]


def test_subscript_that_raises_runs_eagerly():
    uses_314(subscript_of_a_missing_key, "BINARY_OP []")
    check(subscript_of_a_missing_key, ({"k": t()},), kind="eager")


# --- calls with *args / **kwargs: CALL_FUNCTION_EX, its kwargs slot NULL or a dict --------------
def _combine(a, b, scale=1.0, *, shift=0.0):
    return a * scale + b + shift


def star_calls(x, y, args, kw):
    return (_combine(*args), _combine(*args, **kw), _combine(x, *[y], shift=2.0),
            torch.cat(*[[x, y]]), max(*[1, 5, 3]), dict(**kw, extra=1))


def test_star_calls():
    uses_314(star_calls, "CALL_FUNCTION_EX", "PUSH_NULL", "DICT_MERGE")
    a, b = t(), t(seed=1)
    check(star_calls, (a, b, (a, b), {"scale": 0.5, "shift": 1.0}), kind="graph", graphs=1)


def star_calls_that_break(x, parts, kw):
    y = x * 2
    print(*parts)  # runs natively: CALL_FUNCTION_EX with an empty kwargs slot
    z = y + 1
    print(*parts, **kw)  # and with a kwargs dict
    return z * 3


def test_star_calls_that_break():
    uses_314(star_calls_that_break, "CALL_FUNCTION_EX")
    check(star_calls_that_break, (t(), ("a", 1), {"sep": "-"}), kind="break", graphs=3)


# --- with statements: LOAD_SPECIAL (BEFORE_WITH up to 3.13) ----------------------------------
class Scaled:
    """A context manager in Python: its __enter__ and __exit__ are inlined."""

    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k

    def __exit__(self, *exc):
        return None


SCALED = Scaled(3.0)


def with_statements(x):
    with torch.no_grad():
        a = x * 2
    with SCALED as k:
        b = x * k
    with contextlib.nullcontext(x) as same:
        with torch.enable_grad():
            c = same + 1
    return a, b, c, a.requires_grad, c.requires_grad


def test_with_statements():
    uses_314(with_statements, "LOAD_SPECIAL", "WITH_EXCEPT_START", nested=False)
    check(with_statements, (t().requires_grad_(),), kind="graph", graphs=1)


def with_and_a_break_inside(x):
    with torch.no_grad():
        y = x * 2
        print("inside")  # a graph break inside the region: the resume function is inside it too
        z = y + x
    return z, z.requires_grad, (x * 3).requires_grad


def test_with_and_a_break_inside():
    uses_314(with_and_a_break_inside, "LOAD_SPECIAL", nested=False)
    # The region is carried across the break (3.10: the block is put back on the block stack).
    check(with_and_a_break_inside, (t().requires_grad_(),), kind="break")


# --- LOAD_COMMON_CONSTANT: builtins all/any/tuple over a generator, AssertionError ---------------
def common_constants(x, xs):
    return (all(v > 0 for v in xs), any(v > 3 for v in xs), tuple(v * x for v in xs),
            all(v for v in []), any(()))


def test_all_any_tuple_of_generators():
    uses_314(common_constants, "LOAD_COMMON_CONSTANT")
    check(common_constants, (t(), [1, 2, 5]), kind="graph", graphs=1)


_SHADOWED = """
def shadowed(xs):
    return all(v > 0 for v in xs), tuple(v for v in xs)
"""


def test_a_shadowed_all_is_called():
    # 3.14 inlines all(<genexpr>) only when the name `all` is the builtin: here it is not.
    ns = {"all": lambda items: ("mine", list(items)), "tuple": lambda items: sorted(items)}
    exec(compile(_SHADOWED, "<shadowed>", "exec"), ns)
    uses_314(ns["shadowed"], "LOAD_COMMON_CONSTANT")
    check(ns["shadowed"], ([3, 1, 2],), kind="constant")


# Compiled apart: pytest rewrites the assert statements of test modules.
_ASSERTS = """
def asserts(x, n):
    assert n > 0, "n must be positive"
    return x * n
"""


@pytest.mark.parametrize("n,kind", [(2, "graph"), (-1, "eager")])
def test_assert(n, kind):
    ns = {}
    exec(compile(_ASSERTS, "<asserts>", "exec"), ns)
    uses_314(ns["asserts"], "LOAD_COMMON_CONSTANT")
    check(ns["asserts"], (t(), n), kind=kind)


# --- PEP 649: nested functions with annotations get an __annotate__ function ------------------
def annotated_inner(x):
    scale = 3

    def inner(v: torch.Tensor, k: int = scale) -> torch.Tensor:
        return v * k

    return inner(x), inner(x, 2)


def annotation_of_a_local(x):
    kind = torch.Tensor  # read by inner's lazily evaluated annotations: a cell on 3.14

    def inner(v: kind) -> kind:
        return v + 1

    return inner(x), isinstance(x, kind)


@pytest.mark.parametrize("fn", [annotated_inner, annotation_of_a_local], ids=lambda f: f.__name__)
def test_nested_functions_with_annotations(fn):
    if PY314:
        assert "__annotate__" in nested_code_names(fn)
    uses_314(fn, "SET_FUNCTION_ATTRIBUTE")
    check(fn, (t(),), kind="graph", graphs=1)


# --- t-strings (PEP 750) ----------------------------------------------------------------------
@pytest.mark.skipif(not PY314, reason="t-strings are 3.14+")
def test_template_strings_run_eagerly():
    ns = {}
    src = "def tstring(x, n):\n    tpl = t'{n} rows'\n    return tpl.strings, tpl.values, x + n\n"
    exec(compile(src, "<tstring>", "exec"), ns)
    assert_uses(ns["tstring"], "BUILD_TEMPLATE", "BUILD_INTERPOLATION")
    check(ns["tstring"], (t(), 3), kind="eager", reason="opcode")


# --- resume functions: locals pytest's assert rewriting names are renamed --------------------
def _noisy(v):
    print("noisy", v.shape)
    return 1


def rewritten_assert_with_a_break(x, extra):
    y = x * 2
    # pytest rewrites this: @py_assert locals, live across the break, read by the
    # failure message's code (LOAD_FAST_BORROW on 3.14)
    assert len([y]) == _noisy(y) + extra
    return y + 1


@pytest.mark.parametrize("extra", [0, 1], ids=["holds", "fails"])
def test_rewritten_assert_locals_across_a_break(extra):
    fn = rewritten_assert_with_a_break
    assert [n for n in fn.__code__.co_varnames if not n.isidentifier()], "pytest did not rewrite the assert"
    uses_314(fn, "LOAD_FAST_BORROW")
    check(fn, (t(), extra), kind="break")


# --- itertools.tee of a tee: 3.14 copies it for the first result too ----------------------------
def tee_of_a_tee(x):
    a, b = itertools.tee([x, x + 1, x + 2])
    next(a)
    c, = itertools.tee(a, 1)
    return list(c), list(a), list(b)


def test_tee_of_a_tee():
    check(tee_of_a_tee, (t(),), kind="graph", graphs=1)


# --- inspect.signature of an annotated function: 3.14 evaluates the annotations ----------------
def annotated_helper(x: torch.Tensor, scale: float = 2.0, *, bias: "int | None" = None) -> torch.Tensor:
    return x * scale


def count_parameters(x):
    import inspect
    n = len(inspect.signature(annotated_helper).parameters)  # transformers' apply_chunking_to_forward
    return x + n


def annotation_with_a_missing_name(x):
    import inspect

    def inner(y: MissingName):  # noqa: F821 - eager raises NameError at signature() on 3.14
        return y
    return x, len(inspect.signature(inner).parameters)


def printed_annotation(x):
    import inspect

    def inner(y: print("evaluated") or int):
        return y
    return x + len(inspect.signature(inner).parameters)


class Chunked:
    scale = 3

    def forward_chunk(self, x: torch.Tensor, scale: "int" = 1) -> torch.Tensor:
        return x * scale


def count_method_parameters(x):
    import inspect
    # a method's annotations read the class's namespace first (LOAD_FROM_DICT_OR_GLOBALS on 3.14)
    return x + len(inspect.signature(Chunked().forward_chunk).parameters)


def test_signature_of_an_annotated_function_is_one_graph():
    check(count_parameters, (t(),), kind="graph", graphs=1)


def test_signature_of_an_annotated_method_is_one_graph():
    if PY314:
        uses_314(Chunked.forward_chunk.__annotate__, "LOAD_FROM_DICT_OR_GLOBALS", nested=False)
    check(count_method_parameters, (t(),), kind="graph", graphs=1)


def test_signature_whose_annotations_raise():
    # 3.14: evaluated when asked for, NameError from signature(); before: when the function
    # is made, the same NameError there
    check(annotation_with_a_missing_name, (t(),), kind="eager" if not PY314 else "break")


def test_signature_whose_annotations_print():
    # print() inside the annotations is not traced: it breaks there, printing as eager does
    check(printed_annotation, (t(),), kind="break", fullgraph_check=False)


def returns_an_annotated_function(x):
    def inner(y: torch.Tensor, *, k: "int" = 1) -> torch.Tensor:
        return y * k
    return x * 2, inner


def test_a_function_made_in_the_trace_keeps_its_annotations():
    # the function made for real after the graph has the annotations eager's has
    backend = CountingBackend()
    opt = minidynamo.optimize(backend=backend)(returns_an_annotated_function)
    _, want = returns_an_annotated_function(t())
    for _ in range(2):
        _, got = opt(t())
        assert got.__annotations__ == want.__annotations__
        assert got(t(), k=3).equal(want(t(), k=3))
    assert backend.calls == 1
