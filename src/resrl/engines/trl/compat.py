"""Every private TRL touch-point of the TRL engine, in one module.

`resrl.engines.trl.ResRLTrainer` subclasses TRL's `GRPOTrainer`. What it cannot tell TRL through
TRL's public surface it does here, and only here; the other engine modules go through the names
below and never touch `trainer._x` themselves. Read against the TRL releases in `READ_AGAINST`;
`tests/test_trl_compat.py` has one test per touch-point that fails when TRL changes the thing
relied on (a method's signature, the batch keys, the order of calls, a private attribute).

1. Private methods TRL calls by name, overridden by `GRPOHooks` (the adapter's base class), each
   handing over to a named method of the adapter:

       _prepare_inputs                    TRL's copy, with a whole-group shuffle (see below)
         _generate_and_score_completions  -> adapter.generation_round(inputs)
           (TRL's own, through trl_generate_and_score):
             _calculate_rewards           keeps the round's weighted rewards for the adapter
             _get_per_token_logps_and_entropies   no-grad old log-probs (when TRL runs that pass)
       training_step -> compute_loss
         _compute_loss                    -> adapter.compute_policy_loss(model, inputs)
           _get_per_token_logps_and_entropies     the training forward
         _step += 1                       once per micro-batch, after the loss
       _save_checkpoint                   -> adapter.write_checkpoint(model, trial, write=TRL's)
       _load_from_checkpoint              TRL's, then adapter.checkpoint_loaded(path)
       _get_train_sampler                 TRL's RepeatSampler, as an `EpochRepeatSampler` (below)
       _generate_single_turn              -> adapter.generate_rows(prompt_ids, ..., trl_call): TRL's own
                                          generation (trl_call()) or a resrl generation path
                                          (resrl.engines.trl.generation)

   Every `_get_per_token_logps_and_entropies` call (TRL's and the adapter's own, through
   `per_token_logps`) goes through `adapter.policy_forward(...)`, which may record hidden states.
2. Private state: `_step`, `_buffered_inputs` (in `_prepare_inputs` only), `_metrics`
   (`metrics(trainer, mode)`), `_tokenizer` (`tokenizer(trainer)`).
3. Undocumented public attributes of a GRPOTrainer the engine reads: `TRAINER_ATTRIBUTES`.
4. The keys of TRL's generation batch the engine reads or writes: `BATCH_KEYS`.
5. vLLM's weight stream `VLLMGeneration._iter_named_params`, wrapped by `filter_vllm_weights`.
7. `trl.trainer.utils._use_triton`, read by TRL's fused LM head (`add_fused_lm_head`) to decide
   whether to score only the positions that have a label: TRL does so on Triton devices and scores
   every position elsewhere (its comment: a varying count would recompile on e.g. Neuron). On CPU,
   where nothing is compiled, the engine's forwards score only the labelled (completion) positions
   (`labelled_positions_only`): the same log-probs bit for bit, about half the output-head work for
   prompts as long as their completions (benchmarks/results/smollm2_step_fast.md).
6. TRL internals imported: `RepeatSampler`, `identity`, `split_tensor_dict`, `use_adapter`,
   `split_pixel_values_by_grid`, `unsplit_pixel_values_by_grid`, and for the reference model
   `create_model_from_path`, `get_config_model_id`, `disable_dropout_in_model`,
   `add_fused_lm_head`, `prepare_deepspeed`, `prepare_fsdp`, and for generation
   `unwrap_model_for_generation` (`TRL_FUNCTIONS` lists them with the parameters the engine passes).

The train sampler: TRL's `RepeatSampler` draws each epoch's permutation from one generator seeded
once, so epoch e's order is the (e+1)-th permutation of that stream; HF's Trainer, resuming in epoch
e >= 1, builds a fresh sampler and never replays the earlier epochs' draws, so a resumed run served
epoch 0's order again (resume was exact only inside the first epoch). `EpochRepeatSampler` is TRL's
sampler whose order is a function of (seed, epoch): `set_epoch(e)`, which HF's Trainer calls at
the start of every epoch (through accelerate's DataLoaderShard, skip_first_batches included), seeks
the generator to where an uninterrupted TRL sampler would be at epoch e. Orders are TRL's own,
epoch for epoch (`tests/test_trl_compat.py` compares them).

`_prepare_inputs` is TRL 1.16's with one change, the shuffle: TRL permutes rows
(`shuffle_sequence_dict`); here whole groups move (`resrl.engines.trl.batches.shuffle_groups`), so that
micro-batches that are multiples of the group size hold whole groups (ResRL's aligned mode). TRL's
vision-language pixel-value split and unsplit around the shuffle are kept as TRL has them.
(`PREPARE_INPUTS_CALLS` records TRL's sequence; a compat test fails when TRL's changes.)

Installed TRL outside `READ_AGAINST`: a warning (`UntestedTRLWarning`) at import, not an error —
the suite's compat tests decide (docs/install.md, "Admitting a new TRL release").
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable

import torch
import trl
from packaging.version import Version
from trl import GRPOTrainer
from trl.models import prepare_deepspeed, prepare_fsdp, unwrap_model_for_generation
from trl.trainer.utils import (RepeatSampler, add_fused_lm_head, create_model_from_path, disable_dropout_in_model,
                               get_config_model_id, identity, split_pixel_values_by_grid, split_tensor_dict,
                               unsplit_pixel_values_by_grid, use_adapter)

from resrl.engines.trl.batches import shuffle_groups
from resrl.engines.trl.fields import MAPPING

__all__ = [
    "READ_AGAINST", "UntestedTRLWarning", "check_trl_version", "GRPOHooks", "GRPOTrainer", "BATCH_KEYS",
    "TRL_BATCH_KEYS", "TRAINER_ATTRIBUTES", "metrics", "current_step", "tokenizer", "filter_vllm_weights",
    "RepeatSampler", "EpochRepeatSampler", "identity", "use_adapter", "create_model_from_path", "get_config_model_id",
    "disable_dropout_in_model", "add_fused_lm_head", "prepare_deepspeed", "prepare_fsdp",
    "unwrap_model_for_generation", "labelled_positions_only",
]

# [first release read, first release not read): the code below was read against trl 1.16.0
READ_AGAINST = ("1.16.0", "1.17")
COMPAT_TESTS = "tests/test_trl_compat.py"


class UntestedTRLWarning(UserWarning):
    """The installed TRL is outside the releases this engine was read against."""


def trl_version_problem(version: str) -> str | None:
    """None when `version` is in READ_AGAINST, else the warning's text."""
    low, below = (Version(v) for v in READ_AGAINST)
    v = Version(version)
    if low <= v and v.release < below.release:  # 1.17.0.dev0 is 1.17 already
        return None
    return (f"resrl's TRL engine was read against trl >={READ_AGAINST[0]},<{READ_AGAINST[1]}; trl {version} is "
            f"installed. It overrides GRPOTrainer internals: run {COMPAT_TESTS} (then the engine tests) before "
            "trusting a training run, or install a trl in that range")


