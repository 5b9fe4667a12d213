"""The groups ResRL's weights see in the authors' veRL run (`algorithm.resrl.grouping: micro-batch`).

The authors' code (github 1229095296/ResRL, a veRL 0.5 fork) computes ResRL's weights inside the
actor update, per micro-batch, grouping by prompt id (`uid`) inside the micro-batch
(verl/workers/actor/dp_actor.py:566, 610-618, 361). Before that the trainer reorders the batch
(`trainer.balance_batch`, on by default; verl/trainer/ppo/ray_trainer.py:1325-1326 and
1183-1198): the rows, prompt-major after generation (ray_trainer.py:1315), are split into as many
equal-count partitions as data-parallel ranks with balanced token sums (the largest differencing
method of Karmarkar and Karp, veRL's `get_seqlen_balanced_partitions(equal_size=True)`), every
partition keeps its rows in batch order, and rank r takes partition r; it then cuts its rows into
micro-batches of `ppo_micro_batch_size_per_gpu` rows (= rollout_n = 4 in train_command.sh:61).
So a prompt's responses are mostly spread over ranks and micro-batches: a negative response is
weighed only against the positives of its prompt that share its micro-batch, and keeps ω = 1 when
there is none.

`micro_batch_groups` reproduces this on the rows one call of the core receives: the rows are put
prompt-major (groups in order of first appearance, rows in batch order inside a group), split into
`ranks` balanced partitions of equal count by the differencing method below (written for this
project from the method's description; its tie-breaking is a deterministic order of its own, so
on ties a partition may differ from veRL's while every statistic of it is the same), and every
partition is cut into micro-batches of `micro_batch` rows. The returned ids are (rank, micro-batch,
prompt) triples as ints, for `resrl_token_advantages`' `group_index`.
"""

from __future__ import annotations

import heapq
import itertools

import torch
from torch import Tensor


def balanced_partitions(lengths: list[int], k: int) -> list[list[int]]:
    """Split items 0..n−1 into k partitions of n / k items each with balanced length sums: the
    largest differencing method (Karmarkar-Karp) for equal-count partitions.

    Items sorted by (length, index) are dealt in consecutive runs of k, one item per partition,
    each run a k-way "state" whose partitions are ordered by decreasing sum; repeatedly the two
    states with the largest spread (max sum − min sum) are combined, the heaviest partition of one
    with the lightest of the other, until one state remains. Returns the partitions, each sorted
    by item index, heaviest partition first. n must be a multiple of k."""
    n = len(lengths)
    if k < 1 or n % k:
        raise ValueError(f"balanced_partitions: {n} items do not split into {k} equal partitions")
    if n == 0:
        return [[] for _ in range(k)]
    order = sorted(range(n), key=lambda i: (lengths[i], i))
    tick = itertools.count()

    def entry(parts: list[tuple[int, list[int]]]):
        parts.sort(key=lambda p: (p[0], len(p[1]), p[1]), reverse=True)   # decreasing (sum, count, items)
        spread = parts[0][0] - parts[-1][0]
        return (-spread, -parts[0][0], next(tick), parts)                 # largest spread first

    heap = []
    for start in range(0, n, k):
        run = order[start:start + k]
        heapq.heappush(heap, entry([(lengths[i], [i]) for i in run]))
    while len(heap) > 1:
        a = heapq.heappop(heap)[3]
        b = heapq.heappop(heap)[3]
        merged = [(a[i][0] + b[k - 1 - i][0], a[i][1] + b[k - 1 - i][1]) for i in range(k)]
        heapq.heappush(heap, entry(merged))
    return [sorted(items) for _, items in heap[0][3]]


def micro_batch_groups(group_index: Tensor, lengths: Tensor, micro_batch: int, ranks: int) -> Tensor:
    """The authors' weight groups (module docstring) of a batch.

    group_index (B,) any ids (a prompt's rows); lengths (B,) the tokens veRL balances per row
    (prompt + response; response lengths alone when the prompt lengths are unknown); micro_batch
    rows per micro-batch; ranks data-parallel ranks. Returns (B,) int64 ids, equal for rows that
    share a rank, a micro-batch and a prompt."""
    B = group_index.shape[0]
    if B % ranks:
        raise ValueError(f"ResRLConfig.grouping_ranks = {ranks} does not divide the {B} rows of the batch (veRL's "
                         "length balance deals equal row counts to every rank)")
    device = group_index.device
    _, gid = torch.unique(group_index, return_inverse=True)
    first = torch.full((int(gid.max()) + 1 if B else 0,), B, dtype=torch.long, device=device)
    first = first.scatter_reduce(0, gid, torch.arange(B, device=device), "amin")
    prompt_major = torch.argsort(first[gid] * (B + 1) + torch.arange(B, device=device), stable=True)  # row ids
    lens = lengths.to(device)[prompt_major].long().tolist()
    parts = balanced_partitions(lens, ranks)
    rank = torch.empty(B, dtype=torch.long, device=device)
    micro = torch.empty(B, dtype=torch.long, device=device)
    for r, items in enumerate(parts):
        rows = prompt_major[torch.tensor(items, dtype=torch.long, device=device)]
        rank[rows] = r
        micro[rows] = torch.arange(len(items), device=device) // micro_batch
    n_micro = int(micro.max()) + 1 if B else 1
    n_groups = int(gid.max()) + 1 if B else 1
    return (rank * n_micro + micro) * n_groups + gid


def grouping_coverage(group_index: Tensor, weight_groups: Tensor, positive: Tensor, mask: Tensor | None = None) -> dict:
    """How the negatives of mixed prompt groups are weighed under `weight_groups`: the fraction whose
    weight group holds at least one positive of their own prompt (they get a residual weight), and
    the fraction whose weight group holds ALL their prompt's positives (the weight of spec §2).
    group_index, weight_groups (B,) ids; positive (B,) bool; mask (B, T) valid tokens (rows without
    one are left out). Returns {"grouping_neg_with_own_positive_frac", "grouping_neg_with_all_positives_frac",
    "grouping_mixed_negatives"}."""
    keep = mask.bool().any(dim=1) if mask is not None else torch.ones_like(positive, dtype=torch.bool)
    _, g = torch.unique(group_index, return_inverse=True)
    _, w = torch.unique(weight_groups, return_inverse=True)
    pos = positive.bool() & keep
    pos_per_prompt = torch.bincount(g[pos], minlength=int(g.max()) + 1 if g.numel() else 0)
    pos_per_wgroup = torch.bincount(w[pos], minlength=int(w.max()) + 1 if w.numel() else 0)
    neg = ~positive.bool() & keep & (pos_per_prompt[g] > 0)            # negatives of mixed prompts
    n = int(neg.sum())
    if n == 0:
        return {"grouping_neg_with_own_positive_frac": float("nan"),
                "grouping_neg_with_all_positives_frac": float("nan"), "grouping_mixed_negatives": 0.0}
    # a weight group is within one prompt (its id includes the prompt), so its positives are its prompt's
    with_some = pos_per_wgroup[w[neg]] > 0
    with_all = pos_per_wgroup[w[neg]] == pos_per_prompt[g[neg]]
    return {"grouping_neg_with_own_positive_frac": float(with_some.double().mean()),
            "grouping_neg_with_all_positives_frac": float(with_all.double().mean()),
            "grouping_mixed_negatives": float(n)}


__all__ = ["balanced_partitions", "micro_batch_groups", "grouping_coverage"]
