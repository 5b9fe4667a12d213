"""The policy losses of the registry (resrl.core.loss) against float64 restatements written token by
token from their definitions — not from the code under test:

    clipped surrogate + delta   PPO (Schulman et al. 2017, Eq. 7); INTELLECT-2's two-sided clip
                                (arXiv 2505.07291 §3.3: the unclipped ratio capped at δ), as TRL 1.16's
                                `_compute_loss` ("grpo" branch with `args.delta`); dual-clip (Ye et al. 2020)
    CISPO                       MiniMax-M1 (arXiv 2506.13585) Eq. 4-5: J = sg(r̂) Â log π, r̂ = clip(r, 1-ε_l, 1+ε_h)
    SAPO                        arXiv 2511.20347 / veRL's compute_policy_loss_sapo: f(r) = σ(τ(r−1))·4/τ
    Clip-Cov / KL-Cov           Cui et al. 2025 (arXiv 2505.22617) §4.2 / veRL's compute_policy_loss_clip_cov
                                and _kl_cov: Cov = (A − Ā)(log π − mean log π) over the batch's valid tokens
    VESPO                       TRL 1.16 GRPOTrainer.get_gamma_weights: φ(w) = exp(λ + k log w − λ w)
    off-policy sequence mask    DeepSeek-V3.2 (arXiv 2512.02556) Eq. 9 / TRL's get_off_policy_mask
    entropy bonus token-mean    TRL 1.16: the mean per-token entropy whatever loss_type

Each case compares the loss value and the gradient w.r.t. log π_θ (the analytic one of the
restatement, per token) in float64, with token advantages that vary inside a response (ResRL's
weights give such advantages: every loss must take them)."""

from __future__ import annotations

import math

import pytest
import torch

from resrl.core import AdvantageInputs, AlgorithmConfig, compute_token_advantages
from resrl.core.loss import SURROGATES, LossConfig, get_policy_loss, policy_loss, PolicyLossInputs



