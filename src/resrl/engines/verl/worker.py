"""Worker side of the veRL wiring: ResRL's states read in the old-log-prob pass of veRL 0.9's engine.

`ResRLActorRolloutRefWorker` is veRL's `ActorRolloutRefWorker` with one method changed:
`compute_log_prob`. When the batch carries the flag `resrl_capture` (set by the `resrl` trainer,
`trainer.py`), it runs the worker's own pass (`TrainingWorker.infer_batch` ->
`FSDPEngineWithLMHead.forward_backward_batch` -> `forward_step` per micro-batch) with
`infer_with_capture`, which

  1. tags every row with its index (`resrl_row`, a (B,) tensor the engine's micro-batching carries
     along like any other field, also under `use_dynamic_bsz`, which reorders rows);
  2. wraps the engine's `forward_step` for the duration of the call (an instance attribute,
     removed afterwards; the class is not touched) so that each micro-batch forward runs inside
     `OldLogProbCapture.micro_batch` — one forward hook on decoder layer L−1, the packed
     `(1, nnz, d)` (remove-padding, cut with the micro-batch's `input_ids.offsets()`) or padded
     `(B, S, d)` output turned into per-response states;
  3. after the pass computes the rank's weights once (`RankWeightAccumulator.finish`, whole groups
     checked) and adds two fields to the pass's output, which veRL's TransferQueue bridge stores
     with `log_probs`/`entropy`:

        resrl_multiplier   nested (response_len_i,) float32 per row: λ_pos on positives, ω on negatives,
                           0 where veRL's response_mask is 0 (tool output: not in the positives'
                           subspace, no weight)
        resrl_positive     (B,) bool: the split Â > 0 the weights were made with

The (B, T, d) states never leave the rank. Needs veRL (imported here), so it is loaded by the
`verl.plugins` entry point only in a veRL environment.
"""

from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDict
from torch import Tensor

from verl.single_controller.base.decorator import make_nd_compute_dataproto_dispatch_fn, register
from verl.utils import tensordict_utils as tu
from verl.workers.engine_workers import ActorRolloutRefWorker

from ...core.resrl_config import ResRLConfig
from .capture import OldLogProbCapture
from .weights import RankWeights

CAPTURE_KEY = "resrl_capture"        # batch extra_info / non-tensor flag: {"config": {...}, "group_size": n}
REWARD_FIELD = "resrl_reward"        # (B,) float32 sequence reward (the trainer puts it)
GROUP_FIELD = "resrl_group"          # (B,) int64 dense group id (the trainer puts it)
ROW_FIELD = "resrl_row"              # (B,) int64 row index (added here, dropped from the output)
MULTIPLIER_FIELD = "resrl_multiplier"
POSITIVE_FIELD = "resrl_positive"


