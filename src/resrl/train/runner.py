"""`run_training(config, ...)`: the one library entry point behind `resrl train` and the demo.

    from resrl.train import load_config, run_training
    cfg = load_config("configs/tiny_math.yaml", ["algorithm.name=resrl", "train.max_steps=20"])
    result = run_training(cfg)                       # everything from the config
    result = run_training(cfg, model=model, tokenizer=tok, train_dataset=ds, reward_fn=f)
    result.metrics   # one dict per logged step: TRL's (reward, completions/mean_length, clip_ratio/*,
                     # entropy, kl, ...), accuracy, grad_norm, loss/*, resrl/* (ω stats, effective
                     # rank, captured energy, M; NaN on a step without a correct response)

Objects passed in are used as they are (a model passed in is trained in place: pass a fresh copy
or a directory to start several algorithms from one warm start).
"""

from __future__ import annotations

from resrl.errors import InputError

import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from resrl.tasks import registry as tasks
from resrl.train.config import ConfigError, TrainConfig

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"


@dataclass
class TrainResult:
    output_dir: Path
    metrics: list[dict] = field(default_factory=list)  # one entry per logged step ({"step": n, ...})
    summary: dict = field(default_factory=dict)        # train_runtime, train_loss, ...
    model: Any = None
    tokenizer: Any = None
    final_checkpoint: Path | None = None
    model_dir: Path | None = None                      # output_dir/model: trained weights + tokenizer
    resrl_mode: str | None = None                      # "aligned" / "extra-pass" for ResRL


def _metrics_callback(result: TrainResult, jsonl_path: Path | None, on_log: Callable[[dict], None] | None):
    from transformers import TrainerCallback

    class MetricsCallback(TrainerCallback):
        """Collects every logged step (all processes agree; process 0 writes the JSONL)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = dict(logs or {})
            if "train_runtime" in logs:
                result.summary.update(logs)
                return
            entry = {"step": state.global_step, **{k: v for k, v in logs.items() if v is not None}}
            result.metrics.append(entry)
            if jsonl_path is not None and state.is_world_process_zero:
                with open(jsonl_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")
            if on_log is not None and state.is_world_process_zero:
                on_log(entry)

    return MetricsCallback()


def _trim_jsonl(path: Path, last_step: int) -> None:
    """On resume, drop log lines of steps after the checkpoint (the killed run logged them)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip()
            and json.loads(line).get("step", 0) <= last_step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


def launched_world_size() -> int:
    """Processes of this run as the launcher (accelerate / torchrun) started them: WORLD_SIZE.

    Not `PartialState().num_processes`: built before TRL's accelerator and without `cpu=True`, it
    reports 1 under a two-CPU-process launch, and the batch would be sized for one process."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise ConfigError(f"environment variable WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not an integer") from None


def grpo_args(config: TrainConfig, num_processes: int, use_cpu: bool):
    """TrainConfig -> trl.GRPOConfig: the fields the run's keys set (engines/trl/fields.MAPPINGS, the one
    GRPOConfig <-> resrl table), the ones computed here (batch shape, device, checkpointing, saving),
    then the `trl:` section's fields on top (validated: none of them is a field set here)."""
    from trl import GRPOConfig

    from resrl.engines.trl.fields import grpo_config_values
    from resrl.models.checkpointing import checkpointing_args

    def get(key: str):
        node = config
        for part in key.split("."):
            node = getattr(node, part)
        return node

    micro, accumulation, per_round = config.trl_batch_shape(num_processes)
    ours = dict(
        **grpo_config_values(get),  # (beta: TRL builds and runs a reference model only when beta != 0)
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=per_round,
        use_bias_correction_kl=False,  # resrl.core.loss's KL has no ratio correction (engines/trl/fields.py)
        **checkpointing_args(config.model.gradient_checkpointing),
        use_cpu=use_cpu,
        save_strategy="steps" if config.checkpoint.save_steps else "no",
        shuffle_dataset=True,
        # a causal LM uses every parameter in each forward: skip DDP's unused-parameter search
        ddp_find_unused_parameters=False,
    )
    if config.trl:
        from resrl.train.config import check_trl_section

        check_trl_section(config.trl)
    from resrl.engines.trl.generation import trl_flags

    ours.update(trl_flags(config.generation, config.trl))  # generation.backend paged / vllm: TRL's flags
    try:
        return GRPOConfig(**{**ours, **config.trl})
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"trl.{k}" for k in sorted(config.trl)) or "none"
        raise ConfigError(f"trl.GRPOConfig rejected the configuration: {exc} (trl keys given: {given})") from exc


def lora_config(config: TrainConfig):
    """model.lora -> peft.LoraConfig (None when LoRA is off)."""
    lora = config.model.lora
    if lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError as exc:
        raise ConfigError("config key 'model.lora' needs the peft package: pip install 'resrl[peft]'") from exc
    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules, task_type="CAUSAL_LM")


