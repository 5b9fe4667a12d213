"""Step-layout evaluation: a policy plays the games of a step environment, one fresh prompt per step.

    from resrl.eval.steps import evaluate_steps, step_env
    factory, options = step_env("resrl.envs.toy:make_toy_env", max_steps=10)   # or a family's env.name, e.g. alfworld
    r = evaluate_steps(model, tokenizer, games, factory, {**options, "history_window": 0}, max_steps=10,
                       seed=7, temperature=1.0, samples=8)
    r["success"], r["se"], r["pass"], r["pass_at"], r["steps"], r["invalid_format_rate"], r["per_game"]

The environments are the ones training steps (`env.layout: step`): built by the factory a task
family registers under an `env.name` (resrl.tasks.registry.EnvSpec.step_factory) or by a
"module:function" factory, as `factory(game, **options)`, in `resrl.envs.pool.EnvPool` workers,
and played with `resrl.engines.steps.rollout_steps` and `resrl.engines.multiturn.HFStepPolicy`.
`resrl eval --env NAME --data GAMES` (`run_step_eval`) writes the report; the agents demo
(resrl.demo.agents_task) scores its policies with `evaluate_steps`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

from resrl.errors import InputError


def step_env(name: str, max_steps: int | None = None) -> tuple[Callable[..., Any], dict]:
    """(factory, options) of an environment name: a task family's `env.name` (e.g. alfworld) or a
    "module:function" factory. options holds `max_steps` for an environment that ends its episodes
    itself (EnvSpec.ends_at_max_steps), as training hands it."""
    from resrl.tasks.envs import load_step_factory, step_factory
    from resrl.tasks.registry import env_spec

    spec = step_factory(name)
    if ":" not in spec:
        from resrl.tasks.envs import STEP_ENVS

        known = sorted(STEP_ENVS)
        raise InputError(f"--env {name!r}: not a registered step environment ({known}) nor a 'module:function' factory")
    factory = load_step_factory(name, "--env")
    options = {}
    family_env = env_spec(name)
    if family_env is not None and family_env.ends_at_max_steps and max_steps is not None:
        options["max_steps"] = max_steps
    return factory, options


def evaluate_steps(model, tokenizer, games: Sequence[Any], env_factory: Callable[..., Any], env_options: dict | None = None,
                   *, max_steps: int, max_step_tokens: int = 32, seed: int = 0, temperature: float = 0.0,
                   samples: int = 1, top_p: float = 1.0, num_workers: int = 1, max_prompt_tokens: int | None = None,
                   policy=None) -> dict:
    """Success of a step-layout policy on `games` (each handed to `env_factory(game, **env_options)`):
    greedy (temperature 0, one episode each) or sampled (`samples` episodes per game, seeded).

    Returns success (mean over games of each game's success rate), se (its standard error over
    games), pass (a game counts when any of its episodes won), pass_at {k: unbiased pass@k, k in 1,
    2, 4, ... up to samples}, episodes, steps (mean per episode), invalid_format_rate (per step),
    per_game (each game's success rate), wins (each game's episodes, 1.0 won / 0.0 not), reward
    (the mean episode reward: e.g. WebShop's score) and per_game_reward.
    policy: a StepPolicy instead of sampling from `model` (then `seed` / `temperature` are its own)."""
    from resrl.engines.multiturn import ChatRenderer, HFStepPolicy
    from resrl.engines.steps import episode_stats, rollout_steps
    from resrl.envs.pool import EnvPool
    from resrl.metrics import ks_up_to, pass_at_k

    if not games:
        raise InputError("step evaluation: no games")
    if samples < 1:
        raise InputError(f"step evaluation: samples must be >= 1, got {samples}")
    if policy is None:
        policy = HFStepPolicy(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed)
    eos = getattr(policy, "eos_token_ids", None) or [tokenizer.eos_token_id]
    prompts = [g for g in games for _ in range(samples)]
    groups = [i for i in range(len(games)) for _ in range(samples)]
    with EnvPool(env_factory, num_workers=num_workers, options=dict(env_options or {})) as pool:
        _, episodes = rollout_steps(pool, prompts, groups, policy, ChatRenderer(tokenizer), eos_token_ids=eos,
                                    max_steps=max_steps, max_step_tokens=max_step_tokens,
                                    max_prompt_tokens=max_prompt_tokens)
    wins = [[] for _ in games]
    rewards = [[] for _ in games]
    for e in episodes:
        wins[e.group].append(1.0 if e.won else 0.0)
        rewards[e.group].append(float(e.reward))
    means = [sum(w) / len(w) for w in wins]
    n = len(means)
    mean = sum(means) / n
    se = math.sqrt(sum((m - mean) ** 2 for m in means) / (n - 1) / n) if n > 1 else 0.0
    s = episode_stats(episodes)
    correct = [int(sum(w)) for w in wins]
    pass_at = {str(k): float(pass_at_k(samples, correct, k).mean()) for k in ks_up_to(samples)}
    return {"success": mean, "se": se, "pass": sum(1.0 for w in wins if max(w) > 0) / n,
            "episodes": len(episodes), "steps": s["episode/steps"],
            "invalid_format_rate": s["episode/invalid_format_rate"], "per_game": means,
            "pass_at": pass_at, "invalid_action_rate": s["episode/invalid_action_rate"], "wins": wins,
            "reward": sum(sum(r) for r in rewards) / max(1, sum(len(r) for r in rewards)),
            "per_game_reward": [sum(r) / len(r) if r else 0.0 for r in rewards]}


# -- `resrl eval --env NAME --data GAMES` -------------------------------------------------------------

def step_arguments(parser) -> None:
    """`resrl eval`'s options of a step-layout evaluation (with --max-steps / --history-window, which
    the ALFWorld family's group adds when registered; added here otherwise)."""
    from resrl.tasks.envs import STEP_ENVS

    g = parser.add_argument_group("step-layout policies (--env; docs/evaluation.md)")
    g.add_argument("--env", default=None, metavar="NAME_OR_MODULE:FUNCTION",
                   help="score a step-layout policy: every --data value is a game set of this environment "
                        f"(a registered env.name: {', '.join(sorted(STEP_ENVS)) or 'none'}; or a 'module:function' "
                        "factory, e.g. resrl.envs.toy:make_toy_env, the corridor), played --n episodes per game of at "
                        "most --max-steps steps, --history-window handed to the factory")
    g.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a further option of the environment factory (value parsed as JSON when it is JSON)")
    g.add_argument("--max-step-tokens", type=int, default=None,
                   help="--env: tokens the policy generates per step (default: --max-new-tokens)")
    g.add_argument("--env-workers", type=int, default=1, help="--env: environment worker processes (default 1)")
    have = {a for action in parser._actions for a in action.option_strings}
    if "--max-steps" not in have:
        g.add_argument("--max-steps", type=int, default=50, help="steps per episode (default 50)")
    if "--history-window" not in have:
        g.add_argument("--history-window", type=int, default=2, help="observation/action pairs in each prompt (default 2)")


def _env_options(pairs: Sequence[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--env-option {pair!r}: expected KEY=VALUE")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options


def run_step_eval(args, out: Path) -> dict:
    """`resrl eval --env ...`: each --data game set played --n episodes per game (default 1, greedy at
    --temperature 0); writes OUT/summary.json, OUT/results.md and OUT/step_episodes.jsonl."""
    from resrl.eval.runner import _load_model
    from resrl.tasks.envs import step_games

    n = args.n if args.n is not None else 1
    if n < 1 or args.max_steps < 1:
        raise InputError("--n and --max-steps must be >= 1")
    max_step_tokens = args.max_step_tokens if args.max_step_tokens is not None else args.max_new_tokens
    ks = sorted({k for k in (args.k or []) if k <= n})
    factory, options = step_env(args.env, args.max_steps)
    options = {"history_window": args.history_window, **options, **_env_options(args.env_option)}
    model, tokenizer = _load_model(args.model, None)
    out.mkdir(parents=True, exist_ok=True)
    datasets = {}
    for spec in args.data:
        rows = step_games(spec, args.data_dir, args.limit)
        if not rows:
            raise InputError(f"--data {spec!r}: no games")
        r = evaluate_steps(model, tokenizer, [row["prompt"] for row in rows], factory, options,
                           max_steps=args.max_steps, max_step_tokens=max_step_tokens, seed=args.seed,
                           temperature=args.temperature, top_p=args.top_p, samples=n, num_workers=args.env_workers)
        if ks:
            from resrl.metrics import pass_at_k

            r["pass_at"].update({str(k): float(pass_at_k(n, [int(sum(w)) for w in r["wins"]], k).mean()) for k in ks})
        r["games"] = len(rows)
        r["game_ids"] = [str(row["answer"]) for row in rows]
        name = Path(spec).stem if Path(spec).is_file() else spec
        datasets[name] = r
    settings = {"model": str(args.model), "env": args.env, "env_options": options, "n": n, "max_steps": args.max_steps,
                "max_step_tokens": max_step_tokens, "temperature": args.temperature, "top_p": args.top_p,
                "seed": args.seed, "data": list(args.data), "limit": args.limit}
    summary = {"layout": "step", "datasets": datasets, "settings": settings}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "results.md").write_text(results_table(summary))
    return summary


def results_table(summary: dict) -> str:
    """Markdown: one row per game set; success and pass@k in percent."""
    datasets = summary["datasets"]
    ks = sorted({int(k) for r in datasets.values() for k in r["pass_at"]})
    n = summary["settings"]["n"]
    header = ["games", "episodes", f"success (Avg@{n}) ± s.e."] + [f"Pass@{k}" for k in ks] + [
        "mean steps", "invalid format %", "invalid action %"]
    lines = [f"Step-layout policy {summary['settings']['model']} on --env {summary['settings']['env']}", "",
             "| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for name, r in datasets.items():
        cells = [f"{name} ({r['games']})", str(r["episodes"]), f"{100 * r['success']:.1f} ± {100 * r['se']:.1f}"]
        cells += [f"{100 * r['pass_at'][str(k)]:.1f}" if str(k) in r["pass_at"] else "–" for k in ks]
        cells += [f"{r['steps']:.1f}", f"{100 * r['invalid_format_rate']:.1f}", f"{100 * r['invalid_action_rate']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["evaluate_steps", "step_env", "step_arguments", "run_step_eval", "results_table"]
