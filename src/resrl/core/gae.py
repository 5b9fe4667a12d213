"""PPO's advantages: Generalized Advantage Estimation (Schulman et al. 2016, "High-Dimensional
Continuous Control Using Generalized Advantage Estimation", §3) on a critic's values, per token
(single-turn and multi-turn layouts) or per environment step (the step layout).

Per token (veRL's `compute_gae_advantage_return`, the paper's agent baseline through verl-agent).
Row i has response positions t = 0..T−1 with mask m_t (1: a token the policy produced; 0:
padding, or an environment token of a multi-turn trajectory); V_t is the critic's value of the
state in which token t was sampled; the sequence reward R arrives on the last valid token:

    r_t      = R if t is the last position with m_t = 1, else 0                          (G1)
    δ_t      = r_t + γ · V_next(t) − V_t                                                 (G2)
    A_t      = δ_t + γλ · A_next(t)                                                      (G3)
    R̂_t      = A_t + V_t               the critic's regression target ("returns")        (G4)

where next(t) is the next position u > t with m_u = 1 (masked positions are transparent: an
environment's tokens neither carry a TD error nor break the chain between the model's turns), and
V_next = A_next = 0 past the last valid token (the episode ended: EOS, the length limit or the
environment's end — a cut is treated as an end, as veRL and verl-agent do).

Per environment step (`PPOConfig.step_gae = "steps"`, the step layout's rows, resrl.engines.steps).
Step k of a trajectory has the environment's reward r_k (`step_rewards`) and the critic's value
V_k of its state (the value at the step's first response position, i.e. after reading the step
prompt); over the steps of each trajectory, with V_n = A_n = 0 after its last step:

    δ_k = r_k + γ · V_{k+1} − V_k,   A_k = δ_k + γλ · A_{k+1},   R̂_k = A_k + V_k          (S1)

Every token of step k's response gets A_k; the critic regresses V_k (its first response position)
on R̂_k. `step_gae = "rows"` instead treats every step row as its own episode with the row's
episode reward (verl-agent's PPO: veRL's token GAE on each step row, G1–G4).

Then the advantages are whitened over the batch (`PPOConfig.whiten`, veRL's `masked_whiten`):

    Â = (A − mean A) / sqrt(var A + 1e-8)     mean / unbiased var over the valid entries      (W)

With γ = λ = 1 and no whitening, A_t = R − V_t: the return minus the critic's baseline.

Every function is pure torch on whole batches, computed in float64; statistics that span the
batch (whitening, explained variance) take an optional `batch_sum`, a function summing a tensor
over the processes that share the batch (None: this batch is all of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

STEP_GAE_MODES = ("steps", "rows")
WHITEN_EPS = 1e-8  # veRL's masked_whiten

BatchSum = Callable[[Tensor], Tensor]


@dataclass
class PPOConfig:
    """PPO's advantage estimator (AlgorithmConfig.ppo, YAML algorithm.ppo). The critic itself (its
    trunk, optimiser, value clipping, warm-up) is `resrl.core.value.CriticConfig` (YAML `critic:`).
    Defaults: veRL's (algorithm.gamma = algorithm.lam = 1.0, advantages whitened)."""

    gamma: float = 1.0          # γ: discount per token (per environment step in the step layout)
    lam: float = 1.0            # λ: GAE's bias-variance trade-off (1: Monte-Carlo returns minus V)
    whiten: bool = True         # whiten the advantages over the batch (W), as veRL's GAE does
    # the step layout: "steps" = GAE over environment steps with the step rewards (S1);
    # "rows" = every step row its own episode with the episode reward (verl-agent's PPO)
    step_gae: str = "steps"

    def __post_init__(self) -> None:
        for name in ("gamma", "lam"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"PPOConfig.{name} must be a float in [0, 1], got {v!r}")
        if not isinstance(self.whiten, bool):
            raise ValueError(f"PPOConfig.whiten must be true or false, got {self.whiten!r}")
        if self.step_gae not in STEP_GAE_MODES:
            raise ValueError(f"PPOConfig.step_gae must be one of {STEP_GAE_MODES}, got {self.step_gae!r}")


def _check_tokens(**tensors: Tensor) -> tuple[int, int]:
    shape = None
    for name, t in tensors.items():
        if t.dim() != 2:
            raise ValueError(f"`{name}` must be (B, T), got {tuple(t.shape)}")
        if shape is None:
            shape = tuple(t.shape)
        elif tuple(t.shape) != shape:
            raise ValueError(f"`{name}` is {tuple(t.shape)}, expected {shape}")
    return shape