@pytest.fixture(autouse=True)
def float64():
    """Every tensor of these tests in float64 (restored after each test: the default is process-wide)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


B, T = 5, 6
LENGTHS = [6, 4, 1, 5, 3]


def _batch(seed: int = 0, spread: float = 0.4, token_adv: bool = True):
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i, n in enumerate(LENGTHS):
        mask[i, :n] = True
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 - 0.1
    logp = old + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    seq_adv = torch.tensor([1.3, -0.7, 0.5, -1.1, 0.0])
    adv = seq_adv[:, None] * (0.5 + torch.rand(B, T, generator=g, dtype=torch.float64)) if token_adv \
        else seq_adv[:, None].expand(B, T).clone()
    adv = torch.where(mask, adv, torch.zeros(()))
    entropy = torch.rand(B, T, generator=g, dtype=torch.float64) * 2
    return logp, old, adv, mask, entropy


def _tokens(mask):
    return [(i, t) for i in range(B) for t in range(T) if mask[i, t]]


def _aggregate(per_token: dict, mask, mode: str, L: int | None = None) -> float:
    """agg of {(i, t): value} over the valid tokens (resrl.core.loss.aggregate_loss's definitions)."""
    rows = [[per_token[(i, t)] for t in range(T) if mask[i, t]] for i in range(B)]
    rows = [r for r in rows if r]
    if mode == "token-mean":
        return sum(sum(r) for r in rows) / sum(len(r) for r in rows)
    if mode == "seq-mean-token-mean":
        return sum(sum(r) / len(r) for r in rows) / len(rows)
    if mode == "seq-mean-token-sum":
        return sum(sum(r) for r in rows) / len(rows)
    return sum(sum(r) for r in rows) / len(rows) / (L or T)


def _grad_of_agg(dper_token: dict, mask, mode: str, L: int | None = None) -> torch.Tensor:
    """d agg / d logπ_{i,t} from each token's own derivative dℓ_{i,t}/dlogπ_{i,t} (every term here is
    per-token in log π, Clip-Cov / KL-Cov's selection being a constant)."""
    grad = torch.zeros(B, T)
    n_rows = sum(1 for i in range(B) if mask[i].any())
    n_tok = int(mask.sum())
    for (i, t), d in dper_token.items():
        n_i = int(mask[i].sum())
        scale = {"token-mean": 1 / n_tok, "seq-mean-token-mean": 1 / (n_i * n_rows),
                 "seq-mean-token-sum": 1 / n_rows, "seq-mean-token-sum-norm": 1 / (n_rows * (L or T))}[mode]
        grad[i, t] = d * scale
    return grad


def _run(cfg: LossConfig, logp, old, adv, mask, **kw):
    x = logp.clone().requires_grad_(True)
    loss, metrics = policy_loss(x, old, adv, mask, cfg, **kw)
    loss.backward()
    return loss.item(), x.grad, metrics


def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


# ---- the restatements, token by token -------------------------------------------------------------------

def ref_clipped(logp, old, adv, mask, eps_low, eps_high, delta=None, dual_c=None):
    """PPO / TRL's grpo branch: ℓ = −min(min(r, δ)A, clip(r)A); dual-clip caps ℓ at −cA for A < 0."""
    loss, grad = {}, {}
    for i, t in _tokens(mask):
        r = math.exp(logp[i, t] - old[i, t])
        a = float(adv[i, t])
        r1 = min(r, delta) if delta is not None else r
        rc = min(max(r, 1 - eps_low), 1 + eps_high)
        l1, l2 = -r1 * a, -rc * a
        # −min(r1 A, rc A) = max(l1, l2); the derivative is the active branch's: r1 = r (not capped) -> −rA
        if l1 >= l2:
            value, d = l1, (-r * a if (delta is None or r < delta) else 0.0)
        else:
            value, d = l2, 0.0
        if dual_c is not None and a < 0 and value > -dual_c * a:
            value, d = -dual_c * a, 0.0
        loss[(i, t)], grad[(i, t)] = value, d
    return loss, grad


def ref_cispo(logp, old, adv, mask, eps_low, eps_high):
    """MiniMax-M1 Eq. 4-5: ℓ = −sg(clip(r, 1 − ε_l, 1 + ε_h)) A log π, dℓ/dlog π = −clip(r) A."""
    loss, grad = {}, {}
    for i, t in _tokens(mask):
        w = min(max(math.exp(logp[i, t] - old[i, t]), 1 - eps_low), 1 + eps_high)
        a = float(adv[i, t])
        loss[(i, t)], grad[(i, t)] = -w * a * float(logp[i, t]), -w * a
    return loss, grad


def ref_sapo(logp, old, adv, mask, tau_pos, tau_neg):
    """ℓ = −σ(τ(r − 1))·4/τ·A, τ = τ_pos if A > 0 else τ_neg; dℓ/dlog π = −A·4·r·σ(1 − σ)."""
    loss, grad = {}, {}
    for i, t in _tokens(mask):
        r = math.exp(logp[i, t] - old[i, t])
        a = float(adv[i, t])
        tau = tau_pos if a > 0 else tau_neg
        s = _sig(tau * (r - 1))
        loss[(i, t)], grad[(i, t)] = -s * 4 / tau * a, -a * 4 * r * s * (1 - s)
    return loss, grad


def ref_cov(logp, adv, mask):
    """{(i, t): (A − Ā)(log π − mean log π)} over the valid tokens."""
    toks = _tokens(mask)
    a_bar = sum(float(adv[k]) for k in toks) / len(toks)
    l_bar = sum(float(logp[k]) for k in toks) / len(toks)
    return {k: (float(adv[k]) - a_bar) * (float(logp[k]) - l_bar) for k in toks}


def ref_kl_cov(logp, old, adv, mask, ratio, coef):
    """ℓ = −rA; the ⌊ratio·N⌋ (≥ 1) tokens of largest Cov get + coef·|log π − log π_old|."""
    cov = ref_cov(logp, adv, mask)
    k = max(1, int(len(cov) * ratio))
    picked = set(sorted(cov, key=lambda key: -cov[key])[:k])
    loss, grad = {}, {}
    for i, t in _tokens(mask):
        lr = float(logp[i, t] - old[i, t])
        r, a = math.exp(lr), float(adv[i, t])
        loss[(i, t)], grad[(i, t)] = -r * a, -r * a
        if (i, t) in picked:
            loss[(i, t)] += coef * abs(lr)
            grad[(i, t)] += coef * (1.0 if lr > 0 else -1.0)
    return loss, grad, picked


def ref_vespo(logp, old, adv, mask, k_pos, lam_pos, k_neg, lam_neg):
    """ℓ = −sg(φ(w)) A log π, w = exp(Σ_t (log π − log π_old)) per response, φ(w) = e^λ w^k e^(−λw)."""
    loss, grad = {}, {}
    for i in range(B):
        toks = [t for t in range(T) if mask[i, t]]
        w = math.exp(sum(float(logp[i, t] - old[i, t]) for t in toks))
        for t in toks:
            a = float(adv[i, t])
            k, lam = (k_pos, lam_pos) if a >= 0 else (k_neg, lam_neg)
            phi = math.exp(lam) * w ** k * math.exp(-lam * w)
            loss[(i, t)], grad[(i, t)] = -phi * a * float(logp[i, t]), -phi * a
    return loss, grad


# ---- the comparisons -------------------------------------------------------------------------------------

AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("delta,dual_c", [(None, None), (1.15, None), (1.15, 3.0), (None, 1.5)])
def test_clipped_surrogate_with_delta_and_dual_clip(agg, delta, dual_c):
    logp, old, adv, mask, _ = _batch(spread=0.5)
    cfg = LossConfig(agg=agg, clip_eps_low=0.2, clip_eps_high=0.28, delta=delta, dual_clip_c=dual_c)
    loss, grad, metrics = _run(cfg, logp, old, adv, mask)
    ref_l, ref_g = ref_clipped(logp, old, adv, mask, 0.2, 0.28, delta, dual_c)
    assert loss == pytest.approx(_aggregate(ref_l, mask, agg), rel=1e-12, abs=1e-14)
    assert torch.allclose(grad, _grad_of_agg(ref_g, mask, agg), rtol=1e-10, atol=1e-14)
    if delta is not None:  # the situation: some ratio above δ
        assert metrics["delta_clip_frac"] > 0


def test_delta_equals_trls_two_sided_clip_and_differs_from_plain_ppo():
    """TRL's grpo branch with args.delta (a second restatement, in tensors as TRL writes it), and δ acts."""
    logp, old, adv, mask, _ = _batch(spread=0.6)
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 0.8, 1.2)
    trl_tok = -torch.min(torch.clamp(coef_1, max=1.1) * adv, coef_2 * adv)
    trl = ((trl_tok * mask).sum(-1) / mask.sum(-1)).mean()
    loss, _, _ = _run(LossConfig(delta=1.1), logp, old, adv, mask)
    plain, _, _ = _run(LossConfig(), logp, old, adv, mask)
    assert loss == pytest.approx(trl.item(), rel=1e-12)
    assert abs(loss - plain) > 1e-3