def _load_tokenizer(config: TrainConfig, model, tokenizer):
    from transformers import AutoTokenizer

    if tokenizer is None:
        path = str(model or config.model.path) if model is None or isinstance(model, (str, Path)) \
            else model.name_or_path
        if not Path(path).is_dir():
            raise ConfigError(f"config key 'model.path': directory {path!r} does not exist")
        tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: TrainConfig, model=None):
    """The policy a run trains: `model` (a loaded model, or a directory; None: model.path) in
    model.dtype, with model.trainable_layers applied."""
    import torch
    from transformers import AutoModelForCausalLM

    if model is None or isinstance(model, (str, Path)):
        path = str(model or config.model.path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, config.model.dtype))
    if config.model.trainable_layers is not None:  # partial fine-tuning: the top layers only
        from resrl.models.freeze import train_last_layers

        trainable, total = train_last_layers(model, config.model.trainable_layers)
        logger.info("model.trainable_layers=%d: %d of %d parameters train", config.model.trainable_layers,
                    trainable, total)
    return model


def _load_dataset(config: TrainConfig, train_dataset, tokenizer, drop_long: bool = True):
    if train_dataset is None:
        from resrl.tasks.data import load_problems
        from resrl.data.prompts import problems_to_dataset

        problems = load_problems(config.data.train, data_dir=config.data.data_dir,
                                 limit=config.data.max_problems or None)
        train_dataset = problems_to_dataset(problems)
    missing = {"prompt", "answer"} - set(train_dataset.column_names)
    if missing:
        raise InputError(f"training dataset lacks column(s) {sorted(missing)} (has {train_dataset.column_names})")
    if len(train_dataset) < config.train.rollout_prompts:
        raise ConfigError(f"config key 'train.rollout_prompts' ({config.train.rollout_prompts}) exceeds the "
                          f"number of training problems ({len(train_dataset)})")
    limit = config.train.max_prompt_length
    if limit and drop_long:  # (step layout: the rows name games; step prompts are bounded in the rollout)
        train_dataset = _drop_long_prompts(train_dataset, tokenizer, limit)
    return train_dataset


def _drop_long_prompts(dataset, tokenizer, limit: int):
    """TRL 1.16 has no prompt truncation: drop prompts over `train.max_prompt_length` tokens."""

    def length(row) -> int:
        prompt = row["prompt"]
        if isinstance(prompt, list):
            ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            return len(ids)
        return len(tokenizer(prompt)["input_ids"])

    keep = [i for i, row in enumerate(dataset) if length(row) <= limit]
    if len(keep) < len(dataset):
        logger.warning("dropped %d of %d prompts longer than train.max_prompt_length=%d tokens",
                       len(dataset) - len(keep), len(dataset), limit)
        if not keep:
            raise ConfigError(f"config key 'train.max_prompt_length' ({limit}) is shorter than every prompt")
        dataset = dataset.select(keep)
    return dataset


def _load_reward(config: TrainConfig, reward_fn):
    from resrl.engines.trl.rewards import EnvironmentReward, RewardAdapter

    r = config.reward
    spec = config.reward_spec() if reward_fn is None else None
    if spec is not None and r.function is None and config.data.train and tasks.family_for_data(config.data.train) is None:
        from resrl.tasks.data import load_problems  # a data file: its rows may name their family

        spec = config.reward_spec(load_problems(config.data.train, data_dir=config.data.data_dir,
                                                limit=config.data.max_problems or None))
    if spec == "env":  # multi-turn: the environment scores
        return EnvironmentReward(on_error=r.on_error)
    deadline, style = None, None  # style None: from the user function's signature (resrl's or TRL's)
    if reward_fn is None:
        from resrl.tasks.rewards import BUILTIN_REWARDS, load_reward_function

        if r.function is None:
            logger.info("reward.function unset: scoring %s with the %r reward", config.data.train or "the data", spec)
        try:
            reward_fn = load_reward_function(spec, timeout_s=r.timeout_s, num_workers=r.num_workers)
        except ValueError as exc:
            raise ConfigError(f"config key 'reward.function': {exc}") from exc
        if spec not in BUILTIN_REWARDS:  # user code: bounded in worker processes, or in-process per call
            if r.isolate:
                from resrl.engines.trl.rewards import IsolatedReward

                reward_fn = IsolatedReward(reward_fn, timeout_s=r.timeout_s, num_workers=r.num_workers)
            else:
                deadline = r.timeout_s
        else:
            style = "resrl"  # the families' rewards: f(completions, answers)
        name = spec.split(":")[-1]
    else:  # a Python callable: the caller's own code, called as it is (no deadline)
        name = getattr(reward_fn, "__name__", None) or "reward"
    return RewardAdapter(reward_fn, name=name, on_error=r.on_error, timeout_s=deadline, style=style)


