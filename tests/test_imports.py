"""Import statements inside an optimized function bind exactly what CPython's
`__import__(name, globals, locals, fromlist, level)` binds, for modules already in
sys.modules; what they bind is guarded (sys.modules entries and module attributes), and
importing a module not yet imported falls back (it runs the module's code)."""
import importlib
import itertools
import sys
import textwrap
import types

import pytest
import torch

import minidynamo
from helpers import CountingBackend, assert_uses, check, same_outcome


def t():
    return torch.arange(4.0)


# --- torch's own packages -------------------------------------------------------------
def test_from_torch_package_binds_the_submodules_attribute():
    def f(x):
        from torch.linalg import norm  # torch.linalg.norm, not torch.norm
        from torch.nn import functional  # torch.nn.functional, not torch.functional
        return norm, functional, functional.relu(x - 1)

    assert_uses(f, "IMPORT_NAME", "IMPORT_FROM")
    check(f, t(), kind="graph")


def test_import_dotted_binds_the_top_package():
    def f(x):
        import torch.nn.functional
        return torch, torch.nn.functional.relu(x - 1)

    check(f, t(), kind="graph")


def test_import_dotted_as_binds_the_leaf_module():
    def f(x):
        import torch.nn.functional as F
        import torch.linalg as la
        return F, la, F.relu(x - 1)

    assert_uses(f, "IMPORT_FROM")  # 3.10-3.13: IMPORT_NAME of the top package, then IMPORT_FROMs
    check(f, t(), kind="graph")


def test_import_of_a_module_not_yet_imported_falls_back():
    def f(x):
        import this_module_does_not_exist  # noqa: F401
        return x

    check(f, t(), kind="eager", reason="side_effect")


def test_from_import_of_a_missing_name_raises_like_eager():
    def f(x):  # a package: CPython looks for a submodule torch.nn.no_such_name first
        from torch.nn import no_such_name  # noqa: F401
        return x

    def g(x):  # a plain module: the name is just missing
        from torch.nn.functional import no_such_name  # noqa: F401
        return x

    check(f, t(), kind="eager", reason="side_effect")
    check(g, t(), kind="eager", reason="exceptions")


def test_replaced_builtins_import_falls_back():
    seen = []

    def my_import(*args, **kwargs):
        seen.append(args[0])
        return __import__(*args, **kwargs)

    g = {"__builtins__": {**vars(__import__("builtins")), "__import__": my_import}, "__name__": "m"}
    exec("def f(x):\n    import torch\n    return torch, x + 1\n", g)
    check(g["f"], t(), kind="eager", reason="call")
    assert seen  # the eager runs imported through it


# --- a package of our own, imported from a temporary directory --------------------------
_MOD = '''\
import torch
from . import sub, x  # noqa: F401 - imported: in sys.modules
from .deep import leaf  # noqa: F401


def rel_module(t):
    from . import x
    return x, t + 1


def rel_attr(t):
    from .sub import y, Z
    return y, Z, t + Z


def rel_subpackage(t):
    from .deep import leaf
    return leaf, t + 1


def rel_late(t):
    from . import late
    return late, t + 1


def abs_dotted(t):
    import {pkg}.sub
    return {pkg}, {pkg}.sub.Z, t + 1


def abs_dotted_as(t):
    import {pkg}.deep.leaf as lf
    return lf, t + 1


def abs_from_module(t):
    from {pkg} import sub
    return sub, t + 1


def abs_from_attr(t):
    from {pkg}.sub import y, Z
    return y, Z, t + Z
'''

_LEAF = '''\
def parent_rel(t):
    from .. import sub
    from ..sub import y
    return sub, y, t + 1


def beyond_top(t):
    from .... import nothing  # noqa: F401
    return t
'''

_count = itertools.count()


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    name = f"md_imports_pkg{next(_count)}"
    files = {"__init__.py": "VALUE = 1\n", "sub.py": "def y():\n    return 'y'\n\n\nZ = 3\n",
             "x.py": "", "late.py": "", "deep/__init__.py": "", "deep/leaf.py": _LEAF,
             "mod.py": _MOD.replace("{pkg}", name)}
    for path, text in files.items():
        f = tmp_path / name / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    mod = importlib.import_module(f"{name}.mod")
    yield types.SimpleNamespace(name=name, mod=mod, top=sys.modules[name],
                                leaf=sys.modules[f"{name}.deep.leaf"])
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]


