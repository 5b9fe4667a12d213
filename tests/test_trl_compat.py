"""One test per private TRL touch-point of the TRL engine (resrl.engines.trl.compat): each fails
when TRL changes what the engine relies on — a method that is gone or has another signature, a
batch key, the order of calls within a training step, a private attribute, a new option read by
the loss the engine replaces. The checks are functions; the `planted` tests run them on a planted
change (a renamed key, a changed signature, a call moved) and watch them fail.

Admitting a new TRL release: install it, run this file, then the engine tests (docs/install.md).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from train_helpers import build_small_model

from resrl.engines.trl import compat
from resrl.engines.trl.compat import GRPOHooks, GRPOTrainer

ENGINES = Path(__file__).resolve().parents[1] / "src" / "resrl" / "engines"


# ---- the checks -----------------------------------------------------------------------------------

def method_problems(cls, methods: dict = compat.TRL_METHODS) -> list[str]:
    """Each method exists on `cls` and takes the parameters the engine relies on, in that order
    (TRL calls the overrides positionally; the engine passes the later ones by keyword)."""
    problems = []
    for name, params in methods.items():
        fn = getattr(cls, name, None)
        if not callable(fn):
            problems.append(f"{cls.__name__}.{name} is gone")
            continue
        sig = list(inspect.signature(fn).parameters.values())[1:]  # without self
        fixed = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # a hook that forwards *args, **kwargs to TRL's method passes the rest on unchanged
        forwards = {p.kind for p in sig} >= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
        if fixed[:len(params)] != list(params) and not (forwards and list(params[:len(fixed)]) == fixed):
            problems.append(f"{cls.__name__}.{name}{tuple(p.name for p in sig)}: the engine relies on {params}")
    return problems


def function_problems(functions: dict = compat.TRL_FUNCTIONS) -> list[str]:
    problems = []
    for fn, params in functions.items():
        have = inspect.signature(fn).parameters
        missing = [p for p in params if p not in have]
        if missing:
            problems.append(f"{fn.__name__} lost the parameters {missing}")
    return problems


def call_names(source: str) -> list[str]:
    """The names of the functions and methods a function's source calls, in source order."""
    calls = []

    class Visitor(ast.NodeVisitor):
        def visit_Call(self, node):
            f = node.func
            calls.append(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "?"))
            self.generic_visit(node)

    Visitor().visit(ast.parse(textwrap.dedent(source)))
    return calls


def self_reads(source: str) -> set[str]:
    """`self.x` and `self.args.x` names a function's source reads."""
    names = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
                and node.value.attr == "args"):
            names.add(f"args.{node.attr}")
    return names


def missing_batch_keys(batch: dict, keys) -> list[str]:
    return [k for k in keys if k not in batch]


def step_order_problems(events: list[str], accumulation: int) -> list[str]:
    """What the engine relies on in the order of TRL's calls (events recorded by `Recorder`):
    - `_calculate_rewards` runs once inside each `_generate_and_score_completions` (the adapter
      takes the round's rewards from it);
    - a no-grad policy pass inside the round is TRL's old-log-prob pass, at most one per round
      (ResRL's extra-pass mode records its states there);
    - `_compute_loss` of micro-batch i sees `_step == i`, and `_step` advances once per
      micro-batch, after its loss (the last micro-batch of an update: (_step + 1) % accumulation == 0);
    - `_generate_and_score_completions` is called from `_prepare_inputs`."""
    problems, depth, rewards, no_grad, losses, step = [], 0, 0, 0, 0, 0
    for i, e in enumerate(events):
        if e == "generate:start":
            if not i or events[i - 1] != "prepare_inputs":
                problems.append("generation not called from _prepare_inputs")
            depth, rewards, no_grad = depth + 1, 0, 0
        elif e == "generate:end":
            depth -= 1
            if rewards != 1:
                problems.append(f"_calculate_rewards ran {rewards} times inside a generation round")
            if no_grad > 1:
                problems.append(f"{no_grad} no-grad policy passes inside one generation round")
        elif e == "rewards":
            rewards += 1
            if depth != 1:
                problems.append("_calculate_rewards ran outside _generate_and_score_completions")
        elif e == "logps:no_grad" and depth == 1:
            no_grad += 1
        elif e.startswith("loss:step="):
            if int(e.split("=")[1]) != losses:
                problems.append(f"_compute_loss of micro-batch {losses} saw _step={e.split('=')[1]}")
            losses += 1
        elif e.startswith("step_done:step="):
            step = int(e.split("=")[1])
            if step != losses:
                problems.append(f"_step={step} after {losses} losses (advanced once per micro-batch, after its loss)")
    if losses == 0 or losses % accumulation:
        problems.append(f"{losses} micro-batch losses for updates of {accumulation}")
    return problems


