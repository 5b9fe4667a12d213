"""NTHR as its paper defines it (Deng et al. 2025, arXiv 2505.18830, §5.1-5.2, Algorithm 1, §7.3,
§7.4, Tables 4-5): a float64 restatement of the paper's equations that forms every token pair, on
hand-made groups (one where the paper's min threshold and the pooled-mean reading select different
tokens, one with p = 0.5 where η = 0) and on random groups, for both vocabularies (V*ₓ exact, top-K
sketch) and both sketch sources (logits, head weight)."""

from __future__ import annotations

import math

import pytest
import torch

from resrl.core import AdvantageInputs, AlgorithmConfig, NTHRConfig, compute_token_advantages, nthr_token_advantages
from resrl.core.interference import head_sketch, sketch_from_logits


def restated_nthr(logits, states, targets, mask, adv, gidx, *, beta=1.0, eta="paper", eta_constant=0.0,
                  threshold_rule="min-response", anchor_self=False, vocabulary="vstar"):
    """Algorithm 1 in float64, one group at a time, every pair formed.

    α(u, v) = ⟨e_{y_u} − π_u, e_{y_v} − π_v⟩ over V*ₓ (the ids generated in the group: "vstar") or
    the whole vocabulary ("full"); s⁻ = Σ_{correct tokens} α ⟨h, h⟩ (Eq. 7); s̄⁺_i′ = the mean over
    response i′'s tokens of the same sum over the OTHER correct responses (Eq. 8); τ = β · min s̄⁺;
    η = 2|0.5 − p|; Ã = η Â on wrong tokens with s⁻ > τ."""
    B, T, V = logits.shape
    prob = torch.softmax(logits.double(), dim=-1)
    h = states.double()
    out = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            if mask[b, t]:
                out[b, t] = float(adv[b])
    for g in gidx.unique().tolist():
        rows = [b for b in range(B) if int(gidx[b]) == g]
        pos = [b for b in rows if adv[b] > 0]
        neg = [b for b in rows if adv[b] <= 0]
        toks = lambda rs: [(b, t) for b in rs for t in range(T) if mask[b, t]]  # noqa: E731
        if not toks(pos) or not toks(neg):
            continue
        ids = sorted({int(targets[b, t]) for b, t in toks(rows)}) if vocabulary == "vstar" else list(range(V))

        def err(b, t):
            e = -prob[b, t, ids].clone()
            if int(targets[b, t]) in ids:
                e[ids.index(int(targets[b, t]))] += 1.0
            return e

        def influence(u, sources):  # Σ over the source tokens of α(u, v) ⟨h_u, h_v⟩
            return sum(float(err(*u) @ err(*v)) * float(h[u] @ h[v]) for v in sources)

        s_bar = []
        for i2 in pos:
            others = toks([i for i in pos if anchor_self or i != i2])
            own = toks([i2])
            if own:
                s_bar.append(sum(influence(u, others) for u in own) / len(own))
        if threshold_rule == "min-response":
            base = min(s_bar)
        else:  # pooled mean over the correct tokens of s⁺ (the project's earlier reading)
            vals = [influence(u, toks([i for i in pos if anchor_self or i != u[0]])) for u in toks(pos)]
            base = sum(vals) / len(vals)
        tau = -math.inf if beta == -math.inf else beta * base
        p = len(pos) / len(rows)
        eta_v = {"paper": 2 * abs(0.5 - p), "p": p, "1-p": 1 - p, "constant": eta_constant}[eta]
        for u in toks(neg):
            if influence(u, toks(pos)) > tau:
                out[u] = eta_v * float(adv[u[0]])
    return out


def grpo(rewards, gidx):
    adv = torch.zeros_like(rewards, dtype=torch.float64)
    for g in gidx.unique():
        r = rewards[gidx == g].double()
        adv[gidx == g] = (r - r.mean()) / (r.std() + 1e-6)
    return adv


