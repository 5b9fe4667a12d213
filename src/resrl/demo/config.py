"""What an experiment is made of: `ExperimentConfig`, a `resrl train` config plus a start and an
evaluator. Every demo task (`resrl.demo.tasks`) is one, full or `--quick`; the experiment pipeline
(`resrl.experiments`) runs it.

    train    the methods' shared training: the sections and keys of a `resrl train` YAML file
             (`train.learning_rate`, `train.max_steps`, `env.max_steps`, ...). A method's run is this
             config plus its algorithm (its label), the experiment's seed (`train.seed`), where it
             writes, the start (`model.path`) and the task's rows (`data.train`):
             `resrl demo --task T --print-config` prints it, `resrl train --config` runs it
    start    what every method trains from: `WarmStart` (a tiny model trained on the task's correct
             completions), `BehaviourCloning` (a tiny model trained on an expert's walkthroughs) or
             `BaseModel` (a pretrained model); its name in summary.json is `START`
    eval     how every policy is scored: `EvalConfig` (`resrl.eval.runner`'s, on generated problems)
             or `StepEval` (episodes of the task's step environment, as it trains)
    task     the task's own shape: its problem generator's or its games' settings

One key names one setting everywhere: `with_overrides(cfg, ["train.learning_rate=3e-4", "eval.n=8"])`
sets the training config's key as `resrl train` would, or a field of the start, eval or task
section; `resrl demo`'s `--lr`, `--rl-steps` and `--eval-samples` are aliases of such keys (`ALIASES`).
"""

from __future__ import annotations

import copy
import dataclasses
import re
import typing
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from resrl.eval.runner import EvalConfig
from resrl.train.schema import ConfigError, _coerce, apply_overrides

START = "warm start"  # the start's policy name in summary.json, whatever the start is (what --seeds pairs with)
DEFAULT_ALGORITHMS = ("grpo", "w-reinforce", "resrl")

# `resrl demo`'s short flags and the keys they set (documented in `resrl demo --help`)
ALIASES = {"rl_steps": "train.max_steps", "lr": "train.learning_rate", "eval_samples": "eval.n"}
# the sections of an ExperimentConfig that overrides address besides the training config's
SECTIONS = ("start", "eval", "task")


# -- the start ------------------------------------------------------------------------------------------

@dataclass
class WarmStart:
    """A tiny model built for the task's alphabet (`model`: `resrl.models.tiny.TinyModelConfig`'s
    fields), trained on the task's correct completions (`resrl.experiments.warmstart.warm_start`)
    until its greedy accuracy on a dev stream (not the test split) reaches `target_accuracy`."""

    max_steps: int = 1000  # upper bound; training stops earlier once the target accuracy is reached
    batch_size: int = 64
    learning_rate: float = 3e-3  # constant after warm-up, so stopping early leaves no schedule half-run
    warmup_steps: int = 20
    weight_decay: float = 0.0
    target_accuracy: float = 0.3  # stop when greedy accuracy on `dev_problems` (not the test split) reaches it
    check_every: int = 25
    dev_problems: int = 128
    omega_problems: int = 48  # groups sampled for the ω analysis of the warm start
    model: dict = field(default_factory=lambda: {"hidden_size": 128, "num_hidden_layers": 4})


@dataclass
class BehaviourCloning:
    """A tiny model (`model`: TinyModelConfig's fields) trained on an expert's walkthroughs of the
    first `games` cloning games (`resrl.experiments.warmstart.behaviour_cloning`), stopped once its
    sampled success (4 episodes per game at the training temperature) on `dev_games` other training
    games reaches `target_success` (checked every `check_every` steps from step 50; None: no check),
    so that every seed starts RL from a policy of about the same skill, with room."""

    games: int = 32
    max_steps: int = 400
    target_success: float | None = 0.7
    dev_games: int = 16
    check_every: int = 10
    learning_rate: float = 3e-3
    batch_size: int = 16
    model: dict = field(default_factory=lambda: dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                     num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                                     max_position_embeddings=768))


