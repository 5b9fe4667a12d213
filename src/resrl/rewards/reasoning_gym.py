"""Deprecated: moved to `resrl.tasks.reasoning_gym.reward` in resrl 0.2 (this name goes away in 0.3)."""

from resrl._deprecation import shim

shim(__name__, "resrl.tasks.reasoning_gym.reward")