def uniform_two_token_group(h_and_y, rewards):
    """Rows of one token each on a 2-token vocabulary with π = (½, ½), so α = +½ for equal ids and
    −½ otherwise, and ⟨h, h⟩ = h_u h_v with d = 1."""
    T = max(len(r) for r in h_and_y)
    B = len(h_and_y)
    logits = torch.zeros(B, T, 2, dtype=torch.float64)
    states = torch.zeros(B, T, 1, dtype=torch.float64)
    targets = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, row in enumerate(h_and_y):
        for t, (hv, y) in enumerate(row):
            states[b, t, 0], targets[b, t], mask[b, t] = hv, y, True
    return logits, states, targets, mask, torch.tensor(rewards, dtype=torch.float64), torch.zeros(B, dtype=torch.long)


def test_min_threshold_and_pooled_mean_select_different_tokens():
    """Correct rows h = 1, 1, 3 (all y = 0): s̄⁺ = ½·(1·1 + 1·3) = 2, 2, and ½·(3 + 3) = 3, so the
    paper's τ = β · min = 2 while the pooled mean is 7/3. A wrong token y = 0, h = 0.9 has
    s⁻ = ½ · 0.9 · 5 = 2.25: selected by the paper's rule, not by the pooled mean. p = 3/5 -> η = 0.2."""
    logits, states, targets, mask, rewards, gidx = uniform_two_token_group(
        [[(1.0, 0)], [(1.0, 0)], [(3.0, 0)], [(0.9, 0), (0.9, 1)], [(0.5, 0)]], [1, 1, 1, 0, 0])
    adv = grpo(rewards, gidx)
    sk = sketch_from_logits(states, logits, targets, k=2)
    paper, stats = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig())
    a_neg = float(adv[3])
    assert paper[3, 0].item() == pytest.approx(0.2 * a_neg, rel=1e-6)       # 2.25 > 2: η Â
    assert paper[3, 1].item() == pytest.approx(a_neg, rel=1e-6)             # s⁻ = −2.25: kept
    assert paper[4, 0].item() == pytest.approx(float(adv[4]), rel=1e-6)     # s⁻ = 1.25 < 2: kept
    assert stats["nthr_selected_frac"] == pytest.approx(1 / 3)
    pooled, _ = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(threshold_rule="pooled-mean"))
    assert pooled[3, 0].item() == pytest.approx(a_neg, rel=1e-6)            # 2.25 < 7/3: kept
    for rule, got in (("min-response", paper), ("pooled-mean", pooled)):
        want = restated_nthr(logits, states, targets, mask, adv, gidx, threshold_rule=rule)
        torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-9)
    # β scales the threshold: β = 1.2 -> τ = 2.4 > 2.25, nothing selected; β = −inf selects every wrong token
    strict, _ = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(beta=1.2))
    assert strict[3, 0].item() == pytest.approx(a_neg, rel=1e-6)
    every, stats = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(beta=-math.inf))
    assert stats["nthr_selected_frac"] == 1.0 and every[3, 1].item() == pytest.approx(0.2 * a_neg, rel=1e-6)
    # Table 5's ablations at p = 3/5: η = p = 0.6, η = 1 − p = 0.4
    for eta, value in (("p", 0.6), ("1-p", 0.4)):
        got, _ = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(eta=eta))
        assert got[3, 0].item() == pytest.approx(value * a_neg, rel=1e-6)


def test_success_rate_one_half_gives_eta_zero_and_the_ablations():
    """p = 2/4: the paper's η = 2|0.5 − p| = 0, so a selected wrong token gets no penalty at all;
    the ablations η = p, 1 − p and a constant scale the same selected token."""
    logits, states, targets, mask, rewards, gidx = uniform_two_token_group(
        [[(1.0, 0)], [(2.0, 0)], [(1.0, 0), (1.0, 1)], [(0.1, 0)]], [1, 1, 0, 0])
    # s̄⁺ = ½·1·2 = 1 and ½·2·1 = 1 -> τ = 1; wrong tokens: ½·1·3 = 1.5 (selected), −1.5, ½·0.1·3 = 0.15
    adv = grpo(rewards, gidx)
    sk = sketch_from_logits(states, logits, targets, k=2)
    out, stats = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig())
    assert out[2, 0].item() == 0.0 and stats["nthr_eta_mean"] == 0.0
    assert out[2, 1].item() == pytest.approx(float(adv[2])) and out[3, 0].item() == pytest.approx(float(adv[3]))
    assert out[0, 0].item() == pytest.approx(float(adv[0]))                  # correct rows keep Â
    for eta, value in (("p", 0.5), ("1-p", 0.5), ("constant", 0.25)):
        got, _ = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(eta=eta, eta_constant=0.25))
        assert got[2, 0].item() == pytest.approx(value * float(adv[2]), rel=1e-6)
        want = restated_nthr(logits, states, targets, mask, adv, gidx, eta=eta, eta_constant=0.25)
        torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-9)