def last_token_rewards(rewards: Tensor, mask: Tensor) -> Tensor:
    """(G1): the sequence reward on each row's last valid position, 0 elsewhere (and on rows with
    no valid position). (B,), (B, T) -> (B, T) float64."""
    if rewards.dim() != 1 or mask.dim() != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(f"rewards must be (B,) and mask (B, T); got {tuple(rewards.shape)} and {tuple(mask.shape)}")
    m = mask.bool()
    B, T = m.shape
    positions = torch.arange(T, device=m.device).expand(B, T)
    last = torch.where(m, positions, torch.full_like(positions, -1)).max(dim=1).values   # (B,) -1: none
    out = torch.zeros(B, T, dtype=torch.float64, device=rewards.device)
    has = last >= 0
    out[has.nonzero(as_tuple=True)[0], last[has]] = rewards.to(torch.float64)[has]
    return out


def gae_advantages(token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float
                   ) -> tuple[Tensor, Tensor]:
    """(G2)–(G4) per row over its valid positions (masked positions transparent).
    (B, T) x3 -> (advantages, returns), (B, T) float64 each, 0 on masked positions."""
    _check_tokens(token_rewards=token_rewards, values=values, mask=mask)
    m = mask.to(torch.float64)
    r, v = token_rewards.to(torch.float64), values.to(torch.float64)
    B, T = m.shape
    next_value = torch.zeros(B, dtype=torch.float64, device=m.device)   # V_next(t): 0 past the end
    next_adv = torch.zeros(B, dtype=torch.float64, device=m.device)     # A_next(t)
    adv = torch.zeros(B, T, dtype=torch.float64, device=m.device)
    for t in range(T - 1, -1, -1):
        delta = r[:, t] + gamma * next_value - v[:, t]                  # (G2)
        a_t = delta + gamma * lam * next_adv                            # (G3)
        valid = m[:, t] > 0
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_value = torch.where(valid, v[:, t], next_value)           # masked: the chain passes through
        next_adv = torch.where(valid, a_t, next_adv)
    returns = torch.where(m > 0, adv + v, torch.zeros_like(adv))       # (G4)
    return adv, returns


