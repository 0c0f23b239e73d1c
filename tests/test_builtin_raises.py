"""PYTEST_DONT_REWRITE: the traced asserts must raise plain AssertionErrors.

Exceptions a builtin raises inside traced code, caught there: `d[k]`, `d.pop(k)`,
`del d[k]` raising KeyError(k) under a `try` of the traced code (the frame or an inlined
callee), as the dict tests pass in or build. And the `__getattr__` of a class of objects
passed in, inlined where object's lookup misses (hasattr, getattr with a default, plain
reads, the hook catching its own AttributeError). Differential against eager: results,
exceptions and messages, side effects, one graph, a recompile where the dict or the
object changes."""
import torch

import minidynamo
from helpers import CountingBackend, check, same_outcome


def t(*shape):
    return torch.randn(*shape) if shape else torch.randn(4, 3)


# --- KeyError from a dict ---------------------------------------------------------------
def test_missing_key_caught_in_frame():
    def f(x, d, log):
        try:
            a = d["b"]
        except KeyError as e:
            log.append((str(e), e.args, type(e).__name__))
            a = 2
        return x * a

    check(f, (t(), {"a": 1}, []), kind="graph")
    check(f, (t(), {"b": 3}, []), kind="graph")


def test_dict_passed_in_gains_the_key_recompiles():
    def f(x, d):
        try:
            return x * d["b"]
        except KeyError:
            return x - 1

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    x = t()
    same_outcome(f, opt, x, {"a": 1})
    same_outcome(f, opt, x, {"a": 1, "b": 5})  # the key's presence is guarded
    same_outcome(f, opt, x, {"c": 1})
    assert backend.calls == 2


def test_pop_and_del_missing_key():
    def f(x, d, log):
        try:
            d.pop("b")
        except KeyError as e:
            log.append(("pop", e.args))
            x = x.sin()
        else:
            x = x.cos()
        try:
            del d["c"]
        except KeyError as e:
            log.append(("del", str(e)))
            x = x + 1
        return x, d

    check(f, (t(), {"a": 1}, []), kind="graph")
    check(f, (t(), {"a": 1, "b": 2, "c": 3}, []), kind="graph")


def test_key_error_in_loop_over_names():
    params = {"a": 3, "b": 4, "c": 5}

    def f(x, dt):
        for name in params:
            try:
                x = x * dt[name]
            except KeyError:
                x = x * torch.sin(x)
        return x

    info = check(f, (t(), {"c": 5}), kind="graph")
    assert info.graphs == 1


def test_key_error_through_callee_raise_from_none():
    class MyMapping:
        def __init__(self, d):
            self._d = d

        def __getitem__(self, key):
            try:
                value = self._d[key]
            except KeyError:
                raise KeyError(key) from None
            return value

    def mapping_get(obj, key, value=None):
        try:
            return obj.__getitem__(key)
        except KeyError as e:
            return (value, type(e.__context__).__name__, e.__suppress_context__, e.__cause__ is None)

    def f(x, d, key):
        return torch.sin(x + 1), mapping_get(d, key)

    d = MyMapping({"a": 10, "b": 20})
    check(f, (t(), d, "m"), kind="graph")
    check(f, (t(), d, "a"), kind="graph")


def test_key_error_context_is_the_handled_exception():
    def f(x, d):
        try:
            raise ValueError("first")
        except ValueError:
            try:
                d["missing"]
            except KeyError as e:
                return x + 1, type(e.__context__).__name__, str(e.__context__)

    check(f, (t(), {}), kind="graph")


def test_key_error_leaving_the_function_is_eagers():
    def f(x, d):
        y = x * 2
        return y + d["z"]

    opt = minidynamo.optimize(f, backend=CountingBackend())
    e = same_outcome(f, opt, t(), {"a": 1})
    assert isinstance(e, KeyError)
    same_outcome(f, opt, t(), {"z": 1})