PRIVATE = "|".join(re.escape(n) for n in (*compat.PRIVATE_ATTRIBUTES, *compat.TRL_METHODS, "_iter_named_params")
                   if n.startswith("_"))
PRIVATE_USE = re.compile(rf"\.({PRIVATE})\b")


def private_uses(source: str) -> list[str]:
    """TRL-private names used as attributes in `source` (the adapter's own `_x` names are not TRL's)."""
    return sorted(set(PRIVATE_USE.findall(source)))


# ---- a tiny plain-TRL trainer that records its calls -------------------------------------------------

class Recorder(GRPOTrainer):
    events: list

    def _prepare_inputs(self, generation_batch):
        self.events.append("prepare_inputs")
        return super()._prepare_inputs(generation_batch)

    def _generate_and_score_completions(self, inputs):
        self.events.append("generate:start")
        out = super()._generate_and_score_completions(inputs)
        self.events.append("generate:end")
        self.last_batch = out
        return out

    def _calculate_rewards(self, *args):
        self.events.append("rewards")
        return super()._calculate_rewards(*args)

    def _get_per_token_logps_and_entropies(self, model, *args, **kwargs):
        if model is self.model or self.accelerator.unwrap_model(model) is self.model:
            self.events.append("logps:grad" if torch.is_grad_enabled() else "logps:no_grad")
        return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)

    def _compute_loss(self, model, inputs):
        self.events.append(f"loss:step={self._step}")
        return super()._compute_loss(model, inputs)

    def training_step(self, *args, **kwargs):
        out = super().training_step(*args, **kwargs)
        self.events.append(f"step_done:step={self._step}")
        return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def make_trainer(model_dir, out, cls=Recorder, **args):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from resrl.models.checkpointing import checkpointing_args

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+1="}]} for i in range(8)])
    config = dict(output_dir=str(out), use_cpu=True, bf16=False, report_to="none", disable_tqdm=True,
                  save_strategy="no", logging_steps=1, seed=0, max_steps=1, per_device_train_batch_size=4,
                  gradient_accumulation_steps=2, steps_per_generation=2, num_generations=4, max_completion_length=4,
                  learning_rate=1e-3, **checkpointing_args(False))
    config.update(args)
    trainer = cls(model=AutoModelForCausalLM.from_pretrained(model_dir), args=GRPOConfig(**config),
                  reward_funcs=lambda prompts, completions, **kw: [float(len(c) % 2) for c in completions],
                  train_dataset=data, processing_class=AutoTokenizer.from_pretrained(model_dir))
    trainer.events = []
    return trainer


@pytest.fixture(scope="module")
def misaligned(model_dir, tmp_path_factory):
    """Two updates per generation round (TRL runs its old-log-prob pass) and beta != 0 (log π_ref):
    one training step recorded."""
    trainer = make_trainer(model_dir, tmp_path_factory.mktemp("misaligned"), gradient_accumulation_steps=1,
                           steps_per_generation=2, beta=0.1, max_steps=2)
    trainer.train()
    return trainer


# ---- 0. the version ---------------------------------------------------------------------------------

def test_the_installed_trl_is_the_one_read():
    import trl

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compat.check_trl_version() is True, trl.__version__


@pytest.mark.parametrize("version,inside", [("1.16.0", True), ("1.16.9", True), ("1.17.0", False),
                                            ("1.17.0.dev0", False), ("1.16.0rc1", False), ("1.15.2", False),
                                            ("2.0.0", False)])
