"""DAPO's dynamic sampling in the TRL engine: drop the groups whose rewards are all equal and refill
the batch from fresh prompts (resrl.core.advantages.dynamic_sampling_mask decides which groups).

Refills come from an independent shuffled stream of the training prompts (`RefillStream`, seed + 1),
so that they are not the prompts the main loader is about to serve; its position is part of every
checkpoint, so a resumed run refills exactly as the uninterrupted one. Every process makes the same
collectives in the same order (the refill loop stops on a global decision).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from resrl.core.advantages import dynamic_sampling_mask
from resrl.engines.trl import compat as trl_compat
from resrl.engines.trl.batches import concat_batches, select_rows


class RefillStream:
    """Generation batches of prompts for refilling, each prompt repeated `group_size` times in a
    row as TRL's sampler does: epoch after epoch of TRL's sampler order (`EpochRepeatSampler`,
    seed `seed`), `generation_batch_size` rows per batch, this process's `local_batch_size` rows of
    each (process p: rows [p·L, (p+1)·L), as accelerate shards a loader).

    Its position (epoch, batches served in that epoch) is checkpointed (`state_dict`, written into
    every checkpoint by the trainer) and restored on resume, so a resumed run refills from the
    prompts the uninterrupted run refills from. It draws from no global RNG."""

    def __init__(self, dataset, accelerator, *, group_size: int, generation_batch_size: int, local_batch_size: int,
                 seed: int):
        self.dataset, self.rank = dataset, accelerator.process_index
        self.generation_batch_size, self.local_batch_size = generation_batch_size, local_batch_size
        self.sampler = trl_compat.EpochRepeatSampler(dataset, mini_repeat_count=group_size,
                                                     batch_size=generation_batch_size // group_size, repeat_count=1,
                                                     shuffle=True, seed=seed)
        self.batches_per_epoch = len(self.sampler) // generation_batch_size
        if self.batches_per_epoch < 1:
            raise ValueError(f"dynamic sampling: {len(dataset)} prompts make no refill batch of "
                             f"{generation_batch_size // group_size} prompts")
        self.epoch = self.position = 0
        self._iter = None

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._iter = None

    def next_batch(self) -> list:
        if self.position >= self.batches_per_epoch:
            self.epoch, self.position, self._iter = self.epoch + 1, 0, None
        if self._iter is None:
            self.sampler.set_epoch(self.epoch)
            self._iter = iter(self.sampler)
            skip = self.position * self.generation_batch_size
            next(itertools.islice(self._iter, skip, skip), None)
        rows = list(itertools.islice(self._iter, self.generation_batch_size))
        self.position += 1
        start = self.rank * self.local_batch_size
        return [self.dataset[i] for i in rows[start:start + self.local_batch_size]]


def dynamically_sampled(out: dict, *, generate: Callable[[list], dict], refill: RefillStream, accelerator,
                        group_size: int, max_refill_rounds: int, pad_token_id: int, sink: dict) -> dict:
    """Keep the groups of `out` whose rewards differ; regenerate with `generate(prompts)` from the
    refill stream until the batch is full (at most `max_refill_rounds` more rounds, then fill with
    dropped groups, which carry zero advantage for every group-baseline algorithm).

    Returns a batch of the same size with fresh global group ids and `num_items_in_batch`; logs
    dynamic_sampling/kept_frac (first round), /refill_rounds and /filled_groups into `sink`."""
    G, B = group_size, out["completion_ids"].shape[0]
    keep_parts, spare_parts, rounds = [], [], 0
    first_frac = None
    while True:
        keep = dynamic_sampling_mask(out["rewards"], out["group_index"])
        if first_frac is None:
            first_frac = accelerator.gather(keep.float().mean().reshape(1)).mean().item()
        keep_parts.append(select_rows(out, keep))
        spare_parts.append(select_rows(out, ~keep))
        have = sum(p["completion_ids"].shape[0] for p in keep_parts)
        short = torch.tensor([max(B - have, 0)], device=keep.device)
        if accelerator.gather(short).max().item() == 0 or rounds >= max_refill_rounds:
            break
        out = generate(refill.next_batch())
        rounds += 1
    batch = select_rows(concat_batches(keep_parts + spare_parts, pad_token_id), torch.arange(B))
    filled = max(B - have, 0) // G
    device = batch["completion_ids"].device
    batch["group_index"] = (accelerator.process_index * B + torch.arange(B, device=device)) // G
    batch["num_items_in_batch"] = accelerator.gather(batch["completion_mask"].sum()).sum()
    sink["dynamic_sampling/kept_frac"].append(first_frac)
    sink["dynamic_sampling/refill_rounds"].append(float(rounds))
    sink["dynamic_sampling/filled_groups"].append(
        accelerator.gather(torch.tensor([float(filled)], device=device)).sum().item())
    return batch
