"""FlowRL's log Z head in the TRL engine: attached to the policy, read in the loss forward, kept out
of exports and of vLLM's weights, saved in checkpoints and restored on resume.

The head (resrl.core.flowrl.LogZHead) is attached to the policy module as `flowrl_log_z`
(`LOG_Z_ATTR`) so that the optimiser, DDP/ZeRO and gradient clipping treat it as part of the model;
it is left out of every `save_pretrained` (the exported policy is a plain causal LM) and out of
vLLM's weight sync, and saved in checkpoints as `log_z_head.safetensors` (`LOG_Z_FILE`).
"""

from __future__ import annotations

import os

import torch
from accelerate.utils import is_peft_model

from resrl.core.flowrl import LogZHead
from resrl.engines.trl import compat as trl_compat
from resrl.engines.hidden import LastLayerStates

LOG_Z_ATTR = "flowrl_log_z"                 # the log Z head's name inside the policy module
LOG_Z_FILE = "log_z_head.safetensors"       # ... and its file in a checkpoint


def without_log_z_params(named_params):
    """Drop the log Z head's parameters from a (name, tensor) stream (vLLM's weight sync)."""
    for name, param in named_params:
        if LOG_Z_ATTR not in name.split("."):
            yield name, param


class FlowRLHead:
    """The log Z head of one trainer and the last-layer capture that feeds it."""

    def __init__(self, trainer, config):
        """Attach a LogZHead built from `config` (AlgorithmConfig.flowrl) to `trainer`'s policy."""
        ds = trainer.accelerator.state.deepspeed_plugin if trainer.is_deepspeed_enabled else None
        if ds is not None and ds.zero_stage == 3:
            raise ValueError("FlowRL's log Z head is not supported with DeepSpeed ZeRO-3 yet (its checkpoint "
                             "would hold partitioned parameters): use ZeRO-2 or FSDP2")
        policy = trainer.accelerator.unwrap_model(trainer.model)
        param = next(policy.parameters())
        head = LogZHead(policy.config.get_text_config().hidden_size, config.head_layers, config.head_dropout)
        head = head.to(device=param.device, dtype=param.dtype)
        setattr(policy, LOG_Z_ATTR, head)
        # never in save_pretrained: the exported policy is a plain causal LM. (A PEFT model saves only
        # its adapter, so the head is left out there already.)
        if not is_peft_model(policy):
            policy._keys_to_ignore_on_save = set(policy._keys_to_ignore_on_save or ()) | {
                f"{LOG_Z_ATTR}.{k}" for k in head.state_dict()}
        if trainer.use_vllm:  # vLLM knows no such weights: leave them out of the weight sync
            trl_compat.filter_vllm_weights(trainer, without_log_z_params)
        self.module = head
        # the last layer's output at the prompt positions, recorded during the loss forward
        self._last_layer = LastLayerStates(trainer.model, detach=config.detach_head_input)

    def capture(self, prompt_length: int):
        """Open around the loss forward: records the prompt's last-layer states for `log_z`."""
        return self._last_layer.capture(keep_first=prompt_length)

    def log_z(self, prompt_mask: torch.Tensor) -> torch.Tensor:
        """(B,) log Z from the prompt states captured in the loss forward that just ran."""
        states = torch.cat(self._last_layer.outputs)                       # (B, P, d)
        return self.module(states, prompt_mask)

    def save(self, checkpoint_dir: str) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()},
                  os.path.join(checkpoint_dir, LOG_Z_FILE))

    def load(self, checkpoint_dir: str) -> None:
        path = os.path.join(checkpoint_dir, LOG_Z_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{checkpoint_dir} has no {LOG_Z_FILE}: not a FlowRL checkpoint "
                                    "(or written by an older resrl); FlowRL cannot resume without its log Z head")
        from safetensors.torch import load_file

        param = next(self.module.parameters())
        state = {k: v.to(device=param.device, dtype=param.dtype) for k, v in load_file(path).items()}
        self.module.load_state_dict(state)
