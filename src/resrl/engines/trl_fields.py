"""What `ResRLTrainer` does with every field of TRL's `GRPOConfig` (TRL 1.16): one table, beside
`engines/trl_compat.py`, and the function that turns a GRPOConfig (or a `ResRLGRPOConfig`) into the
core's `AlgorithmConfig` and `LossConfig`.

Each field is in exactly one category (`GRPO_CONFIG_FIELDS`; `tests/test_trl_fields.py` enumerates
`dataclasses.fields(GRPOConfig)` against it, so a TRL release that adds a field fails the test
until it is classified here):

    honoured    TRL (or transformers.Trainer) applies it exactly as in GRPOTrainer: generation,
                rewards, vLLM, logging, batching, the optimiser, ... ResRLTrainer replaces only the
                advantages and the loss, and the loss options listed here it applies as TRL does.
    mapped      TRL's loss or advantage setting, applied through resrl's own setting (`MAPPED`):
                beta -> loss.kl_coef, epsilon / epsilon_high -> the clip range, scale_rewards ->
                algorithm.scale_rewards, loss_type -> loss.agg, ...
    refused     a setting resrl's loss would not apply: a non-default value is a ValueError that
                names the field and what to use instead (`refusal`).
    irrelevant  no effect on GRPO training in TRL either (evaluation-metric and label options of
                transformers.Trainer that GRPOTrainer never reads).

Defaults where TRL and the paper disagree: a mapped field left at TRL's default does not replace
the algorithm's default (resrl's documented one); the trainer logs each such difference once
(`default_differences`). The main case: TRL's `loss_type="dapo"` (token-mean) against the paper's
per-sequence mean (`seq-mean-token-mean`) for grpo / resrl / nsr / ...; set `loss_type` (or
`ResRLGRPOConfig.loss_agg`) to choose. With an explicit, non-default value, TRL's meaning wins.

This module holds no math and imports no TRL: the table is data, the resolver builds dataclasses.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable

from resrl.core.loss import LossConfig
from resrl.core.registry import ALGORITHMS, AlgorithmConfig, get_algorithm, resolve_settings

logger = logging.getLogger(__name__)

HONOURED, MAPPED, REFUSED, IRRELEVANT = "honoured", "mapped", "refused", "irrelevant"
CATEGORIES = (HONOURED, MAPPED, REFUSED, IRRELEVANT)


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


def _m(note: str) -> Field:
    return Field(MAPPED, note)


def _r(note: str, *accepted, applies=None) -> Field:
    return Field(REFUSED, note, tuple(accepted), applies)


def _i(note: str = "not read by GRPOTrainer's training (evaluation metrics / labels of transformers.Trainer)") -> Field:
    return Field(IRRELEVANT, note)


_GEN = "generation (TRL's, unchanged)"
_VLLM = "vLLM generation (TRL's, unchanged)"
_LOG = "completion logging (TRL's, unchanged)"
_TRAINER = "transformers.Trainer's setting, unchanged"
_LOSS_TYPE_ONLY = "a parameter of a TRL loss_type resrl refuses (sapo / vespo)"
_ADAPTIVE = "TRL's adaptive entropy controller: not part of resrl's loss (fixed bonus: loss_entropy_coef)"

# loss_type -> loss.agg (TRL 1.16 _compute_loss's normalisers)
LOSS_TYPE_AGG = {
    "grpo": "seq-mean-token-mean",          # per-sequence mean, then the mean over sequences
    "dapo": "token-mean",                   # tokens of the accumulation window (TRL's num_items_in_batch)
    "bnpo": "token-mean",                   # tokens of the micro-batch: equal to dapo with one micro-batch per update
    "dr_grpo": "seq-mean-token-sum-norm",   # sum / (B * max_completion_length)
}

GRPO_CONFIG_FIELDS: dict[str, Field] = {
    # ---- GRPOConfig's own fields ----------------------------------------------------------------
    "model_init_kwargs": _h("model loading (TRL's)"),
    "trust_remote_code": _h("model loading (TRL's)"),
    "router_aux_loss_coef": _h("MoE load-balancing loss, added as TRL adds it"),
    "disable_dropout": _h("TRL's"),
    "cast_lm_head_to_fp32": _h("TRL's"),
    "num_generations": _h("the group size G"),
    "num_generations_eval": _h("evaluation's group size"),
    "max_completion_length": _m("generation budget (TRL's) and the default of loss.max_response_length "
                                "(Dr.GRPO's normaliser, as TRL's dr_grpo) and of algorithm.max_response_length"),
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
    "beta": _m("loss.kl_coef (TRL's k3 KL to the reference, added per token before aggregation)"),
    "num_iterations": _h("updates per generation round (TRL's buffering)"),
    "epsilon": _m("loss.clip_eps_low (ratio clipped below at 1 - epsilon)"),
    "delta": _r("TRL's two-sided ratio cap: resrl's loss has dual-clip instead (loss_dual_clip_c)", None),
    "epsilon_high": _m("loss.clip_eps_high; None: the algorithm's default if it has one (DAPO: 0.28), "
                       "else epsilon (TRL's None)"),
    "sapo_temperature_neg": _r(_LOSS_TYPE_ONLY, 1.05), "sapo_temperature_pos": _r(_LOSS_TYPE_ONLY, 1.0),
    "vespo_k_pos": _r(_LOSS_TYPE_ONLY, 2.0), "vespo_lambda_pos": _r(_LOSS_TYPE_ONLY, 3.0),
    "vespo_k_neg": _r(_LOSS_TYPE_ONLY, 3.0), "vespo_lambda_neg": _r(_LOSS_TYPE_ONLY, 2.0),
    "importance_sampling_level": _m("loss.importance_sampling_level (GSPO's sequence ratio, as TRL computes it)"),
    "reward_weights": _h("the weighted sum of the reward functions (TRL's weights)"),
    "multi_objective_aggregation": _r("rewards are summed (weighted) before the algorithm's advantage: "
                                      "'normalize_then_sum' (GDPO) is not applied", "sum_then_normalize"),
    "scale_rewards": _m("algorithm.scale_rewards (group | batch | none) for the algorithms whose advantage is "
                        "GRPO's group-normalised one; refused for the others"),
    "loss_type": _m("loss.agg: grpo -> seq-mean-token-mean, dapo / bnpo -> token-mean, dr_grpo -> "
                    "seq-mean-token-sum-norm; cispo / sapo / luspo / vespo refused. TRL's default 'dapo' does "
                    "not replace the algorithm's aggregation (the paper's seq-mean-token-mean for grpo)"),
    "mask_truncated_completions": _h("TRL zeroes truncated completions' mask; resrl's loss and advantages "
                                     "read that mask"),
    "sync_ref_model": _h("TRL's reference-sync callback (with beta != 0)"),
    "ref_model_mixup_alpha": _h("TRL's reference-sync callback"),
    "ref_model_sync_steps": _h("TRL's reference-sync callback"),
    "top_entropy_quantile": _m("loss.top_entropy_quantile (TRL's high-entropy mask)"),
    "entropy_coef": _r("TRL's entropy bonus is a token mean whatever the loss; resrl's is aggregated like the "
                       "loss: use ResRLGRPOConfig.loss_entropy_coef (or LossConfig.entropy_coef)", 0.0),
    "use_adaptive_entropy": _r(_ADAPTIVE, False), "entropy_coef_min": _r(_ADAPTIVE, 0.0),
    "entropy_coef_max": _r(_ADAPTIVE, 1.0), "entropy_coef_delta": _r(_ADAPTIVE, 0.005),
    "entropy_target": _r(_ADAPTIVE, 0.2),
    "max_tool_calling_iterations": _h("multi-turn tool calling (TRL's)"),
    "vllm_importance_sampling_correction": _h("applied in resrl.core.loss.policy_loss as TRL applies it"),
    "vllm_importance_sampling_mode": _h("TRL computes the weights; resrl's loss applies them"),
    "vllm_importance_sampling_clip_max": _h("TRL computes the weights"),
    "vllm_importance_sampling_clip_min": _h("TRL computes the weights"),
    "vllm_importance_sampling_cap": _h("TRL computes the weights"),
    "off_policy_mask_threshold": _r("the off-policy sequence mask is not part of resrl.core's loss", None),
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

# mapped fields: (GRPOConfig field, TRL's default, "loss" | "algorithm", resrl's field)
MAPPED_TARGETS = (
    ("beta", 0.0, "loss", "kl_coef"),
    ("epsilon", 0.2, "loss", "clip_eps_low"),
    ("epsilon_high", None, "loss", "clip_eps_high"),
    ("scale_rewards", "group", "algorithm", "scale_rewards"),
    ("loss_type", "dapo", "loss", "agg"),
    ("importance_sampling_level", "token", "loss", "importance_sampling_level"),
    ("top_entropy_quantile", 1.0, "loss", "top_entropy_quantile"),
)
# (max_completion_length: only the default of the lengths left None, see resolve_trainer_settings)

# the algorithms whose advantage reads algorithm.scale_rewards (GRPO's group normalisation)
SCALE_REWARDS_ALGORITHMS = ("grpo", "dapo", "resrl", "nthr", "flowrl", "empg", "gigpo", "gigpo-resrl")
# algorithms whose advantage has one fixed scaling: scale_rewards may name it (Dr.GRPO: "none")
FIXED_SCALE = {"drgrpo": "none"}


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


def _trl_value(args, name: str, value: Any) -> Any:
    """A mapped GRPOConfig value in resrl's terms (loss_type -> agg); ValueError for a refused one."""
    if name == "loss_type":
        if value not in LOSS_TYPE_AGG:
            raise ValueError(f"GRPOConfig.loss_type={value!r} is not supported by ResRLTrainer: its loss is "
                             f"resrl.core.loss.policy_loss; use one of {sorted(LOSS_TYPE_AGG)} (-> loss.agg) or "
                             "ResRLGRPOConfig.loss_agg")
        return LOSS_TYPE_AGG[value]
    if name == "scale_rewards":
        return {True: "group", False: "none"}.get(value, value)
    return value


