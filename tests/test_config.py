"""minidynamo.config: assignments are checked like torch's config (unknown names and
wrong types raise, naming the setting), and each setting is one annotated line."""
import pytest
import torch

import minidynamo
from minidynamo.config import Config, config


def test_a_typo_is_an_attribute_error_naming_the_close_setting():
    before = repr(config)
    with pytest.raises(AttributeError) as info:
        config.cache_size_limt = 3
    msg = str(info.value)
    assert "no setting 'cache_size_limt' (did you mean 'cache_size_limit'?)" in msg
    assert "settings: cache_size_limit, error_on_recompile, dump_dir" in msg and "suppress_errors" in msg
    assert repr(config) == before and "cache_size_limt" not in vars(config)
    with pytest.raises(AttributeError, match="did you mean 'error_on_recompile'"):
        config.error_on_recompiles  # noqa: B018 - reading a typo says the same
    with pytest.raises(AttributeError, match=r"no setting 'speed'; settings: "):
        config.speed = "max"


@pytest.mark.parametrize("name, value, expected", [
    ("cache_size_limit", "8", "int, not str ('8')"),
    ("cache_size_limit", True, "int, not bool (True)"),  # a bool is no size
    ("cache_size_limit", None, "int, not NoneType"),  # None only where the default is None
    ("cache_size_limit", 8.0, "int, not float"),
    ("error_on_recompile", 1, "bool, not int"),
    ("error_on_recompile", "yes", "bool, not str"),
    ("suppress_errors", None, "bool, not NoneType"),
    ("dump_dir", 3, "str or PathLike or None, not int"),
])
def test_a_wrong_type_is_a_type_error_and_changes_nothing(name, value, expected):
    before = getattr(config, name)
    with pytest.raises(TypeError, match=f"minidynamo.config.{name} must be " + expected.replace("(", r"\(")
                       .replace(")", r"\)")):
        setattr(config, name, value)
    assert getattr(config, name) == before


def test_right_types_are_accepted(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "cache_size_limit", 3)
    monkeypatch.setattr(config, "error_on_recompile", True)
    monkeypatch.setattr(config, "dump_dir", tmp_path)  # a path object, as os.makedirs takes
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    monkeypatch.setattr(config, "dump_dir", None)
    monkeypatch.setattr(config, "suppress_errors", True)
    assert (config.cache_size_limit, config.error_on_recompile, config.suppress_errors) == (3, True, True)


def test_every_setting_has_a_default_of_its_type_and_round_trips(monkeypatch):
    fresh = Config()
    for name in Config.__annotations__:
        value = getattr(fresh, name)
        monkeypatch.setattr(config, name, value)  # its own default passes the check
        assert getattr(config, name) == value
    assert Config.suppress_errors is False and fresh.suppress_errors is False


def test_repr_lists_every_setting():
    text = repr(Config())
    assert text.startswith("Config(cache_size_limit=8, error_on_recompile=False, dump_dir=")
    assert text.endswith("full_tracebacks=False)")
    assert all(f"{name}=" in text for name in Config.__annotations__)


def test_dump_dir_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIDYNAMO_DUMP", str(tmp_path))
    assert Config().dump_dir == str(tmp_path)
    monkeypatch.setenv("MINIDYNAMO_DUMP", "")
    assert Config().dump_dir is None


def test_a_checked_setting_still_acts(monkeypatch):
    monkeypatch.setattr(config, "error_on_recompile", True)
    opt = minidynamo.optimize(lambda x: x + 1)
    opt(torch.ones(2))
    with pytest.raises(minidynamo.RecompileError):
        opt(torch.ones(3))
