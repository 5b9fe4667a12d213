"""Which `resrl.core` algorithm the veRL plugin offers, and how: derived from the core registry.

Every name of `resrl.core.registry.ALGORITHMS` gets one entry (`verl_catalog()`), decided by what
its registry spec needs, so an algorithm added to the registry is classified here without an edit:

    estimator  reward-only algorithms (no hidden states, no head sketch, the clipped-surrogate loss,
               no step layout, no dynamic sampling or reward shaping of their own): the plugin
               registers `algorithm.adv_estimator=<name with - as _>`, computed by
               `resrl.core.compute_token_advantages` on the sequence rewards (`estimator_advantages`)
    trainer    resrl: the estimator plus the `trainer.v1.trainer_mode=resrl` trainer mode, whose
               old-log-prob pass computes the weights on each rank (trainer.py, worker.py)
    verl       veRL has the algorithm itself (grpo, drgrpo, dapo): the Hydra overrides to use
    refused    what the plugin cannot run, with the reason; the plugin registers an estimator of
               that name that raises it (unless veRL has one of that name)

This module imports no veRL (the main venv tests it); `estimators.py` registers the entries.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

from ...core.registry import ALGORITHMS, AdvantageInputs, AlgorithmConfig, AlgorithmSpec, compute_token_advantages
from ...core.resrl_config import ResRLConfig

KINDS = ("estimator", "trainer", "verl", "refused")

# algorithms veRL runs itself: the overrides that give them
VERL_OWN = {
    "grpo": "algorithm.adv_estimator=grpo (veRL's own)",
    "drgrpo": "algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=False "
              "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm (veRL's own Dr.GRPO settings)",
    "dapo": "veRL's DAPO recipe (recipe/dapo: clip-higher 0.2/0.28, token-mean, dynamic sampling with "
            "algorithm.filter_groups, the overlong buffer) with algorithm.adv_estimator=grpo",
    "ppo": "algorithm.adv_estimator=gae with veRL's own critic and GAE (critic.model.path, critic.optim.lr, "
           "critic.cliprange_value, algorithm.gamma / algorithm.lam, trainer.critic_warmup): veRL's critic worker "
           "trains the value model; resrl's critic (resrl.engines.trl.critic) is the TRL engine's",
}

# reasons that need words beyond what the spec says
REASONS = {
    "nthr": "NTHR reads the output head's input and the softmax of every response token (the head sketch, or "
            "its exact probabilities on V*ₓ); the plugin's old-log-prob capture records the penultimate "
            "decoder layer only (capture.py). Use the TRL engine: resrl train algorithm.name=nthr",
    "flowrl": "FlowRL is a loss of its own (trajectory balance with a learned log Z(c) head trained with the "
              "policy), not an advantage; veRL's actor loss is its own. Use the TRL engine: resrl train "
              "algorithm.name=flowrl",
}


@dataclass(frozen=True)
class VerlEntry:
    name: str                  # the resrl.core registry name
    kind: str                  # one of KINDS
    verl_name: str             # the algorithm.adv_estimator value (registry name with - as _)
    how: str                   # the Hydra overrides (estimator, trainer, verl) or the reason (refused)


def _classify(name: str, spec: AlgorithmSpec) -> VerlEntry:
    verl_name = name.replace("-", "_")
    if name in VERL_OWN:
        return VerlEntry(name, "verl", verl_name, VERL_OWN[name])
    if name == "resrl":
        return VerlEntry(name, "trainer", verl_name,
                         "algorithm.adv_estimator=resrl trainer.v1.trainer_mode=resrl (+algorithm.resrl.<ResRLConfig key>)")
    if name in REASONS:
        return VerlEntry(name, "refused", verl_name, REASONS[name])
    if spec.step_level:
        return VerlEntry(name, "refused", verl_name,
                         f"{name} needs the step layout (one row per environment step, trajectory and anchor tags), "
                         "which veRL's single-turn batches do not carry; use resrl train with env.layout: step")
    if spec.needs_head:
        return VerlEntry(name, "refused", verl_name,
                         f"{name} reads the head sketch, which the plugin's old-log-prob capture does not record; "
                         "use the TRL engine (resrl train)")
    if spec.needs_hidden:
        return VerlEntry(name, "refused", verl_name,
                         f"{name} reads hidden states; the plugin's capture feeds the resrl trainer mode only")
    if spec.policy_loss != "clipped-surrogate" or spec.needs_log_z or spec.needs_reference:
        return VerlEntry(name, "refused", verl_name,
                         f"{name} needs its own policy loss ({spec.policy_loss}); veRL's actor loss is its own")
    if spec.dynamic_sampling or spec.reward_defaults:
        return VerlEntry(name, "refused", verl_name,
                         f"{name} needs dynamic sampling or reward shaping of its own, which an advantage "
                         "estimator cannot do; set veRL's own keys and use the estimator of its advantage")
    return VerlEntry(name, "estimator", verl_name,
                     f"algorithm.adv_estimator={verl_name} (+algorithm.resrl.<AlgorithmConfig key>)")


def verl_catalog() -> dict[str, VerlEntry]:
    """Every registry algorithm -> its entry (module docstring), in registry order."""
    return {name: _classify(name, spec) for name, spec in ALGORITHMS.items()}


def plugin_estimators() -> tuple[str, ...]:
    """The `algorithm.adv_estimator` names the plugin computes (estimator and trainer kinds)."""
    return tuple(e.verl_name for e in verl_catalog().values() if e.kind in ("estimator", "trainer"))


# -- the reward-only estimators ---------------------------------------------------------------------

ALGORITHM_KEYS = {f.name for f in fields(AlgorithmConfig)
                   if f.name not in ("name", "resrl", "flowrl", "nthr", "gigpo", "empg", "ppo")}


def _options(config) -> dict:
    """`algorithm.resrl` of veRL's algorithm config (DictConfig, AlgoConfig or dict) as a dict."""
    if config is None:
        return {}
    sub = config.get("resrl", None) if hasattr(config, "get") else getattr(config, "resrl", None)
    if sub is None:
        return {}
    return dict(sub.items()) if hasattr(sub, "items") else dict(sub)


