"""veRL 0.9 engine layouts -> per-response penultimate states; whole-group checks (pure torch).

veRL's engine workers (`FSDPEngineWithLMHead`) run each micro-batch as rows of
`[prompt_i | response_i]` with no padding between them (`input_ids` is a jagged tensor whose
`offsets()` are the cu_seqlens). The hook on decoder layer L−1 therefore sees one of:

  remove-padding  (1, nnz + pad, d)   every row packed back to back, `cu_seqlens` (B+1,) from
                                      `input_ids.offsets()`, `pad` tokens appended at the tail
                                      (Ulysses alignment and the static bucket pad); under Ulysses
                                      SP each rank holds a contiguous 1/sp slice, gathered first
  padded          (B, S_max, d)       row i right-padded after its seq_len_i tokens

The state that *predicts* response token t of row i sits at sequence position
`prompt_len_i − 1 + t` (veRL slices log-probs the same way: `no_padding_2_padding`), the state
*of* token t at `prompt_len_i + t` (spec §2 `hidden_alignment`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.resrl_config import HIDDEN_ALIGNMENTS


def _offset(alignment: str) -> int:
    if alignment not in HIDDEN_ALIGNMENTS:
        raise ValueError(f"hidden_alignment must be one of {HIDDEN_ALIGNMENTS}, got {alignment!r}")
    return -1 if alignment == "predicting" else 0


def _check_lengths(prompt_lens: Tensor, response_lens: Tensor) -> None:
    if prompt_lens.shape != response_lens.shape or prompt_lens.dim() != 1:
        raise ValueError(f"prompt_lens and response_lens must both be (B,), got {tuple(prompt_lens.shape)} "
                         f"and {tuple(response_lens.shape)}")
    if bool((prompt_lens < 1).any()):
        # the predicting state of response token 0 is the prompt's last state
        raise ValueError("every row needs a prompt of >= 1 token (the state predicting response token 0)")
    if bool((response_lens < 0).any()):
        raise ValueError("response lengths must be >= 0")


def response_states_from_packed(states: Tensor, cu_seqlens: Tensor, prompt_lens: Tensor, response_lens: Tensor,
                                pad_size: int = 0, alignment: str = "predicting") -> list[Tensor]:
    """Per-response states from veRL's remove-padding layout.

    states:        (1, nnz + pad_size, d) or (nnz + pad_size, d), the gathered (all Ulysses shards)
                   packed output of decoder layer L−1
    cu_seqlens:    (B+1,) int, row boundaries in the packed sequence (`input_ids.offsets()`)
    prompt_lens, response_lens: (B,) int, with prompt_len + response_len = row length
    pad_size:      tail padding to strip (Ulysses + static pad)
    Returns B tensors of shape (response_len_i, d), views into `states` (no copy).
    """
    off = _offset(alignment)
    s = states[0] if states.dim() == 3 else states
    if states.dim() == 3 and states.shape[0] != 1:
        raise ValueError(f"packed states must be (1, nnz, d), got {tuple(states.shape)}")
    if s.dim() != 2:
        raise ValueError(f"packed states must be (1, nnz, d) or (nnz, d), got {tuple(states.shape)}")
    _check_lengths(prompt_lens, response_lens)
    cu = cu_seqlens.to("cpu", torch.long)
    B = prompt_lens.shape[0]
    if cu.shape != (B + 1,) or int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens must be (B+1,) = ({B + 1},) starting at 0, got {tuple(cu.shape)}")
    nnz = int(cu[-1])
    if s.shape[0] != nnz + pad_size:
        raise ValueError(f"packed states hold {s.shape[0]} positions, cu_seqlens[-1] + pad_size = {nnz + pad_size}"
                         " (gather the Ulysses shards first)")
    seq = (cu[1:] - cu[:-1])
    pl, rl = prompt_lens.to("cpu", torch.long), response_lens.to("cpu", torch.long)
    if not torch.equal(seq, pl + rl):
        raise ValueError("row lengths from cu_seqlens differ from prompt_len + response_len")
    starts = (cu[:-1] + pl + off).tolist()
    return [s[a:a + n] for a, n in zip(starts, rl.tolist())]


def response_states_from_padded(states: Tensor, prompt_lens: Tensor, response_lens: Tensor,
                                alignment: str = "predicting") -> list[Tensor]:
    """Per-response states from veRL's padded layout: states (B, S_max, d), row i right-padded after
    prompt_len_i + response_len_i positions. Returns B views of shape (response_len_i, d)."""
    off = _offset(alignment)
    if states.dim() != 3:
        raise ValueError(f"padded states must be (B, S, d), got {tuple(states.shape)}")
    _check_lengths(prompt_lens, response_lens)
    B, S, _ = states.shape
    pl, rl = prompt_lens.to("cpu", torch.long), response_lens.to("cpu", torch.long)
    if pl.shape[0] != B:
        raise ValueError(f"{pl.shape[0]} rows of lengths for {B} rows of states")
    if bool(((pl + rl) > S).any()):
        raise ValueError(f"a row is longer than the padded length {S}")
    return [states[i, a + off:a + off + n] for i, (a, n) in enumerate(zip(pl.tolist(), rl.tolist()))]


def pad_responses(rows: list[Tensor], width: int | None = None) -> tuple[Tensor, Tensor]:
    """B tensors (len_i, d) -> (B, T, d) right-padded with zeros and its (B, T) bool mask,
    T = width or max len_i. Only used on a chunk of groups at a time (see weights.py)."""
    if not rows:
        raise ValueError("pad_responses needs at least one row")
    d = rows[0].shape[-1]
    T = max(int(r.shape[0]) for r in rows) if width is None else width
    out = rows[0].new_zeros(len(rows), max(T, 1), d)
    mask = torch.zeros(len(rows), max(T, 1), dtype=torch.bool, device=rows[0].device)
    for i, r in enumerate(rows):
        out[i, :r.shape[0]] = r
        mask[i, :r.shape[0]] = True
    return out, mask


# --------------------------------------------------------------------------------------------
# whole groups per data-parallel rank
# --------------------------------------------------------------------------------------------

class SplitGroupError(ValueError):
    """A prompt group's responses are not all on one data-parallel rank."""


