"""Checks that need veRL 0.9.1 itself. They run in the separate venv built by scripts/verl-venv.sh
(veRL pins transformers < 5.11, the project's TRL stack needs 5.23); tests/test_verl_venv.py
runs this file there. In the main venv (no veRL) the whole module is skipped."""

from __future__ import annotations

import os

import pytest

os.environ["VERL_USE_EXTERNAL_PLUGINS"] = "resrl"    # load only our entry point, by its name
verl = pytest.importorskip("verl", reason="veRL is installed only in .cache/verl-venv (scripts/verl-venv.sh)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

from resrl.core import AdvantageInputs, AlgorithmConfig, ResRLConfig, compute_token_advantages  # noqa: E402
from resrl.engines.verl.layouts import pad_responses  # noqa: E402
from resrl.engines.verl.weights import RankWeightAccumulator  # noqa: E402

NAMES = {"resrl": "resrl", "w_reinforce": "w-reinforce", "psr": "psr", "nsr": "nsr",
         "passk": "passk"}  # veRL name -> resrl.core


def test_entry_point_is_discovered_by_import_verl():
    import sys
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="verl.plugins") if ep.name == "resrl"]
    assert len(eps) == 1 and eps[0].value == "resrl.engines.verl.plugin"
    for name in NAMES:
        fn = core_algos.get_adv_estimator_fn(name)
        assert fn.__module__ == "resrl.engines.verl.estimators"
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY       # trainer.v1.trainer_mode=resrl

    assert TRAINER_REGISTRY["resrl"].__module__ == "resrl.engines.verl.trainer"
    # nothing of the TRL stack came along (not installed here; the plugin must not need it)
    assert not [m for m in sys.modules if m == "trl" or m.startswith(("trl.", "resrl.train", "resrl.engines.trl"))]


def batch(seed=0, n_groups=5, G=4, T=9, d=6):
    g = torch.Generator().manual_seed(seed)
    B = n_groups * G
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    rewards = torch.randint(0, 2, (B,), generator=g).float()
    rewards[:G] = 1.0                                           # one group with all-equal rewards
    token_level_rewards = torch.zeros(B, T)
    token_level_rewards[torch.arange(B), lengths - 1] = rewards  # veRL: the score on the last token
    uids = np.array([f"prompt-{i // G}" for i in range(B)], dtype=object)
    hidden = torch.randn(B, T, d, generator=g)
    return token_level_rewards, mask, uids, rewards, hidden


def core_reference(name, rewards, mask, uids, hidden=None, resrl_cfg=None, **cfg):
    _, gid = np.unique(uids.astype(str), return_inverse=True)
    inputs = AdvantageInputs(rewards, torch.as_tensor(gid), mask.bool(), hidden)
    config = AlgorithmConfig(name=NAMES[name], resrl=resrl_cfg or ResRLConfig(), **cfg)
    return compute_token_advantages(inputs, config)[0]


def rank_multiplier(rewards, mask, uids, hidden, cfg):
    acc = RankWeightAccumulator(cfg)
    acc.add(range(len(uids)), [hidden[i, :int(mask[i].sum())] for i in range(len(uids))], rewards, list(uids))
    return acc.finish(group_size=4)