@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (1.0, 4.0), (1.0, 0.1)])
def test_cispo(eps_low, eps_high):
    logp, old, adv, mask, _ = _batch(spread=0.5)
    cfg = LossConfig(policy_loss="cispo", agg="token-mean", clip_eps_low=eps_low, clip_eps_high=eps_high)
    loss, grad, metrics = _run(cfg, logp, old, adv, mask)
    ref_l, ref_g = ref_cispo(logp, old, adv, mask, eps_low, eps_high)
    assert loss == pytest.approx(_aggregate(ref_l, mask, "token-mean"), rel=1e-12)
    assert torch.allclose(grad, _grad_of_agg(ref_g, mask, "token-mean"), rtol=1e-10, atol=1e-14)
    # every token keeps a gradient (the point of CISPO): no valid token with A != 0 has dℓ = 0
    assert bool((grad[mask & (adv != 0)] != 0).all())
    if eps_high == 0.1:
        assert metrics["clip_frac"] > 0


@pytest.mark.parametrize("tau_pos,tau_neg", [(1.0, 1.05), (0.5, 3.0)])
def test_sapo(tau_pos, tau_neg):
    logp, old, adv, mask, _ = _batch(spread=0.5)
    cfg = LossConfig(policy_loss="sapo", sapo_temperature_pos=tau_pos, sapo_temperature_neg=tau_neg)
    loss, grad, _ = _run(cfg, logp, old, adv, mask)
    ref_l, ref_g = ref_sapo(logp, old, adv, mask, tau_pos, tau_neg)
    assert loss == pytest.approx(_aggregate(ref_l, mask, "seq-mean-token-mean"), rel=1e-12)
    assert torch.allclose(grad, _grad_of_agg(ref_g, mask, "seq-mean-token-mean"), rtol=1e-10, atol=1e-14)


