"""Measurements on one scored group: interference, ResRL's residuals and weights, Theorem 1, Lemma 1.

Everything ResRL-specific comes from `resrl.core` (the residual R, μ+, V_k and ω are exactly what
the trainer's weights use); this module only adds the theory's other side (head gradients) and
compares. All comparisons in float64.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from resrl.core import (NTHRConfig, ResRLConfig, interference_scores, interference_token_advantages,
                        nthr_token_advantages, resrl_residual_details, resrl_token_advantages, sketch_from_logits)
from resrl.core.advantages import grpo_advantages
from resrl.core.resrl_config import HIDDEN_ALIGNMENTS
from resrl.diagnose import theory
from resrl.diagnose.model_pass import GroupForward, SampledGroup
from resrl.engines.hidden import align_response_hidden

TOKEN_CLASSES = ("shared prefix", "first wrong token", "after it")


@dataclass
class AlignmentMeasurement:
    """ResRL's view of a group's negative tokens for one `hidden_alignment`. All (N,) float64."""

    residual: Tensor            # R = e(x_n), from resrl.core
    omega: Tensor               # ω, from resrl.core
    alignment: Tensor           # mean_p cos²(x_n, x_p) in ResRL's space
    theorem1_pairs: int
    theorem1_violations: int
    residual_max_abs_error: float  # max |R − ‖(I − P)x‖²/d| over the group's valid tokens (theory.residual_abs_errors)
    tightness_sample: Tensor    # bound / |⟨x_n, x_p⟩| on a sample of pairs with a non-negligible product
    effective_rank: int
    num_pos_tokens: int


@dataclass
class GroupMeasurement:
    """One group with a positive and a negative response (inactive groups are not measured)."""

    group_id: int
    interference: Tensor        # (N,) Σ_p ⟨g_n, g_p⟩ over the group's positive tokens (head space)
    head_repr_term: Tensor      # (N,) Σ_p ⟨x̂_n, x̂_p⟩ (head space, the representation factor alone)
    token_class: Tensor         # (N,) int64 index into TOKEN_CLASSES, −1 when unknown
    head_logits_rel_error: float
    by_alignment: dict[str, AlignmentMeasurement] = field(default_factory=dict)
    # ResRL weighting="interference" and NTHR, from the top-K sketch of the model's own softmax
    interference_estimate: Tensor | None = None   # (N,) Î(n) (resrl.core.interference)
    omega_interference: Tensor | None = None      # (N,) ω of weighting="interference"
    nthr_selected: Tensor | None = None           # (N,) bool, NTHR lowers the token's penalty


def group_tokens(group: SampledGroup, rewards: Tensor):
    """Advantages (G,) and the (row, position) of the group's negative and positive valid tokens."""
    adv = grpo_advantages(rewards.double(), torch.zeros(len(rewards), dtype=torch.long))
    mask = group.completion_mask.bool()
    neg = mask & (adv <= 0)[:, None]
    pos = mask & (adv > 0)[:, None]
    return adv, neg.nonzero(as_tuple=True), pos.nonzero(as_tuple=True)


