"""Head-gradient interference of negative tokens with their group's positives (Lemma 1), from a
cheap sketch of each token's softmax, and the two methods that read it: ResRL's
`weighting="interference"` option and NTHR (Deng et al. 2025, arXiv 2505.18830).

Lemma 1 (spec §6). For the output head z = W x̂ and ℓ = −log softmax(z)[y], ∇_W ℓ = δ x̂ᵀ with
δ = p − e_y, so for a negative token n and a positive token p

    ⟨∇_W ℓ_n, ∇_W ℓ_p⟩ = ⟨δ_n, δ_p⟩ ⟨x̂_n, x̂_p⟩,
    ⟨δ_n, δ_p⟩ = ⟨p_n, p_p⟩ − p_n[y_p] − p_p[y_n] + [y_n = y_p]

and the signed interference of n with its group's positive tokens P is

    I(n) = Σ_{p ∈ P} ⟨δ_n, δ_p⟩ ⟨x̂_n, x̂_p⟩ = Σ_v δ_n[v] · (M[v] · x̂_n),   M = Σ_p δ_p x̂_pᵀ      (★)

(I > 0: pushing n down also pushes the positives down). (★) never forms a pair: M is the
positives' summed head gradient, kept only on the vocabulary rows the group's sparse δ touch.

The sketch (`HeadSketch`): each token keeps its K largest probabilities (ids + values) and the
exact probability of its own token. δ̂ = (top-K part of p) + p[y]·e_y (if y is outside the top K)
− e_y, i.e. δ with the tail r (the probabilities outside the top K, other than y) set to 0. With
t = Σ r the tail mass (≤ 1 − Σ top-K), since |δ̂| ≤ 1 entrywise and r ≥ 0:

    |⟨δ_n, δ_p⟩ − ⟨δ̂_n, δ̂_p⟩| ≤ t_n + t_p + t_n t_p
    |I(n) − Î(n)| ≤ Σ_p (t_n + t_p + t_n t_p) |⟨x̂_n, x̂_p⟩|                                   (bound)

K = V is exact. Cost: K + 2 rows of d per token, scattered once for positives and gathered once
for negatives — O((K + 2)(N+ + N−) d) — plus, in the engines, one product of the response
tokens' head input with W to get the top-K (the head's own cost over those tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .linalg import pad_by_group, quantiles_per_row


@dataclass
class HeadSketch:
    """What the interference needs of each response token t, all at the state that predicts it.

    states      (B, T, d_head) the output head's input x̂ (the final norm's output at position t−1)
    topk_ids    (B, T, K) int64, the K most probable vocabulary ids of p_t
    topk_probs  (B, T, K) float, their probabilities
    target_prob (B, T) float, p_t[y_t] (exact: the sampled token's own probability)
    targets     (B, T) int64, y_t

    Optional, for the exact probabilities on any vocabulary ids (NTHR's V*ₓ, `probs_at`):
    weight      (V, d_head) the head's weight W (a reference, not a copy), with
    bias        (V,) | None and temperature: logits = (x̂ Wᵀ + b) / temperature, and
    log_norm    (B, T) float, log Σ_v exp(logits_v) of every token (`head_sketch` fills these);
    logits      (B, T, V) the tempered logits themselves (`sketch_from_logits` keeps a reference).
    """

    states: Tensor
    topk_ids: Tensor
    topk_probs: Tensor
    target_prob: Tensor
    targets: Tensor
    weight: Tensor | None = None
    bias: Tensor | None = None
    temperature: float = 1.0
    log_norm: Tensor | None = None
    logits: Tensor | None = None

    def rows(self, index: Tensor) -> "HeadSketch":
        return HeadSketch(self.states[index], self.topk_ids[index], self.topk_probs[index],
                          self.target_prob[index], self.targets[index], self.weight, self.bias, self.temperature,
                          None if self.log_norm is None else self.log_norm[index],
                          None if self.logits is None else self.logits[index])

    @property
    def exact_probs_available(self) -> bool:
        """Can `probs_at` compute exact probabilities (head weight + log-normaliser, or the logits)?"""
        return self.logits is not None or (self.weight is not None and self.log_norm is not None)

    def probs_at(self, b: Tensor, t: Tensor, ids: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """Exact softmax probabilities of the tokens (b, t) (N,) at the vocabulary ids (m,), as
        (N, m) in `dtype`: from the logits when kept, else exp((x̂ W[ids]ᵀ + b[ids]) / temperature −
        log_norm), the head's own product (in W's dtype, as `head_sketch`) on the m rows only."""
        if self.logits is not None:
            logp = torch.log_softmax(self.logits[b, t].to(torch.promote_types(self.logits.dtype, dtype)), dim=-1)
            return logp[:, ids].exp().to(dtype)
        if self.weight is None or self.log_norm is None:
            raise ValueError("exact probabilities need the head weight and log-normaliser (head_sketch) or the "
                             "logits (sketch_from_logits) in the HeadSketch")
        W = self.weight[ids]
        z = self.states[b, t].to(W.dtype) @ W.T
        if self.bias is not None:
            z = z + self.bias[ids]
        z = (z / self.temperature).to(torch.promote_types(z.dtype, dtype))
        return (z - self.log_norm[b, t].to(z.dtype)[:, None]).exp().to(dtype)


def cat_sketches(sketches: list["HeadSketch"], width: int) -> "HeadSketch":
    """Row-wise concatenation of sketches (each (B_i, T_i, ...), T_i <= width), padded to `width`
    positions (padding: zeros, meaningless under a response mask). Head weight, bias and
    temperature are taken from the first sketch; logits / log_norm only when every sketch has them."""
    def pad(x: Tensor | None) -> Tensor | None:
        if x is None:
            return None
        extra = width - x.shape[1]
        return torch.nn.functional.pad(x, (0, 0) * (x.dim() - 2) + (0, extra)) if extra > 0 else x

    def cat(name: str) -> Tensor | None:
        parts = [getattr(s, name) for s in sketches]
        return None if any(p is None for p in parts) else torch.cat([pad(p) for p in parts])

    first = sketches[0]
    return HeadSketch(cat("states"), cat("topk_ids"), cat("topk_probs"), cat("target_prob"), cat("targets"),
                      first.weight, first.bias, first.temperature, cat("log_norm"), cat("logits"))


def sketch_from_logits(states: Tensor, logits: Tensor, targets: Tensor, k: int) -> HeadSketch:
    """states (B, T, d), logits (B, T, V) at the predicting positions, targets (B, T) -> HeadSketch
    with the top-min(k, V) probabilities of softmax(logits) (float32 at least); the sketch keeps a
    reference to `logits` for exact probabilities on any ids (`HeadSketch.probs_at`)."""
    logp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    k = min(int(k), logp.shape[-1])
    top_logp, top_ids = logp.topk(k, dim=-1)
    target = logp.gather(-1, targets[..., None].long())[..., 0]
    return HeadSketch(states, top_ids, top_logp.exp(), target.exp(), targets.long(), logits=logits)


@torch.no_grad()
def head_sketch(states: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, k: int,
                temperature: float = 1.0, chunk_tokens: int = 1024) -> HeadSketch:
    """HeadSketch from the head input: logits = (x̂ Wᵀ + b) / temperature, computed `chunk_tokens`
    rows at a time so that only a (chunk, V) block of logits ever exists. The sketch keeps the
    head (weight, bias, temperature, a reference) and every token's log-normaliser, so that
    `HeadSketch.probs_at` gives exact probabilities on any ids (NTHR's V*ₓ vocabulary).
    states (B, T, d), weight (V, d), bias (V,) | None, targets (B, T) int64."""
    B, T, d = states.shape
    flat, tgt = states.reshape(B * T, d), targets.reshape(B * T)
    ids, probs, target, norm = [], [], [], []
    for s in range(0, B * T, chunk_tokens):
        x = flat[s:s + chunk_tokens].to(weight.dtype)
        z = x @ weight.T
        if bias is not None:
            z = z + bias
        z = z / temperature
        part = sketch_from_logits(x[None], z[None], tgt[None, s:s + chunk_tokens], k)
        ids.append(part.topk_ids[0])
        probs.append(part.topk_probs[0].float())
        target.append(part.target_prob[0].float())
        norm.append(torch.logsumexp(z.to(torch.promote_types(z.dtype, torch.float32)), dim=-1))
    K = min(int(k), weight.shape[0])
    head = dict(weight=weight, bias=bias, temperature=float(temperature))
    if not ids:
        return HeadSketch(states, torch.zeros(B, T, K, dtype=torch.long, device=states.device),
                          torch.zeros(B, T, K, device=states.device), torch.zeros(B, T, device=states.device),
                          targets.long(), log_norm=torch.zeros(B, T, device=states.device), **head)
    return HeadSketch(states, torch.cat(ids).view(B, T, K), torch.cat(probs).view(B, T, K),
                      torch.cat(target).view(B, T), targets.long(), log_norm=torch.cat(norm).view(B, T), **head)


def _sparse_delta(sk: HeadSketch, b: Tensor, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """δ̂ of the tokens (b, t) as K + 2 (id, value) entries each, and their tail mass.
    Returns ids (N, K+2) int64, values (N, K+2), tail (N,)."""
    ids, probs = sk.topk_ids[b, t], sk.topk_probs[b, t].double()
    y, py = sk.targets[b, t], sk.target_prob[b, t].double()
    y_in_top = (ids == y[:, None]).any(dim=1)
    own = torch.where(y_in_top, torch.zeros_like(py), py)            # p[y] when the top K misses it
    ent_ids = torch.cat([ids, y[:, None], y[:, None]], dim=1)
    ent_val = torch.cat([probs, own[:, None], -torch.ones_like(py)[:, None]], dim=1)
    tail = (1.0 - probs.sum(dim=1) - own).clamp(min=0.0)
    return ent_ids, ent_val, tail


def interference_scores(sketch: HeadSketch, response_mask: Tensor, is_pos: Tensor, group_index: Tensor,
                        query: Tensor | None = None, budget_mb: int = 256) -> tuple[Tensor, Tensor]:
    """Î(n) of (★) for every valid token of `query` (default: the negatives, ~is_pos rows) against
    the valid tokens of its group's positive rows.

    sketch: HeadSketch (B, T, ...); response_mask (B, T); is_pos (B,) bool; group_index (B,) any ids;
    query (B,) bool rows to score. Computed in the states' dtype (float32 at least), groups in
    chunks whose M stays under `budget_mb` MiB. Returns (scores (B, T) float64, NaN where not scored
    or the group has no positive token; tail (B, T) float64 tail mass t of every token, for the
    error bound)."""
    B, T, d = sketch.states.shape
    device = sketch.states.device
    dtype = torch.promote_types(sketch.states.dtype, torch.float32)
    mask = response_mask.bool()
    query = ~is_pos if query is None else query.bool()
    _, gid = torch.unique(group_index, return_inverse=True)
    scores = torch.full((B, T), float("nan"), dtype=torch.float64, device=device)
    tails = torch.zeros(B, T, dtype=torch.float64, device=device)
    pb, pt = (mask & is_pos[:, None]).nonzero(as_tuple=True)
    qb, qt = (mask & query[:, None]).nonzero(as_tuple=True)
    if pb.numel() == 0 or qb.numel() == 0:
        return scores, tails
    V = int(torch.cat([sketch.topk_ids[mask].flatten(), sketch.targets[mask]]).max()) + 1
    p_ids, p_val, p_tail = _sparse_delta(sketch, pb, pt)
    q_ids, q_val, q_tail = _sparse_delta(sketch, qb, qt)
    tails[pb, pt], tails[qb, qt] = p_tail, q_tail
    G = int(gid.max()) + 1
    p_order, q_order = torch.argsort(gid[pb], stable=True), torch.argsort(gid[qb], stable=True)
    p_count = torch.bincount(gid[pb], minlength=G)
    q_count = torch.bincount(gid[qb], minlength=G)
    p_start = (torch.cumsum(p_count, 0) - p_count).tolist()
    q_start = (torch.cumsum(q_count, 0) - q_count).tolist()
    p_count_h, q_count_h = p_count.tolist(), q_count.tolist()
    row_bytes = p_ids.shape[1] * d * torch.finfo(dtype).bits // 8          # M rows one positive token can add
    budget = budget_mb << 20
    g0 = 0
    while g0 < G:                                                        # chunks of consecutive groups
        g1, used = g0 + 1, p_count_h[g0] * row_bytes
        while g1 < G and used + p_count_h[g1] * row_bytes <= budget:
            used += p_count_h[g1] * row_bytes
            g1 += 1
        ps = p_order[p_start[g0]:p_start[g1 - 1] + p_count_h[g1 - 1]]
        qs = q_order[q_start[g0]:q_start[g1 - 1] + q_count_h[g1 - 1]]
        g0 = g1
        if ps.numel() == 0 or qs.numel() == 0:
            continue
        # rows of M: (group, vocabulary id) pairs touched by the chunk's positives' δ̂
        p_keys = gid[pb[ps]][:, None] * V + p_ids[ps]                     # (P, K+2)
        keys, slot = torch.unique(p_keys, return_inverse=True)
        xp = sketch.states[pb[ps], pt[ps]].to(dtype)                       # (P, d)
        pv = p_val[ps].to(dtype)
        M = torch.zeros(keys.numel(), d, dtype=dtype, device=device)
        for j in range(p_keys.shape[1]):                                  # K + 2 scatters of (P, d)
            M.index_add_(0, slot[:, j], pv[:, j, None] * xp)
        xq = sketch.states[qb[qs], qt[qs]].to(dtype)
        q_keys = gid[qb[qs]][:, None] * V + q_ids[qs]
        qv = q_val[qs].to(dtype)
        out = torch.zeros(qs.numel(), dtype=dtype, device=device)
        for j in range(q_keys.shape[1]):                                  # K + 2 gathers of (N, d)
            key = q_keys[:, j].contiguous()
            pos = torch.searchsorted(keys, key).clamp(max=keys.numel() - 1)
            hit = keys[pos] == key
            out += torch.where(hit, qv[:, j] * (M[pos] * xq).sum(dim=1), torch.zeros_like(out))
        has_pos = p_count[gid[qb[qs]]] > 0
        scores[qb[qs], qt[qs]] = torch.where(has_pos, out.double(), torch.full_like(out, float("nan"), dtype=torch.float64))
    return scores, tails


def interference_error_bound(sketch: HeadSketch, tails: Tensor, neg: tuple[Tensor, Tensor],
                             pos: tuple[Tensor, Tensor]) -> Tensor:
    """(bound) of the module docstring for the negatives `neg` = (b, t) against the positives
    `pos` = (b, t) of ONE group: Σ_p (t_n + t_p + t_n t_p) |⟨x̂_n, x̂_p⟩|. Returns (N,) float64."""
    xn, xp = sketch.states[neg].double(), sketch.states[pos].double()
    tn, tp = tails[neg][:, None], tails[pos][None, :]
    return ((tn + tp + tn * tp) * (xn @ xp.T).abs()).sum(dim=1)


def group_quantile_gate(score: Tensor, tok_group: Tensor, num_groups: int, q_low: float, q_high: float,
                        eps: float, tol: float) -> tuple[Tensor, Tensor]:
    """The paper's quantile rule (spec §2 step 7) on a per-token score s (higher = safer to push down):
    z = clamp((s − Q(D, α)) / (Q(D, β) − Q(D, α) + ε), 0, 1) over the multiset D of the scores of
    the token's group. score (N,) float, tok_group (N,) dense group ids. Returns z (N,) and the
    per-group no-contrast flag (G,) (spread ≤ tol · mean |s|)."""
    order = torch.argsort(tok_group, stable=True)
    g_sorted = tok_group[order]
    counts = torch.bincount(tok_group, minlength=num_groups)
    width = int(counts.max()) if counts.numel() else 1
    index = pad_by_group(g_sorted, num_groups, width)                   # (G, W) into order
    vals = torch.where(index >= 0, score[order][index.clamp(min=0)], torch.full(index.shape, float("inf"),
                                                                             dtype=score.dtype, device=score.device))
    lo, hi = quantiles_per_row(vals, counts.clamp(min=1), (q_low, q_high))
    spread = hi - lo
    mean_abs = torch.zeros(num_groups, dtype=score.dtype, device=score.device).index_add_(
        0, tok_group, score.abs()) / counts.clamp(min=1)
    no_contrast = spread <= tol * mean_abs
    z = ((score - lo[tok_group]) / (spread[tok_group] + eps)).clamp(0.0, 1.0)
    return z, no_contrast


__all__ = ["HeadSketch", "cat_sketches", "sketch_from_logits", "head_sketch", "interference_scores", "interference_error_bound",
           "group_quantile_gate"]
