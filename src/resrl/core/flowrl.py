"""FlowRL (Zhu et al. 2025): trajectory balance towards π_ref · exp(β r̂), with a learned log Z(c).

Per response i of prompt c (means over the response's valid tokens):

    δ_i = log Z(c) + mean_t log π_θ(y_i,t) − β · r̂_i − mean_t log π_ref(y_i,t)
    w_i = exp( Σ_t (log π_θ − log π_old) )             detached sequence importance weight
    L   = mean_i ( w_i · δ_i² )

r̂ is GRPO's group-normalised advantage ("R = exp(Â)", so log R = Â); β = 15 in the authors' code.
There is no separate KL or entropy term: π_ref enters through δ only. log Z(c) comes from
`LogZHead`, a small MLP on the masked mean of the prompt's last-layer states (the authors'
`ProjZModule`), trained with the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .loss import LOG_RATIO_CLAMP, LossConfig, PolicyLossInputs, register_policy_loss


@dataclass
class FlowRLConfig:
    """The log Z head (`LogZHead`). The loss's own settings (β, the clip of w) are in LossConfig."""

    head_layers: int = 3            # the authors' ProjZModule(num_layers=3)
    head_dropout: float = 0.1       # theirs
    detach_head_input: bool = False  # theirs: False, gradients of δ² reach the backbone via log Z

    def __post_init__(self) -> None:
        if not (isinstance(self.head_layers, int) and self.head_layers >= 1):
            raise ValueError(f"FlowRLConfig.head_layers must be an int >= 1, got {self.head_layers!r}")
        if not (isinstance(self.head_dropout, (int, float)) and 0 <= self.head_dropout < 1):
            raise ValueError(f"FlowRLConfig.head_dropout must be in [0, 1), got {self.head_dropout!r}")


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """(B, T), (B, T) -> (B,) mean over valid positions (0 for a row with none)."""
    m = mask.to(x.dtype)
    x = torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))
    return x.sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def flowrl_loss(
    log_probs: Tensor,
    ref_log_probs: Tensor,
    old_log_probs: Tensor,
    log_z: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    beta: float = 15.0,
    weight_clip: tuple[float, float] | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """FlowRL's weighted squared trajectory-balance residual, to minimise.

    log_probs:      (B, T) log π_θ of the sampled tokens (with grad)
    ref_log_probs:  (B, T) log π_ref; old_log_probs: (B, T) log π_old (both treated as constants)
    log_z:          (B,) log Z(c) of each response's prompt (with grad into the head)
    advantages:     (B,) r̂, the group-normalised advantage
    response_mask:  (B, T) valid response tokens
    weight_clip:    None (w unclipped) or (low, high): w clamped to [low, high]
    Rows with no valid token are left out of the mean. Returns (scalar loss, metrics):
    flowrl/log_z, flowrl/delta_abs (mean |δ|), flowrl/is_weight (mean w after the clip),
    flowrl/is_weight_clipped (fraction of rows whose w was clipped), flowrl/tb_loss.
    """
    B, T = log_probs.shape
    for name, t in (("ref_log_probs", ref_log_probs), ("old_log_probs", old_log_probs),
                    ("response_mask", response_mask)):
        if t.shape != (B, T):
            raise ValueError(f"flowrl_loss: {name} must have shape {(B, T)}, got {tuple(t.shape)}")
    for name, t in (("log_z", log_z), ("advantages", advantages)):
        if t.shape != (B,):
            raise ValueError(f"flowrl_loss: {name} must have shape {(B,)}, got {tuple(t.shape)}")
    if weight_clip is not None and not (len(weight_clip) == 2 and 0 <= weight_clip[0] <= weight_clip[1]):
        raise ValueError(f"flowrl_loss: weight_clip must be None or (low, high) with 0 <= low <= high, got {weight_clip}")
    dtype = torch.promote_types(log_probs.dtype, torch.float32)
    valid = response_mask.bool()
    has_tokens = valid.any(dim=1)
    mean_logp = _masked_mean(log_probs.to(dtype), valid)
    mean_ref = _masked_mean(ref_log_probs.detach().to(dtype), valid)
    delta = log_z.to(dtype) + mean_logp - beta * advantages.detach().to(dtype) - mean_ref       # (B,)

    log_ratio = torch.where(valid, log_probs.detach().to(dtype) - old_log_probs.detach().to(dtype),
                            torch.zeros((), dtype=dtype, device=log_probs.device))
    raw_w = torch.exp(log_ratio.sum(dim=1).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))              # (B,)
    w = raw_w if weight_clip is None else raw_w.clamp(weight_clip[0], weight_clip[1])

    n = has_tokens.to(dtype).sum().clamp(min=1.0)
    per_row = torch.where(has_tokens, w * delta.square(), torch.zeros((), dtype=dtype, device=delta.device))
    loss = per_row.sum() / n
    with torch.no_grad():
        keep = has_tokens.to(dtype)
        metrics = {
            "flowrl/tb_loss": loss.detach(),
            "flowrl/log_z": (log_z.detach().to(dtype) * keep).sum() / n,
            "flowrl/delta_abs": (delta.detach().abs() * keep).sum() / n,
            "flowrl/is_weight": (w * keep).sum() / n,
            "flowrl/is_weight_clipped": ((w != raw_w).to(dtype) * keep).sum() / n,
        }
    values = torch.stack([v.float() for v in metrics.values()]).tolist()
    return loss, dict(zip(metrics.keys(), values))


