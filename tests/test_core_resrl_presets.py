"""`algorithm.resrl.preset: authors-code` and `algorithm.resrl.grouping: micro-batch`: each setting
the authors' code runs (github 1229095296/ResRL, docs/method.md's table) against a restatement,
the preset's precedence rules, and the micro-batch grouping against a step-by-step emulation of
their veRL pipeline (balance, per-rank micro-batches, one weight call per micro-batch)."""

from __future__ import annotations

import pytest
import torch

from resrl.core import (AdvantageInputs, AlgorithmConfig, ResRLConfig, compute_token_advantages, grpo_advantages,
                        resrl_token_advantages)
from resrl.core.grouping import balanced_partitions, grouping_coverage, micro_batch_groups
from resrl.core.resrl_config import RESRL_PRESETS
from resrl_reference import reference_token_advantages


def batch(seed=0, n_groups=4, G=4, T=6, d=8, mixed=True):
    g = torch.Generator().manual_seed(seed)
    B = n_groups * G
    hidden = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None] < lengths[:, None]
    rewards = (torch.rand(B, generator=g) < 0.5).double()
    if mixed:
        rewards[0::G], rewards[1::G] = 1.0, 0.0
    gidx = torch.arange(n_groups).repeat_interleave(G)
    return hidden, mask, rewards, gidx


# ---- the preset and its precedence ----------------------------------------------------------------

def test_authors_code_preset_values_and_precedence():
    from resrl.train.config import ConfigError, config_from_dict

    cfg = config_from_dict({"algorithm": {"name": "resrl", "resrl": {"preset": "authors-code"}},
                            "train": {"max_completion_length": 4096}})
    r = cfg.algorithm.resrl
    assert (r.quantile_low, r.quantile_high, r.no_contrast_weight, r.svd, r.power_iters, r.boundary_tokens,
            r.min_pos_tokens, r.positive, r.grouping, r.grouping_micro_batch, r.grouping_ranks, r.preset) == \
        (0.2, 0.8, "midpoint", "pca_lowrank", 4, 0, 4, "reward", "micro-batch", 4, 8, "authors-code")
    assert (r.rank, r.max_pos_tokens, r.min_weight, r.pos_scale) == (64, 4096, 0.1, 0.1)   # the same in both
    assert (cfg.loss.agg, cfg.loss.dual_clip_c, cfg.loss.clip_eps_low, cfg.loss.clip_eps_high) == \
        ("token-mean", 3.0, 0.2, 0.2)
    a = cfg.algorithm
    assert (a.length_scale, a.length_scale_start, a.length_scale_min, a.max_response_length) == (True, 3500, 0.7, 4096)
    # keys the user gives win over the preset's, in every section it touches
    cfg = config_from_dict({"algorithm": {"name": "resrl", "length_scale": False,
                                          "resrl": {"preset": "authors-code", "quantile_low": 0.1, "grouping": "whole"}},
                            "loss": {"agg": "seq-mean-token-mean"}, "train": {"max_completion_length": 4096}})
    assert cfg.algorithm.resrl.quantile_low == 0.1 and cfg.algorithm.resrl.quantile_high == 0.8
    assert cfg.algorithm.resrl.grouping == "whole" and cfg.algorithm.length_scale is False
    assert cfg.loss.agg == "seq-mean-token-mean" and cfg.loss.dual_clip_c == 3.0
    # with a budget at most the scaling's start the authors' reward manager changes nothing: off
    cfg = config_from_dict({"algorithm": {"name": "resrl", "resrl": {"preset": "authors-code"}},
                            "train": {"max_completion_length": 256}})
    assert cfg.algorithm.length_scale is False
    # paper = today's defaults, exactly
    paper = config_from_dict({"algorithm": {"name": "resrl", "resrl": {"preset": "paper"}}})
    default = config_from_dict({"algorithm": {"name": "resrl"}})
    assert paper.algorithm == default.algorithm and paper.loss == default.loss
    with pytest.raises(ConfigError, match="algorithm.name=resrl"):
        config_from_dict({"algorithm": {"name": "grpo", "resrl": {"preset": "authors-code"}}})
    with pytest.raises(ConfigError, match="preset"):
        config_from_dict({"algorithm": {"name": "resrl", "resrl": {"preset": "authors"}}})