def check_trl_version(version: str | None = None) -> bool:
    """Warn (UntestedTRLWarning) when the installed TRL is outside READ_AGAINST; True when inside."""
    problem = trl_version_problem(trl.__version__ if version is None else version)
    if problem is not None:
        warnings.warn(problem, UntestedTRLWarning, stacklevel=2)
    return problem is None


check_trl_version()


# ---- 4. the generation batch ---------------------------------------------------------------------

# keys of the dict TRL's `_generate_and_score_completions` returns that the engine reads
# (name -> when TRL sets it)
TRL_BATCH_KEYS = {
    "prompt_ids": "always", "prompt_mask": "always", "completion_ids": "always", "completion_mask": "always",
    "advantages": "always (replaced by the engine's (B, T) token advantages)",
    "num_items_in_batch": "always (the engine recomputes it after dynamic sampling and for step rows)",
    "old_per_token_logps": "when generation and updates are misaligned, or vLLM importance sampling is on",
    "ref_per_token_logps": "when beta != 0",
    "importance_sampling_ratio": "with vLLM and vllm_importance_sampling_correction",
    "sampling_per_token_logps": "when the generation path returned the sampled tokens' log-probs (vLLM, resrl's "
                                "paths): the off-policy mask's behaviour policy",
    "tool_mask": "with tools / environments / rollout_func returning one (multi-turn)",
}
# the engine's own per-row keys in the same dict ((B,) rows; engines/trl/batches.py keeps them with the rows)
ENGINE_ROW_KEYS = ("rewards", "group_index", "truncated")
BATCH_KEYS = (*TRL_BATCH_KEYS, *ENGINE_ROW_KEYS)

