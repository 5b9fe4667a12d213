"""The TRL trainer's generation path: `TrainerGeneration` runs the path that
resrl.models.generation_paths chose (TRL's own call, or resrl.models.rollout's), hands the frozen
layers' states to the training forward, and checks that the rollouts are on-policy.

TRL's own fields keep their meaning (`trl_flags`): `use_vllm` / `use_transformers_continuous_batching`
select their path (and contradict another backend), `generation_kwargs`, `cache_implementation` (the
hf path's; the compiled path's cache is static by definition), temperature / top-p / top-k / min-p /
repetition penalty reach every path through TRL's GenerationConfig.

This module imports neither torch nor TRL at import time (resrl.train.config reads `trl_flags`).
"""

from __future__ import annotations

from resrl.models.generation_paths import GenerationSettings, ResolvedGeneration, resolve


def trl_flags(settings: GenerationSettings, trl_section: dict) -> dict:
    """GRPOConfig fields a backend sets (paged, vllm), checked against the `trl:` section:
    ValueError naming both keys when they contradict."""
    use_vllm = bool(trl_section.get("use_vllm", False))
    paged = bool(trl_section.get("use_transformers_continuous_batching", False)
                 or trl_section.get("use_transformers_paged", False))
    b = settings.backend
    if use_vllm and b not in ("auto", "vllm"):
        raise ValueError(f"generation.backend: {b} contradicts trl.use_vllm: true (set generation.backend: vllm)")
    if paged and b not in ("auto", "paged"):
        raise ValueError(f"generation.backend: {b} contradicts trl.use_transformers_continuous_batching: true "
                         "(set generation.backend: paged)")
    if use_vllm and paged:
        raise ValueError("trl.use_vllm and trl.use_transformers_continuous_batching are both true: choose one "
                         "generation.backend")
    if b == "compiled" and trl_section.get("cache_implementation") not in (None, "static"):
        raise ValueError(f"generation.backend: compiled uses a static KV cache; trl.cache_implementation: "
                         f"{trl_section['cache_implementation']!r} contradicts it")
    out = {}
    if b == "vllm":
        out["use_vllm"] = True
    if b == "paged":
        out["use_transformers_continuous_batching"] = True
    return out


# ---- the TRL trainer's generation path --------------------------------------------------------------

FROZEN_KEYS = ("frozen_prompt_states", "frozen_completion_states")  # (B, P, d) left-, (B, C, d) right-padded