def test_python_from_preset_and_a_bare_preset_name_is_refused():
    c = ResRLConfig.from_preset("authors-code", quantile_high=0.9)
    assert c.quantile_low == 0.2 and c.quantile_high == 0.9 and c.grouping == "micro-batch"
    assert ResRLConfig.from_preset("paper") == ResRLConfig()
    with pytest.raises(ValueError, match="from_preset"):
        ResRLConfig(preset="authors-code")           # would silently be the paper's values
    assert set(RESRL_PRESETS) == {"paper", "authors-code"}


# ---- each authors-code setting ------------------------------------------------------------------

def test_no_spread_group_gets_the_midpoint_weight():
    """Negatives whose residuals coincide (identical states): no contrast. spec §2: ω = ξ;
    the authors' code (dp_actor.py:442-443): ω = (ξ + 1) / 2 = 0.55."""
    hidden, mask, rewards, gidx = batch(1, n_groups=1)
    neg = rewards == 0
    hidden[neg] = hidden[neg][0, 0]                    # every negative token the same state
    adv = grpo_advantages(rewards, gidx).double()
    for weight, omega in (("min", 0.1), ("midpoint", 0.55)):
        out, stats = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(no_contrast_weight=weight))
        m = mask & neg[:, None]
        torch.testing.assert_close(out.double()[m], (omega * adv[:, None].expand_as(mask))[m], rtol=1e-6, atol=1e-7)
        assert stats["groups_no_contrast"] == 1.0


def test_groups_with_fewer_than_min_pos_tokens_keep_full_weight():
    hidden, mask, rewards, gidx = batch(2, n_groups=2)
    mask[:] = False
    mask[:, :3] = True                                  # 3 tokens per response
    rewards[:] = torch.tensor([1., 0, 0, 0, 1, 1, 0, 0])  # group 0: 3 positive tokens, group 1: 6
    adv = grpo_advantages(rewards, gidx).double()
    default, _ = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig())
    out, stats = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(min_pos_tokens=4))
    m0 = mask & (gidx == 0)[:, None] & (rewards == 0)[:, None]
    torch.testing.assert_close(out.double()[m0], adv[:, None].expand_as(mask)[m0].float().double())  # ω = 1
    assert not torch.allclose(default.double()[m0], out.double()[m0])
    torch.testing.assert_close(out[4:], default[4:])     # group 1 reweighted as before
    assert stats["groups_reweighted"] == 1.0


def test_positive_by_raw_reward_puts_a_below_mean_correct_response_in_the_subspace():
    """Rewards 1, 1, 1, 0.2, −1 (a length-scaled correct answer at 0.2): Â of the 0.2 row is < 0,
    so spec §2 weighs it as a negative; the authors' split (score > 0) makes it a positive: its
    tokens join the subspace and its advantage is λ_pos · Â (negative, scaled by 0.1)."""
    g = torch.Generator().manual_seed(4)
    B, T, d = 5, 5, 32
    hidden = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T, dtype=torch.bool)
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.2, -1.0], dtype=torch.float64)
    gidx = torch.zeros(B, dtype=torch.long)
    cfg = AlgorithmConfig(name="resrl", resrl=ResRLConfig(positive="reward"))
    out, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), cfg)
    adv = grpo_advantages(rewards, gidx).double()
    assert adv[3] < 0
    torch.testing.assert_close(out[3].double(), 0.1 * adv[3].expand(T), rtol=1e-6, atol=1e-7)
    # the float64 reference splits by the sign of what it is given: the rewards' sign here
    _, omega = reference_token_advantages(hidden.numpy(), mask.numpy(), torch.where(rewards > 0, 1.0, -1.0).numpy(),
                                          gidx.numpy())
    torch.testing.assert_close(out[4].double(), torch.as_tensor(omega[4]) * adv[4], rtol=1e-5, atol=1e-6)
    spec, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), AlgorithmConfig(name="resrl"))
    assert not torch.allclose(spec[4], out[4])          # Â > 0 split: the 0.2 row is a negative, another subspace
    with pytest.raises(ValueError, match="positive=.rewards > 0"):
        resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(positive="reward"))


