"""The step-layout experiment behind `resrl demo --task agents` and `--task webshop`: a tiny model
warm-started by behaviour cloning on an expert's walkthroughs, then RL per method with step-level
rollouts, then the step-layout evaluator — every stage one of the library's parts. The task's config
(a `resrl.demo.agents_task.StepDemo`) gives its games, environment, expert walkthroughs and report.

    games (resrl.demo.agents_task) -> tiny model -> behaviour cloning (resrl.experiments.warmstart)
        -> evaluate (resrl.eval.steps.evaluate_steps)
        -> for each method: RL from the same warm start (resrl.train, env.layout: step, EnvPool) -> evaluate
        -> report.md, training_success.png (resrl.demo.agents_task)

The methods' runs go one after the other in this process or as worker processes, by the experiments'
one worker protocol (`resrl.experiments.workers.run_methods`); each run seeds itself and reads the
warm start from disk, so the numbers do not depend on the number of workers.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from resrl.demo.agents_task import BC_CHECK_SEED, DEFAULT_ALGORITHMS, EVAL_SEED, WARM, AgentsDemoConfig
from resrl.errors import InputError
from resrl.experiments.layout import config_from_dict as _from_dict
from resrl.experiments.layout import jsonable, run_dir
from resrl.experiments.warmstart import behaviour_cloning
from resrl.experiments.workers import method_workers, run_methods


# -- evaluation -------------------------------------------------------------------------------------

def evaluate(model_dir, games, history_window, max_steps, seed=0, temperature=0.0, samples=1, max_step_tokens=32,
             env=None):
    """Success on `games` through the EnvPool: greedy (temperature 0, one episode each) or sampled
    (`samples` episodes per game, seeded). Returns success (mean over episodes), its standard error over
    games, pass@samples (a game counts when any of its episodes won), mean steps, invalid-format rate."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return play(model, tok, games, history_window, max_steps, seed, temperature, samples, max_step_tokens, env)


def play(model, tok, games, history_window, max_steps, seed=0, temperature=0.0, samples=1, max_step_tokens=32,
         env=None):
    """`evaluate` on a loaded model: resrl.eval.steps.evaluate_steps on the demo's environment (`env`: its
    (env.name, options), as `StepDemo.env()` gives; None: the corridor, resrl.envs.toy), the evaluator
    `resrl eval --env` uses (its extra keys, e.g. pass_at, come along)."""
    from resrl.eval.steps import evaluate_steps, step_env

    name, options = env or ("resrl.envs.toy:make_toy_env", {})
    factory, own = step_env(name, max_steps)
    return evaluate_steps(model, tok, games, factory, {**own, **options, "history_window": history_window},
                          max_steps=max_steps, max_step_tokens=max_step_tokens, seed=seed, temperature=temperature,
                          samples=samples)


def evaluate_policy(model_dir, test_games, cfg: AgentsDemoConfig) -> dict:
    """A policy's summary entry: greedy success, sampled success (`avg`), pass@1 / pass@n, the mean
    episode reward greedy and sampled (`greedy_score`, `score`: WebShop's score), and details."""
    greedy = evaluate(model_dir, test_games, cfg.history_window, cfg.max_steps, max_step_tokens=cfg.max_step_tokens,
                      env=cfg.env())
    sampled = evaluate(model_dir, test_games, cfg.history_window, cfg.max_steps, seed=cfg.seed + EVAL_SEED,
                       temperature=cfg.temperature, samples=cfg.eval_samples, max_step_tokens=cfg.max_step_tokens,
                       env=cfg.env())
    return {"greedy": greedy["success"], "avg": sampled["success"], "avg_se": sampled["se"],
            "greedy_score": greedy["reward"], "score": sampled["reward"],
            "pass_at": {"1": sampled["success"], str(cfg.eval_samples): sampled["pass"]},
            "episodes": sampled["episodes"], "steps": sampled["steps"],
            "invalid_format_rate": sampled["invalid_format_rate"],
            "greedy_invalid_format_rate": greedy["invalid_format_rate"], "per_game": sampled["per_game"]}


# -- RL ---------------------------------------------------------------------------------------------

def train_config(cfg: AgentsDemoConfig, algo: str, warm_dir, data_path, out_dir):
    from resrl.train import load_config

    import json as _json

    name, options = cfg.env()
    return load_config(None, [
        f"model.path={warm_dir}", f"data.train={data_path}", "reward.function=env",
        f"env.name={name}", "env.layout=step", f"env.history_window={cfg.history_window}",
        *(f"env.options.{k}={_json.dumps(v)}" for k, v in options.items()),
        f"env.max_steps={cfg.max_steps}", f"env.max_step_tokens={cfg.max_step_tokens}", "env.num_workers=1",
        f"train.output_dir={out_dir}", f"train.max_steps={cfg.rounds * cfg.updates_per_round}",
        f"train.rollout_prompts={cfg.rollout_prompts}", f"train.update_prompts={cfg.rollout_prompts // cfg.updates_per_round}",
        f"train.warmup_steps={cfg.warmup_rounds * cfg.updates_per_round}",
        f"train.group_size={cfg.group_size}", f"train.learning_rate={cfg.learning_rate}",
        f"train.temperature={cfg.temperature}", "train.max_prompt_length=700", f"train.seed={cfg.seed}",
        f"loss.agg={cfg.loss_agg}", f"algorithm.name={algo}", "log.progress=false", "log.report_to=[none]",
        *cfg.overrides])


