"""Policy loss: aggregation modes by hand, clipping at the boundaries, dual-clip, KL, entropy, gradient."""

from __future__ import annotations

import math

import pytest
import torch

from resrl.core import LossConfig, aggregate_loss, kl_estimate, policy_loss

# two sequences, lengths 3 and 1 (T = 4)
LOSS = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 100.0, 100.0, 100.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize("mode,expected", [
    ("token-mean", (1 + 2 + 3 + 4) / 4),                      # 2.5
    ("seq-mean-token-mean", ((1 + 2 + 3) / 3 + 4 / 1) / 2),   # 3.0
    ("seq-mean-token-sum", ((1 + 2 + 3) + 4) / 2),            # 5.0
    ("seq-mean-token-sum-norm", ((1 + 2 + 3) + 4) / 2 / 4),   # 1.25 (L_max defaults to T = 4)
])
def test_aggregation_modes_by_hand(mode, expected):
    assert aggregate_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_sum_norm_uses_configured_max_length_and_skips_empty_rows():
    assert aggregate_loss(LOSS, MASK, "seq-mean-token-sum-norm", 10).item() == pytest.approx(0.5)
    mask = torch.cat([MASK, torch.zeros(1, 4, dtype=torch.bool)])
    loss = torch.cat([LOSS, torch.full((1, 4), 7.0)])
    assert aggregate_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="aggregation"):
        aggregate_loss(LOSS, MASK, "sum")


def _one_token(ratio: float, adv: float, **cfg):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss, metrics = policy_loss(logp, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1, dtype=torch.bool),
                                LossConfig(**cfg))
    loss.backward()
    return loss.item(), logp.grad.item(), metrics


@pytest.mark.parametrize("ratio,adv,loss,grad,clipped", [
    # inside the trust region: ℓ = −ρA, dℓ/dlogp = −ρA
    (1.1, 1.0, -1.1, -1.1, 0.0),
    # A > 0 above 1 + ε_high: clipped, no gradient
    (1.5, 1.0, -1.2, 0.0, 1.0),
    # A > 0 below 1 − ε_low: min picks the unclipped ρA (pessimistic), gradient flows
    (0.5, 1.0, -0.5, -0.5, 0.0),
    # A < 0 below 1 − ε_low: clipped at (1 − ε)A, no gradient
    (0.5, -1.0, 0.8, 0.0, 1.0),
    # A < 0 above 1 + ε_high: unclipped −ρA, gradient flows
    (1.5, -1.0, 1.5, 1.5, 0.0),
])
def test_clipping_behaviour(ratio, adv, loss, grad, clipped):
    got_loss, got_grad, metrics = _one_token(ratio, adv)
    assert got_loss == pytest.approx(loss, rel=1e-6)
    assert got_grad == pytest.approx(grad, rel=1e-6, abs=1e-7)
    assert metrics["clip_frac"] == clipped


def test_clip_higher_boundaries():
    # ε_high = 0.28: ratio 1.25 is inside (gradient), 1.3 clipped at 1.28
    loss, grad, _ = _one_token(1.25, 1.0, clip_eps_high=0.28)
    assert loss == pytest.approx(-1.25) and grad == pytest.approx(-1.25)
    loss, grad, _ = _one_token(1.3, 1.0, clip_eps_high=0.28)
    assert loss == pytest.approx(-1.28) and grad == 0.0


def test_dual_clip_caps_negative_advantage_loss():
    # A = −1, ρ = 5: plain loss 5, dual-clip c = 3 caps it at 3 with zero gradient
    loss, grad, metrics = _one_token(5.0, -1.0, dual_clip_c=3.0)
    assert loss == pytest.approx(3.0) and grad == 0.0 and metrics["dual_clip_frac"] == 1.0
    loss, grad, _ = _one_token(2.0, -1.0, dual_clip_c=3.0)   # below the cap: unchanged
    assert loss == pytest.approx(2.0) and grad == pytest.approx(2.0)


def test_gradient_matches_analytic_seq_mean_token_mean():
    # no clipping active (ratios in (0.8, 1.2)): ℓ_{i,t} = −ρ_{i,t} A_{i,t}, dℓ/dlogp = −ρA;
    # seq-mean-token-mean: dL/dlogp_{i,t} = −ρ_{i,t} A_{i,t} / (|y_i| · n_seq)
    torch.manual_seed(0)
    logp = (torch.randn(3, 5) * 0.05).requires_grad_()
    old = torch.zeros(3, 5)
    adv = torch.randn(3, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.bool)
    loss, _ = policy_loss(logp, old, adv, mask, LossConfig(agg="seq-mean-token-mean"))
    loss.backward()
    rho = torch.exp(logp.detach())
    lengths = mask.sum(1, keepdim=True).float()
    analytic = -rho * adv / lengths / 3 * mask
    assert torch.allclose(logp.grad, analytic, atol=1e-6)
    assert loss.item() == pytest.approx(float((-(rho * adv) * mask).sum(1).div(lengths[:, 0]).mean()), rel=1e-5)


def test_kl_and_entropy_terms():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    ref = torch.log(torch.tensor([[0.25, 0.4]]))
    lr = logp - ref
    assert torch.allclose(kl_estimate(logp, ref, "k1"), lr)
    assert torch.allclose(kl_estimate(logp, ref, "k2"), 0.5 * lr ** 2)
    assert torch.allclose(kl_estimate(logp, ref, "k3"), torch.exp(-lr) - 1 + lr)
    mask = torch.ones(1, 2, dtype=torch.bool)
    adv = torch.zeros(1, 2)
    ent = torch.tensor([[1.0, 3.0]])
    loss, m = policy_loss(logp, logp, adv, mask, LossConfig(kl_coef=0.5, kl_estimator="k2", entropy_coef=0.1,
                                                             agg="token-mean"), ref_logprobs=ref, entropy=ent)
    expected = 0.5 * float((0.5 * lr ** 2).mean()) - 0.1 * 2.0
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert m["entropy"] == pytest.approx(2.0) and m["kl"] == pytest.approx(float((0.5 * lr ** 2).mean()))
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(logp, logp, adv, mask, LossConfig(kl_coef=0.1))


def test_loss_config_validation_and_shapes():
    with pytest.raises(ValueError, match=r"LossConfig\.agg"):
        LossConfig(agg="mean")
    with pytest.raises(ValueError, match=r"LossConfig\.dual_clip_c"):
        LossConfig(dual_clip_c=0.5)
    with pytest.raises(ValueError, match=r"LossConfig\.kl_estimator"):
        LossConfig(kl_estimator="k4")
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))
    # (B,) advantages are broadcast over tokens
    loss_b, _ = policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([1.0, -1.0]), torch.ones(2, 3))
    loss_bt, _ = policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([[1.0] * 3, [-1.0] * 3]), torch.ones(2, 3))
    assert loss_b.item() == loss_bt.item() == 0.0