def algorithm_config_from(name: str, config) -> AlgorithmConfig:
    """AlgorithmConfig for registry algorithm `name` from `+algorithm.resrl.<key>=` options: the keys
    are AlgorithmConfig fields (wreinforce_lambda, correct_threshold, passk_k, ...); ResRLConfig
    keys (read by the resrl trainer mode) are ignored here; any other key is an error naming it."""
    items = _options(config)
    unknown = sorted(set(items) - ALGORITHM_KEYS - set(ResRLConfig.field_names()))
    if unknown:
        raise ValueError(f"algorithm.resrl: unknown key(s) {unknown}; allowed {sorted(ALGORITHM_KEYS)} "
                         "(and ResRLConfig's keys for adv_estimator=resrl)")
    kwargs = {k: v for k, v in items.items() if k in ALGORITHM_KEYS and v is not None}
    return AlgorithmConfig(name=name, **kwargs)


def group_ids(index, device=None) -> Tensor:
    """veRL's `uid` array (any hashable ids, numpy object array or list) -> (B,) int64 dense ids."""
    if index is None:
        raise ValueError("this estimator needs the group ids (veRL's non_tensor_batch['uid'])")
    if isinstance(index, Tensor):
        return index.to(device=device, dtype=torch.long)
    _, inv = np.unique(np.asarray([str(u) for u in index], dtype=object).astype(str), return_inverse=True)
    return torch.as_tensor(inv.reshape(-1), dtype=torch.long, device=device)


def sequence_rewards(token_level_rewards: Tensor, response_mask: Tensor) -> Tensor:
    """(B, T) token rewards -> (B,) float32 sequence rewards (masked sum, as veRL's grpo)."""
    return (token_level_rewards * response_mask).sum(dim=-1).float()


def estimator_advantages(name: str, token_level_rewards: Tensor, response_mask: Tensor, index=None,
                         config=None) -> tuple[Tensor, Tensor]:
    """A reward-only registry algorithm as a veRL estimator: (advantages, returns), both (B, T),
    `resrl.core.compute_token_advantages` on the sequence rewards and veRL's uid groups."""
    entry = verl_catalog().get(name)
    if entry is None or entry.kind != "estimator":
        raise ValueError(f"{name!r} is not a reward-only algorithm of the plugin "
                         f"({entry.how if entry is not None else 'not in the registry'})")
    cfg = algorithm_config_from(name, config)
    r = sequence_rewards(token_level_rewards, response_mask)
    gid = group_ids(index, r.device)
    if name == "passk":
        smallest = int(torch.bincount(gid).min()) if gid.numel() else 0
        if cfg.passk_k >= smallest:
            raise ValueError(f"algorithm.resrl.passk_k = {cfg.passk_k} must be < the group size "
                             f"(actor_rollout_ref.rollout.n; the smallest group here has {smallest} rows): "
                             "with k >= G every advantage is 0")
    adv, _ = compute_token_advantages(AdvantageInputs(r, gid, response_mask), cfg)
    return adv, adv


__all__ = ["ALGORITHM_KEYS", "KINDS", "VERL_OWN", "VerlEntry", "verl_catalog", "plugin_estimators", "algorithm_config_from",
           "estimator_advantages", "group_ids", "sequence_rewards"]