# ---- 3. GRPOTrainer attributes (no underscore, not documented) the engine reads ---------------------

TRAINER_ATTRIBUTES = (
    "accelerator", "args", "model", "ref_model", "processing_class", "train_dataset", "state",
    "num_generations", "num_iterations", "temperature", "beta", "eos_token_ids", "reward_weights",
    "scale_rewards",  # written: the algorithm's, for TRL's own reward statistics (loss_type None is never read)
    "use_vllm", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode", "rollout_func",
    "aux_loss_enabled", "router_aux_loss_coef", "current_gradient_accumulation_steps",
    "is_deepspeed_enabled", "is_fsdp_enabled", "get_high_entropy_mask",
    # generation (resrl's paths): TRL's GenerationConfig, its continuous-batching flag, the wrapped model
    "generation_config", "generation_kwargs", "use_transformers_continuous_batching", "model_wrapped",
    "tools", "environment_factories",
)
# 2. private attributes (set in GRPOTrainer.__init__) the engine reads or writes
PRIVATE_ATTRIBUTES = ("_step", "_buffered_inputs", "_metrics", "_tokenizer")

# 6. the TRL functions the engine calls, with the parameters it passes
TRL_FUNCTIONS = {
    RepeatSampler: ("data_source", "mini_repeat_count", "batch_size", "repeat_count", "shuffle", "seed"),
    identity: ("x",),
    split_tensor_dict: ("tensor_dict", "num_chunks"),
    split_pixel_values_by_grid: ("batch",),
    unsplit_pixel_values_by_grid: ("batch",),
    use_adapter: ("model", "adapter_name"),
    create_model_from_path: ("model_id",),  # + **kwargs (model_init_kwargs)
    get_config_model_id: ("config",),
    disable_dropout_in_model: ("model",),
    add_fused_lm_head: ("model", "temperature", "cast_lm_head_to_fp32"),
    prepare_deepspeed: ("model", "accelerator"),
    prepare_fsdp: ("model", "accelerator"),
    unwrap_model_for_generation: ("model", "accelerator", "gather_deepspeed3_params", "generation_kwargs",
                                  "gradient_checkpointing_kwargs"),
}

# 1. the private methods overridden or called, with the parameters TRL passes / the engine passes
TRL_METHODS = {
    "_prepare_inputs": ("generation_batch",),
    "_generate_and_score_completions": ("inputs",),
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep", "batch_size",
                                           "compute_entropy", "compute_aux_loss"),
    "_compute_loss": ("model", "inputs"),
    "_save_checkpoint": ("model", "trial"),
    "_load_from_checkpoint": ("resume_from_checkpoint", "model"),
    "_get_train_sampler": ("dataset",),
    "training_step": ("model", "inputs", "num_items_in_batch"),
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
}
# what TRL 1.16's `_prepare_inputs` calls, in source order (training branch, then evaluation); the
# copy in GRPOHooks calls the same with shuffle_groups for shuffle_sequence_dict and TRL's own for eval
PREPARE_INPUTS_CALLS = ("_generate_and_score_completions", "split_pixel_values_by_grid", "shuffle_sequence_dict",
                        "split_tensor_dict", "unsplit_pixel_values_by_grid", "_generate_and_score_completions")

# What TRL 1.16's `_compute_loss` (replaced by ResRLTrainer.compute_policy_loss) reads of the
# trainer, and what became of each. A name TRL starts reading there is an option the engine would
# drop silently: the compat tests fail until it is classified here (and honoured or refused).
_USED, _ADOPTED, _REFUSED = "used as TRL uses it", "honoured by resrl.core.loss", "refused (engines/trl/fields.py)"
_ADAPTIVE = "TRL's adaptive entropy controller: refused (engines/trl/fields.py)"


