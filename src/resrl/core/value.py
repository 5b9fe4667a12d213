"""PPO's critic: its settings (`CriticConfig`, YAML `critic:`) and its loss, the clipped value loss
(veRL's `compute_value_loss`, from OpenAI baselines' PPO2):

    V^clip  = V_old + clip(V − V_old, −ε_v, +ε_v)                                           (V1)
    ℓ_t     = ½ · max( (V_t − R̂_t)², (V^clip_t − R̂_t)² )                                   (V2)
    L_V     = agg(ℓ)           the policy loss's aggregation (loss.agg) unless critic.loss_agg

V: the critic's values now (with grad), V_old: its values at rollout time (the ones GAE used),
R̂: GAE's returns (resrl.core.gae). ε_v = `value_clip` (None: no clipping, ℓ_t = ½ (V_t − R̂_t)²).
The fraction of valid positions where the clipped term is the larger is `critic/value_clip_frac`.

The critic's model — a value head on a trunk, its optimiser and warm-up — lives in the TRL engine
(resrl.engines.trl.critic); this module holds no engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .loss import AGG_MODES, aggregate_loss

CRITIC_TRUNKS = ("separate", "shared")
# the critic's learning rate when `learning_rate` is None: this multiple of the policy's (verl-agent's
# ALFWorld / WebShop PPO: critic 1e-5, actor 1e-6)
CRITIC_LR_MULTIPLE = 10.0


@dataclass
class CriticConfig:
    """The value model of `algorithm.name: ppo` (veRL's `critic.*` and `trainer.critic_warmup`)."""

    # "separate": a trunk of its own, initialised from the policy's initial weights (or model_path),
    # with a value head (veRL / verl-agent's critic); "shared": a value head on the policy's own
    # last-layer states, the value loss added to the policy loss (the trunk trains on both)
    trunk: str = "separate"
    model_path: str | None = None   # separate trunk: load it from this directory (None: copy the policy's)
    learning_rate: float | None = None  # None: CRITIC_LR_MULTIPLE x train.learning_rate (verl-agent: 1e-5)
    weight_decay: float = 0.01      # AdamW (veRL's critic optimiser default)
    max_grad_norm: float = 1.0      # the critic's own gradient clipping (veRL: critic.grad_clip)
    value_clip: float | None = 0.5  # ε_v of (V1); None: unclipped (veRL: critic.cliprange_value = 0.5)
    value_coef: float = 1.0         # weight of L_V in the loss the backward pass sees
    warmup_steps: int = 0           # first optimiser updates that train the critic only (veRL: trainer.critic_warmup)
    loss_agg: str | None = None     # None: the policy loss's aggregation (loss.agg), as veRL's critic

    def __post_init__(self) -> None:
        if self.trunk not in CRITIC_TRUNKS:
            raise ValueError(f"CriticConfig.trunk must be one of {CRITIC_TRUNKS}, got {self.trunk!r}")
        if self.model_path is not None and self.trunk != "separate":
            raise ValueError("CriticConfig.model_path is the separate trunk's directory: set trunk: separate")
        if self.learning_rate is not None and not (_number(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"CriticConfig.learning_rate must be > 0 (or null), got {self.learning_rate!r}")
        for name in ("weight_decay", "max_grad_norm", "value_coef"):
            v = getattr(self, name)
            if not (_number(v) and v >= 0):
                raise ValueError(f"CriticConfig.{name} must be a float >= 0, got {v!r}")
        if self.value_clip is not None and not (_number(self.value_clip) and self.value_clip > 0):
            raise ValueError(f"CriticConfig.value_clip must be > 0 (or null: no clipping), got {self.value_clip!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"CriticConfig.warmup_steps must be an int >= 0, got {self.warmup_steps!r}")
        if self.loss_agg is not None and self.loss_agg not in AGG_MODES:
            raise ValueError(f"CriticConfig.loss_agg must be one of {AGG_MODES} (or null), got {self.loss_agg!r}")

    def resolved_learning_rate(self, policy_learning_rate: float) -> float:
        return self.learning_rate if self.learning_rate is not None else CRITIC_LR_MULTIPLE * policy_learning_rate


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, clip: float | None,
               agg: str = "token-mean", max_response_length: int | None = None) -> tuple[Tensor, dict[str, float]]:
    """(V1)–(V2): the clipped value loss and its statistics. values (B, T) with grad; old_values,
    returns (B, T) constants; mask (B, T) the positions regressed. Returns (scalar, stats)."""
    for name, t in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        if t.shape != values.shape:
            raise ValueError(f"value_loss: `{name}` is {tuple(t.shape)}, `values` {tuple(values.shape)}")
    v = values.float()
    old, target = old_values.detach().float(), returns.detach().float()
    unclipped = (v - target) ** 2
    if clip is None:
        per_token, clipped_larger = unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    else:
        v_clip = old + (v - old).clamp(-clip, clip)                                      # (V1)
        clipped = (v_clip - target) ** 2
        per_token = torch.maximum(unclipped, clipped)
        clipped_larger = clipped > unclipped
    loss = 0.5 * aggregate_loss(per_token, mask, agg, max_response_length)              # (V2)
    with torch.no_grad():
        m = mask.bool()
        n = m.sum().clamp(min=1).float()
        stats = {"critic/value_loss": float(loss.detach()),
                 "critic/value_clip_frac": float((clipped_larger & m).sum() / n),
                 "critic/value_error_abs": float(((v - target).abs() * m).sum() / n)}
    return loss, stats


__all__ = ["CriticConfig", "CRITIC_TRUNKS", "CRITIC_LR_MULTIPLE", "value_loss"]