def test_pca_lowrank_recovers_a_low_rank_subspace_and_is_seeded():
    """Positives in a 3-dimensional affine subspace (after the layer norm), k = 3: torch.pca_lowrank
    (q = k, niter = 4) finds it, so the weights equal the exact SVD's; the call is seeded (two runs
    equal) and leaves the caller's RNG as it was."""
    g = torch.Generator().manual_seed(5)
    B, T, d = 8, 7, 16
    basis = torch.randn(3, d, generator=g, dtype=torch.float64)
    hidden = torch.randn(B, T, 3, generator=g, dtype=torch.float64) @ basis
    hidden += 0.5 * torch.randn(B, T, d, generator=g, dtype=torch.float64) * (torch.arange(B) % 2 == 1)[:, None, None]
    mask = torch.ones(B, T, dtype=torch.bool)
    rewards = (torch.arange(B) % 2 == 0).double()
    gidx = torch.arange(B) // 4
    adv = grpo_advantages(rewards, gidx).double()
    exact, _ = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(rank=3, svd="exact"))
    state = torch.get_rng_state()
    pca, _ = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(rank=3, svd="pca_lowrank", power_iters=4))
    assert torch.equal(torch.get_rng_state(), state)
    again, _ = resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig(rank=3, svd="pca_lowrank", power_iters=4))
    assert torch.equal(pca, again)
    torch.testing.assert_close(pca, exact, rtol=1e-5, atol=1e-6)


def test_uniform_subsample_has_no_boundary_tokens():
    from resrl.core import positive_token_sample_mask

    _, mask, rewards, gidx = batch(6, n_groups=2, G=4, T=40)
    mask[:] = True
    adv = grpo_advantages(rewards, gidx).double()
    kept = positive_token_sample_mask(mask, adv, gidx, ResRLConfig(max_pos_tokens=8, boundary_tokens=0))
    assert int(kept[adv > 0].sum()) == 16                                  # 8 per group
    first_last = kept[adv > 0][:, [0, -1]]
    assert not first_last.all()                                             # not forced in
    boundary = positive_token_sample_mask(mask, adv, gidx, ResRLConfig(max_pos_tokens=8, boundary_tokens=32))
    assert boundary[adv > 0][:, 0].all()


# ---- the micro-batch grouping --------------------------------------------------------------------

def test_balanced_partitions_hand_case_and_invariants():
    parts = balanced_partitions([1, 2, 3, 4, 5, 6, 7, 8], 2)
    assert sorted(map(len, parts)) == [4, 4] and sorted(i for p in parts for i in p) == list(range(8))
    assert sorted(sum(range(1, 9)[i] for i in p) for p in parts) == [18, 18]
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(100, 4096, (64,), generator=g).tolist()
    parts = balanced_partitions(lengths, 8)
    sums = [sum(lengths[i] for i in p) for p in parts]
    assert all(len(p) == 8 for p in parts) and max(sums) - min(sums) < max(lengths) // 4
    assert all(p == sorted(p) for p in parts)
    with pytest.raises(ValueError, match="equal partitions"):
        balanced_partitions([1, 2, 3], 2)


def veRL_like_weights(hidden, mask, rewards, gidx, lengths, cfg: ResRLConfig):
    """The authors' pipeline step by step: prompt-major rows, balance over ranks (partitions in row
    order), per rank micro-batches of `grouping_micro_batch` rows, one weight call per micro-batch
    grouping by prompt id, positives by raw reward > 0; Â from the whole groups (the driver's)."""
    adv = grpo_advantages(rewards, gidx).double()
    out = torch.zeros(mask.shape, dtype=torch.float32)
    per_call = ResRLConfig(**{**cfg.__dict__, "grouping": "whole", "preset": "paper"})
    for part in balanced_partitions(lengths.tolist(), cfg.grouping_ranks):
        for s in range(0, len(part), cfg.grouping_micro_batch):
            rows = torch.tensor(part[s:s + cfg.grouping_micro_batch])
            w, _ = resrl_token_advantages(hidden[rows], mask[rows], adv[rows], gidx[rows], per_call,
                                          positive=rewards[rows] > 0)
            out[rows] = w
    return out


@pytest.mark.parametrize("seed", range(3))
def test_micro_batch_grouping_equals_the_authors_pipeline_step_by_step(seed):
    hidden, mask, rewards, gidx = batch(seed, n_groups=8, G=4, T=7)
    prompt_len = torch.randint(3, 9, (8,), generator=torch.Generator().manual_seed(seed)).repeat_interleave(4)
    cfg = ResRLConfig.from_preset("authors-code", rank=4, grouping_ranks=4)
    inputs = AdvantageInputs(rewards, gidx, mask, hidden, prompt_lengths=prompt_len)
    got, stats = compute_token_advantages(inputs, AlgorithmConfig(name="resrl", resrl=cfg))
    want = veRL_like_weights(hidden, mask, rewards, gidx, mask.sum(1) + prompt_len, cfg)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert 0 <= stats["grouping_neg_with_all_positives_frac"] <= stats["grouping_neg_with_own_positive_frac"] <= 1