def test_one_correct_response_has_threshold_zero():
    """No other correct response: s̄⁺ = 0, τ = 0, every wrong token with s⁻ > 0 is selected (1 of 4
    correct: p = 0.25, η = 0.5)."""
    logits, states, targets, mask, rewards, gidx = uniform_two_token_group(
        [[(1.0, 0), (2.0, 1)], [(1.0, 0), (1.0, 1)], [(0.5, 1)], [(0.0, 0)]], [1, 0, 0, 0])
    adv = grpo(rewards, gidx)
    sk = sketch_from_logits(states, logits, targets, k=2)
    out, stats = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig())
    assert stats["nthr_tau_mean"] == 0.0
    want = restated_nthr(logits, states, targets, mask, adv, gidx)
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-9)
    # (1, 0): ½·1·1 − ½·1·2 = −0.5 (kept); (1, 1): −½·1 + ½·2 = 0.5 (selected); (3, 0): h = 0 -> 0, not > 0
    assert out[1, 1].item() == pytest.approx(0.5 * float(adv[1])) and out[1, 0].item() == pytest.approx(float(adv[1]))
    assert out[3, 0].item() == pytest.approx(float(adv[3]))


def random_groups(seed, B=12, T=5, V=13, d=4, groups=(0,) * 4 + (1,) * 4 + (2,) * 4):
    g = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(B, T, V, generator=g, dtype=torch.float64)
    states = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V - 4, (B, T), generator=g)       # ids V-4.. never generated: V*ₓ ⊊ V
    mask = torch.rand(B, T, generator=g) < 0.8
    mask[:, 0] = True
    rewards = torch.tensor([1., 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0])  # group 1 has no correct response
    return logits, states, targets, mask, rewards, torch.tensor(groups)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("variant", [{}, {"beta": 0.0}, {"beta": 0.5, "anchor_self": True},
                                     {"eta": "p"}, {"eta": "1-p", "beta": 0.3},
                                     {"threshold_rule": "pooled-mean", "eta": "constant", "eta_constant": 0.3}])
def test_random_groups_match_the_restatement_on_the_exact_vocabulary(seed, variant):
    logits, states, targets, mask, rewards, gidx = random_groups(seed)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(seed))   # interleaved groups
    logits, states, targets, mask, rewards, gidx = (x[perm] for x in (logits, states, targets, mask, rewards, gidx))
    adv = grpo(rewards, gidx)
    sk = sketch_from_logits(states, logits, targets, k=3)                    # K irrelevant for V*ₓ
    got, stats = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(**variant))
    want = restated_nthr(logits, states, targets, mask, adv, gidx, **variant)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    assert stats["nthr_groups"] == 2.0
    # the same through the registry (Â from the rewards, the paper's defaults)
    reg, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, head=sk),
                                      AlgorithmConfig(name="nthr", nthr=NTHRConfig(**variant)))
    torch.testing.assert_close(reg, got)


@pytest.mark.parametrize("seed", range(2))
def test_topk_sketch_with_k_equal_v_is_the_full_vocabulary(seed):
    """vocabulary=topk with K = V keeps the whole softmax: the restatement over all of V (not V*ₓ)."""
    logits, states, targets, mask, rewards, gidx = random_groups(seed)
    adv = grpo(rewards, gidx)
    sk = sketch_from_logits(states, logits, targets, k=logits.shape[-1])
    got, _ = nthr_token_advantages(sk, mask, adv.float(), gidx, NTHRConfig(vocabulary="topk"))
    want = restated_nthr(logits, states, targets, mask, adv, gidx, vocabulary="full")
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


