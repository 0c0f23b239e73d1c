"""Calls the interpreter inlines: plain functions, closures, nested defs, lambdas,
functools.partial, methods of plain objects, *args/**kwargs, defaults, keyword-only."""
import functools

import types

import pytest
import torch

from helpers import Args, CountingBackend, assert_uses, by_version, check, same_outcome

import minidynamo


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


SCALE = 3.0
W = torch.randn(3)
OFFSETS = (1, 2)


def helper(x, k=2):
    return x * k + SCALE


def helper_kwonly(x, *, alpha=1.0, beta):
    return x * alpha + beta


def varargs_helper(*args, **kwargs):
    total = args[0]
    for a in args[1:]:
        total = total + a
    for k in sorted(kwargs):
        total = total * kwargs[k]
    return total, len(args), tuple(sorted(kwargs))


MODULE_PARTIAL = functools.partial(torch.add, alpha=2)
MODULE_PARTIAL_USER = functools.partial(helper, k=5)


# --- locals, globals, builtins ----------------------------------------------------------
def test_globals_and_builtins():
    def f(x):
        return x * SCALE + OFFSETS[1], len(OFFSETS), abs(-2), isinstance(x, torch.Tensor)

    assert_uses(f, "LOAD_GLOBAL", by_version(py310=("LOAD_FAST",), py314=("LOAD_FAST_BORROW",)))
    check(f, t(), kind="graph")


def test_call_plain_function_with_defaults():
    def f(x):
        return helper(x), helper(x, 3), helper(x, k=4), helper(k=1, x=x)

    info = check(f, t(), kind="graph")
    assert len(info.backend.graphs) == 1


def test_keyword_only_arguments():
    def f(x):
        return helper_kwonly(x, beta=1), helper_kwonly(x, alpha=2.0, beta=x)

    check(f, t(), kind="graph")


def test_missing_keyword_only_argument_raises_like_eager():
    def f(x):
        return helper_kwonly(x)

    # The call that raises breaks the graph: it runs natively and raises eager's TypeError.
    check(f, t(), kind="break", reason="exceptions")


def test_too_many_positional_raises_like_eager():
    def f(x):
        return helper(x, 1, 2)

    check(f, t(), kind="break", reason="exceptions")


def test_star_args_and_kwargs_at_definition():
    def f(x, *rest, scale=1, **opts):
        out = x * scale
        for r in rest:
            out = out + r
        return out, len(rest), sorted(opts), opts.get("tag", "none")

    check(f, Args(t(), t(), t(), scale=2, tag="a"), Args(t()), kind="graph", same_entry=False)


def test_star_args_at_call_site():
    def f(x, y):
        args = (x, y)
        kw = {"z": 2, "w": 3}
        return varargs_helper(*args), varargs_helper(*args, **kw), varargs_helper(x, *[y, y], k=1, **{"m": 2})

    assert_uses(f, "CALL_FUNCTION_EX", by_version(py310=("DICT_MERGE",), py311=("DICT_MERGE",)))
    check(f, (t(), t()), kind="graph")


def test_star_call_into_torch():
    def f(x, dims):
        return x.permute(*dims), torch.cat([*(x, x)], **{"dim": 0})

    check(f, (t(2, 3, 4), (2, 0, 1)), kind="graph")


def test_duplicate_keyword_raises_like_eager():
    def f(x):
        return helper(x, **{"k": 1}, **{"k": 2})

    check(f, t(), kind="eager", reason="exceptions")


# --- closures -------------------------------------------------------------------------
def make_scaler(alpha):
    def scale(x):
        return x * alpha
    return scale


def test_closure_of_outside_function():
    scale3 = make_scaler(3.0)

    def f(x):
        return scale3(x)

    assert_uses(scale3, "LOAD_DEREF")
    check(f, t(), kind="graph")


def test_optimize_a_closure_directly():
    w = t()
    n = 2

    def f(x):
        return x * w + n

    assert_uses(f, "LOAD_DEREF")
    check(f, t(), kind="graph")