def weight_clip_bounds(config: LossConfig) -> tuple[float, float] | None:
    """LossConfig.flowrl_weight_clip -> the (low, high) clamp of w (None: unclipped)."""
    if config.flowrl_weight_clip == "ppo":
        return (1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high)
    if config.flowrl_weight_clip == "cap":
        return (0.0, float(config.flowrl_weight_cap))
    return None


@register_policy_loss("flowrl")
def flowrl_policy_loss(inputs: PolicyLossInputs, config: LossConfig):
    """Registry entry: r̂ = the masked mean of the token advantages (GRPO's Â, constant per row)."""
    if inputs.ref_logprobs is None or inputs.log_z is None:
        raise ValueError("the flowrl loss needs ref_logprobs (log π_ref) and log_z (the log Z head's output)")
    adv = inputs.advantages
    seq_adv = _masked_mean(adv.to(torch.promote_types(adv.dtype, torch.float32)), inputs.response_mask.bool())
    return flowrl_loss(inputs.logprobs, inputs.ref_logprobs, inputs.old_logprobs, inputs.log_z, seq_adv,
                       inputs.response_mask, beta=config.flowrl_beta, weight_clip=weight_clip_bounds(config))


class LogZHead(nn.Module):
    """log Z(c) from the prompt's last-layer states (the authors' ProjZModule, num_layers = 3):

        x = masked mean over prompt positions of h_L            (B, d)
        (num_layers − 1) × [Linear(d, d), GELU, LayerNorm(d), Dropout(p)], then Linear(d, 1)

    forward(prompt_states (B, P, d), prompt_mask (B, P)) -> (B,). Gradients reach the backbone
    through `prompt_states` unless the caller detaches them.
    """

    def __init__(self, hidden_size: int, num_layers: int = 3, dropout: float = 0.1):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"LogZHead: num_layers must be >= 1, got {num_layers}")
        layers: list[nn.Module] = []
        for _ in range(num_layers - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.GELU(), nn.LayerNorm(hidden_size), nn.Dropout(dropout)]
        layers.append(nn.Linear(hidden_size, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, prompt_states: Tensor, prompt_mask: Tensor) -> Tensor:
        m = prompt_mask.to(prompt_states.dtype)[..., None]
        pooled = (prompt_states * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        param = next(self.parameters())
        return self.net(pooled.to(param.dtype))[:, 0]


__all__ = ["FlowRLConfig", "flowrl_loss", "flowrl_policy_loss", "weight_clip_bounds", "LogZHead"]