def test_key_error_caught_by_a_clause_that_does_not_match():
    def f(x, d):
        try:
            try:
                return x * d["q"]
            except IndexError:
                return x - 1
        except LookupError as e:
            return x + len(e.args)

    check(f, (t(), {}), kind="graph")


# --- __getattr__ of objects passed in ------------------------------------------------------
class Mock:
    def __init__(self):
        self.a = 5

    def __getattr__(self, name):
        if name != "a":
            raise AttributeError("missing")
        return self.__dict__["a"]


class A:
    def __init__(self):
        self._b = 20

    def __getattr__(self, name):
        fixed_name = "_" + name
        if fixed_name in self.__dict__:
            return self.__dict__[fixed_name]
        raise AttributeError(f"{name} absent")


class B(A):
    def __init__(self):
        self.a = 10

    def __getattr__(self, name):
        if name.startswith("__"):  # (copy.deepcopy of the arguments asks for __deepcopy__)
            raise AttributeError(name)
        try:
            return super().__getattr__(name)
        except AttributeError:
            return 30


def test_hasattr_and_getattr_default_through_the_hook():
    def f(x, obj):
        y = torch.cos(x) if hasattr(obj, "b") else torch.sin(x)
        return y * getattr(obj, "c", 3)

    check(f, (t(), Mock()), kind="graph")


def test_hook_catching_its_own_attribute_error():
    def f(x, obj):
        return x * obj.a * obj.b * obj.c

    b = B()
    check(f, (t(), b), kind="graph")
    b._b = 7  # read through the instance dict: guarded
    check(f, (t(), b), kind="graph")


def test_attribute_set_later_is_not_answered_by_the_hook():
    def f(x, obj):
        return x * getattr(obj, "b", 2)

    backend = CountingBackend()
    opt = minidynamo.optimize(f, backend=backend)
    m = Mock()
    x = t()
    same_outcome(f, opt, x, m)
    m.b = 11
    same_outcome(f, opt, x, m)
    assert backend.calls == 2


def test_hook_result_computed_from_name():
    class Cfg:
        def __init__(self):
            self.base = 2

        def __getattr__(self, name):
            if name.startswith("times_"):
                return self.base * int(name[6:])
            raise AttributeError(name)

    def f(x, cfg, log):
        log.append(hasattr(cfg, "other"))
        return x * cfg.times_3

    check(f, (t(), Cfg(), []), kind="graph")


def test_attribute_error_leaving_the_hook_to_the_caller():
    def f(x, obj):
        return x + obj.zzz

    opt = minidynamo.optimize(f, backend=CountingBackend())
    e = same_outcome(f, opt, t(), Mock())
    assert isinstance(e, AttributeError)


# --- index errors and the exceptions of folded builtins ------------------------------------
def test_index_errors_caught_with_cpython_messages():
    def f(x, items):
        caught = []
        for attempt in (lambda: items[5], lambda: tuple(items)[-9], lambda: items.pop(7),
                        lambda: items.__setitem__(4, x), lambda: x.shape[3]):
            try:
                attempt()
            except IndexError as e:
                caught.append(str(e))
        return x + len(caught), caught

    check(f, (torch.randn(2), [1, 2]), kind="graph", graphs=1)


def test_exceptions_of_folded_builtins_caught():
    def f(x, text):
        out = []
        for attempt in (lambda: int(text), lambda: 1 // 0, lambda: "abc".index("z"), lambda: (1, 2).index(5),
                        lambda: float("nan-ish"), lambda: divmod(3, 0)):
            try:
                out.append(attempt())
            except (ValueError, ZeroDivisionError) as e:
                out.append((type(e).__name__, e.args))
        return x * len(out), out

    check(f, (torch.randn(2), "12x"), kind="graph", graphs=1)


def test_an_uncaught_folded_exception_still_raises_as_eager():
    def f(x):
        return x + int("abc")

    same_outcome(f, minidynamo.optimize(f, backend=CountingBackend()), torch.randn(2))