def test_planted_versions_outside_the_range_warn(version, inside):
    assert (compat.trl_version_problem(version) is None) == inside
    if not inside:
        with pytest.warns(compat.UntestedTRLWarning, match="tests/test_trl_compat.py"):
            assert compat.check_trl_version(version) is False


# ---- 1. the overridden and called private methods -------------------------------------------------------

def test_methods_exist_with_the_signatures_relied_on():
    assert method_problems(GRPOTrainer) == []


def test_every_override_overrides_a_trl_method():
    """An override whose TRL method was renamed would be dead code: training would silently run
    TRL's own loss and advantages."""
    overrides = {n for n, v in vars(GRPOHooks).items() if callable(v) and n.startswith("_") and not n.startswith("__")}
    assert overrides == {n for n in compat.TRL_METHODS if n != "training_step"}
    assert [n for n in overrides if not callable(getattr(GRPOTrainer, n, None))] == []
    # and the hooks accept what TRL passes
    assert method_problems(GRPOHooks, {n: compat.TRL_METHODS[n] for n in overrides}) == []


def test_planted_signature_changes_are_seen():
    class Renamed:
        def _prepare_inputs(self, generation_batch): ...
        def _generate_and_score_completions(self, inputs): ...
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids): ...   # a renamed parameter
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               compute_entropy=False, batch_size=None, compute_aux_loss=False): ...
        def _loss(self, model, inputs): ...                                                # renamed method
        def _save_checkpoint(self, model, trial): ...
        def _load_from_checkpoint(self, resume_from_checkpoint, model=None): ...
        def _get_train_sampler(self, dataset=None): ...
        def training_step(self, model, inputs, num_items_in_batch): ...
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                  has_tool_images=False): ...

    problems = method_problems(Renamed)
    assert len(problems) == 3, problems
    assert any("_compute_loss is gone" in p for p in problems)
    assert any("_calculate_rewards" in p for p in problems)
    assert any("_get_per_token_logps_and_entropies" in p for p in problems)  # keyword order swapped


def test_trl_functions_take_the_parameters_passed():
    assert function_problems() == []


def test_planted_function_change_is_seen():
    def use_adapter(model, name): ...  # adapter_name renamed

    assert function_problems({use_adapter: compat.TRL_FUNCTIONS[compat.use_adapter]}) == [
        "use_adapter lost the parameters ['adapter_name']"]


def test_prepare_inputs_copy_follows_trls():
    """GRPOHooks._prepare_inputs is TRL's with one substitution (the whole-group shuffle): TRL adding,
    removing or reordering a step fails here (the vision-language split drifted that way once)."""
    trl_calls = call_names(inspect.getsource(GRPOTrainer._prepare_inputs))
    assert tuple(trl_calls) == compat.PREPARE_INPUTS_CALLS
    ours = call_names(inspect.getsource(GRPOHooks._prepare_inputs))
    expected = ["_prepare_inputs", "super",  # evaluation: TRL's own (super()._prepare_inputs)
                *["shuffle_groups" if c == "shuffle_sequence_dict" else c for c in compat.PREPARE_INPUTS_CALLS[:-1]]]
    assert ours == expected


def test_planted_step_in_prepare_inputs_is_seen():
    source = inspect.getsource(GRPOTrainer._prepare_inputs).replace(
        "generation_batch = shuffle_sequence_dict(generation_batch)",
        "generation_batch = pad_to_multiple(shuffle_sequence_dict(generation_batch))")
    assert "pad_to_multiple" in source
    assert tuple(call_names(source)) != compat.PREPARE_INPUTS_CALLS


def test_every_option_trls_loss_reads_is_accounted_for():
    """The engine replaces TRL's _compute_loss: an option TRL's starts reading would be dropped."""
    reads = self_reads(inspect.getsource(GRPOTrainer._compute_loss))
    assert sorted(reads - set(compat.COMPUTE_LOSS_READS)) == []
    assert sorted(set(compat.COMPUTE_LOSS_READS) - reads) == []  # the record is not stale either


