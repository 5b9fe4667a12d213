"""The head-gradient interference estimate (Lemma 1 from a top-K softmax sketch), ResRL's
weighting="interference" and NTHR: against diagnose's exact Lemma 1 computation on a tiny model,
float64 restatements that form every pair, hand-computed cases and the edge cases of ResRL."""

from __future__ import annotations

import pytest
import torch

from resrl.core import (AdvantageInputs, AlgorithmConfig, NTHRConfig, ResRLConfig, compute_token_advantages,
                        interference_scores, interference_token_advantages, nthr_token_advantages,
                        sketch_from_logits)
from resrl.core.interference import interference_error_bound
from resrl.diagnose import theory


def dense_interference(logits, states, targets, mask, is_pos, gidx, query=None):
    """float64 restatement forming every (query token, positive token) pair of a group:
    Σ_p ⟨softmax_n − e_yn, softmax_p − e_yp⟩ ⟨x_n, x_p⟩. NaN where not scored."""
    B, T, V = logits.shape
    p = torch.softmax(logits.double(), dim=-1)
    delta = p - torch.nn.functional.one_hot(targets, V).double()
    x = states.double()
    query = ~is_pos if query is None else query
    out = torch.full((B, T), float("nan"), dtype=torch.float64)
    for b in range(B):
        if not query[b]:
            continue
        pos = [(c, s) for c in range(B) if is_pos[c] and gidx[c] == gidx[b] for s in range(T) if mask[c, s]]
        if not pos:
            continue
        for t in range(T):
            if mask[b, t]:
                out[b, t] = sum(float(delta[b, t] @ delta[c, s]) * float(x[b, t] @ x[c, s]) for c, s in pos)
    return out


def random_batch(seed, B=8, T=6, V=11, d=5, groups=(0, 0, 0, 0, 7, 7, 7, 7)):
    g = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(B, T, V, generator=g, dtype=torch.float64)
    states = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.8
    mask[:, 0] = True
    rewards = (torch.rand(B, generator=g) < 0.5).double()
    gidx = torch.tensor(groups)
    return logits, states, targets, mask, rewards, gidx


