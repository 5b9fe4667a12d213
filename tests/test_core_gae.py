"""PPO's core (resrl.core.gae, resrl.core.value) against independent float64 restatements, hand-checked
cases and the properties the estimator must have: λ = 1 / γ = 1, episode ends, environment tokens
inside a trajectory, the step layout's per-step GAE, whitening over every process's rows, the
clipped value loss and its gradient, explained variance, and the registry entry."""

from __future__ import annotations

import math
import threading

import pytest
import torch

from resrl.core import AlgorithmConfig, PPOConfig, compute_ppo_targets, compute_token_advantages
from resrl.core.gae import (explained_variance, gae_advantages, last_token_rewards, masked_whiten, ppo_targets,
                            step_gae_advantages)
from resrl.core.registry import AdvantageInputs, get_algorithm
from resrl.core.value import CriticConfig, value_loss


# ---- independent restatements ---------------------------------------------------------------------

def gae_reference(rewards, values, mask, gamma, lam):
    """Per row: the valid positions u_0 < u_1 < ... < u_{n-1} (the chain skips masked ones), the reward on
    u_{n-1}, δ_j = r_j + γ V_{j+1} − V_j (V_n = 0), and A_j = Σ_{l ≥ 0} (γλ)^l δ_{j+l} as an explicit sum."""
    B, T = mask.shape
    adv = torch.zeros(B, T, dtype=torch.float64)
    ret = torch.zeros(B, T, dtype=torch.float64)
    for i in range(B):
        pos = [t for t in range(T) if mask[i, t]]
        n = len(pos)
        v = [float(values[i, t]) for t in pos] + [0.0]
        r = [0.0] * n
        if n:
            r[-1] = float(rewards[i])
        delta = [r[j] + gamma * v[j + 1] - v[j] for j in range(n)]
        for j in range(n):
            a = sum((gamma * lam) ** l * delta[j + l] for l in range(n - j))
            adv[i, pos[j]] = a
            ret[i, pos[j]] = a + v[j]
    return adv, ret


def step_gae_reference(step_rewards, values, traj, step, gamma, lam):
    """Per trajectory: its steps in order, δ_k = r_k + γ V_{k+1} − V_k (0 after the last), A_k = Σ (γλ)^l δ_{k+l}."""
    adv = torch.zeros(len(traj), dtype=torch.float64)
    for j in set(traj.tolist()):
        rows = sorted((int(step[b]), b) for b in range(len(traj)) if int(traj[b]) == j)
        order = [b for _, b in rows]
        v = [float(values[b]) for b in order] + [0.0]
        r = [float(step_rewards[b]) for b in order]
        delta = [r[k] + gamma * v[k + 1] - v[k] for k in range(len(order))]
        for k, b in enumerate(order):
            adv[b] = sum((gamma * lam) ** l * delta[k + l] for l in range(len(order) - k))
    return adv


