"""Baseline advantages, DAPO pieces, length scaling and the algorithm registry."""

from __future__ import annotations

import math
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core_batches import random_batch
from resrl.core import (
    ALGORITHMS,
    AdvantageInputs,
    AlgorithmConfig,
    ResRLConfig,
    compute_token_advantages,
    drgrpo_advantages,
    dynamic_sampling_mask,
    get_algorithm,
    group_mean_std,
    grpo_advantages,
    length_scaled_rewards,
    nsr_advantages,
    overlong_penalty,
    psr_advantages,
    register_algorithm,
    resrl_token_advantages,
    wreinforce_advantages,
)


def test_grpo_hand_case_interleaved_groups():
    # group 7: rewards 1, 0, 0, 1 -> mean .5, unbiased std sqrt(1/3) -> ±0.5·sqrt(3) = ±0.8660
    # group 2: rewards 1, 1 -> std 0 -> 0
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([7, 2, 7, 7, 2, 7])
    adv = grpo_advantages(rewards, groups, eps=0.0)
    s = float(0.5 * np.sqrt(3))
    assert torch.allclose(adv, torch.tensor([s, 0, -s, -s, 0, s]), atol=1e-6)
    assert torch.allclose(drgrpo_advantages(rewards, groups), torch.tensor([0.5, 0, -0.5, -0.5, 0, 0.5]))


@settings(max_examples=50, deadline=None)
@given(rewards=st.lists(st.floats(-5, 5), min_size=1, max_size=20), n_groups=st.integers(1, 4), seed=st.integers(0, 99))
def test_group_mean_std_matches_numpy(rewards, n_groups, seed):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.randint(0, n_groups, (len(rewards),), generator=torch.Generator().manual_seed(seed)) * 11
    mean, std = group_mean_std(r, g)
    for gi in g.unique():
        vals = np.array(rewards)[(g == gi).numpy()]
        assert np.allclose(mean[g == gi].numpy(), vals.mean())
        assert np.allclose(std[g == gi].numpy(), vals.std(ddof=1) if len(vals) > 1 else 0.0)


def test_grpo_scale_modes_and_eps():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    g = torch.zeros(4, dtype=torch.long)
    assert torch.allclose(grpo_advantages(r, g, eps=1.0), (r - 0.25) / (0.5 + 1.0))
    assert torch.allclose(grpo_advantages(r, g, scale="none"), r - 0.25)
    assert torch.allclose(grpo_advantages(r, g, scale="batch", eps=0.0), (r - 0.25) / r.std())
    with pytest.raises(ValueError, match="scale_rewards"):
        grpo_advantages(r, g, scale="global")


def test_psr_nsr_wreinforce():
    r = torch.tensor([1.0, 0.0, 1.0, -1.0])
    assert torch.equal(psr_advantages(r), torch.tensor([1.0, 0, 1, 0]))
    assert torch.equal(nsr_advantages(r), torch.tensor([0.0, -1, 0, -1]))
    assert torch.allclose(wreinforce_advantages(r, lam=0.3), torch.tensor([0.3, -1, 0.3, -1]))
    assert torch.equal(psr_advantages(torch.tensor([0.4, 0.6]), correct_threshold=0.5), torch.tensor([0.0, 1.0]))


def test_dynamic_sampling_mask():
    r = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.0])
    g = torch.tensor([0, 0, 1, 1, 2, 3, 3, 2])
    assert dynamic_sampling_mask(r, g).tolist() == [False, False, False, False, True, False, False, True]


def test_overlong_penalty_and_length_scaling():
    lengths = torch.tensor([10, 80, 90, 95, 100, 120])
    # L_max 100, buffer 20: 0 up to 80, then linear to −1 at 100
    assert torch.allclose(overlong_penalty(lengths, 100, 20), torch.tensor([0, 0, -0.5, -0.75, -1, -1.0]))
    assert torch.allclose(overlong_penalty(lengths, 100, 20, penalty_factor=2.0)[2], torch.tensor(-1.0))
    with pytest.raises(ValueError, match="buffer_length"):
        overlong_penalty(lengths, 100, 0)
    # spec §3: L_start 3500, L_max 4096, s_min 0.7
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, -1.0, 2.0])
    L = torch.tensor([100, 3500, 4096, 4096, 4000, 3798])
    out = length_scaled_rewards(r, L, 3500, 4096, 0.7)
    assert torch.allclose(out, torch.tensor([1.0, 1.0, 0.7, 0.0, -1.0, 2.0 * (1 - 0.3 * 298 / 596)]))


def test_registry_has_every_algorithm_and_all_return_token_advantages():
    assert {"grpo", "drgrpo", "dapo", "psr", "nsr", "w-reinforce", "resrl"} <= set(ALGORITHMS)
    hidden, mask, _, groups, rewards = random_batch(0)
    from resrl.core import sketch_from_logits

    g = torch.Generator().manual_seed(0)
    B, T = mask.shape
    head = sketch_from_logits(torch.randn(B, T, 6, generator=g), torch.randn(B, T, 20, generator=g),
                              torch.randint(0, 20, (B, T), generator=g), 8)
    for name, spec in ALGORITHMS.items():
        inputs = AdvantageInputs(rewards, groups, mask, hidden if spec.needs_hidden else None,
                                 head=head if spec.needs_head else None,
                                 values=torch.randn(B, T, generator=g) if spec.needs_values else None)
        if spec.step_level:  # gigpo, empg: need the step layout's tags (tests/test_core_step_advantages.py)
            with pytest.raises(ValueError, match="step layout"):
                compute_token_advantages(inputs, AlgorithmConfig(name=name, passk_k=2))
            continue
        adv, stats = compute_token_advantages(inputs, AlgorithmConfig(name=name, passk_k=2))
        assert adv.shape == mask.shape and adv.dtype == torch.float32, name
        assert not adv[~mask].any(), name
        assert isinstance(stats, dict)
    assert get_algorithm("resrl").needs_hidden and not get_algorithm("grpo").needs_hidden
    assert get_algorithm("dapo").dynamic_sampling
    assert get_algorithm("dapo").loss_defaults["clip_eps_high"] == 0.28