@pytest.mark.parametrize("seed", range(4))
def test_full_sketch_equals_every_pair_restatement(seed):
    logits, states, targets, mask, rewards, gidx = random_batch(seed)
    rewards[0], rewards[1] = 1.0, 0.0
    is_pos = rewards > 0
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(seed))  # interleaved groups
    logits, states, targets, mask, is_pos, gidx = (t[perm] for t in (logits, states, targets, mask, is_pos, gidx))
    sk = sketch_from_logits(states, logits, targets, k=logits.shape[-1])
    ours, _ = interference_scores(sk, mask, is_pos, gidx)
    ref = dense_interference(logits, states, targets, mask, is_pos, gidx)
    assert torch.equal(torch.isnan(ours), torch.isnan(ref))
    ok = ~torch.isnan(ref)
    assert ok.any()
    assert torch.allclose(ours[ok], ref[ok], rtol=1e-10, atol=1e-10)
    one_group_per_chunk, _ = interference_scores(sk, mask, is_pos, gidx, budget_mb=0)
    assert torch.allclose(one_group_per_chunk[ok], ref[ok], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_truncated_sketch_error_is_within_the_documented_bound(k):
    logits, states, targets, mask, rewards, gidx = random_batch(3, groups=(0,) * 8)
    rewards[:] = torch.tensor([1., 0, 1, 0, 0, 1, 0, 0], dtype=torch.float64)
    is_pos = rewards > 0
    sk = sketch_from_logits(states, logits, targets, k=k)
    est, tails = interference_scores(sk, mask, is_pos, gidx)
    exact = dense_interference(logits, states, targets, mask, is_pos, gidx)
    neg = (mask & ~is_pos[:, None]).nonzero(as_tuple=True)
    pos = (mask & is_pos[:, None]).nonzero(as_tuple=True)
    bound = interference_error_bound(sk, tails, neg, pos)
    err = (est[neg] - exact[neg]).abs()
    assert (err <= bound + 1e-9).all()
    assert err.max() > 1e-6  # a real approximation was tested (the tails are not empty)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from train_helpers import build_small_model
    from transformers import AutoModelForCausalLM

    path = build_small_model(tmp_path_factory.mktemp("tiny") / "model")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model


def test_estimate_against_diagnose_exact_lemma1_on_a_tiny_model(tiny):
    """diagnose's exact value (theory.logit_gradients + theory.interference on the captured head input,
    the computation `resrl diagnose` reports) against the sketch: exact with K = V, within the bound
    and with a small relative error at K = 16."""
    from resrl.diagnose.model_pass import SampledGroup, forward_group

    model = tiny
    head = model.get_output_embeddings()
    V = head.weight.shape[0]
    g = torch.Generator().manual_seed(0)
    G, P, C = 6, 5, 9
    ids = torch.cat([torch.randint(5, V, (1, P), generator=g).repeat(G, 1), torch.randint(5, V, (G, C), generator=g)], 1)
    cmask = torch.ones(G, C, dtype=torch.bool)
    cmask[1, -3:] = False
    group = SampledGroup(ids, torch.cat([torch.ones(G, P, dtype=torch.long), cmask.long()], 1), C, cmask,
                         torch.zeros(G, dtype=torch.bool))
    fw = forward_group(model, group)
    is_pos = torch.tensor([True, False, True, False, False, False])
    y = group.completion_ids
    xh = fw.head_input[:, :-1].double()                                  # predicting states (G, C, d)
    nb, nt = (cmask & ~is_pos[:, None]).nonzero(as_tuple=True)
    pb, pt = (cmask & is_pos[:, None]).nonzero(as_tuple=True)
    W = head.weight.detach().double()
    exact, _ = theory.interference(theory.logit_gradients(xh[nb, nt], W, None, y[nb, nt]), xh[nb, nt],
                                   theory.logit_gradients(xh[pb, pt], W, None, y[pb, pt]), xh[pb, pt])
    logits = (xh @ W.T)
    gidx = torch.zeros(G, dtype=torch.long)
    full, _ = interference_scores(sketch_from_logits(xh, logits, y, V), cmask, is_pos, gidx)
    assert torch.allclose(full[nb, nt], exact, rtol=1e-9, atol=1e-9 * float(exact.abs().max()))
    sk = sketch_from_logits(xh, logits, y, 16)
    est, tails = interference_scores(sk, cmask, is_pos, gidx)
    bound = interference_error_bound(sk, tails, (nb, nt), (pb, pt))
    err = (est[nb, nt] - exact).abs()
    assert (err <= bound + 1e-9).all()
    rel = float(err.max() / exact.abs().max())
    assert rel < 0.5, rel  # measured here: see docs/algorithms/negative-samples.md (K = 16 of V = tiny vocab)


# ---- ResRL weighting = "interference" -----------------------------------------------------------

def reference_interference_weights(inter, mask, is_pos, gidx, adv, cfg):
    """float64 restatement, one group at a time with torch.quantile."""
    B, T = mask.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            if mask[b, t]:
                out[b, t] = cfg.pos_scale * adv[b] if is_pos[b] else adv[b]
    for gval in gidx.unique():
        rows = [b for b in range(B) if gidx[b] == gval and not is_pos[b]]
        toks = [(b, t) for b in rows for t in range(T) if mask[b, t] and not torch.isnan(inter[b, t])]
        if not toks:
            continue
        s = torch.tensor([-float(inter[b, t]) for b, t in toks], dtype=torch.float64)
        lo, hi = torch.quantile(s, cfg.quantile_low), torch.quantile(s, cfg.quantile_high)
        no_contrast = (hi - lo) <= cfg.no_contrast_tol * s.abs().mean()
        for (b, t), sv in zip(toks, s):
            w = cfg.min_weight + (1 - cfg.min_weight) * float(((sv - lo) / (hi - lo + cfg.eps)).clamp(0, 1))
            if no_contrast:
                w = cfg.min_weight
            if float(inter[b, t]) <= 0:
                w = 1.0
            out[b, t] = w * adv[b]
    return out


@pytest.mark.parametrize("seed", range(4))
def test_interference_weighting_matches_restatement_and_stays_in_range(seed):
    logits, states, targets, mask, rewards, gidx = random_batch(seed, B=12, groups=(0,) * 4 + (1,) * 4 + (2,) * 4)
    rewards[:4] = torch.tensor([1., 0, 0, 1])
    rewards[4:8] = 0.0                      # a group without positives: plain GRPO (Â = 0 here)
    rewards[8:12] = torch.tensor([1., 1, 1, 0.5])  # all "positive"-ish: Â > 0 for some only
    adv = rewards - torch.stack([rewards[gidx == g].mean() for g in gidx])
    adv = adv / (torch.stack([rewards[gidx == g].std() for g in gidx]) + 1e-6)
    is_pos = adv > 0
    cfg = ResRLConfig(weighting="interference", interference_topk=11)
    sk = sketch_from_logits(states, logits, targets, k=11)
    ours, stats = interference_token_advantages(sk, mask, adv.float(), gidx, cfg)
    inter = dense_interference(logits, states, targets, mask, is_pos, gidx)
    ref = reference_interference_weights(inter, mask, is_pos, gidx, adv, cfg)
    assert torch.allclose(ours.double(), ref, rtol=1e-5, atol=1e-6)
    neg = mask & (adv < 0)[:, None]
    omega = ours.double()[neg] / adv[:, None].expand_as(mask)[neg]
    assert ((omega >= cfg.min_weight - 1e-6) & (omega <= 1 + 1e-6)).all()
    assert stats["groups_reweighted"] >= 1 and 0 < stats["frac_downweighted"] <= 1


def test_interference_weighting_groups_without_positives_or_negatives_as_resrl():
    logits, states, targets, mask, rewards, gidx = random_batch(5, groups=(0,) * 4 + (1,) * 4)
    rewards[:4] = 0.0
    rewards[4:] = 1.0
    cfg = AlgorithmConfig(name="resrl", resrl=ResRLConfig(weighting="interference"))
    sk = sketch_from_logits(states, logits, targets, k=4)
    adv, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, head=sk), cfg)
    assert torch.equal(adv, torch.zeros_like(adv))  # Â = 0 everywhere: nothing moves, nothing NaN
    rewards[:4] = torch.tensor([1., 2, 3, 4])       # no positive/negative mix issue: group 0 has both
    rewards[4:] = torch.tensor([0., 0, 0, 0])        # group 1: no positives -> GRPO (Â = 0 here)
    adv, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, head=sk), cfg)
    grpo, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask), AlgorithmConfig(name="grpo"))
    assert torch.equal(adv[4:], grpo[4:])
    with pytest.raises(ValueError, match="head sketch"):
        compute_token_advantages(AdvantageInputs(rewards, gidx, mask), cfg)
    with pytest.raises(ValueError, match="weighting"):
        ResRLConfig(weighting="residuals")