def _build_trainer(trainer_class, model, reward, args, train_dataset, tokenizer, result, jsonl, on_log, callbacks,
                   config: TrainConfig, rollout_func, step_rollout):
    return trainer_class(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        callbacks=[_metrics_callback(result, jsonl, on_log), *(callbacks or [])],
        algorithm=config.algorithm,
        loss_config=config.loss,
        resrl_mode=config.engine.resrl_mode,
        dynamic_sampling=config.engine.dynamic_sampling,
        max_refill_rounds=config.engine.max_refill_rounds,
        peft_config=lora_config(config),
        rollout_func=rollout_func,
        step_rollout=step_rollout,
        phase_times=config.log.phase_times,
        critic=config.critic if _needs_critic(config) else None,
        generation=config.generation,
    )


def _needs_critic(config: TrainConfig) -> bool:
    from resrl.core.registry import get_algorithm

    return get_algorithm(config.algorithm.name).needs_values


def _multi_turn(config: TrainConfig, train_dataset):
    """(train_dataset, TRL rollout_func) for the `env` section: a task family's environment (e.g.
    `bfcl`: the BFCL multi-turn entries of data.train), or a user factory `f(prompt) -> Environment`
    called once per trajectory."""
    from resrl.engines.multiturn import make_trl_rollout_func, prompt_key
    from resrl.tasks.registry import env_spec

    env = config.env
    family_env = env_spec(env.name)
    if family_env is not None and family_env.concat_envs is not None:
        from datasets import Dataset

        makers, rows = {}, []
        for prompt, answer, make_env in family_env.concat_envs(config.data.train, config.data.max_problems or None):
            makers[prompt_key(prompt)] = make_env
            rows.append({"prompt": prompt, "answer": answer})
        if train_dataset is None:
            train_dataset = Dataset.from_list(rows)

        def env_for_prompt(prompt):
            return makers[prompt_key(prompt)]()
    else:
        from resrl.user_code import load_user_object

        env_for_prompt = load_user_object(env.name, "environment factory (config key 'env.name')")
        if not callable(env_for_prompt):
            raise ConfigError(f"config key 'env.name': {env.name!r} is not callable")
    return train_dataset, make_trl_rollout_func(env_for_prompt, max_turns=env.max_turns,
                                                max_step_tokens=env.max_step_tokens)


def _step_layout(config: TrainConfig, train_dataset):
    """(train_dataset, StepRolloutConfig) for `env.layout: step`. Each data row names one game (its
    prompt is handed to the environment factory, never shown to the model: the environment's
    step_prompt() is); TRL repeats it group_size times, one trajectory each."""
    from resrl.engines.steps import StepRolloutConfig
    from resrl.tasks.envs import load_step_factory, step_games
    from resrl.tasks.registry import env_spec

    env = config.env
    try:
        factory = load_step_factory(env.name, "config key 'env.name'")
    except ConfigError:
        raise
    except InputError as exc:
        raise ConfigError(str(exc)) from exc.__cause__
    if train_dataset is None:
        from datasets import Dataset

        train_dataset = Dataset.from_list(step_games(config.data.train, config.data.data_dir,
                                                     config.data.max_problems or None))
    options = {"history_window": env.history_window, **env.options}
    family_env = env_spec(env.name)
    if family_env is not None and family_env.ends_at_max_steps:  # the env ends the episode itself at max_steps
        options.setdefault("max_steps", env.max_steps)
    rollout = StepRolloutConfig(
        factory=factory, options=options,
        max_steps=env.max_steps, max_step_tokens=env.max_step_tokens,
        max_prompt_tokens=config.train.max_prompt_length, episode_timeout_s=env.episode_timeout_s,
        step_timeout_s=env.step_timeout_s, num_workers=env.num_workers,
        invalid_format_penalty=env.invalid_format_penalty, reward_scale=env.reward_scale)
    return train_dataset, rollout


