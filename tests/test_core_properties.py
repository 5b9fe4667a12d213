"""Property tests (hypothesis) of ResRL's token advantages: invariants that hold for any batch."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_batches import random_batch
from resrl.core import ResRLConfig, resrl_token_advantages

SETTINGS = settings(max_examples=int(os.environ.get("RESRL_HYPOTHESIS_EXAMPLES", 40)), deadline=None, suppress_health_check=[HealthCheck.too_slow])

batches = st.fixed_dictionaries({
    "seed": st.integers(0, 10_000),
    "num_groups": st.integers(1, 4),
    "group_size": st.integers(1, 5),
    "T": st.integers(2, 24),
    "d": st.integers(2, 20),
    "structured": st.booleans(),
})
configs = st.fixed_dictionaries({
    "rank": st.integers(1, 24),
    "min_weight": st.floats(0.0, 1.0),
    "pos_scale": st.floats(0.0, 2.0),
    "quantile_low": st.floats(0.0, 0.4),
    "quantile_high": st.floats(0.6, 1.0),
    "svd": st.sampled_from(["exact", "randomized"]),
})


def make(b):
    return random_batch(b["seed"], num_groups=b["num_groups"], group_size=b["group_size"], T=b["T"], d=b["d"],
                        structured=b["structured"], min_len=1)


@SETTINGS
@given(b=batches, c=configs)
def test_weights_signs_scale_and_padding(b, c):
    hidden, mask, adv, groups, _ = make(b)
    cfg = ResRLConfig(**c)
    out, stats = resrl_token_advantages(hidden, mask, adv, groups, cfg)
    assert out.dtype == torch.float32 and out.shape == mask.shape
    assert torch.equal(out[~mask], torch.zeros_like(out[~mask]))                       # 0 on padding
    pos = (adv > 0)[:, None] & mask
    assert torch.allclose(out[pos], (cfg.pos_scale * adv[:, None].expand_as(out))[pos])  # λ_pos·Â
    neg = (adv < 0)[:, None] & mask
    omega = out[neg] / adv[:, None].expand_as(out)[neg]
    assert (omega >= cfg.min_weight - 1e-6).all() and (omega <= 1 + 1e-6).all()           # ω ∈ [ξ, 1]
    if cfg.min_weight > 1e-30:  # ξ representable in float32: every negative keeps its sign
        assert (torch.sign(out[neg]) == -1).all()
    assert (out[neg] <= 0).all()
    if stats["num_neg_tokens"] > 0:
        lo, mean, hi = stats["omega_min"], stats["omega_mean"], stats["omega_max"]
        assert cfg.min_weight - 1e-6 <= lo <= mean + 1e-6 and mean <= hi + 1e-6 and hi <= 1 + 1e-6


@SETTINGS
@given(b=batches, c=configs, perm_seed=st.integers(0, 1000))
def test_invariant_to_batch_order(b, c, perm_seed):
    # float64 states are processed in float64: the invariance is checked free of float32 rounding,
    # which near-degenerate cases (k close to the rank of X+, ξ = 0, extreme quantiles) amplify
    hidden, mask, adv, groups, _ = make(b)
    hidden = hidden.double()
    cfg = ResRLConfig(**c)
    out, _ = resrl_token_advantages(hidden, mask, adv, groups, cfg)
    perm = torch.randperm(len(adv), generator=torch.Generator().manual_seed(perm_seed))
    out_p, _ = resrl_token_advantages(hidden[perm], mask[perm], adv[perm], groups[perm], cfg)
    assert torch.allclose(out_p, out[perm], atol=1e-6 * max(1.0, float(adv.abs().max())))


@SETTINGS
@given(b=batches, c=configs, extra=st.integers(1, 7))
def test_invariant_to_padding_side_and_extra_columns(b, c, extra):
    hidden, mask, adv, groups, _ = make(b)
    hidden = hidden.double()  # free of float32 rounding, as above
    cfg = ResRLConfig(**c)
    out, _ = resrl_token_advantages(hidden, mask, adv, groups, cfg)
    B, T, d = hidden.shape
    # move every response to the right end (left padding) and add extra padding columns on both sides
    T2 = T + 2 * extra
    h2 = torch.randn(B, T2, d, dtype=torch.float64) * 100   # garbage in the padding
    m2 = torch.zeros(B, T2, dtype=torch.bool)
    for i in range(B):
        idx = mask[i].nonzero().flatten()
        L = len(idx)
        h2[i, T2 - extra - L: T2 - extra] = hidden[i, idx]
        m2[i, T2 - extra - L: T2 - extra] = True
    out2, _ = resrl_token_advantages(h2, m2, adv, groups, cfg)
    tol = 1e-6 * max(1.0, float(adv.abs().max()))
    for i in range(B):
        assert torch.allclose(out2[i][m2[i]], out[i][mask[i]], atol=tol)
    assert not out2[~m2].any()


@SETTINGS
@given(b=batches, dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
def test_low_precision_inputs_are_finite(b, dtype):
    hidden, mask, adv, groups, _ = make(b)
    out, stats = resrl_token_advantages(hidden.to(dtype), mask, adv, groups, ResRLConfig(rank=8))
    assert torch.isfinite(out).all()
    ref, _ = resrl_token_advantages(hidden.to(dtype).float(), mask, adv, groups, ResRLConfig(rank=8))
    assert torch.allclose(out, ref, atol=1e-5)  # low precision only enters through the values themselves


@SETTINGS
@given(b=batches, seed=st.integers(0, 2**31))
def test_deterministic_for_a_fixed_seed(b, seed):
    hidden, mask, adv, groups, _ = make(b)
    cfg = ResRLConfig(rank=6, max_pos_tokens=16, boundary_tokens=2, seed=seed)  # subsampling active
    a, sa = resrl_token_advantages(hidden, mask, adv, groups, cfg)
    b2, sb = resrl_token_advantages(hidden, mask, adv, groups, cfg)
    assert torch.equal(a, b2)
    assert sa.keys() == sb.keys()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_large_magnitude_low_precision_states(dtype):
    hidden, mask, adv, groups, _ = random_batch(0, d=64, T=32)
    out, _ = resrl_token_advantages((hidden * 300).to(dtype), mask, adv, groups)
    assert torch.isfinite(out).all()