def test_the_mapped_loss_reads_say_what_the_mapping_table_does():
    """A read of a mapped GRPOConfig field is recorded in MAPPINGS' own words, value by value: the
    resrl key it lands on and the table's note, so a change of the table changes the record."""
    from resrl.engines.trl.fields import MAPPING

    mapped = {read: text for read, text in compat.COMPUTE_LOSS_READS.items() if text.startswith("mapped onto ")}
    assert {"beta", "epsilon_low", "epsilon_high", "loss_type", "entropy_coef", "args.delta"} <= set(mapped)
    for read, text in mapped.items():
        field = "epsilon" if read == "epsilon_low" else read.removeprefix("args.")
        m = MAPPING[field]
        assert text.startswith(f"mapped onto {m.key} (engines/trl/fields.MAPPINGS, GRPOConfig.{field})"), read
        assert text.endswith(m.note), read
    assert compat.COMPUTE_LOSS_READS["beta"].startswith("mapped onto loss.kl_coef")  # a hand-checked value
    assert "dr_grpo -> clipped-surrogate + seq-mean-token-sum-norm" in compat.COMPUTE_LOSS_READS["loss_type"]


def test_planted_new_loss_option_is_seen():
    source = inspect.getsource(GRPOTrainer._compute_loss).replace(
        "advantages = inputs[\"advantages\"]", "advantages = inputs[\"advantages\"] * self.args.advantage_scale", 1)
    assert sorted(self_reads(source) - set(compat.COMPUTE_LOSS_READS)) == ["args.advantage_scale"]


def test_refused_and_mapped_fields_default_to_trl_defaults():
    """The field table's "off" values and the mapped fields' TRL defaults are GRPOConfig's defaults."""
    import dataclasses

    from trl import GRPOConfig

    from resrl.engines.trl import fields as trl_fields

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for name, f in trl_fields.GRPO_CONFIG_FIELDS.items():
        if f.category == trl_fields.REFUSED:
            assert defaults[name] in f.accepted or f.applies is not None, (name, defaults[name])
    for m in trl_fields.MAPPINGS:
        if m.trl in defaults and m.same and m.section in ("loss", "algorithm"):
            assert defaults[m.trl] == m.trl_default, m.trl
    assert defaults["max_completion_length"] == trl_fields.MAPPING["max_completion_length"].trl_default


def test_reference_model_built_from_the_same_trl_pieces():
    """engines/trl/reference.py builds the reference model as TRL 1.16's __init__ does."""
    source = inspect.getsource(GRPOTrainer.__init__)
    for name in ("create_model_from_path", "get_config_model_id", "disable_dropout_in_model", "add_fused_lm_head",
                 "prepare_deepspeed", "prepare_fsdp", "model_init_kwargs", "_attn_implementation"):
        assert name in source, name


