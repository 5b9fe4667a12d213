"""DAPO's dynamic sampling in the TRL engine: drop the groups whose rewards are all equal and refill
the batch from fresh prompts (resrl.core.advantages.dynamic_sampling_mask decides which groups).

Refills come from an independent shuffled stream of the training prompts (`RefillStream`, seed + 1),
so that they are not the prompts the main loader is about to serve. Every process makes the same
collectives in the same order (the refill loop stops on a global decision).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from resrl.core.advantages import dynamic_sampling_mask
from resrl.engines import trl_compat
from resrl.engines.batches import concat_batches, select_rows


class RefillStream:
    """Generation batches of prompts for refilling, each prompt repeated `group_size` times in a
    row as TRL's sampler does; the loader is built on first use and restarts when exhausted."""

    def __init__(self, dataset, accelerator, *, group_size: int, generation_batch_size: int, local_batch_size: int,
                 seed: int):
        self.dataset, self.accelerator = dataset, accelerator
        self.group_size, self.generation_batch_size, self.local_batch_size = group_size, generation_batch_size, \
            local_batch_size
        self.seed = seed
        self._loader = self._iter = None

    def next_batch(self) -> list:
        if self._iter is None:
            G = self.group_size
            sampler = trl_compat.RepeatSampler(self.dataset, mini_repeat_count=G,
                                               batch_size=self.generation_batch_size // G, repeat_count=1,
                                               shuffle=True, seed=self.seed)
            loader = DataLoader(self.dataset, batch_size=self.local_batch_size, sampler=sampler,
                                collate_fn=trl_compat.identity)
            self._loader = self.accelerator.prepare_data_loader(loader)
            self._iter = iter(self._loader)
        try:
            return next(self._iter)
        except StopIteration:
            self._iter = iter(self._loader)
            return next(self._iter)


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
