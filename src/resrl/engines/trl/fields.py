"""GRPOConfig <-> resrl: the ONE mapping table (`MAPPINGS`), and what `ResRLTrainer` does with every
other field of TRL's `GRPOConfig` (TRL 1.16), beside `engines/trl/compat.py`.

`MAPPINGS` pairs a GRPOConfig / TrainingArguments field with the resrl config key of the same
setting. Everything that translates between the two names derives from it:

    resrl train's YAML   `trl.<field>` of the same meaning is moved onto its key (`trl_key_map`,
                         used by train/config.py's map_trl_keys); a field a key sets with another
                         meaning (batch shape, epochs) is refused naming the key (`trl_owned_fields`)
    grpo_args            the GRPOConfig a `resrl train` run hands to TRL: every mapping with `to_trl`
                         (`grpo_config_values`, called by train/runner.py)
    ResRLTrainer         the loss / algorithm fields of a GRPOConfig in resrl's terms
                         (`resolve_trainer_settings`), the flat fields of ResRLGRPOConfig that TRL
                         already names (`trl_named_settings`, engines/trl/config.py) and the
                         "mapped" category of the field table below
    the compat record    what TRL's `_compute_loss` reads (resrl.engines.trl.compat.COMPUTE_LOSS_READS)

Per-algorithm facts (which advantage reads `scale_rewards`) are on the algorithm's registry entry
(`resrl.core.registry.AlgorithmSpec.reads_scale_rewards / fixed_scale`).

Each GRPOConfig field is in exactly one category (`GRPO_CONFIG_FIELDS`; `tests/test_trl_fields.py`
enumerates `dataclasses.fields(GRPOConfig)` against it, so a TRL release that adds a field fails the
test until it is classified here):

    honoured    TRL (or transformers.Trainer) applies it exactly as in GRPOTrainer: generation,
                rewards, vLLM, logging, batching, the optimiser, ... ResRLTrainer replaces only the
                advantages and the loss, and the loss options listed here it applies as TRL does.
    mapped      TRL's loss or advantage setting, applied through resrl's own setting (`MAPPINGS`
                with a loss / algorithm key): beta -> loss.kl_coef, loss_type -> loss.policy_loss and
                loss.agg, ...
    refused     a setting resrl's loss would not apply: a non-default value is a ValueError that
                names the field and what to use instead (`refusal`).
    irrelevant  no effect on GRPO training in TRL either (evaluation-metric and label options of
                transformers.Trainer that GRPOTrainer never reads).

Defaults where TRL and the paper disagree: a mapped field left at TRL's default does not replace
the algorithm's default (resrl's documented one); the trainer logs each such difference once
(`default_differences`). The main case: TRL's `loss_type="dapo"` (token-mean) against the paper's
per-sequence mean (`seq-mean-token-mean`) for grpo / resrl / nsr / ...; set `loss_type` (or
`ResRLGRPOConfig.loss_agg`) to choose. With an explicit, non-default value, TRL's meaning wins.

This module holds no math and imports no TRL (nor torch until a resolver runs): the table is data,
the resolver builds dataclasses.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # resrl.core (torch) is imported where it is used: the table is read by torch-free code
    from resrl.core.loss import LossConfig
    from resrl.core.registry import AlgorithmConfig

logger = logging.getLogger(__name__)

HONOURED, MAPPED, REFUSED, IRRELEVANT = "honoured", "mapped", "refused", "irrelevant"
CATEGORIES = (HONOURED, MAPPED, REFUSED, IRRELEVANT)

# ---- the mapping table ------------------------------------------------------------------------------

Get = Callable[[str], Any]  # another GRPOConfig field's value (TRL's meaning can depend on it)


@dataclass(frozen=True)
class Mapping:
    """One GRPOConfig field and the resrl config key of the same setting.

    trl:         the GRPOConfig / TrainingArguments field
    key:         the resrl config key ("loss.kl_coef", "train.seed", ...)
    trl_default: GRPOConfig's default (tests/test_trl_compat.py checks it against TRL's): a loss /
                 algorithm field left at it does not replace the algorithm's own setting
    same:        True: the same meaning, so `trl.<field>` is moved onto `key` and ResRLTrainer applies
                 the field through it; False: `key` sets the field with another meaning (batch shape,
                 epochs), so `trl.<field>` is refused naming `key`
    to_resrl:    (TRL's value, get) -> {resrl key: value}; None: {key: value}
    to_trl:      resrl's value -> TRL's, for the GRPOConfig of a `resrl train` run; None: the same
                 value; False: the run's GRPOConfig does not take it from `key` (grpo_args computes
                 it, or it is a loss setting TRL's replaced loss never reads)
    note:        what the mapping means where the name alone does not say it
    owns_key:    TRL's name is the way to set `key` in a ResRLGRPOConfig (no flat `loss_<name>` field);
                 False where the field sets several keys and resrl's own name gives finer control
                 (loss_type: loss_policy_loss / loss_agg; entropy_coef: loss_entropy_coef)
    """

    trl: str
    key: str
    trl_default: Any = None
    same: bool = True
    to_resrl: Callable[[Any, Get], dict] | None = None
    to_trl: Callable[[Any], Any] | None | bool = None
    note: str = ""
    owns_key: bool = True

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    def resrl_values(self, value: Any, get: Get) -> dict:
        """TRL's `value` of this field as {resrl key: value}."""
        return self.to_resrl(value, get) if self.to_resrl is not None else {self.key: value}


# loss_type -> (loss.policy_loss, loss.agg): TRL 1.16 _compute_loss's per-token terms and normalisers
LOSS_TYPES = {
    "grpo": ("clipped-surrogate", "seq-mean-token-mean"),      # per-sequence mean, then the mean over sequences
    "dapo": ("clipped-surrogate", "token-mean"),               # tokens of the accumulation window (num_items_in_batch)
    "bnpo": ("clipped-surrogate", "token-mean"),               # tokens of the micro-batch: dapo's with one micro-batch
    "dr_grpo": ("clipped-surrogate", "seq-mean-token-sum-norm"),  # sum / (B * max_completion_length)
    "luspo": ("clipped-surrogate", "seq-mean-token-sum"),      # each response's sum, then the mean over responses
    "cispo": ("cispo", "token-mean"),
    "sapo": ("sapo", "seq-mean-token-mean"),
    "vespo": ("vespo", "token-mean"),
}


def _loss_type(value, get: Get) -> dict:
    if value not in LOSS_TYPES:
        raise ValueError(f"GRPOConfig.loss_type={value!r} is not a TRL 1.16 loss type: choose one of "
                         f"{sorted(LOSS_TYPES)}")
    policy_loss, agg = LOSS_TYPES[value]
    out = {"loss.policy_loss": policy_loss, "loss.agg": agg}
    if value == "cispo":  # TRL's CISPO weight: clamp(ρ, max=epsilon_high), no lower bound
        cap = get("epsilon_high") if get("epsilon_high") is not None else get("epsilon")
        if cap < 1:
            raise ValueError(f"GRPOConfig.loss_type='cispo' caps the importance weight at epsilon_high (TRL's "
                             f"ε_max, 5.0 in ScaleRL): {cap!r} caps it below 1, which resrl's cispo does not "
                             "support; set epsilon_high >= 1")
        out.update({"loss.clip_eps_low": 1.0, "loss.clip_eps_high": cap - 1.0})
    return out


def _epsilon(value, get: Get) -> dict:
    return {} if get("loss_type") == "cispo" else {"loss.clip_eps_low": value}  # (cispo: _loss_type's)


def _epsilon_high(value, get: Get) -> dict:
    return {} if get("loss_type") == "cispo" or value is None else {"loss.clip_eps_high": value}


def _scale_rewards(value, get: Get) -> dict:
    return {"algorithm.scale_rewards": {True: "group", False: "none"}.get(value, value)}


def _entropy_coef(value, get: Get) -> dict:
    # TRL's bonus is the mean per-token entropy whatever loss_type aggregates the policy term with
    return {"loss.entropy_coef": value, **({"loss.entropy_agg": "token-mean"} if value else {})}


def _same(trl: str, key: str, default=None, **kw) -> Mapping:
    return Mapping(trl, key, default, True, **kw)


def _owned(trl: str, key: str) -> Mapping:
    return Mapping(trl, key, None, False, to_trl=False)


MAPPINGS: tuple[Mapping, ...] = (
    # ---- the loss and the advantage (ResRLTrainer maps them; category "mapped") -----------------------
    _same("beta", "loss.kl_coef", 0.0, note="TRL's k3 KL to the reference, added per token before aggregation"),
    _same("epsilon", "loss.clip_eps_low", 0.2, to_resrl=_epsilon, note="ratio clipped below at 1 - epsilon"),
    _same("epsilon_high", "loss.clip_eps_high", None, to_resrl=_epsilon_high,
          note="None: the algorithm's default if it has one (DAPO: 0.28), else epsilon (TRL's None); "
               "with loss_type='cispo' the weight's cap: loss.clip_eps_high = epsilon_high - 1"),
    _same("delta", "loss.delta", None, note="two-sided clipping (INTELLECT-2): the unclipped ratio capped at delta"),
    _same("loss_type", "loss.agg", "dapo", to_resrl=_loss_type, to_trl=False, owns_key=False,
          note="loss.policy_loss and loss.agg: " + "; ".join(f"{t} -> {p} + {a}" for t, (p, a) in LOSS_TYPES.items())
               + " (cispo: clip_eps_low 1, the cap epsilon_high). TRL's default 'dapo' does not replace the "
               "algorithm's aggregation (the paper's seq-mean-token-mean for grpo)"),
    _same("scale_rewards", "algorithm.scale_rewards", "group", to_resrl=_scale_rewards, to_trl=False,
          note="group | batch | none, for the algorithms whose advantage reads it (AlgorithmSpec."
               "reads_scale_rewards); refused for the others"),
    _same("importance_sampling_level", "loss.importance_sampling_level", "token", to_trl=False,
          note="GSPO's sequence ratio, as TRL computes it"),
    _same("top_entropy_quantile", "loss.top_entropy_quantile", 1.0, to_trl=False, note="TRL's high-entropy mask"),
    _same("off_policy_mask_threshold", "loss.off_policy_mask_threshold", None, to_trl=False,
          note="DeepSeek-V3.2's off-policy sequence mask, against vLLM's sampling log-probs when TRL has them"),
    _same("entropy_coef", "loss.entropy_coef", 0.0, to_resrl=_entropy_coef, to_trl=False, owns_key=False,
          note="and loss.entropy_agg='token-mean': TRL's bonus is the mean per-token entropy whatever the loss"),
    _same("sapo_temperature_neg", "loss.sapo_temperature_neg", 1.05, to_trl=False),
    _same("sapo_temperature_pos", "loss.sapo_temperature_pos", 1.0, to_trl=False),
    _same("vespo_k_pos", "loss.vespo_k_pos", 2.0, to_trl=False),
    _same("vespo_lambda_pos", "loss.vespo_lambda_pos", 3.0, to_trl=False),
    _same("vespo_k_neg", "loss.vespo_k_neg", 3.0, to_trl=False),
    _same("vespo_lambda_neg", "loss.vespo_lambda_neg", 2.0, to_trl=False),
    # ---- resrl train's other sections (the YAML path; ResRLTrainer leaves these to TRL) -----------------
    _same("max_completion_length", "train.max_completion_length", 512,
          note="generation budget (TRL's) and the default of loss.max_response_length (Dr.GRPO's normaliser, "
               "as TRL's dr_grpo) and of algorithm.max_response_length"),
    *(_same(k, f"train.{k}") for k in ("output_dir", "seed", "max_steps", "learning_rate", "warmup_steps",
                                        "weight_decay", "adam_beta1", "adam_beta2", "max_grad_norm",
                                        "num_iterations", "temperature", "top_p", "bf16")),
    _same("use_cpu", "train.use_cpu", to_trl=False),                   # grpo_args: CPU when no accelerator
    _same("max_prompt_length", "train.max_prompt_length", to_trl=False),  # (not a TRL 1.16 field: older TRL's)
    _same("lr_scheduler_type", "train.lr_scheduler"),
    _same("num_generations", "train.group_size"),
    _same("gradient_checkpointing", "model.gradient_checkpointing", to_trl=False),  # grpo_args: checkpointing_args
    _same("logging_steps", "log.logging_steps"),
    _same("report_to", "log.report_to", to_resrl=lambda v, get: {"log.report_to": [v] if isinstance(v, str) else v},
          to_trl=lambda v: [r for r in v if r != "none"] or "none"),
    _same("log_completions", "log.log_completions"),
    _same("disable_tqdm", "log.progress", to_resrl=lambda v, get: {"log.progress": not v}, to_trl=lambda v: not v),
    _same("save_steps", "checkpoint.save_steps", to_trl=lambda v: v or 500),  # (save_strategy "no" when 0)
    _same("save_total_limit", "checkpoint.save_total_limit"),
    # ---- fields a resrl key sets with another meaning: `trl.<field>` refused naming the key ---------------
    _owned("num_train_epochs", "train.max_steps"), _owned("warmup_ratio", "train.warmup_steps"),
    _owned("per_device_train_batch_size", "train.micro_batch_size"),
    _owned("gradient_accumulation_steps", "train.update_prompts"),
    _owned("steps_per_generation", "train.rollout_prompts"), _owned("generation_batch_size", "train.rollout_prompts"),
    _owned("use_adaptive_entropy", "loss.entropy_coef"), _owned("use_bias_correction_kl", "loss.kl_estimator"),
    _owned("reward_weights", "reward.function"), _owned("save_strategy", "checkpoint.save_steps"),
)
MAPPING = {m.trl: m for m in MAPPINGS}
if len(MAPPING) != len(MAPPINGS):
    raise RuntimeError("engines/trl/fields.MAPPINGS names a GRPOConfig field twice")
# the mappings ResRLTrainer applies (loss and algorithm settings of the same meaning)
LOSS_MAPPINGS = tuple(m for m in MAPPINGS if m.same and m.section in ("loss", "algorithm"))


def trl_key_map() -> dict[str, Mapping]:
    """`trl.<field>` -> its Mapping, for the fields of the same meaning as a resrl key (moved onto it)."""
    return {m.trl: m for m in MAPPINGS if m.same}


def trl_owned_fields() -> dict[str, str]:
    """GRPOConfig field -> the resrl key that sets it (a `trl.<field>` is never handed to TRL as is)."""
    return {m.trl: m.key for m in MAPPINGS}


def trl_named_settings() -> dict[str, set[str]]:
    """{"loss": {...}, "algorithm": {...}}: the resrl settings ResRLTrainer takes from GRPOConfig's own
    names (ResRLGRPOConfig has no flat `loss_<name>` field for them)."""
    out: dict[str, set[str]] = {"loss": set(), "algorithm": set()}
    for m in LOSS_MAPPINGS:
        if m.owns_key:
            out[m.section].add(m.key.split(".", 1)[1])
    return out


def grpo_config_values(get: Callable[[str], Any]) -> dict[str, Any]:
    """The GRPOConfig fields a `resrl train` run takes from its keys: {field: TRL's value}; `get(key)`
    reads a dotted resrl key of the run's TrainConfig (train/runner.py's grpo_args adds the fields it
    computes: the batch shape, the device, checkpointing and saving)."""
    return {m.trl: (m.to_trl or (lambda v: v))(get(m.key)) for m in MAPPINGS if m.same and m.to_trl is not False}


# ---- every GRPOConfig field ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    category: str
    note: str
    # refused: the value(s) that are accepted (TRL's default, meaning "off"); anything else raises
    accepted: tuple = ()
    # refused only when this is true of the config (e.g. use_bias_correction_kl only matters with beta != 0)
    applies: Callable[[Any], bool] | None = None


def _h(note: str = "") -> Field:
    return Field(HONOURED, note or "applied by TRL / transformers.Trainer as in GRPOTrainer")


def _r(note: str, *accepted, applies=None) -> Field:
    return Field(REFUSED, note, tuple(accepted), applies)


def _i(note: str = "not read by GRPOTrainer's training (evaluation metrics / labels of transformers.Trainer)") -> Field:
    return Field(IRRELEVANT, note)


_GEN = "generation (TRL's, unchanged)"
_VLLM = "vLLM generation (TRL's, unchanged)"
_LOG = "completion logging (TRL's, unchanged)"
_TRAINER = "transformers.Trainer's setting, unchanged"
_ADAPTIVE = ("TRL's adaptive entropy controller (a coefficient that changes from step to step): not part of "
             "resrl's loss; use the fixed bonus entropy_coef")

GRPO_CONFIG_FIELDS: dict[str, Field] = {
    # ---- the mapped ones: MAPPINGS ------------------------------------------------------------------------
    **{m.trl: Field(MAPPED, " ".join(filter(None, [f"-> {m.key}", m.note]))) for m in LOSS_MAPPINGS},
    "max_completion_length": Field(MAPPED, MAPPING["max_completion_length"].note),
    # ---- GRPOConfig's own fields ----------------------------------------------------------------
    "model_init_kwargs": _h("model loading (TRL's)"),
    "trust_remote_code": _h("model loading (TRL's)"),
    "router_aux_loss_coef": _h("MoE load-balancing loss, added as TRL adds it"),
    "disable_dropout": _h("TRL's"),
    "cast_lm_head_to_fp32": _h("TRL's"),
    "num_generations": _h("the group size G"),
    "num_generations_eval": _h("evaluation's group size"),
    "ds3_gather_for_generation": _h(_GEN), "shuffle_dataset": _h("TRL's sampler"),
    "pad_to_multiple_of": _h(_GEN), "generation_batch_size": _h("TRL's batch layout"),
    "steps_per_generation": _h("TRL's batch layout"), "temperature": _h(_GEN), "top_p": _h(_GEN),
    "top_k": _h(_GEN), "min_p": _h(_GEN), "generation_kwargs": _h(_GEN), "chat_template_kwargs": _h(_GEN),
    "repetition_penalty": _h(_GEN), "cache_implementation": _h(_GEN),
    "use_vllm": _h(_VLLM), "vllm_mode": _h(_VLLM), "vllm_model_impl": _h(_VLLM),
    "vllm_enable_sleep_mode": _h(_VLLM), "vllm_structured_outputs_regex": _h(_VLLM),
    "vllm_server_base_url": _h(_VLLM), "vllm_server_host": _h(_VLLM), "vllm_server_port": _h(_VLLM),
    "vllm_server_timeout": _h(_VLLM), "vllm_group_port": _h(_VLLM), "vllm_gpu_memory_utilization": _h(_VLLM),
    "vllm_max_model_length": _h(_VLLM), "vllm_tensor_parallel_size": _h(_VLLM),
    "num_iterations": _h("updates per generation round (TRL's buffering)"),
    "reward_weights": _h("the weighted sum of the reward functions (TRL's weights)"),
    "multi_objective_aggregation": _r("rewards are summed (weighted) before the algorithm's advantage: "
                                      "'normalize_then_sum' (GDPO) is not applied", "sum_then_normalize"),
    "mask_truncated_completions": _h("TRL zeroes truncated completions' mask; resrl's loss and advantages "
                                     "read that mask"),
    "sync_ref_model": _h("TRL's reference-sync callback (with beta != 0)"),
    "ref_model_mixup_alpha": _h("TRL's reference-sync callback"),
    "ref_model_sync_steps": _h("TRL's reference-sync callback"),
    "use_adaptive_entropy": _r(_ADAPTIVE, False), "entropy_coef_min": _r(_ADAPTIVE, 0.0),
    "entropy_coef_max": _r(_ADAPTIVE, 1.0), "entropy_coef_delta": _r(_ADAPTIVE, 0.005),
    "entropy_target": _r(_ADAPTIVE, 0.2),
    "max_tool_calling_iterations": _h("multi-turn tool calling (TRL's)"),
    "vllm_importance_sampling_correction": _h("applied in resrl.core.loss.policy_loss as TRL applies it (VESPO: "
                                              "folded into its sequence weight, as TRL does)"),
    "vllm_importance_sampling_mode": _h("TRL computes the weights; resrl's loss applies them"),
    "vllm_importance_sampling_clip_max": _h("TRL computes the weights"),
    "vllm_importance_sampling_clip_min": _h("TRL computes the weights"),
    "vllm_importance_sampling_cap": _h("TRL computes the weights"),
    "use_bias_correction_kl": _r("resrl's KL term has no importance-ratio correction: set "
                                 "use_bias_correction_kl=False (no effect on-policy, num_iterations=1)",
                                 False, applies=lambda args: getattr(args, "beta", 0.0) != 0.0),
    "log_completions": _h(_LOG), "log_multimodal": _h(_LOG), "num_completions_to_print": _h(_LOG),
    "log_unique_prompts": _h(_LOG), "log_completions_hub_repo": _h(_LOG),
    "use_transformers_continuous_batching": _h(_GEN), "transformers_continuous_batching_config": _h(_GEN),
    "use_transformers_paged": _h(_GEN),
    # ---- transformers.TrainingArguments' fields (GRPOConfig inherits them) ------------------------
    "use_liger_kernel": _r("Liger's fused GRPO loss would bypass resrl.core's loss", False),
    "liger_kernel_config": _r("Liger's fused GRPO loss would bypass resrl.core's loss", None),
    "per_device_train_batch_size": _h("micro-batch (TRL's batch layout)"),
    "gradient_accumulation_steps": _h("micro-batches per update (TRL's batch layout; token-mean's window)"),
    "seed": _h("TRL's sampler and generation seed"),
    "gradient_checkpointing": _h("also in the engine's own no-grad passes"),
    "gradient_checkpointing_kwargs": _h(_TRAINER),
    **{name: _i() for name in (
        "label_names", "label_smoothing_factor", "prediction_loss_only", "include_for_metrics",
        "batch_eval_metrics", "eval_do_concat_batches", "eval_use_gather_object", "metric_for_best_model",
        "greater_is_better", "load_best_model_at_end", "length_column_name", "train_sampling_strategy",
        "do_predict", "neftune_noise_alpha")},
    **{name: _h(_TRAINER) for name in (
        "accelerator_config", "activation_checkpointing", "activation_checkpointing_kwargs", "adam_beta1",
        "adam_beta2", "adam_epsilon", "auto_find_batch_size", "average_tokens_across_devices", "bf16",
        "bf16_full_eval", "data_seed", "dataloader_drop_last", "dataloader_in_order",
        "dataloader_multiprocessing_context", "dataloader_num_workers", "dataloader_persistent_workers",
        "dataloader_pin_memory", "dataloader_prefetch_factor", "ddp_backend", "ddp_broadcast_buffers",
        "ddp_bucket_cap_mb", "ddp_find_unused_parameters", "ddp_static_graph", "ddp_timeout", "debug",
        "deepspeed", "disable_tqdm", "do_eval", "do_train", "enable_jit_checkpoint", "eval_accumulation_steps",
        "eval_delay", "eval_on_start", "eval_steps", "eval_strategy", "fp16", "fp16_full_eval", "fsdp",
        "fsdp_config", "full_determinism", "hub_always_push", "hub_model_id", "hub_private_repo", "hub_revision",
        "hub_strategy", "hub_token", "ignore_data_skip", "include_num_input_tokens_seen", "learning_rate",
        "local_rank", "log_level", "log_level_replica", "log_on_each_node", "logging_first_step",
        "logging_nan_inf_filter", "logging_steps", "logging_strategy", "lr_scheduler_kwargs", "lr_scheduler_type",
        "max_grad_norm", "max_steps", "num_train_epochs", "optim", "optim_args", "optim_target_modules",
        "output_dir", "parallelism_config", "per_device_eval_batch_size", "project", "push_to_hub",
        "remove_unused_columns", "report_to", "restore_callback_states_from_checkpoint", "resume_from_checkpoint",
        "run_name", "save_on_each_node", "save_only_model", "save_steps", "save_strategy", "save_total_limit",
        "skip_memory_metrics", "tf32", "torch_compile", "torch_compile_backend", "torch_compile_mode",
        "torch_empty_cache_steps", "trackio_bucket_id", "trackio_space_id", "trackio_static_space_id",
        "use_cache", "use_cpu", "warmup_steps", "weight_decay")},
}


def category_counts() -> dict[str, int]:
    counts = dict.fromkeys(CATEGORIES, 0)
    for f in GRPO_CONFIG_FIELDS.values():
        counts[f.category] += 1
    return counts


def refusal(args) -> str | None:
    """The first refused field `args` sets, as an error message naming it and what to use; None if none."""
    for name, f in GRPO_CONFIG_FIELDS.items():
        if f.category != REFUSED or not hasattr(args, name):
            continue
        value = getattr(args, name)
        if value in f.accepted or (f.applies is not None and not f.applies(args)):
            continue
        accepted = " or ".join(repr(a) for a in f.accepted)
        return f"GRPOConfig.{name}={value!r} is not supported by ResRLTrainer (leave it at {accepted}): {f.note}"
    return None


def _getter(args) -> Get:
    def get(name: str):
        value = getattr(args, name, MAPPING[name].trl_default)
        if name == "loss_type" and value is None:  # ResRLGRPOConfig's "the algorithm's": not a cispo cap
            return None
        return value
    return get


def _split(values: dict) -> tuple[dict, dict]:
    """{"loss.x": v, "algorithm.y": w} -> ({y: w}, {x: v})."""
    algorithm, loss = {}, {}
    for key, value in values.items():
        section, name = key.split(".", 1)
        (loss if section == "loss" else algorithm)[name] = value
    return algorithm, loss


def trl_given(args) -> tuple[dict, dict, dict[str, str]]:
    """The mapped GRPOConfig fields `args` sets to a value other than their default, as ({algorithm field:
    value}, {loss field: value}) in resrl's terms, and which TRL field gave each resrl setting."""
    # the config class's own defaults (ResRLGRPOConfig: None for loss_type / scale_rewards, so that an
    # explicit "dapo" / "group" is applied there)
    own = {f.name: f.default for f in dataclasses.fields(args)} if dataclasses.is_dataclass(args) else {}
    values, source = {}, {}
    get = _getter(args)
    for m in LOSS_MAPPINGS:
        value = getattr(args, m.trl, m.trl_default)
        if value is None or value == own.get(m.trl, m.trl_default):
            continue
        for key, v in m.resrl_values(value, get).items():
            if key in values and values[key] != v:
                raise ValueError(f"GRPOConfig.{m.trl}={value!r} (-> {key}={v!r}) conflicts with "
                                 f"GRPOConfig.{source[key]} (-> {key}={values[key]!r})")
            values[key], source[key] = v, m.trl
    algorithm, loss = _split(values)
    return algorithm, loss, source


def default_differences(args, algorithm: AlgorithmConfig, loss: LossConfig) -> list[str]:
    """The mapped GRPOConfig fields left at TRL's default whose resrl value differs (resrl's stays)."""
    from resrl.core.registry import get_algorithm

    notes = []
    get = _getter(args)
    for m in LOSS_MAPPINGS:
        value = getattr(args, m.trl, m.trl_default)
        if value is None and m.trl == "epsilon_high":
            value = getattr(args, "epsilon", MAPPING["epsilon"].trl_default)
        elif value is None and m.trl_default is not None:
            value = m.trl_default  # ResRLGRPOConfig's None: "not set", i.e. TRL's default was not applied
        elif value != m.trl_default:
            continue
        if value is None:
            continue
        theirs = {m.key: value} if m.trl == "epsilon_high" else m.resrl_values(value, get)
        for key, v in theirs.items():
            section, name = key.split(".", 1)
            ours = getattr(loss if section == "loss" else algorithm, name)
            if name == "policy_loss" and ours is None:
                ours = get_algorithm(algorithm.name).policy_loss
            if ours != v:
                notes.append(f"GRPOConfig.{m.trl}={getattr(args, m.trl, m.trl_default)!r} (TRL's default, i.e. "
                             f"{name}={v!r}) is not applied: {algorithm.name}'s {key}={ours!r} stays; set "
                             f"{m.trl} explicitly to change it")
    return notes


def _build_algorithm(settings: dict) -> AlgorithmConfig:
    """AlgorithmConfig from a nested dict (resrl / nthr / flowrl / gigpo / empg sub-dicts)."""
    from resrl.core.registry import AlgorithmConfig

    kwargs = {}
    defaults = AlgorithmConfig()
    for key, value in settings.items():
        sub = getattr(defaults, key, None)
        kwargs[key] = type(sub)(**value) if isinstance(value, dict) and dataclasses.is_dataclass(sub) else value
    return AlgorithmConfig(**kwargs)


def _adopt(obj, given: dict, source: dict, where: str, what: str):
    """`given` (TRL fields in resrl's terms) onto an explicit AlgorithmConfig / LossConfig: a value equal
    to the object's is fine, one the object leaves at its dataclass default is adopted, two different
    non-default values are a ValueError (set it in one place)."""
    updates = {}
    for target, value in given.items():
        ours = getattr(obj, target)
        if ours == value:
            continue
        if ours != getattr(type(obj)(), target):
            trl_name = source.get(f"{where}.{target}")
            given_as = (f"GRPOConfig.{trl_name}={value!r}" if MAPPING.get(trl_name, None) is not None
                        and MAPPING[trl_name].to_resrl is None else
                        f"GRPOConfig.{trl_name} (-> {where}.{target}={value!r})" if trl_name else
                        f"ResRLGRPOConfig's {where}.{target}={value!r}")
            raise ValueError(f"{given_as} conflicts with {what}.{target}={ours!r}: set it in one place")
        updates[target] = value
    return dataclasses.replace(obj, **updates) if updates else obj


def check_scale_rewards(name: str, given: dict, scale: Any) -> None:
    """`given` (algorithm settings from TRL's names) may set scale_rewards only for an algorithm whose
    advantage reads it (AlgorithmSpec.reads_scale_rewards); its fixed scaling may be named (dropped)."""
    from resrl.core.registry import ALGORITHMS, get_algorithm

    spec = get_algorithm(name)
    if "scale_rewards" not in given:
        return
    if spec.fixed_scale is not None and given["scale_rewards"] == spec.fixed_scale:
        del given["scale_rewards"]  # what the algorithm does anyway
    elif not spec.reads_scale_rewards:
        readers = [a for a, s in ALGORITHMS.items() if s.reads_scale_rewards]
        raise ValueError(f"GRPOConfig.scale_rewards={scale!r}: algorithm {name!r} has no group-normalised "
                         f"advantage to scale (it reads scale_rewards in {', '.join(readers)})")


def resolve_trainer_settings(args, algorithm=None, loss_config: LossConfig | None = None,
                             ) -> tuple[AlgorithmConfig, LossConfig, list[str]]:
    """(AlgorithmConfig, LossConfig, notes) for a ResRLTrainer built with GRPOConfig `args`.

    algorithm:    an AlgorithmConfig, an algorithm's name, or None (ResRLGRPOConfig.algorithm, else grpo)
    loss_config:  a LossConfig, or None (the algorithm's loss defaults, as `resrl train` applies them)
    The algorithm's defaults, then ResRLGRPOConfig's flat fields, then the mapped GRPOConfig fields set
    to non-default values (both setting the same thing differently: ValueError) — through
    resrl.core.registry.resolve_settings, the function `resrl train` calls. Refused fields raise."""
    from resrl.core.loss import LossConfig
    from resrl.core.registry import ALGORITHMS, AlgorithmConfig, get_algorithm, resolve_policy_loss, resolve_settings

    problem = refusal(args)
    if problem is not None:
        raise ValueError(problem)
    flat_alg, flat_loss = args.resrl_settings() if hasattr(args, "resrl_settings") else ({}, {})
    trl_alg, trl_loss, source = trl_given(args)
    for flat, trl, what in ((flat_alg, trl_alg, "algorithm"), (flat_loss, trl_loss, "loss")):
        for key in flat.keys() & trl.keys():
            if flat[key] != trl[key]:
                raise ValueError(f"GRPOConfig.{source[f'{what}.{key}']} (-> {what}.{key}={trl[key]!r}) conflicts "
                                 f"with ResRLGRPOConfig's {what}.{key}={flat[key]!r}: set it in one place")
    name = flat_alg.pop("name", None)
    if isinstance(algorithm, AlgorithmConfig):
        if name not in (None, "grpo", algorithm.name):
            raise ValueError(f"ResRLGRPOConfig.algorithm={name!r} conflicts with algorithm={algorithm.name!r}")
        if flat_alg:
            raise ValueError(f"ResRLGRPOConfig sets algorithm settings ({', '.join(sorted(flat_alg))}) and an "
                             "AlgorithmConfig was passed as well: set them in one place")
        name = algorithm.name
    elif algorithm is not None:
        if name not in (None, "grpo", algorithm):
            raise ValueError(f"ResRLGRPOConfig.algorithm={name!r} conflicts with algorithm={algorithm!r}")
        name = algorithm
    name = name or "grpo"
    if not isinstance(name, str):
        raise TypeError(f"algorithm must be an algorithm's name or a resrl.core.registry.AlgorithmConfig, "
                        f"got {type(name).__name__}")
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}: choose one of {sorted(ALGORITHMS)}")
    spec = get_algorithm(name)
    check_scale_rewards(name, trl_alg, getattr(args, "scale_rewards", None))
    # TRL's epsilon_high=None means "= epsilon", unless the algorithm sets its own (DAPO's 0.28)
    if "clip_eps_low" in trl_loss and "clip_eps_high" not in trl_loss and "clip_eps_high" not in flat_loss \
            and "clip_eps_high" not in spec.loss_defaults:
        trl_loss["clip_eps_high"] = trl_loss["clip_eps_low"]
    L = getattr(args, "max_completion_length", None)
    given_alg = {**flat_alg, **trl_alg}
    given_loss = {**flat_loss, **trl_loss}
    alg_dict, loss_dict = resolve_settings({"name": name, **given_alg}, given_loss, L)
    if isinstance(algorithm, AlgorithmConfig):
        alg = _adopt(algorithm, trl_alg, source, "algorithm", "algorithm")
        if alg.max_response_length is None and L is not None:
            alg = dataclasses.replace(alg, max_response_length=L)
    else:
        alg = _build_algorithm(alg_dict)
    if loss_config is not None:
        loss = _adopt(loss_config, given_loss, source, "loss", "loss_config")
        if loss.max_response_length is None and L is not None:
            loss = dataclasses.replace(loss, max_response_length=L)
    else:
        loss = LossConfig(**loss_dict)
    resolve_policy_loss(alg.name, loss)  # the loss exists for this algorithm and reads every option set
    # notes only on what was resolved here: explicit AlgorithmConfig / LossConfig objects were the caller's choice
    notes = [n for n in default_differences(args, alg, loss)
             if (" loss." in n and loss_config is None) or (" algorithm." in n and not isinstance(algorithm, AlgorithmConfig))]
    return alg, loss, notes
