"""Generated Python for cache entries: one function per entry, with the user's own
signature, that checks the guards and then runs the compiled graph (or the original
function, for an eager fallback) and rebuilds the return value.

The text is kept: explain(), the logs and MINIDYNAMO_DUMP show exactly what runs.
"""
from __future__ import annotations

import builtins
import inspect
import keyword
import operator
import types

from .sources import Namespace, identifier
from .user_tracebacks import trimmed
from .frame_hook import eager_call

MISS = object()  # returned by an entry whose guards fail


def code_signature(fn) -> inspect.Signature:
    """The parameters CPython binds a call of `fn` to: its code's, whatever `__signature__`
    a library set on it (a forward made to look like the function it dispatches to)."""
    if "__signature__" not in getattr(fn, "__dict__", ()):
        return inspect.signature(fn, follow_wrapped=False)
    bare = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    bare.__kwdefaults__ = fn.__kwdefaults__
    return inspect.signature(bare, follow_wrapped=False)


def signature_parts(fn, ns: Namespace) -> tuple[str, str]:
    """(parameter list text, call argument text) reproducing `fn`'s signature."""
    sig = code_signature(fn)
    params, call = [], []
    saw_posonly = saw_star = False
    for p in sig.parameters.values():
        default = "" if p.default is p.empty else f"={ns.bind(p.default, 'd')}"
        if p.kind is p.POSITIONAL_ONLY:
            saw_posonly = True
            params.append(p.name + default)
            call.append(p.name)
            continue
        if saw_posonly:
            params.append("/")
            saw_posonly = False
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            params.append(p.name + default)
            call.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            saw_star = True
            params.append("*" + p.name)
            call.append("*" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not saw_star:
                params.append("*")
                saw_star = True
            params.append(p.name + default)
            call.append(f"{p.name}={p.name}")
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            call.append("**" + p.name)
    if saw_posonly:
        params.append("/")
    return ", ".join(params), ", ".join(call)


def entry_name(fn) -> str:
    """The generated entry's def name: fn's own, or where that is no identifier
    (`<lambda>`) `fn_` and its letters; a builtin's name (a function named `len`) takes a
    trailing `_`, since the generated code calls the builtins by name."""
    name = fn.__name__
    if name.isidentifier() and not keyword.iskeyword(name):
        return name + "_" if hasattr(builtins, name) else name
    return "fn_" + identifier(name).strip("_")


def pick_prefix(fn) -> str:
    """A prefix for generated names that no parameter of `fn` uses."""
    names = set(fn.__code__.co_varnames)
    prefix = "_md_"
    while any(n.startswith(prefix) for n in names):
        prefix = "_" + prefix
    return prefix


def guard_block(guard_exprs: list[str], miss: str, ok: str, indent: str = "    ", fast=None) -> list[str]:
    """Lines checking the guards; where one fails (or raises), `return {miss}`. With `fast`
    (guards.FastTier), a first tier: where a snapshot of the roots holds, bind its values
    and check the rest; else call `fast.precise` (`precise_block`: every guard, then a
    snapshot of what they read), which returns the values the entry reads after, or None.

    NOTE: the miss call stays outside the `try`: it may run the user's function (a new
    trace, an eager entry), and an exception it raises is the user's own, to propagate
    once, never to be caught here and answered by a second miss call."""
    if not guard_exprs:
        return []
    join = " and\n" + indent + "            "
    if fast is None:
        checks = [f"{indent}    {ok} = ({join.join(f'({e})' for e in guard_exprs)})"]
    else:
        values = ok + "_values"
        targets = ", ".join(fast.targets)
        residual = join.join(f"({e})" for e in fast.residual) or "True"
        carry = ", ".join(fast.carry)
        checks = [
            *(f"{indent}    {line}" for line in fast.fetch),
            f"{indent}    {values} = {fast.name}.fresh({', '.join(fast.roots)})",
            f"{indent}    if {values} is not None:",
            f"{indent}        {targets} = {fast.pick}({values})" if fast.pick else
            f"{indent}        {targets}, = {values}" if len(fast.targets) == 1 else
            f"{indent}        {targets} = {values}" if fast.targets else f"{indent}        pass",
            f"{indent}        {ok} = ({residual})",
            f"{indent}    else:",
            f"{indent}        {values} = {fast.precise}({fast.call})",
            f"{indent}        {ok} = {values} is not None",
            *([f"{indent}        if {ok}:", f"{indent}            {carry}, = {values}"] if fast.carry else []),
        ]
    return [
        f"{indent}try:",
        *checks,
        f"{indent}except Exception:",
        f"{indent}    {ok} = False",
        f"{indent}if not {ok}:",
        f"{indent}    return {miss}",
    ]


def precise_block(guard_exprs: list[str], ok: str, fast, indent: str = "    ") -> list[str]:
    """The body of an entry's second tier (guard_block's `fast.precise`), a function of its
    own: every guard, each value read fetched once into a local, then a snapshot of them
    taken; returns the values the entry reads after the guards (`fast.carry`), or None
    where a guard fails. Its own function, not a branch of the entry's: a model's guards
    read thousands of values, and a frame with a local for each costs every call its
    allocation (3.11 gets a fresh chunk of its frame stack for one over 16 KiB)."""
    join = " and\n" + indent + "        "
    take = f"{fast.name}.take(({', '.join(fast.roots)},), ({', '.join(fast.values)},))"
    carry = "".join(f"{name}, " for name in fast.carry)
    return [
        f"{indent}try:",
        *(f"{indent}    {line}" for line in fast.fetch),
        f"{indent}    {ok} = ({join.join(f'({e})' for e in guard_exprs)} and\n{indent}        {take})",
        f"{indent}except Exception:",
        f"{indent}    {ok} = False",
        f"{indent}return ({carry}) if {ok} else None",
    ]


def build_function(name: str, params: str, body: list[str], ns: Namespace, filename: str,
                   qualname: str | None = None):
    """exec a factory that closes over the namespace (fast cell loads, not dict lookups)."""
    (fn, text), = build_functions([(name, params, body)], ns, filename, qualname)
    return fn, text


def build_functions(defs: list, ns: Namespace, filename: str, qualname: str | None = None) -> list:
    """Several (name, params, body) functions over one namespace, compiled at once:
    [(function, its source text), ...]. With `qualname`, the functions carry it, so a
    call with wrong arguments raises the TypeError the user's function would."""
    trim = ns.bind(trimmed, "trimmed")
    factory_args = ", ".join(ns.values)
    texts, inner = [], []
    for i, (name, params, body) in enumerate(defs):
        lines = [f"def {name}({params}):", *body]
        texts.append("\n".join(lines))
        # What the user's code raises leaves without the package's frames (user_tracebacks.py).
        wrapped = [lines[0], "    try:", *("    " + line for line in body),
                   f"    except BaseException as {ns.prefix}raised:", f"        raise {trim}({ns.prefix}raised)"]
        inner += ["    " + line for line in wrapped] + [f"    __f{i} = {name}"]
    results = ", ".join(f"__f{i}" for i in range(len(defs)))
    src = f"def __make({factory_args}):\n" + "\n".join(inner) + f"\n    return [{results}]\n"
    scope: dict = {}
    exec(compile(src, filename, "exec"), scope)
    fns = scope["__make"](*ns.values.values())
    if qualname is not None:
        for f in fns:
            f.__qualname__ = qualname
            if hasattr(f.__code__, "co_qualname"):  # 3.11+: what TypeErrors name
                f.__code__ = f.__code__.replace(co_qualname=qualname)
    return list(zip(fns, texts))


def rebind(fn, name: str, value):
    """A copy of generated function `fn` whose free variable `name` holds `value`."""
    code = fn.__code__
    cells = tuple(types.CellType(value) if var == name else cell
                  for var, cell in zip(code.co_freevars, fn.__closure__))
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, cells)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


