"""Framework-free PyTorch core: advantages, ResRL token weights, policy loss, algorithm registry.

Imports no training engine; every engine of the project calls these functions.
"""

from .advantages import (
    drgrpo_advantages,
    dynamic_sampling_mask,
    group_mean_std,
    grpo_advantages,
    length_scaled_rewards,
    nsr_advantages,
    overlong_penalty,
    passk_advantages,
    psr_advantages,
    wreinforce_advantages,
)
from .loss import (
    POLICY_LOSSES,
    SURROGATES,
    LossConfig,
    SurrogateInputs,
    PolicyLossInputs,
    aggregate_loss,
    get_policy_loss,
    kl_estimate,
    policy_loss,
    register_policy_loss,
    register_surrogate,
)
from .flowrl import LogZHead, flowrl_loss
from .registry import (
    ALGORITHMS,
    AdvantageInputs,
    AlgorithmConfig,
    AlgorithmSpec,
    captured_states,
    EMPGConfig,
    GiGPOConfig,
    compute_ppo_targets,
    compute_token_advantages,
    get_algorithm,
    register_algorithm,
    resolve_policy_loss,
)
from .interference import HeadSketch, head_sketch, interference_scores, sketch_from_logits
from .negative_weighting import NTHRConfig, interference_token_advantages, nthr_token_advantages
from .residual import ResidualDetails, resrl_residual_details, resrl_token_advantages
from .grouping import grouping_coverage, micro_batch_groups
from .resrl_config import RESRL_PRESETS, ResRLConfig, resolve_resrl_preset
from .sampling import positive_token_sample_mask
from .step_advantages import discounted_step_returns, empg_advantages, gigpo_advantages
from .gae import PPOConfig, PPOTargets, gae_advantages, ppo_targets, step_gae_advantages
from .value import CriticConfig, value_loss

__all__ = [
    "ALGORITHMS", "AdvantageInputs", "AlgorithmConfig", "AlgorithmSpec", "GiGPOConfig", "EMPGConfig",
    "discounted_step_returns", "gigpo_advantages", "empg_advantages", "LossConfig", "ResRLConfig",
    "POLICY_LOSSES", "PolicyLossInputs", "get_policy_loss", "register_policy_loss", "register_surrogate",
    "SURROGATES", "SurrogateInputs", "resolve_policy_loss", "flowrl_loss", "LogZHead",
    "ResidualDetails", "HeadSketch", "head_sketch", "interference_scores", "sketch_from_logits", "NTHRConfig",
    "interference_token_advantages", "nthr_token_advantages", "captured_states", "passk_advantages",
    "aggregate_loss", "compute_token_advantages", "drgrpo_advantages", "dynamic_sampling_mask",
    "get_algorithm", "group_mean_std", "grpo_advantages", "kl_estimate", "length_scaled_rewards",
    "nsr_advantages", "overlong_penalty", "positive_token_sample_mask", "policy_loss", "psr_advantages", "register_algorithm",
    "resrl_residual_details", "resrl_token_advantages", "wreinforce_advantages",
    "RESRL_PRESETS", "resolve_resrl_preset", "micro_batch_groups", "grouping_coverage",
    "PPOConfig", "PPOTargets", "CriticConfig", "gae_advantages", "step_gae_advantages", "ppo_targets", "value_loss",
    "compute_ppo_targets",
]
