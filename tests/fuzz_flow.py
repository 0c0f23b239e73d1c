"""Control-flow statements of the fuzzer's program generator (tests/fuzzgen.py mixes them
into its generator): generators driven with next/send/throw/close (`yield from` chains
included), exceptions raised and caught inside the function (in its own frame or an
inlined helper; `except ... as`, tuples, `else`, `finally`, `raise ... from`, re-raise,
StopIteration from next()), and graph breaks at C calls whose results do not change the
outputs or change them deterministically.

Each form is deterministic: whether a raise happens depends only on the call's `n`, a
C call's result is a constant of the process (`os.getpid()`), of its argument
(`zlib.crc32`), or a clock reading only compared with itself. A generator body reads only
its parameters (no cell of the function is made), and each driven generator ends finished
or suspended outside any try and is deleted, so a later graph break never meets it live.
"""
from __future__ import annotations

# Generator forms: (definitions, driving statements, result expression). {g}/{gi}: the
# generator function names, {it}: the generator object, {t}: a tensor local, {log}: a
# list made in the function; {a}, {b}: tensor expressions of one shape.
GEN_FORMS = [
    # 0: send accumulates; close at a yield outside any try
    (["def {g}(u):", "    acc = u", "    while True:", "        got = yield acc", "        acc = acc + got"],
     ["{it} = {g}({a})", "next({it})", "{it}.send({b})", "{t} = {it}.send(({b}) * 2)", "{it}.close()"],
     "{t}"),
    # 1: throw caught by the body, which goes on to its next yields
    (["def {g}(u, w):", "    try:", "        yield u * 2", "    except ValueError as e:",
      "        yield w + len(e.args)", "    yield u - w"],
     ["{it} = {g}({a}, {b})", "{t} = next({it})", '{t} = {t} + {it}.throw(ValueError("bad", 2))',
      "{t} = {t} + next({it})", "{it}.close()"],
     "{t}"),
    # 2: throw not caught: the body's finally runs, the caller catches it, the generator is finished
    (["def {g}(u, log):", "    try:", "        yield u + 1", "        yield u + 2", "    finally:",
      "        log.append(len(log))"],
     ["{log} = []", "{it} = {g}({a}, {log})", "{t} = next({it})", "try:", '    {it}.throw(KeyError("k"))',
      "except KeyError as e:", "    {t} = {t} * 2 + len(str(e))", "{t} = {t} + len({log}) + len(list({it}))"],
     "{t}"),
    # 3: throw caught, the body returns: StopIteration(value) in the caller
    (["def {g}(u):", "    try:", "        yield u", "    except ValueError:", "        return u * 3", "    yield u"],
     ["{it} = {g}({a})", "{t} = next({it})", "try:", "    {it}.throw(ValueError)",
      "except StopIteration as e:", "    {t} = {t} + e.value"],
     "{t}"),
    # 4: yield from forwards the throw; the delegate's return value is the yield from's
    (["def {gi}(u):", "    try:", "        yield u", "    except IndexError:", "        yield u * 2",
      "    return u + 1", "def {g}(u, inner):", "    r = yield from inner(u)", "    yield r"],
     ["{it} = {g}({a}, {gi})", "{t} = next({it}) + {it}.throw(IndexError) + next({it})", "{it}.close()"],
     "{t}"),
    # 5: yield from forwards the sent value
    (["def {gi}(u):", "    got = yield u", "    return got * 2", "def {g}(u, inner):",
      "    r = yield from inner(u)", "    yield r + 1"],
     ["{it} = {g}({a}, {gi})", "{t} = next({it})", "{t} = {t} + {it}.send({b})", "{it}.close()"],
     "{t}"),
    # 6: close inside a try: except GeneratorExit and finally run once
    (["def {g}(u, log):", "    try:", "        yield u", "        yield u * 2", "    except GeneratorExit:",
      '        log.append("exit")', "        raise", "    finally:", '        log.append("finally")'],
     ["{log} = []", "{it} = {g}({a}, {log})", "{t} = next({it})", "{it}.close()", "{it}.close()"],
     "{t} + len({log})"),
    # 7: a StopIteration thrown in leaves the body as PEP 479's RuntimeError
    (["def {g}(u):", "    yield u", "    yield u"],
     ["{it} = {g}({a})", "{t} = next({it})", "try:", "    {it}.throw(StopIteration)", "except RuntimeError as e:",
      "    {t} = {t} + len(str(e))"],
     "{t}"),
    # 8: a body raising and catching its own exceptions while a for loop pulls it
    (["def {g}(u, k):", "    for i in range(k):", "        try:", "            if i % 2:",
      "                raise ValueError(i)", "            yield u + i", "        except ValueError as e:",
      "            yield u * e.args[0]"],
     ["{t} = {a}", "for {it} in {g}({b}, 3):", "    {t} = {t} + {it}"],
     "{t}"),
    # 9: a body's exception leaves it into the for loop pulling it, caught around the loop
    (["def {g}(u, k):", "    for i in range(k):", "        yield u * i", '    raise KeyError("end")'],
     ["{t} = {a}", "try:", "    for {it} in {g}({b}, 2):", "        {t} = {t} + {it}",
      "except KeyError as e:", "    {t} = {t} - len(e.args)"],
     "{t}"),
]

