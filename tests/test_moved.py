"""Moved import paths (resrl._moved, CHANGELOG.md): an old path is one ImportError that names the new
path; no table entry hides a module that exists; every move is in the changelog."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from resrl._moved import MOVED_MODULES, MOVED_NAMES, moved_module

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def _modules(text: str) -> list[str]:
    return re.findall(r"resrl(?:\.\w+)+", text)


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_path_names_its_new_one(old):
    new, _ = MOVED_MODULES[old]
    with pytest.raises(ModuleNotFoundError) as err:
        importlib.import_module(old)
    assert f"{old} moved to {new}" in str(err.value) and "CHANGELOG.md" in str(err.value)
    assert err.value.name == old
    for target in _modules(new):  # the new paths exist (a module, or a name in one)
        module, _, name = target.rpartition(".")
        assert importlib.util.find_spec(target) is not None or hasattr(importlib.import_module(module), name), target


def _resolve(path: str):
    """The object at a dotted path: its longest importable module, then attributes (a class's method)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def test_a_submodule_of_a_moved_package_and_a_moved_name():
    with pytest.raises(ImportError, match=r"resrl\.envs\.alfworld moved to resrl\.tasks\.alfworld"):
        importlib.import_module("resrl.envs.alfworld.env")
    assert moved_module("resrl.envs.alfworld.env") == ("resrl.tasks.alfworld.env", "0.2.0")
    for (module, name), (new, _) in MOVED_NAMES.items():
        with pytest.raises(ImportError, match=re.escape(f"{module}.{name} moved to {new}")):
            exec(f"from {module} import {name}", {})
        assert _resolve(new.split()[0])  # it is there now (under its new name where it was renamed)
    import resrl.data.loaders as loaders

    assert not hasattr(loaders, "no_such_name")  # any other missing name is the usual AttributeError
    with pytest.raises(ModuleNotFoundError, match="No module named 'resrl.no_such_module'"):
        importlib.import_module("resrl.no_such_module")


def test_no_table_entry_hides_a_module_that_exists():
    """The finder is asked only after the real ones failed: a real module at an old path would win,
    and the table would be lying. None exists (in a fresh process, where nothing is cached)."""
    src = ROOT / "src"
    for old in MOVED_MODULES:
        path = src.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not (path / "__init__.py").exists(), old
    code = "import importlib.util as u, resrl; print(u.find_spec('resrl.tasks.rewards') is not None)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"


def test_every_move_is_in_the_changelog():
    assert "## [Unreleased]" in CHANGELOG and "## [0.2.0]" in CHANGELOG
    unreleased, released = CHANGELOG.split("## [0.2.0]", 1)
    for old, (new, version) in MOVED_MODULES.items():
        section = unreleased if version == "unreleased" else released
        assert f"`{old}`" in section, f"{old} ({version}) is not in the changelog's section of its version"
        for target in _modules(new):
            assert f"`{target}`" in section or target in section, f"{old} -> {target}"
    for (module, name), (new, version) in MOVED_NAMES.items():
        section = unreleased if version == "unreleased" else released
        target = new.split()[0]
        assert f"`{module}.{name}`" in section and (f"`{target}`" in section or f"`{target.rpartition('.')[0]}`"
                                                    in section), f"{module}.{name} -> {new}"
    # a renamed metric is a breaking change for a dashboard too
    assert "`train/completions` →\n  `completions/update_rows`" in CHANGELOG or \
        "`train/completions` → `completions/update_rows`" in CHANGELOG