def dispatcher(name: str, fn, runs: list, slow) -> object:
    """A function with fn's parameters trying each entry in turn, then `slow` (the miss
    path). Only for functions without defaults: with defaults bound here, a later change
    of fn.__defaults__ would be passed on as explicit arguments."""
    ns = Namespace(pick_prefix(fn))
    params, call = signature_parts(fn, ns)
    miss = ns.bind(MISS, "MISS")
    r = ns.prefix + "r"
    body = []
    for i, run in enumerate(runs):
        body += [f"    {r} = {ns.bind(run, f'entry{i}')}({call})",
                 f"    if {r} is not {miss}:",
                 f"        return {r}"]
    body.append(f"    return {ns.bind(slow, 'miss')}({call})")
    return build_function(name, params, body, ns, f"<minidynamo dispatch {name}>",
                          qualname=fn.__qualname__)[0]


def eager_call_lines(ns: Namespace, fn, backend, call: str, indent: str = "    ", dynamic=None) -> list[str]:
    """`return fn(call)`, run plainly with the frames it calls optimized under `backend`
    and dynamic-shape mode `dynamic` (frame_hook), in the generated function itself: no
    frame between it and `fn`."""
    plain, hooked = eager_call(fn, backend, dynamic)
    ret = f"return {ns.bind(plain, 'fn')}({call})"
    if hooked is None:
        return [indent + ret]
    return [f"{indent}with {ns.bind(hooked, 'hooked')}:", f"{indent}    {ret}"]


