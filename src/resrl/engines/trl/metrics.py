"""Metrics of the TRL engine: values averaged over processes (one collective per call) and
appended to a metrics sink — TRL's per-mode metric lists (`trl_compat.metrics(trainer, mode)`),
which TRL averages and logs at each logging step.

Names: a TRL dashboard's keep their TRL meaning, resrl's extras sit beside them, nothing twice.
    TRL's own (logged by TRL's generate-and-score, unchanged): reward, reward_std, rewards/<f>/mean,
        completions/mean_length, completions/clipped_ratio, ...
    TRL's names for the loss (`TRL_LOSS_NAMES`): clip_ratio/low_mean, clip_ratio/high_mean,
        clip_ratio/region_mean, clip_ratio/low_min, clip_ratio/high_max (min / max over the responses
        of each micro-batch), and the headline per-token means `entropy` and `kl`
    resrl's extras: `accuracy` (reward > correct_threshold), the loss's other terms as `loss/<name>`
        (pg_loss, the entropy and KL aggregated like the loss, dual_clip_frac, approx_kl, ratio_mean),
        the core's advantage statistics as `resrl/<name>` (or their own `prefix/name`, PPO's critic:
        `critic/<name>`) — on every logged step, NaN when undefined (no group with a correct
        response: no ω; returns that do not vary: no explained variance) —,
        `completions/update_rows` once per optimiser update and `reward/unscorable` (rows every
        reward function scored None) once per generation round.
"""

from __future__ import annotations

import math

import torch

# per-token means logged under headline names, whatever the loss aggregation
HEADLINE = {"entropy_token_mean": "entropy", "kl_token_mean": "kl"}
# resrl.core.loss's clip statistics under the names TRL 1.16's GRPOTrainer logs for its loss
TRL_LOSS_NAMES = {"clip_frac_low": "clip_ratio/low_mean", "clip_frac_high": "clip_ratio/high_mean",
                  "clip_frac": "clip_ratio/region_mean", "clip_frac_low_seq_min": "clip_ratio/low_min",
                  "clip_frac_high_seq_max": "clip_ratio/high_max", "cispo_clip_frac": "cispo_clip_ratio"}
# metrics logged as NaN (not dropped) when a logging window has no defined value
NAN_LOGGED_PREFIX = ("resrl/", "critic/")  # (critic/: PPO's explained variance, NaN when the returns do not vary)
UPDATE_ROWS = "completions/update_rows"
UNSCORABLE = "reward/unscorable"  # rows of the round that every reward function scored None


def log_stats(accelerator, sink: dict, stats: dict) -> None:
    """The core's advantage statistics (one dict per round or micro-batch), NaN-averaged over
    processes. A value that is NaN everywhere (e.g. no group had a positive: no ω) is logged as NaN,
    so each statistic is on every step's line (the trainer's `log` keeps it NaN, not None)."""
    if not stats:
        return
    keys = sorted(stats)
    values = torch.tensor([float(stats[k]) for k in keys], device=accelerator.device)
    values = accelerator.gather(values[None]).nanmean(dim=0).tolist()
    for k, v in zip(keys, values):
        sink[k if "/" in k else f"resrl/{k}"].append(v)


def log_round(accelerator, sink: dict, rewards: torch.Tensor, correct_threshold: float) -> None:
    """accuracy (reward > correct_threshold) of a generation round's scored rows (TRL logs reward and
    lengths), and `reward/unscorable`: the rows every reward function scored None (NaN here), which
    get advantage 0 and take no part in their group's statistics (as in TRL)."""
    rewards = accelerator.gather(rewards)
    scored = ~torch.isnan(rewards)
    accuracy = (rewards[scored] > correct_threshold).float().mean().item() if bool(scored.any()) else float("nan")
    sink["accuracy"].append(accuracy)
    sink[UNSCORABLE].append(float((~scored).sum()))


def nan_for_undefined(sink: dict, logs: dict, prefix: str = "") -> None:
    """Move the NAN_LOGGED_PREFIX metrics whose every value in the window is NaN from `sink` into
    `logs` as NaN (TRL's log would turn them into None, which loggers drop)."""
    for key in [k for k in sink if k.startswith(NAN_LOGGED_PREFIX)]:
        if sink[key] and all(math.isnan(v) for v in sink[key]):
            del sink[key]
            logs[prefix + key] = float("nan")


def log_loss(accelerator, sink: dict, metrics: dict, device) -> None:
    """One collective for all loss metrics (averaged over processes); `flowrl/...` keys keep their
    prefix, the others go under `loss/`, the per-token means under HEADLINE's names."""
    keys = sorted(metrics)
    values = torch.tensor([metrics[k] for k in keys], device=device)
    values = accelerator.gather(values[None]).nanmean(dim=0).tolist()
    for k, v in zip(keys, values):
        sink[HEADLINE.get(k) or TRL_LOSS_NAMES.get(k) or (k if "/" in k else f"loss/{k}")].append(v)


class UpdateRows:
    """`completions/update_rows`: completion rows that reached the loss in this optimiser update,
    summed over processes and logged once per update — dropped rows would show here."""

    def __init__(self):
        self.rows = 0

    def add(self, accelerator, sink: dict, rows: int, last_micro_batch: bool) -> None:
        self.rows += rows
        if last_micro_batch:
            total = accelerator.gather(torch.tensor([float(self.rows)], device=accelerator.device))
            sink[UPDATE_ROWS].append(total.sum().item())
            self.rows = 0