def test_inner_function_with_cells_and_nonlocal():
    def f(x):
        count = 0
        acc = x

        def bump(v):
            nonlocal count, acc
            count += 1
            acc = acc + v
            return count

        bump(1)
        bump(x)
        return acc, count

    assert_uses(f, "STORE_DEREF", by_version(py310=("LOAD_CLOSURE",), py313=("LOAD_FAST", "LOAD_CLOSURE"),
                                         py314=("LOAD_FAST_BORROW", "LOAD_FAST")),
                by_version(py310=("MAKE_FUNCTION",)))
    check(f, t(), kind="graph")


def test_argument_that_is_also_a_cell():
    def f(x, k):
        def g(y):
            return y * k
        k = k + 1
        return g(x), k

    check(f, (t(), 2), kind="graph")


def test_nested_closures_three_levels():
    def f(x):
        a = 1

        def g():
            b = 2

            def h(y):
                return y + a + b
            return h(x)
        return g()

    check(f, t(), kind="graph")


def test_returned_closure_is_made_for_real():
    # The closure outlives the trace: its cell is made once for real per call (a new
    # closure over each call's argument), not the trace's and not eagerly as a whole call.
    def f(x):
        def g():
            return x
        return g

    info = check(f, t(), kind="constant")
    a, b = t(), t()
    ga, gb = info.opt(a), info.opt(b)
    assert ga is not gb and ga() is a and gb() is b
    assert ga.__closure__[0].cell_contents is a
    assert [e.kind for e in info.opt.cache_entries()] == ["constant"]


def test_nested_function_defaults_and_kwdefaults():
    def f(x):
        def g(y, k=2, *, m=3):
            return y * k + m
        return g(x), g(x, 4), g(x, m=0)

    assert_uses(f, by_version(py310=("MAKE_FUNCTION",), py313=("SET_FUNCTION_ATTRIBUTE",)))
    check(f, t(), kind="graph")


def test_free_variable_before_assignment_raises_like_eager():
    def f(x):
        def g():
            return late
        out = g()
        late = 1
        return out

    # The NameError breaks the frame; the cell goes to the resume function, which raises it.
    check(f, t(), kind="break", reason="exceptions")


# --- lambdas -------------------------------------------------------------------------
def test_lambdas():
    def f(x):
        sq = lambda v: v * v  # noqa: E731
        add = lambda a, b=1: a + b  # noqa: E731
        return sq(x), add(x), add(x, x), (lambda: 7)(), sorted([3, 1, 2], key=lambda v: -v)

    # sorted(key=<lambda>) is traced: the key is called on each item, the order is CPython's sort
    check(f, t(), kind="graph")


def test_lambdas_without_c_callbacks():
    def f(x):
        sq = lambda v: v * v  # noqa: E731
        add = lambda a, b=1: a + b  # noqa: E731
        return sq(x), add(x), add(x, x), (lambda: 7)()

    check(f, t(), kind="graph")


def test_lambda_passed_in():
    def f(fn, x):
        return fn(x) + 1

    check(f, (lambda v: v.exp(), t()), kind="graph")


# --- functools.partial ---------------------------------------------------------------
def test_partial_of_torch_function_inside():
    def f(x, y):
        add2 = functools.partial(torch.add, alpha=2)
        cat0 = functools.partial(torch.cat, dim=0)
        return add2(x, y), cat0([x, y])

    check(f, (t(), t()), kind="graph")


def test_partial_of_user_function_and_partial_of_partial():
    def f(x):
        p1 = functools.partial(helper, k=3)
        p2 = functools.partial(p1, k=4)
        p3 = functools.partial(varargs_helper, x, a=2)
        p4 = functools.partial(p3, x, b=3)
        return p1(x), p2(x), p2(x, k=5), p4(x), p4(x, a=7)

    check(f, t(), kind="graph")


def test_module_level_partials():
    def f(x, y):
        return MODULE_PARTIAL(x, y), MODULE_PARTIAL_USER(x), MODULE_PARTIAL_USER(x, k=1)

    check(f, (t(), t()), kind="graph")


def test_partial_passed_in():
    def f(p, x):
        return p(x)

    check(f, (functools.partial(torch.mul, other=2.0), t()), kind="graph")
    check(f, (functools.partial(functools.partial(helper, k=2), k=7), t()), kind="graph")


def test_partial_attributes():
    def f(x):
        p = functools.partial(helper, x, k=2)
        return p.func(x), len(p.args), p.keywords["k"]

    check(f, t(), kind="graph")