@dataclass
class BaseModel:
    """A pretrained model is the start: `model_dir` (converted there once, shared by every seed and
    grid point; each run's OUT/warm_start links to it)."""

    model_dir: str = "runs/models/smollm2-135m-instruct"


# -- the evaluator ----------------------------------------------------------------------------------------

def demo_eval_config(**overrides) -> EvalConfig:
    """The tiny models' evaluation settings, as the runner's EvalConfig.

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
class StepEval:
    """Episodes of the task's step environment, as the training config plays them (env.*,
    train.temperature): one greedy episode and `n` sampled ones per held-out game."""

    n: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"StepEval.n must be an int >= 1, got {self.n!r}")


# -- the experiment ------------------------------------------------------------------------------------

@dataclass
class ExperimentConfig:
    """One seed's experiment on a demo task (the module docstring): `train` the `resrl train` keys
    every method shares, `start`, `eval` and `task` its other sections.

    task_name    the demo task (`resrl demo --task`, registry: resrl.demo.tasks)
    algorithms   the methods: registry names or variants `name/key=value` (resrl.train.variants)
    curve_steps  steps whose models are kept and evaluated like the final one, the learning curve
                 (`resrl demo --curve-steps 20,40`): each a checkpoint step below train.max_steps
    threads      torch CPU threads. 1 by default: the ops of a 1 M-parameter model are too small to
                 gain from more, and on a busy machine OpenMP threads that spin-wait for a core made a
                 warm-start step 10x slower with 2 threads than with 1 (measured: 1.25 s vs 0.13 s)
    eval_split   the split every policy is evaluated on: "test" (held out), or "dev" (disjoint from
                 it), where `resrl demo --grid` chooses each method's settings
    reuse_training  OUT of an earlier experiment: a method whose run finished there with the same
                 training (label, train config, task, seed and start) is evaluated from that run's
                 model instead of trained again (`resrl.experiments.method.reusable_training`); only
                 for a start every seed shares (a base model). `resrl demo --grid` sets it to OUT/dev
                 for the first seed
    """

    task_name: str
    train: dict
    start: WarmStart | BehaviourCloning | BaseModel
    eval: EvalConfig | StepEval
    task: Any
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    out: str = "runs/demo"
    seed: int = 0
    threads: int | None = 1
    is_quick: bool = False
    eval_split: str = "test"
    reuse_training: str | None = None
    curve_steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if "seed" in self.train.get("train", {}):
            raise ConfigError("config key 'train.seed': an experiment's seed is its own (--seed): it seeds the "
                              "task's splits and the start as well as every method's training")
        if self.eval_split not in ("test", "dev"):
            raise ConfigError(f"eval_split must be 'test' or 'dev', got {self.eval_split!r}")

    def training(self, data: str | None = None, model: str | None = None) -> dict:
        """The methods' shared `resrl train` sections as one YAML mapping: `train`, with the seed
        (`train.seed`), the start (`model.path`) and the rows (`data.train`) where given."""
        sections = copy.deepcopy(self.train)
        sections.setdefault("train", {})["seed"] = self.seed
        if model is not None:
            sections["model"] = {**sections.get("model", {}), "path": model}
        if data is not None:
            sections["data"] = {**sections.get("data", {}), "train": data}
        return sections

    def shared_training(self):
        """The methods' shared training as a typed `resrl train` config (`TrainConfig`; the algorithm
        its default, the method's own aside): what the start and the evaluator read of it (the
        environment, the sampling temperature, the budget)."""
        from resrl.train.config import config_from_dict

        return config_from_dict(self.training())


# -- the tiny models' budgets -----------------------------------------------------------------------

# The tiny models' RL, the `math` task's (every tiny-model task states its differences as keys): lr
# 1e-4 (3e-4 and 1e-3 collapse the tiny model), constant (stopping early leaves no schedule half-run),
# on the CPU, prompts kept whole, logs to metrics.jsonl only, a checkpoint every 10 updates (a run
# killed while training resumes from it bit for bit; 0: none)
TINY_TRAINING = {
    "train": {"max_steps": 250, "learning_rate": 1e-4, "lr_scheduler": "constant", "rollout_prompts": 16,
              "group_size": 8, "temperature": 1.0, "max_completion_length": 16, "max_prompt_length": None,
              "use_cpu": True},
    "log": {"report_to": ["none"], "progress": False, "jsonl": True},
    "checkpoint": {"save_steps": 10},
}
# `--quick` of a tiny-model task: about a minute, the same pipeline with tiny budgets
QUICK_KEYS = ("train.max_steps=6", "train.rollout_prompts=8", "train.group_size=4", "start.max_steps=150",
              "start.check_every=25", "start.dev_problems=48", "start.omega_problems=16", "eval.n=8",
              "eval.batch_size=384")


def tiny_model_experiment(task_name: str, task, quick: bool = False, keys: Sequence[str] = (),
                          quick_keys: Sequence[str] = ()) -> ExperimentConfig:
    """A tiny-model task's experiment: the `math` task's budgets (TINY_TRAINING, `WarmStart()`,
    `demo_eval_config()`) with the task's `keys` over them, or with `--quick` QUICK_KEYS and its
    `quick_keys`; `task` its shape."""
    cfg = ExperimentConfig(task_name=task_name, train=TINY_TRAINING, start=WarmStart(), eval=demo_eval_config(),
                           task=task, is_quick=quick)
    return with_overrides(cfg, [*QUICK_KEYS, *quick_keys] if quick else keys)


def with_overrides(cfg: ExperimentConfig, keys: Sequence[str]) -> ExperimentConfig:
    """`cfg` with `key=value` overrides (values parsed as YAML, as `resrl train`'s): a key of the
    training config (`train.learning_rate=3e-4`, `env.max_steps=8`, `loss.agg=token-mean`) sets it in
    `cfg.train` (the training config checks it when a method's config is built), a key of the start,
    eval or task section (`start.max_steps=100`, `eval.n=8`) sets that field, type-checked here. An
    evaluation's sample count (`eval.n`) also resets its ks (powers of two up to the new n)."""
    train = copy.deepcopy(cfg.train)
    sections = {name: getattr(cfg, name) for name in SECTIONS}
    for item in keys:
        head = item.partition("=")[0].strip().split(".", 1)[0]
        if head in SECTIONS:
            sections[head] = _set_field(sections[head], item)
        else:
            apply_overrides(train, [item])
            _floats(train)
    return replace(cfg, train=train, **sections)


_EXPONENT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def _floats(node: dict) -> None:
    """Numbers YAML 1.1 reads as strings (`1e-5`: no dot) as the floats they are, in place: the
    training config reads them so, and the experiment's record shows them so."""
    for key, value in node.items():
        if isinstance(value, dict):
            _floats(value)
        elif isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
            node[key] = float(value)


def _set_field(section, item: str):
    """A dataclass section with one `section.field=value` override applied (a new object)."""
    import yaml

    dotted, _, raw = item.partition("=")
    name, _, field_name = dotted.strip().partition(".")
    names = {f.name for f in dataclasses.fields(section)}
    if field_name not in names:
        raise ConfigError(f"unknown config key '{dotted.strip()}' (valid keys here: {', '.join(sorted(names))})")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    value = _coerce(value, typing.get_type_hints(type(section))[field_name], dotted.strip())
    extra = {"ks": None} if isinstance(section, EvalConfig) and field_name == "n" else {}
    try:
        return replace(section, **{field_name: value}, **extra)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config key '{dotted.strip()}': {exc}") from exc



def __getattr__(name: str):
    """A name that left this module (DemoConfig, RLConfig, WarmStartConfig): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["START", "DEFAULT_ALGORITHMS", "ALIASES", "SECTIONS", "WarmStart", "BehaviourCloning", "BaseModel",
           "StepEval", "demo_eval_config", "ExperimentConfig", "with_overrides", "TINY_TRAINING", "QUICK_KEYS",
           "tiny_model_experiment"]
