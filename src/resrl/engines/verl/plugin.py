"""The `verl.plugins` entry point (pyproject.toml): `import verl` imports this module, which
registers the advantage estimators (`estimators.py`) and the `resrl` v1 trainer mode with its
worker (`trainer.py`, `worker.py`) in veRL's own registries."""

from . import estimators, trainer  # noqa: F401  (registration happens at import)

__all__ = ["estimators", "trainer"]