def random_tokens(seed, B=6, T=9):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, T, generator=g) < 0.7          # holes: a multi-turn trajectory's environment tokens
    mask[0] = False                                      # a row without a valid token
    mask[1] = torch.tensor([1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=torch.bool)  # right padding
    mask[2] = torch.tensor([1, 1, 0, 0, 1, 1, 0, 1, 0], dtype=torch.bool)  # model, env, model, env, model, pad
    values = torch.randn(B, T, generator=g)
    rewards = torch.randn(B, generator=g)
    return rewards, values, mask


GAMMA_LAM = [(1.0, 1.0), (0.9, 0.95), (1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (1.0, 0.7), (0.8, 1.0)]


@pytest.mark.parametrize("gamma,lam", GAMMA_LAM)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_gae_equals_the_float64_restatement(gamma, lam, seed):
    rewards, values, mask = random_tokens(seed)
    adv, ret = gae_advantages(last_token_rewards(rewards, mask), values, mask, gamma, lam)
    ref_adv, ref_ret = gae_reference(rewards, values, mask, gamma, lam)
    assert adv.dtype == torch.float64
    torch.testing.assert_close(adv, ref_adv, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ret, ref_ret, rtol=1e-12, atol=1e-12)
    assert not adv[~mask].any() and not ret[~mask].any()


def test_token_gae_hand_checked():
    # three tokens, V = (0.5, 0.2, -0.1), R = 1, γ = 0.9, λ = 0.8:
    # δ2 = 1 - (-0.1) = 1.1;  δ1 = 0.9·(-0.1) - 0.2 = -0.29;  δ0 = 0.9·0.2 - 0.5 = -0.32
    # A2 = 1.1;  A1 = -0.29 + 0.72·1.1 = 0.502;  A0 = -0.32 + 0.72·0.502 = 0.04144
    values = torch.tensor([[0.5, 0.2, -0.1, 7.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    adv, ret = gae_advantages(last_token_rewards(torch.tensor([1.0]), mask), values, mask, 0.9, 0.8)
    torch.testing.assert_close(adv, torch.tensor([[0.04144, 0.502, 1.1, 0.0]], dtype=torch.float64))
    torch.testing.assert_close(ret, torch.tensor([[0.54144, 0.702, 1.0, 0.0]], dtype=torch.float64))


def test_lambda_one_gamma_one_is_return_minus_value_and_lambda_zero_the_td_error():
    rewards, values, mask = random_tokens(3)
    adv, ret = gae_advantages(last_token_rewards(rewards, mask), values, mask, 1.0, 1.0)
    m = mask
    # γ = λ = 1: A_t = R − V_t on every valid token, the target is R itself
    torch.testing.assert_close(adv[m], (rewards[:, None].double() - values.double()).expand_as(adv)[m])
    torch.testing.assert_close(ret[m], rewards[:, None].double().expand_as(ret)[m])
    # λ = 0: A_t = δ_t (one-step TD error); γ = 0: A_t = r_t − V_t
    adv0, _ = gae_advantages(last_token_rewards(rewards, mask), values, mask, 0.9, 0.0)
    ref, _ = gae_reference(rewards, values, mask, 0.9, 0.0)
    torch.testing.assert_close(adv0, ref)
    adv_g0, _ = gae_advantages(last_token_rewards(rewards, mask), values, mask, 0.0, 1.0)
    torch.testing.assert_close(adv_g0[m], (last_token_rewards(rewards, mask) - values.double())[m])


def test_episode_ends_rows_are_independent_and_nothing_leaks_past_the_last_token():
    rewards, values, mask = random_tokens(4)
    adv, _ = gae_advantages(last_token_rewards(rewards, mask), values, mask, 0.95, 0.9)
    # another row's values and rewards change nothing in row 2
    v2, r2 = values.clone(), rewards.clone()
    v2[3:] += 10.0
    r2[3:] -= 5.0
    adv2, _ = gae_advantages(last_token_rewards(r2, mask), v2, mask, 0.95, 0.9)
    torch.testing.assert_close(adv2[:3], adv[:3])
    # values after a row's last valid token (padding) change nothing: V = 0 past the end
    v3 = values.clone()
    v3[1, 3:] = 100.0
    adv3, _ = gae_advantages(last_token_rewards(rewards, mask), v3, mask, 0.95, 0.9)
    torch.testing.assert_close(adv3, adv)
    # the last valid token's advantage is R − V there: nothing is bootstrapped after the end
    last = 7  # row 2: model tokens 0-1, 4-5, 7
    assert adv[2, last] == pytest.approx(float(rewards[2]) - float(values[2, last]))
    # environment tokens are transparent: their values change nothing, the chain bridges them
    v4 = values.clone()
    v4[2, 2:4] = -50.0
    v4[2, 6] = 50.0
    adv4, _ = gae_advantages(last_token_rewards(rewards, mask), v4, mask, 0.95, 0.9)
    torch.testing.assert_close(adv4, adv)
    assert adv[2, 5] == pytest.approx(0.95 * float(values[2, 7]) - float(values[2, 5])
                                      + 0.95 * 0.9 * float(adv[2, 7]))


def test_last_token_rewards():
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]])
    out = last_token_rewards(torch.tensor([2.0, 3.0, -1.0]), mask)
    assert out.tolist() == [[0, 0, 0, 2.0, 0], [0] * 5, [-1.0, 0, 0, 0, 0]]


# ---- the step layout: GAE over environment steps ----------------------------------------------------

def random_steps(seed, n_traj=5, max_len=4):
    g = torch.Generator().manual_seed(seed)
    traj, step = [], []
    for j in range(n_traj):
        n = int(torch.randint(1, max_len + 1, (1,), generator=g))
        traj += [10 * j + 3] * n           # any ids
        step += list(range(n))
    perm = torch.randperm(len(traj), generator=g)  # rows in any order
    traj, step = torch.tensor(traj)[perm], torch.tensor(step)[perm]
    return torch.randn(len(traj), generator=g), torch.randn(len(traj), generator=g), traj, step


@pytest.mark.parametrize("gamma,lam", GAMMA_LAM)
@pytest.mark.parametrize("seed", [0, 1])
def test_step_gae_equals_the_float64_restatement(gamma, lam, seed):
    r, v, traj, step = random_steps(seed)
    adv, ret = step_gae_advantages(r, v, traj, step, gamma, lam)
    ref = step_gae_reference(r, v, traj, step, gamma, lam)
    torch.testing.assert_close(adv, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ret, ref + v.double(), rtol=1e-12, atol=1e-12)


def test_step_gae_episode_ends_and_hand_checked():
    # one trajectory of 3 steps, r = (0, 0.5, 1), V = (0.2, 0.4, 0.6), γ = 0.9, λ = 1:
    # A2 = 1 − 0.6 = 0.4;  A1 = 0.5 + 0.9·0.6 − 0.4 + 0.9·0.4 = 1.0;  A0 = 0 + 0.9·0.4 − 0.2 + 0.9·1.0 = 1.06
    # and a one-step trajectory beside it: A = r − V, whatever the other's values
    r = torch.tensor([1.0, 0.0, 0.5, 2.0])
    v = torch.tensor([0.6, 0.2, 0.4, 1.5])
    traj, step = torch.tensor([7, 7, 7, 9]), torch.tensor([2, 0, 1, 0])
    adv, _ = step_gae_advantages(r, v, traj, step, 0.9, 1.0)
    torch.testing.assert_close(adv, torch.tensor([0.4, 1.06, 1.0, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="step_index"):
        step_gae_advantages(r, v, traj, torch.tensor([0, 0, 1, 0]), 0.9, 1.0)


def test_ppo_targets_step_layout_broadcasts_the_step_advantage_and_regresses_the_first_position():
    r, v_step, traj, step = random_steps(5)
    B, T = len(r), 6
    g = torch.Generator().manual_seed(5)
    values = torch.randn(B, T, generator=g)
    values[:, 0] = v_step
    mask = torch.rand(B, T, generator=g) < 0.8
    cfg = PPOConfig(gamma=0.9, lam=0.95, whiten=False)
    t = ppo_targets(torch.zeros(B), values, mask, cfg, step_rewards=r, trajectory_index=traj, step_index=step)
    ref = step_gae_reference(r, v_step, traj, step, 0.9, 0.95).float()
    torch.testing.assert_close(t.advantages, ref[:, None] * mask.float())
    assert t.value_mask[:, 0].all() and not t.value_mask[:, 1:].any()
    torch.testing.assert_close(t.returns[:, 0], (ref + v_step).float())
    # "rows": every step row its own episode with its (episode) reward: the token estimator per row
    ep = torch.randn(B, generator=g)
    rows = ppo_targets(ep, values, mask, PPOConfig(gamma=0.9, lam=0.95, whiten=False, step_gae="rows"),
                       step_rewards=r, trajectory_index=traj, step_index=step)
    ref_adv, _ = gae_reference(ep, values, mask, 0.9, 0.95)
    torch.testing.assert_close(rows.advantages, ref_adv.float())


# ---- whitening, over every process's rows ------------------------------------------------------------

def test_whitening_is_zero_mean_unit_unbiased_variance_over_valid_tokens():
    rewards, values, mask = random_tokens(6)
    t = ppo_targets(rewards, values, mask, PPOConfig(gamma=0.9, lam=0.9))
    a = t.advantages.double()[mask]
    assert float(a.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(a.var(unbiased=True)) == pytest.approx(1.0, rel=1e-5)
    assert not t.advantages[~mask].any()
    raw, _ = gae_reference(rewards, values, mask, 0.9, 0.9)
    expected = (raw[mask] - raw[mask].mean()) / torch.sqrt(raw[mask].var(unbiased=True) + 1e-8)
    torch.testing.assert_close(a, expected, rtol=1e-6, atol=1e-6)
    # a constant batch whitens to 0, not 0/0
    one = masked_whiten(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool))
    assert not one.any()


def _two_processes(fn_a, fn_b):
    """Run fn_a(batch_sum), fn_b(batch_sum) in two threads whose batch_sum adds the two tensors (an
    all-reduce of two processes); returns both results."""
    barrier, slots, results = threading.Barrier(2), [None, None], [None, None]

    def reducer(rank):
        def batch_sum(t):
            slots[rank] = t.clone()
            barrier.wait()
            out = slots[0] + slots[1]
            barrier.wait()
            return out
        return batch_sum

    threads = [threading.Thread(target=lambda r=r, f=f: results.__setitem__(r, f(reducer(r))))
               for r, f in enumerate((fn_a, fn_b))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def test_whitening_and_explained_variance_span_every_process():
    rewards, values, mask = random_tokens(7, B=8)
    cfg = PPOConfig(gamma=0.95, lam=0.9)
    whole = ppo_targets(rewards, values, mask, cfg)
    a, b = _two_processes(lambda s: ppo_targets(rewards[:3], values[:3], mask[:3], cfg, batch_sum=s),
                          lambda s: ppo_targets(rewards[3:], values[3:], mask[3:], cfg, batch_sum=s))
    torch.testing.assert_close(torch.cat([a.advantages, b.advantages]), whole.advantages, rtol=1e-6, atol=1e-6)
    assert a.stats["critic/explained_variance"] == pytest.approx(whole.stats["critic/explained_variance"])
    assert b.stats["critic/explained_variance"] == pytest.approx(whole.stats["critic/explained_variance"])
    # local whitening would differ (the check above is not vacuous)
    local = ppo_targets(rewards[:3], values[:3], mask[:3], cfg)
    assert not torch.allclose(local.advantages, whole.advantages[:3], atol=1e-3)


def test_explained_variance():
    g = torch.Generator().manual_seed(0)
    ret = torch.randn(4, 5, generator=g)
    mask = torch.ones(4, 5, dtype=torch.bool)
    assert explained_variance(ret, ret, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(ret, float(ret.mean())), ret, mask) == pytest.approx(0.0, abs=1e-12)
    assert explained_variance(-ret, ret, mask) < 0
    assert math.isnan(explained_variance(ret, torch.ones_like(ret), mask))


# ---- the clipped value loss ----------------------------------------------------------------------------

def value_loss_reference(v, old, ret, mask, clip):
    """½ · mean over valid tokens of max((v − R)², (old + clip(v − old, ±ε) − R)²), float64."""
    v, old, ret = v.double(), old.double(), ret.double()
    vc = old + torch.clamp(v - old, -clip, clip)
    per = torch.maximum((v - ret) ** 2, (vc - ret) ** 2)
    return 0.5 * per[mask].mean(), float(((vc - ret) ** 2 > (v - ret) ** 2)[mask].double().mean())


def test_value_loss_equals_the_restatement_and_its_clip_fraction():
    g = torch.Generator().manual_seed(1)
    v, old, ret = (torch.randn(5, 7, generator=g) for _ in range(3))
    mask = torch.rand(5, 7, generator=g) < 0.7
    loss, stats = value_loss(v, old, ret, mask, 0.2, "token-mean")
    ref, frac = value_loss_reference(v, old, ret, mask, 0.2)
    assert float(loss) == pytest.approx(float(ref), rel=1e-6)
    assert stats["critic/value_clip_frac"] == pytest.approx(frac)
    assert 0 < frac < 1
    unclipped, s0 = value_loss(v, old, ret, mask, None, "token-mean")
    assert float(unclipped) == pytest.approx(0.5 * float(((v - ret) ** 2)[mask].mean()), rel=1e-6)
    assert s0["critic/value_clip_frac"] == 0.0


def test_value_loss_gradient_stops_where_the_clipped_term_wins():
    old = torch.zeros(1, 2)
    ret = torch.tensor([[2.0, 0.3]])
    v = torch.tensor([[1.0, 0.25]], requires_grad=True)  # token 0: moved 1.0 > ε away, still short of R
    loss, stats = value_loss(v, old, ret, torch.ones(1, 2, dtype=torch.bool), 0.5, "token-mean")
    loss.backward()
    # token 0: the clipped term (0.5 − 2)² = 2.25 beats (1 − 2)² = 1: constant in v, gradient 0;
    # token 1: unclipped wins, gradient ½ · 2 (v − R) / 2 tokens
    assert v.grad[0, 0] == 0.0
    assert float(v.grad[0, 1]) == pytest.approx(0.5 * 2 * (0.25 - 0.3) / 2)
    assert stats["critic/value_clip_frac"] == 0.5


def test_critic_config_checks():
    assert CriticConfig().resolved_learning_rate(1e-6) == pytest.approx(1e-5)
    assert CriticConfig(learning_rate=3e-4).resolved_learning_rate(1e-6) == 3e-4
    for bad in (dict(trunk="both"), dict(value_clip=0.0), dict(warmup_steps=-1), dict(learning_rate=0),
                dict(trunk="shared", model_path="x"), dict(loss_agg="mean")):
        with pytest.raises(ValueError):
            CriticConfig(**bad)
    for bad in (dict(gamma=1.5), dict(lam=-0.1), dict(step_gae="tokens"), dict(whiten="yes")):
        with pytest.raises(ValueError):
            PPOConfig(**bad)


# ---- the registry entry ----------------------------------------------------------------------------------

def test_registry_ppo_is_the_core_call_on_shaped_rewards():
    rewards, values, mask = random_tokens(8)
    assert get_algorithm("ppo").needs_values and not get_algorithm("grpo").needs_values
    cfg = AlgorithmConfig(name="ppo", ppo=PPOConfig(gamma=0.9, lam=0.8))
    inputs = AdvantageInputs(rewards, torch.arange(len(rewards)), mask, values=values)
    adv, stats = compute_token_advantages(inputs, cfg)
    direct = ppo_targets(rewards, values, mask, cfg.ppo)
    assert torch.equal(adv, direct.advantages)
    targets = compute_ppo_targets(inputs, cfg)
    assert torch.equal(targets.advantages, adv) and torch.equal(targets.returns, direct.returns)
    assert "critic/explained_variance" in stats
    with pytest.raises(ValueError, match="critic's values"):
        compute_token_advantages(AdvantageInputs(rewards, torch.arange(len(rewards)), mask), cfg)
    with pytest.raises(ValueError, match="no critic"):
        compute_ppo_targets(inputs, AlgorithmConfig(name="grpo"))
    # reward shaping (DAPO's overlong penalty) reaches the returns
    shaped_cfg = AlgorithmConfig(name="ppo", overlong_buffer=4, max_response_length=9, ppo=PPOConfig(whiten=False))
    t = compute_ppo_targets(inputs, shaped_cfg)
    plain = compute_ppo_targets(inputs, AlgorithmConfig(name="ppo", ppo=PPOConfig(whiten=False)))
    assert not torch.equal(t.returns, plain.returns)