def test_registry_resrl_equals_core_call_and_errors():
    hidden, mask, _, groups, rewards = random_batch(4)
    cfg = AlgorithmConfig(name="resrl", resrl=ResRLConfig(rank=4))
    adv, stats = compute_token_advantages(AdvantageInputs(rewards, groups, mask, hidden), cfg)
    direct, _ = resrl_token_advantages(hidden, mask, grpo_advantages(rewards, groups), groups, ResRLConfig(rank=4))
    assert torch.equal(adv, direct)
    assert "omega_mean" in stats
    with pytest.raises(ValueError, match="hidden states"):
        compute_token_advantages(AdvantageInputs(rewards, groups, mask), cfg)
    with pytest.raises(ValueError, match="unknown"):
        AlgorithmConfig(name="reinforce-plus-plus")
    with pytest.raises(ValueError, match="max_response_length"):
        AlgorithmConfig(overlong_buffer=4)
    with pytest.raises(ValueError, match="inf"):
        compute_token_advantages(AdvantageInputs(rewards * float("inf"), groups, mask), AlgorithmConfig())
    # NaN: unscorable rows (TRL: every reward function returned None), advantage 0
    adv, _ = compute_token_advantages(AdvantageInputs(rewards * float("nan"), groups, mask), AlgorithmConfig())
    assert bool((adv == 0).all())


def test_registry_applies_reward_shaping():
    mask = torch.zeros(4, 10, dtype=torch.bool)
    for i, L in enumerate([2, 10, 4, 10]):
        mask[i, :L] = True
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    groups = torch.zeros(4, dtype=torch.long)
    cfg = AlgorithmConfig(name="grpo", overlong_buffer=4, max_response_length=10, scale_rewards="none")
    adv, _ = compute_token_advantages(AdvantageInputs(rewards, groups, mask), cfg)
    shaped = torch.tensor([1.0, 0.0, 0.0, -1.0])   # lengths 10 get −1
    assert torch.allclose(adv[:, 0], shaped - shaped.mean())


def test_register_new_algorithm_is_one_function():
    name = "test-constant-minus-one"

    @register_algorithm(name)
    def constant(inputs, cfg):
        return -torch.ones_like(inputs.response_mask, dtype=torch.float32) * inputs.response_mask, {"x": 1.0}

    try:
        mask = torch.ones(2, 3, dtype=torch.bool)
        adv, stats = compute_token_advantages(
            AdvantageInputs(torch.zeros(2), torch.zeros(2, dtype=torch.long), mask), AlgorithmConfig(name=name))
        assert torch.equal(adv, -torch.ones(2, 3)) and stats == {"x": 1.0}
        with pytest.raises(ValueError, match="already registered"):
            register_algorithm(name)(constant)
    finally:
        ALGORITHMS.pop(name)


def test_unscorable_rows_as_trl_computes_them():
    """NaN rewards (TRL: every reward function returned None) against TRL 1.16's own formula, restated
    in float64: mean and Bessel-corrected std over the group's scored rows (nanmean / nanstd), advantage
    (r − mean) / (std + eps), NaN (a single scored row, or the row itself) -> 0. Every algorithm runs on
    the scored rows only; dynamic sampling compares the scored rows."""
    from resrl.core.advantages import dynamic_sampling_mask

    nan = float("nan")
    rewards = torch.tensor([1.0, nan, 0.0, 0.5, nan, nan, 1.0, nan, 0.2, 0.2, nan, 0.9], dtype=torch.float64)
    groups = torch.arange(12) // 4
    eps = 1e-4
    expected = []
    for i in range(12):
        scored = [float(rewards[j]) for j in range(12) if groups[j] == groups[i] and not math.isnan(rewards[j])]
        if math.isnan(rewards[i]) or len(scored) < 2:
            expected.append(0.0)
            continue
        mean = sum(scored) / len(scored)
        std = math.sqrt(sum((x - mean) ** 2 for x in scored) / (len(scored) - 1))
        expected.append((float(rewards[i]) - mean) / (std + eps))
    mask = torch.ones(12, 3, dtype=torch.bool)
    adv, _ = compute_token_advantages(AdvantageInputs(rewards, groups, mask), AlgorithmConfig(std_eps=eps))
    assert torch.allclose(adv[:, 0].double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    # ResRL: the same Â on the scored rows, its weights from them only, 0 on the unscorable ones
    hidden = torch.randn(12, 3, 8, generator=torch.Generator().manual_seed(0))
    adv_r, _ = compute_token_advantages(AdvantageInputs(rewards, groups, mask, hidden), AlgorithmConfig(name="resrl"))
    assert bool((adv_r[torch.isnan(rewards)] == 0).all()) and bool((adv_r[~torch.isnan(rewards)] != 0).any())
    # a group whose scored rows are equal is dropped; one with a NaN among differing rows is kept
    keep = dynamic_sampling_mask(rewards, groups)
    assert keep.tolist() == [True] * 4 + [False] * 4 + [True] * 4