def limit_dispatcher(name: str, fn, runs: list, slow, key_exprs_of, eager):
    """Past the cache limit: a function with fn's parameters that reads a key (the values of
    `key_exprs_of(ns)`: what made the entries differ) and looks up which entry took that key last
    time, or that none did; then one entry's guards or the original function (run plainly
    under `eager`: (function, backend, dynamic mode) its callees are optimized with), not every
    entry's guards. An unknown key, a key that raises, or an entry whose guards now fail
    goes to `slow(key, *args, **kwargs)`, which tries them all and records the outcome."""
    ns = Namespace(pick_prefix(fn))
    params, call = signature_parts(fn, ns)
    p = ns.prefix
    memo: dict = {}
    body = ["    try:",
            f"        {p}key = ({''.join(e + ', ' for e in key_exprs_of(ns))})",
            f"        {p}hit = {ns.bind(memo, 'memo')}.get({p}key, -2)",
            "    except Exception:",
            f"        {p}key, {p}hit = None, -2",
            f"    if {p}hit == -1:",
            *eager_call_lines(ns, eager[0], eager[1], call, "        ", dynamic=eager[2]),
            f"    if {p}hit >= 0:",
            f"        {p}r = {ns.bind(tuple(runs), 'entries')}[{p}hit]({call})",
            f"        if {p}r is not {ns.bind(MISS, 'MISS')}:",
            f"            return {p}r",
            f"    return {ns.bind(slow, 'miss')}({p}key, {call})"]
    built = build_function(name, params, body, ns, f"<minidynamo dispatch {name}>", qualname=fn.__qualname__)[0]
    return built, memo


def failure_finder(name: str, params: str, guard_exprs: list[str], ns: Namespace):
    """A function with the user's signature returning (index of the first failing guard,
    the value its source had), or (-1, None) when all pass."""
    body = []
    for i, e in enumerate(guard_exprs):
        body += [
            "    try:",
            f"        if not ({e}):",
            f"            return {i}",
            "    except Exception:",
            f"        return {i}",
        ]
    body.append("    return -1")
    fn, _ = build_function(name, params, body, ns, "<minidynamo guards>")
    return fn


def source_reader(name: str, params: str, exprs: list[str], ns: Namespace):
    """A function with the user's signature returning the value of source `i`."""
    body = ["    _md_values = []"]
    for e in exprs:
        body += ["    try:", f"        _md_values.append({e})", "    except Exception as _md_e:",
                 "        _md_values.append(_md_e)"]
    body.append("    return _md_values")
    fn, _ = build_function(name, params, body, ns, "<minidynamo guards>")
    return fn


# --- the graph's code inlined into the entry (the "eager" backend) ------------------------
_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.gt: ">",
    operator.ge: ">=", operator.eq: "==", operator.ne: "!=",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


class _CannotInline(Exception):
    pass


def graph_lines(graph, ns: Namespace, input_exprs: dict, var_name, render=None) -> list[str] | None:
    """The statements of an fx graph, as lines of the entry function: one per node, in
    graph order, dropping each intermediate after its last use like fx's own code does.
    `input_exprs` maps placeholder nodes to their source expressions, `var_name(node)`
    names results. `render(node, names)` may return (lines, name or None) to emit a node
    its own way (None: the usual line). None when some node has no plain-Python form
    (then the caller keeps the GraphModule)."""
    nodes = list(graph.nodes)
    names: dict = {}
    lines: list[str] = []
    last_use: dict = {}
    for i, n in enumerate(nodes):
        for used in n.all_input_nodes:
            last_use[used] = i
    dies_at: dict = {}
    for used, i in last_use.items():
        dies_at.setdefault(i, []).append(used)
    params = {e for e in input_exprs.values() if e.isidentifier()}
    try:
        for i, n in enumerate(nodes):
            if n.op == "placeholder":
                expr = input_exprs[n]
                if expr.isidentifier():
                    names[n] = expr  # a parameter: used as is, never cleared
                    continue
                names[n] = var_name(n)
                lines.append(f"{names[n]} = {expr}")
                continue
            if n.op == "output":
                break
            if n.op == "get_attr":  # a body held by the graph (autograd.Function): never cleared
                names[n] = ns.bind(n.meta.get("run_module", n.meta["module"]), n.target)
                params.add(names[n])
                continue
            custom = render(n, names) if render is not None else None
            if custom is not None:
                own_lines, names[n] = custom
                lines.extend(own_lines)
                dead = [names[u] for u in dies_at.get(i, ()) if names[u] and names[u] not in params]
                if dead:
                    lines.append(f"{' = '.join(dead)} = None")
                continue
            if n.op == "call_function":
                rhs = _call_function_expr(n, names, ns)
            elif n.op == "call_method":
                self_arg, *rest = n.args
                rhs = f"{_arg(self_arg, names, ns)}.{n.target}({_call_args(rest, n.kwargs, names, ns)})"
            else:
                return None
            names[n] = var_name(n)
            dead = [names[u] for u in dies_at.get(i, ()) if names[u] and names[u] not in params]
            line = f"{names[n]} = {rhs}"
            if not n.users:
                line = rhs
            if dead:
                line += f";  {' = '.join(dead)} = None"
            lines.append(line)
    except _CannotInline:
        return None
    return lines