def test_on_policy_every_loss_is_the_policy_gradient():
    """At r = 1 (one update per round) the gradient of clipped surrogate, CISPO, SAPO and VESPO is
    −A ∇log π (each restatement's property): the losses differ only off-policy."""
    logp, _, adv, mask, _ = _batch()
    grads = {}
    for name in ("clipped-surrogate", "cispo", "sapo", "vespo"):
        _, grads[name], _ = _run(LossConfig(policy_loss=name, agg="token-mean"), logp, logp, adv, mask)
    pg = -adv * mask / mask.sum()
    for name, g in grads.items():
        assert torch.allclose(g, pg, atol=1e-14), name


def test_kl_cov():
    logp, old, adv, mask, _ = _batch(spread=0.3)
    for ratio, coef in ((0.0002, 1.0), (0.2, 0.5)):
        cfg = LossConfig(policy_loss="kl-cov", agg="token-mean", kl_cov_ratio=ratio, kl_cov_coef=coef)
        loss, grad, metrics = _run(cfg, logp, old, adv, mask)
        ref_l, ref_g, picked = ref_kl_cov(logp, old, adv, mask, ratio, coef)
        assert loss == pytest.approx(_aggregate(ref_l, mask, "token-mean"), rel=1e-12)
        assert torch.allclose(grad, _grad_of_agg(ref_g, mask, "token-mean"), rtol=1e-10, atol=1e-14)
        assert metrics["cov_frac"] == pytest.approx(len(picked) / int(mask.sum()))


def test_clip_cov_detaches_the_tokens_it_draws():
    logp, old, adv, mask, _ = _batch(spread=0.3)
    cov = ref_cov(logp, adv, mask)
    ref_l, ref_g = ref_clipped(logp, old, adv, mask, 0.2, 0.2)
    unclipped = {k for k in cov if ref_g[k] != 0 or float(adv[k]) == 0}
    # bounds that hold exactly two candidates, and a ratio that picks at most... all of them (deterministic)
    values = sorted(cov[k] for k in unclipped)
    lb, ub = (values[-3] + values[-2]) / 2, values[-1] + 1.0
    candidates = {k for k in unclipped if lb < cov[k] < ub}
    assert len(candidates) == 2
    cfg = LossConfig(policy_loss="clip-cov", clip_cov_ratio=0.5, clip_cov_lb=lb, clip_cov_ub=ub)
    loss, grad, metrics = _run(cfg, logp, old, adv, mask)
    for k in candidates:
        ref_l[k], ref_g[k] = 0.0, 0.0
    assert loss == pytest.approx(_aggregate(ref_l, mask, "seq-mean-token-mean"), rel=1e-12)
    assert torch.allclose(grad, _grad_of_agg(ref_g, mask, "seq-mean-token-mean"), rtol=1e-10, atol=1e-14)
    # more candidates than ⌊r·N⌋: exactly that many drawn, all among the candidates
    n = int(mask.sum())
    cfg = LossConfig(policy_loss="clip-cov", clip_cov_ratio=1.5 / n, clip_cov_lb=-1e9, clip_cov_ub=1e9)
    torch.manual_seed(3)
    _, grad, metrics = _run(cfg, logp, old, adv, mask)
    zeroed = {k for k in unclipped if grad[k] == 0 and ref_g[k] != 0}
    assert len(zeroed) == 1 and metrics["cov_frac"] == pytest.approx(1 / n)