def _mapped(read: str, field: str | None = None) -> str:
    """What became of a read of a GRPOConfig field that MAPPINGS maps (`field`: its name where the
    trainer reads it under another, e.g. self.epsilon_low for GRPOConfig.epsilon): the mapping's own
    words, so the record cannot drift from the table."""
    m = MAPPING[field or read.removeprefix("args.")]
    return f"mapped onto {m.key} (engines/trl/fields.MAPPINGS, GRPOConfig.{m.trl})" + (f": {m.note}" if m.note else "")


COMPUTE_LOSS_READS = {
    "_get_per_token_logps_and_entropies": _USED, "_metrics": _USED, "accelerator": _USED, "args": _USED,
    "model": _USED, "aux_loss_enabled": _USED, "router_aux_loss_coef": _USED,
    "current_gradient_accumulation_steps": _USED, "get_high_entropy_mask": _USED, "args.steps_per_generation": _USED,
    "top_entropy_quantile": _ADOPTED, "importance_sampling_level": _ADOPTED, "use_vllm": _ADOPTED,
    "vllm_importance_sampling_correction": _ADOPTED,
    **{read: _mapped(read) for read in ("beta", "epsilon_high", "max_completion_length", "loss_type",
                                        "args.sapo_temperature_neg", "args.sapo_temperature_pos", "args.vespo_k_neg",
                                        "args.vespo_k_pos", "args.vespo_lambda_neg", "args.vespo_lambda_pos",
                                        "off_policy_mask_threshold", "args.delta", "entropy_coef")},
    "epsilon_low": _mapped("epsilon_low", "epsilon"),
    "args.use_bias_correction_kl": "refused when True with beta != 0: resrl.core.loss's KL has no ratio correction",
    "get_gamma_weights": "VESPO's φ(w): resrl.core.loss's vespo term",
    "get_off_policy_mask": "resrl.core.loss.off_policy_sequence_mask",
    "_entropy_bonus_enabled": "on exactly when loss.entropy_coef > 0 (use_adaptive_entropy refused)",
    "use_adaptive_entropy": _ADAPTIVE, "_entropy_window_stats": _ADAPTIVE, "_last_world_entropy": _ADAPTIVE,
    "args.entropy_coef_delta": _ADAPTIVE, "args.entropy_coef_max": _ADAPTIVE, "args.entropy_coef_min": _ADAPTIVE,
    "args.entropy_target": _ADAPTIVE,
}


# ---- 2. private state ----------------------------------------------------------------------------

def metrics(trainer: GRPOTrainer, mode: str) -> dict[str, list]:
    """TRL's metric lists for `mode` ("train" | "eval"): append a value, TRL averages them at each log."""
    return trainer._metrics[mode]


def current_step(trainer: GRPOTrainer) -> int:
    """Micro-batches run so far (TRL's `_step`, advanced once per micro-batch after its loss)."""
    return trainer._step


def tokenizer(trainer: GRPOTrainer):
    """The text tokenizer (the processing class itself, or a processor's tokenizer)."""
    return trainer._tokenizer


# ---- 7. the fused LM head's scored positions -----------------------------------------------------------

# on: the engine's forwards on CPU score labelled positions only (off: TRL's behaviour, for the
# benchmarks' "before" rows, benchmarks/bench_smollm2_step.py --compare-generation)
LABELLED_POSITIONS_ONLY = True
# ... for vocabularies at least this large. Below it the output head costs next to nothing, and a
# matrix product over fewer rows may round differently in the last bit: the tiny character-level
# models of `resrl demo` (about 100 tokens) keep the arithmetic their documented numbers came from
# (ResRL's weights amplify a last-bit difference; a real tokenizer's 32k+ vocabulary is the case
# this is for: on SmolLM2's 49,152 the log-probs were the same bit for bit)
MIN_VOCAB_LABELLED_ONLY = 1024


