"""PPO's critic in the TRL engine (`algorithm.name: ppo`): a value head on a trunk, its own AdamW,
its values at rollout time, its loss in each micro-batch, its step, its warm-up and its checkpoint.
The math — GAE, whitening, the clipped value loss — is resrl.core.gae / resrl.core.value.

    trunk: separate   a copy of the policy's initial transformer (or `critic.model_path`) and a
                      value head, optimised by the critic's AdamW alone (veRL / verl-agent's critic)
    trunk: shared     a value head on the policy's own last-layer states (the final norm's output,
                      Hugging Face's hidden_states[-1]); the value loss joins the policy loss, so the
                      policy's optimiser trains the trunk on both and the critic's AdamW the head

One generation round (`advantages`, called by the adapter's round and by the step layout's):
the critic's values V_t at every response position (no grad; for token t the state before it,
the position whose logits sample t), then `compute_ppo_targets` (GAE, whitened over every
process's rows), kept in the batch as `old_values`, `returns`, `value_mask`. Each micro-batch
(`loss`): the values again with grad (separate trunk: its forward; shared: the states the policy's
loss forward produced), the clipped value loss, added to the policy loss; its gradient accumulates
with the policy's. Each optimiser update (`step`, from an HF callback just before the policy's
optimiser steps): the critic's gradients averaged over processes (the critic is outside DDP),
clipped, one AdamW step. During `critic.warmup_steps` the policy's gradients are dropped before its
optimiser steps (AdamW skips parameters without a gradient: no update, no weight decay, no moment
change): only the critic trains, as veRL's `trainer.critic_warmup` — the steps count towards
train.max_steps and the policy's learning-rate schedule.

Checkpoints hold the critic (`critic.safetensors`: trunk and head) and its optimiser
(`critic_optimizer.pt`); a resumed run continues it exactly. The separate trunk is replicated on
every process (not sharded by FSDP / ZeRO): it costs one more model's parameters and AdamW state.
"""

from __future__ import annotations

import copy
import logging
import os

import torch
from accelerate.utils import is_peft_model
from torch import nn
from transformers import TrainerCallback

from resrl.core.registry import AdvantageInputs, compute_ppo_targets
from resrl.core.value import CriticConfig, value_loss
from resrl.engines.trl import compat as trl_compat
from resrl.engines.hidden import LastLayerStates, align_response_hidden
from resrl.models.checkpointing import checkpointing_disabled, checkpointing_kwargs, set_checkpointing

logger = logging.getLogger(__name__)

CRITIC_FILE = "critic.safetensors"              # the trunk (separate) and the value head
CRITIC_OPTIMIZER_FILE = "critic_optimizer.pt"   # the critic's AdamW state
# the per-token keys the critic adds to a generation batch ((B, C) rows, split with the batch)
CRITIC_BATCH_KEYS = ("old_values", "returns", "value_mask")


class ValueHead(nn.Module):
    """V(h) = w·h + b: one scalar per position from a trunk state h (d,)."""

    def __init__(self, hidden_size: int, seed: int = 0):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        # a private generator: building the critic leaves the global RNG (the rollouts' sampling) as it was
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(self.linear.weight.shape, generator=g) * 0.02)
            self.linear.bias.zero_()

    def forward(self, states: torch.Tensor) -> torch.Tensor:   # (B, C, d) -> (B, C)
        return self.linear(states).squeeze(-1)


def _policy_dtype(policy) -> torch.dtype:
    return next(policy.parameters()).dtype


def build_trunk(policy, config: CriticConfig) -> nn.Module:
    """The separate trunk: `config.model_path` loaded, else a copy of the policy's transformer (its
    base model's directory with PEFT, whose adapters are the policy's). Every parameter trains."""
    from transformers import AutoModel

    dtype = _policy_dtype(policy)
    path = config.model_path
    if path is None and is_peft_model(policy):
        path = next(iter(policy.peft_config.values())).base_model_name_or_path
        if not path or not os.path.isdir(path):
            raise ValueError("critic.trunk separate with LoRA: the critic loads the base model from a directory; "
                             f"the policy's base ({path!r}) is not one — set critic.model_path")
    if path is not None:
        if not os.path.isdir(path):
            raise ValueError(f"config key 'critic.model_path': directory {path!r} does not exist")
        trunk = AutoModel.from_pretrained(path, dtype=dtype)
    else:
        trunk = copy.deepcopy(policy.base_model)
    policy_vocab = policy.config.get_text_config().vocab_size
    trunk_vocab = trunk.config.get_text_config().vocab_size
    if trunk_vocab != policy_vocab:
        raise ValueError(f"config key 'critic.model_path': the critic's vocabulary ({trunk_vocab}) is not the "
                         f"policy's ({policy_vocab}); the critic reads the policy's token ids")
    trunk.requires_grad_(True)
    return trunk


