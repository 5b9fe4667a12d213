"""resrl: ResRL and RLVR baselines for LLMs.

Data flow of one RL step, module by module:
rollout (engines/) -> reward (rewards/) -> advantage (core/advantages.py)
-> token weights (core/residual.py) -> loss (core/loss.py) -> eval (eval/).
"""

__version__ = "0.2.0"

# old import paths of moved modules fail with an ImportError that names the new path (CHANGELOG.md)
from resrl import _moved  # noqa: E402

_moved.install()

# The TRL engine's public names, imported on first use: `import resrl` stays free of torch / trl.
_LAZY = {"ResRLTrainer": "resrl.engines.trl.trainer", "ResRLGRPOConfig": "resrl.engines.trl.config"}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'resrl' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY})