@pytest.mark.parametrize("fn", ["rel_module", "rel_attr", "rel_subpackage", "abs_dotted",
                                "abs_dotted_as", "abs_from_module", "abs_from_attr"])
def test_package_imports_bind_what_eager_binds(pkg, fn):
    f = getattr(pkg.mod, fn)
    assert_uses(f, "IMPORT_NAME")
    check(f, t(), kind="graph")


def test_relative_import_two_levels_up(pkg):
    check(pkg.leaf.parent_rel, t(), kind="graph")


def test_relative_import_beyond_the_top_raises_like_eager(pkg):
    check(pkg.leaf.beyond_top, t(), kind="eager", reason="exceptions")


def test_relative_import_of_a_module_not_yet_imported_falls_back(pkg):
    late = f"{pkg.name}.late"
    assert late not in sys.modules
    opt = minidynamo.optimize(pkg.mod.rel_late, backend=CountingBackend())
    got = opt(t())  # the optimized call comes first: it must not import anything itself
    assert got[0] is sys.modules[late]  # the eager run imported it
    (entry,) = opt.cache_entries()
    assert entry.kind == "eager" and entry.reason.category == "side_effect", entry.reason
    with pytest.raises(minidynamo.Unsupported, match="not yet imported"):
        del sys.modules[late], pkg.top.late  # forgotten: importing it again would run its code
        minidynamo.optimize(pkg.mod.rel_late, backend=CountingBackend(), fullgraph=True)(t())
    # Once imported, it traces.
    importlib.import_module(late)
    check(pkg.mod.rel_late, t(), kind="graph")


def test_submodule_in_sys_modules_but_not_an_attribute(pkg):
    # `from . import x` finds no attribute `x` on the package: CPython imports pkg.x
    # (already in sys.modules: no code runs) and IMPORT_FROM reads sys.modules.
    x = sys.modules[f"{pkg.name}.x"]
    del pkg.top.x
    check(pkg.mod.rel_module, t(), kind="graph")
    # The attribute appearing later is what Python binds from then on.
    pkg.top.x = other = types.ModuleType("other")
    opt = minidynamo.optimize(pkg.mod.rel_module, backend=CountingBackend())
    del pkg.top.x
    assert same_outcome(pkg.mod.rel_module, opt, t())[0] is x
    pkg.top.x = other
    assert same_outcome(pkg.mod.rel_module, opt, t())[0] is other


def test_module_replaced_in_sys_modules_is_seen(pkg, monkeypatch):
    sub_name = f"{pkg.name}.sub"
    new = types.ModuleType(sub_name)
    new.y, new.Z = (lambda: "new"), 5
    fns = [pkg.mod.abs_from_attr, pkg.mod.rel_attr, pkg.mod.abs_from_module, pkg.mod.abs_dotted]
    opts = [minidynamo.optimize(f, backend=CountingBackend()) for f in fns]
    for f, opt in zip(fns, opts):
        same_outcome(f, opt, t())
    monkeypatch.setitem(sys.modules, sub_name, new)
    for f, opt in zip(fns, opts):
        got = same_outcome(f, opt, t())
        if f in fns[:2]:
            assert got[0] is new.y and got[1] == 5
    # `from pkg import sub` reads the package's attribute, still the old module.
    assert same_outcome(fns[2], opts[2], t())[0] is not new
    for opt in opts:  # traced, not run eagerly: the guards caught the change
        assert {e.kind for e in opt.cache_entries()} == {"graph"}
    assert [len(opt.cache_entries()) for opt in opts] == [2, 2, 1, 2]


def test_module_attribute_rebound_is_seen(pkg, monkeypatch):
    f = pkg.mod.abs_from_attr
    opt = minidynamo.optimize(f, backend=CountingBackend())
    same_outcome(f, opt, t())
    sub = sys.modules[f"{pkg.name}.sub"]
    monkeypatch.setattr(sub, "Z", 7)
    assert same_outcome(f, opt, t())[1] == 7
    assert [e.kind for e in opt.cache_entries()] == ["graph", "graph"]


def test_import_guards_name_sys_modules(pkg):
    opt = minidynamo.optimize(pkg.mod.rel_attr, backend=CountingBackend())
    opt(t())
    (entry,) = opt.cache_entries()
    text = entry.guard_text()
    assert f"['{pkg.name}.sub']" in text and "__package__" in text