def test_checkpoint_folder_name():
    """engines/trl/checkpoints.py publishes `<staging>/checkpoint-<global_step>`, the folder TRL writes."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    assert PREFIX_CHECKPOINT_DIR == "checkpoint"
    assert "super()._save_checkpoint(model, trial)" in inspect.getsource(GRPOTrainer._save_checkpoint)


def _orders(sampler, epochs):
    out = []
    for e in epochs:
        if e is not None:
            sampler.set_epoch(e)
        out.append(list(sampler))
    return out


@pytest.mark.parametrize("seed", [0, 7, None])
def test_epoch_sampler_serves_trls_order_of_every_epoch(seed):
    """EpochRepeatSampler relies on RepeatSampler drawing one randperm from `generator` per
    iteration: epoch e of an uninterrupted TRL sampler is what set_epoch(e) serves, in any order."""
    data = list(range(10))
    kwargs = dict(mini_repeat_count=2, batch_size=3, repeat_count=2, shuffle=True, seed=seed)
    trl_sampler = compat.RepeatSampler(data, **kwargs)
    trl_epochs = [list(trl_sampler) for _ in range(5)]
    assert len({tuple(o) for o in trl_epochs}) == 5  # the epochs' orders differ
    ours = compat.EpochRepeatSampler.like(compat.RepeatSampler(data, **kwargs))
    # set_epoch(e) serves epoch e, in any order; an iteration without set_epoch serves the next one
    assert _orders(ours, [3, 1, 0, 2, None, None]) == [trl_epochs[i] for i in (3, 1, 0, 2, 3, 4)]
    fresh = compat.EpochRepeatSampler(data, **kwargs)  # never set_epoch: TRL's sequence of epochs
    assert [list(fresh) for _ in range(5)] == trl_epochs
    unshuffled = compat.EpochRepeatSampler(data, **{**kwargs, "shuffle": False})
    assert _orders(unshuffled, [2]) == [list(compat.RepeatSampler(data, **{**kwargs, "shuffle": False}))]


def test_trls_train_sampler_is_a_repeat_sampler_with_the_attributes_read():
    source = inspect.getsource(GRPOTrainer._get_train_sampler)
    assert "RepeatSampler(" in source
    iterate = inspect.getsource(compat.RepeatSampler.__iter__)
    assert iterate.count("randperm(") == 1 and "generator=self.generator" in iterate
    sampler = compat.RepeatSampler(list(range(4)), mini_repeat_count=2, seed=0)
    assert [n for n in compat.REPEAT_SAMPLER_ATTRIBUTES if not hasattr(sampler, n)] == []
    # HF's Trainer selects every epoch's order through set_epoch (the resumed one included)
    from transformers import Trainer

    assert "set_epoch(epoch)" in inspect.getsource(Trainer._run_epoch)


def test_planted_second_draw_per_epoch_is_seen():
    class TwoDraws(compat.RepeatSampler):
        def __iter__(self):
            torch.randperm(3, generator=self.generator)
            return super().__iter__()

    class Ours(compat.EpochRepeatSampler, TwoDraws):
        pass

    kwargs = dict(mini_repeat_count=1, batch_size=2, seed=0)
    uninterrupted = TwoDraws(list(range(8)), **kwargs)
    epochs = [list(uninterrupted) for _ in range(2)]
    assert _orders(Ours(list(range(8)), **kwargs), [1]) != [epochs[1]]


# ---- 2./3. attributes -------------------------------------------------------------------------------

def test_private_and_public_attributes_exist(misaligned):
    t = misaligned
    missing = [n for n in (*compat.PRIVATE_ATTRIBUTES, *compat.TRAINER_ATTRIBUTES) if not hasattr(t, n)]
    assert missing == []
    assert isinstance(compat.current_step(t), int) and compat.current_step(t) == 2
    assert compat.tokenizer(t).pad_token_id is not None
    assert set(t._metrics) == {"train", "eval"}


def test_metrics_sink_is_what_trl_logs(misaligned):
    misaligned.model.train()
    sink = compat.metrics(misaligned, "train")
    sink["compat/probe"].append(2.0)
    sink["compat/probe"].append(4.0)
    misaligned.log({})
    assert misaligned.state.log_history[-1]["compat/probe"] == 3.0  # averaged by TRL's log()
    assert "compat/probe" not in compat.metrics(misaligned, "train")  # and cleared


def test_planted_missing_attribute_is_seen(misaligned):
    class Stripped:
        pass

    s = Stripped()
    for n in compat.PRIVATE_ATTRIBUTES:
        setattr(s, n, getattr(misaligned, n))
    del s._step  # as if TRL renamed it
    assert [n for n in compat.PRIVATE_ATTRIBUTES if not hasattr(s, n)] == ["_step"]


def test_vllm_weight_stream_is_a_no_argument_method_that_sync_weights_iterates():
    from trl.generation.vllm_generation import VLLMGeneration

    assert list(inspect.signature(VLLMGeneration._iter_named_params).parameters) == ["self"]
    assert "self._iter_named_params()" in inspect.getsource(VLLMGeneration.sync_weights)
    assert "self.vllm_generation = VLLMGeneration(" in inspect.getsource(GRPOTrainer.__init__)


def test_filter_vllm_weights_wraps_the_stream():
    from resrl.engines.trl.flowrl_head import LOG_Z_ATTR, without_log_z_params

    class Generation:
        def _iter_named_params(self):
            yield from [("model.w", 1), (f"{LOG_Z_ATTR}.net.0.weight", 2)]

    class Trainer:
        vllm_generation = Generation()

    compat.filter_vllm_weights(Trainer, without_log_z_params)
    assert list(Trainer.vllm_generation._iter_named_params()) == [("model.w", 1)]


# ---- 4. the batch keys ------------------------------------------------------------------------------

def test_generation_batch_has_the_keys_relied_on(misaligned):
    """A real round of TRL's _generate_and_score_completions: every key the engine reads, with
    old log-probs (misaligned round) and log π_ref (beta != 0)."""
    batch = misaligned.last_batch
    optional = ("importance_sampling_ratio", "tool_mask", "sampling_per_token_logps")  # vLLM / tools / recorded
    assert missing_batch_keys(batch, [k for k in compat.TRL_BATCH_KEYS if k not in optional]) == []
    B, C = batch["completion_ids"].shape
    assert batch["completion_mask"].shape == (B, C) and batch["prompt_ids"].shape == batch["prompt_mask"].shape
    assert batch["old_per_token_logps"].shape == (B, C) and batch["ref_per_token_logps"].shape == (B, C)
    assert batch["num_items_in_batch"].dim() == 0
    # keys set only with vLLM / tools, read from the source
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for key in optional:
        assert f'output["{key}"]' in source, key


def test_planted_renamed_batch_key_is_seen(model_dir, tmp_path, monkeypatch):
    real = GRPOTrainer._generate_and_score_completions

    def renamed(self, inputs):
        out = real(self, inputs)
        out["completion_masks"] = out.pop("completion_mask")
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", renamed)
    trainer = make_trainer(model_dir, tmp_path)
    trainer.model.train()
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    assert missing_batch_keys(batch, compat.TRL_BATCH_KEYS) == [
        "completion_mask", "old_per_token_logps", "ref_per_token_logps", "importance_sampling_ratio",
        "sampling_per_token_logps", "tool_mask"]


# ---- 1. the order of calls within a training step ---------------------------------------------------------

def test_order_of_calls_in_a_training_step(misaligned):
    events = misaligned.events
    assert events[:2] == ["prepare_inputs", "generate:start"]
    assert "logps:no_grad" in events[:events.index("generate:end")]  # TRL's old-log-prob pass, in the round
    assert step_order_problems(events, accumulation=1) == []


def test_order_of_calls_aligned(model_dir, tmp_path):
    trainer = make_trainer(model_dir, tmp_path)  # 2 micro-batches per update, one round per update
    trainer.train()
    events = trainer.events
    assert step_order_problems(events, accumulation=2) == []
    assert "logps:no_grad" not in events  # aligned: TRL runs no old-log-prob pass
    assert events.count("generate:start") == 1 and events.count("prepare_inputs") == 2


def test_planted_orders_are_seen(misaligned):
    events = list(misaligned.events)
    moved = [e for e in events if e != "rewards"]
    moved.insert(moved.index("generate:end") + 1, "rewards")                    # rewards after the round
    assert any("outside" in p for p in step_order_problems(moved, 1))
    early = [e.replace("loss:step=0", "loss:step=1") for e in events]           # _step advanced before the loss
    assert any("saw _step=1" in p for p in step_order_problems(early, 1))
    twice = events[:events.index("generate:end")] + ["logps:no_grad", "logps:no_grad"] + \
        events[events.index("generate:end"):]                                    # two no-grad passes in a round
    assert any("no-grad policy passes" in p for p in step_order_problems(twice, 1))


# ---- every private touch-point in one module --------------------------------------------------------------

def test_no_engine_module_but_trl_compat_touches_trl_private_names():
    found = {p.name: private_uses(p.read_text()) for p in ENGINES.glob("*.py") if p.name != "trl_compat.py"}
    assert {k: v for k, v in found.items() if v} == {}


def test_planted_private_use_is_seen():
    assert private_uses('m = trainer._metrics["train"]\nself._step += 1\nx._generate_once()') == ["_metrics", "_step"]


def _vision_batch():
    """4 rows in 2 groups, one image each of 2 / 3 / 2 / 1 pixel rows (Qwen-VL layout: flat
    pixel_values, image_grid_thw per image, num_images per row); pixel row values = their row."""
    sizes = [2, 3, 2, 1]
    return {"prompt_ids": torch.arange(4)[:, None], "completion_ids": torch.arange(4)[:, None],
            "group_index": torch.tensor([0, 0, 1, 1]), "num_items_in_batch": torch.tensor(4.0),
            "pixel_values": torch.cat([torch.full((n, 3), float(r)) for r, n in enumerate(sizes)]),
            "image_grid_thw": torch.tensor([[1, 1, n] for n in sizes]), "num_images": [1, 1, 1, 1]}


def _prepare(batch):
    from types import SimpleNamespace

    fake = SimpleNamespace(model=SimpleNamespace(training=True), num_iterations=1, _step=0, _buffered_inputs=None,
                           args=SimpleNamespace(steps_per_generation=2),
                           _generate_and_score_completions=lambda inputs: batch)
    return [GRPOHooks._prepare_inputs(fake, None) for fake._step in (0, 1)]


def test_prepare_inputs_keeps_each_rows_pixels_with_it():
    """TRL's pixel-value split/unsplit around the (group) shuffle: each micro-batch's pixel rows
    are its own rows' images."""
    torch.manual_seed(0)
    for micro in _prepare(_vision_batch()):
        rows = micro["prompt_ids"][:, 0].tolist()
        expected = torch.cat([torch.full((int(micro["image_grid_thw"][i].prod()), 3), float(r))
                              for i, r in enumerate(rows)])
        assert torch.equal(micro["pixel_values"], expected)


