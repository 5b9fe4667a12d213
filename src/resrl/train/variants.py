"""A method variant as one label: a registry algorithm and its own settings, so that each method of a
comparison can train at its own hyper-parameters (`resrl compare --algorithms`, `resrl demo
--algorithms`).

    grpo                                      the algorithm at the run's shared settings
    resrl/resrl.rank=4/resrl.pos_scale=1.0    + algorithm-section settings (algorithm.resrl.rank, ...)
    resrl/train.learning_rate=3e-5            + any other config key, by its section (train, loss, ...)

A setting whose first name is a config section other than `algorithm` is a config override of that
section; every other one belongs to the algorithm section (`algorithm.` may be written or not).
The label, with "/" made "+", is the variant's one run-directory name (`Variant.dir_name`).
"""

from __future__ import annotations

from dataclasses import dataclass

from resrl.errors import InputError

# the config sections a variant may set besides `algorithm` (resrl.train.config.TrainConfig)
SECTIONS = ("model", "data", "reward", "loss", "critic", "train", "engine", "env", "log", "checkpoint", "trl")


@dataclass(frozen=True)
class Variant:
    label: str
    name: str                        # the registry algorithm
    algorithm: tuple[str, ...]       # "key=value" of the algorithm section (without "algorithm.")
    overrides: tuple[str, ...]       # "section.key=value" of the other sections

    @property
    def dir_name(self) -> str:
        """One directory name (`resrl/train.learning_rate=3e-5` -> `resrl+train.learning_rate=3e-5`)."""
        return self.label.replace("/", "+")

    def train_overrides(self) -> list[str]:
        """The variant as `resrl train` overrides (applied after the run's shared ones)."""
        return [f"algorithm.name={self.name}", *(f"algorithm.{s}" for s in self.algorithm), *self.overrides]

    def algorithm_section(self) -> dict:
        """The config's `algorithm` section of the variant."""
        from resrl.train.schema import apply_overrides

        return apply_overrides({"name": self.name}, list(self.algorithm))


def parse_variant(label: str) -> Variant:
    """`name/key=value/...` -> Variant (see the module docstring); InputError naming a bad setting."""
    name, *settings = label.split("/")
    if not name.strip():
        raise InputError(f"--algorithms: {label!r} names no algorithm")
    algorithm, overrides = [], []
    for item in settings:
        key, eq, _ = item.partition("=")
        if not eq or not key.strip():
            raise InputError(f"--algorithms: {label!r}: a variant setting looks like key=value, got {item!r}")
        head = key.split(".")[0]
        if head == "algorithm":
            algorithm.append(item[len("algorithm."):])
        elif head in SECTIONS:
            overrides.append(item)
        else:
            algorithm.append(item)
    return Variant(label, name.strip(), tuple(algorithm), tuple(overrides))


def with_settings(label: str, settings: dict[str, str]) -> str:
    """The label of `label` with more settings (a grid point), in the given order."""
    return "/".join([label, *(f"{k}={v}" for k, v in settings.items())])


__all__ = ["SECTIONS", "Variant", "parse_variant", "with_settings"]