def step_gae_advantages(step_rewards: Tensor, values: Tensor, trajectory_index: Tensor, step_index: Tensor,
                        gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """(S1) over the steps of each trajectory, rows in any order. (B,) x4 -> (advantages, returns),
    (B,) float64 each. `step_index` must run 0..n−1 within every trajectory."""
    from .step_advantages import _check_rows, _trajectory_grid

    _check_rows(step_rewards=step_rewards, values=values, trajectory_index=trajectory_index, step_index=step_index)
    tid, step, L = _trajectory_grid(trajectory_index, step_index)
    n_traj = int(tid.max()) + 1 if tid.numel() else 0
    dev = step_rewards.device
    r = torch.zeros(n_traj, L, dtype=torch.float64, device=dev)
    v = torch.zeros(n_traj, L + 1, dtype=torch.float64, device=dev)   # column L (and past each end): V = 0
    r[tid, step] = step_rewards.to(torch.float64)
    v[tid, step] = values.to(torch.float64)
    adv = torch.zeros(n_traj, L + 1, dtype=torch.float64, device=dev)
    for k in range(L - 1, -1, -1):  # past a trajectory's last step its r, V and A are 0: the episode ended
        adv[:, k] = r[:, k] + gamma * v[:, k + 1] - v[:, k] + gamma * lam * adv[:, k + 1]
    a = adv[tid, step]
    return a, a + values.to(torch.float64)


def _sum(x: Tensor, batch_sum: BatchSum | None) -> Tensor:
    return x if batch_sum is None else batch_sum(x)


def masked_moments(x: Tensor, mask: Tensor, batch_sum: BatchSum | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(count, mean, unbiased variance) of `x` over the valid entries of the whole batch (every
    process when `batch_sum` is given); variance 0 for fewer than two entries. float64 scalars."""
    m = mask.to(torch.float64)
    xs = torch.where(mask.bool(), x.to(torch.float64), torch.zeros((), dtype=torch.float64, device=x.device))
    n, s = _sum(m.sum(), batch_sum), _sum(xs.sum(), batch_sum)
    mean = s / n.clamp(min=1.0)
    dev2 = _sum((torch.where(mask.bool(), xs - mean, torch.zeros_like(xs)) ** 2).sum(), batch_sum)
    var = torch.where(n > 1, dev2 / (n - 1).clamp(min=1.0), torch.zeros_like(dev2))
    return n, mean, var


def masked_whiten(x: Tensor, mask: Tensor, batch_sum: BatchSum | None = None) -> Tensor:
    """(W): (x − mean) / sqrt(var + 1e-8) over the valid entries, 0 on the others. float64."""
    _, mean, var = masked_moments(x, mask, batch_sum)
    out = (x.to(torch.float64) - mean) * torch.rsqrt(var + WHITEN_EPS)
    return torch.where(mask.bool(), out, torch.zeros_like(out))


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor, batch_sum: BatchSum | None = None) -> float:
    """1 − Var(R̂ − V) / Var(R̂) over the valid entries (veRL's critic/vf_explained_var): 1 for a
    perfect critic, 0 for one that predicts the mean, < 0 for worse. NaN when Var(R̂) = 0."""
    _, _, var_r = masked_moments(returns, mask, batch_sum)
    _, _, var_d = masked_moments(returns.to(torch.float64) - values.to(torch.float64), mask, batch_sum)
    return float(1.0 - var_d / var_r) if float(var_r) > 0 else float("nan")


@dataclass
class PPOTargets:
    """What PPO's estimator gives one batch: the policy's advantages and the critic's targets."""

    advantages: Tensor   # (B, T) float32, 0 on padding (whitened when PPOConfig.whiten)
    returns: Tensor      # (B, T) float32 R̂ on `value_mask`, 0 elsewhere
    value_mask: Tensor   # (B, T) bool: the positions whose value the critic regresses
    stats: dict


def ppo_targets(rewards: Tensor, values: Tensor, mask: Tensor, config: PPOConfig, *,
                step_rewards: Tensor | None = None, trajectory_index: Tensor | None = None,
                step_index: Tensor | None = None, batch_sum: BatchSum | None = None) -> PPOTargets:
    """PPO's advantages and value targets for one batch (module docstring).

    rewards: (B,) sequence rewards (in the step layout: each row's episode reward);
    values: (B, T) the critic's values at the response positions (rollout-time, no grad);
    mask: (B, T) the response (loss) mask; step tags (B,): the step layout's rows — with
    config.step_gae = "steps" they select (S1), else the token estimator (G1–G4) runs per row."""
    _check_tokens(values=values, mask=mask)
    if not bool(torch.isfinite(values.float()).all()):
        raise ValueError("the critic's values contain NaN or inf")
    m = mask.bool()
    stepwise = config.step_gae == "steps" and trajectory_index is not None
    if stepwise:
        if step_rewards is None or step_index is None:
            raise ValueError("PPO's step GAE needs step_rewards, trajectory_index and step_index (B,) for every row")
        a, ret = step_gae_advantages(step_rewards, values[:, 0], trajectory_index, step_index,
                                     config.gamma, config.lam)
        value_mask = torch.zeros_like(m)
        value_mask[:, 0] = True                                        # V_k: the state before the step's reply
        adv = a[:, None] * m.to(torch.float64)
        returns = torch.where(value_mask, ret[:, None].expand_as(value_mask), torch.zeros((), dtype=torch.float64,
                                                                                           device=ret.device))
        rows = torch.ones_like(a, dtype=torch.bool)
        if config.whiten:  # each step counts once, its tokens share its advantage
            a_w = masked_whiten(a[:, None], rows[:, None], batch_sum)[:, 0]
            adv = a_w[:, None] * m.to(torch.float64)
        raw = a
    else:
        adv, returns = gae_advantages(last_token_rewards(rewards, m), values, m, config.gamma, config.lam)
        value_mask = m
        raw = adv[m]
        if config.whiten:
            adv = masked_whiten(adv, m, batch_sum)
    _, ret_mean, _ = masked_moments(returns, value_mask, batch_sum)
    _, val_mean, _ = masked_moments(values, value_mask, batch_sum)
    stats = {"critic/explained_variance": explained_variance(values, returns, value_mask, batch_sum),
             "critic/return_mean": float(ret_mean), "critic/value_mean": float(val_mean),
             "critic/advantage_abs_raw": float(raw.abs().mean()) if raw.numel() else 0.0}
    return PPOTargets(adv.to(torch.float32), returns.to(torch.float32), value_mask, stats)


__all__ = ["PPOConfig", "PPOTargets", "STEP_GAE_MODES", "last_token_rewards", "gae_advantages",
           "step_gae_advantages", "masked_moments", "masked_whiten", "explained_variance", "ppo_targets"]
