"""Which engine configurations are possible: every combination rule, once.

`resrl.train.config.TrainConfig.validate` (before anything loads) and `ResRLTrainer.__init__` (for
callers that build the trainer themselves) describe the run as a `RunLayout` and call `check`;
each names the problem in its own terms: config keys ("config") or trainer arguments ("trainer").

The rules, in the order they are checked (`RULES`):

    resrl-mode              resrl_mode is auto, aligned or extra-pass
    step-level-algorithm    GiGPO, EMPG, ... read the step layout's tags: they need step-level rollouts
    step-rollout-func       step-level rollouts and a multi-turn rollout_func exclude each other
    step-vllm               step-level rollouts generate with HF generate, not vLLM
    step-head-sketch        the step layout does not capture the head sketch (NTHR, weighting=interference)
    step-aligned            aligned ResRL capture is impossible in the step layout (a game's rows span micro-batches)
    step-dynamic-sampling   no dynamic sampling in the step layout (advantages need the whole round)
    step-whole-games        the step layout needs whole games per process
    aligned-layout          aligned capture needs whole groups per micro-batch and one update per round
    dynamic-sampling-groups dynamic sampling needs whole groups per process

`resolve_resrl_mode` picks the mode that "auto" means for a possible layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from resrl.core.registry import AlgorithmConfig, captured_states, get_algorithm
from resrl.engines.trl.batches import aligned_layout_possible

RESRL_MODES = ("auto", "aligned", "extra-pass")


@dataclass(frozen=True)
class RunLayout:
    """A run as the rules see it: the algorithm, how rollouts are laid out, TRL's batch shape.

    dynamic_sampling:   as set (None: the algorithm's default)
    per_device_batch:   rows per device micro-batch (GRPOConfig.per_device_train_batch_size)
    steps_per_generation / gradient_accumulation_steps / num_iterations: GRPOConfig's
    rollout_func / use_vllm: facts only the trainer knows (a config never sets them with a step layout)
    """

    algorithm: AlgorithmConfig
    step_layout: bool
    resrl_mode: str
    dynamic_sampling: bool | None
    group_size: int
    per_device_batch: int
    steps_per_generation: int
    gradient_accumulation_steps: int
    num_iterations: int
    num_processes: int = 1
    rollout_func: bool = False
    use_vllm: bool = False

    @property
    def local_rows(self) -> int:
        """Rows of one generation round on one process."""
        return self.per_device_batch * self.steps_per_generation

    @property
    def rollout_prompts(self) -> int:
        """Prompts of one generation round, all processes."""
        return self.local_rows * self.num_processes // self.group_size

    @property
    def dynamic_sampling_on(self) -> bool:
        """Dynamic sampling runs: as set, else the algorithm's default."""
        if self.dynamic_sampling is None:
            return bool(get_algorithm(self.algorithm.name).dynamic_sampling)
        return bool(self.dynamic_sampling)

    @property
    def aligned_possible(self) -> bool:
        return aligned_layout_possible(self.per_device_batch, self.group_size, self.steps_per_generation,
                                       self.gradient_accumulation_steps, self.num_iterations,
                                       getattr(self.algorithm, "scale_rewards", "group"))


@dataclass(frozen=True)
class Problem:
    rule: str
    config: str    # the message naming config keys
    trainer: str   # the message naming ResRLTrainer / GRPOConfig arguments

    def message(self, flavour: str) -> str:
        return self.config if flavour == "config" else self.trainer


def _resrl_mode(r: RunLayout) -> Problem | None:
    if r.resrl_mode in RESRL_MODES:
        return None
    return Problem("resrl-mode", f"config key 'engine.resrl_mode' must be auto, aligned or extra-pass, got "
                                 f"{r.resrl_mode!r}",
                   f"resrl_mode must be auto, aligned or extra-pass, got {r.resrl_mode!r}")


def _step_level_algorithm(r: RunLayout) -> Problem | None:
    name = r.algorithm.name
    if r.step_layout or not get_algorithm(name).step_level:
        return None
    return Problem("step-level-algorithm",
                   f"config key 'algorithm.name' is {name!r}, a step-level algorithm: it needs an environment with "
                   "env.layout: step (one sample per environment step)",
                   f"algorithm {name!r} needs step-level rollouts (step_rollout=..., config env.layout: step)")


def _step_rollout_func(r: RunLayout) -> Problem | None:
    if not (r.step_layout and r.rollout_func):
        return None
    return Problem("step-rollout-func", "config key 'env.layout': step-level rollouts and a multi-turn rollout_func "
                                        "are exclusive",
                   "ResRLTrainer: step_rollout and rollout_func are exclusive")


def _step_vllm(r: RunLayout) -> Problem | None:
    if not (r.step_layout and r.use_vllm):
        return None
    return Problem("step-vllm", "config key 'trl.use_vllm': vLLM generation is not wired into env.layout step yet "
                                "(step-level rollouts generate with the policy's HF generate)",
                   "GRPOConfig.use_vllm=True: vLLM generation is not wired into step-level rollouts yet "
                   "(they generate with the policy's HF generate)")


def _step_head_sketch(r: RunLayout) -> Problem | None:
    a = r.algorithm
    if not r.step_layout:
        return None
    if not (captured_states(a)[1] or (a.name == "gigpo-resrl" and a.resrl.weighting != "residual")):
        return None
    return Problem("step-head-sketch",
                   f"config keys 'algorithm.name' / 'algorithm.resrl.weighting': {a.name!r} with weighting "
                   f"{a.resrl.weighting!r} needs the output head's sketch, which env.layout step does not capture; "
                   "use resrl or gigpo-resrl with weighting residual",
                   f"algorithm {a.name!r} (with resrl.weighting={a.resrl.weighting!r}) needs the head sketch, which "
                   "step-level rollouts do not capture: use resrl or gigpo-resrl with the default weighting "
                   "(residual), or the concatenated layout")


def _step_aligned(r: RunLayout) -> Problem | None:
    if not (r.step_layout and r.resrl_mode == "aligned"):
        return None
    return Problem("step-aligned",
                   "config key 'engine.resrl_mode': aligned is impossible with env.layout step (a game's step rows "
                   "are split over micro-batches); use auto or extra-pass",
                   "resrl_mode='aligned' is impossible with step-level rollouts (a game's step rows are split over "
                   "micro-batches): use auto or extra-pass")


def _step_dynamic_sampling(r: RunLayout) -> Problem | None:
    # asked for, or the algorithm's default (a dapo algorithm), even when switched off
    if not (r.step_layout and (r.dynamic_sampling or get_algorithm(r.algorithm.name).dynamic_sampling)):
        return None
    return Problem("step-dynamic-sampling",
                   "config key 'engine.dynamic_sampling' (or a dapo algorithm) is not supported with env.layout step",
                   "dynamic sampling is not supported with step-level rollouts")


def _step_whole_games(r: RunLayout) -> Problem | None:
    if not r.step_layout or r.local_rows % r.group_size == 0:
        return None
    return Problem("step-whole-games",
                   f"config key 'train.rollout_prompts' ({r.rollout_prompts}) must be a multiple of the "
                   f"{r.num_processes} processes with env.layout step (whole games per process)",
                   f"step-level rollouts need whole games per process: the local generation batch ({r.local_rows}) "
                   f"must be a multiple of num_generations ({r.group_size})")


def _aligned_layout(r: RunLayout) -> Problem | None:
    if r.step_layout or r.resrl_mode != "aligned" or r.aligned_possible:
        return None
    return Problem("aligned-layout",
                   "config key 'engine.resrl_mode' is 'aligned' but a device micro-batch does not hold whole groups "
                   "of one generation round (needs micro_batch_size a multiple of group_size, one update per round, "
                   "num_iterations 1 and algorithm.scale_rewards != 'batch'); use 'auto' or 'extra-pass'",
                   "resrl_mode='aligned' needs whole groups per device micro-batch "
                   "(per_device_train_batch_size % num_generations == 0), one update per generation round and "
                   "scale_rewards != 'batch'")


def _dynamic_sampling_groups(r: RunLayout) -> Problem | None:
    if r.step_layout or not r.dynamic_sampling_on or r.local_rows % r.group_size == 0:
        return None
    return Problem("dynamic-sampling-groups",
                   "config key 'engine.dynamic_sampling' needs train.rollout_prompts to be a multiple of the number "
                   "of processes (whole groups per process)",
                   f"dynamic sampling needs whole groups per process: the local generation batch ({r.local_rows}) "
                   f"must be a multiple of num_generations ({r.group_size})")


RULES: dict[str, Callable[[RunLayout], Problem | None]] = {
    "resrl-mode": _resrl_mode,
    "step-level-algorithm": _step_level_algorithm,
    "step-rollout-func": _step_rollout_func,
    "step-vllm": _step_vllm,
    "step-head-sketch": _step_head_sketch,
    "step-aligned": _step_aligned,
    "step-dynamic-sampling": _step_dynamic_sampling,
    "step-whole-games": _step_whole_games,
    "aligned-layout": _aligned_layout,
    "dynamic-sampling-groups": _dynamic_sampling_groups,
}


def problems(layout: RunLayout) -> list[Problem]:
    """Every rule `layout` breaks, in RULES order (empty: the layout is possible)."""
    return [p for rule in RULES.values() if (p := rule(layout)) is not None]


def check(layout: RunLayout, flavour: str = "trainer", error: type[Exception] = ValueError) -> None:
    """Raise `error` with the first problem's message in `flavour` ("config" | "trainer")."""
    found = problems(layout)
    if found:
        raise error(found[0].message(flavour))


def resolve_resrl_mode(layout: RunLayout) -> str:
    """The ResRL capture mode of a possible layout: extra-pass for step rollouts, "auto" -> aligned
    when the layout allows it, else what was asked."""
    if layout.step_layout:
        return "extra-pass"
    if layout.resrl_mode == "auto":
        return "aligned" if layout.aligned_possible else "extra-pass"
    return layout.resrl_mode