def test_partial_of_a_partial_is_flat_and_its_keywords_are_one_dict():
    def f(x):
        p = functools.partial(helper, k=3)
        q = functools.partial(p, x)
        r = functools.partial(q, k=5)
        kw = r.keywords
        kw["k"] = 6  # the partial reads its dict at each call
        return r(), r.func is helper, r.args[0] is x, sorted(kw), p.keywords, q.keywords

    check(f, t(), kind="graph")


def test_keywords_of_a_partial_passed_in_written_back():
    def f(p, x):
        p.keywords["k"] = p.keywords["k"] + 1
        return p(x)

    check(f, (functools.partial(helper, k=2), t()), kind="graph")


class MyPartial(functools.partial):
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs) * 10


def test_partial_subclass_keeps_its_own_call():
    def f(p, x):
        return p(x)

    opt = minidynamo.optimize(f, backend=CountingBackend())
    same_outcome(f, opt, MyPartial(helper, k=2), t())


# --- methods of plain objects ----------------------------------------------------------------
class Affine:
    def __init__(self, w, b):
        self.w = w
        self.b = b
        self.calls = 0

    def __call__(self, x):
        return self.apply(x)

    def apply(self, x):
        return x * self.w + self.b

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def name(cls):
        return cls.__name__

    @property
    def wb(self):
        return self.w + self.b


def test_methods_of_object_passed_in():
    def f(obj, x):
        return obj.apply(x), obj(x), obj.twice(x), obj.name(), obj.wb, Affine.twice(x)

    check(f, (Affine(t(), 1.0), t()), kind="graph")


def test_bound_method_passed_in():
    def f(m, x):
        return m(x) * 2

    obj = Affine(2.0, 1.0)
    check(f, (obj.apply, t()), kind="graph")


def test_attribute_write_on_outside_object_is_written_back():
    def f(obj, x):
        obj.calls += 1
        return obj.apply(x)

    # The store is kept on the tracker and written to the object after the graph, once.
    check(f, (Affine(1.0, 0.0), t()), kind="graph")


def test_missing_attribute_raises_like_eager():
    def f(obj, x):
        return obj.nope

    # The attribute read the trace cannot do breaks: it runs natively and raises there.
    check(f, (Affine(1.0, 0.0), t()), kind="break", reason="exceptions")


# --- builtins ----------------------------------------------------------------------------
def test_builtins_on_constants():
    def f(x):
        n = x.shape[0]
        return (x * n, len([1, 2]), isinstance(n, int), isinstance(x, (int, torch.Tensor)),
                list(range(n)), tuple([1, 2]), dict(a=1), int("3"), float(n), bool(0), str(n),
                min(n, 2), max([n, 9]), abs(-n), sum([n, 1]), type(n) is int, type(x).__name__,
                getattr(x, "ndim"), getattr(x, "nope", 5), hasattr(x, "shape"), divmod(n, 3),
                round(2.567, 2), sorted((3, 1)), any([0, n]), all([n, 0]), list(reversed([1, 2])))

    check(f, t(), kind="graph")


def test_int_of_tensor_breaks():
    def f(x):
        return int(x.sum()) + 1

    check(f, t(), kind="break", reason="data_dependent")


def test_recursion_is_inlined_to_its_depth():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def f(x):
        return x * fact(5)

    check(f, t(), kind="graph")


@pytest.mark.parametrize("k", [1, 2])
def test_default_argument_of_optimized_function(k):
    def f(x, k=k):
        return x * k

    check(f, t(), Args(t(), k=3), kind="graph", same_entry=False)


# --- bind_arguments directly ----------------------------------------------------------------
def _bind(fn, *args, **kwargs):
    import minidynamo
    from minidynamo.variables.constant import ConstantVariable
    from minidynamo.variables.call_binding import bind_arguments
    from minidynamo.variables.functions import UserFunctionVariable
    from minidynamo.variables.builder import wrap as builder_wrap
    from minidynamo.variables import registry as models

    class Translator:  # what bind_arguments asks of one: wrapping defaults, guards (dropped)
        output = types.SimpleNamespace(guards=types.SimpleNamespace(add=lambda guard: None))
        registry = models  # the tables builder.wrap reads

        def wrap(self, value, source):
            return builder_wrap(self, value, None)
    wrap = ConstantVariable
    try:
        bound = bind_arguments(UserFunctionVariable(fn), Translator(), fn.__code__, [wrap(a) for a in args],
                               {k: wrap(v) for k, v in kwargs.items()})
    except minidynamo.Unsupported as e:
        return e
    return {k: v.as_python_constant() for k, v in bound.items()}