@pytest.mark.parametrize("params", [(2.0, 3.0, 3.0, 2.0), (1.0, 0.5, 4.0, 1.5)])
def test_vespo(params):
    logp, old, adv, mask, _ = _batch(spread=0.15)
    k_pos, lam_pos, k_neg, lam_neg = params
    cfg = LossConfig(policy_loss="vespo", agg="token-mean", vespo_k_pos=k_pos, vespo_lambda_pos=lam_pos,
                     vespo_k_neg=k_neg, vespo_lambda_neg=lam_neg)
    loss, grad, _ = _run(cfg, logp, old, adv, mask)
    ref_l, ref_g = ref_vespo(logp, old, adv, mask, *params)
    assert loss == pytest.approx(_aggregate(ref_l, mask, "token-mean"), rel=1e-10)
    assert torch.allclose(grad, _grad_of_agg(ref_g, mask, "token-mean"), rtol=1e-10, atol=1e-14)


def test_vespo_reads_the_rollout_weights_instead_of_multiplying_by_them():
    """TRL: log w += Σ_t log(importance_sampling_ratio) for VESPO, and ℓ is not multiplied by the
    ratio; every other loss multiplies ℓ by it."""
    logp, old, adv, mask, _ = _batch(spread=0.15)
    g = torch.Generator().manual_seed(5)
    is_w = torch.where(mask, 0.7 + 0.6 * torch.rand(B, T, generator=g), torch.ones(()))
    cfg = LossConfig(policy_loss="vespo", agg="token-mean")
    loss, _, _ = _run(cfg, logp, old, adv, mask, importance_weights=is_w)
    shifted_old = old - torch.where(mask, torch.log(is_w), torch.zeros(()))  # w·Π is_w = exp(Σ(logπ − old + log is_w))
    ref_l, _ = ref_vespo(logp, shifted_old, adv, mask, 2.0, 3.0, 3.0, 2.0)
    assert loss == pytest.approx(_aggregate(ref_l, mask, "token-mean"), rel=1e-10)
    cfg = LossConfig(policy_loss="sapo")
    weighted, _, _ = _run(cfg, logp, old, adv, mask, importance_weights=is_w)
    ref_l, _ = ref_sapo(logp, old, adv, mask, 1.0, 1.05)
    assert weighted == pytest.approx(_aggregate({k: v * float(is_w[k]) for k, v in ref_l.items()}, mask,
                                                "seq-mean-token-mean"), rel=1e-12)


