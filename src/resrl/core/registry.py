"""Algorithm name -> function producing `(B, T)` token advantages, so one loss serves all.

Adding an algorithm is one function and one line:

    @register_algorithm("my-algo", loss_defaults={"agg": "token-mean"})
    def my_algo(inputs: AdvantageInputs, config: AlgorithmConfig) -> tuple[Tensor, dict]:
        ...  # return (B, T) float32 token advantages (0 on padding) and a dict of floats

`compute_token_advantages` applies the reward shaping configured in `AlgorithmConfig`
(DAPO overlong penalty, spec §3 length scaling), then the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable

import torch
from torch import Tensor

from . import advantages as A
from . import step_advantages as S
from .step_advantages import EMPGConfig, GiGPOConfig  # noqa: F401  (their home is next to their math)
from . import flowrl as _flowrl  # noqa: F401  (registers the "flowrl" policy loss)
from .flowrl import FlowRLConfig
from . import gae as _gae
from .gae import PPOConfig
from .loss import SURROGATES, LossConfig, check_loss_options, get_policy_loss
from .interference import HeadSketch
from .grouping import grouping_coverage, micro_batch_groups
from .negative_weighting import NTHRConfig, interference_token_advantages, nthr_token_advantages
from .residual import resrl_token_advantages
from .resrl_config import ResRLConfig


@dataclass
class AdvantageInputs:
    """One batch of scored responses. Shapes: B responses, T response positions, d features."""

    rewards: Tensor                 # (B,) float
    group_index: Tensor             # (B,) int64, any ids, any order
    response_mask: Tensor           # (B, T) bool or 0/1
    hidden: Tensor | None = None    # (B, T, d) penultimate-layer states (ResRL only)
    truncated: Tensor | None = None  # (B,) bool, hit the length limit without EOS
    head: HeadSketch | None = None  # head input + top-K softmax sketch (NTHR, ResRL weighting=interference)
    prompt_lengths: Tensor | None = None  # (B,) prompt tokens, for resrl.grouping=micro-batch's length balance
    # step-level layout (one row per environment step; resrl.core.step_advantages): None elsewhere
    trajectory_index: Tensor | None = None  # (B,) int64, the row's trajectory (unique over the batch)
    step_index: Tensor | None = None        # (B,) int64, 0.. within the trajectory
    anchor_index: Tensor | None = None      # (B,) int64, equal ids = identical environment states
    step_rewards: Tensor | None = None      # (B,) float, the environment's reward of this step
    step_entropy: Tensor | None = None      # (B,) float, mean token entropy of the step's response
    # PPO (resrl.core.gae): the critic's rollout-time values at the response positions, and a function
    # summing a tensor over the processes that share the batch (whitening; None: one process)
    values: Tensor | None = None            # (B, T) float
    batch_sum: Callable[[Tensor], Tensor] | None = None


@dataclass
class AlgorithmConfig:
    name: str = "grpo"                  # a registered algorithm (ALGORITHMS)
    std_eps: float = 1e-6               # GRPO's eps in (r − mean) / (std + eps)
    scale_rewards: str = "group"        # group | batch | none
    wreinforce_lambda: float = 0.1      # λ of W-REINFORCE
    passk_k: int = 4                    # k of Pass@k training (the "passk" algorithm)
    correct_threshold: float = 0.0      # a response is correct when reward > this
    resrl: ResRLConfig = field(default_factory=ResRLConfig)
    flowrl: FlowRLConfig = field(default_factory=FlowRLConfig)  # FlowRL's log Z head
    nthr: NTHRConfig = field(default_factory=NTHRConfig)        # NTHR's β, η, vocabulary (Deng et al. 2025)
    gigpo: GiGPOConfig = field(default_factory=GiGPOConfig)     # gigpo, gigpo-resrl (step layout)
    empg: EMPGConfig = field(default_factory=EMPGConfig)        # empg (step layout)
    ppo: PPOConfig = field(default_factory=PPOConfig)           # ppo's GAE (γ, λ); its critic: CriticConfig
    overlong_buffer: int = 0            # DAPO overlong shaping: buffer length (0 = off)
    overlong_penalty: float = 1.0       # ... and its maximal penalty
    max_response_length: int | None = None  # L_max for overlong shaping and length scaling
    length_scale: bool = False          # spec §3 length-scaled positive reward
    length_scale_start: int = 3500      # L_start: positive rewards are scaled down beyond this length
    length_scale_min: float = 0.7       # s_min: the scale reached at max_response_length

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.name in UNSUPPORTED_COMBINATIONS:
            raise ValueError(f"AlgorithmConfig.name = {self.name!r} is not supported: "
                             f"{UNSUPPORTED_COMBINATIONS[self.name]}")
        if self.name not in ALGORITHMS:
            raise ValueError(f"AlgorithmConfig.name = {self.name!r} is unknown: allowed {sorted(ALGORITHMS)}")
        if not (isinstance(self.std_eps, (int, float)) and self.std_eps >= 0):
            raise ValueError(f"AlgorithmConfig.std_eps must be a float >= 0, got {self.std_eps!r}")
        if self.scale_rewards not in A.SCALE_MODES:
            raise ValueError(f"AlgorithmConfig.scale_rewards must be one of {A.SCALE_MODES}, got {self.scale_rewards!r}")
        if not (isinstance(self.passk_k, int) and not isinstance(self.passk_k, bool) and self.passk_k >= 1):
            raise ValueError(f"AlgorithmConfig.passk_k must be an int >= 1, got {self.passk_k!r}")
        if not isinstance(self.gigpo, GiGPOConfig) or not isinstance(self.empg, EMPGConfig):
            raise ValueError("AlgorithmConfig.gigpo / .empg must be GiGPOConfig / EMPGConfig")
        if not isinstance(self.ppo, PPOConfig):
            raise ValueError("AlgorithmConfig.ppo must be a PPOConfig")
        if not isinstance(self.resrl, ResRLConfig):
            raise ValueError("AlgorithmConfig.resrl must be a ResRLConfig")
        if not isinstance(self.nthr, NTHRConfig):
            raise ValueError("AlgorithmConfig.nthr must be an NTHRConfig")
        if not (isinstance(self.overlong_buffer, int) and self.overlong_buffer >= 0):
            raise ValueError(f"AlgorithmConfig.overlong_buffer must be an int >= 0, got {self.overlong_buffer!r}")
        needs_len = self.overlong_buffer > 0 or self.length_scale
        if needs_len and not (isinstance(self.max_response_length, int) and self.max_response_length >= 1):
            raise ValueError("AlgorithmConfig.max_response_length must be set (an int >= 1) when "
                             "overlong_buffer > 0 or length_scale is on")
        if self.overlong_buffer > 0 and self.overlong_buffer > self.max_response_length:
            raise ValueError("AlgorithmConfig.overlong_buffer must be <= max_response_length")
        if self.length_scale:
            if not 0 <= self.length_scale_start < self.max_response_length:
                raise ValueError("AlgorithmConfig.length_scale_start must be in [0, max_response_length)")
            if not 0.0 <= self.length_scale_min <= 1.0:
                raise ValueError("AlgorithmConfig.length_scale_min must be in [0, 1]")


AlgorithmFn = Callable[[AdvantageInputs, AlgorithmConfig], "tuple[Tensor, dict[str, float]]"]


@dataclass(frozen=True)
class AlgorithmSpec:
    fn: AlgorithmFn
    needs_hidden: bool = False          # the engine must collect penultimate-layer states
    loss_defaults: dict = field(default_factory=dict)  # LossConfig overrides (the paper's setting)
    dynamic_sampling: bool = False      # drop groups with all-equal rewards and refill (DAPO)
    reward_defaults: dict = field(default_factory=dict)  # AlgorithmConfig overrides (e.g. shaping)
    policy_loss: str = "clipped-surrogate"  # name in resrl.core.loss.POLICY_LOSSES
    needs_reference: bool = False       # the loss reads log π_ref even when the KL coefficient is 0
    needs_log_z: bool = False           # the engine must run FlowRL's log Z head in the loss forward
    needs_head: bool = False            # the engine must capture the head sketch (AdvantageInputs.head)
    step_level: bool = False            # needs the step layout's tags (trajectory, step, anchor, ...)
    needs_step_entropy: bool = False    # the engine must supply each step's mean token entropy
    needs_values: bool = False          # the engine must run a critic (AdvantageInputs.values, PPO)
    # its advantage is GRPO's group-normalised one and reads AlgorithmConfig.scale_rewards
    reads_scale_rewards: bool = False
    fixed_scale: str | None = None      # its advantage has this one scaling (Dr.GRPO: "none")


ALGORITHMS: dict[str, AlgorithmSpec] = {}


def register_algorithm(name: str, *, loss_defaults: dict | None = None, reward_defaults: dict | None = None,
                       **facts):
    """Register `fn` as algorithm `name`; `facts`: AlgorithmSpec's other fields (needs_hidden, policy_loss, ...)."""
    unknown = sorted(set(facts) - {f.name for f in fields(AlgorithmSpec)})
    if unknown:
        raise TypeError(f"register_algorithm({name!r}): unknown AlgorithmSpec field(s) {unknown}")

    def deco(fn: AlgorithmFn) -> AlgorithmFn:
        if name in ALGORITHMS:
            raise ValueError(f"algorithm {name!r} is already registered")
        spec = AlgorithmSpec(fn, loss_defaults=dict(loss_defaults or {}), reward_defaults=dict(reward_defaults or {}),
                             **facts)
        get_policy_loss(spec.policy_loss)  # a clear error for a loss that does not exist
        if spec.fixed_scale is not None and spec.fixed_scale not in A.SCALE_MODES:
            raise ValueError(f"algorithm {name!r}: fixed_scale={spec.fixed_scale!r} is not one of {A.SCALE_MODES}")
        ALGORITHMS[name] = spec
        return fn
    return deco