def _sig(a, b=2, /, c=3, *rest, d, e=5, **kw):
    pass


def test_bind_arguments_matches_python():
    assert _bind(_sig, 1, d=4) == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "rest": (), "kw": {}}
    assert _bind(_sig, 1, 2, 3, 4, 5, d=6, z=7) == {"a": 1, "b": 2, "c": 3, "rest": (4, 5), "d": 6,
                                                    "e": 5, "kw": {"z": 7}}
    assert _bind(_sig, 1, c=9, d=0)["c"] == 9


def test_positional_only_name_as_keyword_goes_to_kwargs():
    # Python binds `b=...` to **kw when b is positional-only.
    assert _bind(_sig, 1, b=7, d=0)["kw"] == {"b": 7}


@pytest.mark.parametrize("call, message", [
    ((), "missing 1 required positional argument: 'a'"),
    ((1,), "missing 1 required keyword-only argument: 'd'"),
    ((1, 2, 3), "missing 1 required keyword-only argument: 'd'"),
])
def test_bind_arguments_errors(call, message):
    err = _bind(_sig, *call)
    assert err.category == "exceptions" and message in err.detail and "_sig()" in err.detail


def test_bind_arguments_error_kinds():
    def two(a, b):
        pass

    assert "takes 2 positional arguments but 3 were given" in _bind(two, 1, 2, 3).detail
    assert "got multiple values for argument 'a'" in _bind(two, 1, a=2).detail
    assert "got an unexpected keyword argument 'z'" in _bind(two, 1, 2, z=3).detail
    with pytest.raises(TypeError):  # what the eager run raises in those cases
        two(1, 2, 3)


def test_closures_over_loop_var():
    def f(x):
        fns = [lambda v, i=i: v * i for i in range(3)]
        gs = [lambda v: v * i for i in range(3)]
        return [g(x) for g in fns], [g(x) for g in gs]
    check(f, t(), kind="graph")



def test_comprehension_cell():
    def f(x):
        return [(lambda: x * k)() for k in range(2)]
    check(f, t(), kind="graph")



def test_star_params():
    def f(*xs, **kw):
        return sum(xs[1:], xs[0]) * kw["s"], kw
    check(f, Args(t(), t(), s=2), kind="graph")



def test_default_tensor():
    def f(x, w=W):
        return x * w
    check(f, t(), kind="graph")



def test_param_names_clash():
    def f(_md_out, fn, compiled, G):
        return _md_out + fn, compiled, G
    check(f, (t(), t(), 1, 2), kind="graph")  # parameters named like generated names



def test_nested_fn_kwargs():
    def f(x):
        def g(*a, **k):
            return len(a), sorted(k), a[0] * 2
        return g(x, 1, y=2, **{"z": 3})
    check(f, t(), kind="graph")



def test_kw_only_star():
    def f(x, *, scale):
        return x * scale
    check(f, Args(t(), scale=3), kind="graph")



def test_comprehension_cells_are_fresh_per_run():
    """3.12+ inlines comprehensions: each run makes a new cell for its variable (MAKE_CELL
    inside the body), so lambdas from different runs see different values."""
    def f(x):
        out = []
        for j in range(2):
            out.append([lambda: x * k for k in range(j + 1)])
        return [g() for fs in out for g in fs]

    assert_uses(f, by_version(py310=("LOAD_CLOSURE",), py312=("MAKE_CELL",)))
    check(f, t(), kind="graph")


def test_names_of_an_inner_function_and_a_lambda():
    def f(x):
        def g():
            pass
        h = lambda: 0  # noqa: E731
        return g.__name__, g.__qualname__, h.__name__, h.__qualname__, g.__module__, x + 1

    check(f, torch.randn(2), kind="graph")
