"""Lazy likelihood displacement (spec §6): one optimizer step per algorithm, on a copy of the model.

From the same batch of scored groups and the same learning rate, each algorithm of the core
registry produces its token advantages (`resrl.core.compute_token_advantages`, the trainer's own
entry point), one step minimises the core's policy loss (`resrl.core.loss.policy_loss`, on-policy:
ratio 1) on a deep copy of the model, and the change of every positive response's log-likelihood

    Δ = log π_new(y+ | c) − log π_old(y+ | c)

is measured. The model passed in is never modified. The batch is processed one group at a time
(micro-batches) with each micro-batch's loss weighted by its share of the batch's sequences
(sequence-mean aggregations) or tokens (token-mean), so the step equals the full-batch step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from resrl.core import AdvantageInputs, AlgorithmConfig, LossConfig, ResRLConfig, compute_token_advantages, get_algorithm
from resrl.core.loss import policy_loss
from resrl.diagnose.model_pass import SampledGroup, sequence_logprobs


@dataclass
class LLDBatch:
    """Scored groups for the step: groups[i] with rewards[i] (G_i,) and penultimate states
    hidden[i] (G_i, C_i, d), aligned as ResRL's config asks (only ResRL reads them)."""

    groups: list[SampledGroup]
    rewards: list[Tensor]
    hidden: list[Tensor]
    heads: list | None = None   # HeadSketch per group (NTHR, ResRL weighting="interference"), or None


def micro_batch_weight(mask: Tensor, total_sequences: int, total_tokens: int, agg: str) -> float:
    """Share of one micro-batch in the full batch's loss, for the core's aggregation modes:
    token-mean averages over all tokens (weight = tokens here / all tokens), the sequence-mean
    modes over sequences with a token (weight = sequences here / all sequences). mask (b, T)."""
    if agg == "token-mean":
        return float(mask.sum()) / max(total_tokens, 1)
    return float((mask.sum(dim=1) > 0).sum()) / max(total_sequences, 1)


def batch_token_advantages(batch: LLDBatch, algorithm: str, resrl_config: ResRLConfig,
                           algorithm_config: AlgorithmConfig | None = None) -> list[Tensor]:
    """Each group's (G_i, C_i) token advantages from ONE call of the core over the whole batch
    (groups padded to the longest completion), as the trainer computes them."""
    C = max(g.completion_length for g in batch.groups)
    masks, hiddens, rewards, gidx = [], [], [], []
    for i, (g, r, h) in enumerate(zip(batch.groups, batch.rewards, batch.hidden)):
        pad = C - g.completion_length
        masks.append(torch.nn.functional.pad(g.completion_mask.bool(), (0, pad)))
        hiddens.append(torch.nn.functional.pad(h.float(), (0, 0, 0, pad)))
        rewards.append(r.float())
        gidx.append(torch.full((len(r),), i, dtype=torch.long))
    hidden = torch.cat(hiddens)
    truncated = torch.cat([g.truncated for g in batch.groups])
    head = None
    if batch.heads:
        from resrl.core.interference import cat_sketches

        head = cat_sketches(batch.heads, C)          # groups padded to the longest completion
        head.states, head.topk_probs, head.target_prob = head.states.float(), head.topk_probs.float(), head.target_prob.float()
    inputs = AdvantageInputs(torch.cat(rewards), torch.cat(gidx), torch.cat(masks), hidden, truncated, head)
    cfg = algorithm_config if algorithm_config is not None else AlgorithmConfig(name=algorithm, resrl=resrl_config)
    token_adv, _ = compute_token_advantages(inputs, cfg)
    out, row = [], 0
    for g in batch.groups:
        n = g.input_ids.shape[0]
        out.append(token_adv[row:row + n, :g.completion_length])
        row += n
    return out


def lld_step(model, batch: LLDBatch, algorithm: str, lr: float, optimizer: str = "sgd",
             resrl_config: ResRLConfig | None = None, max_response_length: int | None = None,
             logprobs_before: Sequence[Tensor] | None = None) -> dict[str, float]:
    """One optimizer step of `algorithm` on a deep copy of `model`; Δ of the positives' (and the
    negatives') sequence log-likelihoods. Returns {"mean_delta", "frac_positive_decreased",
    "median_delta", "mean_delta_negative", "grad_norm", "num_positive"}. `model` is left as it was."""
    spec = get_algorithm(algorithm)
    cfg = resrl_config or ResRLConfig()
    loss_cfg = LossConfig(**{**spec.loss_defaults, "max_response_length": max_response_length})
    token_adv = batch_token_advantages(batch, algorithm, cfg)
    if logprobs_before is None:
        with torch.no_grad():
            logprobs_before = [sequence_logprobs(model, g) for g in batch.groups]

    work = copy.deepcopy(model)
    work.eval()  # no dropout: Δ reflects the weight change alone (gradients flow in eval mode)
    params = [p for p in work.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr) if optimizer == "sgd" else torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    opt.zero_grad(set_to_none=True)
    total_seq = sum(int((g.completion_mask.sum(dim=1) > 0).sum()) for g in batch.groups)
    total_tok = sum(int(g.completion_mask.sum()) for g in batch.groups)
    for g, adv in zip(batch.groups, token_adv):
        logp = sequence_logprobs(work, g)
        loss, _ = policy_loss(logp, logp.detach(), adv, g.completion_mask, loss_cfg)
        (loss * micro_batch_weight(g.completion_mask, total_seq, total_tok, loss_cfg.agg)).backward()
    grad_norm = float(torch.linalg.vector_norm(torch.stack(
        [p.grad.detach().norm() for p in params if p.grad is not None])))
    opt.step()

    deltas_pos, deltas_neg = [], []
    with torch.no_grad():
        for g, r, before in zip(batch.groups, batch.rewards, logprobs_before):
            after = sequence_logprobs(work, g)
            m = g.completion_mask.double()
            delta = ((after.double() - before.double()) * m).sum(dim=1)       # (G,) sequence Δ
            adv = r.double() - r.double().mean()
            deltas_pos.append(delta[adv > 0])
            deltas_neg.append(delta[adv <= 0])
    del work, opt
    pos, neg = torch.cat(deltas_pos), torch.cat(deltas_neg)
    nan = float("nan")
    return {
        "mean_delta": float(pos.mean()) if pos.numel() else nan,
        "median_delta": float(pos.median()) if pos.numel() else nan,
        "frac_positive_decreased": float((pos < 0).double().mean()) if pos.numel() else nan,
        "mean_delta_negative": float(neg.mean()) if neg.numel() else nan,
        "grad_norm": grad_norm,
        "num_positive": int(pos.numel()),
    }


__all__ = ["LLDBatch", "micro_batch_weight", "batch_token_advantages", "lld_step"]
