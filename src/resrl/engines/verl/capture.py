"""ResRL's penultimate states in the old-log-prob pass of veRL 0.9's engine (one hook, one layer).

`OldLogProbCapture` wraps the policy module of an engine worker (`FSDPEngineWithLMHead.module`):
for each micro-batch of the no-grad old-log-prob pass, `with capture.micro_batch(...)` around the
engine's forward registers one forward hook on decoder layer L−1 (`resrl.engines.hidden`, never
`output_hidden_states`), and on exit turns the hooked output into per-response states:

  remove-padding: the (1, nnz_local, d) slice of the packed sequence is gathered over the Ulysses
                  group (`sp_gather`, veRL's `gather_outputs_and_unpad` along dim 0) *before* use,
                  the tail pad is dropped, rows are cut with cu_seqlens (`layouts.py`)
  padded:         (B, S_max, d) right-padded rows

and hands them to a `RankWeightAccumulator` with the rows' rewards and uids. After the pass,
`finish(group_size)` checks whole groups, computes the weights once for the rank and returns a
(B, T) multiplier — the states stay on the rank.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

import torch
from torch import Tensor, nn

from ...core.resrl_config import ResRLConfig
from ..hidden import ModuleOutputs, find_decoder_layers
from .layouts import response_states_from_packed, response_states_from_padded
from .weights import RankWeightAccumulator, RankWeights


class OldLogProbCapture:
    """One hook on the penultimate layer of `model`, open only inside `micro_batch(...)`.

    storage_device: where the rank keeps states between micro-batches ("cpu" trades a copy for
    GPU memory; default: where the forward ran). sp_gather: (nnz_local, d) -> (nnz_total, d)
    all-gather over the Ulysses group (None without sequence parallelism).
    """

    def __init__(self, model: nn.Module, config: ResRLConfig | None = None, *,
                 sp_gather: Callable[[Tensor], Tensor] | None = None,
                 storage_device: torch.device | str | None = None,
                 std_eps: float = 1e-6, scale_rewards: str = "group"):
        self.config = config if config is not None else ResRLConfig()
        self.hidden = ModuleOutputs(find_decoder_layers(model)[-2], detach=True)
        self.sp_gather = sp_gather
        self.acc = RankWeightAccumulator(self.config, std_eps, scale_rewards, storage_device)

    @contextmanager
    def micro_batch(self, *, row_ids, prompt_lens: Tensor, response_lens: Tensor, rewards: Tensor, uids,
                    cu_seqlens: Tensor | None = None, truncated: Tensor | None = None,
                    token_masks: list[Tensor] | None = None):
        """Open the hook for one micro-batch forward. cu_seqlens given: remove-padding layout."""
        with self.hidden.capture() as outputs:
            yield
        if len(outputs) != 1:
            raise RuntimeError(f"expected one forward of the policy per micro-batch, the hook saw {len(outputs)}")
        h = outputs[0]
        outputs.clear()
        if cu_seqlens is not None:
            packed = h[0] if h.dim() == 3 else h                          # (nnz_local, d)
            if self.sp_gather is not None:
                packed = self.sp_gather(packed)                          # (nnz + pad, d), every shard
            pad = packed.shape[0] - int(cu_seqlens[-1])
            if pad < 0:
                raise RuntimeError(f"packed states hold {packed.shape[0]} positions for {int(cu_seqlens[-1])} "
                                   "tokens: with Ulysses SP pass sp_gather")
            states = response_states_from_packed(packed, cu_seqlens, prompt_lens, response_lens, pad,
                                                 self.config.hidden_alignment)
        else:
            states = response_states_from_padded(h, prompt_lens, response_lens, self.config.hidden_alignment)
        self.acc.add(row_ids, states, rewards, uids, truncated, token_masks)

    def held_bytes(self) -> int:
        return self.acc.held_bytes()

    def finish(self, group_size: int | None = None, rank: int | None = None,
               device: torch.device | str | None = None) -> RankWeights:
        """Weights for the rank (see RankWeightAccumulator.finish); device: where to compute them
        when the states were stored elsewhere (storage_device="cpu")."""
        return self.acc.finish(group_size, rank, device)
