"""Two token weightings of negative responses built on the head-gradient interference Î(n) of
`resrl.core.interference` (Lemma 1): ResRL's `weighting="interference"` option and NTHR.

ResRL, weighting = "interference" (this project's variant of spec §2). Per group with a
positive and a negative response, in place of the residual R of step 6:

    s(n) = −Î(n)                                        (high s = pushing n down is safe)
    z    = clamp((s − Q(D, α)) / (Q(D, β) − Q(D, α) + ε), 0, 1)      D: the group's negative tokens
    ω    = ξ + (1 − ξ) z,   ω = 1 where Î(n) ≤ 0        (a push-down that raises the positives is
                                                          never damped)
    no contrast (Q(D, β) − Q(D, α) ≤ tol · mean |s|): ω = ξ on tokens with Î > 0 (1 elsewhere)
    Ã    = λ_pos Â on positives, ω Â on negatives, 0 on padding (step 8; truncation guard as ResRL)

NTHR (Deng, Ren, Li, Sutherland, Li, Thrampoulidis 2025, "On the Effect of Negative Gradient in
Group Relative Deep Reinforcement Optimization", arXiv 2505.18830, NeurIPS 2025: §5.1-5.2 with
Algorithm 1, §7.3, §7.4, Tables 4-5, §7.9). Per group with a correct (P) and an incorrect response:

    α(u, v)  = ⟨e_{y_u} − π_u, e_{y_v} − π_v⟩               (token-level prediction-error similarity)
    s⁻_{j,k′} = Σ_{i ∈ P} Σ_k α((i,k), (j,k′)) ⟨h_{i,k}, h_{j,k′}⟩          (Eq. 7: NTHR of a wrong token)
    s̄⁺_{i′}  = mean_{k″ of response i′} Σ_{i ∈ P, i ≠ i′} Σ_k α((i,k), (i′,k″)) ⟨h_{i,k}, h_{i′,k″}⟩
               (Eq. 8: the average influence of correct response i′'s tokens on the OTHER correct ones)
    τ        = β · min_{i′ ∈ P} s̄⁺_{i′}                     (§5.2; β the threshold factor, default 1)
    Ã        = η · Â on the wrong tokens with s⁻ > τ, Â elsewhere (correct responses keep Â)
    η        = 2 |0.5 − p|, p = |P| / G the group's success rate (§7.3, Table 5; ablations p, 1 − p;
               §5.3 uses η = 0)

h is the output head's input (the final norm's output, the unconstrained-features object of §4.1),
π the (tempered) softmax of the policy that sampled; α runs over V*ₓ, the token ids generated in the
question's responses (§7.4), computed exactly from the head (`vocabulary="exact"`), or over each
token's top-K softmax ids plus its own id (`vocabulary="topk"`, the cheaper sketch of
`resrl.core.interference`). A group with one correct response has no other correct response:
s̄⁺ = 0, so τ = 0. β = −inf selects every wrong token (the paper's β = −∞ ablation, Table 4).
The paper's Eq. 7-8 were read as prose (the copy available rendered the formulas as images); another
reading — τ = β · the mean of s⁺ over the group's positive tokens and a fixed
penalty scale — stays available as `threshold_rule="pooled-mean"`, `eta="constant"` (not the
paper's); `anchor_self=True` counts response i′'s influence on itself in s̄⁺ too (another reading of
Eq. 8, kept for comparison). Groups without a correct or an incorrect response are plain GRPO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from .interference import HeadSketch, group_quantile_gate, interference_scores
from .resrl_config import ResRLConfig


NTHR_ETA_RULES = ("paper", "p", "1-p", "constant")
NTHR_THRESHOLD_RULES = ("min-response", "pooled-mean")
NTHR_VOCABULARIES = ("exact", "topk")


@dataclass
class NTHRConfig:
    """NTHR's settings, named as the paper (Deng et al. 2025, §5.2, Algorithm 1): β the threshold
    factor, η the penalty scale of the selected wrong tokens (module docstring)."""

    beta: float = 1.0  # β, threshold factor: τ = β · min over correct responses of s̄⁺ (paper §5.2: 1; §7.9: 0; -.inf selects every wrong token, Table 4)
    eta: str = "paper"  # η rule, the selected tokens' advantage is η·Â: paper (2·|0.5 − p|, p = the group's success rate, §7.3) | p | 1-p (Table 5 ablations) | constant (eta_constant)
    eta_constant: float = 0.0  # η when eta = constant (paper §5.3: 0, no penalty on selected tokens)
    threshold_rule: str = "min-response"  # min-response (paper §5.2: β · min_i′ s̄⁺_i′) | pooled-mean (another reading, not the paper's: β · mean of s⁺ over the group's correct tokens)
    anchor_self: bool = False  # s̄⁺_i′ also counts response i′'s influence on itself (the paper's prose says the OTHER correct responses; kept as an alternative reading of its Eq. 8)
    vocabulary: str = "exact"  # exact (α over V*ₓ, the token ids generated in the question's responses, exact probabilities from the head, paper §7.4) | topk (the top-K softmax sketch, faster)
    topk: int = 32  # K of the top-K softmax sketch (vocabulary = topk; the sketch is captured either way)
    chunk_tokens: int = 1024  # tokens per block of the exact V*ₓ computation (memory: chunk_tokens × |V*ₓ| probabilities)

    # keys of the pooled-mean NTHRConfig's earlier names, refused with what to write instead
    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "threshold": "NTHR's keys are named as the paper: beta is the threshold factor (τ = β · min "
                     "over correct responses of s̄⁺) and eta the penalty scale; the pooled-mean reading (τ = factor · "
                     "pooled mean of s⁺) is threshold_rule: pooled-mean with beta: <the old threshold>",
        "scale": "NTHR's keys are named as the paper: the selected tokens' scale is eta (the paper's "
                 "rule 2·|0.5 − p| by default); a fixed scale is eta: constant with eta_constant: <the old scale>",
    }

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        beta_ok = isinstance(self.beta, (int, float)) and not isinstance(self.beta, bool) and (
            math.isfinite(self.beta) or self.beta == -math.inf)
        for name, ok, allowed in (
                ("beta", beta_ok, "a finite float or -inf"),
                ("eta", self.eta in NTHR_ETA_RULES, f"one of {NTHR_ETA_RULES}"),
                ("eta_constant", _num(self.eta_constant) and 0.0 <= self.eta_constant <= 1.0, "a float in [0, 1]"),
                ("threshold_rule", self.threshold_rule in NTHR_THRESHOLD_RULES, f"one of {NTHR_THRESHOLD_RULES}"),
                ("anchor_self", isinstance(self.anchor_self, bool), "true or false"),
                ("vocabulary", self.vocabulary in NTHR_VOCABULARIES, f"one of {NTHR_VOCABULARIES}"),
                ("topk", _pos_int(self.topk), "an int >= 1"),
                ("chunk_tokens", _pos_int(self.chunk_tokens), "an int >= 1")):
            if not ok:
                raise ValueError(f"NTHRConfig.{name} = {getattr(self, name)!r} is invalid: allowed {allowed}")


def _pos_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(sketch: HeadSketch, response_mask: Tensor, advantages: Tensor, group_index: Tensor) -> Tensor:
    if not isinstance(sketch, HeadSketch):
        raise ValueError("the head sketch (AdvantageInputs.head) is needed: the engine must capture the output "
                         "head's input and the top-K probabilities of every response token")
    B, T = response_mask.shape
    if sketch.states.shape[:2] != (B, T) or sketch.topk_ids.shape[:2] != (B, T):
        raise ValueError(f"head sketch must cover (B, T) = {(B, T)}, got {tuple(sketch.states.shape[:2])}")
    if advantages.shape != (B,) or group_index.shape != (B,):
        raise ValueError("advantages and group_index must be (B,)")
    mask = response_mask.bool()
    if not bool(torch.isfinite(sketch.states[mask]).all()):
        raise ValueError("head sketch states contain NaN or inf at a valid response token")
    return mask


def interference_token_advantages(sketch: HeadSketch, response_mask: Tensor, advantages: Tensor, group_index: Tensor,
                                  config: ResRLConfig, truncated: Tensor | None = None) -> tuple[Tensor, dict]:
    """ResRL's token advantages with weighting="interference" (module docstring).

    sketch: HeadSketch (B, T, ...); response_mask (B, T); advantages (B,) Â; group_index (B,);
    truncated (B,) bool | None. Returns ((B, T) float32, stats)."""
    cfg = config
    mask = _check(sketch, response_mask, advantages, group_index)
    B, T = mask.shape
    adv = advantages.float()
    is_pos = adv > 0
    inter, _ = interference_scores(sketch, mask, is_pos, group_index)
    omega = torch.ones(B, T, dtype=torch.float64, device=mask.device)
    nb, nt = (mask & ~is_pos[:, None] & torch.isfinite(inter)).nonzero(as_tuple=True)
    stats = {"groups_reweighted": 0.0, "num_neg_tokens": float(nb.numel())}
    if nb.numel():
        _, gid = torch.unique(group_index, return_inverse=True)
        tok_group = gid[nb]
        _, tok_group = torch.unique(tok_group, return_inverse=True)       # dense over reweighted groups
        G = int(tok_group.max()) + 1
        I = inter[nb, nt]
        z, no_contrast = group_quantile_gate(-I, tok_group, G, cfg.quantile_low, cfg.quantile_high, cfg.eps,
                                             cfg.no_contrast_tol)
        w = cfg.min_weight + (1.0 - cfg.min_weight) * z
        w = torch.where(no_contrast[tok_group], torch.full_like(w, cfg.min_weight), w)
        w = torch.where(I <= 0, torch.ones_like(w), w)
        omega[nb, nt] = w
        stats.update(groups_reweighted=float(G), groups_no_contrast=float(no_contrast.sum()),
                     omega_mean=float(w.mean()), omega_min=float(w.min()),
                     frac_downweighted=float((w < 1).double().mean()),
                     frac_at_min_weight=float((w <= cfg.min_weight + 1e-6).double().mean()),
                     frac_positive_interference=float((I > 0).double().mean()))
    if cfg.truncation_guard and truncated is not None:
        from_end = mask.sum(dim=1, keepdim=True) - torch.cumsum(mask.long(), dim=1)   # 0 = last valid token
        guard = truncated.bool()[:, None] & ~is_pos[:, None] & mask & (from_end < cfg.truncation_tail)
        omega = torch.where(guard, torch.ones_like(omega), omega)
    seq = adv[:, None].expand(B, T)
    token_adv = torch.where(is_pos[:, None], cfg.pos_scale * seq, omega.float() * seq)
    return torch.where(mask, token_adv, torch.zeros_like(token_adv)), stats


def nthr_eta(p: Tensor, config: NTHRConfig) -> Tensor:
    """η of each group from its success rate p (G,) float64 (module docstring)."""
    if config.eta == "paper":
        return 2.0 * (0.5 - p).abs()
    if config.eta == "p":
        return p.clone()
    if config.eta == "1-p":
        return 1.0 - p
    return torch.full_like(p, float(config.eta_constant))


def exact_vocabulary_scores(sketch: HeadSketch, mask: Tensor, is_pos: Tensor, group_index: Tensor,
                            chunk_tokens: int = 1024) -> tuple[Tensor, Tensor, Tensor]:
    """Σ over the group's correct tokens of α⟨h, h⟩ for every valid token, with α over V*ₓ (the
    token ids generated in the group's responses) and exact probabilities (`HeadSketch.probs_at`).

    Per group: E = onehot(y) − π restricted to V*ₓ (|V*ₓ| columns; π is not renormalised),
    M = E⁺ᵀ H⁺ = Σ_r M_r (|V*ₓ| × d) summed over the correct rows r, score = rowsum((E M) ⊙ H); a
    correct row's score against the OTHER correct rows uses M − M_r (exactly 0 with one correct
    row). Computed `chunk_tokens` tokens at a time.
    Returns (scores (B, T) float64, NaN where not scored or the group has no correct token;
    others (B, T) float64, the score against the other correct rows on correct rows, NaN elsewhere;
    vocab_size (G,) float64 |V*ₓ| per dense group id)."""
    if not sketch.exact_probs_available:
        raise ValueError("NTHR with vocabulary='exact' needs exact probabilities on V*ₓ: a HeadSketch with the head "
                         "weight and log-normaliser (head_sketch) or the logits (sketch_from_logits); set "
                         "algorithm.nthr.vocabulary=topk for the top-K sketch")
    B, T = mask.shape
    device = sketch.states.device
    dtype = torch.promote_types(sketch.states.dtype, torch.float32)
    scores = torch.full((B, T), float("nan"), dtype=torch.float64, device=device)
    others = torch.full((B, T), float("nan"), dtype=torch.float64, device=device)
    _, gid = torch.unique(group_index, return_inverse=True)
    G = int(gid.max()) + 1 if B else 0
    vocab_size = torch.zeros(G, dtype=torch.float64, device=device)
    rows_of = [[] for _ in range(G)]
    for r, g in enumerate(gid.tolist()):
        rows_of[g].append(r)
    for g, rows in enumerate(rows_of):
        rows_t = torch.tensor(rows, device=device)
        b, t = (mask[rows_t]).nonzero(as_tuple=True)
        b = rows_t[b]
        pos_rows = [r for r in rows if bool(is_pos[r])]
        if b.numel() == 0 or not pos_rows or not bool((is_pos[b]).any()):
            continue
        vocab = torch.unique(sketch.targets[b, t])                         # V*ₓ, sorted
        vocab_size[g] = vocab.numel()

        def errors(bb: Tensor, tt: Tensor) -> Tensor:                   # (n, |V*|) onehot(y) − π on V*ₓ
            e = -sketch.probs_at(bb, tt, vocab, dtype)
            col = torch.searchsorted(vocab, sketch.targets[bb, tt])
            e[torch.arange(bb.numel(), device=device), col] += 1.0
            return e

        def chunks(bb: Tensor, tt: Tensor):
            for s in range(0, bb.numel(), chunk_tokens):
                yield bb[s:s + chunk_tokens], tt[s:s + chunk_tokens]

        M_row = {}
        for r in pos_rows:                                              # M_r = E_rᵀ H_r, M = Σ_r M_r
            tr = mask[r].nonzero(as_tuple=True)[0]
            br = torch.full_like(tr, r)
            Mr = torch.zeros(vocab.numel(), sketch.states.shape[-1], dtype=dtype, device=device)
            for bc, tc in chunks(br, tr):
                Mr += errors(bc, tc).T @ sketch.states[bc, tc].to(dtype)
            M_row[r] = Mr
        M = sum(M_row.values())
        for bc, tc in chunks(b, t):
            E, H = errors(bc, tc), sketch.states[bc, tc].to(dtype)
            scores[bc, tc] = ((E @ M) * H).sum(dim=1).double()
        for r, Mr in M_row.items():
            tr = mask[r].nonzero(as_tuple=True)[0]
            br = torch.full_like(tr, r)
            M_others = M - Mr
            for bc, tc in chunks(br, tr):
                others[bc, tc] = ((errors(bc, tc) @ M_others) * sketch.states[bc, tc].to(dtype)).sum(dim=1).double()
    return scores, others, vocab_size


def nthr_token_advantages(sketch: HeadSketch, response_mask: Tensor, advantages: Tensor, group_index: Tensor,
                          config: NTHRConfig) -> tuple[Tensor, dict]:
    """NTHR token advantages (module docstring; Algorithm 1 of Deng et al. 2025).

    sketch: HeadSketch (B, T, ...) (with exact probabilities for vocabulary="exact");
    response_mask (B, T); advantages (B,) Â; group_index (B,) any ids. Correct = Â > 0 (binary
    rewards: the correct responses of a mixed group). Returns ((B, T) float32, stats)."""
    cfg = config
    mask = _check(sketch, response_mask, advantages, group_index)
    B, T = mask.shape
    device = mask.device
    adv = advantages.float()
    is_pos = adv > 0
    with torch.no_grad():
        if cfg.vocabulary == "exact":
            s_any, s_others, vocab_size = exact_vocabulary_scores(sketch, mask, is_pos, group_index, cfg.chunk_tokens)
        else:
            # one pass scores every token against its group's correct tokens; the own-response part of a
            # correct token is the same sum with every response as its own group
            s_any, _ = interference_scores(sketch, mask, is_pos, group_index, query=torch.ones_like(is_pos))
            s_own, _ = interference_scores(sketch, mask, is_pos, torch.arange(B, device=device), query=is_pos)
            s_others, vocab_size = s_any - s_own, None
    nan = torch.full_like(s_any, float("nan"))
    s_neg = torch.where(is_pos[:, None], nan, s_any)                          # s⁻ on wrong rows
    s_pos = torch.where(is_pos[:, None], s_any if cfg.anchor_self else s_others, nan)   # s⁺ on correct rows
    _, gid = torch.unique(group_index, return_inverse=True)
    G = int(gid.max()) + 1 if B else 0
    f64 = dict(dtype=torch.float64, device=device)
    # per response: mean of s⁺ over its valid tokens (s̄⁺_i′); per group: min over its correct responses
    n_tok = mask.sum(dim=1).to(torch.float64)
    row_mean = torch.where(mask & is_pos[:, None], s_pos, torch.zeros_like(s_pos)).sum(dim=1) / n_tok.clamp(min=1.0)
    anchor_row = is_pos & (n_tok > 0)
    inf = torch.full((G,), float("inf"), **f64)
    min_bar = inf.scatter_reduce(0, gid[anchor_row], row_mean[anchor_row], "amin")
    pb, pt = (mask & is_pos[:, None]).nonzero(as_tuple=True)
    tot = torch.zeros(G, **f64).index_add_(0, gid[pb], s_pos[pb, pt])
    cnt = torch.bincount(gid[pb], minlength=G).to(torch.float64)
    base = min_bar if cfg.threshold_rule == "min-response" else tot / cnt.clamp(min=1.0)
    if cfg.beta == -math.inf:
        tau = torch.full((G,), -math.inf, **f64)
    else:
        tau = cfg.beta * torch.where(torch.isfinite(base), base, torch.zeros_like(base))
    group_rows = torch.bincount(gid, minlength=G).to(torch.float64)
    p = torch.bincount(gid[is_pos], minlength=G).to(torch.float64) / group_rows.clamp(min=1.0)
    eta = nthr_eta(p, cfg)                                                   # (G,)
    scored = mask & ~is_pos[:, None] & torch.isfinite(s_neg)
    selected = scored & (s_neg > tau[gid][:, None])
    scale = torch.where(selected, eta[gid][:, None].float().expand(B, T), torch.ones(B, T, device=device))
    token_adv = torch.where(mask, adv[:, None] * scale, torch.zeros(B, T, device=device))
    n_scored = int(scored.sum())
    mixed = torch.bincount(gid[scored.any(dim=1)], minlength=G) > 0
    stats = {"nthr_selected_frac": float(selected.sum()) / n_scored if n_scored else float("nan"),
             "num_neg_tokens": float(n_scored),
             "nthr_groups": float(mixed.sum()),
             "nthr_eta_mean": float(eta[mixed].mean()) if bool(mixed.any()) else float("nan"),
             "nthr_tau_mean": float(tau[mixed].mean()) if bool(mixed.any()) else float("nan")}
    if vocab_size is not None and bool(mixed.any()):
        stats["nthr_vocab_size_mean"] = float(vocab_size[mixed].mean())
    return token_adv, stats


__all__ = ["NTHRConfig", "NTHR_ETA_RULES", "NTHR_THRESHOLD_RULES", "NTHR_VOCABULARIES", "exact_vocabulary_scores",
           "interference_token_advantages", "nthr_eta", "nthr_token_advantages"]