def measure_group(group_id: int, group: SampledGroup, fw: GroupForward, rewards: Tensor, weight: Tensor,
                  bias: Tensor | None, config: ResRLConfig, token_class: Tensor | None = None,
                  alignments=("predicting", "token"), tightness_samples: int = 2000,
                  pair_block: int = 512, nthr_config: NTHRConfig | None = None) -> GroupMeasurement | None:
    """All measurements of one group, or None when it has no positive or no negative response.

    rewards (G,); weight (V, d_head), bias (V,) | None of the output head; token_class (G, C) int64
    (−1 where unknown) or None."""
    adv, (nb, nt), (pb, pt) = group_tokens(group, rewards)
    if nb.numel() == 0 or pb.numel() == 0:
        return None
    targets = group.completion_ids
    W = weight.detach().double()
    b = bias.detach().double() if bias is not None else None

    # ---- head space: δ and x̂ at the predicting position of every token (Lemma 1's objects)
    xh_neg, xh_pos = fw.head_input[nb, nt].double(), fw.head_input[pb, pt].double()
    d_neg = theory.logit_gradients(xh_neg, W, b, targets[nb, nt])
    d_pos = theory.logit_gradients(xh_pos, W, b, targets[pb, pt])
    inter, repr_term = theory.interference(d_neg, xh_neg, d_pos, xh_pos)
    # the head is z = W x̂ + b on the captured x̂ (float32, the model's own precision)
    z_model = torch.cat([fw.logits[nb, nt], fw.logits[pb, pt]]).double()
    z_ours = torch.cat([xh_neg, xh_pos]) @ W.T + (b if b is not None else 0.0)
    head_err = float((z_model - z_ours).abs().max() / z_ours.abs().max().clamp(min=1e-30))
    del d_neg, d_pos

    C = group.completion_length
    cls = token_class[nb, nt] if token_class is not None else torch.full_like(nb, -1)
    out = GroupMeasurement(group_id, inter, repr_term, cls, head_err)
    gidx = torch.zeros(len(rewards), dtype=torch.long)
    # the trainer's estimate of the same I: head input at the predicting position + top-K softmax
    sketch = sketch_from_logits(fw.head_input[:, :-1].double(), fw.logits.double(), targets,
                                config.interference_topk)
    est, _ = interference_scores(sketch, group.completion_mask, adv > 0, gidx)
    out.interference_estimate = est[nb, nt]
    w_adv, _ = interference_token_advantages(sketch, group.completion_mask, adv, gidx,
                                             dataclasses.replace(config, weighting="interference"))
    a_neg = adv[nb]
    out.omega_interference = torch.where(a_neg < 0, w_adv[nb, nt].double() / a_neg.clamp(max=-1e-300),
                                         torch.full_like(a_neg, float("nan")))
    nthr_adv, _ = nthr_token_advantages(sketch, group.completion_mask, adv, gidx, nthr_config or NTHRConfig())
    out.nthr_selected = (nthr_adv[nb, nt].double() - a_neg).abs() > 1e-9 * a_neg.abs().clamp(min=1e-30)
    gidx = torch.zeros(len(rewards), dtype=torch.long)
    for alignment in alignments:
        cfg = dataclasses.replace(config, hidden_alignment=alignment)
        h = align_response_hidden(fw.penultimate, C, alignment).double()          # (G, C, d)
        details = resrl_residual_details(h, group.completion_mask, adv, gidx, cfg)
        token_adv, _ = resrl_token_advantages(h, group.completion_mask, adv, gidx, cfg)
        k = int(details.effective_rank[0])
        basis = details.basis[0][:, :k]
        mu = details.mean[0]
        x = torch.nn.functional.layer_norm(h, h.shape[-1:], eps=cfg.ln_eps) - mu     # ResRL's x (G, C, d)
        x_neg, x_pos = x[nb, nt], x[pb, pt]
        r_neg, r_pos = details.residual[nb, nt], details.residual[pb, pt]
        resid_err = float(torch.cat([theory.residual_abs_errors(x_neg, basis, r_neg),
                                     theory.residual_abs_errors(x_pos, basis, r_pos)]).max())
        # every (negative, positive) pair, in blocks of negatives: O(block · P) memory
        pairs = violations = 0
        ratio_parts = []
        norm_pos = torch.linalg.vector_norm(x_pos, dim=1)
        for s in range(0, x_neg.shape[0], pair_block):
            xn = x_neg[s:s + pair_block]
            bound, actual = theory.theorem1_bound(xn, x_pos, basis)
            summary = theory.theorem1_summary(bound, actual, xn, x_pos)
            pairs, violations = pairs + summary["pairs"], violations + summary["violations"]
            sig = actual > 1e-6 * torch.linalg.vector_norm(xn, dim=1)[:, None] * norm_pos[None, :]
            ratio_parts.append(bound[sig] / actual[sig])
        ratios = torch.cat(ratio_parts)
        if ratios.numel() > tightness_samples:  # deterministic thinning
            ratios = ratios[torch.linspace(0, ratios.numel() - 1, tightness_samples).long()]
        # Ã = ω·Â on negatives; ω is undefined where Â = 0 (a reward equal to the group mean)
        a_neg = adv[nb]
        omega = torch.where(a_neg < 0, token_adv[nb, nt].double() / a_neg.clamp(max=-1e-300),
                            torch.full_like(a_neg, float("nan")))
        out.by_alignment[alignment] = AlignmentMeasurement(
            residual=r_neg, omega=omega, alignment=theory.representation_alignment(x_neg, x_pos),
            theorem1_pairs=pairs, theorem1_violations=violations, residual_max_abs_error=resid_err,
            tightness_sample=ratios, effective_rank=k, num_pos_tokens=int(pb.numel()))
    return out


def lemma1_check(group: SampledGroup, fw: GroupForward, rewards: Tensor, weight: Tensor, bias: Tensor | None,
                 pairs: int = 1, offset: int = 0) -> list[dict[str, float]]:
    """Lemma 1 by autograd on `pairs` (negative, positive) token pairs of the group (the first
    tokens that differ in position, spread over the response): one `V × d_head` gradient pair in
    memory at a time; `offset` shifts which tokens are picked. Returns one dict of relative errors per pair (see `theory.lemma1_errors`)."""
    _, (nb, nt), (pb, pt) = group_tokens(group, rewards)
    if nb.numel() == 0 or pb.numel() == 0:
        return []
    targets = group.completion_ids
    W = weight.detach().double()
    b = bias.detach().double() if bias is not None else None
    out = []
    for j in range(offset, offset + pairs):
        i_n = (j * 7919) % nb.numel()  # spread over the tokens, deterministic
        i_p = (j * 104729) % pb.numel()
        xn, xp = fw.head_input[nb[i_n], nt[i_n]].double(), fw.head_input[pb[i_p], pt[i_p]].double()
        yn, yp = int(targets[nb[i_n], nt[i_n]]), int(targets[pb[i_p], pt[i_p]])
        gn = theory.head_gradient_autograd(xn, W, b, yn)
        gp = theory.head_gradient_autograd(xp, W, b, yp)
        dn = theory.logit_gradients(xn[None], W, b, torch.tensor([yn]))[0]
        dp = theory.logit_gradients(xp[None], W, b, torch.tensor([yp]))[0]
        out.append(theory.lemma1_errors(gn, gp, dn, xn, dp, xp))
        del gn, gp
    return out



# the two hidden-state alignments diagnose measures side by side (resrl.core.resrl_config)
ALIGNMENTS = HIDDEN_ALIGNMENTS


def pooled(measurements, alignment: str | None, name: str) -> np.ndarray:
    """Concatenate one per-token quantity over groups (head-space ones when alignment is None)."""
    if alignment is None:
        parts = [getattr(m, name) for m in measurements]
    else:
        parts = [getattr(m.by_alignment[alignment], name) for m in measurements]
    return np.concatenate([p.double().numpy() for p in parts]) if parts else np.zeros(0)

__all__ = ["ALIGNMENTS", "pooled", "TOKEN_CLASSES", "AlignmentMeasurement", "GroupMeasurement", "group_tokens", "measure_group",
           "lemma1_check"]