def test_planted_missing_pixel_split_is_seen(monkeypatch):
    monkeypatch.setattr(compat, "split_pixel_values_by_grid", lambda batch: batch)  # the drifted copy
    monkeypatch.setattr(compat, "unsplit_pixel_values_by_grid", lambda batch: batch)
    torch.manual_seed(0)
    with pytest.raises(AssertionError):
        for micro in _prepare(_vision_batch()):
            rows = micro["prompt_ids"][:, 0].tolist()
            expected = torch.cat([torch.full((int(micro["image_grid_thw"][i].prod()), 3), float(r))
                                  for i, r in enumerate(rows)])
            assert torch.equal(micro["pixel_values"], expected)


# ---- 7. the fused LM head's scored positions ------------------------------------------------------------

def test_fused_head_reads_use_triton_to_choose_the_scored_positions():
    import trl.trainer.utils as trl_utils

    assert callable(trl_utils._use_triton)
    source = inspect.getsource(trl_utils.add_fused_lm_head)
    assert "compact = _use_triton(hidden_states.device)" in source
    assert "hidden_states[mask] if compact" in source


def test_labelled_positions_only_scores_the_completion_rows_with_the_same_logprobs(monkeypatch):
    """On CPU with a real-sized vocabulary the fused head projects only the labelled positions; the
    log-probs are those of every-position scoring; off CPU, below the vocabulary floor or switched
    off, TRL's choice stands; the patch is undone on exit."""
    import trl.trainer.utils as trl_utils
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=2048, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)
    model = Qwen3ForCausalLM(cfg)
    trl_utils.add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    ids = torch.randint(5, 2000, (3, 12))
    labels = ids.clone()
    labels[:, :-5] = -100  # a 7-token prompt, 5 completion tokens
    rows = []
    real = trl_utils._ChunkedLogProbFunction.apply
    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply",
                        lambda hidden, *a: (rows.append(hidden.shape[0]), real(hidden, *a))[1])
    original = trl_utils._use_triton
    with torch.no_grad():
        every = model(input_ids=ids, labels=labels, fused_lm_head=True)
        with compat.labelled_positions_only(torch.device("cpu"), cfg.vocab_size):
            assert trl_utils._use_triton is not original
            only = model(input_ids=ids, labels=labels, fused_lm_head=True)
    assert trl_utils._use_triton is original
    assert rows == [3 * 11, 3 * 5]  # every position of the shifted sequence, then the 5 labelled ones only
    assert torch.allclose(every.log_probs, only.log_probs, atol=1e-6)
    assert torch.allclose(every.entropy[:, -5:], only.entropy[:, -5:], atol=1e-6)
    for device, vocab, on in ((torch.device("meta"), 2048, True), (torch.device("cpu"), 100, True),
                              (torch.device("cpu"), 2048, False)):
        monkeypatch.setattr(compat, "LABELLED_POSITIONS_ONLY", on)
        with compat.labelled_positions_only(device, vocab):
            assert trl_utils._use_triton is original
