"""A rank's ResRL weights: groups accumulated over micro-batches, computed once per rank (pure torch).

The old-log-prob pass of veRL's engine runs a rank's rows in micro-batches (and `use_dynamic_bsz`
regroups them by token count), so one micro-batch rarely holds whole groups. Weights need whole
groups (spec §2), so the rank keeps each row's response states (valid tokens only, model dtype,
packed per row, on `storage_device`) until the pass ends, then calls `resrl.core` once on all of
them and drops the states. What leaves the rank is a per-token multiplier (B_rank, T) float32:

    m[i, t] = λ_pos            if Â_i > 0         (Ã = m · Â = λ_pos · Â)
    m[i, t] = ω[i, t]          otherwise          (Ã = ω · Â)
    m[i, t] = 0                on padding

so the advantage estimator turns veRL's GRPO advantage into ResRL's with one product, and the
(B, T, d) states never reach the driver. The split P = {Â > 0} is made here from the rank's own
rewards with `resrl.core.grpo_advantages` — the same function (and the same whole groups) the
estimator uses, so the two agree; the estimator re-checks it with the `positive` flags.

Exactness: `m` is computed by `resrl_token_advantages` with Â replaced by ±1 (its sign): ω
depends only on the states and the split, so m·Â equals `resrl_token_advantages(hidden, mask, Â)`
bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ...core.advantages import grpo_advantages
from ...core.residual import resrl_token_advantages
from ...core.resrl_config import ResRLConfig
from .layouts import check_whole_groups, pad_responses


@dataclass
class RankWeights:
    """What the old-log-prob pass returns per row (rows in the order they were added)."""

    row_ids: Tensor        # (B,) int64, the caller's row ids
    multiplier: Tensor     # (B, T) float32, 0 on padding; T = longest response of the rank
    positive: Tensor       # (B,) bool, Â > 0 (the split the weights were made with)
    stats: dict = field(default_factory=dict)


class RankWeightAccumulator:
    """Collects one rank's responses over its micro-batches; `finish()` computes the weights once.

    add(row_ids, states, rewards, uids): states are B views (response_len_i, d) from
    `layouts.response_states_from_packed/_padded`; they are copied (model dtype) to
    `storage_device`, so the forward's buffers can be freed.
    """

    def __init__(self, config: ResRLConfig | None = None, std_eps: float = 1e-6, scale_rewards: str = "group",
                 storage_device: torch.device | str | None = None):
        self.config = config if config is not None else ResRLConfig()
        self.config.validate()
        self.std_eps, self.scale_rewards = std_eps, scale_rewards
        self.storage_device = storage_device
        self._rows: list[int] = []
        self._states: list[Tensor] = []
        self._rewards: list[float] = []
        self._uids: list = []
        self._truncated: list[bool] = []
        self._token_masks: list[Tensor | None] = []

    def __len__(self) -> int:
        return len(self._rows)

    def held_bytes(self) -> int:
        """Bytes of states held now (the rank's memory cost of ResRL between forward and finish)."""
        return sum(s.numel() * s.element_size() for s in self._states)

    def add(self, row_ids, states: list[Tensor], rewards: Tensor, uids, truncated: Tensor | None = None,
            token_masks: list[Tensor] | None = None) -> None:
        """token_masks: per row (response_len_i,) — veRL's `response_mask`; 0 marks tokens the model
        did not generate (tool output in a multi-turn rollout): they neither enter the positives'
        subspace nor get a weight (their multiplier is 0)."""
        row_ids = [int(r) for r in (row_ids.tolist() if isinstance(row_ids, Tensor) else row_ids)]
        uids = list(uids)
        rewards = rewards.detach().to("cpu", torch.float64).reshape(-1).tolist()
        n = len(row_ids)
        if not (len(states) == len(uids) == len(rewards) == n):
            raise ValueError(f"add: {n} row ids, {len(states)} states, {len(rewards)} rewards, {len(uids)} uids")
        seen = set(self._rows)
        dup = [r for r in row_ids if r in seen]
        if dup or len(set(row_ids)) != n:
            raise ValueError(f"add: row ids added twice (e.g. {(dup or row_ids)[0]})")
        d = {s.shape[-1] for s in states} | ({self._states[0].shape[-1]} if self._states else set())
        if len(d) > 1:
            raise ValueError(f"add: states with different feature sizes {sorted(d)}")
        for s in states:
            if s.dim() != 2:
                raise ValueError(f"add: each state must be (response_len, d), got {tuple(s.shape)}")
        dev = self.storage_device
        self._states.extend(s.detach().to(dev, copy=True) if dev is not None else s.detach().clone() for s in states)
        self._rows.extend(row_ids)
        self._rewards.extend(rewards)
        self._uids.extend(uids)
        self._truncated.extend([False] * n if truncated is None else [bool(t) for t in truncated.tolist()])
        if token_masks is not None:
            if len(token_masks) != n or any(m.shape[0] != s.shape[0] for m, s in zip(token_masks, states)):
                raise ValueError("add: token_masks must hold one (response_len_i,) mask per row")
            self._token_masks.extend(m.detach().to("cpu").bool() for m in token_masks)
        else:
            self._token_masks.extend([None] * n)

    def finish(self, group_size: int | None = None, rank: int | None = None,
               device: torch.device | str | None = None) -> RankWeights:
        """The rank's weights, once its rows are all added. group_size (veRL's rollout.n): refuse a
        partial group (SplitGroupError naming trainer.balance_batch). Clears the held states."""
        if not self._rows:
            raise ValueError("finish: no rows were added")
        if group_size is not None:
            check_whole_groups(self._uids, group_size, rank)
        ids = {u: i for i, u in enumerate(dict.fromkeys(self._uids))}   # dense ids, first-seen order
        group = torch.tensor([ids[u] for u in self._uids], dtype=torch.long)
        rewards = torch.tensor(self._rewards, dtype=torch.float32)
        adv = grpo_advantages(rewards, group, self.std_eps, self.scale_rewards)
        positive = adv > 0
        states, mask = pad_responses(self._states)
        for i, m in enumerate(self._token_masks):
            if m is not None:
                mask[i, :m.shape[0]] &= m.to(mask.device)
        self._states = []                                       # the padded copy is all that is left
        dev = device if device is not None else states.device
        states, mask = states.to(dev), mask.to(dev)
        sign = torch.where(positive, 1.0, -1.0).to(dev)
        truncated = torch.tensor(self._truncated, dtype=torch.bool, device=dev)
        token_adv, stats = resrl_token_advantages(states, mask, sign, group.to(dev), self.config, truncated)
        del states
        multiplier = torch.where(positive.to(dev)[:, None], token_adv, -token_adv)
        out = RankWeights(torch.tensor(self._rows, dtype=torch.long), multiplier.float(), positive, stats)
        self._rows, self._rewards, self._uids, self._truncated, self._token_masks = [], [], [], [], []
        return out


def apply_multiplier(advantages: Tensor, multiplier: Tensor, positive: Tensor | None = None) -> Tensor:
    """ResRL's token advantages from GRPO's sequence advantages: Ã = m · Â. (B,), (B, T) -> (B, T).

    positive (B,) bool: the split the weights were made with; a row whose Â > 0 disagrees is an
    error (the weights belong to another split), never a silent mix."""
    if advantages.dim() != 1 or multiplier.dim() != 2 or multiplier.shape[0] != advantages.shape[0]:
        raise ValueError(f"advantages must be (B,) and multiplier (B, T), got {tuple(advantages.shape)} "
                         f"and {tuple(multiplier.shape)}")
    if positive is not None:
        bad = (advantages > 0).cpu() != positive.cpu().bool()
        if bool(bad.any()):
            raise ValueError(
                f"ResRL weights were made with another positive/negative split for {int(bad.sum())} row(s): "
                "the rewards changed between the old-log-prob pass and the estimator (KL in reward? "
                "set algorithm.use_kl_in_reward=False)")
    return multiplier.to(advantages.device).float() * advantages.float()[:, None]


def resrl_config_from(algorithm_config) -> ResRLConfig:
    """ResRLConfig from veRL's `algorithm.resrl` mapping (`+algorithm.resrl.rank=64` ...): the
    keys are ResRLConfig's field names; an unknown key is an error naming it, never ignored."""
    sub = None
    if algorithm_config is not None:
        sub = algorithm_config.get("resrl", None) if hasattr(algorithm_config, "get") else None
    if sub is None:
        return ResRLConfig()
    items = dict(sub.items()) if hasattr(sub, "items") else dict(sub)
    known = set(ResRLConfig.field_names())
    # keys the estimators read (not weight hyper-parameters): AlgorithmConfig's fields
    from .algorithms import ALGORITHM_KEYS as estimator_keys  # noqa: N811

    unknown = sorted(set(items) - known - estimator_keys)
    if unknown:
        raise ValueError(f"algorithm.resrl: unknown key(s) {unknown}; allowed {sorted(known | estimator_keys)}")
    # what the plugin's rank-side weights cannot do: the authors' micro-batch groups and reward split
    for key, allowed, why in (
            ("preset", "paper", "the authors-code preset is their fork's micro-batch grouping and reward split "
                                "(which the plugin, computing on whole groups per rank, does not reproduce) plus "
                                "ResRLConfig keys you can set one by one (quantile_low=0.2 quantile_high=0.8 "
                                "no_contrast_weight=midpoint svd=pca_lowrank power_iters=4 boundary_tokens=0 "
                                "min_pos_tokens=4) and veRL's own loss keys (actor.loss_agg_mode=token-mean, "
                                "clip_ratio_c=3)"),
            ("grouping", "whole", "the plugin computes the weights on whole groups per rank (the point of its "
                                  "trainer mode); the authors' micro-batch grouping runs in the TRL engine"),
            ("positive", "advantage", "the rank's multiplier is made with the split Â > 0, which the estimator "
                                      "checks; the reward split runs in the TRL engine")):
        if items.get(key, allowed) != allowed:
            raise ValueError(f"algorithm.resrl.{key}={items[key]!r} is not supported by the veRL plugin: {why}")
    config = ResRLConfig(**{k: v for k, v in items.items() if k in known})
    if config.weighting != "residual":
        # the rank-side capture (capture.py) records penultimate states only, not the head input and
        # top-K probabilities the interference estimate reads
        raise ValueError(f"algorithm.resrl.weighting={config.weighting!r} is not supported by the veRL plugin "
                         "(it captures the penultimate states only): use weighting=residual, or the TRL engine "
                         "(resrl train)")
    return config
