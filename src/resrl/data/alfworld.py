"""Deprecated: moved to `resrl.tasks.alfworld.data` in resrl 0.2 (this name goes away in 0.3)."""

from resrl._deprecation import shim

shim(__name__, "resrl.tasks.alfworld.data")
