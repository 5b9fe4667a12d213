"""Which generation path samples a run's rollouts: the `generation:` settings, their checks, and the
TRL trainer's call into resrl.models.rollout.

    backend   auto | hf | compiled | paged | vllm
        hf        TRL's own `generate` call (dynamic KV cache, no compilation): GRPOTrainer's default
        compiled  static KV cache, compiled decode steps (CUDA graphs on CUDA), prompt lengths
                  bucketed (resrl.models.rollout)
        paged     transformers' continuous batching: TRL's `use_transformers_continuous_batching`
        vllm      vLLM through TRL (`use_vllm`); needs the vllm package
        auto      the path `AUTO` names for the device (below), chosen from committed measurements
    shared_prefill   hf / compiled: each prompt's prefill computed once for the G samples of its
                     group (None: auto's choice for the device)
    prompt_bucket    compiled: prompts left-padded to a multiple of this many tokens
    reuse_frozen     with frozen bottom layers (model.trainable_layers), the training forward starts
                     from the frozen layers' outputs that generation computed for the same tokens
                     (resrl.engines.frozen_trunk; None: auto's choice; hf / compiled only)

A path that cannot run raises one `GenerationUnavailable` naming what is missing (vllm not
installed, no C++ compiler for torch.compile on CPU, transformers too old for continuous
batching); nothing falls back to another sampler. TRL's own fields keep their meaning:
`use_vllm` / `use_transformers_continuous_batching` select their path (and contradict another
backend), `generation_kwargs`, `cache_implementation` (the hf path's; the compiled path's cache is
static by definition), temperature / top-p / top-k / min-p / repetition penalty reach every path
through TRL's GenerationConfig.

This module imports neither torch nor TRL at import time (resrl.train.config reads it).
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from typing import Literal

BACKENDS = ("auto", "hf", "compiled", "paged", "vllm")
OWN_PATHS = ("hf", "compiled")  # run by resrl.models.rollout (TRL's hf call when nothing is changed)


@dataclass(frozen=True)
class AutoChoice:
    backend: str
    shared_prefill: bool
    reuse_frozen: bool
    evidence: str


# `auto` per device type: the fastest path measured exact there (benchmarks/bench_generation.py and
# benchmarks/bench_smollm2_step.py; the results files named). A device with no committed
# measurement of a faster path keeps TRL's call.
AUTO = {
    "cpu": AutoChoice("hf", shared_prefill=True, reuse_frozen=True,
                      evidence="benchmarks/results/generation_cpu.md, benchmarks/results/smollm2_step_fast.md"),
    "cuda": AutoChoice("hf", shared_prefill=False, reuse_frozen=False,
                       evidence="TRL's call: the H200 run of 2026-11-28 measured compiled + shared 5.29x in "
                                "generation alone, its training step not yet (docs/gpu.md)"),
}


@dataclass
class GenerationSettings:
    """The `generation:` section of a training config (and `ResRLTrainer(generation=...)`)."""
    # auto | hf | compiled | paged | vllm (resrl.engines.generation)
    backend: Literal["auto", "hf", "compiled", "paged", "vllm"] = "auto"
    # hf / compiled: one prefill per prompt, copied to its G samples; null: auto's choice for the device
    shared_prefill: bool | None = None
    prompt_bucket: int = 64  # compiled: prompt lengths padded up to a multiple (one compiled shape per bucket)
    # with model.trainable_layers: the training forward reuses the frozen layers' outputs computed
    # during generation (null: auto's choice for the device)
    reuse_frozen: bool | None = None


class GenerationUnavailable(RuntimeError):
    """A generation path that cannot run here; the message names what is missing."""


@dataclass(frozen=True)
class ResolvedGeneration:
    backend: str  # hf | compiled | paged | vllm
    shared_prefill: bool
    prompt_bucket: int
    reuse_frozen: bool
    own_path: bool  # resrl.models.rollout runs it (else TRL's own code path, unchanged)
    reason: str  # how it was chosen (logged once)


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


def check_settings(settings: GenerationSettings) -> None:
    if settings.backend not in BACKENDS:
        raise ValueError(f"generation.backend must be one of {BACKENDS}, got {settings.backend!r}")
    if settings.prompt_bucket < 1:
        raise ValueError(f"generation.prompt_bucket must be >= 1, got {settings.prompt_bucket}")
    if settings.shared_prefill and settings.backend in ("paged", "vllm"):
        raise ValueError(f"generation.shared_prefill applies to the hf and compiled backends; {settings.backend} "
                         "schedules its own prefill (set it to null)")
    if settings.reuse_frozen and settings.backend in ("paged", "vllm"):
        raise ValueError(f"generation.reuse_frozen needs the frozen layers' outputs of generation, which the "
                         f"{settings.backend} backend does not expose (set it to null)")


def requirement_problem(backend: str, device_type: str) -> str | None:
    """What is missing for `backend` on `device_type` (None: it can run)."""
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            return "generation.backend: vllm needs the vllm package, which is not installed (pip install vllm; GPU only)"
        if device_type != "cuda":
            return f"generation.backend: vllm needs a CUDA GPU; this run's device is {device_type}"
    if backend == "paged":
        import transformers
        from packaging.version import Version

        if Version(transformers.__version__) < Version("5.8.0"):
            return (f"generation.backend: paged (transformers' continuous batching) needs transformers >= 5.8, "
                    f"installed {transformers.__version__}")
    if backend == "compiled" and device_type == "cpu":
        if not any(shutil.which(cc) for cc in ("c++", "g++", "clang++")):
            return ("generation.backend: compiled on CPU needs a C++ compiler for torch.compile (inductor's CPU code "
                    "generation): none of c++, g++, clang++ is on PATH")
    return None


def resolve(settings: GenerationSettings, device_type: str, *, use_vllm: bool = False, paged: bool = False,
            multi_turn: bool = False, frozen_layers: bool = False) -> ResolvedGeneration:
    """The path a run uses. `use_vllm` / `paged`: TRL's flags as the trainer has them; `multi_turn`:
    tools, environments or a rollout_func (TRL's generation loop stays TRL's: only the hf path);
    `frozen_layers`: the model has frozen bottom layers. GenerationUnavailable when the path named
    cannot run here."""
    check_settings(settings)
    b = settings.backend
    if use_vllm and b not in ("auto", "vllm") or paged and b not in ("auto", "paged"):
        raise ValueError(f"generation.backend: {b} contradicts the trainer's "
                         f"{'use_vllm' if use_vllm else 'use_transformers_continuous_batching'}=True")
    if b == "vllm" and not use_vllm or b == "paged" and not paged:
        flag = "use_vllm" if b == "vllm" else "use_transformers_continuous_batching"
        raise ValueError(f"generation.backend: {b} needs GRPOConfig.{flag}=True (resrl train sets it; with "
                         "ResRLTrainer, pass it in the GRPOConfig)")
    auto = AUTO.get(device_type, AUTO["cuda"])
    if b == "auto":
        if use_vllm or paged:
            backend, reason = ("vllm" if use_vllm else "paged"), "auto: TRL's flag names it"
        else:
            backend, reason = auto.backend, f"auto for {device_type}: {auto.evidence}"
    else:
        backend, reason = b, "generation.backend"
    problem = requirement_problem(backend, device_type)
    if problem is not None:
        raise GenerationUnavailable(problem)
    own = backend in OWN_PATHS
    shared = settings.shared_prefill if settings.shared_prefill is not None else (own and auto.shared_prefill)
    reuse = settings.reuse_frozen if settings.reuse_frozen is not None else (own and auto.reuse_frozen)
    if multi_turn:
        if backend == "compiled" or settings.shared_prefill or settings.reuse_frozen:
            raise ValueError("generation.backend: compiled, shared_prefill and reuse_frozen apply to single-turn "
                             "rollouts; tools / environments / rollout_func keep TRL's generation loop (hf, paged "
                             "or vllm)")
        shared = reuse = False
    reuse = reuse and frozen_layers
    # TRL's call, unchanged, when nothing differs from it
    own = own and (backend != "hf" or shared or reuse)
    return ResolvedGeneration(backend, bool(shared), settings.prompt_bucket, bool(reuse), own, reason)


# ---- the TRL trainer's generation path --------------------------------------------------------------

FROZEN_KEYS = ("frozen_prompt_states", "frozen_completion_states")  # (B, P, d) left-, (B, C, d) right-padded


class TrainerGeneration:
    """ResRLTrainer's generation path, resolved once at construction (`resolve`) and logged:

        generate(trainer, prompt_ids, images, multimodal_fields, trl_call)  TRL's _generate_single_turn
        attach(trainer, batch)          the frozen layers' states into TRL's generation batch (reuse_frozen)
        training_forward(model, inputs, input_ids)   a context around the training forward (reuse_frozen)
        log_onpolicy(sink, logps, inputs, mask)      generation/logp_diff_{mean,max}: |sampled − trained|

    `needs_penultimate`: the algorithm reads the penultimate layer's states, which the training
    forward must then compute (the reused trunk stops below it)."""

    def __init__(self, trainer, settings: GenerationSettings | None, needs_penultimate: bool) -> None:
        import logging

        from resrl.models.freeze import decoder_layers
        from resrl.models.frozen_trunk import frozen_depth

        log = logging.getLogger(__name__)
        if settings is None:
            settings = GenerationSettings(backend=getattr(trainer.args, "generation_backend", None) or "auto",
                                          shared_prefill=getattr(trainer.args, "shared_prefill", None),
                                          reuse_frozen=getattr(trainer.args, "reuse_frozen", None))
        model = trainer.accelerator.unwrap_model(trainer.model)
        depth = frozen_depth(model)
        if depth and needs_penultimate:
            depth = min(depth, len(decoder_layers(model)[0]) - 2)  # the penultimate layer runs in the training forward
        # tools, environments, a rollout_func (TRL's loop) or the step layout (its own sampler, engines/steps.py)
        multi_turn = (bool(trainer.tools) or trainer.environment_factories is not None
                      or trainer.rollout_func is not None or getattr(trainer, "step_rollout", None) is not None)
        resolved = resolve(settings, trainer.accelerator.device.type, use_vllm=bool(trainer.use_vllm),
                           paged=bool(trainer.use_transformers_continuous_batching), multi_turn=multi_turn,
                           frozen_layers=depth > 0)
        sharded = trainer.is_fsdp_enabled or (trainer.is_deepspeed_enabled and getattr(
            trainer.accelerator.state.deepspeed_plugin, "zero_stage", 0) == 3)
        if resolved.own_path and sharded:
            if settings.backend == "compiled" or settings.shared_prefill or settings.reuse_frozen:
                raise ValueError("generation.backend: compiled, shared_prefill and reuse_frozen run on a whole model; "
                                 "FSDP / DeepSpeed ZeRO-3 shard it: use generation.backend hf, paged or vllm")
            resolved = ResolvedGeneration("hf", False, resolved.prompt_bucket, False, False,
                                          resolved.reason + "; TRL's call under FSDP / ZeRO-3 (sharded weights)")
        self.resolved = resolved
        self.depth = depth if resolved.reuse_frozen else 0
        self._pending = None  # the last generate()'s rollouts, until attach()
        self._cache_length = 0  # the static KV cache's length so far (the compiled path's one shape)
        log.info("generation: %s%s%s (%s)", resolved.backend, ", shared prefill" if resolved.shared_prefill else "",
                 f", training forward above the {self.depth} frozen layers" if self.depth else "", resolved.reason)

    # -- generation ------------------------------------------------------------------------------------

    def generate(self, trainer, prompt_ids, images, multimodal_fields, trl_call):
        if not self.resolved.own_path or images is not None or multimodal_fields:
            return trl_call()
        from resrl.engines import trl_compat
        from resrl.models.rollout import RolloutSettings, generate_rollouts

        settings = RolloutSettings(self.resolved.backend, shared_prefill=self.resolved.shared_prefill,
                                   prompt_bucket=self.resolved.prompt_bucket, cache_length=self._cache_length)
        with trainer.model_for_generation() as model:
            out = generate_rollouts(model, prompt_ids, trainer.generation_config, settings,
                                    pad_token_id=trl_compat.tokenizer(trainer).pad_token_id,
                                    eos_token_ids=trainer.eos_token_ids, trunk_depth=self.depth)
        self._pending = out if self.depth else None
        self._cache_length = out.cache_length  # grow-only: one compiled decode shape across steps
        return out.completion_ids, out.logprobs

    def attach(self, trainer, batch: dict) -> None:
        """Put the frozen layers' states of the last generation into `batch` (TRL's layout: prompt
        part left-padded to prompt_ids' width, completion part right-padded to completion_ids'),
        after checking that the batch holds the tokens they were computed for."""
        out, self._pending = self._pending, None
        if out is None or out.trunk_states is None:
            return
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
        batch carries its states, else nothing."""
        import contextlib

        import torch

        if self.depth == 0 or inputs.get(FROZEN_KEYS[0]) is None:
            return contextlib.nullcontext()
        from resrl.models.frozen_trunk import above_trunk

        states = torch.cat([inputs[FROZEN_KEYS[0]], inputs[FROZEN_KEYS[1]]], dim=1)
        return above_trunk(trainer.accelerator.unwrap_model(model), self.depth, states, input_ids)

    # -- on-policy check ---------------------------------------------------------------------------------

    def log_onpolicy(self, sink: dict, logps, inputs: dict, mask) -> None:
        """|log-prob recorded at sampling − the training forward's| over the loss tokens, when this
        path recorded them and they measure the same distribution (temperature only: no top-k /
        top-p / min-p / repetition penalty, which renormalise the sampling distribution)."""
        sampled = inputs.get("sampling_per_token_logps")
        if sampled is None or not self.resolved.own_path or not self.comparable:
            return
        import torch

        with torch.no_grad():
            m = mask.bool()
            diff = (logps.detach().float() - sampled.float()).abs()[m]
            if diff.numel():
                sink["generation/logp_diff_mean"].append(diff.mean().item())
                sink["generation/logp_diff_max"].append(diff.max().item())

    comparable = False  # set by the trainer from its GenerationConfig (see sampling_is_tempered_softmax)


def sampling_is_tempered_softmax(cfg) -> bool:
    """Does `cfg` sample from softmax(logits / T) itself (no truncation or penalty)?"""
    return (cfg.top_k in (None, 0) and (cfg.top_p is None or cfg.top_p >= 1.0) and cfg.min_p is None
            and (cfg.repetition_penalty is None or cfg.repetition_penalty == 1.0)
            and (getattr(cfg, "typical_p", None) in (None, 1.0)) and not getattr(cfg, "epsilon_cutoff", 0.0)
            and not getattr(cfg, "eta_cutoff", 0.0) and not getattr(cfg, "no_repeat_ngram_size", 0)
            and not getattr(cfg, "suppress_tokens", None) and not getattr(cfg, "bad_words_ids", None)
            and not getattr(cfg, "min_new_tokens", 0) and not getattr(cfg, "min_length", 0))


__all__ = ["TrainerGeneration", "FROZEN_KEYS", "sampling_is_tempered_softmax", "BACKENDS", "AUTO", "AutoChoice", "GenerationSettings", "GenerationUnavailable", "ResolvedGeneration",
           "trl_flags", "check_settings", "requirement_problem", "resolve"]
