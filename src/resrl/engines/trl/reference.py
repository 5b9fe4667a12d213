"""The reference policy of the TRL engine: a frozen copy of the initial policy built when TRL keeps
none (FlowRL reads log π_ref with a KL coefficient of 0), and the reference log-probs of a round.
With LoRA the reference is the policy with its adapters disabled, as TRL does for the KL.
"""

from __future__ import annotations

import torch

from resrl.engines.trl import compat as trl_compat
from resrl.models.checkpointing import checkpointing_disabled, checkpointing_kwargs


def build_reference_model(trainer):
    """A frozen copy of `trainer`'s initial policy, built and prepared as TRL 1.16 builds its own
    (DeepSpeed / FSDP / plain)."""
    policy = trainer.accelerator.unwrap_model(trainer.model)
    args = trainer.args
    kwargs = dict(args.model_init_kwargs or {})
    kwargs.setdefault("dtype", policy.dtype)
    kwargs.setdefault("attn_implementation", policy.config._attn_implementation)
    if args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
        kwargs["device_map"] = None
    ref = trl_compat.create_model_from_path(trl_compat.get_config_model_id(policy.config), **kwargs)
    if args.disable_dropout:
        trl_compat.disable_dropout_in_model(ref)
    trl_compat.add_fused_lm_head(ref, temperature=trainer.temperature, cast_lm_head_to_fp32=args.cast_lm_head_to_fp32)
    if trainer.is_deepspeed_enabled:
        return trl_compat.prepare_deepspeed(ref, trainer.accelerator)
    if trainer.is_fsdp_enabled:
        return trl_compat.prepare_fsdp(ref, trainer.accelerator)
    return trainer.accelerator.prepare_model(ref, evaluation_mode=True)


def reference_logps(trainer, out: dict) -> torch.Tensor:
    """(B, C) log π_ref of the round's completions: the reference model, or with PEFT the policy
    with its adapters disabled (TRL's own choice for the KL)."""
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    C = out["completion_ids"].shape[1]
    batch_size = trainer.args.per_device_train_batch_size
    with torch.no_grad(), checkpointing_disabled(trainer.model, checkpointing_kwargs(trainer.args)):
        if trainer.ref_model is not None:
            return trainer.per_token_logps(trainer.ref_model, ids, attn, C, batch_size=batch_size)[0]
        policy = trainer.accelerator.unwrap_model(trainer.model)
        with trl_compat.use_adapter(policy, adapter_name="ref" if "ref" in policy.peft_config else None):
            return trainer.per_token_logps(trainer.model, ids, attn, C, batch_size=batch_size)[0]
