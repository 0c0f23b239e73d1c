"""tox's inline plugin: find the Pythons pyenv has installed.

pyenv's shims (`python3.12` on PATH) run only the versions pyenv has selected, so tox's
search along PATH finds no Python 3.12 when 3.11 is the default, and skips the env. Here
the newest installed release of each minor version is offered to tox first (as
`--discover` does), so `tox -e py310,py312,py313` runs on a fresh clone as written. An
env whose Python is installed nowhere fails (tox.ini: skip_missing_interpreters = false).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tox.plugin import impl


def _pyenv_root() -> Path | None:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    if shutil.which("pyenv"):
        try:
            out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10, check=True)
            return Path(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def pyenv_pythons() -> list[str]:
    """The newest CPython release (3.8 on) of each minor version under pyenv's versions/."""
    root = _pyenv_root()
    versions = root / "versions" if root is not None else None
    if versions is None or not versions.is_dir():
        return []
    newest: dict = {}
    for path in versions.iterdir():
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", path.name)
        if m is None:
            continue
        major, minor, patch = map(int, m.groups())
        if (major, minor) < (3, 8):  # older than tox's discovery queries: it stops at them
            continue
        exe = path / "bin" / f"python{major}.{minor}"
        if exe.is_file() and patch >= newest.get((major, minor), (-1, ""))[0]:
            newest[(major, minor)] = (patch, str(exe))
    return [exe for _, (_, exe) in sorted(newest.items())]


@impl
def tox_add_core_config(core_conf, state) -> None:
    options = state.conf.options
    if hasattr(options, "discover"):  # the run commands: user's --discover first
        options.discover = [*(options.discover or []), *pyenv_pythons()]