def _call_function_expr(n, names, ns) -> str:
    t, args, kwargs = n.target, n.args, n.kwargs
    if not kwargs:
        if t in _BINARY and len(args) == 2:
            return f"{_arg(args[0], names, ns)} {_BINARY[t]} {_arg(args[1], names, ns)}"
        if t in _UNARY and len(args) == 1:
            return f"{_UNARY[t]}{_arg(args[0], names, ns)}"
        if t is operator.getitem and len(args) == 2:
            return f"{_arg(args[0], names, ns)}[{_index(args[1], names, ns)}]"
        if t is getattr and len(args) == 2 and isinstance(args[1], str) and args[1].isidentifier() \
                and not keyword.iskeyword(args[1]):
            return f"{_arg(args[0], names, ns)}.{args[1]}"
    if not callable(t):
        raise _CannotInline(t)
    return f"{ns.bind(t, 'fn')}({_call_args(args, kwargs, names, ns)})"


def _call_args(args, kwargs, names, ns) -> str:
    parts = [_arg(a, names, ns) for a in args]
    for k, v in kwargs.items():
        if not k.isidentifier() or keyword.iskeyword(k):
            raise _CannotInline(k)
        parts.append(f"{k}={_arg(v, names, ns)}")
    return ", ".join(parts)


def _index(a, names, ns) -> str:
    if type(a) is slice:
        return _slice(a, names, ns)
    if isinstance(a, tuple) and a:
        return ", ".join(_slice(x, names, ns) if type(x) is slice else _arg(x, names, ns)
                         for x in a) + ("," if len(a) == 1 else "")
    return _arg(a, names, ns)


def _slice(s, names, ns) -> str:
    start = "" if s.start is None else _arg(s.start, names, ns)
    stop = "" if s.stop is None else _arg(s.stop, names, ns)
    return f"{start}:{stop}" + ("" if s.step is None else f":{_arg(s.step, names, ns)}")


def literal(value, ns: Namespace) -> str:
    """An expression for a constant: written out where it can be, else bound in `ns`."""
    try:
        return _arg(value, {}, ns)
    except _CannotInline:  # e.g. a namedtuple: the object itself
        return ns.bind(value, "c")


def _arg(a, names, ns) -> str:
    import torch.fx as fx
    if isinstance(a, fx.Node):
        return names[a]
    t = type(a)
    if a is None or t in (bool, int, str) or a is Ellipsis:
        return repr(a) if a is not Ellipsis else "..."
    if t is float:
        return repr(a) if a == a and a not in (float("inf"), float("-inf")) else ns.bind(a, "c")
    if isinstance(a, (list, tuple)):
        if not (t in (list, tuple) or t.__name__ in ("immutable_list", "Size")):
            raise _CannotInline(t)  # a namedtuple or other subclass: keep fx's own code
        inner = ", ".join(_arg(x, names, ns) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, dict):
        if not all(type(k) is str for k in a):
            raise _CannotInline(a)
        return "{" + ", ".join(f"{k!r}: {_arg(v, names, ns)}" for k, v in a.items()) + "}"
    if t is slice:
        return f"{ns.bind(slice, 'slice')}({_arg(a.start, names, ns)}, {_arg(a.stop, names, ns)}, " \
               f"{_arg(a.step, names, ns)})"
    return ns.bind(a, "c")
