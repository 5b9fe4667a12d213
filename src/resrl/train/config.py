"""Training configuration: one dataclass per YAML section, validated before anything heavy starts.

A YAML file has the sections below (every key optional except `model.path` and `data.train`
when no model / dataset is passed in code); see `configs/*.yaml` for complete examples.

    model:      which causal LM to train (a local Hugging Face directory)
    data:       the training problems (jsonl / parquet, veRL columns or {"problem", "answer"})
    reward:     the verifier ("math", "exact", "code", "code-fraction", ... or "module:function";
                resrl.tasks.rewards lists them)
    algorithm:  resrl.core.registry.AlgorithmConfig (name: any of resrl.core.registry.ALGORITHMS,
                listed by `resrl train --help`; each method's own settings sit next to its math:
                resrl: ResRLConfig, nthr: NTHRConfig, flowrl: FlowRLConfig, gigpo / empg:
                resrl.core.step_advantages)
    loss:       resrl.core.loss.LossConfig (keys not given take the algorithm's defaults)
    critic:     resrl.core.value.CriticConfig: PPO's value model (algorithm.name: ppo; its GAE
                settings are algorithm.ppo: resrl.core.gae.PPOConfig)
    train:      batch shape, optimiser, sampling, seed, steps
    engine:     where the TRL adapter computes ResRL weights (aligned / extra-pass), dynamic sampling
                (the hidden-state alignment is algorithm.resrl.hidden_alignment, spec §2)
    generation: which path samples the rollouts (auto | hf | compiled | paged | vllm), shared
                prefill, the frozen layers' reuse (resrl.models.generation_paths.GenerationSettings)
    log:        TensorBoard / JSONL / W&B
    checkpoint: periodic atomic checkpoints
    env:        multi-turn rollouts (resrl.envs): the model's turns alternate with an environment's
                answers, which are context only (no loss, no advantage, no ResRL weight)
    trl:        any other `trl.GRPOConfig` / `TrainingArguments` field, handed to TRL as is (vLLM,
                DeepSpeed / FSDP, optimiser, dataloader, ...). Fields the sections above own are
                refused with the key to use instead (`TRL_OWNED_FIELDS`).

Batch vocabulary (prompts are counted before the G-fold repetition):
    rollout_prompts   prompts sampled per generation round   (paper: 256)
    update_prompts    prompts per optimiser update            (paper: 64 -> 4 updates / round)
    group_size        G completions per prompt                (paper: 4)
    micro_batch_size  completions per device forward/backward (memory knob only)
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from resrl.models.generation_paths import GenerationSettings
from resrl.tasks import registry as tasks
from resrl.train.schema import ConfigError, apply_overrides, explicit_keys, from_dict, to_dict

logger = logging.getLogger(__name__)


@dataclass
class LoraSection:
    """LoRA through TRL's `peft_config` (peft.LoraConfig). The reference policy is the model with its
    adapters disabled; ResRL's states come from the adapted policy."""
    r: int = 16  # rank of the adapter matrices
    alpha: int = 32  # LoRA scaling numerator (the update is scaled by alpha / r)
    dropout: float = 0.05  # dropout on the adapter input
    target_modules: list[str] | str = "all-linear"  # or a list of module names, e.g. [q_proj, v_proj]


@dataclass
class ModelSection:
    path: str | None = None  # local HF causal-LM directory (resrl make-tiny-model / convert-smollm2)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # dtype the weights are loaded in
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (less memory, slower)
    lora: LoraSection | None = None  # null: full fine-tuning
    # train only the last N decoder layers and the final norm; the embeddings, the output head and the
    # layers below are frozen, so the backward pass stops at layer L - N (null: every parameter trains)
    trainable_layers: int | None = None


@dataclass
class DataSection:
    train: str | None = None  # file path or a name known to resrl.data.loaders (e.g. gsm8k)
    data_dir: str | None = None  # where named data sets live
    max_problems: int | None = None  # keep only the first N problems (smoke runs)


