"""Driver side of the veRL wiring: veRL 0.9's v1 sync trainer with ResRL's three hooks.

Registered with veRL's own trainer registry (`register_trainer`) as mode `resrl`, so a veRL job
selects it with Hydra overrides only:

    algorithm.adv_estimator=resrl trainer.v1.trainer_mode=resrl

`ResRLPPOTrainer` is `PPOTrainerSync` with four methods changed; each does its part and then calls
veRL's own method:

  _init_resource_pool_mgr  the actor role runs `ResRLActorRolloutRefWorker` (worker.py) instead of
                           veRL's `ActorRolloutRefWorker` (the separate reference worker, if any,
                           stays veRL's);
  _balance_batch           veRL's length balance splits groups over data-parallel ranks; this one
                           reorders whole groups (`layouts.group_preserving_partitions`, equal group
                           count per rank, balanced tokens), and refuses a batch that would need
                           padding rows (they would form partial groups);
  _compute_old_log_prob    puts each row's sequence reward and dense group id into TransferQueue,
                           flags the pass (`resrl_capture`), runs veRL's pass — the workers return
                           `resrl_multiplier` / `resrl_positive` next to the log-probs — and drops
                           the flag so the reference pass never captures;
  _compute_advantage       reads the multipliers and runs veRL's advantage step with them pending
                           for the `resrl` estimator (`estimators.pending_multiplier`), which
                           returns m · Â; logs `resrl/omega_mean` and `resrl/positive_frac`.

Needs veRL and TransferQueue (the `verl` extra).
"""

from __future__ import annotations

import math

import ray
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.seqlen_balancing import log_seqlen_unbalance

from .estimators import group_ids, pending_multiplier, sequence_rewards
from .layouts import group_preserving_partitions
from .weights import resrl_config_from
from .worker import (CAPTURE_KEY, GROUP_FIELD, MULTIPLIER_FIELD, POSITIVE_FIELD, REWARD_FIELD,
                     ResRLActorRolloutRefWorker, capture_settings)

TRAINER_MODE = "resrl"
ACTOR_ROLES = (Role.ActorRollout, Role.ActorRolloutRef, Role.Actor)


def check_resrl_trainer_config(config) -> None:
    """Refuse veRL settings the ResRL trainer cannot honour, each error naming its key."""
    algorithm = config.algorithm
    if algorithm.adv_estimator != "resrl":
        raise ValueError(f"trainer.v1.trainer_mode={TRAINER_MODE} computes ResRL's weights for "
                         f"algorithm.adv_estimator=resrl, got {algorithm.adv_estimator!r}: use "
                         "trainer.v1.trainer_mode=sync for other estimators")
    n = int(config.actor_rollout_ref.rollout.n)
    if n < 2:
        raise ValueError(f"actor_rollout_ref.rollout.n={n}: ResRL needs groups of >= 2 responses per prompt")
    if algorithm.get("use_kl_in_reward", False):
        raise ValueError("algorithm.use_kl_in_reward=True changes the rewards after the old-log-prob pass made "
                         "ResRL's positive/negative split; use actor_rollout_ref.actor.use_kl_loss instead")
    corr = algorithm.get("rollout_correction", None)
    if corr is not None and corr.get("bypass_mode", False):
        raise ValueError("algorithm.rollout_correction.bypass_mode=True skips the old-log-prob pass, which "
                         "is where ResRL reads its hidden states")
    resrl_config_from(algorithm)  # unknown algorithm.resrl keys fail here, before any worker starts


def _as_list(values) -> list:
    """TransferQueue's non-tensor field (veRL's uids) as a python list."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _padded(x) -> torch.Tensor:
    """TransferQueue's per-row fields come back jagged; (B, T) right-padded with 0."""
    return torch.nested.to_padded_tensor(x, 0.0) if getattr(x, "is_nested", False) else x