def rl_run(cfg: AgentsDemoConfig, algo: str, warm_dir, data_path, out_dir) -> dict:
    """One algorithm's RL run from the warm start; returns its per-round training metrics."""
    from resrl.train import run_training

    t = time.perf_counter()
    res = run_training(train_config(cfg, algo, warm_dir, data_path, out_dir))
    keys = ("episode/success", "episode/invalid_format_rate", "episode/invalid_action_rate", "episode/steps")
    rounds = [{k.split("/")[1]: m.get(k) for k in keys} for m in res.metrics if "episode/success" in m]
    return {"rounds": rounds, "train_success": [r["success"] for r in rounds],
            "rl_seconds": round(time.perf_counter() - t, 1)}


def paired(results: dict, policy: str) -> dict:
    """Per-game paired difference of sampled success against the warm start: mean, its standard error and
    95 % Student-t interval over games (`resrl.statistics.paired_difference`)."""
    import math

    from resrl.statistics import paired_difference

    d = paired_difference(results[policy]["per_game"], results[WARM]["per_game"])
    se = d["std"] / math.sqrt(d["n"]) if d["n"] > 1 else 0.0
    return {"mean": d["mean"], "se": se, "low": d["low"], "high": d["high"], "n": d["n"], "wins": d["wins"]}


# -- one method's run: the worker protocol's job --------------------------------------------------

def run_one(cfg: AgentsDemoConfig, algo: str, inputs: dict) -> dict:
    """One method: its RL run from the warm start (inputs["warm_dir"], the training games in
    inputs["data_path"]), then its evaluation on inputs["test_games"] -> {"run", "result", "eval_seconds"}."""
    out = run_dir(cfg.out, algo)
    run = rl_run(cfg, algo, inputs["warm_dir"], inputs["data_path"], out)
    t = time.perf_counter()
    r = evaluate_policy(str(out / "model"), inputs["test_games"], cfg)
    return {"run": run, "result": r, "eval_seconds": round(time.perf_counter() - t, 1)}


# -- the experiment ---------------------------------------------------------------------------------