def _save_merged(config: TrainConfig, adapter_dir: Path, out_dir: Path, tokenizer) -> None:
    """Base model (model.path) + the trained adapter, merged into a plain causal LM at `out_dir`."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if not config.model.path:
        logger.warning("LoRA: no model.path to merge the adapter into; only %s was saved", adapter_dir)
        return
    base = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=getattr(torch, config.model.dtype))
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))


def run_training(
    config: TrainConfig,
    *,
    model=None,
    tokenizer=None,
    train_dataset=None,
    reward_fn: Callable[[list[str], list[str]], list[float]] | None = None,
    resume: bool | str = False,
    callbacks: list | None = None,
    on_log: Callable[[dict], None] | None = None,
    save_final: bool = True,
) -> TrainResult:
    """Train with TRL + the project's algorithms; returns the per-step metrics and the model.

    model:         None (config.model.path), a directory, or a loaded PreTrainedModel
    train_dataset: None (config.data) or a datasets.Dataset with `prompt` and `answer` columns
    reward_fn:     None (config.reward.function) or f(completions, answers) -> list[float]
    resume:        True: continue from the newest complete checkpoint in train.output_dir
                   (start fresh when there is none); a path: that checkpoint
    on_log:        called on process 0 with each logged step's metrics (e.g. a demo's progress)
    """
    import torch
    from transformers import set_seed

    from resrl.engines.trl.trainer import ResRLTrainer
    from resrl.checkpoint import checkpoint_step, latest_checkpoint

    num_processes = launched_world_size()
    config.validate(num_processes=num_processes, need_model=model is None,
                    need_data=train_dataset is None)
    use_cpu = config.train.use_cpu if config.train.use_cpu is not None else not torch.cuda.is_available()
    output_dir = Path(config.train.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)

    checkpoint = None
    if resume:
        checkpoint = Path(resume) if isinstance(resume, (str, Path)) else latest_checkpoint(output_dir)
        if checkpoint is not None and not (checkpoint / "trainer_state.json").is_file():
            raise InputError(f"--resume: {checkpoint} is not a complete checkpoint")
        if checkpoint is None:
            logger.warning("--resume: no checkpoint in %s, starting from the beginning", output_dir)

    # cheap things first, so that a bad reward spec or data row fails before the model loads
    reward = _load_reward(config, reward_fn)
    tokenizer = _load_tokenizer(config, model, tokenizer)
    rollout_func, step_rollout = None, None
    if config.env.name is not None and config.env.layout == "step":
        train_dataset, step_rollout = _step_layout(config, train_dataset)
    elif config.env.name is not None:
        train_dataset, rollout_func = _multi_turn(config, train_dataset)
    train_dataset = _load_dataset(config, train_dataset, tokenizer, drop_long=step_rollout is None)
    set_seed(config.train.seed)
    model = load_model(config, model)

    jsonl = output_dir / METRICS_FILE if config.log.jsonl else None
    if jsonl is not None and int(os.environ.get("RANK", "0")) == 0:
        if checkpoint is not None:
            _trim_jsonl(jsonl, checkpoint_step(checkpoint))
        elif jsonl.exists():
            jsonl.unlink()
    (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=1, default=str))

    result = TrainResult(output_dir=output_dir)
    args = grpo_args(config, num_processes, use_cpu)
    with warnings.catch_warnings():
        # TRL warns on every run that `rollout_func` is experimental; resrl's multi-turn layout is
        # built on it deliberately (tests/test_train_multiturn.py guards the API), so the notice is
        # for whoever calls TRL directly, not for `resrl train`'s user
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
        trainer = _build_trainer(ResRLTrainer, model, reward, args, train_dataset, tokenizer, result, jsonl,
                                 on_log, callbacks, config, rollout_func, step_rollout)
    if trainer.accelerator.num_processes != num_processes:  # the batch was sized for num_processes
        raise RuntimeError(f"the launcher started {num_processes} process(es) (WORLD_SIZE) but TRL's accelerator "
                           f"sees {trainer.accelerator.num_processes}")
    if not config.log.progress:  # quiet: no progress bar and no printed log dicts (on_log still fires)
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    result.resrl_mode = trainer.resrl_mode if trainer.needs_hidden else None
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    finally:
        trainer.close_envs()  # environment worker processes (step layout)
        if reward_fn is None and hasattr(getattr(reward, "fn", None), "close"):  # worker processes we started
            reward.fn.close()

    if save_final:
        from resrl.checkpoint import publish

        if not config.checkpoint.save_steps or trainer.state.global_step % config.checkpoint.save_steps:
            trainer.save_checkpoint()
        result.final_checkpoint = latest_checkpoint(output_dir)
        staged = output_dir / ".staging-model"
        trainer.save_model(str(staged))  # every process takes part (sharded models)
        if trainer.accelerator.is_main_process:
            tokenizer.save_pretrained(str(staged))
            if config.model.lora is not None:  # the adapter, and the merged model that evaluation loads
                publish(staged, output_dir / "adapter")
                _save_merged(config, output_dir / "adapter", output_dir / ".staging-merged", tokenizer)
                publish(output_dir / ".staging-merged", output_dir / "model")
            else:
                publish(staged, output_dir / "model")
        trainer.accelerator.wait_for_everyone()
        result.model_dir = output_dir / "model"
    result.model = trainer.accelerator.unwrap_model(trainer.model)
    result.tokenizer = tokenizer
    return result