class TrainerGeneration:
    """ResRLTrainer's generation path, resolved once at construction (`resolve`) and logged:

        generate(trainer, prompt_ids, images, multimodal_fields, trl_call)  TRL's _generate_single_turn
        attach(trainer, batch)          the frozen layers' states into TRL's generation batch (reuse_frozen)
        training_forward(model, inputs, input_ids)   a context around the training forward (reuse_frozen,
                                                     and the on-policy check's head inputs)
        log_onpolicy(sink, logps, inputs, mask)      generation/logp_diff_{mean,max}: |sampled − trained|

    `needs_penultimate`: the algorithm reads the penultimate layer's states, which the training
    forward must then compute (the reused trunk stops below it).

    The frozen depth is read at every generation round, not once (layers unfrozen after the trainer
    was built used to keep a zero gradient: the shortcut skipped them, issue 51), and checked again
    at the training forward: states recorded below a layer that has become trainable since are not
    used (the full forward runs; logged once, counted in generation/fallback/reuse_frozen)."""

    def __init__(self, trainer, settings: GenerationSettings | None, needs_penultimate: bool) -> None:
        import logging

        from resrl.models.attention import attention_layout

        self.log = logging.getLogger(__name__)
        if settings is None:
            settings = GenerationSettings(backend=getattr(trainer.args, "generation_backend", None) or "auto",
                                          shared_prefill=getattr(trainer.args, "shared_prefill", None),
                                          reuse_frozen=getattr(trainer.args, "reuse_frozen", None),
                                          max_logp_diff=getattr(trainer.args, "max_logp_diff", None))
        self.needs_penultimate = needs_penultimate
        model = trainer.accelerator.unwrap_model(trainer.model)
        depth = self.frozen_depth(model)
        # tools, environments, a rollout_func (TRL's loop) or the step layout (its own sampler, engines/steps.py)
        multi_turn = (bool(trainer.tools) or trainer.environment_factories is not None
                      or trainer.rollout_func is not None or getattr(trainer, "step_rollout", None) is not None)
        resolved = resolve(settings, trainer.accelerator.device.type, use_vllm=bool(trainer.use_vllm),
                           paged=bool(trainer.use_transformers_continuous_batching), multi_turn=multi_turn,
                           frozen_layers=depth > 0, layout=attention_layout(model))
        sharded = trainer.is_fsdp_enabled or (trainer.is_deepspeed_enabled and getattr(
            trainer.accelerator.state.deepspeed_plugin, "zero_stage", 0) == 3)
        if resolved.own_path and sharded:
            if settings.backend == "compiled" or settings.shared_prefill or settings.reuse_frozen:
                raise ValueError("generation.backend: compiled, shared_prefill and reuse_frozen run on a whole model; "
                                 "FSDP / DeepSpeed ZeRO-3 shard it: use generation.backend hf, paged or vllm")
            resolved = ResolvedGeneration("hf", False, resolved.prompt_bucket, False, False,
                                          resolved.reason + "; TRL's call under FSDP / ZeRO-3 (sharded weights)",
                                          resolved.layout, resolved.fallbacks)
        self.resolved = resolved
        self.max_logp_diff = settings.max_logp_diff
        self.depth = depth if resolved.reuse_frozen else 0  # the frozen depth of the last generation round
        self.states_depth = 0  # the depth the attached states were recorded at
        self._pending = None  # the last generate()'s rollouts, until attach()
        self._pending_depth = 0
        self._cache_length = 0  # the static KV cache's length so far (the compiled path's one shape)
        self._said: set[str] = set()  # fallbacks already logged
        self.onpolicy = OnPolicyCheck(None)  # set_sampling: the trainer's GenerationConfig
        self._head_inputs = None  # the on-policy check's final-norm outputs of the training forward
        self._head_model = None
        self.log.info("generation: %s%s%s (%s; attention layout %s)", resolved.backend,
                      ", shared prefill" if resolved.shared_prefill else "",
                      f", training forward above the {self.depth} frozen layers" if self.depth else "",
                      resolved.reason, resolved.layout)
        for option, why in resolved.fallbacks:
            self.fallback(option, why)

    def frozen_depth(self, model) -> int:
        """How many bottom layers the training forward may skip now (0: none)."""
        from resrl.models.freeze import decoder_layers
        from resrl.models.frozen_trunk import frozen_depth

        depth = frozen_depth(model)
        if depth and self.needs_penultimate:  # the penultimate layer runs in the training forward
            depth = max(0, min(depth, len(decoder_layers(model)[0]) - 2))
        return depth

    def fallback(self, option: str, why: str, sink: dict | None = None) -> None:
        """A fast path left out for an exact one: the reason logged once; counted in `sink`."""
        if option not in self._said:
            self._said.add(option)
            self.log.warning("generation: %s off, the exact path runs instead: %s (counted in "
                             "generation/fallback/%s)", option, why, option)
        if sink is not None:
            sink[f"generation/fallback/{option}"].append(1.0)

    def set_sampling(self, generation_config) -> None:
        """The trainer's GenerationConfig: what the on-policy check compares (`OnPolicyCheck`). A
        threshold (generation.max_logp_diff) that could never be checked is refused."""
        self.onpolicy = OnPolicyCheck(generation_config)
        if self.max_logp_diff is None:
            return
        if not self.resolved.own_path:
            raise ValueError("generation.max_logp_diff needs resrl's own generation path, which records each sampled "
                             f"token's log-prob; this run uses TRL's call ({self.resolved.backend}: "
                             f"{self.resolved.reason}). Set generation.shared_prefill: true or backend: compiled, or "
                             "leave max_logp_diff null")
        if self.onpolicy.skip is not None:
            raise ValueError(f"generation.max_logp_diff cannot be checked: {self.onpolicy.skip}")

    # -- generation ------------------------------------------------------------------------------------

    def generate(self, trainer, prompt_ids, images, multimodal_fields, trl_call):
        from resrl.engines.trl import compat as trl_compat

        sink = trl_compat.metrics(trainer, "train" if trainer.model.training else "eval")
        for option, why in self.resolved.fallbacks:
            self.fallback(option, why, sink)
        if not self.resolved.own_path or images is not None or multimodal_fields:
            return trl_call()
        from resrl.models.rollout import RolloutSettings, generate_rollouts

        settings = RolloutSettings(self.resolved.backend, shared_prefill=self.resolved.shared_prefill,
                                   prompt_bucket=self.resolved.prompt_bucket, cache_length=self._cache_length)
        with trainer.model_for_generation() as model:
            depth = self.frozen_depth(model) if self.resolved.reuse_frozen else 0
            if depth != self.depth:
                self.log.info("generation: the training forward now starts above %d frozen layers (was %d)", depth,
                              self.depth)
                self.depth = depth
            out = generate_rollouts(model, prompt_ids, trainer.generation_config, settings,
                                    pad_token_id=trl_compat.tokenizer(trainer).pad_token_id,
                                    eos_token_ids=trainer.eos_token_ids, trunk_depth=depth)
        self._pending, self._pending_depth = (out, depth) if depth else (None, 0)
        self._cache_length = out.cache_length  # grow-only: one compiled decode shape across steps
        return out.completion_ids, out.logprobs

    def attach(self, trainer, batch: dict) -> None:
        """Put the frozen layers' states of the last generation into `batch` (TRL's layout: prompt
        part left-padded to prompt_ids' width, completion part right-padded to completion_ids'),
        after checking that the batch holds the tokens they were computed for."""
        out, self._pending = self._pending, None
        if out is None or out.trunk_states is None:
            return
        self.states_depth = self._pending_depth  # the layer whose outputs these are (+1)
        import torch
        from torch.nn import functional as F

        states = out.trunk_states.to(batch["prompt_ids"].device)
        W = out.prompt_width
        P, C = batch["prompt_ids"].shape[1], batch["completion_ids"].shape[1]
        prompt, completion = states[:, :W], states[:, W:]
        prompt = F.pad(prompt, (0, 0, max(0, P - W), 0))[:, -P:] if P else prompt[:, :0]
        completion = F.pad(completion, (0, 0, 0, max(0, C - completion.shape[1])))[:, :C]
        # the ids they were computed for, in the same layout, against TRL's batch (real tokens only)
        for name, mine, width, left in (("prompt", out.prompt_ids_tensor(), P, True),
                                        ("completion", out.completion_ids_tensor(), C, False)):
            mine = mine.to(batch["prompt_ids"].device)
            pad = width - mine.shape[1]
            mine = F.pad(mine, (pad, 0) if left else (0, pad), value=-1) if pad > 0 else (
                mine[:, -width:] if left else mine[:, :width])
            theirs, mask = batch[f"{name}_ids"], batch[f"{name}_mask"].bool()
            if mine.shape != theirs.shape or not bool((mine == theirs)[mask].all()):
                raise RuntimeError(f"generation.reuse_frozen: TRL's {name} tokens are not the ones generated "
                                   "(the frozen layers' states would be misaligned)")
        batch[FROZEN_KEYS[0]], batch[FROZEN_KEYS[1]] = prompt.contiguous(), completion.contiguous()

    # -- the training forward -------------------------------------------------------------------------

    def training_forward(self, trainer, model, inputs: dict, input_ids):
        """A context around the training forward of `inputs`' rows: above the frozen trunk when the
        batch carries its states and every layer below them is still frozen; recording the output
        head's inputs when the on-policy check needs the full processed distribution."""
        import contextlib

        return contextlib.contextmanager(self._training_forward)(trainer, model, inputs, input_ids)

    def _training_forward(self, trainer, model, inputs: dict, input_ids):
        import contextlib

        import torch

        unwrapped = trainer.accelerator.unwrap_model(model)
        with contextlib.ExitStack() as stack:
            if (self.resolved.own_path and self.onpolicy.truncated and self.onpolicy.skip is None
                    and inputs.get("sampling_per_token_logps") is not None):
                from resrl.engines.hidden import LastLayerStates

                self._head_model = unwrapped
                self._head_inputs = stack.enter_context(LastLayerStates(unwrapped, detach=True).capture(
                    keep_last=inputs["completion_ids"].shape[1] + 1))
            if self.states_depth and inputs.get(FROZEN_KEYS[0]) is not None:
                now = self.frozen_depth(unwrapped)
                if now < self.states_depth:  # a layer below the recorded one trains now: its states are stale
                    self.fallback("reuse_frozen", f"layers below layer {self.states_depth} were unfrozen after "
                                  f"generation recorded their outputs (frozen now: {now}); the training forward "
                                  "runs every layer", trl_compat_metrics(trainer))
                else:
                    from resrl.models.frozen_trunk import above_trunk

                    states = torch.cat([inputs[FROZEN_KEYS[0]], inputs[FROZEN_KEYS[1]]], dim=1)
                    stack.enter_context(above_trunk(unwrapped, self.states_depth, states, input_ids))
            yield

    # -- on-policy check ---------------------------------------------------------------------------------

    def log_onpolicy(self, sink: dict, logps, inputs: dict, mask) -> None:
        """|log-prob recorded at sampling − the training forward's under the same processing| over
        the loss tokens (`OnPolicyCheck`), when this path recorded them; above
        generation.max_logp_diff: an error."""
        sampled = inputs.get("sampling_per_token_logps")
        head_inputs, model = self._head_inputs, self._head_model
        self._head_inputs = self._head_model = None
        if sampled is None or not self.resolved.own_path or self.onpolicy.skip is not None:
            return
        import torch

        with torch.no_grad():
            m = mask.bool()
            if self.onpolicy.truncated:
                if not head_inputs:
                    raise RuntimeError("generation: the training forward did not run the final norm (the on-policy "
                                       "check's head input)")
                trained = self.onpolicy.processed_logprobs(model, torch.cat(head_inputs), inputs["completion_ids"], m)
            else:
                trained = logps.detach().float()
            diff = (trained - sampled.float()).abs()[m]
            if diff.numel():
                worst = diff.max().item()
                sink["generation/logp_diff_mean"].append(diff.mean().item())
                sink["generation/logp_diff_max"].append(worst)
                if self.max_logp_diff is not None and not worst <= self.max_logp_diff:
                    raise OnPolicyMismatch(
                        f"generation/logp_diff_max = {worst:.3g} nats exceeds generation.max_logp_diff = "
                        f"{self.max_logp_diff:g}: the log-probs generation recorded ({self.resolved.backend}"
                        f"{' + shared prefill' if self.resolved.shared_prefill else ''}, attention layout "
                        f"{self.resolved.layout}) differ from the training forward's under the same sampling "
                        f"({self.onpolicy.describe()}): the rollouts were not sampled from the policy being trained")