@dataclass
class RewardSection:
    # a name of resrl.tasks.rewards (math, exact, code, rg, ...) or "module:function"; unset: the
    # reward of the training data's task family (rg for rg:TASK, code for code rows, math for the
    # rest), the same rule as `resrl eval` and `resrl diagnose` without --reward; env with env.name
    function: str | None = None
    # wall-clock limit: of each item when isolated; of each call (one step's completions) of an
    # in-process "module:function" (the call is abandoned, its items score 0 as timeouts); the
    # built-in rewards bound their own items with it (math, code, rg)
    timeout_s: float = 5.0
    num_workers: int = 2  # scoring processes
    # run a user "module:function" item by item in worker processes with timeout_s (the math
    # verifier is always isolated); off by default because it forks the trainer process
    isolate: bool = False
    # what a fault of the reward function does — an exception, a timeout, a NaN / inf, a value that
    # is not a number: "zero" scores the item 0, counts it in reward/<errors|timeouts|nonfinite|
    # wrong_type> and logs the first of each kind naming the reward and the row; "raise" stops the
    # run with one error naming them. An exception from a batch call is retried item by item, so
    # only the items that raise score 0.
    on_error: str = "zero"


@dataclass
class TrainSection:
    output_dir: str = "runs/train"  # checkpoints, final model, metrics.jsonl and TensorBoard logs
    seed: int = 0  # seed of sampling, data order and initialisation (transformers.set_seed)
    max_steps: int = 100  # optimiser updates
    learning_rate: float = 1e-6  # peak learning rate (paper: 1e-6)
    lr_scheduler: str = "constant_with_warmup"  # a transformers scheduler name (lr_scheduler_type)
    warmup_steps: int = 0  # linear warm-up, in optimiser updates (paper: 10)
    weight_decay: float = 0.0  # weight decay (paper: 0.1)
    adam_beta1: float = 0.9  # Adam β1
    adam_beta2: float = 0.999  # Adam β2
    max_grad_norm: float = 1.0  # gradient-norm clipping threshold
    rollout_prompts: int = 8  # prompts sampled per generation round (paper: 256)
    update_prompts: int | None = None  # None: one update per generation round (on-policy)
    group_size: int = 4  # G completions per prompt (paper: 4); at least 2
    micro_batch_size: int | None = None  # None: a whole update's completions per device
    num_iterations: int = 1  # passes over each generation round (PPO epochs)
    max_prompt_length: int | None = 512  # longer prompts (tokens) are dropped, with a warning; None: keep all
    max_completion_length: int = 256  # new tokens per completion (L_max of length shaping by default)
    temperature: float = 1.0  # sampling temperature of the rollouts
    top_p: float = 1.0  # nucleus-sampling threshold of the rollouts
    use_cpu: bool | None = None  # None: CPU when no accelerator is visible
    bf16: bool = False  # bfloat16 mixed precision (GPUs)


@dataclass
class EngineSection:
    # where ResRL weights are computed: "aligned" inside the training forward (needs whole groups
    # per micro-batch and one update per round), "extra-pass" in one no-grad pass over the
    # generation batch, "auto" picks aligned when possible
    resrl_mode: Literal["auto", "aligned", "extra-pass"] = "auto"
    # DAPO dynamic sampling; None = the algorithm's default (on for dapo)
    dynamic_sampling: bool | None = None
    max_refill_rounds: int = 4  # extra generation rounds allowed to refill dropped groups


