"""`ResRLGRPOConfig`: TRL's `GRPOConfig` with resrl's settings as flat fields, so that

    args = ResRLGRPOConfig(output_dir="out", algorithm="resrl", resrl_rank=32, beta=0.0, ...)
    trainer = ResRLTrainer(model=..., reward_funcs=..., args=args, train_dataset=...)

is the whole switch from `GRPOTrainer`, and `TrlParser((ResRLGRPOConfig, ...))` reads it from the
command line (`--algorithm resrl --resrl_rank 32 --loss_agg token-mean`) or a YAML.

(The name: `resrl.core.ResRLConfig` already holds the ResRL method's own hyper-parameters, the
`resrl_*` fields below.)

Fields, besides GRPOConfig's (engines/trl/fields.py says what becomes of each of those):

    algorithm           a registered algorithm's name (resrl.core.registry.ALGORITHMS), default grpo
    resrl_mode          auto | aligned | extra-pass (how ResRL's hidden states are collected)
    dynamic_sampling    DAPO's filter-and-refill; None = the algorithm's default
    max_refill_rounds   extra generation rounds per step to refill dropped groups
    generation_backend  auto | hf | compiled | paged | vllm (resrl.models.generation_paths; paged / vllm also
                        need TRL's use_transformers_continuous_batching / use_vllm)
    shared_prefill      one prefill per prompt for its G samples (None: auto's choice)
    reuse_frozen        the training forward starts above frozen bottom layers (None: auto's choice)
    max_logp_diff       the on-policy check's threshold: a step whose generation/logp_diff_max exceeds it
                        is an error (None: logged only)
    <name>              AlgorithmConfig's scalar settings (std_eps, correct_threshold, length_scale, ...)
    resrl_<name>        ResRLConfig (rank, pos_scale = λ_pos, quantile_low / quantile_high,
                        hidden_alignment, weighting, preset, ...)
    nthr_<name>         NTHRConfig;  flowrl_<name> FlowRLConfig;  gigpo_<name> / empg_<name> (step layout)
    ppo_<name>          PPOConfig (GAE's gamma, lam, ...);  critic_<name> CriticConfig (PPO's value model:
                        trunk, learning_rate, value_clip, warmup_steps, ...)
    loss_<name>         LossConfig settings TRL has no field for (policy_loss, agg, dual_clip_c,
                        kl_estimator, entropy_coef, entropy_agg, clip_cov_* / kl_cov_*, max_response_length,
                        flowrl_*)

Every resrl field defaults to None, "the algorithm's default": the algorithm's loss / reward
defaults apply as in `resrl train` (one function, resrl.core.registry.resolve_settings). TRL's own
names set the loss where TRL has one (resrl.engines.trl.fields.MAPPINGS): beta (KL coefficient), epsilon /
epsilon_high (clip range), delta, loss_type (the policy loss and its aggregation), scale_rewards,
importance_sampling_level, top_entropy_quantile, off_policy_mask_threshold, entropy_coef, sapo_* /
vespo_*.

Defaults changed from GRPOConfig's, so that "not set" can be told from TRL's default:
    loss_type=None      the algorithm's aggregation (grpo: the paper's seq-mean-token-mean; TRL: dapo)
    scale_rewards=None  the algorithm's (group for grpo, as TRL)
    use_bias_correction_kl=False   resrl's KL has no importance-ratio correction (TRL: True)
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from trl import GRPOConfig

from resrl.core.flowrl import FlowRLConfig
from resrl.core.loss import LossConfig
from resrl.core.negative_weighting import NTHRConfig
from resrl.core.registry import ALGORITHMS, AlgorithmConfig
from resrl.core.resrl_config import ResRLConfig
from resrl.core.gae import PPOConfig
from resrl.core.step_advantages import EMPGConfig, GiGPOConfig
from resrl.core.value import CriticConfig
from resrl.engines.trl.fields import LOSS_TYPES, trl_named_settings

__all__ = ["ResRLGRPOConfig", "FLAT_FIELDS", "CRITIC_FIELDS"]

# nested AlgorithmConfig sections -> field prefix
_NESTED = {"resrl": ResRLConfig, "nthr": NTHRConfig, "flowrl": FlowRLConfig, "gigpo": GiGPOConfig, "empg": EMPGConfig,
           "ppo": PPOConfig}
# AlgorithmConfig / LossConfig fields set through GRPOConfig's own names (resrl.engines.trl.fields.MAPPINGS);
# the algorithm's name is this config's `algorithm` field
_VIA_TRL = trl_named_settings()
_ALGORITHM_VIA_TRL = {"name", *_VIA_TRL["algorithm"]}
_LOSS_VIA_TRL = _VIA_TRL["loss"]


def _flat_fields() -> dict[str, tuple[str, tuple[str, ...], typing.Any, str]]:
    """flat field -> ("algorithm" | "loss" | "critic", path in the nested dict, type, help): every resrl
    setting that GRPOConfig has no name for (resrl.engines.trl.fields.MAPPINGS gives the others)."""
    out = {}
    hints = typing.get_type_hints(AlgorithmConfig)
    for f in dataclasses.fields(AlgorithmConfig):
        if f.name in _ALGORITHM_VIA_TRL:
            continue
        if f.name in _NESTED:
            cls = _NESTED[f.name]
            sub = typing.get_type_hints(cls)
            for g in dataclasses.fields(cls):
                out[f"{f.name}_{g.name}"] = ("algorithm", (f.name, g.name), sub[g.name],
                                             f"{cls.__name__}.{g.name} (default {g.default!r})")
        else:
            out[f.name] = ("algorithm", (f.name,), hints[f.name], f"AlgorithmConfig.{f.name} (default {f.default!r})")
    hints = typing.get_type_hints(LossConfig)
    for f in dataclasses.fields(LossConfig):
        if f.name not in _LOSS_VIA_TRL:
            out[f"loss_{f.name}"] = ("loss", (f.name,), hints[f.name], f"LossConfig.{f.name} (default {f.default!r})")
    # PPO's critic (resrl.core.value.CriticConfig; ResRLTrainer's `critic`): no GRPOConfig field is one
    hints = typing.get_type_hints(CriticConfig)
    for f in dataclasses.fields(CriticConfig):
        out[f"critic_{f.name}"] = ("critic", (f.name,), hints[f.name], f"CriticConfig.{f.name} (default {f.default!r})")
    return out


FLAT_FIELDS = _flat_fields()
# the critic_<name> fields of FLAT_FIELDS: flat field -> (CriticConfig field, type, help)
CRITIC_FIELDS = {name: (path[0], tp, help_) for name, (where, path, tp, help_) in FLAT_FIELDS.items()
                 if where == "critic"}


@dataclass
class _ResRLGRPOConfigBase(GRPOConfig):
    algorithm: str = field(default="grpo", metadata={
        "help": f"The algorithm (resrl.core.registry.ALGORITHMS): {', '.join(ALGORITHMS)} (ppo with a critic: "
                "critic_* fields). Its loss / reward defaults apply as in `resrl train`."})
    resrl_mode: str = field(default="auto", metadata={
        "help": "How ResRL's hidden states are collected: auto | aligned | extra-pass."})
    dynamic_sampling: bool | None = field(default=None, metadata={
        "help": "DAPO's filter-and-refill; None = the algorithm's default."})
    max_refill_rounds: int = field(default=4, metadata={
        "help": "Extra generation rounds allowed per step to refill dropped groups (dynamic sampling)."})
    generation_backend: str = field(default="auto", metadata={
        "help": "Generation path: auto | hf | compiled | paged | vllm (docs/generation.md)."})
    shared_prefill: bool | None = field(default=None, metadata={
        "help": "hf / compiled: one prefill per prompt for its G samples; None: auto's choice."})
    reuse_frozen: bool | None = field(default=None, metadata={
        "help": "With frozen bottom layers, the training forward starts above them; None: auto's choice."})
    max_logp_diff: float | None = field(default=None, metadata={
        "help": "Nats: a step whose generation/logp_diff_max (recorded vs the training forward's log-probs, "
                "same temperature / top-k / top-p) exceeds this is an error; None: logged only."})
    # GRPOConfig fields whose default differs here (see the module docstring)
    loss_type: str | None = field(default=None, metadata={
        "help": f"TRL's loss, mapped to resrl's loss.policy_loss and loss.agg ({', '.join(LOSS_TYPES)}). None: the "
                "algorithm's (grpo: the clipped surrogate with seq-mean-token-mean, the paper's; TRL's default is "
                "dapo)."})
    scale_rewards: str | None = field(default=None, metadata={
        "help": "group | batch | none (algorithm.scale_rewards); None: the algorithm's default."})
    use_bias_correction_kl: bool = field(default=False, metadata={
        "help": "Must stay False with beta != 0: resrl's KL term has no importance-ratio correction."})


def _optional(tp):
    return tp if type(None) in typing.get_args(tp) else tp | None


ResRLGRPOConfig = dataclasses.make_dataclass(
    "ResRLGRPOConfig",
    [(name, _optional(tp), field(default=None, metadata={
        "help": f"{help_}; None: " + ("its default" if where == "critic" else "the algorithm's default")}))
     for name, (where, _, tp, help_) in FLAT_FIELDS.items()],
    bases=(_ResRLGRPOConfigBase,),
    namespace={"__doc__": __doc__, "__module__": __name__},
)


def _resrl_settings(self) -> tuple[dict, dict]:
    """The resrl settings this config gives, as nested dicts ({algorithm...}, {loss...}): the
    algorithm's name and every flat field that is not None."""
    algorithm, loss = {"name": self.algorithm}, {}
    for name, (where, path, _, _) in FLAT_FIELDS.items():
        value = getattr(self, name)
        if value is None or where == "critic":
            continue
        target = algorithm if where == "algorithm" else loss
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return algorithm, loss


def _critic_settings(self) -> dict:
    """The CriticConfig settings this config gives (critic_<name> fields that are not None)."""
    return {key: getattr(self, name) for name, (key, _, _) in CRITIC_FIELDS.items() if getattr(self, name) is not None}


def _post_init(self):
    _ResRLGRPOConfigBase.__post_init__(self)
    from resrl.core.registry import ALGORITHMS

    if self.algorithm not in ALGORITHMS:
        raise ValueError(f"ResRLGRPOConfig.algorithm={self.algorithm!r}: choose one of {sorted(ALGORITHMS)}")


ResRLGRPOConfig.resrl_settings = _resrl_settings
ResRLGRPOConfig.critic_settings = _critic_settings
ResRLGRPOConfig.__post_init__ = _post_init