@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_off_policy_sequence_mask(name):
    """DeepSeek-V3.2 Eq. 9 on every loss: a response with A < 0 whose mean log π_old − log π exceeds δ
    contributes nothing; with vLLM's sampling log-probs the mask reads those."""
    logp, old, adv, mask, _ = _batch(spread=0.3)
    old = old + torch.tensor([0.0, 0.6, 0.0, 0.5, 0.0])[:, None]  # the negative responses drifted: divergence > 0
    div = {i: sum(float(old[i, t] - logp[i, t]) for t in range(T) if mask[i, t]) / LENGTHS[i] for i in range(B)}
    threshold = min(div[1], div[3]) - 1e-9  # the negative responses: the one of larger divergence at least
    dropped = {i for i in range(B) if div[i] > threshold and float(adv[i, 0]) < 0}
    assert dropped  # the situation: at least one response is masked
    base = dict(policy_loss=name, agg="seq-mean-token-sum")
    masked_adv = torch.where(torch.tensor([i in dropped for i in range(B)])[:, None], torch.zeros(()), adv)
    expected, grad_expected, _ = _run(LossConfig(**base), logp, old, masked_adv, mask) \
        if name != "kl-cov" and name != "clip-cov" else (None, None, None)
    loss, grad, metrics = _run(LossConfig(**base, off_policy_mask_threshold=threshold), logp, old, adv, mask)
    for i in dropped:
        assert bool((grad[i] == 0).all())
    assert metrics["off_policy_masked_frac"] == pytest.approx(sum(LENGTHS[i] for i in dropped) / sum(LENGTHS))
    if expected is not None:  # (a zero advantage is what a dropped row's loss amounts to for these terms)
        assert loss == pytest.approx(expected, rel=1e-12) and torch.allclose(grad, grad_expected, atol=1e-15)
    # the behaviour policy is vLLM's when given: sampling log-probs equal to log π mask nothing
    _, _, m = _run(LossConfig(**base, off_policy_mask_threshold=threshold), logp, old, adv, mask,
                   sampling_logprobs=logp.clone())
    assert m["off_policy_masked_frac"] == 0.0


def test_entropy_bonus_token_mean_whatever_the_loss_aggregation():
    logp, old, adv, mask, ent = _batch()
    zero = torch.zeros_like(adv)
    for agg in AGGS:
        trl, _, _ = _run(LossConfig(agg=agg, entropy_coef=0.3, entropy_agg="token-mean"), logp, old, zero, mask,
                         entropy=ent)
        assert trl == pytest.approx(-0.3 * float(ent[mask].mean()), rel=1e-12)
        ours, _, _ = _run(LossConfig(agg=agg, entropy_coef=0.3), logp, old, zero, mask, entropy=ent)
        assert ours == pytest.approx(-0.3 * _aggregate({k: float(ent[k]) for k in _tokens(mask)}, mask, agg))


@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_every_loss_takes_resrl_token_advantages(name):
    """algorithm: resrl with each loss: the registry entry runs on ResRL's (B, T) token advantages
    (weights that vary inside a negative response), its gradient is finite and zero on padding."""
    g = torch.Generator().manual_seed(0)
    B2, T2, d = 8, 7, 16
    mask = torch.ones(B2, T2, dtype=torch.bool)
    mask[1, 5:] = False
    mask[6, 3:] = False
    inputs = AdvantageInputs(torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]),
                             torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), mask, torch.randn(B2, T2, d, generator=g))
    token_adv, _ = compute_token_advantages(inputs, AlgorithmConfig(name="resrl"))
    negative = token_adv[1][mask[1]]
    assert negative.unique().numel() > 1  # the situation: ResRL's per-token weights
    logp = -torch.rand(B2, T2, generator=g) - 0.1
    old = logp + 0.2 * torch.randn(B2, T2, generator=g)
    x = logp.clone().requires_grad_(True)
    loss, _ = get_policy_loss(name)(PolicyLossInputs(x, old, token_adv, mask), LossConfig(policy_loss=name))
    loss.backward()
    assert math.isfinite(loss.item()) and bool(torch.isfinite(x.grad).all())
    assert bool((x.grad[~mask] == 0).all()) and bool((x.grad[mask] != 0).any())


def test_options_a_loss_does_not_read_are_errors():
    with pytest.raises(ValueError, match="dual_clip_c = 3.0 is not read by the 'cispo'"):
        LossConfig(policy_loss="cispo", dual_clip_c=3.0)
    with pytest.raises(ValueError, match="vespo_k_pos = 1.0 is not read by the 'sapo'"):
        LossConfig(policy_loss="sapo", vespo_k_pos=1.0)
    with pytest.raises(ValueError, match="LossConfig.policy_loss = 'ppo'"):
        LossConfig(policy_loss="ppo")
    with pytest.raises(ValueError, match="delta"):
        LossConfig(delta=0.9)
    LossConfig(policy_loss="clip-cov", delta=2.0, dual_clip_c=3.0, clip_cov_ratio=0.01)  # all read