def test_interference_weighting_hand_case_helpful_token_keeps_full_weight():
    """V = 2, d = 1, one positive token (y = 0, p = (.5, .5)), two negatives:
    n1 y = 0, p = (.5,.5): ⟨δ,δ⟩ = (−.5)² + .5² = .5, ⟨x,x⟩ = 1·1 -> I = +.5 (harmful) -> ω = ξ
    n2 y = 1, p = (.5,.5): δ = (.5, −.5), ⟨δn, δp⟩ = −.5, ⟨x,x⟩ = 1 -> I = −.5 (helpful) -> ω = 1."""
    logits = torch.zeros(3, 1, 2, dtype=torch.float64)
    states = torch.ones(3, 1, 1, dtype=torch.float64)
    targets = torch.tensor([[0], [0], [1]])
    mask = torch.ones(3, 1, dtype=torch.bool)
    adv = torch.tensor([1.0, -0.5, -0.5])
    sk = sketch_from_logits(states, logits, targets, k=2)
    scores, _ = interference_scores(sk, mask, adv > 0, torch.zeros(3, dtype=torch.long))
    assert scores[1, 0].item() == pytest.approx(0.5) and scores[2, 0].item() == pytest.approx(-0.5)
    cfg = ResRLConfig(weighting="interference")
    out, _ = interference_token_advantages(sk, mask, adv, torch.zeros(3, dtype=torch.long), cfg)
    assert out[0, 0].item() == pytest.approx(0.1)                # λ_pos Â
    assert out[1, 0].item() == pytest.approx(-0.5 * cfg.min_weight)
    assert out[2, 0].item() == pytest.approx(-0.5)


# ---- NTHR ---------------------------------------------------------------------------------------

