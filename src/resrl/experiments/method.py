"""The one-method toolkit of every experiment kind: a method's run (train, then evaluate; resumed
mid-training from its checkpoints), the reuse of an earlier experiment's training, and the evaluation
records.

    run_one(cfg, label, inputs)                           one method's run: the worker protocol's job
    keep_checkpoint_models(run, steps)                    the models of checkpoints at `steps`, kept for
                                                          the learning curve (OUT/<run>/curve/step-N)
    reusable_training(cfg, label)                         an earlier experiment's identical training
    evaluate(model, tokenizer, problems, config, out_dir) greedy + sampled, by `resrl.eval.runner`

A method's run lives in OUT/<run> (`resrl.experiments.layout`): its training writes checkpoints
there every `save_steps` (the trainer's own, `checkpoint.save_steps`), so a run killed while
training resumes from the newest one through `run_training(resume=True)` — the trainer's exact
resume: the same weights, log and samples as a run never killed. When training ends the model is
saved to OUT/<run>/model, OUT/<run>/trained.json marks it (a run killed while evaluating does not
train again) and the checkpoints are removed. Evaluation records go to OUT/eval/<policy> and an
interrupted evaluation resumes from them.

The learning curve (`curve_steps`, e.g. 20 and 40 of a 60-step run): when the trainer saves the
checkpoint of such a step, its model files (weights, config, tokenizer; not the optimiser's state)
are hard-linked to OUT/<run>/curve/step-N, where they outlive the checkpoint's rotation. After the
final model, each kept model is evaluated by the same evaluation as the final one, as the policy
`<label> @ step N` (`curve_policy`), so one run shows held-out accuracy at N, ... and its last step.

Held-out evaluation (greedy accuracy, Avg@n, unbiased Pass@k, length, truncation; spec §5): every
number comes from the project's evaluator, `resrl.eval.runner.evaluate` (what `resrl eval` runs),
with the task's reward as its scorer. A policy is evaluated twice by that one function: greedy = a
temperature-0 run with n = 1, sampled = n samples per problem at the config's temperature.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from resrl.data.problem import Problem
from resrl.demo.config import ExperimentConfig
from resrl.errors import InputError
from resrl.eval.runner import EvalConfig
from resrl.experiments.layout import (HANDOFF_FILE, RESULT_FILE, SUMMARY_FILE, TRAINED_FILE, config_to_dict,
                                      read_handoff, run_dir, run_dir_name, write_json_atomic)

CURVE_DIR = "curve"  # OUT/<run>/curve/step-N: the model at step N of the run (`keep_checkpoint_models`)

HELD_OUT = "held-out split"  # the benchmark name of an evaluation on the held-out split (records, plots)
DEV_SPLIT = "dev split"      # ... on the dev split where `--grid` chooses (records before 0.3 say HELD_OUT)
# the name each split's samples are seeded by (resrl.eval.runner.evaluate's seed_names): the dev split keeps
# the seeds of the name 0.2 recorded it under, so its evaluations draw the same samples as before the rename
# and the dev numbers documented from 0.2's runs reproduce sample for sample
SEED_NAMES = {HELD_OUT: HELD_OUT, DEV_SPLIT: HELD_OUT}
WARM_CHECK = "warm-start check"  # the supervised warm start's greedy stopping check (never written to disk)


# -- training ---------------------------------------------------------------------------------------

def train(config, start_dir: str | Path, here: Path, train_dataset=None, reward_fn=None,
          on_log: Callable[[dict], None] | None = None, curve_steps: Sequence[int] = ()) -> dict:
    """Train `config` from the model in `start_dir`, resuming from the newest checkpoint in `here`
    (OUT/<run>) when there is one; save the model to `here`/model (a directory `resrl eval` loads);
    keep the model of each step in `curve_steps` (`keep_checkpoint_models`; each a checkpoint step of
    `config`, which `check_curve_steps` checks before any run starts); mark it with `here`/trained.json; remove the checkpoints. Returns the
    trained.json: {"metrics" (every logged step, read back from metrics.jsonl so that a resumed run has
    the steps before its checkpoint too), "rl_seconds", "resrl_mode", "resumed_from" (a checkpoint's
    step, or None)}."""
    from resrl.checkpoint import checkpoint_step, latest_checkpoint
    from resrl.train.runner import run_training

    checkpoint = latest_checkpoint(here) if here.is_dir() else None
    # read now: the checkpoint resumed from can be rotated away (save_total_limit) while training goes on
    resumed_from = checkpoint_step(checkpoint) if checkpoint is not None else None
    callbacks = [_keep_models_callback(here, tuple(curve_steps))] if curve_steps else None
    t0 = time.perf_counter()
    result = run_training(config, model=str(start_dir), tokenizer=None, train_dataset=train_dataset,
                          reward_fn=reward_fn, on_log=on_log, save_final=False, resume=checkpoint is not None,
                          callbacks=callbacks)
    missing = [n for n in curve_steps if n not in curve_models(here)]
    if missing:  # every step was a checkpoint (check_curve_steps) and each save kept its model
        raise RuntimeError(f"{here}: no model kept for curve step(s) {missing}")
    result.model.save_pretrained(here / "model")
    result.tokenizer.save_pretrained(here / "model")
    rl_seconds = time.perf_counter() - t0
    metrics = [json.loads(line) for line in (here / "metrics.jsonl").read_text().splitlines() if line.strip()]
    done = {"metrics": metrics, "rl_seconds": rl_seconds, "resrl_mode": result.resrl_mode,
            "resumed_from": resumed_from}
    write_json_atomic(here / TRAINED_FILE, done)  # from here on a killed run evaluates, it does not train
    for old in here.glob("checkpoint-*"):  # the run is trained: its checkpoints are of no further use
        shutil.rmtree(old, ignore_errors=True)
    return done


# what a checkpoint holds besides the model (transformers' Trainer and the engine's state): not kept
_TRAINER_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "training_args.bin",
                  "resrl_engine_state.json")


def check_curve_steps(config, curve_steps: Sequence[int]) -> None:
    """InputError unless every curve step is a checkpoint step of `config` inside its run: a positive
    multiple of checkpoint.save_steps below train.max_steps (the last step is the final model)."""
    save, last = config.checkpoint.save_steps, config.train.max_steps
    bad = [n for n in curve_steps if not (0 < n < last and save and n % save == 0)]
    if bad:
        raise InputError(f"curve steps {bad}: each must be a checkpoint step (a multiple of checkpoint.save_steps = "
                         f"{save}) below the run's {last} steps")


def curve_models(here: Path) -> dict[int, Path]:
    """{step: the kept model's directory} of the run in `here` (OUT/<run>/curve/step-N), by step."""
    d = Path(here) / CURVE_DIR
    found = {}
    for p in d.glob("step-*") if d.is_dir() else ():
        if p.name[5:].isdigit() and (p / "config.json").is_file():
            found[int(p.name[5:])] = p
    return dict(sorted(found.items()))


def keep_checkpoint_models(here: Path, steps: Sequence[int]) -> list[int]:
    """For each step in `steps` with a complete checkpoint-N in `here` and no kept model yet: hard-link
    the checkpoint's model files (everything but the trainer's state) to `here`/curve/step-N, made
    whole in a staging directory and renamed (a killed run never leaves half a model there). Called
    at every checkpoint save, so a step's model is kept before rotation deletes its checkpoint, and a
    run killed between a save and its keeping keeps it at its next save (the checkpoint is then the
    newest). Returns the steps kept now."""
    import os

    from resrl.checkpoint import list_checkpoints

    here = Path(here)
    have = curve_models(here)
    kept = []
    for ckpt in list_checkpoints(here):
        step = int(ckpt.name.rsplit("-", 1)[1])
        if step not in steps or step in have:
            continue
        final = here / CURVE_DIR / f"step-{step}"
        tmp = final.with_name(f".{final.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in ckpt.iterdir():
            if f.is_file() and f.name not in _TRAINER_STATE and not f.name.startswith("rng_state"):
                os.link(f, tmp / f.name)
        if not (tmp / "config.json").is_file():
            raise RuntimeError(f"{ckpt}: no config.json: not a model checkpoint to keep for the curve")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        kept.append(step)
    return kept


def curve_policy(label: str, step: int) -> str:
    """The policy name of `label`'s model at `step` (its evaluation records: OUT/eval/<policy>)."""
    return f"{label} @ step {step}"


def _keep_models_callback(here: Path, steps: Sequence[int]):
    """A TrainerCallback keeping the curve steps' models at each checkpoint save
    (`keep_checkpoint_models`), on the main process."""
    from transformers import TrainerCallback

    class KeepCheckpointModels(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                keep_checkpoint_models(here, steps)

    return KeepCheckpointModels()


# config keys that do not change a method's training: where it is written, which methods run beside
# it, and how and on which split it is evaluated
NOT_TRAINING = ("out", "algorithms", "eval", "eval_split", "reuse_training")


def reusable_training(cfg: ExperimentConfig, label: str, train_config: Callable[[Path], object],
                      curve_steps: Sequence[int] = ()) -> Path | None:
    """The run directory of `label` in `cfg.reuse_training` (an earlier experiment's OUT) when its
    training is this one's: the run finished there (result.json), both experiments have the same task,
    seed, budgets and every other training setting (their configs without NOT_TRAINING), the same
    train config (`train_config(output_dir)`; where it is written and how often it checkpoints aside),
    the same start (OUT/warm_start resolves to the same model) and the models of `curve_steps` kept
    (`curve_models`). None otherwise (or without `cfg.reuse_training`): the method trains.

    The RL rows depend only on the task, its seed and the budget, and each run seeds itself, so the
    same code would train the same model; reusing it saves the whole RL run (the grid's first seed)."""
    src_out = cfg.reuse_training
    if not src_out:
        return None
    src_out = Path(src_out)
    if not (src_out / HANDOFF_FILE).is_file():
        raise InputError(f"reuse_training {str(src_out)!r}: not an experiment's output directory (no {HANDOFF_FILE})")
    handoff = read_handoff(src_out)
    src = run_dir(src_out, label)
    if handoff["task"] != cfg.task_name or label not in handoff["config"].get("algorithms", ()):
        return None
    if not (src / RESULT_FILE).is_file() or not (src / "model").is_dir() or not (src / "train_config.json").is_file():
        return None

    def training(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in NOT_TRAINING}

    if training(handoff["config"]) != training(config_to_dict(cfg)):
        return None

    def trained(d: dict) -> dict:  # the run's train config; where it is written, its checkpoints and where its
        # rows file lies aside (the rows are the task's, seed's and budget's: the configs compared above)
        return {**{k: v for k, v in d.items() if k not in ("checkpoint", "data")},
                "train": {k: v for k, v in d["train"].items() if k != "output_dir"}}

    if trained(json.loads((src / "train_config.json").read_text())) != trained(json.loads(
            json.dumps(train_config(src).to_dict(), default=str))):
        return None
    if (src_out / "warm_start").resolve() != (Path(cfg.out) / "warm_start").resolve():
        return None
    if any(n not in curve_models(src) for n in curve_steps):  # its curve's models were not kept
        return None
    return src


def link_reused(cfg: ExperimentConfig, label: str, source: Path) -> dict:
    """`label`'s run from `source` (`reusable_training`): OUT/<run>/model links to its model (and
    OUT/<run>/curve to its kept models, where it has them), metrics.jsonl is its training log,
    trained.json its training's record. Returns that record."""
    here = run_dir(cfg.out, label)
    here.mkdir(parents=True, exist_ok=True)
    for name in ("metrics.jsonl", "train_config.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, here / name)
    (here / "reused_from").write_text(str(source.resolve()) + "\n")
    link = here / "model"
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to((source / "model").resolve(), target_is_directory=True)
    curve = here / CURVE_DIR
    if curve.is_symlink():
        curve.unlink()
    if (source / CURVE_DIR).is_dir():
        shutil.rmtree(curve, ignore_errors=True)
        curve.symlink_to((source / CURVE_DIR).resolve(), target_is_directory=True)
    done = json.loads((source / RESULT_FILE).read_text())
    done = {k: done[k] for k in ("metrics", "rl_seconds", "resrl_mode")}
    write_json_atomic(here / TRAINED_FILE, done)  # killed while evaluating: its evaluation records are kept
    return done


def run_one(cfg: ExperimentConfig, label: str, inputs: dict, kind, exp=None) -> dict:
    """One method's run (the worker protocol's job, `resrl.experiments.workers`): its training by
    its experiment kind `kind` (reused from `cfg.reuse_training`, kept from OUT/<run>/trained.json, or
    trained, resuming from a checkpoint), then the kind's evaluation of OUT/<run>/model. `exp`: the
    experiment in this process (its display and log), None in a worker. Returns result.json's dict:
    {"metrics", "rl_seconds", "resrl_mode", "result" (the policy's summary entry), "eval_seconds", and
    with curve steps "curve" ({step: the entry of the model kept at that step}, evaluated alike)}."""
    here = run_dir(cfg.out, label)
    here.mkdir(parents=True, exist_ok=True)
    say = exp.display.say if exp is not None else (lambda line: None)
    source = reusable_training(cfg, label, lambda d: kind.train_config(cfg, label, inputs, d), cfg.curve_steps)
    if source is not None:  # the same training finished in another experiment (the grid's dev phase)
        done = link_reused(cfg, label, source)
        say(f"RL {label}: training reused from {source} (same training settings and start)")
    elif (here / TRAINED_FILE).is_file() and (here / "model").is_dir():  # killed while evaluating
        done = json.loads((here / TRAINED_FILE).read_text())
        say(f"RL {label}: trained before (OUT/{here.name}/{TRAINED_FILE}); its evaluation resumes")
    else:
        done = kind.train(cfg, label, inputs, here, exp)
    t = time.perf_counter()
    result = kind.evaluate(cfg, label, here / "model", inputs, exp)
    models = curve_models(here)
    curve = {str(n): kind.evaluate(cfg, curve_policy(label, n), models[n], inputs, exp) for n in cfg.curve_steps}
    return {"metrics": done["metrics"], "rl_seconds": done["rl_seconds"], "resrl_mode": done.get("resrl_mode"),
            "result": result, "eval_seconds": time.perf_counter() - t, **({"curve": curve} if curve else {})}


# -- evaluation -------------------------------------------------------------------------------------

def eval_dir(out: str | Path, policy: str) -> Path:
    """Where a policy's evaluation records go: OUT/eval/<policy> (greedy/ and sampled/ runs)."""
    return Path(out) / "eval" / run_dir_name(policy).replace(" ", "-")


def split_label(eval_split: str, records_dir: Path | None = None) -> str:
    """The benchmark name an evaluation on `eval_split` ("test" or "dev") is recorded under: HELD_OUT
    or DEV_SPLIT. Records an earlier version wrote for the dev split under HELD_OUT keep that name, so
    their evaluation resumes and reads as it was."""
    if eval_split == "test":
        return HELD_OUT
    if eval_split != "dev":
        raise InputError(f"eval_split must be 'test' or 'dev', got {eval_split!r}")
    if records_dir is not None:
        for run in ("greedy", "sampled"):
            summary = records_dir / run / SUMMARY_FILE
            if summary.is_file() and HELD_OUT in json.loads(summary.read_text()).get("benchmarks", {}):
                return HELD_OUT
    return DEV_SPLIT


def greedy_config(config: EvalConfig) -> EvalConfig:
    """The same settings as one greedy sample per problem."""
    return replace(config, n=1, ks=None, temperature=0.0)


@dataclass
class EvalResult:
    """A view of the runner's summaries of one policy (greedy run + sampled run)."""

    greedy: float  # greedy accuracy (avg@1 of the temperature-0 run)
    avg: float  # Avg@n
    avg_stderr: float | None  # standard error of Avg@n over problems
    pass_at: dict[int, float]  # k -> mean unbiased Pass@k, for the config's ks
    mean_length: float  # sampled completion tokens
    truncated: float  # fraction of samples that hit max_new_tokens
    num_problems: int
    summary: dict  # the sampled run's summary (resrl.eval.runner.evaluate), e.g. for plot_passk

    @classmethod
    def from_summaries(cls, greedy: dict, sampled: dict, benchmark: str | None = None) -> "EvalResult":
        """`benchmark`: the split's name in the summaries (None: the one benchmark they hold)."""
        if benchmark is None:
            benchmark = next(iter(sampled["benchmarks"]))
        g, m = greedy["benchmarks"][benchmark], sampled["benchmarks"][benchmark]
        return cls(greedy=g["avg@1"], avg=m[f"avg@{m['n']}"], avg_stderr=m["avg_stderr"],
                   pass_at={int(k): m["pass@k"][str(k)] for k in sampled["ks"]},
                   mean_length=m["mean_response_tokens"], truncated=m["truncation_rate"],
                   num_problems=m["num_problems"], summary=sampled)

    @classmethod
    def read(cls, records_dir: str | Path) -> "EvalResult":
        """From an evaluation's records directory (OUT/eval/<policy>: greedy/ and sampled/)."""
        d = Path(records_dir)
        return cls.from_summaries(json.loads((d / "greedy" / SUMMARY_FILE).read_text()),
                                  json.loads((d / "sampled" / SUMMARY_FILE).read_text()))

    def to_dict(self) -> dict:
        return {"greedy": self.greedy, "avg": self.avg, "pass_at": {str(k): v for k, v in self.pass_at.items()},
                "mean_length": self.mean_length, "truncated": self.truncated}


def run_evaluation(model, tokenizer, problems: Sequence[Problem], config: EvalConfig,
                   out_dir: str | Path | None = None, benchmark: str = HELD_OUT,
                   on_progress: Callable[[int], None] | None = None, scorer=None) -> dict:
    """One `resrl.eval.runner.evaluate` call on a task's problems, scored by the task's reward
    (`scorer`; None: `chain_reward`, the chained-addition tasks' reward)."""
    from resrl.eval.runner import evaluate as runner_evaluate

    if scorer is None:
        from resrl.data.synthetic import chain_reward as scorer
    return runner_evaluate(model, {benchmark: list(problems)}, config, out_dir, tokenizer=tokenizer,
                           scorer=scorer, on_progress=on_progress,
                           seed_names={benchmark: SEED_NAMES.get(benchmark, benchmark)})


def evaluate(model, tokenizer, problems: Sequence[Problem], config: EvalConfig, out_dir: str | Path | None = None,
             on_progress: Callable[[int], None] | None = None, scorer=None, benchmark: str = HELD_OUT) -> EvalResult:
    """Greedy accuracy plus config.n samples per problem at config.temperature -> EvalResult.

    With `out_dir`, the two runs write their usual outputs (config.json, samples.jsonl, summary.json,
    results.md) to `out_dir/greedy` and `out_dir/sampled`, and an interrupted evaluation resumes from
    them (an out_dir belongs to one model: the runner checks the settings, not the weights).
    on_progress(samples_done) is called after every batch, counting the greedy run's P samples
    first, then the P × n sampled ones. scorer: the task's reward (`run_evaluation`)."""
    out = Path(out_dir) if out_dir is not None else None
    P = len(problems)
    greedy = run_evaluation(model, tokenizer, problems, greedy_config(config), out / "greedy" if out else None,
                            benchmark=benchmark, on_progress=on_progress, scorer=scorer)
    sampled = run_evaluation(model, tokenizer, problems, config, out / "sampled" if out else None,
                             benchmark=benchmark, scorer=scorer,
                             on_progress=None if on_progress is None else (lambda done: on_progress(P + done)))
    return EvalResult.from_summaries(greedy, sampled, benchmark)


def greedy_accuracy(model, tokenizer, problems: Sequence[Problem], config: EvalConfig, scorer=None) -> float:
    """Greedy accuracy on `problems` (the warm start's stopping check), by the same evaluator."""
    summary = run_evaluation(model, tokenizer, problems, greedy_config(config), benchmark=WARM_CHECK, scorer=scorer)
    return summary["benchmarks"][WARM_CHECK]["avg@1"]



def __getattr__(name: str):
    """A name that left this module (START, training_config): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["CURVE_DIR", "check_curve_steps", "curve_models", "keep_checkpoint_models", "curve_policy", "HELD_OUT", "DEV_SPLIT", "SEED_NAMES", "NOT_TRAINING", "EvalConfig", "EvalResult", "train", "run_one",
           "reusable_training", "link_reused", "eval_dir", "split_label", "greedy_config", "evaluate",
           "greedy_accuracy", "run_evaluation"]
