"""Objects a user names in a config or on the command line: `"module:attr"` (imported) or
`"path/to/file.py:attr"` (loaded from the file) — reward functions, environment factories.
Every failure is one InputError naming what was asked for and the spec."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from resrl.errors import InputError


def load_user_object(spec: str, what: str) -> Any:
    """The attribute `attr` of the module named by `spec = "module:attr"` (or `"file.py:attr"`).

    what: how messages name the object, e.g. "reward function" -> "reward function 'm:f': ..."."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise InputError(f"{what} {spec!r}: expected 'module:function'")
    module = _import(module_name, spec, what)
    if not hasattr(module, attr):
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise InputError(f"{what} {spec!r}: module '{module_name}' has no attribute '{attr}' "
                         f"(callables there: {public[:20]})")
    return getattr(module, attr)


def _import(module_name: str, spec: str, what: str):
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise InputError(f"{what} {spec!r}: file '{module_name}' does not exist")
        mod_spec = importlib.util.spec_from_file_location(f"resrl_user_{path.stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):  # the module itself (or its package) is missing
            raise InputError(f"{what} {spec!r}: cannot import module '{module_name}' "
                             f"({exc}); is it installed or on PYTHONPATH?") from exc
        raise  # a missing dependency inside the user's module: show the real error


__all__ = ["load_user_object"]
