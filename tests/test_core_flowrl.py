"""FlowRL's loss against a float64 re-computation from the formula, its log Z head by hand, and the
policy-loss registry."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from resrl.core import POLICY_LOSSES, LogZHead, PolicyLossInputs, flowrl_loss, get_policy_loss
from resrl.core.loss import LossConfig
from resrl.core.registry import ALGORITHMS, register_algorithm


def reference_flowrl(logp, ref, old, log_z, adv, mask, beta, clip):
    """Loops over rows in float64: δ_i = log Z_i + mean_t logp − β r̂_i − mean_t ref,
    w_i = exp(Σ_t (logp − old)) clipped, L = mean over rows with tokens of w_i δ_i²."""
    terms = []
    for i in range(logp.shape[0]):
        idx = [t for t in range(logp.shape[1]) if mask[i, t]]
        if not idx:
            continue
        n = len(idx)
        mean_logp = sum(logp[i, t] for t in idx) / n
        mean_ref = sum(ref[i, t] for t in idx) / n
        delta = log_z[i] + mean_logp - beta * adv[i] - mean_ref
        w = math.exp(sum(float(logp[i, t] - old[i, t]) for t in idx))
        if clip is not None:
            w = min(max(w, clip[0]), clip[1])
        terms.append(w * delta ** 2)
    return sum(terms) / len(terms)


def random_batch(seed, B=6, T=7, G=3):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None] < lengths[:, None]
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    old = logp + 0.05 * torch.randn(B, T, generator=g, dtype=torch.float64)  # off-policy: w != 1
    ref = logp + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    groups = torch.arange(B) // G
    adv = torch.zeros(B, dtype=torch.float64)
    for k in groups.unique():
        r = rewards[groups == k]
        adv[groups == k] = (r - r.mean()) / (r.std() + 1e-6)
    log_z = torch.randn(B, generator=g, dtype=torch.float64)
    pad = ~mask
    logp[pad], old[pad], ref[pad] = 50.0, -50.0, 7.0  # garbage on padding must not matter
    return logp, ref, old, log_z, adv, mask


@pytest.mark.parametrize("clip", [None, (0.8, 1.28), (0.0, 10.0), (0.97, 1.01)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_value_and_gradients_equal_float64_reference(seed, clip):
    logp, ref, old, log_z, adv, mask = random_batch(seed)
    logp_t = logp.clone().requires_grad_(True)
    log_z_t = log_z.clone().requires_grad_(True)
    loss, metrics = flowrl_loss(logp_t, ref, old, log_z_t, adv, mask, beta=15.0, weight_clip=clip)
    loss.backward()
    # value
    expected = reference_flowrl(logp, ref, old, log_z, adv, mask, 15.0, clip)
    assert math.isclose(loss.item(), float(expected), rel_tol=1e-10)
    # gradients by finite differences of the float64 reference (w is a constant: detached)
    w_fixed = []
    for i in range(logp.shape[0]):
        s = float(((logp[i] - old[i]) * mask[i]).sum())
        w = math.exp(s)
        w_fixed.append(w if clip is None else min(max(w, clip[0]), clip[1]))
    n_rows = int(mask.any(1).sum())
    for i in range(logp.shape[0]):
        n = int(mask[i].sum())
        if n == 0:
            assert log_z_t.grad[i] == 0 and (logp_t.grad[i] == 0).all()
            continue
        delta = log_z[i] + logp[i][mask[i]].mean() - 15.0 * adv[i] - ref[i][mask[i]].mean()
        assert math.isclose(log_z_t.grad[i].item(), 2 * w_fixed[i] * delta.item() / n_rows, rel_tol=1e-9, abs_tol=1e-12)
        expected_token = 2 * w_fixed[i] * delta.item() / n_rows / n
        torch.testing.assert_close(logp_t.grad[i][mask[i]], torch.full((n,), expected_token, dtype=torch.float64))
        assert (logp_t.grad[i][~mask[i]] == 0).all()
    assert metrics["flowrl/is_weight_clipped"] >= 0.0
    if clip == (0.97, 1.01):  # a tight clip really clips some rows
        assert metrics["flowrl/is_weight_clipped"] > 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.0, 30.0))
def test_property_value_matches_reference(seed, beta):
    logp, ref, old, log_z, adv, mask = random_batch(seed, B=5, T=4, G=5)
    loss, _ = flowrl_loss(logp, ref, old, log_z, adv, mask, beta=beta)
    assert math.isclose(loss.item(), float(reference_flowrl(logp, ref, old, log_z, adv, mask, beta, None)),
                        rel_tol=1e-9, abs_tol=1e-12)


def test_on_policy_weight_is_one_and_extreme_ratios_stay_finite():
    logp, ref, _, log_z, adv, mask = random_batch(3)
    _, m = flowrl_loss(logp, ref, logp, log_z, adv, mask)
    assert m["flowrl/is_weight"] == pytest.approx(1.0)
    old = logp - 500.0  # Σ log-ratio in the thousands: exp would overflow without the clamp
    loss, m = flowrl_loss(logp.float().requires_grad_(), ref.float(), old.float(), log_z.float(), adv.float(), mask)
    assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in m.values())


def test_shape_errors_name_the_argument():
    logp, ref, old, log_z, adv, mask = random_batch(0)
    with pytest.raises(ValueError, match="log_z"):
        flowrl_loss(logp, ref, old, log_z[:-1], adv, mask)
    with pytest.raises(ValueError, match="ref_log_probs"):
        flowrl_loss(logp, ref[:, :-1], old, log_z, adv, mask)
    with pytest.raises(ValueError, match="weight_clip"):
        flowrl_loss(logp, ref, old, log_z, adv, mask, weight_clip=(2.0, 1.0))


def test_registry_entry_reads_the_row_advantage_and_config():
    logp, ref, old, log_z, adv, mask = random_batch(4)
    token_adv = adv[:, None] * mask  # what the trainer passes: (B, T), constant per row
    cfg = LossConfig(flowrl_beta=7.0, flowrl_weight_clip="cap", flowrl_weight_cap=1.02)
    loss, _ = get_policy_loss("flowrl")(PolicyLossInputs(logp, old, token_adv, mask, ref_logprobs=ref, log_z=log_z),
                                        cfg)
    direct, _ = flowrl_loss(logp, ref, old, log_z, adv, mask, beta=7.0, weight_clip=(0.0, 1.02))
    assert math.isclose(loss.item(), direct.item(), rel_tol=1e-12)
    with pytest.raises(ValueError, match="ref_logprobs"):
        get_policy_loss("flowrl")(PolicyLossInputs(logp, old, token_adv, mask, log_z=log_z), cfg)


# ---- the log Z head -----------------------------------------------------------------------------

def test_head_hand_case_two_token_prompt():
    """One Linear layer: log Z = w · mean(h_1, h_2) + b, with the padding position ignored."""
    head = LogZHead(hidden_size=2, num_layers=1).double()
    with torch.no_grad():
        head.net[0].weight.copy_(torch.tensor([[2.0, -1.0]]))
        head.net[0].bias.copy_(torch.tensor([0.5]))
    states = torch.tensor([[[9.0, 9.0], [1.0, 3.0], [3.0, 1.0]]], dtype=torch.float64)  # [pad, tok1, tok2]
    mask = torch.tensor([[0, 1, 1]])
    # mean = (2, 2): 2*2 - 1*2 + 0.5 = 2.5
    assert head(states, mask).item() == pytest.approx(2.5)


def test_head_default_architecture_is_the_authors():
    head = LogZHead(hidden_size=8).eval()
    kinds = [type(m).__name__ for m in head.net]
    assert kinds == ["Linear", "GELU", "LayerNorm", "Dropout"] * 2 + ["Linear"]
    x = torch.randn(3, 4, 8)
    mask = torch.ones(3, 4)
    pooled = x.mean(1)
    h = pooled
    for i in (0, 4):
        h = torch.nn.functional.layer_norm(torch.nn.functional.gelu(head.net[i](h)), (8,),
                                           head.net[i + 2].weight, head.net[i + 2].bias)
    torch.testing.assert_close(head(x, mask), head.net[8](h)[:, 0])


# ---- registry -----------------------------------------------------------------------------------

def test_policy_loss_registry():
    assert {"clipped-surrogate", "flowrl"} <= set(POLICY_LOSSES)
    with pytest.raises(ValueError, match="unknown policy loss 'gspo'.*clipped-surrogate"):
        get_policy_loss("gspo")
    with pytest.raises(ValueError, match="unknown policy loss"):
        register_algorithm("needs-missing-loss", policy_loss="gspo")(lambda inputs, cfg: None)
    assert "needs-missing-loss" not in ALGORITHMS
    assert ALGORITHMS["flowrl"].policy_loss == "flowrl" and ALGORITHMS["flowrl"].needs_reference
    assert all(spec.policy_loss in POLICY_LOSSES for spec in ALGORITHMS.values())