@pytest.mark.parametrize("name", ["w_reinforce", "psr", "nsr", "passk"])
def test_registered_estimator_equals_resrl_core_through_verl_compute_advantage(name):
    """veRL's own `compute_advantage` (the legacy trainer's and the v1 trainer's path for every
    estimator but grpo) calls the registered function; the result equals resrl.core."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage

    tlr, mask, uids, rewards, _ = batch()
    data = DataProto.from_dict(tensors={"token_level_rewards": tlr, "response_mask": mask},
                               non_tensors={"uid": uids})
    algo = OmegaConf.create({"adv_estimator": name, "norm_adv_by_std_in_grpo": True,
                             "resrl": {"wreinforce_lambda": 0.25, "passk_k": 2}})
    out = compute_advantage(data, adv_estimator=name, config=algo)
    extra = {"wreinforce_lambda": 0.25} if name == "w_reinforce" else {"passk_k": 2} if name == "passk" else {}
    want = core_reference(name, rewards, mask, uids, **extra)
    assert torch.equal(out.batch["advantages"], want)
    assert torch.equal(out.batch["returns"], want)


def test_resrl_estimator_equals_resrl_core_with_the_rank_multiplier():
    tlr, mask, uids, rewards, hidden = batch(seed=1)
    cfg = ResRLConfig(rank=3, max_pos_tokens=8, boundary_tokens=1)
    rw = rank_multiplier(rewards, mask, uids, hidden, cfg)
    fn = core_algos.get_adv_estimator_fn("resrl")
    adv, ret = fn(token_level_rewards=tlr, response_mask=mask, index=uids, config=None,
                  resrl_multiplier=rw.multiplier, resrl_positive=rw.positive)
    h, _ = pad_responses([hidden[i, :int(mask[i].sum())] for i in range(len(uids))], width=mask.shape[1])
    want = core_reference("resrl", rewards, mask, uids, hidden=h, resrl_cfg=cfg)
    assert torch.equal(adv, want) and torch.equal(ret, want)
    # veRL pads responses to its own width; the rank's multiplier is as wide as its longest response
    wide = lambda x: torch.nn.functional.pad(x, (0, 3))  # noqa: E731
    adv_w, _ = fn(token_level_rewards=wide(tlr), response_mask=wide(mask), index=uids, config=None,
                  resrl_multiplier=rw.multiplier, resrl_positive=rw.positive)
    assert torch.equal(adv_w, wide(want))
    with pytest.raises(ValueError, match="per-token weights"):
        fn(token_level_rewards=tlr, response_mask=mask, index=uids, config=None)
    with pytest.raises(ValueError, match="another positive/negative split"):
        fn(token_level_rewards=-tlr, response_mask=mask, index=uids, config=None,
           resrl_multiplier=rw.multiplier, resrl_positive=rw.positive)


def test_hydra_overrides_select_the_estimators():
    from hydra import compose, initialize_config_dir
    from verl.trainer.config import AlgoConfig
    from verl.utils.config import omega_conf_to_dataclass

    config_dir = os.path.dirname(__import__("verl.trainer.config", fromlist=["x"]).__file__)
    for name in NAMES:
        overrides = [f"algorithm.adv_estimator={name}", "trainer.balance_batch=False",
                     "actor_rollout_ref.rollout.n=4", "algorithm.use_kl_in_reward=False"]
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=overrides)
        assert cfg.algorithm.adv_estimator == name and cfg.trainer.balance_batch is False
        assert core_algos.get_adv_estimator_fn(cfg.algorithm.adv_estimator).__module__ == "resrl.engines.verl.estimators"
        algo = omega_conf_to_dataclass(cfg.algorithm)               # veRL's typed config accepts the name
        assert isinstance(algo, AlgoConfig) and algo.adv_estimator == name
    # options: `+algorithm.resrl.<name>=...` parse and reach the estimator through the DictConfig the
    # trainer passes; veRL's AlgoConfig dataclass has no such field (documented in docs/verl.md)
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=["algorithm.adv_estimator=w_reinforce",
                                                            "+algorithm.resrl.wreinforce_lambda=0.3"])
    tlr, mask, uids, rewards, _ = batch()
    adv, _ = core_algos.get_adv_estimator_fn("w_reinforce")(token_level_rewards=tlr, response_mask=mask,
                                                             index=uids, config=cfg.algorithm)
    assert torch.equal(adv, core_reference("w_reinforce", rewards, mask, uids, wreinforce_lambda=0.3))
    with pytest.raises(Exception, match="resrl"):
        omega_conf_to_dataclass(cfg.algorithm)


def test_verl_balance_batch_splits_groups_the_plugin_refuses_and_group_balance_keeps_them():
    """veRL's own balance (`_balance_batch`: Karmarkar-Karp over row workloads, equal row counts)
    reorders a GRPO batch so that ranks hold partial groups; the rank check refuses that naming
    trainer.balance_batch. `group_preserving_partitions` gives whole groups, and each rank's
    weights then equal resrl.core on that rank's groups."""
    from verl.utils.seqlen_balancing import calculate_workload, get_seqlen_balanced_partitions

    from resrl.engines.verl.layouts import SplitGroupError, check_whole_groups, group_preserving_partitions

    g = torch.Generator().manual_seed(3)
    n_groups, G, k = 16, 4, 4
    seq = torch.randint(20, 400, (n_groups * G,), generator=g)
    uids = [f"p{i // G}" for i in range(n_groups * G)]
    parts = get_seqlen_balanced_partitions(calculate_workload(seq), k_partitions=k, equal_size=True)
    with pytest.raises(SplitGroupError, match=r"trainer\.balance_batch"):
        for r, part in enumerate(parts):
            check_whole_groups([uids[i] for i in part], G, rank=r)
    ours = group_preserving_partitions(seq.tolist(), uids, k)
    tlr, mask, _, rewards, hidden = batch(seed=4, n_groups=n_groups, G=G)
    uid_arr = np.array(uids, dtype=object)
    cfg = ResRLConfig(rank=2)
    for part in ours:
        check_whole_groups([uids[i] for i in part], G)
        idx = torch.tensor(part)
        rw = rank_multiplier(rewards[idx], mask[idx], uid_arr[part], hidden[idx], cfg)
        adv, _ = core_algos.get_adv_estimator_fn("resrl")(
            token_level_rewards=tlr[idx], response_mask=mask[idx], index=uid_arr[part], config=None,
            resrl_multiplier=rw.multiplier, resrl_positive=rw.positive)
        h, _ = pad_responses([hidden[i, :int(mask[i].sum())] for i in part], width=mask.shape[1])
        want = core_reference("resrl", rewards[idx], mask[idx], uid_arr[part], hidden=h, resrl_cfg=cfg)
        assert torch.equal(adv, want)