class Critic:
    """The critic of one ResRLTrainer (module docstring)."""

    def __init__(self, trainer, config: CriticConfig):
        self.config = config
        self.accelerator = trainer.accelerator
        args = trainer.args
        device = self.accelerator.device
        policy = self.accelerator.unwrap_model(trainer.model)
        if config.warmup_steps and trainer.is_deepspeed_enabled:
            raise ValueError("critic.warmup_steps > 0 is not supported with DeepSpeed (its engine steps the policy "
                             "inside the backward pass, so the warm-up cannot hold the policy back)")
        self.trunk = None
        if config.trunk == "separate":
            self.trunk = build_trunk(policy, config).to(device)
            if args.disable_dropout:
                trl_compat.disable_dropout_in_model(self.trunk)
            if getattr(args, "activation_checkpointing", getattr(args, "gradient_checkpointing", False)):
                set_checkpointing(self.trunk, True, checkpointing_kwargs(args) or {"use_reentrant": False})
            self.trunk.train()
            hidden_size = self.trunk.config.get_text_config().hidden_size
            self._states = None
        else:
            hidden_size = policy.config.get_text_config().hidden_size
            # the final norm's output in the policy's loss forward, with its graph (the trunk learns from V)
            self._states = LastLayerStates(trainer.model, detach=False)
        self.head = ValueHead(hidden_size, seed=args.seed).to(device=device, dtype=_policy_dtype(policy))
        self.params = [p for p in (self.trunk.parameters() if self.trunk is not None else ())] + \
            list(self.head.parameters())
        self.learning_rate = config.resolved_learning_rate(args.learning_rate)
        self.optimizer = torch.optim.AdamW(self.params, lr=self.learning_rate, weight_decay=config.weight_decay,
                                           betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon)
        self._captured: list | None = None
        trainer.add_callback(CriticCallback(self, trainer))
        logger.info("PPO critic: %s trunk, learning rate %g, value clip %s, warm-up %d updates", config.trunk,
                    self.learning_rate, config.value_clip, config.warmup_steps)

    # ---- values ----------------------------------------------------------------------------------

    def _trunk_values(self, input_ids, attention_mask, C: int) -> torch.Tensor:
        """(B, C) values of the separate trunk: V_t from the state at position t − 1 (predicting)."""
        with self.accelerator.autocast():
            states = self.trunk(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(align_response_hidden(states, C, "predicting"))

    @torch.no_grad()
    def values(self, trainer, out: dict) -> torch.Tensor:
        """(B, C) the critic's values at the round's response positions (no grad)."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        C, bs = out["completion_ids"].shape[1], trainer.args.per_device_train_batch_size
        if self.trunk is not None:
            chunks = [self._trunk_values(ids[i:i + bs], attn[i:i + bs], C) for i in range(0, ids.shape[0], bs)]
            return torch.cat(chunks).float() if chunks else ids.new_zeros((0, C), dtype=torch.float32)
        with self._states.capture(keep_last=C + 1) as states, \
                checkpointing_disabled(trainer.model, checkpointing_kwargs(trainer.args)):
            trainer.per_token_logps(trainer.model, ids, attn, C, batch_size=bs)
        return self.head(align_response_hidden(torch.cat(states), C, "predicting")).float()

    def advantages(self, trainer, out: dict, inputs: AdvantageInputs) -> tuple[torch.Tensor, dict]:
        """The round's PPO advantages (B, C) and statistics; keeps the critic's targets in `out`."""
        accelerator = self.accelerator
        values = self.values(trainer, out)
        batch_sum = (lambda t: accelerator.reduce(t, "sum")) if accelerator.num_processes > 1 else None
        targets = compute_ppo_targets(_replace(inputs, values=values, batch_sum=batch_sum), trainer.algorithm)
        out["old_values"], out["returns"], out["value_mask"] = values, targets.returns, targets.value_mask
        # the value loss's token-mean normaliser over an update, estimated as TRL's num_items_in_batch is
        out["num_value_items"] = accelerator.gather(targets.value_mask.sum().reshape(1)).sum()
        return targets.advantages, targets.stats

    # ---- one micro-batch -------------------------------------------------------------------------

    def capture(self, completion_length: int):
        """Open around the policy's loss forward: the shared trunk's states (a no-op when separate)."""
        import contextlib

        if self._states is None:
            return contextlib.nullcontext()

        @contextlib.contextmanager
        def recording():
            with self._states.capture(keep_last=completion_length + 1) as states:
                self._captured = states
                yield
        return recording()

    def loss(self, inputs: dict, policy_agg: str, max_response_length: int | None) -> tuple[torch.Tensor, dict]:
        """(value_coef · L_V of this micro-batch, stats). Call after the policy's loss forward."""
        C = inputs["completion_ids"].shape[1]
        if self.trunk is not None:
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
            attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
            new = self._trunk_values(ids, attn, C)
        else:
            if not self._captured:
                raise RuntimeError("PPO critic (shared trunk): the policy's loss forward did not run its final norm")
            new = self.head(align_response_hidden(torch.cat(self._captured), C, "predicting"))
            self._captured = None
        loss, stats = value_loss(new, inputs["old_values"], inputs["returns"], inputs["value_mask"],
                                 self.config.value_clip, self.config.loss_agg or policy_agg, max_response_length)
        return self.config.value_coef * loss, stats

    # ---- one optimiser update ----------------------------------------------------------------------

    def in_warmup(self, global_step: int) -> bool:
        return global_step < self.config.warmup_steps

    def step(self, trainer, global_step: int) -> dict:
        """Average the critic's gradients over processes, clip, one AdamW step; during the warm-up, drop
        the policy's gradients so that its optimiser leaves it as it is. Returns the step's metrics."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        if self.accelerator.num_processes > 1:
            flat = self.accelerator.reduce(torch.cat([g.reshape(-1).float() for g in grads]), "mean")
            offset = 0
            for p, g in zip(self.params, grads):
                p.grad = flat[offset:offset + g.numel()].view_as(g).to(g.dtype)
                offset += g.numel()
        else:
            for p, g in zip(self.params, grads):
                p.grad = g
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        warm = self.in_warmup(global_step)
        if warm:
            for p in trainer.model.parameters():
                p.grad = None
        return {"critic/grad_norm": float(grad_norm), "critic/learning_rate": self.learning_rate,
                "critic/warmup": float(warm)}

    # ---- checkpoints -----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        state = {f"head.{k}": v for k, v in self.head.state_dict().items()}
        if self.trunk is not None:
            state.update({f"trunk.{k}": v for k, v in self.trunk.state_dict().items()})
        return state

    def save(self, checkpoint_dir: str) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()},
                  os.path.join(checkpoint_dir, CRITIC_FILE))
        torch.save(self.optimizer.state_dict(), os.path.join(checkpoint_dir, CRITIC_OPTIMIZER_FILE))

    def load(self, checkpoint_dir: str) -> None:
        from safetensors.torch import load_file

        path = os.path.join(checkpoint_dir, CRITIC_FILE)
        opt_path = os.path.join(checkpoint_dir, CRITIC_OPTIMIZER_FILE)
        if not (os.path.isfile(path) and os.path.isfile(opt_path)):
            raise FileNotFoundError(f"{checkpoint_dir} has no {CRITIC_FILE} / {CRITIC_OPTIMIZER_FILE}: not a PPO "
                                    "checkpoint (or written by an older resrl); PPO cannot resume without its critic")
        state = load_file(path, device=str(self.accelerator.device))
        self.head.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("head.")})
        if self.trunk is not None:
            self.trunk.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("trunk.")})
        self.optimizer.load_state_dict(torch.load(opt_path, map_location=self.accelerator.device, weights_only=True))


def _replace(inputs: AdvantageInputs, **changes) -> AdvantageInputs:
    import dataclasses

    return dataclasses.replace(inputs, **changes)


class CriticCallback(TrainerCallback):
    """Steps the critic just before the policy's optimiser (HF's on_pre_optimizer_step), on every process."""

    def __init__(self, critic: Critic, trainer):
        self.critic, self.trainer = critic, trainer

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        metrics = self.critic.step(self.trainer, state.global_step)
        sink = trl_compat.metrics(self.trainer, "train")
        for k, v in metrics.items():
            sink[k].append(v)


__all__ = ["Critic", "CriticCallback", "ValueHead", "build_trunk", "CRITIC_FILE", "CRITIC_OPTIMIZER_FILE",
           "CRITIC_BATCH_KEYS"]
