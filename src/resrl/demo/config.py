"""The supervised experiment kind's settings (`DemoConfig`, `WarmStartConfig`, `RLConfig`, the
evaluation's `demo_eval_config`): data a demo task fills with its budgets (`resrl.demo.tasks`),
read by the experiment pipeline (`resrl.experiments`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from resrl.data.synthetic import ChainAdditionConfig
from resrl.eval.runner import EvalConfig

DEFAULT_ALGORITHMS = ("grpo", "w-reinforce", "resrl")


def demo_eval_config(**overrides) -> EvalConfig:
    """The demo's evaluation settings, as the runner's EvalConfig.

    n 16 samples per problem at temperature 1.0, top-p 1.0 (the RL sampling distribution: what the
    policy itself would draw), 24 new tokens, raw prompts (`17+45+38=`, as in training), 512 rows
    per generate call (the tiny model on CPU is fastest in large batches), no tqdm bar (the demo
    shows its own), no per-run PNG."""
    settings = dict(n=16, temperature=1.0, top_p=1.0, max_new_tokens=24, batch_size=512, seed=1234,
                    instruction="", use_chat_template=False, raw_prompts=True, progress=False, plot=False)
    settings.update(overrides)
    if "n" in overrides and "ks" not in overrides:
        settings["ks"] = None  # powers of two up to the new n
    return EvalConfig(**settings)


@dataclass
class WarmStartConfig:
    """The supervised warm start's budget (the loop: resrl.experiments.warmstart.warm_start)."""

    max_steps: int = 1000  # upper bound; training stops earlier once the target accuracy is reached
    batch_size: int = 64
    learning_rate: float = 3e-3  # constant after warm-up, so stopping early leaves no schedule half-run
    warmup_steps: int = 20
    weight_decay: float = 0.0
    target_accuracy: float = 0.3  # stop when greedy accuracy on a dev split (not the test split) reaches it
    check_every: int = 25
    seed: int = 0


@dataclass
class RLConfig:
    """What every algorithm gets (the same for all). lr 1e-4: 3e-4 and 1e-3 collapse the tiny model."""

    steps: int = 250
    learning_rate: float = 1e-4
    rollout_prompts: int = 16
    group_size: int = 8
    temperature: float = 1.0
    max_completion_length: int = 16
    micro_batch_size: int | None = None  # completions per forward/backward (a memory knob); None: a whole update
    trainable_layers: int | None = None  # train the last N decoder layers only (model.trainable_layers); None: all
    # a checkpoint every N updates (the trainer's checkpoint.save_steps): a run killed while training resumes
    # from the newest one, bit for bit (`resrl.experiments.method.train`); 0: none (a killed run starts again)
    save_steps: int = 10
    # steps whose models are kept and evaluated like the final one, the learning curve (`resrl demo
    # --curve-steps 20,40`): each a multiple of save_steps below `steps`
    curve_steps: tuple[int, ...] = ()


@dataclass
class DemoConfig:
    out: str = "runs/demo"
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    seed: int = 0
    task_name: str = "math"  # the demo task (`resrl demo --task`, registry: resrl.demo.tasks); `task` is its shape
    task: ChainAdditionConfig = field(default_factory=lambda: ChainAdditionConfig(num_test=256))
    hidden_size: int = 128
    num_layers: int = 4
    warm: WarmStartConfig = field(default_factory=WarmStartConfig)
    dev_problems: int = 128  # greedy accuracy that stops the warm start (not the test split)
    rl: RLConfig = field(default_factory=RLConfig)
    eval: EvalConfig = field(default_factory=demo_eval_config)  # resrl.eval.runner's, demo settings
    omega_problems: int = 48  # groups sampled for the ω analysis
    # torch CPU threads. 1 by default: the ops of a 1 M-parameter model are too small to gain from
    # more, and on a busy machine OpenMP threads that spin-wait for a core made a warm-start step
    # 10x slower with 2 threads than with 1 (measured: 1.25 s vs 0.13 s per step)
    threads: int | None = 1
    is_quick: bool = False
    # the split every policy is evaluated on: "test" (held out), or "dev" (`HeldOutSplitTask.dev_split`,
    # as many problems, disjoint from it) where `resrl demo --grid` chooses each method's settings
    eval_split: str = "test"

    @classmethod
    def quick(cls, **overrides) -> "DemoConfig":
        """About a minute: an easier task (one-digit terms) and tiny budgets, same pipeline."""
        cfg = cls(
            task=ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=48),
            warm=WarmStartConfig(max_steps=150, target_accuracy=0.3, check_every=25),
            dev_problems=48,
            rl=RLConfig(steps=6, rollout_prompts=8, group_size=4),
            eval=demo_eval_config(n=8, batch_size=384),
            omega_problems=16,
            is_quick=True,
        )
        return replace(cfg, **overrides)
