"""`ResRLTrainer`: TRL's `GRPOTrainer` training every algorithm of `resrl.core.registry` with the
policy loss the algorithm names (`resrl.core.loss.POLICY_LOSSES`: the clipped surrogate
`policy_loss`, or FlowRL's trajectory balance).

The adapter holds no math: it collects what the core needs — rewards, group ids, response masks,
truncation flags and, for ResRL, penultimate-layer hidden states — and calls the core. What it
cannot tell TRL through TRL's public surface it does through `resrl.engines.trl.compat` (every
private TRL touch-point, read against one TRL release and tested per touch-point). Its parts are the
other modules of this package (resrl.engines.trl lists them).

Data flow of one generation round (concatenated layout):

    generation_round                        (TRL's _generate_and_score_completions)
      ├ _generate_once: TRL's generate-and-score (rewards gathered over processes; TRL's group
      │      advantages ignored; old log-probs when generation and updates are misaligned), plus
      │      rewards, group ids, truncation flags, states (extra-pass) and log π_ref (FlowRL)
      ├ DAPO dynamic sampling: drop all-equal groups, refill from fresh prompts
      └ token advantages (B, T) from resrl.core         — unless ResRL runs "aligned"
    (trl_compat: whole-group shuffle, split into micro-batches)
    compute_policy_loss                     (TRL's _compute_loss)
      ├ forward: log-probs, entropy (+ penultimate states / head sketch, ResRL aligned)
      │          (+ last-layer prompt states -> log Z head, FlowRL)
      └ the algorithm's policy loss from resrl.core.loss.POLICY_LOSSES

ResRL hidden states (spec §2), two modes, chosen once and logged:
  "aligned"    every device micro-batch holds whole groups of one round and the round is used
               for exactly one update: the weights are computed inside the training forward,
               from the states the loss forward produces anyway. No extra pass.
  "extra-pass" otherwise: one no-grad pass over the local generation batch yields the states AND
               the old log-probs (TRL's own old-log-prob pass when it runs one, else ours).
               Groups split across processes are gathered (engines/trl/batches.py).
NTHR and ResRL's weighting="interference" read the head sketch instead (resrl.core.interference),
captured by the same mechanism in the same pass (engines/trl/capture.py).

FlowRL needs log π_ref with a zero KL coefficient: the trainer then keeps a reference model itself
(with LoRA: the policy with its adapters disabled, as TRL does for the KL).

Every GRPOConfig field is honoured as TRL honours it, mapped onto resrl's setting (beta -> the KL
coefficient, epsilon / epsilon_high -> the clip range, loss_type -> the aggregation, scale_rewards,
importance_sampling_level, top_entropy_quantile), refused at construction, or irrelevant: the table
in engines/trl/fields.py, applied by `trl_fields.resolve_trainer_settings`. Nothing is dropped
silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil

import torch
from accelerate.utils import is_peft_model

from resrl.core.loss import SURROGATES, LossConfig, PolicyLossInputs, get_policy_loss, kl_estimate
from resrl.core.value import CriticConfig
from resrl.core.registry import (AdvantageInputs, AlgorithmConfig, captured_states, compute_token_advantages,
                                 get_algorithm, resolve_policy_loss)
from resrl.engines.trl.generation import TrainerGeneration
from resrl.engines.steps import StepRolloutConfig
from resrl.engines.trl import compat as trl_compat
from resrl.engines.trl import fields as trl_fields
from resrl.engines.trl import metrics as engine_metrics
from resrl.engines.trl import rules
from resrl.engines.trl.batches import local_token_advantages
from resrl.engines.trl.capture import StateCapture
from resrl.engines.trl.checkpoints import read_engine_state, save_atomically, write_engine_state
from resrl.engines.trl.compat import GRPOTrainer
from resrl.engines.trl.config import ResRLGRPOConfig
from resrl.engines.trl.critic import Critic
from resrl.engines.trl.dynamic_sampling import RefillStream, dynamically_sampled
from resrl.engines.trl.flowrl_head import LOG_Z_ATTR, LOG_Z_FILE, FlowRLHead, without_log_z_params
from resrl.engines.trl.phases import PhaseTimer
from resrl.engines.trl.reference import build_reference_model, reference_logps
from resrl.engines.trl.step_round import StepRound
from resrl.models.checkpointing import checkpointing_disabled, checkpointing_kwargs
from resrl.models.generation_paths import GenerationSettings
from resrl.models.generation import model_defaults_dropped, model_defaults_hidden

__all__ = ["ResRLTrainer", "ResRLGRPOConfig", "UNSUPPORTED_TRL_OPTIONS", "ROW_KEYS", "LOG_Z_ATTR", "LOG_Z_FILE", "without_log_z_params",
           "GRPOTrainer"]

logger = logging.getLogger(__name__)

MODEL_CARD_SECTION = "## resrl"

# keys this adapter adds to TRL's generation batch: (B,) rows
ROW_KEYS = trl_compat.ENGINE_ROW_KEYS

# GRPOConfig options refused (engines/trl/fields.py, the table of every GRPOConfig field):
# (field, a value that means "off", why it is refused); `resrl train`'s trl: section checks them too
UNSUPPORTED_TRL_OPTIONS = tuple((name, f.accepted[0], f.note) for name, f in trl_fields.GRPO_CONFIG_FIELDS.items()
                                if f.category == trl_fields.REFUSED and f.applies is None)


class ResRLTrainer(trl_compat.GRPOHooks):
    """GRPOTrainer whose advantages are the `(B, T)` token advantages of `algorithm` and whose loss
    is the algorithm's policy loss from `resrl.core.loss.POLICY_LOSSES` with `loss_config`.

    algorithm:          an algorithm's name ("grpo", "resrl", ...) or a resrl.core.registry.AlgorithmConfig;
                        None: `args.algorithm` of a ResRLGRPOConfig, else "grpo"
    loss_config:        resrl.core.loss.LossConfig; None: the algorithm's loss defaults (as `resrl train`)
                        under the GRPOConfig fields that map onto it (beta, epsilon, loss_type, ...)
    resrl_mode:         "auto" | "aligned" | "extra-pass" (see the module docstring)
    dynamic_sampling:   DAPO's filter-and-refill; None = the algorithm's default
    max_refill_rounds:  extra generation rounds allowed per step to refill dropped groups
    step_rollout:       step-level rollouts (resrl.engines.steps.StepRolloutConfig); None = TRL's
    critic:             PPO's value model (resrl.core.value.CriticConfig), for algorithms that need one
                        (ppo); None: `args.critic_*` of a ResRLGRPOConfig, else CriticConfig's defaults
    phase_times:        log time/<phase>_s and memory/<phase>_peak_gib per optimiser step
                        (resrl.engines.trl.phases; off: no cost)
    generation:         which generation path samples the rollouts (resrl.models.generation_paths.GenerationSettings;
                        None: `args.generation_backend` etc. of a ResRLGRPOConfig, else auto)
    Other arguments are GRPOTrainer's (`args` a GRPOConfig whose `num_generations` is G, or a
    `resrl.engines.trl.config.ResRLGRPOConfig` carrying the settings above as flat fields). What
    becomes of every GRPOConfig field: engines/trl/fields.py (honoured, mapped, refused, irrelevant).
    """

    def __init__(self, *args, algorithm: AlgorithmConfig | str | None = None, loss_config: LossConfig | None = None,
                 resrl_mode: str | None = None, dynamic_sampling: bool | None = None,
                 max_refill_rounds: int | None = None, step_rollout: StepRolloutConfig | None = None,
                 phase_times: bool = False, critic: CriticConfig | None = None,
                 generation: GenerationSettings | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.phases = PhaseTimer(phase_times, self.accelerator.device)
        if phase_times:
            self.add_callback(_PhaseCallback(self))
        algorithm, loss_config, notes = trl_fields.resolve_trainer_settings(self.args, algorithm, loss_config)
        for note in notes:  # TRL defaults that differ from the algorithm's and are not applied: say so once
            logger.warning(note)
        self.scale_rewards = algorithm.scale_rewards  # TRL's own group statistics (logged) use it
        resrl_mode = resrl_mode or getattr(self.args, "resrl_mode", None) or "auto"
        if dynamic_sampling is None:
            dynamic_sampling = getattr(self.args, "dynamic_sampling", None)
        if max_refill_rounds is None:
            max_refill_rounds = getattr(self.args, "max_refill_rounds", None) or 4
        spec = get_algorithm(algorithm.name)
        self.step_rollout = step_rollout
        self.algorithm = algorithm
        layout = self.run_layout(resrl_mode, dynamic_sampling)
        rules.check(layout, "trainer")
        self.loss_config = loss_config
        needs_penultimate, needs_head, head_topk = captured_states(algorithm)
        # states of the policy's own forward are needed (the ResRL modes apply to both kinds)
        self.needs_hidden = needs_penultimate or needs_head
        self.dynamic_sampling = layout.dynamic_sampling_on
        self.max_refill_rounds = max_refill_rounds
        self.resrl_mode = rules.resolve_resrl_mode(layout)
        self._check_trl_options()
        self.capture = StateCapture(lambda: self.model, self.accelerator.unwrap_model,
                                    penultimate=needs_penultimate, head=needs_head,
                                    alignment=algorithm.resrl.hidden_alignment, head_topk=head_topk,
                                    temperature=self.temperature)
        if needs_head:
            self._check_plain_output_head()
        # the generation path (resrl.engines.trl.generation): TRL's call, or resrl's
        self.rollout_path = TrainerGeneration(self, generation, needs_penultimate)
        # the on-policy check compares like with like under the sampling settings (temperature, top-k, top-p)
        self.rollout_path.set_sampling(getattr(self, "generation_config", None))
        # the algorithm's own loss, or loss_config.policy_loss (any SURROGATES term, with every algorithm whose
        # own loss is the clipped surrogate, ResRL's token weights included)
        self.policy_loss_name = resolve_policy_loss(algorithm.name, loss_config)
        self._policy_loss = get_policy_loss(self.policy_loss_name)
        if self.policy_loss_name not in SURROGATES and self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(f"GRPOConfig.vllm_importance_sampling_correction=True is not supported with the "
                             f"{self.policy_loss_name!r} loss (it has no per-token surrogate to weight); set it to false")
        self.needs_reference = spec.needs_reference or loss_config.kl_coef > 0
        peft = is_peft_model(self.accelerator.unwrap_model(self.model))
        # (TRL builds one only for beta != 0; a LossConfig(kl_coef > 0) given with beta = 0 needs one too)
        if self.needs_reference and self.ref_model is None and not peft:
            self.ref_model = build_reference_model(self)
        self.flowrl_head = FlowRLHead(self, algorithm.flowrl) if spec.needs_log_z else None
        self.log_z_head = None if self.flowrl_head is None else self.flowrl_head.module
        self._step_round = StepRound(step_rollout) if step_rollout is not None else None
        self.critic = self._build_critic(critic, spec)
        self._refill = RefillStream(
            self.train_dataset, self.accelerator, group_size=self.num_generations,
            generation_batch_size=self.args.generation_batch_size,
            local_batch_size=self.args.per_device_train_batch_size * self.args.steps_per_generation,
            seed=self.args.seed + 1) if self.dynamic_sampling else None
        self._update_rows = engine_metrics.UpdateRows()  # completions/update_rows
        if self.needs_hidden:
            msg = (f"ResRL weights: {self.resrl_mode} mode "
                   + ("(inside the training forward, no extra pass)" if self.resrl_mode == "aligned" else
                      "(one no-grad pass over each generation batch for hidden states and old log-probs)"))
            # the extra pass costs a forward per round: say so where users look
            (logger.warning if self.resrl_mode == "extra-pass" else logger.info)(msg)

    # ---- configuration -------------------------------------------------------------------------

    def run_layout(self, resrl_mode: str = "auto", dynamic_sampling: bool | None = None) -> rules.RunLayout:
        """This trainer's run as engines/trl/rules.py sees it."""
        a = self.args
        return rules.RunLayout(
            self.algorithm, self.step_rollout is not None, resrl_mode,
            dynamic_sampling, self.num_generations, a.per_device_train_batch_size, a.steps_per_generation,
            a.gradient_accumulation_steps, self.num_iterations, self.accelerator.num_processes,
            rollout_func=self.rollout_func is not None, use_vllm=bool(self.use_vllm))

    def _build_critic(self, critic, spec) -> Critic | None:
        """PPO's critic (engines/trl/critic.py) when the algorithm needs one; settings given otherwise are refused."""
        given = getattr(self.args, "critic_settings", lambda: {})()
        if critic is not None and given:
            raise ValueError(f"ResRLGRPOConfig sets critic settings ({', '.join(sorted(given))}) and a CriticConfig "
                             "was passed as well: set them in one place")
        if not spec.needs_values:
            if critic is not None or given:
                raise ValueError(f"critic settings were given, but algorithm {self.algorithm.name!r} has no critic "
                                 "(PPO has: algorithm='ppo')")
            return None
        return Critic(self, critic if critic is not None else CriticConfig(**given))

    def aligned_possible(self) -> bool:
        return self.run_layout().aligned_possible

    def _check_trl_options(self) -> None:
        """The refused GRPOConfig fields were checked by trl_fields.resolve_trainer_settings; log the one
        TRL option applied inside resrl's loss that users look for, and the model's own generation
        settings that GRPOTrainer would sample with and this trainer drops (never silently)."""
        if self.use_vllm and self.vllm_importance_sampling_correction:
            logger.info("vLLM importance-sampling correction (%s) is applied in resrl.core.loss.policy_loss",
                        self.vllm_importance_sampling_mode)
        # GRPOTrainer's generate fills the settings its GenerationConfig leaves None from the model's
        # generation_config (Qwen3: top_k 20, top_p 0.95, ...); rollouts sampled so are not draws from
        # softmax(logits / T), the distribution the policy loss assumes, so this trainer hides them
        # (resrl.models.generation.model_defaults_hidden) and says which: generation_kwargs applies them
        self.dropped_generation_defaults = {} if self.use_vllm else model_defaults_dropped(
            self.accelerator.unwrap_model(self.model), getattr(self, "generation_config", None))
        if self.dropped_generation_defaults:
            settings = ", ".join(f"{k}={v!r}" for k, v in sorted(self.dropped_generation_defaults.items()))
            logger.warning("the model's generation_config sets %s, which GRPOTrainer samples with; ResRLTrainer "
                           "samples with TRL's GenerationConfig only (softmax(logits / temperature), the "
                           "distribution its loss assumes) and does not apply them: put them in "
                           "GRPOConfig.generation_kwargs (resrl train: trl.generation_kwargs) to apply them", settings)

    def _check_plain_output_head(self) -> None:
        """The head sketch models output heads z = W x̂ + b: refuse soft-capped or scaled logits."""
        text_config = self.accelerator.unwrap_model(self.model).config.get_text_config()
        for name, neutral in (("final_logit_softcapping", None), ("logit_scale", 1.0)):
            value = getattr(text_config, name, neutral)
            if value not in (None, neutral):
                raise ValueError(f"algorithm {self.algorithm.name!r} (head sketch) supports output heads z = W x̂ + b "
                                 f"only; this model's config has {name}={value!r}")

    # ---- one generation round (TRL's _generate_and_score_completions) -----------------------------

    def generation_round(self, inputs) -> dict:
        if self._step_round is not None:
            return self._step_round(self, inputs)
        with self.phases.phase("generation"):
            return self._generation_round(inputs)

    def _generation_round(self, inputs) -> dict:
        mode = "train" if self.model.training else "eval"
        sink = trl_compat.metrics(self, mode)
        out = self._generate_once(inputs)
        if mode == "train" and self.dynamic_sampling:
            out = dynamically_sampled(
                out, generate=self._generate_once, refill=self._refill, accelerator=self.accelerator,
                group_size=self.num_generations, max_refill_rounds=self.max_refill_rounds,
                pad_token_id=trl_compat.tokenizer(self).pad_token_id, sink=trl_compat.metrics(self, "train"))
        mask = self._loss_mask(out)
        engine_metrics.log_round(self.accelerator, sink, out["rewards"], self.algorithm.correct_threshold)
        hidden, head = out.pop("hidden", None), out.pop("head", None)
        if self.needs_hidden and self.resrl_mode == "aligned":
            out["advantages"] = None  # computed from the training forward's states (compute_policy_loss)
            return out
        with self.phases.phase("weights"):
            inputs = AdvantageInputs(out["rewards"], out["group_index"], mask, hidden, out["truncated"], head,
                                     prompt_lengths=out["prompt_mask"].sum(dim=1))
            if self.critic is not None:  # PPO: GAE on the critic's values (engines/trl/critic.py)
                adv, stats = self.critic.advantages(self, out, inputs)
            else:
                adv, stats = local_token_advantages(inputs, self.algorithm, self.accelerator)
        out["advantages"] = adv
        engine_metrics.log_stats(self.accelerator, sink, stats)
        return out

    def _generate_once(self, inputs) -> dict:
        """TRL's generate-and-score, plus the rows' rewards, global group ids, truncation flags and
        (extra-pass ResRL) hidden states with the matching old log-probs."""
        extra_pass = self.needs_hidden and self.resrl_mode == "extra-pass"
        # TRL's generate would fill the settings its GenerationConfig leaves None (min_p, typical_p,
        # no_repeat_ngram_size, ...) from the model's generation_config: hide it (resrl.models.generation)
        with self.capture.armed(extra_pass) as captured, \
                model_defaults_hidden(self.accelerator.unwrap_model(self.model)):
            out, rewards = self.trl_generate_and_score(inputs)
        self.rollout_path.attach(self, out)  # the frozen layers' states (generation.reuse_frozen)
        ids, mask = out["completion_ids"], out["completion_mask"]
        B, device = ids.shape[0], ids.device
        start = self.accelerator.process_index * B
        out["rewards"] = rewards[start:start + B].float()  # NaN: unscorable (every reward function said None)
        out["group_index"] = (start + torch.arange(B, device=device)) // self.num_generations
        lengths = mask.sum(dim=1)
        last = ids.gather(1, (lengths - 1).clamp(min=0)[:, None])[:, 0]
        ends = torch.zeros_like(last, dtype=torch.bool)
        for eos in self.eos_token_ids:
            ends |= last == eos
        out["truncated"] = (lengths == 0) | ~ends
        if self.needs_reference and out.get("ref_per_token_logps") is None:  # FlowRL with KL coefficient 0
            out["ref_per_token_logps"] = reference_logps(self, out)
        if extra_pass:
            if not captured:  # TRL ran no old-log-prob pass of the policy: run the one pass here
                with self.capture.armed() as captured:
                    with torch.no_grad(), checkpointing_disabled(self.model, checkpointing_kwargs(self.args)):
                        old, _, _ = self.per_token_logps(
                            self.model, torch.cat([out["prompt_ids"], ids], 1),
                            torch.cat([out["prompt_mask"], mask], 1), ids.shape[1],
                            batch_size=self.args.per_device_train_batch_size)
                out["old_per_token_logps"] = old
            out["hidden"], out["head"] = captured[0]
        return out

    def policy_forward(self, model, input_ids, logits_to_keep, forward):
        # extra-pass mode: a round that armed the capture records the policy's own no-grad pass
        if self.phases.enabled and not torch.is_grad_enabled():  # old log-probs / ResRL's extra pass
            with self.phases.phase("old_logps"):
                return self.capture.record_forward(model, input_ids, logits_to_keep, forward)
        return self.capture.record_forward(model, input_ids, logits_to_keep, forward)

    def generate_rows(self, prompt_ids, images, multimodal_fields, trl_call):
        return self.rollout_path.generate(self, prompt_ids, images, multimodal_fields, trl_call)

    def training_step(self, *args, **kwargs):
        # the generation round (in _prepare_inputs) and the weights inside are timed as their own phases
        with self.phases.phase("forward_backward"):
            return super().training_step(*args, **kwargs)

    @staticmethod
    def _loss_mask(batch: dict) -> torch.Tensor:
        """completion_mask, times tool_mask in multi-turn batches (environment tokens get no loss)."""
        mask = batch["completion_mask"]
        return mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask

    def close_envs(self) -> None:
        """Stop the step layout's environment workers (no-op otherwise)."""
        if self._step_round is not None:
            self._step_round.close()

    # ---- one micro-batch's loss (TRL's _compute_loss) ----------------------------------------------

    def compute_policy_loss(self, model, inputs):
        mode = "train" if self.model.training else "eval"
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        C = completion_ids.size(1)
        mask = self._loss_mask(inputs)
        sink = trl_compat.metrics(self, mode)
        aligned = self.needs_hidden and inputs.get("advantages") is None
        log_z_capture = self.flowrl_head.capture(prompt_ids.shape[1]) if self.flowrl_head is not None \
            else contextlib.nullcontext()
        critic_capture = self.critic.capture(C) if self.critic is not None else contextlib.nullcontext()
        # above the frozen layers whose states generation computed (generation.reuse_frozen), else nothing
        trunk = self.rollout_path.training_forward(self, model, inputs, input_ids)
        if aligned:
            with self.capture.capture(C) as states, log_z_capture, critic_capture, trunk:
                logps, entropy, aux_loss = self.per_token_logps(
                    model, input_ids, attention_mask, C, compute_entropy=True, compute_aux_loss=self.aux_loss_enabled)
            with self.phases.phase("weights"):
                hidden, head = self.capture.finish(states, completion_ids)
                advantages, stats = compute_token_advantages(
                    AdvantageInputs(inputs["rewards"], inputs["group_index"], mask, hidden, inputs["truncated"],
                                    head, prompt_lengths=inputs["prompt_mask"].sum(dim=1)),
                    self.algorithm)
            engine_metrics.log_stats(self.accelerator, sink, stats)
        else:
            with log_z_capture, critic_capture, trunk:
                logps, entropy, aux_loss = self.per_token_logps(
                    model, input_ids, attention_mask, C, compute_entropy=True, compute_aux_loss=self.aux_loss_enabled)
            advantages = inputs["advantages"]
        self.rollout_path.log_onpolicy(sink, logps, inputs, mask)
        old = inputs.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        # vLLM rollouts: TRL's truncated/masked π_old / π_vllm ratio, (B, T) or (B, 1)
        is_weights = inputs.get("importance_sampling_ratio") if self.use_vllm else None
        log_z = self.flowrl_head.log_z(inputs["prompt_mask"]) if self.flowrl_head is not None else None
        # top_entropy_quantile: TRL's own mask, whose quantile spans the micro-batch on every process
        q = self.loss_config.top_entropy_quantile
        entropy_mask = self.get_high_entropy_mask(entropy, mask, 1.0 - q) if q < 1.0 else None
        loss, metrics = self._policy_loss(PolicyLossInputs(
            logps, old, advantages, mask, ref_logprobs=inputs.get("ref_per_token_logps"), entropy=entropy,
            importance_weights=is_weights, log_z=log_z, entropy_mask=entropy_mask,
            # the off-policy mask compares with vLLM's own log-probs when TRL has them (as TRL's does); the
            # log-probs resrl's own generation paths record (same key) measure the on-policy check only
            sampling_logprobs=inputs.get("sampling_per_token_logps") if self.use_vllm else None), self.loss_config)
        loss = loss * self._accumulation_scale(inputs, mask, mode)
        if self.critic is not None:  # PPO: the critic's value loss joins the backward pass
            critic_agg = self.critic.config.loss_agg or self.loss_config.agg
            value_loss, value_stats = self.critic.loss(inputs, critic_agg, self.loss_config.max_response_length)
            loss = loss + value_loss * self._accumulation_scale(inputs, inputs["value_mask"], mode, critic_agg,
                                                                inputs["num_value_items"])
            metrics.update(value_stats)
        if self.aux_loss_enabled:  # MoE load balancing, scaled for accumulation as TRL does
            loss = loss + self.router_aux_loss_coef * aux_loss / (
                self.current_gradient_accumulation_steps if mode == "train" else 1.0)
            metrics["aux_loss"] = aux_loss.detach().float().item()
        if mode == "train":
            last = (trl_compat.current_step(self) + 1) % self.current_gradient_accumulation_steps == 0
            self._update_rows.add(self.accelerator, trl_compat.metrics(self, "train"), completion_ids.shape[0], last)
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
        engine_metrics.log_loss(self.accelerator, sink, metrics, loss.device)
        return loss

    def _accumulation_scale(self, inputs, mask, mode, agg: str | None = None,
                            items: torch.Tensor | None = None) -> float | torch.Tensor:
        """Factor turning one micro-batch's loss into its share of the update's loss.

        token-mean: the mean over all tokens of the accumulation window on all processes (DDP
        averages gradients over processes), estimated like TRL's own token-level normaliser;
        sequence modes: equal-sized micro-batches, so dividing by the accumulation steps is exact.
        agg / items: another loss's aggregation and round-level item count (PPO's value loss).
        """
        if mode != "train":
            return 1.0
        steps = self.current_gradient_accumulation_steps
        if (agg or self.loss_config.agg) == "token-mean":
            items = inputs["num_items_in_batch"] if items is None else items
            window_tokens = items.clamp(min=1.0) * steps / self.args.steps_per_generation
            return mask.sum() * self.accelerator.num_processes / window_tokens
        return 1.0 / steps

    # ---- logging and the model card --------------------------------------------------------------

    def log(self, logs: dict, start_time: float | None = None) -> None:
        # an advantage statistic undefined over the whole window (ω without a correct response) is
        # logged as NaN, where TRL's log would drop it (None): the curve has a point on every step
        mode = "train" if self.model.training else "eval"
        engine_metrics.nan_for_undefined(trl_compat.metrics(self, mode), logs, "" if mode == "train" else "eval_")
        super().log(logs, start_time)

    def create_model_card(self, model_name: str | None = None, dataset_name: str | None = None,
                          tags: str | list[str] | None = None) -> None:
        """TRL's model card (README.md in args.output_dir), naming the algorithm and its settings."""
        tags = [tags] if isinstance(tags, str) else list(tags or [])
        tags += ["resrl", self.algorithm.name]
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
        if self.is_world_process_zero():
            self._append_settings(os.path.join(self.args.output_dir, "README.md"))

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """TRL's save, plus the model card in `output_dir` (TRL writes it beside checkpoints only)."""
        super().save_model(output_dir, _internal_call)
        if not _internal_call and output_dir is not None and self.is_world_process_zero():
            card = os.path.join(self.args.output_dir, "README.md")
            self.create_model_card(model_name=os.path.basename(os.path.normpath(output_dir)))
            if os.path.abspath(output_dir) != os.path.abspath(self.args.output_dir):
                shutil.copyfile(card, os.path.join(output_dir, "README.md"))

    def _append_settings(self, path: str) -> None:
        """The algorithm and its settings under TRL's card (idempotent: replaces an earlier section)."""
        if not os.path.isfile(path):
            return
        text = open(path, encoding="utf-8").read().split(MODEL_CARD_SECTION)[0].rstrip()
        spec = get_algorithm(self.algorithm.name)
        settings = dataclasses.asdict(self.algorithm)
        if not spec.needs_hidden and self.algorithm.name != "resrl":
            settings.pop("resrl")
        for name in ("nthr", "flowrl", "gigpo", "empg", "ppo"):
            if name != self.algorithm.name.split("-")[0]:
                settings.pop(name, None)
        lines = [text, "", MODEL_CARD_SECTION, "",
                 f"Trained with resrl's `ResRLTrainer` (TRL's GRPOTrainer with resrl's advantages and loss), algorithm "
                 f"**{self.algorithm.name}** (policy loss: {self.policy_loss_name}).", "", "Algorithm settings:", "",
                 "```json", json.dumps(settings, indent=1, default=str), "```", "", "Loss settings:", "", "```json",
                 json.dumps(dataclasses.asdict(self.loss_config), indent=1, default=str), "```", ""]
        if self.critic is not None:
            lines += ["Critic settings:", "", "```json", json.dumps(dataclasses.asdict(self.critic.config), indent=1,
                                                                   default=str), "```", ""]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))

    # ---- checkpoints ---------------------------------------------------------------------------

    def write_checkpoint(self, model, trial, write) -> None:
        """TRL/HF's checkpoint (`write`: model, optimiser, scheduler, RNG states, trainer state), the
        engine's own state (the refill stream's position), FlowRL's log Z head and PPO's critic, published
        atomically (engines/trl/checkpoints.py). Every process calls it."""
        def add_files(checkpoint_dir: str) -> None:
            write_engine_state(checkpoint_dir, self.engine_state())
            if self.flowrl_head is not None:
                self.flowrl_head.save(checkpoint_dir)
            if self.critic is not None:
                self.critic.save(checkpoint_dir)

        save_atomically(self.args, self.accelerator, self.state.global_step, write, add_files)

    def engine_state(self) -> dict:
        """What a resumed run needs beyond TRL/HF's checkpoint to continue exactly (JSON)."""
        return {"refill": self._refill.state_dict()} if self._refill is not None else {}

    def checkpoint_loaded(self, path) -> None:
        state = read_engine_state(path)
        if self._refill is not None:
            if "refill" in state:
                self._refill.load_state_dict(state["refill"])
            else:
                logger.warning("checkpoint %s holds no refill-stream position (written before it was saved): "
                               "dynamic sampling refills from the stream's start, not where the run left it", path)
        if self.flowrl_head is not None:
            self.flowrl_head.load(path)
        if self.critic is not None:
            self.critic.load(path)


def _phase_callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class _PhaseCallback(_phase_callback_base()):
    """Opens and closes the trainer's PhaseTimer step around each optimiser step (log.phase_times)."""

    def __init__(self, trainer: ResRLTrainer):
        self.trainer = trainer

    def on_step_begin(self, args, state, control, **kwargs):
        self.trainer.phases.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer.phases.end_step(trl_compat.metrics(self.trainer, "train"))