def get_algorithm(name: str) -> AlgorithmSpec:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}: choose one of {sorted(ALGORITHMS)}") from None


def captured_states(config: AlgorithmConfig) -> tuple[bool, bool, int]:
    """What the engine must capture for `config`: (penultimate hidden states, head sketch, its K).
    ResRL with weighting="interference" reads the head sketch in place of the penultimate states."""
    spec = get_algorithm(config.name)
    if config.name == "resrl" and config.resrl.weighting == "interference":
        return False, True, config.resrl.interference_topk
    return spec.needs_hidden, spec.needs_head, config.nthr.topk


def _broadcast(seq_adv: Tensor, mask: Tensor) -> Tensor:
    """(B,) sequence advantages -> (B, T) float32 token advantages, 0 on padding."""
    return seq_adv.float()[:, None] * mask.to(torch.float32)


# ---- the algorithms (spec §4) ------------------------------------------------------------------

@register_algorithm("grpo", reads_scale_rewards=True)
def grpo(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    adv = A.grpo_advantages(inputs.rewards, inputs.group_index, cfg.std_eps, cfg.scale_rewards)
    return _broadcast(adv, inputs.response_mask), {}


@register_algorithm("drgrpo", loss_defaults={"agg": "seq-mean-token-sum-norm"}, fixed_scale="none")
def drgrpo(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    return _broadcast(A.drgrpo_advantages(inputs.rewards, inputs.group_index), inputs.response_mask), {}


@register_algorithm("dapo", loss_defaults={"agg": "token-mean", "clip_eps_low": 0.2, "clip_eps_high": 0.28},
                    dynamic_sampling=True, reads_scale_rewards=True)
def dapo(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    # DAPO's advantage is GRPO's; its other pieces are the loss defaults, dynamic sampling and the
    # overlong shaping applied by compute_token_advantages when overlong_buffer > 0.
    return grpo(inputs, cfg)


@register_algorithm("psr")
def psr(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    return _broadcast(A.psr_advantages(inputs.rewards, cfg.correct_threshold), inputs.response_mask), {}


@register_algorithm("nsr")
def nsr(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    return _broadcast(A.nsr_advantages(inputs.rewards, cfg.correct_threshold), inputs.response_mask), {}


@register_algorithm("w-reinforce")
def w_reinforce(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    adv = A.wreinforce_advantages(inputs.rewards, cfg.wreinforce_lambda, cfg.correct_threshold)
    return _broadcast(adv, inputs.response_mask), {}


@register_algorithm("resrl", needs_hidden=True, reads_scale_rewards=True)
def resrl(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    r = cfg.resrl
    adv = A.grpo_advantages(inputs.rewards, inputs.group_index, cfg.std_eps, cfg.scale_rewards)
    # the positives: Â > 0 (spec §2 step 1) or the (shaped) reward > 0 (the authors' code)
    positive = inputs.rewards > 0 if r.positive == "reward" else adv > 0
    # the groups the weights see: whole prompt groups, or the authors' micro-batches (resrl.core.grouping);
    # Â stays the whole group's either way
    weight_groups, stats = inputs.group_index, {}
    if r.grouping == "micro-batch":
        lengths = inputs.response_mask.sum(dim=1)
        if inputs.prompt_lengths is not None:
            lengths = lengths + inputs.prompt_lengths.to(lengths.device)
        weight_groups = micro_batch_groups(inputs.group_index, lengths, r.grouping_micro_batch, r.grouping_ranks)
        stats = grouping_coverage(inputs.group_index, weight_groups, positive, inputs.response_mask)
    if r.weighting == "interference":
        if inputs.head is None:
            raise ValueError("algorithm 'resrl' with resrl.weighting='interference' needs the head sketch (inputs.head)")
        if r.positive != "advantage":
            raise ValueError("ResRLConfig.positive = 'reward' is not supported with weighting='interference'")
        token_adv, w_stats = interference_token_advantages(inputs.head, inputs.response_mask, adv, weight_groups, r,
                                                           inputs.truncated)
        return token_adv, {**w_stats, **stats}
    if inputs.hidden is None:
        raise ValueError("algorithm 'resrl' needs the penultimate-layer hidden states (inputs.hidden)")
    token_adv, w_stats = resrl_token_advantages(inputs.hidden, inputs.response_mask, adv, weight_groups, r,
                                                inputs.truncated,
                                                positive=positive if r.positive == "reward" else None)
    return token_adv, {**w_stats, **stats}


@register_algorithm("nthr", needs_head=True, reads_scale_rewards=True)
def nthr(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    if inputs.head is None:
        raise ValueError("algorithm 'nthr' needs the head sketch (inputs.head)")
    adv = A.grpo_advantages(inputs.rewards, inputs.group_index, cfg.std_eps, cfg.scale_rewards)
    return nthr_token_advantages(inputs.head, inputs.response_mask, adv, inputs.group_index, cfg.nthr)


@register_algorithm("passk")
def passk(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    adv = A.passk_advantages(inputs.rewards, inputs.group_index, cfg.passk_k, cfg.correct_threshold)
    return _broadcast(adv, inputs.response_mask), {}


@register_algorithm("flowrl", policy_loss="flowrl", needs_reference=True, needs_log_z=True, reads_scale_rewards=True)
def flowrl(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    # FlowRL's r̂ is GRPO's group-normalised advantage; its loss is the trajectory balance
    # (resrl.core.flowrl), which reads it as the row's constant token advantage
    adv = A.grpo_advantages(inputs.rewards, inputs.group_index, cfg.std_eps, cfg.scale_rewards)
    return _broadcast(adv, inputs.response_mask), {}


# ---- step-level algorithms (long-horizon agents, resrl.core.step_advantages) ----------------------

def _step_tags(inputs: AdvantageInputs, name: str, *extra: str) -> None:
    for key in ("trajectory_index", "step_index", "anchor_index", "step_rewards", *extra):
        if getattr(inputs, key) is None:
            raise ValueError(f"algorithm {name!r} needs the step layout's per-row tag inputs.{key} "
                             "(train with env.layout: step)")


def _gigpo_sequence(inputs: AdvantageInputs, cfg: AlgorithmConfig, name: str):
    _step_tags(inputs, name)
    g = cfg.gigpo
    return S.gigpo_advantages(inputs.rewards, inputs.step_rewards, inputs.group_index, inputs.trajectory_index,
                              inputs.step_index, inputs.anchor_index, gamma=g.gamma, omega=g.omega, mode=g.mode,
                              eps=cfg.std_eps, episode_stats=g.episode_stats)


@register_algorithm("gigpo", step_level=True)
def gigpo(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    adv, stats = _gigpo_sequence(inputs, cfg, "gigpo")
    return _broadcast(adv, inputs.response_mask), stats


@register_algorithm("gigpo-resrl", needs_hidden=True, step_level=True)
def gigpo_resrl(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    # ResRL's token weights on top of GiGPO's row advantages: P = {A > 0} spans each game's subspace,
    # the tokens of rows with A < 0 are weighted by their residual (spec §2, unchanged)
    if inputs.hidden is None:
        raise ValueError("algorithm 'gigpo-resrl' needs the penultimate-layer hidden states (inputs.hidden)")
    if cfg.resrl.grouping != "whole" or cfg.resrl.positive != "advantage":
        raise ValueError("algorithm 'gigpo-resrl' weighs whole step groups by their GiGPO advantage: "
                         "ResRLConfig.grouping must be 'whole' and positive 'advantage'")
    adv, stats = _gigpo_sequence(inputs, cfg, "gigpo-resrl")
    token_adv, resrl_stats = resrl_token_advantages(inputs.hidden, inputs.response_mask, adv, inputs.group_index,
                                                    cfg.resrl, inputs.truncated)
    return token_adv, {**stats, **resrl_stats}


@register_algorithm("empg", step_level=True, needs_step_entropy=True, reads_scale_rewards=True)
def empg(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    _step_tags(inputs, "empg", "step_entropy")
    base = A.grpo_advantages(inputs.rewards, inputs.group_index, cfg.std_eps, cfg.scale_rewards)
    e = cfg.empg
    adv, stats = S.empg_advantages(base, inputs.step_entropy, inputs.trajectory_index, inputs.step_index,
                                   k=e.k, k_f=e.k_f, zeta=e.zeta, eps=e.eps)
    return _broadcast(adv, inputs.response_mask), stats


# ---- PPO with a critic (resrl.core.gae; the critic: resrl.core.value, resrl.engines.trl.critic) -------

def _ppo_targets(inputs: AdvantageInputs, cfg: AlgorithmConfig) -> "_gae.PPOTargets":
    if inputs.values is None:
        raise ValueError("algorithm 'ppo' needs the critic's values (inputs.values, (B, T)): the engine runs "
                         "the critic (resrl train / ResRLTrainer do)")
    return _gae.ppo_targets(inputs.rewards, inputs.values, inputs.response_mask, cfg.ppo,
                            step_rewards=inputs.step_rewards, trajectory_index=inputs.trajectory_index,
                            step_index=inputs.step_index, batch_sum=inputs.batch_sum)


@register_algorithm("ppo", needs_values=True)
def ppo(inputs: AdvantageInputs, cfg: AlgorithmConfig):
    targets = _ppo_targets(inputs, cfg)
    return targets.advantages, targets.stats


# combinations refused with the reason (config key algorithm.name)
UNSUPPORTED_COMBINATIONS = {
    "empg-resrl": "EMPG already re-weights every step by its entropy and re-centres the batch, so the sign of "
                  "its advantage no longer says which steps belong to winning trajectories: ResRL's positive "
                  "subspace and negative weights have no meaning there; use gigpo-resrl or resrl",
    "resrl-empg": "see empg-resrl",
}


def resolve_policy_loss(algorithm: str, loss: LossConfig) -> str:
    """The policy loss a run of `algorithm` trains with: `loss.policy_loss`, or the algorithm's own.
    A loss built on the shared `policy_loss` (resrl.core.loss.SURROGATES) combines with every algorithm
    whose own loss is the clipped surrogate; an algorithm with a loss of its own (FlowRL) keeps it.
    ValueError naming the setting otherwise, or for an option the loss would not read."""
    spec = get_algorithm(algorithm)
    name = loss.policy_loss or spec.policy_loss
    if name != spec.policy_loss:
        if spec.policy_loss not in SURROGATES:
            raise ValueError(f"LossConfig.policy_loss = {name!r} cannot replace algorithm {algorithm!r}'s own loss "
                             f"({spec.policy_loss}); leave it unset")
        if name not in SURROGATES:
            owners = sorted(a for a, s in ALGORITHMS.items() if s.policy_loss == name)
            raise ValueError(f"LossConfig.policy_loss = {name!r} is the loss of algorithm(s) {owners} only; with "
                             f"{algorithm!r} choose one of {sorted(SURROGATES)}")
    check_loss_options(name, loss)
    return name


def shape_rewards(rewards: Tensor, lengths: Tensor, cfg: AlgorithmConfig) -> Tensor:
    """Apply the configured reward shaping: DAPO overlong penalty, then spec §3 length scaling."""
    r = rewards.float()
    if cfg.overlong_buffer > 0:
        r = r + A.overlong_penalty(lengths, cfg.max_response_length, cfg.overlong_buffer, cfg.overlong_penalty)
    if cfg.length_scale:
        r = A.length_scaled_rewards(r, lengths, cfg.length_scale_start, cfg.max_response_length,
                                    cfg.length_scale_min)
    return r


def select_advantage_rows(inputs: AdvantageInputs, rows: Tensor) -> AdvantageInputs:
    """The AdvantageInputs of `rows` ((K,) int64 indices): every per-row tensor indexed, the head
    sketch's per-row tensors too (batch_sum, a function, is kept)."""
    def take(t):
        return t[rows.to(t.device)] if isinstance(t, Tensor) else t

    head = inputs.head
    if head is not None:
        head = replace(head, states=take(head.states), topk_ids=take(head.topk_ids), topk_probs=take(head.topk_probs),
                       target_prob=take(head.target_prob), targets=take(head.targets), log_norm=take(head.log_norm),
                       logits=take(head.logits))
    return replace(inputs, **{f.name: take(getattr(inputs, f.name)) for f in fields(AdvantageInputs)
                              if f.name != "head"}, head=head)


def _unscored(inputs: AdvantageInputs) -> Tensor:
    """`inputs` checked; (B,) bool: the unscorable rows (NaN reward: TRL's every-reward-function-None)."""
    mask = inputs.response_mask
    if inputs.rewards.dim() != 1 or mask.dim() != 2 or mask.shape[0] != inputs.rewards.shape[0]:
        raise ValueError(f"rewards must be (B,) and response_mask (B, T); got {tuple(inputs.rewards.shape)} "
                         f"and {tuple(mask.shape)}")
    if inputs.group_index.shape != inputs.rewards.shape:
        raise ValueError(f"group_index must be (B,) like rewards, got {tuple(inputs.group_index.shape)}")
    if bool(torch.isinf(inputs.rewards.float()).any()):
        raise ValueError("rewards contain inf")
    return torch.isnan(inputs.rewards.float())


def _shaped(inputs: AdvantageInputs, config: AlgorithmConfig) -> AdvantageInputs:
    """`inputs` (every row scored) with the configured reward shaping applied to its rewards."""
    return replace(inputs, rewards=shape_rewards(inputs.rewards, inputs.response_mask.sum(dim=1), config))


def _critic_view(inputs: AdvantageInputs, unscored: Tensor) -> AdvantageInputs:
    """PPO's view of a batch with unscorable rows: their response mask emptied (advantage 0, out of the
    whitening statistics, no value target) and a placeholder reward 0. Rows are not dropped: the
    whitening's batch_sum is a collective every process must call."""
    keep = (~unscored).to(inputs.response_mask.dtype)[:, None]
    return replace(inputs, rewards=torch.where(unscored, torch.zeros_like(inputs.rewards), inputs.rewards),
                   response_mask=inputs.response_mask * keep)


def compute_token_advantages(inputs: AdvantageInputs, config: AlgorithmConfig) -> tuple[Tensor, dict[str, float]]:
    """Shaped rewards -> the configured algorithm's (B, T) float32 token advantages and its stats.
    A NaN reward marks an unscorable row (TRL: every reward function returned None): the algorithm
    runs on the other rows (the group's mean and std leave it out) and its advantage is 0."""
    spec = get_algorithm(config.name)
    mask = inputs.response_mask
    unscored = _unscored(inputs)
    if bool(unscored.any()) and spec.needs_values:
        inputs = _critic_view(inputs, unscored)
    elif bool(unscored.any()):
        # as TRL does, an unscorable row is left out of its group's statistics (here: out of the
        # algorithm altogether) and its advantage is 0
        keep = (~unscored).nonzero(as_tuple=True)[0]
        token_adv = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        if keep.numel() == 0:
            return token_adv, {}
        kept_adv, stats = compute_token_advantages(select_advantage_rows(inputs, keep), config)
        token_adv[keep] = kept_adv.to(token_adv.device)
        return token_adv, stats
    token_adv, stats = spec.fn(_shaped(inputs, config), config)
    return token_adv.float(), dict(stats)


def compute_ppo_targets(inputs: AdvantageInputs, config: AlgorithmConfig) -> "_gae.PPOTargets":
    """PPO on shaped rewards: the advantages `compute_token_advantages` gives, plus the critic's
    regression targets (returns and the positions regressed) — what an engine's critic trains on.
    An unscorable row (NaN reward) has advantage 0 and no value target."""
    if not get_algorithm(config.name).needs_values:
        raise ValueError(f"compute_ppo_targets: algorithm {config.name!r} has no critic")
    unscored = _unscored(inputs)
    if bool(unscored.any()):
        inputs = _critic_view(inputs, unscored)
    return _ppo_targets(_shaped(inputs, config), config)


def resolve_settings(algorithm: dict, loss: dict, max_response_length: int | None = None) -> tuple[dict, dict]:
    """An algorithm's defaults under the settings a user gave, as nested dicts (the YAML's
    `algorithm:` and `loss:` sections, or the flat fields of a TRL config): the ONE place where
    `resrl train` (train/config.py) and the TRL engine's Python path (engines/trl/fields.py) apply
    them, so the same algorithm name gives the same loss from both. Precedence, lowest first:

        dataclass defaults < the algorithm's reward_defaults / loss_defaults
                           < algorithm.resrl.preset (ResRL only) < keys the user gave

    max_response_length: the completion budget, default of L_max for overlong / length shaping and
    of the Dr.GRPO normaliser (loss.max_response_length) when not given. Returns new dicts; the
    preset's errors are ValueErrors; the name must be registered (`get_algorithm`)."""
    from .resrl_config import resolve_resrl_preset

    algorithm, loss = dict(algorithm or {}), dict(loss or {})
    spec = get_algorithm(algorithm.get("name", "grpo"))
    algorithm, loss = resolve_resrl_preset(algorithm, loss, algorithm.get("max_response_length") or max_response_length)
    algorithm = {**spec.reward_defaults, **algorithm}
    if algorithm.get("max_response_length") is None:
        algorithm["max_response_length"] = max_response_length
    loss = {**spec.loss_defaults, **loss}
    if loss.get("max_response_length") is None:
        loss["max_response_length"] = max_response_length
    return algorithm, loss
