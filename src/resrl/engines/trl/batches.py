"""Batch plumbing for the TRL adapter: whole-group shuffles, row selection, concatenation, and
token advantages for the local rows when prompt groups are split across processes.

A "batch" here is TRL's generation-batch dict: `prompt_ids`/`prompt_mask` (B, P) left-padded,
`completion_ids`/`completion_mask` and other per-token tensors (B, C[, d]) right-padded,
per-row tensors (B,), and scalars (0-d tensors such as `num_items_in_batch`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from resrl.core.registry import AdvantageInputs, AlgorithmConfig, compute_token_advantages

# (frozen_prompt_states: the frozen layers' prompt states, resrl.engines.trl.generation.FROZEN_KEYS)
LEFT_PADDED = ("prompt_ids", "prompt_mask", "frozen_prompt_states")


def _rows(value) -> bool:
    return isinstance(value, Tensor) and value.dim() >= 1


def select_rows(batch: dict, index: Tensor) -> dict:
    """Rows `index` (bool (B,) or int64) of every per-row entry; scalars and None kept."""
    if index.dtype == torch.bool:
        index = index.nonzero(as_tuple=True)[0]
    out = {}
    for key, value in batch.items():
        if _rows(value):
            out[key] = value[index.to(value.device)]
        elif isinstance(value, list):
            out[key] = [value[i] for i in index.tolist()]
        else:
            out[key] = value
    return out


def shuffle_groups(batch: dict, generator: torch.Generator | None = None) -> dict:
    """Permute the batch's groups as units, keeping each group's rows together and every row once.

    A unit is a run of consecutive rows with the same `group_index` (B,). When a process's share is
    not a multiple of the group size, the first and last units are the local parts of groups that
    straddle processes: they stay, shorter (nothing is dropped). With micro-batches that are
    multiples of the group size and whole local groups, every micro-batch then holds whole groups.
    """
    gid = batch["group_index"]
    B = gid.shape[0]
    if B == 0:
        return batch
    starts = torch.ones(B, dtype=torch.bool)
    starts[1:] = gid[1:].cpu() != gid[:-1].cpu()
    bounds = torch.cat([starts.nonzero(as_tuple=True)[0], torch.tensor([B])])
    perm = torch.randperm(bounds.numel() - 1, generator=generator)
    index = torch.cat([torch.arange(int(bounds[u]), int(bounds[u + 1])) for u in perm.tolist()])
    return select_rows(batch, index)


def aligned_layout_possible(per_device_batch: int, group_size: int, steps_per_generation: int,
                            gradient_accumulation_steps: int, num_iterations: int, scale_rewards: str) -> bool:
    """Can ResRL weights be computed inside the training forward ("aligned" mode)?

    Needs every device micro-batch to hold whole groups of one generation round (a micro-batch that
    is a multiple of G; then a process's share is one too, so no group straddles processes), the
    round used for exactly one optimiser update, and group-local reward scaling."""
    one_update_per_round = steps_per_generation == gradient_accumulation_steps and num_iterations == 1
    return per_device_batch % group_size == 0 and one_update_per_round and scale_rewards != "batch"


def _pad_to(value: Tensor, width: int, pad_value, left: bool) -> Tensor:
    extra = width - value.shape[1]
    if extra <= 0:
        return value
    pad = [0, 0] * (value.dim() - 2) + ([extra, 0] if left else [0, extra])
    return F.pad(value, pad, value=pad_value)


def concat_batches(batches: list[dict], pad_token_id: int) -> dict:
    """Row-wise concatenation; prompt tensors are left-padded, per-token tensors right-padded."""
    out = {}
    for key, first in batches[0].items():
        values = [b.get(key) for b in batches]
        if first is None or any(v is None for v in values):
            out[key] = None
        elif _rows(first) and first.dim() >= 2:
            width = max(v.shape[1] for v in values)
            left = key in LEFT_PADDED
            pad = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
            out[key] = torch.cat([_pad_to(v, width, pad, left) for v in values])
        elif _rows(first):
            out[key] = torch.cat(values)
        elif isinstance(first, list):
            out[key] = [x for v in values for x in v]
        else:
            out[key] = first
    return out


def local_token_advantages(local: AdvantageInputs, config: AlgorithmConfig, accelerator=None):
    """Token advantages of this process's rows, gathering the rows of groups split across processes.

    local: this process's rows; `group_index` must be *global* ids (the same id on every process
    for one prompt group). Every process must call this (collectives) with the same number of rows.
    Only rows of split groups travel (at most 2·(G−1) per process in TRL's layout); whole local
    groups are computed where they are. Returns ((B, T) float32, stats) as compute_token_advantages.
    """
    if accelerator is None or accelerator.num_processes == 1:
        return compute_token_advantages(local, config)
    device = local.rewards.device
    B, T = local.response_mask.shape
    all_gid = accelerator.gather(local.group_index.to(device).contiguous())  # (P·B,)
    nproc, rank = accelerator.num_processes, accelerator.process_index
    owner = torch.arange(nproc, device=device).repeat_interleave(B)
    # a group is split when its rows live on more than one process
    uniq, inv = torch.unique(all_gid, return_inverse=True)
    first = torch.full((uniq.numel(),), nproc, device=device).scatter_reduce(0, inv, owner, "amin")
    last = torch.full((uniq.numel(),), -1, device=device).scatter_reduce(0, inv, owner, "amax")
    split_group = first != last                                                   # (U,)
    if not bool(split_group.any()):
        return compute_token_advantages(local, config)

    if local.head is not None:
        raise ValueError("a prompt group is split across processes, and the head sketch that NTHR / "
                         "algorithm.resrl.weighting='interference' read is not gathered across processes: use "
                         "train.micro_batch_size and train.rollout_prompts that keep whole groups on each process")
    local_inv = inv[rank * B:(rank + 1) * B]
    send = split_group[local_inv]                                                 # (B,) bool
    K = int(accelerator.gather(send.sum().reshape(1)).max())
    send_idx = send.nonzero(as_tuple=True)[0]
    n_send = send_idx.numel()

    def pack(t: Tensor, fill=0) -> Tensor:  # (B, ...) -> (K, ...) rows to send, padded
        rows = t[send_idx]
        if n_send < K:
            rows = torch.cat([rows, rows.new_full((K - n_send, *rows.shape[1:]), fill)])
        return rows.contiguous()

    mask_b = local.response_mask.bool()
    T_max = int(accelerator.gather(torch.tensor([T], device=device)).max())
    pack_mask = _pad_to(pack(mask_b.to(torch.uint8)), T_max, 0, left=False)
    g_valid = accelerator.gather(pack(torch.ones(B, dtype=torch.uint8, device=device)))
    g_gid = accelerator.gather(pack(local.group_index.to(device)))
    g_rewards = accelerator.gather(pack(local.rewards.float()))
    g_mask = accelerator.gather(pack_mask).bool()
    truncated = local.truncated if local.truncated is not None else torch.zeros(B, dtype=torch.bool, device=device)
    g_trunc = accelerator.gather(pack(truncated.to(torch.uint8))).bool()
    g_plen = None
    if local.prompt_lengths is not None:
        g_plen = accelerator.gather(pack(local.prompt_lengths.to(device)))
    g_hidden = None
    if local.hidden is not None:
        g_hidden = accelerator.gather(_pad_to(pack(local.hidden), T_max, 0, left=False))

    # rows of my split groups, from every process (mine included, in gathered order)
    my_split_ids = local.group_index.to(device)[send_idx]
    take = (g_valid.bool()) & torch.isin(g_gid, my_split_ids)
    whole = (~send).nonzero(as_tuple=True)[0]
    ext = AdvantageInputs(
        rewards=torch.cat([local.rewards.float()[whole], g_rewards[take]]),
        group_index=torch.cat([local.group_index.to(device)[whole], g_gid[take]]),
        response_mask=torch.cat([_pad_to(mask_b[whole].to(torch.uint8), T_max, 0, False).bool(), g_mask[take]]),
        hidden=None if local.hidden is None else torch.cat(
            [_pad_to(local.hidden[whole], T_max, 0, False), g_hidden[take]]),
        truncated=torch.cat([truncated.bool()[whole], g_trunc[take]]),
        prompt_lengths=None if g_plen is None else torch.cat([local.prompt_lengths.to(device)[whole], g_plen[take]]),
    )
    ext_adv, stats = compute_token_advantages(ext, config)

    # where each of my rows landed in `ext`
    token_adv = torch.zeros(B, T_max, dtype=torch.float32, device=device)
    token_adv[whole] = ext_adv[: whole.numel()]
    took_positions = take.nonzero(as_tuple=True)[0]                 # indices into the gathered (P·K,)
    mine = (took_positions >= rank * K) & (took_positions < rank * K + n_send)
    token_adv[send_idx] = ext_adv[whole.numel():][mine]
    return token_adv[:, :T], stats