def reference_nthr(logits, states, targets, mask, adv, gidx, cfg):
    """s⁺ of a positive token: over the positive tokens of the OTHER correct responses of its group."""
    is_pos = adv > 0
    s_neg = dense_interference(logits, states, targets, mask, is_pos, gidx)
    B, T, V = logits.shape
    p = torch.softmax(logits.double(), dim=-1)
    delta = p - torch.nn.functional.one_hot(targets, V).double()
    s_pos = torch.full((B, T), float("nan"), dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            if is_pos[b] and mask[b, t]:
                s_pos[b, t] = sum(float(delta[b, t] @ delta[c, s]) * float(states[b, t] @ states[c, s])
                                  for c in range(B) if c != b and is_pos[c] and gidx[c] == gidx[b]
                                  for s in range(T) if mask[c, s])
    B, T = mask.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        pos_vals = [float(s_pos[c, t]) for c in range(B) if gidx[c] == gidx[b] and is_pos[c]
                    for t in range(T) if mask[c, t]]
        tau = cfg.beta * sum(pos_vals) / len(pos_vals) if pos_vals else 0.0
        for t in range(T):
            if not mask[b, t]:
                continue
            sel = (not is_pos[b]) and pos_vals and float(s_neg[b, t]) > tau
            out[b, t] = adv[b] * (cfg.eta_constant if sel else 1.0)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_nthr_matches_restatement(seed):
    logits, states, targets, mask, rewards, gidx = random_batch(seed, B=12, groups=(0,) * 4 + (1,) * 4 + (2,) * 4)
    rewards[:4] = torch.tensor([1., 0, 0, 1])
    rewards[4:8] = 0.0
    adv = torch.zeros(12, dtype=torch.float64)
    for gval in gidx.unique():
        r = rewards[gidx == gval]
        adv[gidx == gval] = (r - r.mean()) / (r.std() + 1e-6)
    # the project's earlier reading (pooled-mean threshold, fixed scale), kept as an option
    cfg = NTHRConfig(beta=0.5 + 0.25 * seed, threshold_rule="pooled-mean", eta="constant", eta_constant=0.3,
                     vocabulary="topk", topk=11)
    ours, stats = nthr_token_advantages(sketch_from_logits(states, logits, targets, 11), mask, adv.float(), gidx, cfg)
    ref = reference_nthr(logits, states, targets, mask, adv, gidx, cfg)
    assert torch.allclose(ours.double(), ref, rtol=1e-5, atol=1e-6)
    assert 0 <= stats["nthr_selected_frac"] <= 1


def test_nthr_hand_case_and_registry():
    """The project's earlier reading (threshold_rule=pooled-mean, fixed scale; β is its old "η").
    Two correct responses, one token each: y = 0, p = (.5,.5), x = 1: ⟨δ,δ⟩ = .5, so s⁺ of each =
    .5 (the OTHER response's token only) -> τ = β·.5. Negatives at x = 1: y = 0 -> s⁻ = 2·.5 = 1
    (> τ for β = 1.9, selected), y = 1 -> s⁻ = −1 (kept); β = 2.1: τ = 1.05, nothing selected."""
    logits = torch.zeros(4, 1, 2, dtype=torch.float64)
    states = torch.ones(4, 1, 1, dtype=torch.float64)
    targets = torch.tensor([[0], [0], [0], [1]])
    mask = torch.ones(4, 1, dtype=torch.bool)
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    sk = sketch_from_logits(states, logits, targets, k=2)
    old_reading = dict(threshold_rule="pooled-mean", eta="constant", eta_constant=0.5, vocabulary="topk")
    cfg = AlgorithmConfig(name="nthr", nthr=NTHRConfig(beta=1.9, **old_reading))
    adv, stats = compute_token_advantages(AdvantageInputs(rewards, torch.zeros(4, dtype=torch.long), mask, head=sk), cfg)
    a = 0.5 / (torch.tensor([1., 1, 0, 0]).std().item() + 1e-6)
    assert adv[:, 0].tolist() == pytest.approx([a, a, -0.5 * a, -a], rel=1e-5)
    assert stats["nthr_selected_frac"] == 0.5
    cfg2 = AlgorithmConfig(name="nthr", nthr=NTHRConfig(beta=2.1, **old_reading))   # 1 > 1.05 is false
    adv2, _ = compute_token_advantages(AdvantageInputs(rewards, torch.zeros(4, dtype=torch.long), mask, head=sk), cfg2)
    assert adv2[:, 0].tolist() == pytest.approx([a, a, -a, -a], rel=1e-5)
    with pytest.raises(ValueError, match="NTHRConfig.eta_constant"):
        NTHRConfig(eta_constant=1.5)


@pytest.mark.parametrize("k", [1, 3])
def test_truncated_sketch_equals_its_definition(k):
    """δ̂ = p restricted to top-K ∪ {y}, minus e_y (the tail set to 0): every pair, dense, float64."""
    logits, states, targets, mask, rewards, gidx = random_batch(8, groups=(0,) * 8)
    is_pos = torch.tensor([True, False, True, False, False, True, False, False])
    V = logits.shape[-1]
    p = torch.softmax(logits, dim=-1)
    keep = torch.zeros_like(p, dtype=torch.bool).scatter_(-1, p.topk(k, dim=-1).indices, True)
    keep.scatter_(-1, targets[..., None], True)
    assert (~(p.topk(k, dim=-1).indices == targets[..., None]).any(-1) & mask).any()  # y outside the top K occurs
    delta = torch.where(keep, p, torch.zeros_like(p)) - torch.nn.functional.one_hot(targets, V).double()
    ours, _ = interference_scores(sketch_from_logits(states, logits, targets, k), mask, is_pos, gidx)
    for b in range(8):
        for t in range(logits.shape[1]):
            if is_pos[b] or not mask[b, t]:
                continue
            ref = sum(float(delta[b, t] @ delta[c, s]) * float(states[b, t] @ states[c, s])
                      for c in range(8) if is_pos[c] for s in range(logits.shape[1]) if mask[c, s])
            assert ours[b, t].item() == pytest.approx(ref, rel=1e-10, abs=1e-10)