def split_groups(uids: list, group_size: int) -> dict:
    """uid -> count for every group of which this rank holds fewer (or more) than `group_size`
    responses. uids: the rank's row uids (veRL's `uid`, any hashable)."""
    counts: dict = {}
    for u in uids:
        counts[u] = counts.get(u, 0) + 1
    return {u: c for u, c in counts.items() if c != group_size}


def check_whole_groups(uids: list, group_size: int, rank: int | None = None) -> None:
    """SplitGroupError naming `trainer.balance_batch` when the rank does not hold whole groups."""
    bad = split_groups(uids, group_size)
    if bad:
        some = ", ".join(f"{u!r}: {c}/{group_size}" for u, c in list(bad.items())[:3])
        where = f"data-parallel rank {rank}" if rank is not None else "this rank"
        raise SplitGroupError(
            f"ResRL needs every response of a group on one rank, but {where} holds {len(bad)} partial "
            f"group(s) ({some}). veRL's `trainer.balance_batch=True` reorders responses by length and "
            f"splits groups: set `trainer.balance_batch=False` (then each rank's share of the batch must "
            f"be a multiple of rollout.n) or reorder with resrl.engines.verl.layouts."
            f"group_preserving_partitions.")


def group_preserving_partitions(seq_lens: list[int], uids: list, k_partitions: int) -> list[list[int]]:
    """veRL's `balance_batch` with whole groups: k lists of row indices, each holding whole groups,
    the same number of groups per partition (veRL splits the reordered batch into equal chunks),
    and balanced total tokens (longest-processing-time greedy over groups).

    seq_lens: (B,) row lengths; uids: (B,) group ids. Rows of a group keep their batch order.
    """
    if len(seq_lens) != len(uids):
        raise ValueError("seq_lens and uids must have the same length")
    groups: dict = {}
    for i, u in enumerate(uids):
        groups.setdefault(u, []).append(i)
    sizes = {len(v) for v in groups.values()}
    if len(sizes) > 1:
        raise ValueError(f"groups of different sizes {sorted(sizes)}: cannot make equal-size partitions")
    if len(groups) % k_partitions:
        raise ValueError(f"{len(groups)} groups cannot be split evenly over {k_partitions} ranks")
    per = len(groups) // k_partitions
    work = sorted(groups.values(), key=lambda rows: (-sum(seq_lens[i] for i in rows), rows[0]))
    parts: list[list[int]] = [[] for _ in range(k_partitions)]
    load, count = [0] * k_partitions, [0] * k_partitions
    for rows in work:
        j = min((p for p in range(k_partitions) if count[p] < per), key=lambda p: (load[p], p))
        parts[j].extend(rows)
        load[j] += sum(seq_lens[i] for i in rows)
        count[j] += 1
    return parts