def test_micro_batch_grouping_on_one_rank_with_micro_batch_g_is_whole_groups():
    """One rank (no reorder) and micro-batches of G rows: every micro-batch is one prompt's group,
    so the weights are those of whole groups."""
    hidden, mask, rewards, gidx = batch(7, n_groups=4, G=4)
    whole = ResRLConfig(rank=4)
    micro = ResRLConfig(rank=4, grouping="micro-batch", grouping_micro_batch=4, grouping_ranks=1)
    a, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), AlgorithmConfig(name="resrl", resrl=whole))
    b, stats = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), AlgorithmConfig(name="resrl", resrl=micro))
    torch.testing.assert_close(a, b)
    assert stats["grouping_neg_with_all_positives_frac"] == 1.0


def test_a_negative_without_its_positives_in_its_micro_batch_keeps_full_weight():
    """Two prompts of 4 rows, micro-batches of 2 rows on one rank: rows (0, 1) = (+, −) share a
    micro-batch, rows (2, 3) = (−, −) do not see a positive: ω = 1 there, ω < 1 under whole groups."""
    hidden, mask, rewards, gidx = batch(8, n_groups=2, G=4)
    rewards[:] = torch.tensor([1., 0, 0, 0, 1, 0, 1, 0])
    micro = ResRLConfig(rank=4, grouping="micro-batch", grouping_micro_batch=2, grouping_ranks=1)
    adv = grpo_advantages(rewards, gidx).double()
    b, stats = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), AlgorithmConfig(name="resrl", resrl=micro))
    a, _ = compute_token_advantages(AdvantageInputs(rewards, gidx, mask, hidden), AlgorithmConfig(name="resrl", resrl=ResRLConfig(rank=4)))
    m = mask[2:4]
    torch.testing.assert_close(b[2:4][m].double(), adv[2:4, None].expand_as(mask[2:4])[m])
    assert (a[2:4][m].double().abs() < adv[2:4, None].expand_as(mask[2:4])[m].abs() - 1e-9).any()
    # negatives of mixed prompts: rows 1, 2, 3, 5, 7; with a positive in their micro-batch: 1, 5, 7
    assert stats["grouping_neg_with_own_positive_frac"] == pytest.approx(3 / 5)
    assert stats["grouping_neg_with_all_positives_frac"] == pytest.approx(1 / 5)   # row 1 (prompt 0 has one +)
    cov = grouping_coverage(gidx, gidx, rewards > 0, mask)
    assert cov["grouping_neg_with_all_positives_frac"] == 1.0


def test_micro_batch_groups_layout():
    gidx = torch.tensor([5, 5, 5, 5, 2, 2, 2, 2, 9, 9, 9, 9, 1, 1, 1, 1])
    lengths = torch.tensor([10, 40, 20, 30, 11, 41, 21, 31, 12, 42, 22, 32, 13, 43, 23, 33])
    ids = micro_batch_groups(gidx, lengths, micro_batch=2, ranks=2)
    _, inv = torch.unique(ids, return_inverse=True)
    for k in inv.unique():                                  # a weight group is inside one prompt, <= 2 rows
        rows = (inv == k).nonzero().flatten()
        assert rows.numel() <= 2 and gidx[rows].unique().numel() == 1
    with pytest.raises(ValueError, match="grouping_ranks"):
        micro_batch_groups(gidx, lengths, micro_batch=2, ranks=3)


def test_math_recipe_is_the_authors_setting_where_the_paper_is_silent_and_one_switch_from_their_code():
    from pathlib import Path

    from resrl.train.config import load_config

    path = Path(__file__).resolve().parents[1] / "configs" / "qwen3_math_resrl.yaml"
    cfg = load_config(path)
    assert cfg.model.path.endswith("Qwen3-4B") and cfg.trl["chat_template_kwargs"] == {"enable_thinking": False}
    assert cfg.loss.dual_clip_c == 3.0 and cfg.loss.agg == "seq-mean-token-mean"
    a = cfg.algorithm
    assert (a.length_scale, a.length_scale_start, a.length_scale_min, a.max_response_length) == (True, 3500, 0.7, 4096)
    assert (a.resrl.quantile_low, a.resrl.boundary_tokens, a.resrl.grouping) == (0.1, 32, "whole")
    authors = load_config(path, ["algorithm.resrl.preset=authors-code"])
    r = authors.algorithm.resrl
    assert (r.quantile_low, r.quantile_high, r.boundary_tokens, r.svd, r.grouping, r.positive) == \
        (0.2, 0.8, 0, "pca_lowrank", "micro-batch", "reward")
    assert authors.loss.agg == "token-mean"