# Raise-and-catch forms: (statements, result expression). {t}: a tensor local; {a}, {b}:
# tensor expressions of one shape; whether they raise depends on n.
RAISE_FORMS = [
    # 0: raised in the frame; except ... as, else, finally
    (["try:", "    if n > 1:", '        raise ValueError(f"n={{n}}")', "    {t} = {a}", "except ValueError as e:",
      "    {t} = ({b}) + len(str(e))", "else:", "    {t} = {t} * 2", "finally:", "    {t} = {t} - 1"],
     "{t}"),
    # 1: raised by an inlined helper on odd n
    (["try:", "    {t} = _h_raise({a}, n)", "except KeyError as e:", "    {t} = ({b}) * len(e.args)"], "{t}"),
    # 2: caught and raised again as another, from the first, two helpers deep
    (["try:", "    {t} = _h_reraise({a}, n)", "except ValueError as e:",
      "    {t} = ({b}) + (e.__cause__ is None) + len(str(e.__context__))"], "{t}"),
    # 3: nested try, raise ... from, an except tuple
    (["try:", "    try:", '        raise IndexError("inner")', "    except IndexError as e:",
      '        raise KeyError("outer") from e', "except (ValueError, KeyError) as e2:",
      "    {t} = ({a}) + isinstance(e2.__cause__, IndexError)"], "{t}"),
    # 4: StopIteration from next() on an exhausted iterator
    (["{it} = iter([{a}])", "{t} = next({it})", "try:", "    {t} = {t} + next({it})", "except StopIteration:",
      "    {t} = {t} * 2"], "{t}"),
    # 5: a bare raise re-raises to an outer handler; the inner finally runs first
    (["{t} = {a}", "try:", "    try:", "        if n % 2 == 0:", '            raise RuntimeError("even")',
      "    except RuntimeError:", "        {t} = {t} + 1", "        raise", "    finally:", "        {t} = {t} * 2",
      "except RuntimeError:", "    {t} = {t} - ({b})"], "{t}"),
]

# Graph breaks at C functions (statements; {v}: an existing tensor local or None): the
# call runs natively, the rest of the frame in a resume function.
C_CALLS = [
    ["{c} = time.time()", "del {c}"],
    ["{c} = os.getpid()", "{v} = {v} + ({c} > 0)"],
    ['{c} = zlib.crc32(b"fuzz")', "{v} = {v} + {c} % 5"],
    ["{c} = time.perf_counter()", "{v} = {v} + 1", "del {c}"],
    ['{v} = {v} + zlib.adler32(b"ab") % 3'],
    ["{c} = time.monotonic_ns() // 10 ** 30", "{v} = {v} + {c}"],
]
# (A clock reading is deleted after use: one carried across a later break would be guarded
# by value there, a new trace per call.)


class FlowStatements:
    """Mixed into tests/fuzzgen._Gen (uses its chooser, names, expressions and scope)."""

    def s_gen_drive(self, scope, in_block):
        i = self.ch.int(0, len(GEN_FORMS) - 1)
        self.features.add(f"gen_drive{i}")
        defs, drive, result = GEN_FORMS[i]
        names = {"g": self.fresh("gen"), "gi": self.fresh("gen"), "it": self.fresh("it"), "t": self.fresh("gt"),
                 "log": self.fresh("log"), "a": self.texpr(scope), "b": self.texpr(scope)}
        lines = [ln.format(**names) for ln in defs + drive]
        if i != 8:  # the generator object goes: nothing holds it at a later break
            lines.append("del {it}".format(**names))
        return self._assign(scope, in_block, lines, result.format(**names))

    def s_raise_catch(self, scope, in_block):
        i = self.ch.int(0, len(RAISE_FORMS) - 1)
        self.features.add(f"raise_catch{i}")
        if i in (1, 2):
            self.helpers_used.add("_h_raise")
        if i == 2:
            self.helpers_used.add("_h_reraise")
        lines, result = RAISE_FORMS[i]
        names = {"t": self.fresh("rt"), "it": self.fresh("it"), "a": self.texpr(scope), "b": self.texpr(scope)}
        return self._assign(scope, in_block, [ln.format(**names) for ln in lines], result.format(**names))

    def b_c_call(self, scope, in_block):
        v = self._some_local(scope)
        forms = [i for i, form in enumerate(C_CALLS) if v is not None or not any("{v}" in ln for ln in form)]
        i = self.ch.pick(forms)
        self.features.add(f"c_call{i}")
        c = self.fresh("c")
        return [ln.format(c=c, v=v) for ln in C_CALLS[i]]