@contextlib.contextmanager
def labelled_positions_only(device, vocab_size: int | None = None):
    """While open, TRL's fused LM head on `device` scores only the positions that have a label (the
    completion tokens), as it does on Triton devices; on CPU it would score every position. Each
    position's log-prob is its own row's computation (the same up to the matrix product's rounding).
    Only on CPU and for vocabularies of at least MIN_VOCAB_LABELLED_ONLY tokens."""
    import trl.trainer.utils as trl_utils

    if device.type != "cpu" or not LABELLED_POSITIONS_ONLY or (vocab_size or 0) < MIN_VOCAB_LABELLED_ONLY:
        yield
        return
    original = trl_utils._use_triton
    trl_utils._use_triton = lambda d: d.type == "cpu" or original(d)
    try:
        yield
    finally:
        trl_utils._use_triton = original


# ---- 5. vLLM's weight sync -------------------------------------------------------------------------

def filter_vllm_weights(trainer: GRPOTrainer,
                        keep: Callable[[Iterable[tuple[str, torch.Tensor]]], Iterable[tuple[str, torch.Tensor]]]):
    """Pass the (name, tensor) stream TRL sends to vLLM at each weight sync through `keep`."""
    generation = trainer.vllm_generation
    iterate = generation._iter_named_params
    generation._iter_named_params = lambda: keep(iterate())


# ---- the train sampler ------------------------------------------------------------------------------

# RepeatSampler's attributes (set in its __init__) that EpochRepeatSampler reads; its __iter__ draws
# exactly one torch.randperm(num_samples, generator=generator) when shuffle is on
REPEAT_SAMPLER_ATTRIBUTES = ("data_source", "mini_repeat_count", "batch_size", "repeat_count", "shuffle", "seed",
                             "num_samples", "generator")


class EpochRepeatSampler(RepeatSampler):
    """TRL's `RepeatSampler` whose order is a function of (seed, epoch), so that a run resumed in any
    epoch serves the order an uninterrupted one serves (see the module docstring).

    `set_epoch(e)` selects epoch e (HF's Trainer calls it at every epoch start); each iteration
    serves the selected epoch and selects the next one, so iterating without `set_epoch` gives
    TRL's sequence of epochs. The generator state before epoch e's permutation is reached by
    replaying the permutations of the epochs before it, from the last state cached (one
    permutation per epoch when epochs come in order)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch = 0
        if self.shuffle:
            self._first = self.generator.get_state()  # before epoch 0's draw
            self._cached = (0, self._first)            # (epoch, the state before its draw)

    @classmethod
    def like(cls, sampler: RepeatSampler) -> "EpochRepeatSampler":
        return cls(sampler.data_source, mini_repeat_count=sampler.mini_repeat_count, batch_size=sampler.batch_size,
                   repeat_count=sampler.repeat_count, shuffle=sampler.shuffle, seed=sampler.seed)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def seek(self, epoch: int) -> None:
        """Put the generator where an uninterrupted RepeatSampler is before epoch `epoch`'s draw."""
        start, state = self._cached
        if start > epoch:
            start, state = 0, self._first
        self.generator.set_state(state)
        for _ in range(epoch - start):
            torch.randperm(self.num_samples, generator=self.generator)
        self._cached = (epoch, self.generator.get_state())

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        if self.shuffle:
            self.seek(epoch)
        return super().__iter__()


# ---- 1. the overridden methods ---------------------------------------------------------------------