@dataclass
class EnvSection:
    """Multi-turn rollouts with an environment (resrl.envs); the reward is the environment's
    (`reward.function: env`). Two layouts:

    concat  one growing sequence per trajectory through TRL's `rollout_func`
            (resrl.engines.multiturn): model turns alternate with the environment's answers
    step    verl-agent's layout for long-horizon agents (resrl.engines.steps): every step is its
            own sample, prompted afresh by the environment's `step_prompt()` (a window of the
            last `history_window` steps); environments run in worker processes (resrl.envs.pool)
    """
    # None: single-turn. "bfcl": BFCL multi-turn entries (data.train = bfcl:multi_turn_base, ...),
    # executed on bfcl-eval's API classes (concat layout). "module:function": a factory called once
    # per trajectory with the row's prompt: f(prompt) -> Environment (concat) or
    # f(prompt, history_window=..., **options) -> Environment with step_prompt()/anchor() (step).
    name: str | None = None
    layout: str = "concat"  # concat | step
    max_turns: int = 8  # concat: model turns per trajectory (the total is train.max_completion_length)
    max_step_tokens: int = 256  # new tokens per model turn / per step (verl-agent ALFWorld: 512)
    # ---- step layout ----
    history_window: int = 2  # past (observation, action) pairs in each step prompt (verl-agent: 2)
    max_steps: int = 50  # steps per episode (verl-agent ALFWorld: 50)
    step_timeout_s: float = 60.0  # one environment call; over it the trajectory ends with score 0
    episode_timeout_s: float | None = None  # wall time of a rollout round's episodes (None: no limit)
    num_workers: int = 2  # environment worker processes
    invalid_format_penalty: float = 0.1  # subtracted from a step's reward when info["invalid_format"]
    reward_scale: float = 1.0  # environment rewards x this (verl-agent's ALFWorld pays 10 on a win)
    options: dict = field(default_factory=dict)  # extra keyword arguments of the step-layout factory


@dataclass
class LogSection:
    logging_steps: int = 1  # log every N optimiser updates
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])  # add "wandb" to use W&B
    jsonl: bool = True  # output_dir/metrics.jsonl
    log_completions: bool = False  # also log sampled completions (TRL's log_completions)
    progress: bool = True  # tqdm bar + printed logs; false: quiet (run_training(on_log=...) still gets each step)
    phase_times: bool = False  # log time/<phase>_s and memory/<phase>_peak_gib per step (generation, old log-probs, weights, forward-backward); syncs CUDA at each phase boundary


@dataclass
class CheckpointSection:
    save_steps: int = 0  # 0: only at the end; --resume from any checkpoint continues the run bit for bit
    save_total_limit: int | None = 2  # checkpoints kept (older ones renamed out of sight, then deleted); None: all


def _core_section(name: str):
    """The core's own dataclasses double as config sections, so the YAML keys are the core's."""
    if name == "critic":
        from resrl.core.value import CriticConfig

        return CriticConfig
    if name == "algorithm":
        from resrl.core.registry import AlgorithmConfig

        return AlgorithmConfig
    from resrl.core.loss import LossConfig

    return LossConfig


# GRPOConfig / TrainingArguments fields set from the sections above (engines/trl/fields.MAPPINGS, the
# one mapping table): `trl.<field>` of the same meaning as a resrl key is moved onto it (TRL_KEY_MAP,
# logged, value translated where the two spell it differently); the others differ in meaning (batch
# layout, epochs, ratios) and are refused naming the key to use (TRL_OWNED_FIELDS).
from resrl.engines.trl.fields import trl_key_map as _trl_key_map  # noqa: E402
from resrl.engines.trl.fields import trl_owned_fields as _trl_owned_fields  # noqa: E402

TRL_OWNED_FIELDS: dict[str, str] = _trl_owned_fields()
TRL_KEY_MAP = _trl_key_map()