def trl_given(args) -> tuple[dict, dict, list[str]]:
    """The mapped GRPOConfig fields `args` sets to a value other than TRL's default, as
    ({algorithm field: value}, {loss field: value}) in resrl's terms, and the notes on the
    TRL defaults that are not applied (`default_differences` fills them in)."""
    algorithm, loss = {}, {}
    # the config class's own defaults (ResRLGRPOConfig: None for loss_type / scale_rewards, so that an
    # explicit "dapo" / "group" is applied there)
    own = {f.name: f.default for f in dataclasses.fields(args)} if dataclasses.is_dataclass(args) else {}
    for name, default, where, target in MAPPED_TARGETS:
        value = getattr(args, name, default)
        if value is None or value == own.get(name, default):
            continue
        (loss if where == "loss" else algorithm)[target] = _trl_value(args, name, value)
    return algorithm, loss, []


def default_differences(args, algorithm: AlgorithmConfig, loss: LossConfig) -> list[str]:
    """The mapped GRPOConfig fields left at TRL's default whose resrl value differs (resrl's stays)."""
    notes = []
    for name, default, where, target in MAPPED_TARGETS:
        value = getattr(args, name, default)
        if value is None and name == "epsilon_high":
            value = getattr(args, "epsilon", 0.2)
        elif value != default:
            continue
        ours = getattr(loss if where == "loss" else algorithm, target)
        theirs = _trl_value(args, name, value) if name in ("loss_type", "scale_rewards") else value
        if ours != theirs:
            notes.append(f"GRPOConfig.{name}={getattr(args, name, default)!r} (TRL's default, i.e. {target}="
                         f"{theirs!r}) is not applied: {algorithm.name}'s {where}.{target}={ours!r} stays; set "
                         f"{name} explicitly to change it")
    return notes