def infer_with_capture(engine, data: TensorDict, infer: Callable[[TensorDict], TensorDict | None],
                       config: ResRLConfig, group_size: int | None, *, rank: int | None = None,
                       sp_gather: Callable[[Tensor], Tensor] | None = None,
                       storage_device: torch.device | str | None = None) -> tuple[TensorDict | None, RankWeights]:
    """Run `infer(data)` (the worker's old-log-prob pass over `engine`) with ResRL's capture.

    data: the rank's batch (B rows, veRL's jagged `input_ids`/`prompts`/`responses` plus
    REWARD_FIELD and GROUP_FIELD). Returns the pass's output (None on ranks that return none)
    with MULTIPLIER_FIELD / POSITIVE_FIELD added, and the RankWeights (rows in data order).
    """
    for key in (REWARD_FIELD, GROUP_FIELD):
        if key not in data.keys():
            raise KeyError(f"ResRL capture: the batch has no '{key}' field (put by the 'resrl' trainer)")
    batch_size = data.batch_size[0]
    data[ROW_FIELD] = torch.arange(batch_size, dtype=torch.long)
    capture = OldLogProbCapture(engine.module, config, sp_gather=sp_gather, storage_device=storage_device)
    forward_step = engine.forward_step                        # the bound method of the engine's class
    micro_batches = []

    def forward_step_with_capture(micro_batch: TensorDict, loss_function, forward_only):
        rows = micro_batch[ROW_FIELD]
        prompt_lens = micro_batch["prompts"].offsets().diff()
        response_lens = micro_batch["responses"].offsets().diff()
        # the same default as veRL's prepare_model_inputs, so our cut follows the layout the engine built
        packed = bool(tu.get_non_tensor_data(data=micro_batch, key="use_remove_padding", default=True))
        cu_seqlens = micro_batch["input_ids"].offsets() if packed else None
        micro_batches.append(rows.tolist())
        # veRL's response_mask: 0 on tokens the policy did not generate (multi-turn tool output)
        token_masks = (list(micro_batch["response_mask"].cpu().unbind(0)) if "response_mask" in micro_batch.keys()
                       else None)
        with capture.micro_batch(row_ids=rows, prompt_lens=prompt_lens.cpu(), response_lens=response_lens.cpu(),
                                 rewards=micro_batch[REWARD_FIELD], uids=micro_batch[GROUP_FIELD].tolist(),
                                 cu_seqlens=None if cu_seqlens is None else cu_seqlens.cpu(),
                                 token_masks=token_masks):
            return forward_step(micro_batch, loss_function, forward_only)

    engine.forward_step = forward_step_with_capture
    try:
        output = infer(data)
    finally:
        del engine.forward_step                               # back to the class's method
    weights = capture.finish(group_size=group_size, rank=rank)
    weights.stats["micro_batches"] = micro_batches
    order = torch.argsort(weights.row_ids)
    if not torch.equal(weights.row_ids[order], torch.arange(batch_size)):
        raise RuntimeError(f"ResRL capture saw rows {sorted(weights.row_ids.tolist())[:8]}... of {batch_size}: "
                           "the engine did not run every row exactly once")
    multiplier, positive = weights.multiplier[order], weights.positive[order]
    if output is not None:
        lengths = data["responses"].offsets().diff().tolist()
        output[MULTIPLIER_FIELD] = torch.nested.as_nested_tensor(
            [multiplier[i, :n].contiguous() for i, n in enumerate(lengths)], layout=torch.jagged)
        output[POSITIVE_FIELD] = positive
    return output, RankWeights(torch.arange(batch_size), multiplier, positive, weights.stats)


def capture_settings(config: ResRLConfig, group_size: int) -> dict:
    """The `resrl_capture` flag the trainer puts in the batch's extra_info."""
    from dataclasses import asdict

    return {"config": asdict(config), "group_size": int(group_size)}


class ResRLActorRolloutRefWorker(ActorRolloutRefWorker):
    """veRL's actor/rollout/ref worker; `compute_log_prob` also returns ResRL's weights when asked."""

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    def compute_log_prob(self, data: TensorDict) -> TensorDict:
        settings = tu.pop(data, key=CAPTURE_KEY, default=None)
        if not settings:
            return super().compute_log_prob(data)
        if tu.get_non_tensor_data(data=data, key="no_lora_adapter", default=False):
            raise RuntimeError("ResRL capture was asked for in a pass without the LoRA adapter (the "
                               "reference pass): the weights must come from the policy's own states")
        engine = self.actor.engine
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else None
        sp_gather = None
        if getattr(engine, "ulysses_sequence_parallel_size", 1) > 1:
            from verl.utils.ulysses import gather_outputs_and_unpad

            def sp_gather(packed: Tensor) -> Tensor:      # (nnz_local, d) -> (nnz + pad, d), Ulysses group
                return gather_outputs_and_unpad(packed, gather_dim=0, unpad_dim=None, grad_scaler=False)

        output, _ = infer_with_capture(engine, data, super().compute_log_prob, ResRLConfig(**settings["config"]),
                                       settings["group_size"], rank=rank, sp_gather=sp_gather)
        return output


__all__ = ["infer_with_capture", "capture_settings", "ResRLActorRolloutRefWorker", "CAPTURE_KEY", "REWARD_FIELD",
           "GROUP_FIELD", "ROW_FIELD", "MULTIPLIER_FIELD", "POSITIVE_FIELD"]