def test_refused_algorithms_raise_their_reason_through_verl():
    """nthr, flowrl and the step-level algorithms are registered as estimators that say why the
    plugin cannot run them (issue 24), not left to veRL's "unknown estimator"."""
    from resrl.engines.verl.algorithms import verl_catalog

    tlr, mask, uids, _, _ = batch()
    refused = [e for e in verl_catalog().values() if e.kind == "refused"]
    assert {e.name for e in refused} >= {"nthr", "flowrl"}
    for entry in refused:
        fn = core_algos.get_adv_estimator_fn(entry.verl_name)
        if fn.__module__ != "resrl.engines.verl.estimators":
            continue                                    # veRL has an estimator of that name: left alone
        with pytest.raises(ValueError, match="the resrl veRL plugin does not run"):
            fn(token_level_rewards=tlr, response_mask=mask, index=uids, config=None)
    assert "head" in verl_catalog()["nthr"].how


def test_resrl_gae_and_value_loss_equal_verls_own():
    """PPO: resrl.core.gae (the TRL engine's GAE, whitening and returns) and resrl.core.value (the clipped
    value loss) against veRL's compute_gae_advantage_return / compute_value_loss, on masks with holes
    (a multi-turn trajectory's environment tokens, which veRL's GAE skips as resrl's does)."""
    from resrl.core.gae import PPOConfig, ppo_targets
    from resrl.core.value import value_loss

    g = torch.Generator().manual_seed(0)
    B, T = 12, 10
    mask = (torch.rand(B, T, generator=g) < 0.7).float()
    mask[:, 0] = 1.0
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    mask = mask * (torch.arange(T)[None] < lengths[:, None]).float()    # right padding after holes
    last = (torch.arange(T)[None] * mask).argmax(dim=1)
    rewards = torch.randn(B, generator=g)
    token_level_rewards = torch.zeros(B, T)
    token_level_rewards[torch.arange(B), last] = rewards                 # veRL: the score on the last token
    values = torch.randn(B, T, generator=g)
    for gamma, lam in ((1.0, 1.0), (0.99, 0.95), (0.9, 0.0)):
        adv, ret = core_algos.compute_gae_advantage_return(token_level_rewards, values, mask, gamma, lam)
        ours = ppo_targets(rewards, values, mask.bool(), PPOConfig(gamma=gamma, lam=lam))
        m = mask.bool()
        torch.testing.assert_close(ours.advantages[m], adv[m], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours.returns[m], ret[m], atol=1e-5, rtol=1e-5)
    vpreds = values + 0.8 * torch.randn(B, T, generator=g)
    vf, clipfrac = core_algos.compute_value_loss(vpreds, ret, values, mask, cliprange_value=0.5,
                                                 loss_agg_mode="token-mean")
    loss, stats = value_loss(vpreds, values, ret, mask.bool(), 0.5, "token-mean")
    assert float(loss) == pytest.approx(float(vf), rel=1e-5)
    assert stats["critic/value_clip_frac"] == pytest.approx(float(clipfrac), rel=1e-5)
    assert 0 < float(clipfrac) < 1


# ---- policy losses: veRL's own against resrl.core's, and the one the plugin registers ----------------------

def _actor_config(loss_mode="vanilla", **kwargs):
    from verl.workers.config import ActorConfig, PolicyLossConfig

    policy = {k: kwargs.pop(k) for k in list(kwargs) if k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                                                               "kl_cov_ratio", "ppo_kl_coef")}
    return ActorConfig(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, use_dynamic_bsz=False,
                       rollout_n=1, policy_loss=PolicyLossConfig(loss_mode=loss_mode, **policy), **kwargs)


def _loss_batch(seed=0, B=6, T=7):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 3, 5, 1, 6, 4])
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    old = -torch.rand(B, T, generator=g) * 2 - 0.1
    logp = old + 0.3 * torch.randn(B, T, generator=g)
    adv = torch.tensor([1.2, -0.8, 0.4, -1.5, 0.9, -0.3])[:, None] * (0.5 + torch.rand(B, T, generator=g))
    return old.double(), logp.double(), (adv * mask).double(), mask.double()


