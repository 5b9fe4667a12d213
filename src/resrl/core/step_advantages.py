"""Step-level advantages for long-horizon agents (each environment step is its own sample).

A batch holds B step-samples. Every row carries tags (all (B,) int64 unless said otherwise):

    group_index       the game: the G trajectories of one task and seed share it
    trajectory_index  the trajectory the step belongs to (unique over the batch)
    step_index        0, 1, ... within its trajectory
    anchor_index      the environment state the step acted in (equal ids = identical states)
    rewards           (B,) float: the row's episode score R(τ) − c·invalid_format(step)
    step_rewards      (B,) float: the environment's reward of this step − c·invalid_format(step)
    step_entropy      (B,) float: mean token entropy of the step's response under π_old

GiGPO (Feng et al. 2025, arXiv 2505.10978; verl-agent `gigpo/core_gigpo.py`):

    A_E(i)   = (R_i − mean_g R) / (std_g R + ε)                                        (Eq. 3)
               over the rows of the row's group g (verl-agent's default: the statistics
               are taken across all step rows of the group, `compute_mean_std_cross_steps`)
    G_t      = Σ_{k ≥ t} γ^{k−t} r_k  within the trajectory (discounted step return)  (Eq. 5)
    A_S(i)   = (G_i − mean_u G) / (std_u G + ε)                                         (Eq. 7)
               over the step group u = rows of the same game with the same anchor      (Eq. 6)
    A        = A_E + ω · A_S                                                            (Eq. 8)

    mode "mean_std_norm" divides by the std (+ε), "mean_norm" only centres; a step group of one
    row gets A_S = 0. Defaults γ = 0.95, ω = 1, mode = mean_std_norm, ε = 1e-6 are verl-agent's
    ALFWorld run script (examples/gigpo_trainer/run_alfworld.sh).

EMPG (Wang et al. 2025, arXiv 2509.09265; the project page's reference pseudocode):

    Ĥ_t   = (H_t − min H) / (max H − min H + ε)            min/max over the whole batch  (Eq. 12)
    g_t   = exp(−k Ĥ_t) / mean_batch exp(−k Ĥ)             mean 1 over the batch          (Eq. 10)
    f_t   = exp(−k_f Ĥ_t)                                                                  (Eq. 11)
    A'_t  = g_t · A(τ) + ζ · f_{t+1}                        f_{t+1} = 0 on a last step
    A''_t = A'_t − mean_batch A'                            re-centred (zero batch mean)

    A(τ) is GRPO's group-normalised episode advantage of the row; defaults k = k_f = 1, ζ = 0.1,
    ε = 1e-8 (project page).

Everything is pure torch on whole batches, in any row order, computed in float64 and returned as
float32 (B,) sequence advantages; the registry broadcasts them over the response tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .advantages import grpo_advantages

GIGPO_MODES = ("mean_std_norm", "mean_norm")
EPISODE_STATS = ("steps", "trajectories")


# ---- configuration (AlgorithmConfig.gigpo / .empg; YAML algorithm.gigpo / algorithm.empg) -------

@dataclass
class GiGPOConfig:
    """GiGPO (arXiv 2505.10978), defaults from verl-agent's ALFWorld run script."""
    gamma: float = 0.95                 # discount of the step returns (algorithm.gamma)
    omega: float = 1.0                  # weight of the step advantage (algorithm.gigpo.step_advantage_w)
    mode: str = "mean_std_norm"         # mean_std_norm | mean_norm (algorithm.gigpo.mode)
    episode_stats: str = "steps"        # steps (verl-agent's compute_mean_std_cross_steps) | trajectories

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"GiGPOConfig.gamma must be in [0, 1], got {self.gamma!r}")
        if not (isinstance(self.omega, (int, float)) and self.omega >= 0):
            raise ValueError(f"GiGPOConfig.omega must be a float >= 0, got {self.omega!r}")
        if self.mode not in GIGPO_MODES:
            raise ValueError(f"GiGPOConfig.mode must be one of {GIGPO_MODES}, got {self.mode!r}")
        if self.episode_stats not in EPISODE_STATS:
            raise ValueError(f"GiGPOConfig.episode_stats must be one of {EPISODE_STATS}, got {self.episode_stats!r}")


