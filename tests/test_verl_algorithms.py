"""The veRL plugin offers what the core registry offers (issue 24): every registry algorithm is a
plugin estimator, veRL's own, or refused with its reason; the estimator list comes from the
registry; the reward-only estimators equal resrl.core. Runs in the main venv: the registration
code of estimators.py is imported against a stand-in for veRL's `core_algos` registry (the real
veRL runs in tests/verl_venv, built by scripts/verl-venv.sh)."""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from resrl.core import ALGORITHMS, AdvantageInputs, AlgorithmConfig, compute_token_advantages
from resrl.core import advantages as A
from resrl.core.registry import register_algorithm
from resrl.engines.verl.algorithms import (estimator_advantages, plugin_estimators, verl_catalog)


def batch(seed=0, n_groups=5, G=4, T=7):
    g = torch.Generator().manual_seed(seed)
    B = n_groups * G
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    rewards = torch.randint(0, 2, (B,), generator=g).float()
    tlr = torch.zeros(B, T)
    tlr[torch.arange(B), lengths - 1] = rewards                 # veRL: the score on the last token
    uids = np.array([f"prompt-{i // G}" for i in range(B)], dtype=object)
    return tlr, mask, uids, rewards


def test_every_registry_algorithm_is_offered_or_refused_with_a_reason():
    cat = verl_catalog()
    assert set(cat) == set(ALGORITHMS)
    kinds = {name: e.kind for name, e in cat.items()}
    assert kinds == {"grpo": "verl", "drgrpo": "verl", "dapo": "verl", "psr": "estimator", "nsr": "estimator",
                     "w-reinforce": "estimator", "passk": "estimator", "resrl": "trainer", "nthr": "refused",
                     "flowrl": "refused", "gigpo": "refused", "gigpo-resrl": "refused", "empg": "refused",
                     "ppo": "verl"}
    assert "adv_estimator=gae" in cat["ppo"].how and "critic" in cat["ppo"].how
    assert "head" in cat["nthr"].how and "resrl train algorithm.name=nthr" in cat["nthr"].how
    assert "loss" in cat["flowrl"].how and "step layout" in cat["gigpo"].how
    assert plugin_estimators() == ("psr", "nsr", "w_reinforce", "resrl", "passk")


def test_a_reward_only_algorithm_added_to_the_registry_becomes_an_estimator():
    @register_algorithm("test-half-grpo")
    def half(inputs, cfg):
        adv = A.grpo_advantages(inputs.rewards, inputs.group_index) * 0.5
        return adv.float()[:, None] * inputs.response_mask.float(), {}

    try:
        assert verl_catalog()["test-half-grpo"].kind == "estimator"
        assert "test_half_grpo" in plugin_estimators()
        tlr, mask, uids, rewards = batch()
        adv, ret = estimator_advantages("test-half-grpo", tlr, mask, uids)
        _, gid = np.unique(uids.astype(str), return_inverse=True)
        torch.testing.assert_close(adv, 0.5 * A.grpo_advantages(rewards, torch.as_tensor(gid))[:, None] * mask)
    finally:
        del ALGORITHMS["test-half-grpo"]


@pytest.mark.parametrize("name", ["psr", "nsr", "w-reinforce", "passk"])
def test_reward_only_estimators_equal_resrl_core(name):
    tlr, mask, uids, rewards = batch(1)
    options = {"resrl": {"wreinforce_lambda": 0.25, "passk_k": 2, "rank": 8}}     # ResRLConfig keys ignored here
    adv, ret = estimator_advantages(name, tlr, mask, uids, options)
    _, gid = np.unique(uids.astype(str), return_inverse=True)
    gid = torch.as_tensor(gid)
    want, _ = compute_token_advantages(AdvantageInputs(rewards, gid, mask),
                                       AlgorithmConfig(name=name, wreinforce_lambda=0.25, passk_k=2))
    assert torch.equal(adv, want) and torch.equal(ret, want)
    formula = {"psr": lambda: A.psr_advantages(rewards), "nsr": lambda: A.nsr_advantages(rewards),
               "w-reinforce": lambda: A.wreinforce_advantages(rewards, 0.25),
               "passk": lambda: A.passk_advantages(rewards, gid, 2)}[name]()
    torch.testing.assert_close(adv, formula.float()[:, None] * mask)


