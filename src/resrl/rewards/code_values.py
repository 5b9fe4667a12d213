"""Deprecated: moved to `resrl.tasks.code.sandbox.code_values` in resrl 0.2 (this name goes away in 0.3)."""

from resrl._deprecation import shim

shim(__name__, "resrl.tasks.code.sandbox.code_values")