def trl_compat_metrics(trainer) -> dict:
    from resrl.engines.trl import compat as trl_compat

    return trl_compat.metrics(trainer, "train" if trainer.model.training else "eval")


class OnPolicyMismatch(RuntimeError):
    """generation/logp_diff_max above the user's generation.max_logp_diff."""


class OnPolicyCheck:
    """What the on-policy check compares, for one GenerationConfig.

    Generation records log softmax(warpers(z)) at each sampled id (resrl.models.rollout.SampledLogprobs:
    temperature, top-k, top-p, min-p, ... in generate's order). The training forward computes
    log softmax(z / T) for the loss (TRL's, untruncated: the policy loss is unchanged). Like is compared
    with like:
        temperature only   the loss's log-probs themselves (no extra work)
        truncating warpers the output head applied again (no grad) to the training forward's final-norm
                           outputs at the loss tokens, through the same warpers: the truncated
                           distribution's log-prob, which a token sampled outside the training forward's
                           top-k / top-p support makes infinite (a sampler drawing from the wrong support
                           shows whatever the user samples with)
        logits processors  (repetition penalty, n-gram bans, min_new_tokens, suppressed tokens, ...)
                           depend on each row's history: not compared (`skip` says why)"""

    # GenerationConfig fields that add a logits processor before the warpers: (field, its neutral values)
    PROCESSORS = (("repetition_penalty", (None, 1.0)), ("no_repeat_ngram_size", (None, 0)),
                  ("encoder_repetition_penalty", (None, 1.0)), ("encoder_no_repeat_ngram_size", (None, 0)),
                  ("bad_words_ids", (None,)), ("suppress_tokens", (None,)), ("begin_suppress_tokens", (None,)),
                  ("min_new_tokens", (None, 0)), ("min_length", (None, 0)), ("sequence_bias", (None,)),
                  ("forced_bos_token_id", (None,)), ("forced_eos_token_id", (None,)),
                  ("exponential_decay_length_penalty", (None,)), ("guidance_scale", (None, 1.0)),
                  ("watermarking_config", (None,)), ("renormalize_logits", (None, False)))
    CHUNK = 256  # loss tokens per head product (a (CHUNK, V) float32 block at a time)

    def __init__(self, cfg) -> None:
        from resrl.models.rollout import sampling_warpers

        self.cfg = cfg
        self.warpers = sampling_warpers(cfg) if cfg is not None else []
        self.skip = self._skip_reason(cfg)
        from transformers import TemperatureLogitsWarper

        self.truncated = any(not isinstance(w, TemperatureLogitsWarper) for w in self.warpers)

    @classmethod
    def _skip_reason(cls, cfg) -> str | None:
        if cfg is None:
            return "no GenerationConfig"
        if not cfg.do_sample:
            return "greedy decoding (do_sample false) records no sampling distribution"
        on = [f"{name}={getattr(cfg, name)!r}" for name, neutral in cls.PROCESSORS
              if getattr(cfg, name, None) not in neutral]
        if on:
            return (f"the sampling settings {', '.join(on)} add logits processors that depend on each row's history; "
                    "the training forward does not replay them")
        return None

    def describe(self) -> str:
        return ", ".join(type(w).__name__.removesuffix("LogitsWarper").lower() for w in self.warpers) or "plain softmax"

    def processed_logprobs(self, model, head_inputs, completion_ids, mask):
        """(B, C) log-probs of `completion_ids` under the warpers applied to the training forward's
        logits (positions outside `mask`: 0). head_inputs: (B, >= C + 1, d) final-norm outputs, the
        last C + 1 positions those of the prompt's last token and of the completion."""
        import torch

        from resrl.engines.hidden import align_response_hidden

        C = completion_ids.shape[1]
        x = align_response_hidden(head_inputs, C, "predicting")[mask]  # (N, d): the state predicting each token
        ids = completion_ids[mask]
        out = torch.zeros(mask.shape, dtype=torch.float32, device=x.device)
        values = []
        for start in range(0, x.shape[0], self.CHUNK):
            z = output_logits(model, x[start:start + self.CHUNK])  # (n, V) float32
            dummy = torch.zeros((z.shape[0], 1), dtype=torch.long, device=z.device)  # the warpers read scores only
            for warper in self.warpers:
                z = warper(dummy, z)
            lp = torch.log_softmax(z, dim=-1)
            values.append(lp.gather(1, ids[start:start + self.CHUNK, None].to(lp.device))[:, 0])
        if values:
            out[mask] = torch.cat(values).to(out.device)
        return out


def output_logits(model, states):
    """(n, V) float32 logits of the model's output head on final-norm outputs `states` (n, d), with the
    logit scale and soft-capping the config names, as TRL's fused head applies them (trl.trainer.utils.
    add_fused_lm_head): z = cap * tanh(scale * (W x + b) / cap)."""
    import torch
    from torch.nn import functional as F

    head = model.get_output_embeddings()
    z = F.linear(states.to(head.weight.dtype), head.weight, getattr(head, "bias", None)).float()
    text = model.config.get_text_config()
    scale = getattr(text, "logit_scale", None)
    if scale is None:
        scale = getattr(text, "output_multiplier", None)
    if scale is None:
        scale = getattr(text, "lm_head_multiplier", None)
    if scale is None and getattr(text, "logits_scaling", None) is not None:
        scale = text.logits_scaling if text.model_type == "hyperclovax" else 1 / text.logits_scaling
    if scale is not None and scale != 1.0:
        z = z * scale
    cap = getattr(text, "final_logit_softcapping", None)
    if cap:
        z = cap * torch.tanh(z / cap)
    return z


__all__ = ["TrainerGeneration", "FROZEN_KEYS", "OnPolicyCheck", "OnPolicyMismatch", "output_logits", "trl_flags"]
