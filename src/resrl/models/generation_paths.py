"""Which generation path samples a run's rollouts: the `generation:` settings, their checks, and the
choice among the paths, per device and per architecture.

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
                     (resrl.models.frozen_trunk; None: auto's choice; hf only)
    max_logp_diff    the on-policy check's error threshold: a step whose generation/logp_diff_max
                     exceeds it stops the run (None: logged only)

Exact per architecture: each fast path (shared prefill, resrl's static cache, the compiled decode,
the frozen-layer shortcut) runs only on the attention layouts (resrl.models.attention) where the
conformance matrix, tests/test_decoder_matrix.py, proved it exact (`PROVED`). Asked for on another
layout it is refused (one error naming the layout); chosen by `auto` it falls back to the exact
path, and the reason is logged once and counted in `generation/fallback/<option>`.

A path that cannot run raises one `GenerationUnavailable` naming what is missing (vllm not
installed, no C++ compiler for torch.compile on CPU, transformers too old for continuous
batching); nothing falls back to another sampler (the exact-path fallbacks above change only
how the same sampler's work is laid out). The TRL engine runs the choice
(resrl.engines.trl.generation: TRL's flags, the trainer's call into resrl.models.rollout).

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


# The fast paths and the attention layouts (resrl.models.attention.attention_layout) on which the
# conformance matrix (tests/test_decoder_matrix.py: 15 families of transformers' own classes, every
# path x short and long prompts x left padding x temperature-only and top-k/top-p sampling, and the
# shortcut's gradient with activation checkpointing off / reentrant / non-reentrant, LoRA, layers
# unfrozen after construction) proved them exact. One table: a layout not listed proves nothing.
FAST_OPTIONS = ("shared_prefill", "compiled", "reuse_frozen")
PROVED = {
    "full": frozenset(FAST_OPTIONS),
    "sliding": frozenset(FAST_OPTIONS),
}


@dataclass
class GenerationSettings:
    """The `generation:` section of a training config (and `ResRLTrainer(generation=...)`)."""
    # auto | hf | compiled | paged | vllm (the module docstring)
    backend: Literal["auto", "hf", "compiled", "paged", "vllm"] = "auto"
    # hf / compiled: one prefill per prompt, copied to its G samples; null: auto's choice for the device
    shared_prefill: bool | None = None
    prompt_bucket: int = 64  # compiled: prompt lengths padded up to a multiple (one compiled shape per bucket)
    # with model.trainable_layers: the training forward reuses the frozen layers' outputs computed
    # during generation (null: auto's choice for the device)
    reuse_frozen: bool | None = None
    # the on-policy check (generation/logp_diff_max: the log-probs generation recorded vs the training
    # forward's under the same temperature / top-k / top-p): a step above this many nats stops the run
    # with an error (null: logged only). Needs resrl's own generation path (docs/generation.md).
    max_logp_diff: float | None = None


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
    layout: str = "full"  # the model's attention layout (resrl.models.attention)
    fallbacks: tuple[tuple[str, str], ...] = ()  # (option, why) that auto left out: logged once, counted per step


def check_settings(settings: GenerationSettings) -> None:
    if settings.backend not in BACKENDS:
        raise ValueError(f"generation.backend must be one of {BACKENDS}, got {settings.backend!r}")
    if settings.prompt_bucket < 1:
        raise ValueError(f"generation.prompt_bucket must be >= 1, got {settings.prompt_bucket}")
    if settings.shared_prefill and settings.backend in ("paged", "vllm"):
        raise ValueError(f"generation.shared_prefill applies to the hf and compiled backends; {settings.backend} "
                         "schedules its own prefill (set it to null)")
    if settings.max_logp_diff is not None and not settings.max_logp_diff > 0:
        raise ValueError(f"generation.max_logp_diff must be > 0 (nats) or null, got {settings.max_logp_diff!r}")
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
            multi_turn: bool = False, frozen_layers: bool = False, layout: str = "full") -> ResolvedGeneration:
    """The path a run uses. `use_vllm` / `paged`: TRL's flags as the trainer has them; `multi_turn`:
    tools, environments or a rollout_func (TRL's generation loop stays TRL's: only the hf path);
    `frozen_layers`: the model has frozen bottom layers; `layout`: its attention layout
    (resrl.models.attention), which decides which fast paths are proved (`PROVED`).
    GenerationUnavailable when the path named cannot run here; ValueError when a fast path asked
    for is not proved exact on `layout`."""
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
    reuse = bool(reuse and frozen_layers)
    fallbacks = []
    # only what the matrix proved on this layout: asked for -> refused; auto's choice -> left out, said why
    proved = PROVED.get(layout, frozenset())
    asked = {"compiled": b == "compiled", "shared_prefill": settings.shared_prefill is True,
             "reuse_frozen": settings.reuse_frozen is True}
    for option, on in (("compiled", backend == "compiled"), ("shared_prefill", shared), ("reuse_frozen", reuse)):
        if not on or option in proved:
            continue
        where = sorted(k for k, v in PROVED.items() if option in v)
        why = (f"not proved exact on this model's attention layout ({layout}); tests/test_decoder_matrix.py proves "
               f"it on {', '.join(where)} layouts")
        if asked[option]:
            raise ValueError(f"generation.{'backend: compiled' if option == 'compiled' else option + ': true'}: {why}")
        fallbacks.append((option, why))
        if option == "compiled":
            backend, own = "hf", True
        elif option == "shared_prefill":
            shared = False
        else:
            reuse = False
    if backend == "compiled" and reuse:
        # a compiled (CUDA-graph) decode step runs no Python hooks: the frozen layers' outputs of the
        # decoded tokens cannot be recorded (the trainer crashed here at its first round: issue 51)
        why = ("generation.backend: compiled runs its decode steps without Python hooks, so the frozen layers' "
               "outputs are not recorded; the training forward runs every layer")
        if asked["reuse_frozen"]:
            raise ValueError(f"generation.reuse_frozen: true needs generation.backend hf: {why}")
        fallbacks.append(("reuse_frozen", why))
        reuse = False
    # TRL's call, unchanged, when nothing differs from it
    own = own and (backend != "hf" or shared or reuse)
    return ResolvedGeneration(backend, bool(shared), settings.prompt_bucket, bool(reuse), own, reason, layout,
                              tuple(fallbacks))


__all__ = ["BACKENDS", "OWN_PATHS", "AUTO", "AutoChoice", "FAST_OPTIONS", "PROVED", "GenerationSettings",
           "GenerationUnavailable", "ResolvedGeneration", "check_settings", "requirement_problem", "resolve"]