# (veRL loss_mode, its actor config, resrl LossConfig of the same loss, the aggregation)
PEERS = {
    "vanilla": (dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0),
                dict(clip_eps_low=0.2, clip_eps_high=0.28, dual_clip_c=3.0), "token-mean"),
    "cispo": (dict(clip_ratio_low=0.2, clip_ratio_high=0.28), dict(policy_loss="cispo", clip_eps_low=0.2,
                                                                    clip_eps_high=0.28), "token-mean"),
    "sapo": (dict(tau_pos=1.5, tau_neg=2.0), dict(policy_loss="sapo", sapo_temperature_pos=1.5,
                                                  sapo_temperature_neg=2.0), "seq-mean-token-mean"),
    "kl_cov": (dict(kl_cov_ratio=0.2, ppo_kl_coef=0.5), dict(policy_loss="kl-cov", kl_cov_ratio=0.2,
                                                              kl_cov_coef=0.5), "seq-mean-token-sum"),
    # ratio 1: every candidate of the covariance band is detached (veRL draws them at random otherwise)
    "clip_cov": (dict(clip_cov_ratio=1.0, clip_cov_lb=-0.05, clip_cov_ub=0.5, clip_ratio_low=0.2, clip_ratio_high=0.2),
                 dict(policy_loss="clip-cov", clip_cov_ratio=1.0, clip_cov_lb=-0.05, clip_cov_ub=0.5), "token-mean"),
}


@pytest.mark.parametrize("mode", sorted(PEERS))
def test_verls_own_losses_equal_resrl_core(mode):
    """veRL's core_algos losses (the peer implementation) and resrl.core's give the same loss and gradient
    on token advantages that vary inside a response (ResRL's weights)."""
    from resrl.core.loss import LossConfig, policy_loss

    actor_kwargs, resrl_kwargs, agg = PEERS[mode]
    old, logp, adv, mask = _loss_batch()
    x = logp.clone().requires_grad_(True)
    theirs, their_metrics = core_algos.get_policy_loss_fn(mode)(old, x, adv, mask, loss_agg_mode=agg,
                                                                config=_actor_config(mode, **actor_kwargs))
    theirs.backward()
    y = logp.clone().requires_grad_(True)
    ours, metrics = policy_loss(y, old, adv, mask, LossConfig(agg=agg, **resrl_kwargs))
    ours.backward()
    # (veRL's seq-mean-token-mean divides by the token count + 1e-8: relative differences of ~1e-8)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-7, abs=1e-12)
    assert torch.allclose(x.grad, y.grad, rtol=1e-7, atol=1e-12)
    if mode in ("clip_cov", "kl_cov"):  # the situation: tokens were selected by their covariance
        assert metrics["cov_frac"] > 0


def test_plugin_registers_the_losses_verl_lacks():
    """VESPO (TRL 1.16's, not in veRL 0.9.1) is the plugin's: resrl.core's term, veRL's agg_loss; veRL's
    own names are left to veRL; FlowRL's loss is refused (not registered)."""
    from resrl.core.loss import LossConfig, policy_loss
    from resrl.engines.verl.losses import verl_losses

    catalog = verl_losses()
    assert {e.verl_name for e in catalog.values() if e.kind == "plugin"} == {"vespo"}
    for entry in catalog.values():
        fn = core_algos.POLICY_LOSS_REGISTRY.get(entry.verl_name)
        if entry.kind == "plugin":
            assert fn.__module__ == "resrl.engines.verl.estimators"
        elif entry.kind == "verl":
            assert fn.__module__ == "verl.trainer.ppo.core_algos"
        else:
            assert fn is None
    old, logp, adv, mask = _loss_batch()
    rollout = 0.8 + 0.4 * torch.rand(*mask.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for agg in ("token-mean", "seq-mean-token-mean"):
        x = logp.clone().requires_grad_(True)
        theirs, metrics = core_algos.get_policy_loss_fn("vespo")(old, x, adv, mask, loss_agg_mode=agg,
                                                                 config=_actor_config("vanilla"),
                                                                 rollout_is_weights=rollout)
        theirs.backward()
        y = logp.clone().requires_grad_(True)
        ours, _ = policy_loss(y, old, adv, mask, LossConfig(policy_loss="vespo", agg=agg), importance_weights=rollout)
        ours.backward()
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-7) and torch.allclose(x.grad, y.grad, rtol=1e-7)
        assert "actor/vespo_phi_mean" in metrics