def _build_algorithm(settings: dict) -> AlgorithmConfig:
    """AlgorithmConfig from a nested dict (resrl / nthr / flowrl / gigpo / empg sub-dicts)."""
    kwargs = {}
    defaults = AlgorithmConfig()
    for key, value in settings.items():
        sub = getattr(defaults, key, None)
        kwargs[key] = type(sub)(**value) if isinstance(value, dict) and dataclasses.is_dataclass(sub) else value
    return AlgorithmConfig(**kwargs)


def _adopt(obj, given: dict, where: str, what: str):
    """`given` (TRL fields in resrl's terms) onto an explicit AlgorithmConfig / LossConfig: a value equal
    to the object's is fine, one the object leaves at its dataclass default is adopted, two different
    non-default values are a ValueError (set it in one place)."""
    updates = {}
    for target, value in given.items():
        ours = getattr(obj, target)
        if ours == value:
            continue
        if ours != getattr(type(obj)(), target):
            trl_name = next((n for n, _, w, t in MAPPED_TARGETS if w == where and t == target), None)
            given = (f"GRPOConfig.{trl_name}={value!r}" if trl_name not in ("loss_type", "scale_rewards", None) else
                     f"GRPOConfig.{trl_name} (-> {where}.{target}={value!r})" if trl_name else
                     f"ResRLGRPOConfig's {where}.{target}={value!r}")
            raise ValueError(f"{given} conflicts with {what}.{target}={ours!r}: set it in one place")
        updates[target] = value
    return dataclasses.replace(obj, **updates) if updates else obj