def run_agents_demo(cfg: AgentsDemoConfig, warm_dir: str | None = None, log=print, workers: int | None = 1) -> dict:
    """Everything; returns the summary written to OUT/summary.json. `warm_dir`: reuse a saved warm start;
    `workers`: processes for the RL runs (each with its evaluation) after the warm start."""
    import torch

    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train_games, test_games, split = cfg.games()
    data_path = out / "train_games.jsonl"
    with open(data_path, "w") as f:
        for g in train_games:
            f.write(json.dumps({"problem": g, "answer": ""}) + "\n")
    # the rows `resrl eval --env resrl.envs.toy:make_toy_env --data OUT/test_games.jsonl` reads (as train_games.jsonl)
    (out / "test_games.jsonl").write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n" for g in test_games))
    summary = {"task": cfg.task_name, "config": jsonable(asdict(cfg)), "train_games": len(train_games),
               "test_games": len(test_games), **split, "results": {}, "training": {}, "timings": {}}
    if warm_dir is None:
        base, warm_dir = out / "model-init", out / "model-bc"
        build_tiny_model(base, TinyModelConfig(**cfg.model, seed=cfg.seed))
        dev = train_games[cfg.bc_games:cfg.bc_games + cfg.bc_dev_games]
        stop = None
        if cfg.bc_target is not None and dev:
            def stop(model, tok):  # sampled as RL samples (temperature, full softmax), 4 episodes per game
                s = play(model, tok, dev, cfg.history_window, cfg.max_steps, seed=cfg.seed + BC_CHECK_SEED,
                         temperature=cfg.temperature, samples=4, max_step_tokens=cfg.max_step_tokens, env=cfg.env())
                return s["success"] >= cfg.bc_target, s["success"]
        log(f"warm start: behaviour cloning (at most {cfg.bc_steps} steps) on the expert's walkthroughs of "
            f"{cfg.bc_games} training games" + (f", until sampled success on {len(dev)} other training games "
                                                 f"reaches {cfg.bc_target}" if stop else ""))
        bc = behaviour_cloning(str(base), str(warm_dir), cfg.expert_samples(train_games[:cfg.bc_games]),
                               cfg.bc_steps, cfg.seed, cfg.bc_lr, cfg.bc_batch, log=log, stop=stop, min_steps=50,
                               check_every=getattr(cfg, "bc_check_every", 10))
        summary["bc_samples"], summary["bc_steps"], summary["bc_checks"] = bc["samples"], bc["steps"], bc["checks"]
        summary["bc_kept"] = bc["kept"]
    summary["timings"]["warm start"] = round(time.perf_counter() - t0, 1)
    t = time.perf_counter()
    summary["results"][WARM] = evaluate_policy(str(warm_dir), test_games, cfg)
    summary["timings"]["evaluate warm start"] = round(time.perf_counter() - t, 1)
    log(f"{WARM}: held-out greedy {summary['results'][WARM]['greedy']:.3f}, sampled "
        f"{summary['results'][WARM]['avg']:.3f}")
    if workers is None:
        workers = method_workers(cfg)
    workers = max(1, min(workers, len(cfg.algorithms)))
    if workers > 1:
        log(f"RL runs: {len(cfg.algorithms)}, {workers} worker processes (one torch thread each)")
    runs = run_methods(out, cfg.task_name, cfg, cfg.algorithms, run_one, workers, say=log,
                       inputs={"warm_dir": str(warm_dir), "data_path": str(data_path), "test_games": test_games})
    for algo in cfg.algorithms:
        run, r, eval_seconds = runs[algo]["run"], runs[algo]["result"], runs[algo]["eval_seconds"]
        summary["training"][algo] = run
        summary["timings"][f"evaluate {algo}"] = eval_seconds
        summary["results"][algo] = {**r, "rl_seconds": run["rl_seconds"], "paired_vs_warm_start": paired(
            {algo: r, WARM: summary["results"][WARM]}, algo)}
        log(f"{algo}: held-out greedy {r['greedy']:.3f}, sampled {r['avg']:.3f} ± {r['avg_se']:.3f}; training "
            f"success per round {['%.2f' % s for s in run['train_success']]} ({run['rl_seconds']} s)")
    summary["timings"]["total"] = round(time.perf_counter() - t0, 1)
    cfg.write_report(out, summary)
    (out / "summary.json").write_text(json.dumps(jsonable(summary), indent=1))
    log((out / "report.md").read_text())
    return summary


def config(task=None, quick: bool = False):
    """The demo task's step-demo config (a `resrl.demo.agents_task.StepDemo`; the corridor's without a task)."""
    if task is None:
        return AgentsDemoConfig.quick() if quick else AgentsDemoConfig()
    return task.config(quick)


def config_from_args(task, args) -> AgentsDemoConfig:
    """`resrl demo --task agents`'s shared options over the task's settings: --rl-steps counts generation
    rounds; the output directory defaults to runs/demo-agents."""
    if getattr(args, "eval_split", "test") != "test":
        raise InputError("--task agents has no dev split (its held-out split is tasks no training game has): "
                         "--grid and --eval-split dev are for the generated-problem tasks")
    if getattr(args, "reuse_training", None):
        raise InputError("--reuse-training: --task agents trains each seed from its own behaviour-cloned start; "
                         "only tasks that start from a shared pretrained model reuse runs")
    cfg = config(task, quick=args.quick)
    cfg = replace(cfg, out=args.out if args.out != "runs/demo" else f"runs/demo-{cfg.task_name}", seed=args.seed,
                  threads=args.threads)
    if args.algorithms is not None:
        cfg = replace(cfg, algorithms=tuple(a.strip() for a in args.algorithms.split(",") if a.strip()))
    if args.rl_steps is not None:
        if args.rl_steps < 1:
            raise InputError(f"--rl-steps must be >= 1, got {args.rl_steps}")
        cfg = replace(cfg, rounds=args.rl_steps)
    if args.lr is not None:
        if not args.lr > 0:
            raise InputError(f"--lr must be > 0, got {args.lr}")
        cfg = replace(cfg, learning_rate=args.lr)
    if args.eval_samples is not None:
        if args.eval_samples < 1:
            raise InputError(f"--eval-samples must be >= 1, got {args.eval_samples}")
        cfg = replace(cfg, eval_samples=args.eval_samples)
    return cfg


def config_from_dict(d: dict):
    """The handoff's dict back to its task's config class (the DemoTask's `config_type`)."""
    from resrl.demo.tasks import get_demo_task

    return _from_dict(get_demo_task(d.get("task_name", "agents")).config_type, d)


def run(cfg: AgentsDemoConfig, workers: int | None = None) -> dict:
    """The experiment kind's one-seed entry (resrl.experiments.kinds)."""
    return run_agents_demo(cfg, workers=workers)


__all__ = ["run", "run_one", "run_agents_demo", "config", "config_from_args", "config_from_dict", "evaluate",
           "evaluate_policy", "play", "paired", "rl_run", "train_config", "DEFAULT_ALGORITHMS"]
