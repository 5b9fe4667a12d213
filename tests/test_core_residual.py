"""ResRL token advantages (spec §2): float64 reference, hand-checked cases, edge cases, sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core_batches import random_batch
from resrl.core import ResRLConfig, positive_token_sample_mask, resrl_token_advantages
from resrl_reference import reference_token_advantages


def run(hidden, mask, adv, groups, **cfg):
    return resrl_token_advantages(hidden, mask, adv, groups, ResRLConfig(**cfg))


# ---------------------------------------------------------------- float64 reference, many batches

CASES = [
    # (num_groups, group_size, T, d, rank): ranks below and above M − 1 and d
    (3, 4, 24, 16, 4),
    (4, 3, 20, 8, 64),     # rank > d
    (2, 5, 30, 32, 3),
    (5, 2, 6, 24, 64),     # few tokens: rank > M − 1 in some groups
    (3, 4, 16, 12, 12),    # rank == d
    (1, 8, 40, 20, 10),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", range(8))
def test_exact_mode_matches_float64_reference(case, seed):
    G, n, T, d, rank = CASES[case]
    hidden, mask, adv, groups, _ = random_batch(1000 * case + seed, num_groups=G, group_size=n, T=T, d=d,
                                                structured=seed % 2 == 0)
    ours, _ = run(hidden, mask, adv, groups, rank=rank, svd="exact")
    ref, _ = reference_token_advantages(hidden.numpy(), mask.numpy(), adv.numpy(), groups.numpy(), rank=rank)
    tol = 5e-4 * float(adv.abs().max())
    assert np.abs(ours.numpy() - ref).max() <= tol


@pytest.mark.parametrize("case", range(len(CASES)))
def test_float64_states_are_processed_in_float64(case):
    # float64 inputs stay float64 inside: agreement with the reference at float64 precision
    G, n, T, d, rank = CASES[case]
    hidden, mask, adv, groups, _ = random_batch(77 + case, num_groups=G, group_size=n, T=T, d=d)
    ours, _ = run(hidden.double(), mask, adv, groups, rank=rank, svd="exact")
    ref, _ = reference_token_advantages(hidden.double().numpy(), mask.numpy(), adv.numpy(), groups.numpy(), rank=rank)
    assert np.abs(ours.numpy() - ref).max() <= 1e-6 * float(adv.abs().max())


@pytest.mark.parametrize("seed", range(6))
def test_randomized_mode_matches_reference_when_spectrum_decays(seed):
    # structured states (decaying spectrum) with oversampling: the subspace is the exact one up to noise
    hidden, mask, adv, groups, _ = random_batch(seed, num_groups=3, group_size=4, T=40, d=48, structured=True)
    ours, _ = run(hidden, mask, adv, groups, rank=4, svd="randomized", oversample=10, power_iters=2)
    ref, _ = reference_token_advantages(hidden.numpy(), mask.numpy(), adv.numpy(), groups.numpy(), rank=4)
    assert np.abs(ours.numpy() - ref).max() <= 5e-3 * float(adv.abs().max())


def test_truncation_guard_matches_reference():
    hidden, mask, adv, groups, _ = random_batch(7, num_groups=3, group_size=4, T=30, d=16)
    truncated = torch.tensor([i % 3 == 0 for i in range(len(adv))])
    ours, _ = run(hidden, mask, adv, groups, rank=4, svd="exact", truncation_guard=True, truncation_tail=5)
    ref, _ = reference_token_advantages(hidden.numpy(), mask.numpy(), adv.numpy(), groups.numpy(), rank=4,
                                        truncated=truncated.numpy(), truncation_guard=True, truncation_tail=5)
    ours_t, _ = resrl_token_advantages(hidden, mask, adv, groups,
                                       ResRLConfig(rank=4, svd="exact", truncation_guard=True, truncation_tail=5),
                                       truncated=truncated)
    assert np.abs(ours_t.numpy() - ref).max() <= 5e-4 * float(adv.abs().max())
    # and the guard really changed something: truncated negatives end at full weight
    neg_trunc = truncated & (adv <= 0)
    assert neg_trunc.any()
    assert not torch.allclose(ours, ours_t)


# ---------------------------------------------------------------- hand-checked cases (d = 3)

# In d = 3, a vector with mean 0 and population variance 1 is its own layer norm up to the factor
# s = 1/sqrt(1 + 1e-5). Two such vectors, orthogonal to each other and to (1, 1, 1):
A = math.sqrt(1.5)
U1 = [A, 0.0, -A]                         # |u1|² = 3
U2 = [1 / math.sqrt(2), -math.sqrt(2), 1 / math.sqrt(2)]   # |u2|² = 3
MIX = [(a + b) / math.sqrt(2) for a, b in zip(U1, U2)]     # mean 0, var 1, half its energy along u2


def test_hand_case_d3_gate_and_interpolation():
    # Group of two: positive response with tokens {u1, −u1} (μ+ = 0, M = 2, k = min(64, 1, 3) = 1,
    # V = u1/|u1|); negative response with tokens {u1, u2, mix}.
    # Residuals R = |x − V Vᵀx|²/d (× s², which cancels in z): u1 -> 0, u2 -> 3/3 = 1, mix -> 1.5/3 = 0.5.
    # D = {0, 1, 0.5}: q_low = Q(0.1) at position 0.2 of [0, .5, 1] = 0.1; q_high = Q(0.9) at 1.8 = 0.9.
    # z = clamp((R − 0.1)/0.8): u1 -> 0, u2 -> 1 (clamped from 1.125), mix -> 0.5
    # ω = 0.1 + 0.9 z: 0.1, 1.0, 0.55.  Â = +1 / −1 -> Ã_pos = 0.1, Ã_neg = −0.1, −1.0, −0.55.
    neg_u1 = [-v for v in U1]
    hidden = torch.tensor([[U1, neg_u1, [0.0, 0.0, 0.0]], [U1, U2, MIX]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, -1.0])
    groups = torch.tensor([5, 5])
    out, stats = run(hidden, mask, adv, groups, svd="exact")
    expected = torch.tensor([[0.1, 0.1, 0.0], [-0.1, -1.0, -0.55]])
    assert torch.allclose(out, expected, atol=1e-5)
    assert stats["effective_rank"] == 1.0
    assert stats["omega_min"] == pytest.approx(0.1, abs=1e-6)
    assert stats["frac_downweighted"] == pytest.approx(2 / 3)
    assert stats["captured_energy"] == pytest.approx(1.0, abs=1e-6)


def test_hand_case_d3_subspace_spans_layer_norm_plane_no_contrast():
    # Every layer-normed vector of R^3 lies in the plane orthogonal to (1, 1, 1). Positives {u1, −u1,
    # u2, −u2} span that plane (k = 2 with rank 2, or 3 with rank >= d): every negative has residual
    # 0 up to rounding, q_high − q_low ~ 1e-7 <= 1e-5 · mean|x|²/d, so the gate is off and ω = ξ.
    neg_u1 = [-v for v in U1]
    neg_u2 = [-v for v in U2]
    hidden = torch.tensor([[U1, neg_u1, U2, neg_u2], [MIX, U2, [1.0, 2.0, 4.0], [3.0, -1.0, 0.5]]])
    mask = torch.ones(2, 4, dtype=torch.bool)
    adv = torch.tensor([0.7, -0.7])
    for rank in (2, 3, 64):
        out, stats = run(hidden, mask, adv, torch.tensor([0, 0]), svd="exact", rank=rank)
        assert torch.allclose(out[1], torch.full((4,), -0.07), atol=1e-6), rank
        assert torch.allclose(out[0], torch.full((4,), 0.07), atol=1e-6)
        assert stats["groups_no_contrast"] == 1.0


def test_hand_case_d2_layer_norm_collapses_to_sign():
    # d = 2: LN((a, b)) = ±(1, −1)·c with c ≈ 1 for |a − b| >> 1e-5, so every state is ≈ (1, −1) or
    # (−1, 1). Positives {(2, 0), (0, 2)} -> LN ≈ (1,−1), (−1,1): μ+ = 0, M = 2, k = 1, V ∝ (1, −1).
    # Negatives are all inside that line: residuals 0, no contrast -> ω = ξ = 0.1 -> Ã = 0.1·Â.
    hidden = torch.tensor([[[2.0, 0.0], [0.0, 2.0]], [[5.0, 1.0], [-3.0, 3.0]]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    out, _ = run(hidden, mask, torch.tensor([2.0, -3.0]), torch.tensor([1, 1]), svd="exact")
    assert torch.allclose(out, torch.tensor([[0.2, 0.2], [-0.3, -0.3]]), atol=1e-6)


# ---------------------------------------------------------------- edge cases

def _batch():
    return random_batch(3, num_groups=1, group_size=4, T=12, d=8)


def test_all_positive_group():
    hidden, mask, _, groups, _ = _batch()
    adv = torch.tensor([0.5, 1.0, 0.2, 2.0])
    out, stats = run(hidden, mask, adv, groups)
    assert torch.allclose(out, 0.1 * adv[:, None] * mask)
    assert stats["groups_reweighted"] == 0 and stats["groups_with_pos"] == 1


def test_all_negative_group_is_plain_grpo():
    hidden, mask, _, groups, _ = _batch()
    adv = torch.tensor([-0.5, -1.0, 0.0, -2.0])
    out, stats = run(hidden, mask, adv, groups)
    assert torch.allclose(out, adv[:, None] * mask)
    assert stats["groups_without_pos"] == 1 and math.isnan(stats["omega_mean"])


def test_all_zero_advantages():
    hidden, mask, _, groups, _ = _batch()
    out, _ = run(hidden, mask, torch.zeros(4), groups)
    assert torch.equal(out, torch.zeros_like(out))


def test_one_positive_token_gives_full_weight():
    # M = 1 -> effective k = min(64, 0, d) = 0 < 1 -> ω = 1 on negatives
    hidden, mask, _, groups, _ = _batch()
    mask = mask.clone()
    mask[0] = False
    mask[0, 3] = True
    adv = torch.tensor([1.0, -1.0, -0.5, -0.2])
    out, stats = run(hidden, mask, adv, groups)
    assert torch.allclose(out[1:], adv[1:, None] * mask[1:])
    assert out[0, 3] == pytest.approx(0.1)
    assert stats["effective_rank"] == 0.0


def test_fewer_positive_tokens_than_rank():
    # M = 5 < k = 64 -> effective k = 4; compare with the reference
    hidden, mask, _, groups, _ = _batch()
    mask = mask.clone()
    mask[0] = False
    mask[0, :5] = True
    mask[1:, :] = True
    adv = torch.tensor([1.0, -1.0, -0.5, -0.2])
    out, stats = run(hidden, mask, adv, groups, svd="exact")
    ref, _ = reference_token_advantages(hidden.numpy(), mask.numpy(), adv.numpy(), groups.numpy())
    assert np.abs(out.numpy() - ref).max() < 5e-4
    assert stats["effective_rank"] == 4.0


def test_rank_at_least_d_gives_no_contrast():
    # enough positives to fill R^d: the subspace holds every direction -> every negative ω = ξ
    gen = torch.Generator().manual_seed(0)
    d = 6
    hidden = torch.randn(2, 40, d, generator=gen)
    mask = torch.ones(2, 40, dtype=torch.bool)
    adv = torch.tensor([1.0, -1.0])
    out, stats = run(hidden, mask, adv, torch.tensor([0, 0]), rank=64, svd="exact")
    assert torch.allclose(out[1], torch.full((40,), -0.1), atol=1e-6)
    assert stats["groups_no_contrast"] == 1.0
    out_r, _ = run(hidden, mask, adv, torch.tensor([0, 0]), rank=64, svd="randomized")
    assert torch.allclose(out_r, out, atol=1e-6)


def test_identical_negatives_get_min_weight():
    hidden, mask, _, groups, _ = _batch()
    hidden = hidden.clone()
    mask = torch.ones_like(mask)
    hidden[1:] = hidden[1, 0]          # every negative token is the same vector
    adv = torch.tensor([1.0, -1.0, -0.5, -0.2])
    out, _ = run(hidden, mask, adv, groups)
    assert torch.allclose(out[1:], 0.1 * adv[1:, None].expand(3, mask.shape[1]), atol=1e-7)


def test_group_of_size_one():
    hidden, mask, _, _, _ = _batch()
    groups = torch.tensor([0, 1, 2, 3])
    adv = torch.tensor([0.0, 0.5, -0.5, 0.0])   # a singleton group has either sign only
    out, stats = run(hidden, mask, adv, groups)
    expected = torch.where(adv > 0, 0.1 * adv, adv)[:, None] * mask
    assert torch.allclose(out, expected)
    assert stats["groups_reweighted"] == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_hidden_on_valid_token_is_an_error(bad):
    hidden, mask, adv, groups, _ = random_batch(1)
    hidden = hidden.clone()
    b, t = (int(v) for v in mask.nonzero()[5])
    hidden[b, t, 2] = bad
    with pytest.raises(ValueError, match=rf"NaN or inf.*row {b}, position {t}"):
        resrl_token_advantages(hidden, mask, adv, groups)


def test_non_finite_hidden_on_padding_is_ignored():
    hidden, mask, adv, groups, _ = random_batch(1)
    hidden = hidden.clone()
    b, t = (int(v) for v in (~mask).nonzero()[0])
    hidden[b, t] = float("nan")
    out, _ = resrl_token_advantages(hidden, mask, adv, groups)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("what", ["mask", "adv", "groups", "hidden2d", "trunc", "maskvals", "floatgroups", "advnan"])
def test_mismatched_shapes_are_clear_errors(what):
    hidden, mask, adv, groups, _ = random_batch(2)
    kwargs = dict(hidden=hidden, response_mask=mask, advantages=adv, group_index=groups)
    expect = {"mask": "response_mask", "adv": "advantages", "groups": "group_index", "hidden2d": "hidden",
              "trunc": "truncated", "maskvals": "0/1", "floatgroups": "integer", "advnan": "advantages"}[what]
    if what == "mask":
        kwargs["response_mask"] = mask[:, :-1]
    elif what == "adv":
        kwargs["advantages"] = adv[:-1]
    elif what == "groups":
        kwargs["group_index"] = groups[None]
    elif what == "hidden2d":
        kwargs["hidden"] = hidden[0]
    elif what == "trunc":
        kwargs["truncated"] = torch.zeros(3, dtype=torch.bool)
    elif what == "maskvals":
        kwargs["response_mask"] = mask.float() * 2
    elif what == "floatgroups":
        kwargs["group_index"] = groups.float()
    elif what == "advnan":
        kwargs["advantages"] = adv.clone().index_fill_(0, torch.tensor([0]), float("nan"))
    with pytest.raises(ValueError, match=expect):
        resrl_token_advantages(**kwargs)


@pytest.mark.parametrize("field,value,allowed", [
    ("rank", 0, ">= 1"), ("quantile_low", 0.95, "quantile_low"), ("min_weight", 1.5, r"\[0, 1\]"),
    ("svd", "qr", "randomized"), ("pos_scale", -1.0, ">= 0"), ("max_pos_tokens", 1, ">= 2"),
    ("hidden_alignment", "next", "predicting"), ("eps", 0.0, "> 0"), ("truncation_tail", 0, ">= 1"),
])
def test_config_validation_names_the_field(field, value, allowed):
    with pytest.raises(ValueError, match=rf"ResRLConfig\.\w+ = .* allowed .*{allowed}") as err:
        ResRLConfig(**{field: value})
    assert field in str(err.value) or field == "quantile_low"


# ---------------------------------------------------------------- boundary-aware sampling

def test_sampling_keeps_head_and_tail_and_respects_budget():
    B, T = 6, 300
    mask = torch.zeros(B, T, dtype=torch.bool)
    lengths = [300, 250, 120, 60, 300, 10]
    for i, L in enumerate(lengths):
        mask[i, T - L:] = True                               # left padding
    adv = torch.tensor([1.0, 0.5, 2.0, -1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    cfg = ResRLConfig(max_pos_tokens=200, boundary_tokens=16)
    kept = positive_token_sample_mask(mask, adv, groups, cfg)
    assert not (kept & ~mask).any() and not kept[3].any()    # valid positives only
    assert int(kept[:3].sum()) == 200                         # group 0: 670 positive tokens -> 200
    assert int(kept[4:].sum()) == 200                         # group 1: 310 -> 200
    for i, L in enumerate(lengths):
        if adv[i] > 0:
            valid = mask[i].nonzero().flatten()
            b = min(16, L)
            assert kept[i, valid[:b]].all() and kept[i, valid[-b:]].all(), i
    # small groups keep everything
    kept_all = positive_token_sample_mask(mask, adv, groups, ResRLConfig(max_pos_tokens=4096))
    assert torch.equal(kept_all, mask & (adv > 0)[:, None])


def test_sampling_boundary_shrinks_when_budget_is_tight_and_is_deterministic():
    mask = torch.ones(8, 100, dtype=torch.bool)
    adv = torch.ones(8)
    groups = torch.zeros(8, dtype=torch.long)
    cfg = ResRLConfig(max_pos_tokens=64, boundary_tokens=32)  # 8 responses x 2 x 32 = 512 > 64
    kept = positive_token_sample_mask(mask, adv, groups, cfg)
    assert int(kept.sum()) == 64
    assert kept[:, :4].all() and kept[:, -4:].all()           # b = 64 // 16 = 4 per side
    assert torch.equal(kept, positive_token_sample_mask(mask, adv, groups, cfg))
    other = positive_token_sample_mask(mask, adv, groups, ResRLConfig(max_pos_tokens=200, boundary_tokens=8, seed=1))
    same_seed = positive_token_sample_mask(mask, adv, groups, ResRLConfig(max_pos_tokens=200, boundary_tokens=8, seed=0))
    assert not torch.equal(other, same_seed)                  # the seed matters for the middle tokens


def test_sampling_middle_is_roughly_uniform():
    # over many seeds every middle position is kept with about the same frequency
    mask = torch.ones(1, 400, dtype=torch.bool)
    counts = torch.zeros(400)
    for seed in range(200):
        counts += positive_token_sample_mask(mask, torch.ones(1), torch.zeros(1, dtype=torch.long),
                                             ResRLConfig(max_pos_tokens=100, boundary_tokens=10, seed=seed))[0]
    middle = counts[10:-10] / 200                             # expected 80 / 380 ≈ 0.21
    assert abs(float(middle.mean()) - 80 / 380) < 1e-6
    assert float(middle.std()) < 0.06 and float(middle.min()) > 0.08


def test_subsampled_weights_are_close_to_full_weights():
    # the subspace from a boundary-aware subsample approximates the full one on structured data
    hidden, mask, adv, groups, _ = random_batch(11, num_groups=2, group_size=4, T=200, d=16, min_len=150)
    full, _ = run(hidden, mask, adv, groups, rank=4, svd="exact", max_pos_tokens=4096)
    sub, stats = run(hidden, mask, adv, groups, rank=4, svd="exact", max_pos_tokens=256)
    assert stats["num_pos_tokens"] <= 256
    assert float((full - sub).abs().mean()) < 0.05 * float(adv.abs().max())


def test_non_contiguous_states_give_the_same_result():
    # e.g. the engine's response-aligned slice hidden[:, P-1:-1] of the full sequence's states
    hidden, mask, adv, groups, _ = random_batch(21, num_groups=3, group_size=4, T=20, d=12)
    full = torch.randn(hidden.shape[0], hidden.shape[1] + 7, hidden.shape[2])
    full[:, 3:3 + hidden.shape[1]] = hidden
    sliced = full[:, 3:3 + hidden.shape[1]]
    assert not sliced.is_contiguous()
    a, _ = run(hidden, mask, adv, groups, rank=4)
    b, _ = run(sliced, mask, adv, groups, rank=4)
    assert torch.equal(a, b)
