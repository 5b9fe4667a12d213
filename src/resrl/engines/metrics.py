"""Metrics of the TRL engine: values averaged over processes (one collective per call) and
appended to a metrics sink — TRL's per-mode metric lists (`trl_compat.metrics(trainer, mode)`),
which TRL averages and logs at each logging step.

Names: the core's statistics as `resrl/<name>` (or their own `prefix/name`), the loss's as
`loss/<name>` with two headline curves `entropy` and `kl`, the round's `reward_mean`, `accuracy`,
`response_length`, and `train/completions` once per optimiser update.
"""

from __future__ import annotations

import math

import torch

# per-token means logged under headline names, whatever the loss aggregation
HEADLINE = {"entropy_token_mean": "entropy", "kl_token_mean": "kl"}


def log_stats(accelerator, sink: dict, stats: dict) -> None:
    """The core's advantage statistics (one dict per round or micro-batch), NaN-averaged over
    processes; a value that is NaN everywhere (e.g. no group had a positive) is not logged."""
    if not stats:
        return
    keys = sorted(stats)
    values = torch.tensor([float(stats[k]) for k in keys], device=accelerator.device)
    values = accelerator.gather(values[None]).nanmean(dim=0).tolist()
    for k, v in zip(keys, values):
        if math.isfinite(v):  # e.g. no group of the round had a positive: no ω statistics to log
            sink[k if "/" in k else f"resrl/{k}"].append(v)


def log_round(accelerator, sink: dict, rewards: torch.Tensor, completion_mask: torch.Tensor,
              correct_threshold: float) -> None:
    """reward_mean, accuracy (reward > correct_threshold) and response_length of a generation round."""
    rewards = accelerator.gather(rewards)
    lengths = accelerator.gather(completion_mask.sum(1).float())
    sink["reward_mean"].append(rewards.mean().item())
    sink["accuracy"].append((rewards > correct_threshold).float().mean().item())
    sink["response_length"].append(lengths.mean().item())


def log_loss(accelerator, sink: dict, metrics: dict, device) -> None:
    """One collective for all loss metrics (averaged over processes); `flowrl/...` keys keep their
    prefix, the others go under `loss/`, the per-token means under HEADLINE's names."""
    keys = sorted(metrics)
    values = torch.tensor([metrics[k] for k in keys], device=device)
    values = accelerator.gather(values[None]).nanmean(dim=0).tolist()
    for k, v in zip(keys, values):
        sink[HEADLINE.get(k, k if "/" in k else f"loss/{k}")].append(v)


class UpdateRows:
    """`train/completions`: completion rows that reached the loss in this optimiser update,
    summed over processes and logged once per update — dropped rows would show here."""

    def __init__(self):
        self.rows = 0

    def add(self, accelerator, sink: dict, rows: int, last_micro_batch: bool) -> None:
        self.rows += rows
        if last_micro_batch:
            total = accelerator.gather(torch.tensor([float(self.rows)], device=accelerator.device))
            sink["train/completions"].append(total.sum().item())
            self.rows = 0