def map_trl_keys(data: dict) -> dict:
    """Move every `trl.<key>` of TRL_KEY_MAP onto its resrl key(s) (logged); a copy of `data`.
    ConfigError when the resrl key is set too, to another value."""
    trl = data.get("trl")
    if not isinstance(trl, dict) or not any(k in TRL_KEY_MAP for k in trl):
        return data
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    given = dict(data["trl"])

    def get(name: str):  # another trl field (TRL's meaning of one can depend on another: loss_type cispo)
        return given.get(name, TRL_KEY_MAP[name].trl_default)

    for key in [k for k in data["trl"] if k in TRL_KEY_MAP]:
        raw = data["trl"].pop(key)
        try:
            values = TRL_KEY_MAP[key].resrl_values(raw, get)
        except ValueError as exc:
            raise ConfigError(f"config key 'trl.{key}': {exc}") from exc
        for target, value in values.items():
            section, name = target.split(".", 1)
            node = data.setdefault(section, {}) or {}
            data[section] = node
            if name in node and node[name] != value:
                raise ConfigError(f"config keys 'trl.{key}' ({raw!r}) and '{target}' ({node[name]!r}) disagree: "
                                  f"'trl.{key}' is TRL's name for '{target}' = {value!r}; set one")
            node[name] = value
        primary = TRL_KEY_MAP[key].key
        named = sorted(values.items(), key=lambda kv: kv[0] != primary)  # its own key first
        logger.warning("config key 'trl.%s' = %r is TRL's name for %s", key, raw,
                       ", ".join(f"'{t}' = {v!r}" for t, v in named) or "nothing here (see its mapping)")
    return data


def check_trl_section(trl: dict) -> None:
    """Every `trl.<key>` must be a GRPOConfig field that the project does not own and whose loss-side
    effect the project's loss honours; ConfigError naming the key otherwise."""
    import dataclasses as dc

    from trl import GRPOConfig

    from resrl.engines.trl.trainer import UNSUPPORTED_TRL_OPTIONS

    fields = {f.name for f in dc.fields(GRPOConfig) if f.init}
    unsupported = {name: why for name, _, why in UNSUPPORTED_TRL_OPTIONS}
    for key in trl:
        if key in TRL_OWNED_FIELDS:  # (the ones with one resrl equivalent were mapped: TRL_KEY_MAP)
            raise ConfigError(f"config key 'trl.{key}' has no resrl equivalent of the same meaning: use "
                              f"'{TRL_OWNED_FIELDS[key]}' instead")
        if key in unsupported:
            raise ConfigError(f"config key 'trl.{key}' is not supported: {unsupported[key]}")
        if key not in fields:
            import difflib

            close = difflib.get_close_matches(key, fields, n=3)
            raise ConfigError(f"unknown config key 'trl.{key}': not a trl.GRPOConfig field"
                              + (f" (did you mean {', '.join(close)}?)" if close else ""))