def test_estimator_options_are_checked():
    tlr, mask, uids, _ = batch(2)
    with pytest.raises(ValueError, match="passk_k = 4 must be < the group size"):
        estimator_advantages("passk", tlr, mask, uids, {"resrl": {"passk_k": 4}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['lamda'\]"):
        estimator_advantages("w-reinforce", tlr, mask, uids, {"resrl": {"lamda": 0.3}})
    with pytest.raises(ValueError, match="not a reward-only algorithm"):
        estimator_advantages("nthr", tlr, mask, uids)


@pytest.fixture
def fake_verl(monkeypatch):
    """A stand-in for veRL's advantage-estimator registry, enough to import estimators.py."""
    registry = {"grpo": object()}

    def register_adv_est(name):
        def deco(fn):
            if name in registry and registry[name] is not fn:
                raise ValueError(f"{name} registered twice")
            registry[name] = fn
            return fn
        return deco

    losses = {name: object() for name in ("vanilla", "cispo", "sapo", "clip_cov", "kl_cov", "gspo")}

    def register_policy_loss(name):
        def deco(fn):
            if name in losses:
                raise ValueError(f"policy loss {name} registered twice")
            losses[name] = fn
            return fn
        return deco

    core_algos = types.ModuleType("verl.trainer.ppo.core_algos")
    core_algos.register_adv_est, core_algos.ADV_ESTIMATOR_REGISTRY = register_adv_est, registry
    core_algos.register_policy_loss, core_algos.POLICY_LOSS_REGISTRY = register_policy_loss, losses
    registry["__losses__"] = losses
    ppo = types.ModuleType("verl.trainer.ppo")
    ppo.core_algos = core_algos
    for name, mod in (("verl", types.ModuleType("verl")), ("verl.trainer", types.ModuleType("verl.trainer")),
                      ("verl.trainer.ppo", ppo), ("verl.trainer.ppo.core_algos", core_algos)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "resrl.engines.verl.estimators", raising=False)
    module = importlib.import_module("resrl.engines.verl.estimators")
    yield module, registry
    sys.modules.pop("resrl.engines.verl.estimators", None)


def test_estimators_module_registers_the_catalog(fake_verl):
    module, registry = fake_verl
    assert module.ESTIMATORS == plugin_estimators()
    for name in ("psr", "nsr", "w_reinforce", "passk", "resrl"):
        assert registry[name].__module__ == "resrl.engines.verl.estimators"
    tlr, mask, uids, rewards = batch(3)
    adv, _ = registry["passk"](token_level_rewards=tlr, response_mask=mask, index=uids, config={"resrl": {"passk_k": 3}})
    want, _ = estimator_advantages("passk", tlr, mask, uids, {"resrl": {"passk_k": 3}})
    assert torch.equal(adv, want)
    for refused in ("nthr", "flowrl", "gigpo", "gigpo_resrl", "empg"):
        with pytest.raises(ValueError, match=f"adv_estimator={refused}: the resrl veRL plugin does not run"):
            registry[refused](token_level_rewards=tlr, response_mask=mask, index=uids, config=None)
    assert not callable(registry["grpo"])          # veRL's own names are left alone
    losses = registry["__losses__"]
    assert losses["vespo"].__module__ == "resrl.engines.verl.estimators"  # the loss veRL lacks
    assert not any(callable(losses[n]) for n in ("vanilla", "cispo", "sapo", "clip_cov", "kl_cov"))
    src = Path(module.__file__).read_text()
    assert not re.search(r"ESTIMATORS\s*=\s*\(", src)      # no hand-written list
    assert not re.search(r'register_adv_est\("(psr|nsr|w_reinforce|passk)"\)', src)


def test_the_docs_table_is_the_catalog():
    text = (Path(__file__).resolve().parents[1] / "docs" / "verl.md").read_text()
    text = text[:text.index("## Policy losses")]  # the algorithms' table (the losses' has its own test)
    rows = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|", text, flags=re.M)
    kind_words = {"veRL's own": "verl", "plugin estimator": "estimator", "plugin estimator + trainer mode": "trainer",
                  "refused": "refused"}
    documented = {}
    for names, kind in rows:
        for name in re.findall(r"`([^`]+)`", names):
            documented[name] = kind_words[kind.strip()]
    assert documented == {n: e.kind for n, e in verl_catalog().items()}


def test_resrl_config_from_refuses_what_the_rank_weights_cannot_do():
    from resrl.engines.verl.weights import resrl_config_from

    for key, value in (("preset", "authors-code"), ("grouping", "micro-batch"), ("positive", "reward")):
        with pytest.raises(ValueError, match=f"algorithm.resrl.{key}='{value}' is not supported by the veRL plugin"):
            resrl_config_from({"resrl": {key: value}})
    cfg = resrl_config_from({"resrl": {"quantile_low": 0.2, "quantile_high": 0.8, "no_contrast_weight": "midpoint",
                                       "svd": "pca_lowrank", "min_pos_tokens": 4, "passk_k": 2}})
    assert cfg.svd == "pca_lowrank" and cfg.min_pos_tokens == 4


def test_every_policy_loss_is_classified_for_verl():
    """Each loss of resrl.core's registry: veRL's own (its loss_mode), registered by the plugin (a term
    veRL lacks), or refused with the reason; the plugin's per-token matrix is resrl.core's."""
    import torch

    from resrl.core.loss import POLICY_LOSSES, SURROGATES, LossConfig, token_policy_loss
    from resrl.engines.verl.losses import plugin_token_losses, verl_losses

    catalog = verl_losses()
    assert list(catalog) == list(POLICY_LOSSES)
    kinds = {name: e.kind for name, e in catalog.items()}
    assert kinds["clipped-surrogate"] == kinds["cispo"] == kinds["sapo"] == "verl"
    assert kinds["clip-cov"] == kinds["kl-cov"] == "verl" and kinds["vespo"] == "plugin"
    assert kinds["flowrl"] == "refused" and "log Z" in catalog["flowrl"].how
    assert all(kinds[n] != "refused" for n in SURROGATES)
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 4, generator=g)
    logp = old + 0.1 * torch.randn(3, 4, generator=g)
    adv, mask = torch.randn(3, 4, generator=g), torch.ones(3, 4)
    pg, metrics = plugin_token_losses("vespo", old, logp, adv, mask, 0.2, 0.28)
    ref, _, _ = token_policy_loss(logp, old, adv, mask, LossConfig(policy_loss="vespo"))
    assert torch.equal(pg, ref) and "actor/vespo_phi_mean" in metrics
    with pytest.raises(ValueError, match="not a loss the plugin registers"):
        plugin_token_losses("cispo", old, logp, adv, mask, 0.2, 0.2)


def test_the_docs_loss_table_is_the_catalog():
    from resrl.engines.verl.losses import verl_losses

    text = (Path(__file__).resolve().parents[1] / "docs" / "verl.md").read_text()
    text = text[text.index("## Policy losses"):text.index("## Details")]
    rows = re.findall(r"^\| `([^`|]+)` \| ([^|]+) \|", text, flags=re.M)
    kinds = {"veRL's own": "verl", "plugin loss": "plugin", "refused": "refused"}
    assert {name: kinds[kind.strip()] for name, kind in rows} == {n: e.kind for n, e in verl_losses().items()}