class GRPOHooks(GRPOTrainer):
    """The private GRPOTrainer / Trainer methods TRL calls by name, each handed to a named method of the
    subclass (`resrl.engines.trl.ResRLTrainer`), which implements:

        generation_round(inputs) -> batch           one generation round (TRL's local prompts)
        compute_policy_loss(model, inputs) -> loss  one micro-batch's loss
        policy_forward(model, input_ids, logits_to_keep, forward) -> forward()'s result, states recorded
        write_checkpoint(model, trial, write)       write() is TRL's checkpoint writer
        checkpoint_loaded(path)                     after TRL loaded a checkpoint
    """

    _round_rewards: torch.Tensor | None = None

    # -- calls into TRL --------------------------------------------------------------------------

    def trl_generate_and_score(self, inputs) -> tuple[dict, torch.Tensor]:
        """TRL's generate-and-score (generation, rewards gathered over processes, old log-probs when
        TRL computes them) and the round's weighted rewards of all processes ((global B,), NaN-summed
        over reward functions as TRL sums them; NaN where every function scored None), which TRL
        keeps out of its batch."""
        self._round_rewards = None
        out = super()._generate_and_score_completions(inputs)
        rewards, self._round_rewards = self._round_rewards, None
        if rewards is None:
            raise RuntimeError("TRL's _generate_and_score_completions did not call _calculate_rewards: "
                               f"the TRL engine does not know this TRL ({trl.__version__}); see {COMPAT_TESTS}")
        return out, rewards

    def per_token_logps(self, model, input_ids, attention_mask, logits_to_keep, **kwargs):
        """TRL's chunked forward: (log-probs (B, C), entropies | None, aux loss | None); through
        `policy_forward`, like TRL's own calls."""
        return self._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, **kwargs)

    def save_checkpoint(self) -> None:
        """Write a checkpoint of the current step now (e.g. the final one), through TRL's path."""
        self._save_checkpoint(self.model, trial=None)

    # -- TRL calls these ---------------------------------------------------------------------------

    def _prepare_inputs(self, generation_batch):
        # TRL's, but the shuffle moves whole groups (see the module docstring)
        if not self.model.training:
            return super()._prepare_inputs(generation_batch)
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            batch = split_pixel_values_by_grid(batch)
            batch = shuffle_groups(batch)
            batches = split_tensor_dict(batch, self.args.steps_per_generation)
            self._buffered_inputs = [unsplit_pixel_values_by_grid(b) for b in batches]
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    def _generate_and_score_completions(self, inputs):
        return self.generation_round(inputs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights[None]).nansum(dim=1)  # (global B,)
        # a row every reward function scored None is unscorable: NaN, as TRL marks it (advantage 0, out of
        # its group's mean and std: resrl.core.registry.compute_token_advantages)
        self._round_rewards = torch.where(torch.isnan(rewards_per_func).all(dim=1), float("nan"), rewards)
        return rewards_per_func

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        def forward():
            vocab = getattr(getattr(self.accelerator.unwrap_model(model), "config", None), "vocab_size", None)
            with labelled_positions_only(input_ids.device, vocab):
                return super(GRPOHooks, self)._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        return self.policy_forward(model, input_ids, logits_to_keep, forward)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        def trl_call():
            return super(GRPOHooks, self)._generate_single_turn(prompt_ids, images, multimodal_fields,
                                                                num_generations, has_tool_images)
        return self.generate_rows(prompt_ids, images, multimodal_fields, trl_call)

    @contextlib.contextmanager
    def model_for_generation(self):
        """The unwrapped model as TRL's generation unwraps it (DeepSpeed ZeRO-3 parameters gathered,
        gradient checkpointing off, TRL's generation kwargs over the model's generation config), no grad."""
        with unwrap_model_for_generation(
                self.model_wrapped, self.accelerator, gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs) as unwrapped, torch.no_grad():
            yield unwrapped

    def _compute_loss(self, model, inputs):
        return self.compute_policy_loss(model, inputs)

    def _save_checkpoint(self, model, trial):
        self.write_checkpoint(model, trial, write=lambda: super(GRPOHooks, self)._save_checkpoint(model, trial))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.checkpoint_loaded(resume_from_checkpoint)

    def _get_train_sampler(self, dataset=None):
        # TRL's sampler, its order a function of (seed, epoch): resume is exact in every epoch
        sampler = super()._get_train_sampler(dataset)
        return EpochRepeatSampler.like(sampler) if type(sampler) is RepeatSampler else sampler

    # -- the subclass implements these ---------------------------------------------------------------

    def generation_round(self, inputs) -> dict:
        raise NotImplementedError

    def compute_policy_loss(self, model, inputs) -> torch.Tensor:
        raise NotImplementedError

    def policy_forward(self, model, input_ids, logits_to_keep, forward):
        return forward()

    def generate_rows(self, prompt_ids, images, multimodal_fields, trl_call: Callable[[], tuple]):
        """(completion ids per row, their log-probs or None) for one generation call; TRL's own by default."""
        return trl_call()

    def write_checkpoint(self, model, trial, write: Callable[[], None]) -> None:
        write()

    def checkpoint_loaded(self, path) -> None:
        pass
