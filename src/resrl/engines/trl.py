"""`ResRLTrainer`: TRL's `GRPOTrainer` (tested with trl==1.16.0) training every algorithm of
`resrl.core.registry` with the policy loss the algorithm names (`resrl.core.loss.POLICY_LOSSES`:
the clipped surrogate `policy_loss`, or FlowRL's trajectory balance).

The adapter holds no math: it collects what the core needs — rewards, group ids, response masks,
truncation flags and, for ResRL, penultimate-layer hidden states — and calls the core.

Data flow of one generation round (TRL's names):

    _prepare_inputs
      └ _generate_and_score_completions      (override)
          ├ super(): generate, score (rewards gathered over processes), TRL's group advantages
          │          [ignored], old log-probs when generation and updates are misaligned
          ├ DAPO dynamic sampling: drop all-equal groups, refill from fresh prompts   (ours)
          └ token advantages (B, T) from resrl.core         — unless ResRL runs "aligned"
      └ whole-group shuffle, split into micro-batches
    _compute_loss                            (override)
      ├ forward: log-probs, entropy (+ penultimate states through the hook, ResRL aligned)
      │          (+ last-layer prompt states -> log Z head, FlowRL)
      └ the algorithm's policy loss from resrl.core.loss.POLICY_LOSSES (clipped surrogate, FlowRL)

FlowRL: the trainer owns the log Z head (resrl.core.flowrl.LogZHead), attached to the policy
module as `flowrl_log_z` so that the optimiser, DDP/ZeRO and gradient clipping treat it as part of
the model; it is left out of every `save_pretrained` (the exported policy is a plain causal LM) and
out of vLLM's weight sync, saved in checkpoints as `log_z_head.safetensors` and restored on resume.
FlowRL needs log π_ref with a zero KL coefficient: the trainer then keeps a reference model itself
(with LoRA: the policy with its adapters disabled, as TRL does for the KL).

ResRL hidden states (spec §2), two modes, chosen once and logged:
  "aligned"    every device micro-batch holds whole groups of one round and the round is used
               for exactly one update: the weights are computed inside the training forward,
               from the states the loss forward produces anyway. No extra pass.
  "extra-pass" otherwise: one no-grad pass over the local generation batch yields the states AND
               the old log-probs (TRL's own old-log-prob pass when it runs one, else ours).
               Groups split across processes are gathered (engines/batches.py).
NTHR and ResRL's weighting="interference" read the head sketch instead (resrl.core.interference):
the final norm's output at the predicting position, captured by the same mechanism in the same
pass, and the top-K of its tempered softmax (one head product over the response tokens, chunked).
The states come from an explicit capture of the policy's own forward: a no-grad call of
`_get_per_token_logps_and_entropies` is recorded only while a round asks for it, only when the
module is the policy, and only with its adapters enabled (PEFT's reference = adapters off).

TRL's own loss options are either honoured by `resrl.core.loss.policy_loss` (vLLM importance-
sampling correction, the MoE router aux loss, `importance_sampling_level` and
`top_entropy_quantile`, adopted into the LossConfig: `_adopt_trl_loss_options`) or refused at construction (`UNSUPPORTED_TRL_OPTIONS`):
nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil

import torch
from accelerate.utils import is_peft_model
from torch.utils.data import DataLoader
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler, identity, split_tensor_dict, use_adapter

from resrl.checkpoint import STAGING, publish, rotate
from resrl.core.advantages import dynamic_sampling_mask
from resrl.core.flowrl import LogZHead
from resrl.core.loss import LossConfig, PolicyLossInputs, get_policy_loss, kl_estimate
from resrl.core.interference import head_sketch
from resrl.core.registry import (AdvantageInputs, AlgorithmConfig, captured_states, compute_token_advantages,
                                 get_algorithm)
from resrl.engines.batches import (aligned_layout_possible, concat_batches, local_token_advantages, select_rows,
                                   shuffle_groups)
from resrl.engines.steps import StepRolloutConfig
from resrl.engines.hidden import LastLayerStates, PenultimateHidden, adapters_enabled, align_response_hidden
from resrl.models.checkpointing import checkpointing_disabled, checkpointing_kwargs
from resrl.models.generation import model_defaults_hidden

logger = logging.getLogger(__name__)

# keys this adapter adds to TRL's generation batch: (B,) rows
ROW_KEYS = ("rewards", "group_index", "truncated")
LOG_Z_ATTR = "flowrl_log_z"                 # the log Z head's name inside the policy module
LOG_Z_FILE = "log_z_head.safetensors"       # ... and its file in a checkpoint

# GRPOConfig loss-side options that `_compute_loss` (replaced here) would apply and
# resrl.core.loss.policy_loss does not: (field, the value that means "off", why it is refused)
UNSUPPORTED_TRL_OPTIONS = (
    ("off_policy_mask_threshold", None, "the off-policy sequence mask is not part of resrl.core's loss"),
    ("use_liger_kernel", None, "Liger's fused GRPO loss would bypass resrl.core's loss"),
    ("delta", None, "two-sided ratio clipping: use loss.dual_clip_c"),
    ("use_adaptive_entropy", False, "the entropy bonus is loss.entropy_coef"),
    ("entropy_coef", 0.0, "the entropy bonus is loss.entropy_coef"),
)


class ResRLTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages are the `(B, T)` token advantages of `algorithm` and whose loss
    is the algorithm's policy loss from `resrl.core.loss.POLICY_LOSSES` with `loss_config`.

    algorithm:          resrl.core.registry.AlgorithmConfig (name, shaping, ResRL settings)
    loss_config:        resrl.core.loss.LossConfig (aggregation, clip-higher, dual-clip, KL, entropy)
    resrl_mode:         "auto" | "aligned" | "extra-pass" (see the module docstring)
    dynamic_sampling:   DAPO's filter-and-refill; None = the algorithm's default
    max_refill_rounds:  extra generation rounds allowed per step to refill dropped groups
    Other arguments are GRPOTrainer's (`args` a GRPOConfig whose `num_generations` is G).
    """

    def __init__(self, *args, algorithm: AlgorithmConfig, loss_config: LossConfig, resrl_mode: str = "auto",
                 dynamic_sampling: bool | None = None, max_refill_rounds: int = 4,
                 step_rollout: StepRolloutConfig | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        spec = get_algorithm(algorithm.name)
        self.step_rollout = step_rollout
        self._env_pool = None
        self._check_step_layout(algorithm.name, spec, resrl_mode, dynamic_sampling)
        self.algorithm, self.loss_config = algorithm, self._adopt_trl_loss_options(loss_config)
        needs_penultimate, needs_head, self.head_topk = captured_states(algorithm)
        if needs_head and step_rollout is not None:
            raise ValueError(f"algorithm {algorithm.name!r} (with resrl.weighting={algorithm.resrl.weighting!r}) "
                             "needs the head sketch, which step-level rollouts do not capture: use resrl with the "
                             "default weighting, gigpo-resrl, or the concatenated layout")
        # states of the policy's own forward are needed (the ResRL modes below apply to both kinds)
        self.needs_hidden = needs_penultimate or needs_head
        self.dynamic_sampling = spec.dynamic_sampling if dynamic_sampling is None else bool(dynamic_sampling)
        self.max_refill_rounds = max_refill_rounds
        self.hidden_alignment = algorithm.resrl.hidden_alignment
        self.resrl_mode = self._choose_mode(resrl_mode)
        self._check_trl_options()
        self._hidden = PenultimateHidden(self.model) if needs_penultimate else None
        # NTHR / ResRL weighting="interference": the output head's input (the final norm's output)
        self._head = LastLayerStates(self.model, detach=True) if needs_head else None
        if needs_head:
            text_config = self.accelerator.unwrap_model(self.model).config.get_text_config()
            for name, neutral in (("final_logit_softcapping", None), ("logit_scale", 1.0)):
                value = getattr(text_config, name, neutral)
                if value not in (None, neutral):
                    raise ValueError(f"algorithm {algorithm.name!r} (head sketch) supports output heads z = W x̂ + b only; "
                                     f"this model's config has {name}={value!r}")
        self._policy_loss = get_policy_loss(spec.policy_loss)
        if spec.policy_loss != "clipped-surrogate" and self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(f"GRPOConfig.vllm_importance_sampling_correction=True is not supported with the "
                             f"{spec.policy_loss!r} loss (it has no per-token surrogate to weight); set it to false")
        self.needs_reference = spec.needs_reference or loss_config.kl_coef > 0
        if spec.needs_reference and self.ref_model is None and not self._is_peft():
            self.ref_model = self._build_reference_model()
        self.log_z_head = self._attach_log_z_head() if spec.needs_log_z else None
        self._last_layer = LastLayerStates(self.model, detach=algorithm.flowrl.detach_head_input) \
            if spec.needs_log_z else None
        # armed (a list) while a generation round wants the policy's no-grad states (extra-pass mode)
        self._pass_states: list | None = None
        self._update_rows = 0  # completion rows that reached the loss in the current update (train/completions)
        self._last_rewards = None
        self._refill_iter = None
        if self.needs_hidden:
            msg = (f"ResRL weights: {self.resrl_mode} mode "
                   + ("(inside the training forward, no extra pass)" if self.resrl_mode == "aligned" else
                      "(one no-grad pass over each generation batch for hidden states and old log-probs)"))
            # the extra pass costs a forward per round: say so where users look
            (logger.warning if self.resrl_mode == "extra-pass" else logger.info)(msg)

    # ---- configuration -------------------------------------------------------------------------

    def aligned_possible(self) -> bool:
        a = self.args
        return aligned_layout_possible(a.per_device_train_batch_size, self.num_generations, a.steps_per_generation,
                                       a.gradient_accumulation_steps, self.num_iterations, self.algorithm.scale_rewards)

    # ---- FlowRL: reference model and log Z head ---------------------------------------------------

    def _is_peft(self) -> bool:
        return is_peft_model(self.accelerator.unwrap_model(self.model))

    def _build_reference_model(self):
        """A frozen copy of the initial policy for log π_ref when TRL keeps none (KL coefficient 0),
        built and prepared as TRL builds its own (DeepSpeed / FSDP / plain)."""
        from trl.models import prepare_deepspeed, prepare_fsdp
        from trl.trainer.utils import add_fused_lm_head, create_model_from_path, disable_dropout_in_model, \
            get_config_model_id

        policy = self.accelerator.unwrap_model(self.model)
        kwargs = dict(self.args.model_init_kwargs or {})
        kwargs.setdefault("dtype", policy.dtype)
        kwargs.setdefault("attn_implementation", policy.config._attn_implementation)
        if self.args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
            kwargs["device_map"] = None
        ref = create_model_from_path(get_config_model_id(policy.config), **kwargs)
        if self.args.disable_dropout:
            disable_dropout_in_model(ref)
        add_fused_lm_head(ref, temperature=self.temperature, cast_lm_head_to_fp32=self.args.cast_lm_head_to_fp32)
        if self.is_deepspeed_enabled:
            return prepare_deepspeed(ref, self.accelerator)
        if self.is_fsdp_enabled:
            return prepare_fsdp(ref, self.accelerator)
        return self.accelerator.prepare_model(ref, evaluation_mode=True)

    def _attach_log_z_head(self) -> LogZHead:
        """Attach FlowRL's log Z head to the policy module (see the module docstring)."""
        ds = self.accelerator.state.deepspeed_plugin if self.is_deepspeed_enabled else None
        if ds is not None and ds.zero_stage == 3:
            raise ValueError("FlowRL's log Z head is not supported with DeepSpeed ZeRO-3 yet (its checkpoint "
                             "would hold partitioned parameters): use ZeRO-2 or FSDP2")
        policy = self.accelerator.unwrap_model(self.model)
        cfg = self.algorithm.flowrl
        param = next(policy.parameters())
        head = LogZHead(policy.config.get_text_config().hidden_size, cfg.head_layers, cfg.head_dropout)
        head = head.to(device=param.device, dtype=param.dtype)
        setattr(policy, LOG_Z_ATTR, head)
        # never in save_pretrained: the exported policy is a plain causal LM. (A PEFT model saves only
        # its adapter, so the head is left out there already.)
        if not self._is_peft():
            policy._keys_to_ignore_on_save = set(policy._keys_to_ignore_on_save or ()) | {
                f"{LOG_Z_ATTR}.{k}" for k in head.state_dict()}
        if self.use_vllm:  # vLLM knows no such weights: leave them out of the weight sync
            generation = self.vllm_generation
            iterate = generation._iter_named_params
            generation._iter_named_params = lambda: without_log_z_params(iterate())
        return head

    def _log_z(self, prompt_mask: torch.Tensor) -> torch.Tensor:
        """(B,) log Z from the prompt states captured in the loss forward that just ran."""
        states = torch.cat(self._last_layer.outputs)                       # (B, P, d)
        return self.log_z_head(states, prompt_mask)

    def _adopt_trl_loss_options(self, loss_config: LossConfig) -> LossConfig:
        """GRPOConfig's `importance_sampling_level` / `top_entropy_quantile` (TRL users set them
        there) become the LossConfig's, which the core's loss honours; set in both places to
        different non-default values is a ValueError naming the field."""
        import dataclasses

        updates = {}
        for name, default in (("importance_sampling_level", "token"), ("top_entropy_quantile", 1.0)):
            theirs, ours = getattr(self.args, name, default), getattr(loss_config, name)
            if theirs == default or theirs == ours:
                continue
            if ours != default:
                raise ValueError(f"GRPOConfig.{name}={theirs!r} conflicts with loss_config.{name}={ours!r}: "
                                 "set it in one place")
            updates[name] = theirs
        return dataclasses.replace(loss_config, **updates) if updates else loss_config

    def _check_trl_options(self) -> None:
        """Refuse the GRPOConfig loss options this trainer's loss would silently ignore."""
        for name, off, why in UNSUPPORTED_TRL_OPTIONS:
            value = getattr(self.args, name, off)
            if value != off and not (off is None and value is False):
                raise ValueError(f"GRPOConfig.{name}={value!r} is not supported by ResRLTrainer: {why}")
        if self.args.loss_type != "dapo":  # GRPOConfig's default; any other value would be ignored
            raise ValueError(f"GRPOConfig.loss_type={self.args.loss_type!r} is not supported by ResRLTrainer: its loss "
                             "is resrl.core.loss.policy_loss (aggregation = loss_config.agg)")
        if self.use_vllm and self.vllm_importance_sampling_correction:
            logger.info("vLLM importance-sampling correction (%s) is applied in resrl.core.loss.policy_loss",
                        self.vllm_importance_sampling_mode)

    def _check_step_layout(self, name: str, spec, resrl_mode: str, dynamic_sampling) -> None:
        """The step layout computes every advantage on the whole generation round (variable rows per
        group): no aligned mode, no dynamic sampling, whole games per process."""
        if self.step_rollout is None:
            if spec.step_level:
                raise ValueError(f"algorithm {name!r} needs step-level rollouts "
                                 "(step_rollout=..., config env.layout: step)")
            return
        if self.rollout_func is not None:
            raise ValueError("ResRLTrainer: step_rollout and rollout_func are exclusive")
        if self.use_vllm:
            raise ValueError("GRPOConfig.use_vllm=True: vLLM generation is not wired into step-level rollouts yet "
                             "(they generate with the policy's HF generate)")
        if resrl_mode == "aligned":
            raise ValueError("resrl_mode='aligned' is impossible with step-level rollouts (a game's step rows "
                             "are split over micro-batches): use auto or extra-pass")
        if dynamic_sampling or spec.dynamic_sampling:
            raise ValueError("dynamic sampling is not supported with step-level rollouts")
        local = self.args.per_device_train_batch_size * self.args.steps_per_generation
        if local % self.num_generations:
            raise ValueError(f"step-level rollouts need whole games per process: the local generation batch "
                             f"({local}) must be a multiple of num_generations ({self.num_generations})")

    def _choose_mode(self, requested: str) -> str:
        if requested not in ("auto", "aligned", "extra-pass"):
            raise ValueError(f"resrl_mode must be auto, aligned or extra-pass, got {requested!r}")
        if self.step_rollout is not None:
            return "extra-pass"
        if requested == "aligned" and not self.aligned_possible():
            raise ValueError("resrl_mode='aligned' needs whole groups per device micro-batch "
                             "(per_device_train_batch_size % num_generations == 0), one update per generation "
                             "round and scale_rewards != 'batch'")
        if requested == "auto":
            return "aligned" if self.aligned_possible() else "extra-pass"
        return requested

    # ---- rewards and hidden states ------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights[None]).nansum(dim=1)  # (global B,)
        self._last_rewards = rewards
        return rewards_per_func

    def is_policy_forward(self, model) -> bool:
        """Is `model` the trained policy as it samples (not the reference model, and not the policy
        with its PEFT adapters disabled, which is how TRL computes the reference with LoRA)?"""
        unwrapped = self.accelerator.unwrap_model(model)
        return (model is self.model or unwrapped is self.model
                or unwrapped is self.accelerator.unwrap_model(self.model)) and adapters_enabled(unwrapped)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        # Extra-pass mode: a round that armed `_pass_states` records the states of the policy's own
        # no-grad pass (TRL's old-log-prob pass, or ours); reference passes are never recorded.
        if self._pass_states is not None and not torch.is_grad_enabled() and self.is_policy_forward(model):
            if self._pass_states:
                raise RuntimeError("ResRLTrainer: two no-grad passes of the policy in one generation round; "
                                   "the hidden states for ResRL's weights would be ambiguous")
            with self._capture_states(logits_to_keep) as states:
                result = super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
            self._pass_states.append(self._finish_states(states, input_ids[:, -logits_to_keep:]))
            return result
        return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                          *args, **kwargs)

    @contextlib.contextmanager
    def _capture_states(self, completion_length: int):
        """Record, during one policy forward, what the algorithm reads: the penultimate layer's
        outputs (ResRL) and/or the output head's input (NTHR, ResRL weighting="interference"), at
        the last C + 1 positions. Yields {"hidden": [...], "head": [...]} (lists of (b, C+1, d))."""
        states = {"hidden": [], "head": []}
        with contextlib.ExitStack() as stack:
            if self._hidden is not None:
                states["hidden"] = stack.enter_context(self._hidden.capture(keep_last=completion_length + 1))
            if self._head is not None:
                states["head"] = stack.enter_context(self._head.capture(keep_last=completion_length + 1))
            yield states

    def _finish_states(self, states: dict, completion_ids: torch.Tensor):
        """Captured outputs -> (hidden (B, C, d) aligned as configured | None, HeadSketch | None).
        The head sketch is at the predicting position (the head input that produced token t's
        logits), with the top-K of softmax(x̂ Wᵀ + b) / temperature: one head product over the
        response tokens, in chunks."""
        C = completion_ids.shape[1]
        hidden = head = None
        if self._hidden is not None:
            if not states["hidden"]:
                raise RuntimeError("ResRLTrainer: the policy forward did not run the penultimate decoder layer")
            hidden = align_response_hidden(torch.cat(states["hidden"]), C, self.hidden_alignment)
        if self._head is not None:
            if not states["head"]:
                raise RuntimeError("ResRLTrainer: the policy forward did not run the final norm")
            x = align_response_hidden(torch.cat(states["head"]), C, "predicting")
            out_head = self.accelerator.unwrap_model(self.model).get_output_embeddings()
            bias = getattr(out_head, "bias", None)
            head = head_sketch(x, out_head.weight.detach(), None if bias is None else bias.detach(), completion_ids,
                               self.head_topk, temperature=self.temperature)
        return hidden, head

    def _generate_once(self, inputs) -> dict:
        """TRL's generate-and-score, plus the rows' rewards, global group ids, truncation flags and
        (extra-pass ResRL) hidden states with the matching old log-probs."""
        extra_pass = self.needs_hidden and self.resrl_mode == "extra-pass"
        self._pass_states = [] if extra_pass else None
        try:
            # TRL's generate would fill the settings its GenerationConfig leaves None (min_p, typical_p,
            # no_repeat_ngram_size, ...) from the model's generation_config: hide it (resrl.models.generation)
            with model_defaults_hidden(self.accelerator.unwrap_model(self.model)):
                out = super()._generate_and_score_completions(inputs)
        finally:
            captured, self._pass_states = self._pass_states, None
        ids, mask = out["completion_ids"], out["completion_mask"]
        B, device = ids.shape[0], ids.device
        start = self.accelerator.process_index * B
        out["rewards"] = torch.nan_to_num(self._last_rewards[start:start + B].float(), nan=0.0)
        out["group_index"] = (start + torch.arange(B, device=device)) // self.num_generations
        lengths = mask.sum(dim=1)
        last = ids.gather(1, (lengths - 1).clamp(min=0)[:, None])[:, 0]
        ends = torch.zeros_like(last, dtype=torch.bool)
        for eos in self.eos_token_ids:
            ends |= last == eos
        out["truncated"] = (lengths == 0) | ~ends
        if self.needs_reference and out.get("ref_per_token_logps") is None:  # FlowRL with KL coefficient 0
            out["ref_per_token_logps"] = self._reference_logps(out)
        if extra_pass:
            if not captured:  # TRL ran no old-log-prob pass of the policy: run the one pass here
                self._pass_states = captured
                try:
                    with torch.no_grad(), checkpointing_disabled(self.model, checkpointing_kwargs(self.args)):
                        old, _, _ = self._get_per_token_logps_and_entropies(
                            self.model, torch.cat([out["prompt_ids"], ids], 1),
                            torch.cat([out["prompt_mask"], mask], 1), ids.shape[1],
                            batch_size=self.args.per_device_train_batch_size)
                finally:
                    self._pass_states = None
                out["old_per_token_logps"] = old
            out["hidden"], out["head"] = captured[0]
        return out

    def _reference_logps(self, out: dict) -> torch.Tensor:
        """(B, C) log π_ref of the round's completions: the reference model, or with PEFT the policy
        with its adapters disabled (TRL's own choice for the KL)."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        C = out["completion_ids"].shape[1]
        with torch.no_grad(), checkpointing_disabled(self.model, checkpointing_kwargs(self.args)):
            if self.ref_model is not None:
                return self._get_per_token_logps_and_entropies(
                    self.ref_model, ids, attn, C, batch_size=self.args.per_device_train_batch_size)[0]
            policy = self.accelerator.unwrap_model(self.model)
            with use_adapter(policy, adapter_name="ref" if "ref" in policy.peft_config else None):
                return self._get_per_token_logps_and_entropies(
                    self.model, ids, attn, C, batch_size=self.args.per_device_train_batch_size)[0]

    # ---- DAPO dynamic sampling ------------------------------------------------------------------

    def _next_refill_batch(self) -> list:
        """The next generation batch of prompts for refilling, from an independent shuffled stream
        (seed + 1) so that refills are not the prompts the main loader is about to serve."""
        if self._refill_iter is None:
            G = self.num_generations
            sampler = RepeatSampler(self.train_dataset, mini_repeat_count=G,
                                    batch_size=self.args.generation_batch_size // G, repeat_count=1,
                                    shuffle=True, seed=self.args.seed + 1)
            local_bs = self.args.per_device_train_batch_size * self.args.steps_per_generation
            loader = DataLoader(self.train_dataset, batch_size=local_bs, sampler=sampler, collate_fn=identity)
            self._refill_loader = self.accelerator.prepare_data_loader(loader)
            self._refill_iter = iter(self._refill_loader)
        try:
            return next(self._refill_iter)
        except StopIteration:
            self._refill_iter = iter(self._refill_loader)
            return next(self._refill_iter)

    def _dynamically_sampled(self, out: dict) -> dict:
        """Keep groups whose rewards differ; regenerate from fresh prompts until the batch is full
        (at most `max_refill_rounds` more rounds, then fill with dropped groups, which carry zero
        advantage for every group-baseline algorithm)."""
        G, B = self.num_generations, out["completion_ids"].shape[0]
        keep_parts, spare_parts, rounds = [], [], 0
        first_frac = None
        while True:
            keep = dynamic_sampling_mask(out["rewards"], out["group_index"])
            if first_frac is None:
                first_frac = self.accelerator.gather(keep.float().mean().reshape(1)).mean().item()
            keep_parts.append(select_rows(out, keep))
            spare_parts.append(select_rows(out, ~keep))
            have = sum(p["completion_ids"].shape[0] for p in keep_parts)
            short = torch.tensor([max(B - have, 0)], device=keep.device)
            if self.accelerator.gather(short).max().item() == 0 or rounds >= self.max_refill_rounds:
                break
            out = self._generate_once(self._next_refill_batch())
            rounds += 1
        batch = select_rows(concat_batches(keep_parts + spare_parts, self._tokenizer.pad_token_id),
                            torch.arange(B))
        filled = max(B - have, 0) // G
        device = batch["completion_ids"].device
        batch["group_index"] = (self.accelerator.process_index * B + torch.arange(B, device=device)) // G
        batch["num_items_in_batch"] = self.accelerator.gather(batch["completion_mask"].sum()).sum()
        m = self._metrics["train"]
        m["dynamic_sampling/kept_frac"].append(first_frac)
        m["dynamic_sampling/refill_rounds"].append(float(rounds))
        m["dynamic_sampling/filled_groups"].append(
            self.accelerator.gather(torch.tensor([float(filled)], device=device)).sum().item())
        return batch

    # ---- advantages ---------------------------------------------------------------------------

    # ---- step-level rollouts (resrl.engines.steps) -------------------------------------------------

    def _no_grad_pass(self, out: dict, want_states: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(old log-probs (B, C), token entropies (B, C), penultimate states (B, C, d) | None) of the
        round's rows under the current policy, in one no-grad pass."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        C = out["completion_ids"].shape[1]
        self._pass_states = [] if want_states else None
        try:
            with torch.no_grad(), checkpointing_disabled(self.model, checkpointing_kwargs(self.args)):
                logps, entropy = self._get_per_token_logps_and_entropies(
                    self.model, ids, attn, C, batch_size=self.args.per_device_train_batch_size,
                    compute_entropy=True)[:2]
        finally:
            captured, self._pass_states = self._pass_states, None
        # captured[0] is _finish_states' (hidden, head sketch); the step layout refuses algorithms
        # that need the head sketch (__init__), so only the penultimate states are used here
        return logps, entropy, (captured[0][0] if want_states else None)

    def _generate_steps(self, inputs) -> dict:
        """One round of step-level rollouts: TRL's local prompts (each game repeated G times in a row)
        -> step rows with tags, old log-probs, step entropies, advantages, padded for TRL's split."""
        from resrl.engines.multiturn import ChatRenderer, HFStepPolicy, trl_sampling_settings
        from resrl.engines.steps import StepSample, episode_stats, pad_rows, rollout_steps, steps_to_batch

        cfg, G, device = self.step_rollout, self.num_generations, self.accelerator.device
        mode = "train" if self.model.training else "eval"
        if self._env_pool is None:
            self._env_pool = cfg.make_pool()
        prompts = [x["prompt"] for x in inputs]
        n, rank = len(prompts), self.accelerator.process_index
        groups = [rank * (n // G) + i // G for i in range(n)]          # global game ids
        tokenizer = self.processing_class
        model = self.accelerator.unwrap_model(self.model)
        policy = HFStepPolicy(model, tokenizer, **trl_sampling_settings(self.args))  # the config's settings only
        samples, episodes = rollout_steps(
            self._env_pool, prompts, groups, policy, ChatRenderer(tokenizer), eos_token_ids=policy.eos_token_ids,
            max_steps=cfg.max_steps, max_step_tokens=cfg.max_step_tokens, max_prompt_tokens=cfg.max_prompt_tokens,
            episode_timeout_s=cfg.episode_timeout_s, invalid_format_penalty=cfg.invalid_format_penalty,
            reward_scale=cfg.reward_scale, trajectory_offset=rank * n)
        empty = not samples
        if empty:  # every environment failed before a step: one token-less row keeps TRL's loop going
            eos = policy.eos_token_ids[0]
            samples = [StepSample([eos], [eos], -1, -1, 0, "")]
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else policy.eos_token_ids[0]
        out = {k: v.to(device) for k, v in steps_to_batch(samples, pad_id).items()}
        if empty:
            out["completion_mask"].zero_()
        mask = out["completion_mask"]
        spec = get_algorithm(self.algorithm.name)
        need_old = self.args.steps_per_generation * self.num_iterations != self.args.gradient_accumulation_steps
        step_entropy, hidden = None, None
        if self.needs_hidden or spec.needs_step_entropy or need_old:
            logps, entropy, hidden = self._no_grad_pass(out, self.needs_hidden)
            out["old_per_token_logps"] = logps
            m = mask.float()
            step_entropy = (entropy.float() * m).sum(1) / m.sum(1).clamp(min=1.0)   # mean token entropy / step
        if self.needs_reference or self.beta != 0.0:
            out["ref_per_token_logps"] = self._reference_logps(out)
        # (an all-failed round's token-less row goes through too: every process makes the same collectives)
        adv, stats = compute_token_advantages(AdvantageInputs(
            out["rewards"], out["group_index"], mask, hidden, out["truncated"],
            trajectory_index=out["trajectory_index"], step_index=out["step_index"],
            anchor_index=out["anchor_index"], step_rewards=out["step_rewards"], step_entropy=step_entropy),
            self.algorithm)
        out["advantages"] = adv * mask
        self._log_stats(stats, mode)
        out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        # metrics: per episode (success, steps, invalid rates, end reasons) and per step row
        local = episode_stats(episodes)
        keys = sorted(local)
        values = self.accelerator.gather(torch.tensor([[local[k] for k in keys]], device=device)).mean(0).tolist()
        for k, v in zip(keys, values):
            self._metrics[mode][k].append(v)
        # processes hold different numbers of rows: gather (rows, tokens) sums, never the rows themselves
        rows, tokens = self.accelerator.gather(torch.tensor(
            [[float(mask.shape[0] * (not empty)), float(mask.sum())]], device=device)).sum(0).tolist()
        self._metrics[mode]["reward_mean"].append(self._metrics[mode]["episode/reward"][-1])
        self._metrics[mode]["accuracy"].append(self._metrics[mode]["episode/success"][-1])
        self._metrics[mode]["step_rows"].append(rows)
        self._metrics[mode]["response_length"].append(tokens / max(rows, 1.0))
        out, _ = pad_rows(out, self.args.steps_per_generation)
        return out

    def close_envs(self) -> None:
        if self._env_pool is not None:
            self._env_pool.close()
            self._env_pool = None

    def _generate_and_score_completions(self, inputs):
        if self.step_rollout is not None:
            return self._generate_steps(inputs)
        mode = "train" if self.model.training else "eval"
        out = self._generate_once(inputs)
        if mode == "train" and self.dynamic_sampling:
            out = self._dynamically_sampled(out)
        mask = self._loss_mask(out)
        rewards = self.accelerator.gather(out["rewards"])
        lengths = self.accelerator.gather(out["completion_mask"].sum(1).float())
        self._metrics[mode]["reward_mean"].append(rewards.mean().item())
        self._metrics[mode]["accuracy"].append((rewards > self.algorithm.correct_threshold).float().mean().item())
        self._metrics[mode]["response_length"].append(lengths.mean().item())
        hidden, head = out.pop("hidden", None), out.pop("head", None)
        if self.needs_hidden and self.resrl_mode == "aligned":
            out["advantages"] = None  # computed from the training forward's states (_compute_loss)
            return out
        adv, stats = local_token_advantages(
            AdvantageInputs(out["rewards"], out["group_index"], mask, hidden, out["truncated"], head),
            self.algorithm, self.accelerator)
        out["advantages"] = adv
        self._log_stats(stats, mode)
        return out

    def _log_stats(self, stats: dict, mode: str) -> None:
        if not stats:
            return
        keys = sorted(stats)
        values = torch.tensor([float(stats[k]) for k in keys], device=self.accelerator.device)
        values = self.accelerator.gather(values[None]).nanmean(dim=0).tolist()
        for k, v in zip(keys, values):
            if math.isfinite(v):  # e.g. no group of the round had a positive: no ω statistics to log
                self._metrics[mode][k if "/" in k else f"resrl/{k}"].append(v)

    @staticmethod
    def _loss_mask(batch: dict) -> torch.Tensor:
        mask = batch["completion_mask"]
        return mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask

    # ---- batching -------------------------------------------------------------------------------

    def _prepare_inputs(self, generation_batch):
        # As TRL's, but the shuffle moves whole groups: with micro-batches that are multiples of the
        # group size every micro-batch then holds whole groups (needed by the aligned mode).
        if not self.model.training:
            return super()._prepare_inputs(generation_batch)
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            batch = shuffle_groups(batch)
            self._buffered_inputs = split_tensor_dict(batch, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    # ---- loss -----------------------------------------------------------------------------------

    def _compute_loss(self, model, inputs):
        mode = "train" if self.model.training else "eval"
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        C = completion_ids.size(1)
        mask = self._loss_mask(inputs)
        aligned = self.needs_hidden and inputs.get("advantages") is None
        log_z_capture = self._last_layer.capture(keep_first=prompt_ids.shape[1]) if self.log_z_head is not None \
            else contextlib.nullcontext()
        if aligned:
            with self._capture_states(C) as states, log_z_capture:
                logps, entropy, aux_loss = self._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, C, compute_entropy=True, compute_aux_loss=self.aux_loss_enabled)
            hidden, head = self._finish_states(states, completion_ids)
            advantages, stats = compute_token_advantages(
                AdvantageInputs(inputs["rewards"], inputs["group_index"], mask, hidden, inputs["truncated"], head),
                self.algorithm)
            self._log_stats(stats, mode)
        else:
            with log_z_capture:
                logps, entropy, aux_loss = self._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, C, compute_entropy=True, compute_aux_loss=self.aux_loss_enabled)
            advantages = inputs["advantages"]
        old = inputs.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        # vLLM rollouts: TRL's truncated/masked π_old / π_vllm ratio, (B, T) or (B, 1)
        is_weights = inputs.get("importance_sampling_ratio") if self.use_vllm else None
        log_z = self._log_z(inputs["prompt_mask"]) if self.log_z_head is not None else None
        # top_entropy_quantile: TRL's own mask, whose quantile spans the micro-batch on every process
        q = self.loss_config.top_entropy_quantile
        entropy_mask = self.get_high_entropy_mask(entropy, mask, 1.0 - q) if q < 1.0 else None
        loss, metrics = self._policy_loss(PolicyLossInputs(
            logps, old, advantages, mask, ref_logprobs=inputs.get("ref_per_token_logps"), entropy=entropy,
            importance_weights=is_weights, log_z=log_z, entropy_mask=entropy_mask), self.loss_config)
        loss = loss * self._accumulation_scale(inputs, mask, mode)
        if self.aux_loss_enabled:  # MoE load balancing, scaled for accumulation as TRL does
            loss = loss + self.router_aux_loss_coef * aux_loss / (
                self.current_gradient_accumulation_steps if mode == "train" else 1.0)
            metrics["aux_loss"] = aux_loss.detach().float().item()
        if mode == "train":
            self._count_update_rows(completion_ids.shape[0])
        # per-token means for the headline "entropy" / "kl" curves, whatever the loss aggregation
        # (policy_loss reports them aggregated like the loss, logged as loss/entropy, loss/kl)
        with torch.no_grad():
            m = mask.float()
            n_tok = m.sum().clamp(min=1.0)
            metrics["entropy_token_mean"] = ((entropy.float() * m).sum() / n_tok).item()
            ref = inputs.get("ref_per_token_logps")
            if ref is not None:
                kl = kl_estimate(logps.float(), ref.float(), self.loss_config.kl_estimator)
                metrics["kl_token_mean"] = ((kl * m).sum() / n_tok).item()
        # one collective for all loss metrics (averaged over processes)
        keys = sorted(metrics)
        values = torch.tensor([metrics[k] for k in keys], device=loss.device)
        values = self.accelerator.gather(values[None]).nanmean(dim=0).tolist()
        headline = {"entropy_token_mean": "entropy", "kl_token_mean": "kl"}
        for k, v in zip(keys, values):  # "flowrl/..." keys keep their own prefix
            self._metrics[mode][headline.get(k, k if "/" in k else f"loss/{k}")].append(v)
        return loss

    def _count_update_rows(self, rows: int) -> None:
        """`train/completions`: completion rows that reached the loss in this optimiser update,
        summed over processes and logged once per update — dropped rows would show here."""
        self._update_rows += rows
        if (self._step + 1) % self.current_gradient_accumulation_steps == 0:  # last micro-batch of the update
            total = self.accelerator.gather(torch.tensor([float(self._update_rows)], device=self.accelerator.device))
            self._metrics["train"]["train/completions"].append(total.sum().item())
            self._update_rows = 0

    def _accumulation_scale(self, inputs, mask, mode) -> float | torch.Tensor:
        """Factor turning one micro-batch's loss into its share of the update's loss.

        token-mean: the mean over all tokens of the accumulation window on all processes (DDP
        averages gradients over processes), estimated like TRL's own token-level normaliser;
        sequence modes: equal-sized micro-batches, so dividing by the accumulation steps is exact.
        """
        if mode != "train":
            return 1.0
        steps = self.current_gradient_accumulation_steps
        if self.loss_config.agg == "token-mean":
            window_tokens = inputs["num_items_in_batch"].clamp(min=1.0) * steps / self.args.steps_per_generation
            return mask.sum() * self.accelerator.num_processes / window_tokens
        return 1.0 / steps

    # ---- checkpoints ---------------------------------------------------------------------------

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        if self.log_z_head is not None:
            path = os.path.join(resume_from_checkpoint, LOG_Z_FILE)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{resume_from_checkpoint} has no {LOG_Z_FILE}: not a FlowRL checkpoint "
                                        "(or written by an older resrl); FlowRL cannot resume without its log Z head")
            from safetensors.torch import load_file

            param = next(self.log_z_head.parameters())
            state = {k: v.to(device=param.device, dtype=param.dtype) for k, v in load_file(path).items()}
            self.log_z_head.load_state_dict(state)

    def _save_checkpoint(self, model, trial):
        """TRL/HF's checkpoint (model, optimiser, scheduler, RNG states, trainer state), written
        atomically: into `<output_dir>/.staging/`, fsynced, then renamed to `checkpoint-N`."""
        run_dir = self.args.output_dir
        staging_root = os.path.join(run_dir, STAGING)
        name = f"checkpoint-{self.state.global_step}"
        if self.accelerator.is_main_process:
            shutil.rmtree(staging_root, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        limit = self.args.save_total_limit
        self.args.output_dir, self.args.save_total_limit = staging_root, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.output_dir, self.args.save_total_limit = run_dir, limit
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            if self.log_z_head is not None:  # left out of save_pretrained: saved beside it
                from safetensors.torch import save_file

                save_file({k: v.detach().cpu().contiguous() for k, v in self.log_z_head.state_dict().items()},
                          os.path.join(staging_root, name, LOG_Z_FILE))
            publish(os.path.join(staging_root, name), os.path.join(run_dir, name))
            shutil.rmtree(staging_root, ignore_errors=True)
            rotate(run_dir, limit)
        self.accelerator.wait_for_everyone()


def without_log_z_params(named_params):
    """Drop the log Z head's parameters from a (name, tensor) stream (vLLM's weight sync)."""
    for name, param in named_params:
        if LOG_Z_ATTR not in name.split("."):
            yield name, param