def resolve_trainer_settings(args, algorithm=None, loss_config: LossConfig | None = None,
                             ) -> tuple[AlgorithmConfig, LossConfig, list[str]]:
    """(AlgorithmConfig, LossConfig, notes) for a ResRLTrainer built with GRPOConfig `args`.

    algorithm:    an AlgorithmConfig, an algorithm's name, or None (ResRLGRPOConfig.algorithm, else grpo)
    loss_config:  a LossConfig, or None (the algorithm's loss defaults, as `resrl train` applies them)
    The algorithm's defaults, then ResRLGRPOConfig's flat fields, then the mapped GRPOConfig fields set
    to non-default values (both setting the same thing differently: ValueError) — through
    resrl.core.registry.resolve_settings, the function `resrl train` calls. Refused fields raise."""
    problem = refusal(args)
    if problem is not None:
        raise ValueError(problem)
    flat_alg, flat_loss = args.resrl_settings() if hasattr(args, "resrl_settings") else ({}, {})
    trl_alg, trl_loss, _ = trl_given(args)
    for flat, trl, what in ((flat_alg, trl_alg, "algorithm"), (flat_loss, trl_loss, "loss")):
        for key in flat.keys() & trl.keys():
            if flat[key] != trl[key]:
                trl_name = next(n for n, _, w, t in MAPPED_TARGETS if w == what and t == key)
                raise ValueError(f"GRPOConfig.{trl_name} (-> {what}.{key}={trl[key]!r}) conflicts with "
                                 f"ResRLGRPOConfig's {what}.{key}={flat[key]!r}: set it in one place")
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
    if "scale_rewards" in trl_alg and name in FIXED_SCALE and trl_alg["scale_rewards"] == FIXED_SCALE[name]:
        del trl_alg["scale_rewards"]  # what the algorithm does anyway
    if "scale_rewards" in trl_alg and name not in SCALE_REWARDS_ALGORITHMS:
        raise ValueError(f"GRPOConfig.scale_rewards={args.scale_rewards!r}: algorithm {name!r} has no group-normalised "
                         f"advantage to scale (it reads scale_rewards in {', '.join(SCALE_REWARDS_ALGORITHMS)})")
    # TRL's epsilon_high=None means "= epsilon", unless the algorithm sets its own (DAPO's 0.28)
    if "clip_eps_low" in trl_loss and "clip_eps_high" not in trl_loss and "clip_eps_high" not in flat_loss \
            and "clip_eps_high" not in spec.loss_defaults:
        trl_loss["clip_eps_high"] = trl_loss["clip_eps_low"]
    L = getattr(args, "max_completion_length", None)
    given_alg = {**flat_alg, **trl_alg}
    given_loss = {**flat_loss, **trl_loss}
    alg_dict, loss_dict = resolve_settings({"name": name, **given_alg}, given_loss, L)
    if isinstance(algorithm, AlgorithmConfig):
        alg = _adopt(algorithm, trl_alg, "algorithm", "algorithm")
        if alg.max_response_length is None and L is not None:
            alg = dataclasses.replace(alg, max_response_length=L)
    else:
        alg = _build_algorithm(alg_dict)
    if loss_config is not None:
        loss = _adopt(loss_config, given_loss, "loss", "loss_config")
        if loss.max_response_length is None and L is not None:
            loss = dataclasses.replace(loss, max_response_length=L)
    else:
        loss = LossConfig(**loss_dict)
    # notes only on what was resolved here: explicit AlgorithmConfig / LossConfig objects were the caller's choice
    notes = [n for n in default_differences(args, alg, loss)
             if (" loss." in n and loss_config is None) or (" algorithm." in n and not isinstance(algorithm, AlgorithmConfig))]
    return alg, loss, notes