def test_head_weight_sketch_equals_logits_sketch_and_keeps_the_head():
    """head_sketch (the engines' path: head weight + log-normaliser) gives the same V*ₓ probabilities
    and NTHR as the logits; a sketch with neither refuses vocabulary=exact naming the key."""
    g = torch.Generator().manual_seed(3)
    B, T, d, V = 8, 4, 5, 29
    states = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    W = torch.randn(V, d, generator=g, dtype=torch.float64)
    bias = torch.randn(V, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    rewards = torch.tensor([1., 0, 1, 0, 0, 1, 1, 0])
    gidx = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv = grpo(rewards, gidx).float()
    temp = 0.7
    from_head = head_sketch(states, W, bias, targets, k=4, temperature=temp, chunk_tokens=5)
    from_logits = sketch_from_logits(states, (states @ W.T + bias) / temp, targets, k=4)
    ids = torch.tensor([0, 3, 28])
    b, t = torch.arange(B).repeat_interleave(T), torch.arange(T).repeat(B)
    torch.testing.assert_close(from_head.probs_at(b, t, ids, torch.float64), from_logits.probs_at(b, t, ids, torch.float64))
    cfg = NTHRConfig(chunk_tokens=3)
    x, _ = nthr_token_advantages(from_head, mask, adv, gidx, cfg)
    y, _ = nthr_token_advantages(from_logits, mask, adv, gidx, cfg)
    torch.testing.assert_close(x, y)
    want = restated_nthr((states @ W.T + bias) / temp, states, targets, mask, adv.double(), gidx)
    torch.testing.assert_close(x.double(), want, rtol=1e-5, atol=1e-6)
    bare = from_logits.rows(torch.arange(B))
    bare.logits = None
    with pytest.raises(ValueError, match="vocabulary=topk"):
        nthr_token_advantages(bare, mask, adv, gidx, cfg)
    nthr_token_advantages(bare, mask, adv, gidx, NTHRConfig(vocabulary="topk"))   # the sketch alone suffices


def test_config_names_and_renamed_keys():
    from resrl.train.config import ConfigError, config_from_dict

    assert NTHRConfig() == NTHRConfig(beta=1.0, eta="paper", threshold_rule="min-response", vocabulary="exact")
    for bad in ({"eta": "2|0.5-p|"}, {"beta": math.inf}, {"eta_constant": 1.5}, {"vocabulary": "full"},
                {"threshold_rule": "mean"}):
        with pytest.raises(ValueError, match="NTHRConfig." + next(iter(bad))):
            NTHRConfig(**bad)
    cfg = config_from_dict({"algorithm": {"name": "nthr", "nthr": {"beta": 0.0, "eta": "1-p"}}})
    assert cfg.algorithm.nthr.beta == 0.0 and cfg.algorithm.nthr.eta == "1-p"
    for old, word in (("threshold", "beta"), ("scale", "eta")):
        with pytest.raises(ConfigError, match=rf"'algorithm.nthr.{old}' was renamed.*{word}"):
            config_from_dict({"algorithm": {"name": "nthr", "nthr": {old: 0.5}}})


def test_the_papers_recipe_config():
    """configs/qwen25_math_nthr.yaml: §7.3's G = 8, dynamic sampling, KL 1e-4, clip 0.2, temperature 1.0."""
    from pathlib import Path

    from resrl.train.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "qwen25_math_nthr.yaml")
    cfg.validate(num_processes=4, need_model=False, need_data=False)
    assert cfg.algorithm.name == "nthr" and cfg.algorithm.nthr == NTHRConfig()
    assert (cfg.train.group_size, cfg.train.temperature, cfg.train.rollout_prompts, cfg.train.update_prompts,
            cfg.train.learning_rate) == (8, 1.0, 256, 64, 1e-6)
    assert cfg.engine.dynamic_sampling is True and cfg.dynamic_sampling is True
    assert (cfg.loss.kl_coef, cfg.loss.clip_eps_low, cfg.loss.clip_eps_high) == (1e-4, 0.2, 0.2)
