"""Old import paths of the modules that moved in resrl 0.2 (the table in docs/development.md).

Each old module is a small shim: it warns (DeprecationWarning, pointing at the line that imported
it) and puts the new module in its place in `sys.modules`, so the old name gives the very same
module object (attributes, classes, monkeypatching). The shims go away in resrl 0.3.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

REMOVED_IN = "0.3"


def moved(old: str, new: str, stacklevel: int = 3) -> ModuleType:
    """Warn that module `old` is now `new` and return `new` (imported). Called from the old
    module's body; the warning names the line that imported the old module."""
    warnings.warn(f"{old} moved to {new} in resrl 0.2; the old name goes away in resrl {REMOVED_IN}",
                  DeprecationWarning, stacklevel=stacklevel)
    return importlib.import_module(new)


def shim(old: str, new: str) -> None:
    """Make module `old` an alias of `new`: `shim(__name__, "resrl.tasks...")` as the old module's body."""
    sys.modules[old] = moved(old, new, stacklevel=4)