@dataclass
class TrainConfig:
    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    reward: RewardSection = field(default_factory=RewardSection)
    algorithm: Any = None  # resrl.core.registry.AlgorithmConfig
    loss: Any = None  # resrl.core.loss.LossConfig (after the algorithm's defaults)
    critic: Any = None  # resrl.core.value.CriticConfig (read by algorithms with a critic: ppo)
    train: TrainSection = field(default_factory=TrainSection)
    engine: EngineSection = field(default_factory=EngineSection)
    # which path samples the rollouts (docs/generation.md)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    env: EnvSection = field(default_factory=EnvSection)
    log: LogSection = field(default_factory=LogSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    trl: dict = field(default_factory=dict)  # GRPOConfig pass-through (see the module docstring)

    def __post_init__(self) -> None:
        if self.algorithm is None:
            self.algorithm = _core_section("algorithm")()
        if self.loss is None:
            self.loss = resolve_loss(self.algorithm.name, {})
        if self.critic is None:
            self.critic = _core_section("critic")()

    # -- derived batch shape -------------------------------------------------------------------
    @property
    def update_prompts(self) -> int:
        return self.train.update_prompts or self.train.rollout_prompts

    @property
    def updates_per_round(self) -> int:
        """Optimiser updates per generation round (rollout_prompts / update_prompts x num_iterations):
        a checkpoint falls between rounds, so checkpoint.save_steps is a multiple of it."""
        return self.train.rollout_prompts // self.update_prompts * self.train.num_iterations

    def micro_batch_size(self, num_processes: int = 1) -> int:
        per_update = self.update_prompts * self.train.group_size
        return self.train.micro_batch_size or per_update // num_processes

    def trl_batch_shape(self, num_processes: int = 1) -> tuple[int, int, int]:
        """(per_device_train_batch_size, gradient_accumulation_steps, steps_per_generation) of TRL."""
        G, micro = self.train.group_size, self.micro_batch_size(num_processes)
        per_update_local = self.update_prompts * G // num_processes
        per_round_local = self.train.rollout_prompts * G // num_processes
        return micro, per_update_local // micro, per_round_local // micro

    def reward_spec(self, problems: list | None = None) -> str:
        """reward.function, or when it is unset: "env" with an env section, else the reward of the
        training data by the rule `resrl eval` and `resrl diagnose` follow
        (`resrl.tasks.registry.reward_for_data`; `problems`: the loaded rows of a data file, which
        a family may recognise by content)."""
        if self.reward.function is not None:
            return self.reward.function
        if self.env.name is not None:
            return "env"
        specs = [self.data.train] if self.data.train else []
        return tasks.reward_for_data(specs, {self.data.train: problems} if problems else None)

    def validate(self, num_processes: int = 1, need_model: bool = True, need_data: bool = True) -> None:
        """Impossible combinations -> ConfigError naming the key. Cheap: no model is loaded."""
        from resrl.core.registry import ALGORITHMS

        t, a = self.train, self.algorithm
        if a.name not in ALGORITHMS:
            raise ConfigError(f"config key 'algorithm.name' must be one of {sorted(ALGORITHMS)}, got {a.name!r}")
        if need_model and not self.model.path:
            raise ConfigError("config key 'model.path' is required (a local Hugging Face model directory)")
        if need_model and self.model.path and not Path(self.model.path).is_dir():
            raise ConfigError(f"config key 'model.path': directory {self.model.path!r} does not exist")
        if need_data and not self.data.train:
            raise ConfigError("config key 'data.train' is required (a jsonl/parquet file or a data set name)")
        for key in ("max_steps", "rollout_prompts", "max_completion_length", "num_iterations"):
            if getattr(t, key) < 1:
                raise ConfigError(f"config key 'train.{key}' must be >= 1, got {getattr(t, key)}")
        if t.group_size < 2:
            raise ConfigError(f"config key 'train.group_size' must be >= 2 (groups need a baseline), got {t.group_size}")
        if t.update_prompts is not None and (t.update_prompts < 1 or t.rollout_prompts % t.update_prompts):
            raise ConfigError(
                f"config key 'train.update_prompts' ({t.update_prompts}) must divide "
                f"train.rollout_prompts ({t.rollout_prompts})"
            )
        per_update = self.update_prompts * t.group_size
        if per_update % num_processes:
            raise ConfigError(
                f"config key 'train.update_prompts': {self.update_prompts} prompts x group_size "
                f"{t.group_size} = {per_update} completions do not split over {num_processes} processes"
            )
        micro = self.micro_batch_size(num_processes)
        if micro < 1 or (per_update // num_processes) % micro:
            raise ConfigError(
                f"config key 'train.micro_batch_size' ({micro}) must divide the completions per update "
                f"and process ({per_update // num_processes} = update_prompts x group_size / processes)"
            )
        if not 0 < t.temperature:
            raise ConfigError(f"config key 'train.temperature' must be > 0, got {t.temperature}")
        if not 0 < t.top_p <= 1:
            raise ConfigError(f"config key 'train.top_p' must be in (0, 1], got {t.top_p}")
        if t.learning_rate <= 0:
            raise ConfigError(f"config key 'train.learning_rate' must be > 0, got {t.learning_rate}")
        if self.checkpoint.save_steps < 0:
            raise ConfigError("config key 'checkpoint.save_steps' must be >= 0")
        updates_per_round = self.updates_per_round
        if self.checkpoint.save_steps and self.checkpoint.save_steps % updates_per_round:
            raise ConfigError(
                f"config key 'checkpoint.save_steps' ({self.checkpoint.save_steps}) must be a multiple of the "
                f"updates per generation round ({updates_per_round}) so that a resumed run regenerates nothing"
            )
        if self.reward.timeout_s <= 0:
            raise ConfigError(f"config key 'reward.timeout_s' must be > 0, got {self.reward.timeout_s}")
        if self.reward.on_error not in ("zero", "raise"):
            raise ConfigError(f"config key 'reward.on_error' must be 'zero' or 'raise', got {self.reward.on_error!r}")
        if self.reward.num_workers < 1:
            raise ConfigError(f"config key 'reward.num_workers' must be >= 1, got {self.reward.num_workers}")
        if self.engine.max_refill_rounds < 0:
            raise ConfigError("config key 'engine.max_refill_rounds' must be >= 0")
        for name in self.log.report_to:
            if name not in ("tensorboard", "wandb", "none"):
                raise ConfigError(f"config key 'log.report_to' accepts tensorboard, wandb, none; got {name!r}")
        if a.name == "passk" and a.passk_k >= t.group_size:
            raise ConfigError(f"config key 'algorithm.passk_k' = {a.passk_k} must be < 'train.group_size' = "
                              f"{t.group_size}: Pass@k training scores the k-subsets of each group, and with "
                              "k = group size every response's advantage is 0")
        from resrl.core.registry import resolve_policy_loss

        try:  # the policy loss (loss.policy_loss or the algorithm's own) and the options it reads
            resolve_policy_loss(a.name, self.loss)
        except ValueError as exc:
            import re

            match = re.search(r"LossConfig\.(\w+)", str(exc))
            raise ConfigError(f"config key 'loss.{match.group(1) if match else 'policy_loss'}': {exc}") from exc
        if self.model.trainable_layers is not None:
            if self.model.trainable_layers < 1:
                raise ConfigError(f"config key 'model.trainable_layers' must be >= 1 (or null: every parameter "
                                  f"trains), got {self.model.trainable_layers}")
            if self.model.lora is not None:
                raise ConfigError("config keys 'model.trainable_layers' and 'model.lora' exclude each other: LoRA "
                                  "trains its adapters only, trainable_layers a model's own top layers")
        lora = self.model.lora
        if lora is not None:
            if lora.r < 1 or lora.alpha <= 0 or not 0 <= lora.dropout < 1:
                raise ConfigError("config key 'model.lora' needs r >= 1, alpha > 0 and 0 <= dropout < 1, "
                                  f"got r={lora.r}, alpha={lora.alpha}, dropout={lora.dropout}")
        if self.trl:
            check_trl_section(self.trl)
        from resrl.engines.trl.generation import trl_flags
        from resrl.models.generation_paths import check_settings

        try:  # the generation path's settings, and TRL's flags that name a path
            check_settings(self.generation)
            trl_flags(self.generation, self.trl)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if (self.env.name is not None) != (self.reward_spec() == "env"):
            raise ConfigError("config keys 'env.name' and 'reward.function': a multi-turn environment scores its own "
                              "trajectories, so set both (env.name: bfcl | module:function, reward.function: env) "
                              "or neither")
        if self.env.name is not None and (self.env.max_turns < 1 or self.env.max_step_tokens < 1):
            raise ConfigError("config keys 'env.max_turns' and 'env.max_step_tokens' must be >= 1")
        self._validate_env()
        # the combination rules the trainer checks too (one copy: resrl.engines.trl.rules)
        from resrl.engines.trl import rules

        rules.check(self.run_layout(num_processes), "config", ConfigError)
        family_env = tasks.env_spec(self.env.name)  # a task family's environment: its data
        if family_env is not None and family_env.data is not None \
                and tasks.family_for_data(str(self.data.train or "")) is not tasks.family_for_env(self.env.name):
            raise ConfigError(f"config key 'env.name' is {self.env.name}: data.train must be {family_env.data}")

    def _validate_env(self) -> None:
        e = self.env
        if e.layout not in ("concat", "step"):
            raise ConfigError(f"config key 'env.layout' must be concat or step, got {e.layout!r}")
        family_env = tasks.env_spec(e.name)  # a task family's environment: the layouts it trains with
        if e.layout != "step":
            if family_env is not None and e.layout not in family_env.layouts:
                raise ConfigError(f"config key 'env.layout': env.name {e.name} trains with env.layout: "
                                  f"{' or '.join(family_env.layouts)} ({family_env.layout_reason})")
            return
        if e.name is None or (family_env is not None and "step" not in family_env.layouts):
            raise ConfigError("config key 'env.name': env.layout step needs an agent environment "
                              f"({' or '.join([*tasks.step_env_names(), 'a module:function factory'])}), got "
                              + repr(e.name))
        for key, ok, allowed in (("max_steps", e.max_steps >= 1, ">= 1"), ("history_window", e.history_window >= 0, ">= 0"),
                                 ("max_step_tokens", e.max_step_tokens >= 1, ">= 1"),
                                 ("step_timeout_s", e.step_timeout_s > 0, "> 0"),
                                 ("episode_timeout_s", e.episode_timeout_s is None or e.episode_timeout_s > 0, "> 0 or null"),
                                 ("num_workers", e.num_workers >= 1, ">= 1"),
                                 ("invalid_format_penalty", e.invalid_format_penalty >= 0, ">= 0"),
                                 ("reward_scale", e.reward_scale > 0, "> 0")):
            if not ok:
                raise ConfigError(f"config key 'env.{key}' must be {allowed}, got {getattr(e, key)!r}")
        if not isinstance(e.options, dict):
            raise ConfigError(f"config key 'env.options' must be a mapping, got {e.options!r}")
        # (the step layout's combinations with algorithms and engine settings: resrl.engines.trl.rules)

    @property
    def dynamic_sampling(self) -> bool:
        if self.engine.dynamic_sampling is not None:
            return self.engine.dynamic_sampling
        from resrl.core.registry import ALGORITHMS

        return bool(ALGORITHMS[self.algorithm.name].dynamic_sampling)

    def run_layout(self, num_processes: int = 1):
        """The run as the engine's combination rules see it (resrl.engines.trl.rules.RunLayout)."""
        from resrl.engines.trl.rules import RunLayout

        micro, accumulation, per_round = self.trl_batch_shape(num_processes)
        return RunLayout(self.algorithm, self.env.name is not None and self.env.layout == "step",
                         self.engine.resrl_mode, self.engine.dynamic_sampling, self.train.group_size, micro, per_round,
                         accumulation, self.train.num_iterations, num_processes,
                         use_vllm=bool(self.trl.get("use_vllm", False)) or self.generation.backend == "vllm")

    def aligned_possible(self, num_processes: int = 1) -> bool:
        return self.run_layout(num_processes).aligned_possible

    def to_dict(self) -> dict:
        return to_dict(self)


def resolve_loss(algorithm_name: str, given: dict, prefix: str = "loss.") -> Any:
    """LossConfig = LossConfig defaults <- the algorithm's loss_defaults <- keys the user gave
    (resrl.core.registry.resolve_settings, which the TRL engine's Python path calls too)."""
    from resrl.core.registry import ALGORITHMS, resolve_settings

    LossConfig = _core_section("loss")
    merged = dict(given)
    if algorithm_name in ALGORITHMS:
        merged = resolve_settings({"name": algorithm_name}, given, given.get("max_response_length"))[1]
    return from_dict(LossConfig, merged, prefix=prefix)


def config_from_dict(data: dict) -> TrainConfig:
    """Nested dict (parsed YAML + overrides) -> validated-typed TrainConfig. TRL's names for resrl's
    keys under `trl:` are mapped first (`map_trl_keys`)."""
    data = map_trl_keys(dict(data or {}))
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    for key in data:
        if key not in known:
            raise ConfigError(f"unknown config section '{key}' (valid: {', '.join(sorted(known))})")
    sections = {}
    for f in dataclasses.fields(TrainConfig):
        if f.name in ("algorithm", "loss", "critic", "trl") or f.name not in data:
            continue
        sections[f.name] = from_dict(_SECTION_TYPES[f.name], data[f.name] or {}, prefix=f"{f.name}.")
    from resrl.core.registry import ALGORITHMS

    given_algorithm = dict(data.get("algorithm") or {})
    name = given_algorithm.get("name", "grpo")
    from resrl.core.registry import UNSUPPORTED_COMBINATIONS

    if name in UNSUPPORTED_COMBINATIONS:
        raise ConfigError(f"config key 'algorithm.name': {name!r} is not supported: {UNSUPPORTED_COMBINATIONS[name]}")
    if name not in ALGORITHMS:
        raise ConfigError(f"config key 'algorithm.name' must be one of {sorted(ALGORITHMS)}, got {name!r}")
    train_section = sections.get("train", TrainSection())
    # the algorithm's defaults (reward shaping, loss_defaults), algorithm.resrl.preset, then the keys
    # the user gave; L_max and Dr.GRPO's normaliser default to the completion budget. One function,
    # shared with the TRL engine's Python path (ResRLTrainer(algorithm="dapo") = algorithm.name: dapo)
    from resrl.core.registry import resolve_settings

    try:
        given_algorithm, given_loss = resolve_settings(given_algorithm, data.get("loss") or {},
                                                       train_section.max_completion_length)
    except ValueError as exc:
        raise ConfigError(f"config key 'algorithm.resrl.preset': {exc}") from exc
    algorithm = from_dict(_core_section("algorithm"), given_algorithm, prefix="algorithm.")
    loss = from_dict(_core_section("loss"), given_loss, prefix="loss.")
    critic = from_dict(_core_section("critic"), data.get("critic") or {}, prefix="critic.")
    if data.get("critic") and not ALGORITHMS[name].needs_values:
        logger.warning("config section 'critic' is read by algorithms with a critic (ppo) only; algorithm.name is "
                       "%r: its keys (%s) have no effect", name, ", ".join(sorted(data["critic"])))
    trl = data.get("trl") or {}
    if not isinstance(trl, dict):
        raise ConfigError(f"config section 'trl' must be a mapping of trl.GRPOConfig fields, got {trl!r}")
    return TrainConfig(algorithm=algorithm, loss=loss, critic=critic, trl=dict(trl), **sections)


_SECTION_TYPES = {
    "model": ModelSection, "data": DataSection, "reward": RewardSection, "train": TrainSection,
    "engine": EngineSection, "generation": GenerationSettings, "env": EnvSection, "log": LogSection, "checkpoint": CheckpointSection,
}


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Read YAML `path` (optional), apply `section.key=value` overrides, build and type-check."""
    import yaml

    data: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} not found")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping of sections")
    apply_overrides(data, overrides or [])
    return config_from_dict(data)


__all__ = [
    "ConfigError", "TrainConfig", "ModelSection", "LoraSection", "TRL_OWNED_FIELDS", "TRL_KEY_MAP", "map_trl_keys", "check_trl_section", "DataSection", "RewardSection", "TrainSection",
    "EngineSection", "LogSection", "CheckpointSection", "load_config", "config_from_dict",
    "resolve_loss", "explicit_keys",
]
