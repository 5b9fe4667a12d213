"""Training: YAML config (`config.py`), the library entry point `run_training` (`runner.py`),
and the `resrl train` command (`command.py`). Atomic checkpoints live below the engines
(`resrl.checkpoint`), which write them.

Heavy libraries (torch, transformers, trl) are imported only when training starts.
"""

from resrl.train.config import ConfigError, TrainConfig, load_config


def run_training(*args, **kwargs):
    """See `resrl.train.runner.run_training`."""
    from resrl.train.runner import run_training as _run

    return _run(*args, **kwargs)


__all__ = ["ConfigError", "TrainConfig", "load_config", "run_training"]