@dataclass
class EMPGConfig:
    """EMPG (arXiv 2509.09265), defaults from the project page's reference code."""
    k: float = 1.0                      # self-calibrating scaling g(H) = exp(−k Ĥ) / mean
    k_f: float = 1.0                    # future-clarity bonus f(H) = exp(−k_f Ĥ)
    zeta: float = 0.1                   # weight of the bonus
    eps: float = 1e-8                   # of the min-max entropy normalisation and of g's mean

    def __post_init__(self) -> None:
        for name in ("k", "k_f", "zeta", "eps"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise ValueError(f"EMPGConfig.{name} must be a float >= 0, got {v!r}")


def _check_rows(**tensors: Tensor | None) -> int:
    B = None
    for name, t in tensors.items():
        if t is None:
            raise ValueError(f"step-level advantages need `{name}` (B,) for every row")
        if t.dim() != 1:
            raise ValueError(f"`{name}` must be (B,), got {tuple(t.shape)}")
        if B is None:
            B = t.shape[0]
        elif t.shape[0] != B:
            raise ValueError(f"`{name}` has {t.shape[0]} rows, expected {B}")
    return int(B or 0)


def dense_ids(*keys: Tensor) -> Tensor:
    """Rows with equal key tuples get equal dense ids in [0, U). k × (B,) int -> (B,) int64."""
    stacked = torch.stack([k.to(torch.int64) for k in keys], dim=1)
    return torch.unique(stacked, dim=0, return_inverse=True)[1]


def _trajectory_grid(trajectory_index: Tensor, step_index: Tensor) -> tuple[Tensor, Tensor, int]:
    """Row -> (dense trajectory id, step position) and the longest trajectory; checks that every
    trajectory has the steps 0..n−1 exactly once."""
    tid = dense_ids(trajectory_index)
    n_traj = int(tid.max()) + 1 if tid.numel() else 0
    step = step_index.to(torch.int64)
    if bool((step < 0).any()):
        raise ValueError("step_index must be >= 0")
    length = torch.zeros(n_traj, dtype=torch.int64, device=tid.device).index_add_(0, tid, torch.ones_like(tid))
    if bool((step >= length[tid]).any()):
        raise ValueError("step_index must run 0..n−1 within every trajectory (a step is missing or repeated)")
    seen = torch.zeros(n_traj, int(length.max()) if n_traj else 0, dtype=torch.int64, device=tid.device)
    seen.index_put_((tid, step), torch.ones_like(tid), accumulate=True)
    if n_traj and bool((seen.sum(1) != length).any() or (seen > 1).any()):
        raise ValueError("step_index must run 0..n−1 within every trajectory (a step is missing or repeated)")
    return tid, step, int(length.max()) if n_traj else 0


def discounted_step_returns(step_rewards: Tensor, trajectory_index: Tensor, step_index: Tensor,
                            gamma: float) -> Tensor:
    """G_t = r_t + γ·G_{t+1} within each trajectory (GiGPO Eq. 5). (B,) x3 -> (B,) float64."""
    _check_rows(step_rewards=step_rewards, trajectory_index=trajectory_index, step_index=step_index)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    tid, step, L = _trajectory_grid(trajectory_index, step_index)
    n_traj = int(tid.max()) + 1 if tid.numel() else 0
    grid = torch.zeros(n_traj, L + 1, dtype=torch.float64, device=step_rewards.device)  # (N, L+1), col L = 0
    grid[tid, step] = step_rewards.to(torch.float64)
    for t in range(L - 1, -1, -1):  # at most max_steps iterations, each over all trajectories
        grid[:, t] = grid[:, t] + gamma * grid[:, t + 1]
    return grid[tid, step]


def _normalise(values: Tensor, group: Tensor, eps: float, divide_std: bool) -> Tensor:
    return grpo_advantages(values, group, eps, "group" if divide_std else "none").to(torch.float64)


def gigpo_advantages(rewards: Tensor, step_rewards: Tensor, group_index: Tensor, trajectory_index: Tensor,
                     step_index: Tensor, anchor_index: Tensor, *, gamma: float = 0.95, omega: float = 1.0,
                     mode: str = "mean_std_norm", eps: float = 1e-6, episode_stats: str = "steps"
                     ) -> tuple[Tensor, dict[str, float]]:
    """GiGPO's A = A_E + ω·A_S for every step row (module docstring). (B,) each -> ((B,) float32, stats).

    episode_stats: "steps" (verl-agent's default) takes the group's mean / std over all its step
    rows; "trajectories" over one row (the first step) per trajectory.
    """
    _check_rows(rewards=rewards, step_rewards=step_rewards, group_index=group_index,
                trajectory_index=trajectory_index, step_index=step_index, anchor_index=anchor_index)
    if mode not in GIGPO_MODES:
        raise ValueError(f"GiGPO mode must be one of {GIGPO_MODES}, got {mode!r}")
    if episode_stats not in EPISODE_STATS:
        raise ValueError(f"GiGPO episode_stats must be one of {EPISODE_STATS}, got {episode_stats!r}")
    divide = mode == "mean_std_norm"
    r = rewards.to(torch.float64)
    if episode_stats == "steps":
        a_e = _normalise(r, group_index, eps, divide)
    else:  # one row per trajectory (its first step) sets the group's statistics
        first = step_index == 0
        gid = dense_ids(group_index)
        G = int(gid.max()) + 1 if gid.numel() else 0
        cnt = torch.bincount(gid[first], minlength=G).to(torch.float64)
        if bool((cnt == 0).any()):
            raise ValueError("every group needs the first step (step_index 0) of its trajectories")
        mean = torch.zeros(G, dtype=torch.float64, device=r.device).index_add_(0, gid[first], r[first]) / cnt
        dev2 = torch.zeros(G, dtype=torch.float64, device=r.device).index_add_(
            0, gid[first], (r[first] - mean[gid[first]]) ** 2)
        std = torch.where(cnt > 1, torch.sqrt(dev2 / (cnt - 1).clamp(min=1)), torch.zeros_like(cnt))
        centred = r - mean[gid]
        denom = std[gid] + eps
        a_e = torch.where(denom > 0, centred / denom.clamp(min=1e-300), torch.zeros_like(centred)) if divide \
            else centred
    returns = discounted_step_returns(step_rewards, trajectory_index, step_index, gamma)
    step_group = dense_ids(group_index, anchor_index)  # anchors never merge across games
    a_s = _normalise(returns, step_group, eps, divide)
    adv = a_e + omega * a_s
    sizes = torch.bincount(step_group).to(torch.float64)
    stats = {"gigpo/episode_adv_abs": float(a_e.abs().mean()) if adv.numel() else 0.0,
             "gigpo/step_adv_abs": float(a_s.abs().mean()) if adv.numel() else 0.0,
             "gigpo/step_groups": float(sizes.numel()),
             "gigpo/step_group_size_mean": float(sizes.mean()) if sizes.numel() else 0.0,
             "gigpo/step_groups_gt1_frac": float((sizes > 1).to(torch.float64).mean()) if sizes.numel() else 0.0}
    return adv.to(torch.float32), stats


def next_step_values(values: Tensor, trajectory_index: Tensor, step_index: Tensor, fill: float = 0.0) -> Tensor:
    """The value of the same trajectory's next step, `fill` on a last step. (B,) x3 -> (B,) float64."""
    tid, step, L = _trajectory_grid(trajectory_index, step_index)
    n_traj = int(tid.max()) + 1 if tid.numel() else 0
    grid = torch.full((n_traj, L + 1), float(fill), dtype=torch.float64, device=values.device)
    grid[tid, step] = values.to(torch.float64)
    return grid[tid, step + 1]


def empg_advantages(episode_advantages: Tensor, step_entropy: Tensor, trajectory_index: Tensor,
                    step_index: Tensor, *, k: float = 1.0, k_f: float = 1.0, zeta: float = 0.1,
                    eps: float = 1e-8) -> tuple[Tensor, dict[str, float]]:
    """EMPG's re-centred A'' for every step row (module docstring). (B,) each -> ((B,) float32, stats).

    episode_advantages: A(τ) of the row's trajectory (GRPO's, group-normalised).
    step_entropy: H_t, the mean token entropy of the step's response under the rollout policy.
    """
    B = _check_rows(episode_advantages=episode_advantages, step_entropy=step_entropy,
                    trajectory_index=trajectory_index, step_index=step_index)
    if B == 0:
        return torch.zeros(0), {}
    H = step_entropy.to(torch.float64)
    if not bool(torch.isfinite(H).all()):
        raise ValueError("step_entropy contains NaN or inf")
    h = (H - H.min()) / (H.max() - H.min() + eps)                  # Eq. 12, over the batch
    g = torch.exp(-k * h)
    g = g / (g.mean() + eps)                                        # Eq. 10: batch mean 1
    f = torch.exp(-k_f * h)                                         # Eq. 11
    f_next = next_step_values(f, trajectory_index, step_index, fill=0.0)
    modulated = g * episode_advantages.to(torch.float64) + zeta * f_next
    final = modulated - modulated.mean()                            # re-centred
    stats = {"empg/step_entropy_mean": float(H.mean()), "empg/g_min": float(g.min()), "empg/g_max": float(g.max()),
             "empg/bonus_mean": float((zeta * f_next).mean())}
    return final.to(torch.float32), stats


__all__ = ["discounted_step_returns", "gigpo_advantages", "empg_advantages", "next_step_values", "dense_ids",
           "GIGPO_MODES", "EPISODE_STATS"]