@register_trainer(TRAINER_MODE)
class ResRLPPOTrainer(PPOTrainerSync):
    """veRL's synchronous PPO trainer with ResRL's per-token weights from the old-log-prob pass."""

    def __init__(self, config):
        check_resrl_trainer_config(config)
        super().__init__(config)
        self.resrl_config = resrl_config_from(config.algorithm)

    # -- workers ---------------------------------------------------------------------------------
    def _init_resource_pool_mgr(self):
        super()._init_resource_pool_mgr()
        for role in ACTOR_ROLES:
            if role in self.role_worker_mapping:
                self.role_worker_mapping[role] = ray.remote(ResRLActorRolloutRefWorker)

    # -- whole groups per data-parallel rank -----------------------------------------------------
    def _actor_dp_size(self) -> int:
        worker_group = self.actor_rollout_wg
        if "actor" not in worker_group._dispatch_info:
            worker_group._dispatch_info["actor"] = worker_group._query_dispatch_info("actor")
        return max(worker_group._dispatch_info["actor"]) + 1

    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        dp_size = self._actor_dp_size()
        n = int(self.config.actor_rollout_ref.rollout.n)
        multiple = math.lcm(self._get_required_batch_multiple(dp_size), dp_size * n)
        if len(batch) % multiple:
            raise ValueError(
                f"ResRL needs whole groups on every data-parallel rank, but the batch of {len(batch)} responses "
                f"is not a multiple of {multiple} (dp size {dp_size} x rollout.n {n}, and the PPO mini-batch): "
                "veRL would pad it with rows that form partial groups. Choose data.train_batch_size and "
                "actor_rollout_ref.actor.ppo_mini_batch_size so that it is")
        uids = _as_list(tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid"])["uid"])
        seq_lens = [int(tag["seq_len"]) for tag in batch.tags]
        partitions = group_preserving_partitions(seq_lens, uids, dp_size)
        batch.reorder([j for part in partitions for j in part])
        metrics.update(log_seqlen_unbalance(seqlen_list=seq_lens, partitions=partitions, prefix=logging_prefix))
        return batch

    # -- the old-log-prob pass returns the weights -----------------------------------------------
    def _compute_old_log_prob(self, batch, metrics):
        # the estimator's own reward sum and group ids, so the worker's split is the estimator's
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["uid", "rm_scores", "response_mask"])
        rewards = sequence_rewards(_padded(data["rm_scores"]).float(), _padded(data["response_mask"]).float())
        groups = group_ids(_as_list(data["uid"]))
        fields = TensorDict({REWARD_FIELD: rewards, GROUP_FIELD: groups}, batch_size=len(batch))
        extra_info = dict(batch.extra_info or {})
        batch = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)
        batch.extra_info = {**extra_info, **(batch.extra_info or {}),
                            CAPTURE_KEY: capture_settings(self.resrl_config, self.config.actor_rollout_ref.rollout.n)}
        try:
            out = super()._compute_old_log_prob(batch, metrics)
        finally:
            batch.extra_info.pop(CAPTURE_KEY, None)
        if out.extra_info:
            out.extra_info.pop(CAPTURE_KEY, None)
        return out

    # -- the estimator multiplies them in --------------------------------------------------------
    def _compute_advantage(self, batch, metrics):
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=[MULTIPLIER_FIELD, POSITIVE_FIELD])
        multiplier = _padded(data[MULTIPLIER_FIELD]).float()                    # (B, T)
        rows = data[MULTIPLIER_FIELD].unbind(0)
        positive = data[POSITIVE_FIELD].bool().reshape(-1)
        with pending_multiplier(multiplier, positive):
            batch = super()._compute_advantage(batch, metrics)
        negative = [r.float() for r, p in zip(rows, positive.tolist()) if not p and r.numel()]
        metrics["resrl/omega_mean"] = float(torch.cat(negative).mean()) if negative else float("nan")
        metrics["resrl/positive_frac"] = float(positive.float().mean())
        return batch


__all__ = ["ResRLPPOTrainer", "TRAINER_MODE", "check_resrl_trainer_config"]
