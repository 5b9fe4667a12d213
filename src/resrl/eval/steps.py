"""The one step-episode evaluator: a policy plays the games of a step environment, one fresh prompt per
step, as training plays them. It serves every step task: the demo's (`resrl demo --task agents`,
`webshop`), `resrl eval --env NAME --data GAMES`, and the ALFWorld and WebShop families' `resrl eval
--data alfworld:... / webshop:...`; a family supplies only its environment (an `env.name` and its
options) and its scorer (`StepScorer`: its breakdown of the records and its columns of the table).

    records = play_episodes(model, tokenizer, games, factory, options, max_steps=10, samples=8, seed=7)
    r = evaluate_steps(model, tokenizer, games, factory, options, max_steps=10, samples=8, seed=7)
    r["success"], r["se"], r["pass"], r["pass_at"], r["steps"], r["invalid_format_rate"], r["per_game"]
    summary = evaluate_episodes(model, tokenizer, {"name": rows}, "alfworld", options, OUT, n=1, ...)

The loop is the engine's (`resrl.engines.steps.rollout_steps`, environments in `resrl.envs.pool.EnvPool`
workers, `resrl.engines.multiturn.HFStepPolicy`): built by the factory a task family registers under an
`env.name` (resrl.tasks.registry.EnvSpec.step_factory) or by a "module:function" factory, as
`factory(game, **options)`. An episode ends on `done`, at `max_steps`, on a step prompt longer than
`max_prompt_tokens`, or when its environment fails (score 0, the reason in the record's `end`).

`evaluate_episodes` is resumable: one record per episode in OUT/<name>_episodes.jsonl (data set, game id,
sample index, won, reward, steps, invalid actions and formats, truncated generations, task type, how it
ended, the actions, the model's texts, the environment's last info), its settings in
OUT/<name>_config.json (checked on resume: other settings are refused), per data set the metrics
(`step_metrics` and the scorer's breakdown) in OUT/<name>_summary.json and one table, OUT/<name>_results.md
(`results_table`). The games are played `batch_size` episodes at a time in a fixed order, chunk c seeded
with `seed + c * CHUNK_SEED_STRIDE`: a resumed evaluation replays exactly the chunks it lacks.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from resrl.errors import InputError

CHUNK_SEED_STRIDE = 1_000_003  # chunk c's policy seed: seed + c * this (a policy call reseeds with seed + call)
# settings an evaluation's records depend on: another value in the same OUT is refused, not mixed in
RESUME_KEYS = ("model", "env", "env_options", "max_steps", "max_step_tokens", "temperature", "top_p", "seed",
               "batch_size", "max_prompt_tokens", "use_chat_template", "evaluator")
EVALUATOR = "step episodes (resrl.eval.steps)"  # records of the families' earlier evaluators are not resumed


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


# -- the loop ----------------------------------------------------------------------------------------------

def play_episodes(model, tokenizer, games: Sequence[Any], env_factory: Callable[..., Any], env_options: dict | None = None,
                  *, max_steps: int, max_step_tokens: int = 32, seed: int = 0, temperature: float = 0.0,
                  samples: int = 1, top_p: float = 1.0, num_workers: int = 1, max_prompt_tokens: int | None = None,
                  policy=None, use_chat_template: bool | None = None) -> list[dict]:
    """`samples` episodes of each game (`env_factory(game, **env_options)`), all stepped together: one
    record per episode, game by game ({"game": its index, "sample_index", "won", "reward", "steps",
    "invalid_formats", "invalid_actions", "truncated_generations", "task_type", "end", "error",
    "actions", "texts", "info": the environment's last info}). Greedy at temperature 0, else sampled
    with `seed`. policy: a StepPolicy instead of sampling from `model` (then seed / temperature are its
    own)."""
    from resrl.engines.multiturn import ChatRenderer, HFStepPolicy
    from resrl.engines.steps import rollout_steps
    from resrl.envs.pool import EnvPool

    if not games:
        raise InputError("step evaluation: no games")
    if samples < 1:
        raise InputError(f"step evaluation: samples must be >= 1, got {samples}")
    if policy is None:
        policy = HFStepPolicy(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed)
    eos = getattr(policy, "eos_token_ids", None) or [tokenizer.eos_token_id]
    renderer = ChatRenderer(tokenizer) if use_chat_template is None else ChatRenderer(tokenizer, use_chat_template)
    prompts = [g for g in games for _ in range(samples)]
    groups = [i for i in range(len(games)) for _ in range(samples)]
    with EnvPool(env_factory, num_workers=num_workers, options=dict(env_options or {})) as pool:
        steps, episodes = rollout_steps(pool, prompts, groups, policy, renderer, eos_token_ids=eos,
                                        max_steps=max_steps, max_step_tokens=max_step_tokens,
                                        max_prompt_tokens=max_prompt_tokens)
    texts: list[list[str]] = [[] for _ in episodes]
    cut = [0] * len(episodes)
    for s in steps:
        texts[s.trajectory].append(s.text)
        cut[s.trajectory] += s.cut
    return [{"game": e.group, "sample_index": i % samples, "won": bool(e.won), "reward": float(e.reward),
             "steps": e.steps, "invalid_formats": e.invalid_formats, "invalid_actions": e.invalid_actions,
             "truncated_generations": cut[i], "task_type": e.task_type, "end": e.end, "error": e.error,
             "actions": e.actions, "texts": texts[i], "info": e.info} for i, e in enumerate(episodes)]


def step_metrics(records: Sequence[dict], samples: int | None = None, ks: Sequence[int] = ()) -> dict:
    """A game set's numbers from its records (episodes of each game in a row, `samples` per game:
    None, all of a game's): success (mean over games of each game's success rate), se (its standard
    error over games), pass (a game counts when any of its episodes won), pass_at {k: unbiased pass@k,
    k = 1, 2, 4, ... up to samples}, episodes, games, steps (mean per episode), invalid_format_rate and
    invalid_action_rate (per step), truncated_generation_rate (per step), per_game (each game's success
    rate), wins (each game's episodes, 1.0 won / 0.0 not), reward (the mean episode reward, e.g.
    WebShop's score), per_game_reward. `ks`: more k for pass_at (those up to samples)."""
    from resrl.metrics import ks_up_to, pass_at_k

    if not records:
        raise InputError("step evaluation: no episodes")
    by_game: dict[Any, list[dict]] = {}
    for r in records:
        by_game.setdefault(r["game"], []).append(r)
    wins = [[1.0 if r["won"] else 0.0 for r in rs] for rs in by_game.values()]
    rewards = [[float(r["reward"]) for r in rs] for rs in by_game.values()]
    samples = samples or min(len(w) for w in wins)
    means = [sum(w) / len(w) for w in wins]
    n = len(means)
    mean = sum(means) / n
    se = math.sqrt(sum((m - mean) ** 2 for m in means) / (n - 1) / n) if n > 1 else 0.0
    steps = max(1, sum(r["steps"] for r in records))
    correct = [int(sum(w)) for w in wins]
    return {"success": mean, "se": se, "pass": sum(1.0 for w in wins if max(w) > 0) / n, "episodes": len(records),
            "games": n, "steps": sum(r["steps"] for r in records) / max(1, len(records)),
            "invalid_format_rate": sum(r["invalid_formats"] for r in records) / steps, "per_game": means,
            "pass_at": {str(k): float(pass_at_k(samples, correct, k).mean())
                        for k in sorted({*ks_up_to(samples), *(k for k in ks if k <= samples)})},
            "invalid_action_rate": sum(r["invalid_actions"] for r in records) / steps,
            "truncated_generation_rate": sum(r.get("truncated_generations", 0) for r in records) / steps, "wins": wins,
            "reward": sum(sum(r) for r in rewards) / max(1, sum(len(r) for r in rewards)),
            "per_game_reward": [sum(r) / len(r) if r else 0.0 for r in rewards]}


def evaluate_steps(model, tokenizer, games: Sequence[Any], env_factory: Callable[..., Any], env_options: dict | None = None,
                   *, max_steps: int, max_step_tokens: int = 32, seed: int = 0, temperature: float = 0.0,
                   samples: int = 1, top_p: float = 1.0, num_workers: int = 1, max_prompt_tokens: int | None = None,
                   policy=None) -> dict:
    """Success of a step-layout policy on `games`: `step_metrics` of `play_episodes` (greedy: temperature
    0, one episode each; sampled: `samples` episodes per game, seeded)."""
    records = play_episodes(model, tokenizer, games, env_factory, env_options, max_steps=max_steps,
                            max_step_tokens=max_step_tokens, seed=seed, temperature=temperature, samples=samples,
                            top_p=top_p, num_workers=num_workers, max_prompt_tokens=max_prompt_tokens, policy=policy)
    return step_metrics(records, samples)


# -- resumable evaluation of data sets, one table ---------------------------------------------------------

@dataclass(frozen=True)
class StepScorer:
    """What a task family adds to the step-episode evaluator besides its environment.

    name       the files' prefix: OUT/<name>_episodes.jsonl, _config.json, _summary.json, _results.md
               ("": episodes.jsonl, config.json, summary.json, results.md)
    breakdown  records of one data set -> the family's own metrics (e.g. success per task type), added
               to `step_metrics`' in the summary
    columns    a data set's metrics -> the family's own cells of the table ({column: a fraction or
               None}, shown in %), before the common ones
    data_name  a data set's key -> its name in the table's Data column
    """

    name: str = ""
    breakdown: Callable[[list[dict]], dict] | None = None
    columns: Callable[[dict], dict] | None = None
    data_name: Callable[[str], str] | None = None

    def file(self, out: Path, what: str) -> Path:
        return out / (f"{self.name}_{what}" if self.name else what)


def _check_resume(path: Path, settings: dict) -> None:
    if not path.exists():
        return
    old = json.loads(path.read_text())
    diffs = [f"{k}: {old.get(k)!r} (saved) vs {settings.get(k)!r} (now)" for k in RESUME_KEYS if old.get(k) != settings.get(k)]
    if diffs:
        raise InputError(f"{path.parent} holds a step evaluation with different settings ({'; '.join(diffs)}); "
                         f"use another --out directory or delete it")


def evaluate_episodes(model, tokenizer, datasets: dict[str, list[dict]], env: str, env_options: dict, out_dir,
                      *, n: int = 1, max_steps: int, max_step_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
                      seed: int = 0, batch_size: int | None = None, num_workers: int = 1,
                      max_prompt_tokens: int | None = None, use_chat_template: bool | None = None,
                      scorer: StepScorer = StepScorer(), label: str | None = None, model_name: str | None = None,
                      policy=None, progress: bool = False, ks: Sequence[int] = ()) -> dict:
    """Play `n` episodes of every game of every data set ({name: rows {"prompt": the game, "answer": its
    id}}) in environment `env` (an env.name or "module:function", `env_options` its factory's options),
    resumably (the module docstring); returns the summary, also written to OUT with the table."""
    from resrl.eval.runner import read_records

    if n < 1 or max_steps < 1 or max_step_tokens < 1 or (batch_size is not None and batch_size < 1):
        raise InputError("step evaluation: n, max steps, max step tokens and batch size must be >= 1")
    factory, own = step_env(env, max_steps)
    options = {**own, **env_options}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_name = model_name or str(getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__)
    label = label or Path(model_name).name
    settings = {"model": model_name, "env": env, "env_options": options, "n": n, "max_steps": max_steps,
                "max_step_tokens": max_step_tokens, "temperature": temperature, "top_p": top_p, "seed": seed,
                "batch_size": batch_size, "max_prompt_tokens": max_prompt_tokens, "use_chat_template": use_chat_template,
                "label": label, "data": list(datasets), "evaluator": EVALUATOR}
    _check_resume(scorer.file(out, "config.json"), settings)
    scorer.file(out, "config.json").write_text(json.dumps(settings, indent=2) + "\n")
    done = read_records(scorer.file(out, "episodes.jsonl"))
    new, start = 0, time.perf_counter()
    bar = None
    with scorer.file(out, "episodes.jsonl").open("a", encoding="utf-8") as sink:
        for name, rows in datasets.items():
            if not rows:
                raise InputError(f"--data {name!r}: no games")
            jobs = [(row, k) for row in rows for k in range(n)]
            size = batch_size or len(jobs)
            for c in range(0, len(jobs), size):
                chunk = jobs[c:c + size]
                if all((name, str(row["answer"]), k) in done for row, k in chunk):
                    continue
                if progress and bar is None:
                    from tqdm.auto import tqdm

                    bar = tqdm(total=sum(len(r) for r in datasets.values()) * n, desc=scorer.name or "episodes",
                               unit="episode", dynamic_ncols=True)
                records = _play_chunk(model, tokenizer, chunk, factory, options, max_steps=max_steps,
                                      max_step_tokens=max_step_tokens, seed=seed + (c // size) * CHUNK_SEED_STRIDE,
                                      temperature=temperature, top_p=top_p, num_workers=num_workers,
                                      max_prompt_tokens=max_prompt_tokens, policy=policy,
                                      use_chat_template=use_chat_template)
                for rec in records:
                    rec = {"benchmark": name, **rec}
                    done[(name, rec["problem_id"], rec["sample_index"])] = rec
                    sink.write(json.dumps(rec, ensure_ascii=False) + "\n")
                sink.flush()
                new += len(records)
                if bar is not None:
                    bar.update(len(records))
    if bar is not None:
        bar.close()
    metrics = {}
    for name, rows in datasets.items():
        records = [done.get((name, str(row["answer"]), k)) for row in rows for k in range(n)]
        if any(r is None for r in records):
            raise RuntimeError(f"{name}: episodes missing after the evaluation")
        metrics[name] = {**step_metrics(records, n, ks), "game_ids": [str(row["answer"]) for row in rows],
                         **(scorer.breakdown(records) if scorer.breakdown else {})}
    summary = {"label": label, "layout": "step", "datasets": metrics, "settings": settings,
               "throughput": {"new_episodes": new, "wall_seconds": time.perf_counter() - start}}
    scorer.file(out, "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    scorer.file(out, "results.md").write_text(results_table({label: metrics}, scorer, n))
    return summary


def _play_chunk(model, tokenizer, chunk: list[tuple[dict, int]], factory, options: dict, **kw) -> list[dict]:
    """The records of one chunk of (row, sample index) jobs: its games played by `play_episodes`, one
    episode each, keyed by the row's id (problem_id, also the record's game) and the job's sample index."""
    records = play_episodes(model, tokenizer, [row["prompt"] for row, _ in chunk], factory, options, samples=1, **kw)
    return [{**rec, "game": str(row["answer"]), "problem_id": str(row["answer"]), "sample_index": k}
            for (row, k), rec in zip(chunk, records)]


def results_table(rows: dict[str, dict[str, dict]], scorer: StepScorer = StepScorer(), n: int | None = None) -> str:
    """The one step-evaluation table: {method label: {data set: metrics}} -> one line per (method, data
    set): the family's columns (`StepScorer.columns`), success (Avg@n) ± s.e., Pass@k, the mean episode
    reward (score), mean steps, invalid format and invalid action rates; rates in percent."""
    def pct(v) -> str:
        return "–" if v is None else f"{100 * v:.1f}"

    first = next(iter(next(iter(rows.values())).values()))
    own = list(scorer.columns(first)) if scorer.columns else []
    ks = sorted({int(k) for datasets in rows.values() for m in datasets.values() for k in m["pass_at"]})
    n = n or max(ks)
    header = ["Method", "Data", *own, f"Success (Avg@{n}) ± s.e.", *[f"Pass@{k}" for k in ks], "Score (mean reward)",
              "mean steps", "invalid format %", "invalid actions %"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for label, datasets in rows.items():
        for name, m in datasets.items():
            cells = [label, scorer.data_name(name) if scorer.data_name else name]
            cells += [pct(v) for v in (scorer.columns(m).values() if scorer.columns else ())]
            cells += [f"{pct(m['success'])} ± {pct(m['se'])}"]
            cells += [pct(m["pass_at"].get(str(k))) for k in ks]
            cells += [f"{m['reward']:.3f}", f"{m['steps']:.1f}", pct(m["invalid_format_rate"]),
                      pct(m["invalid_action_rate"])]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_from_runs(run_dirs: Sequence[str | Path], scorer: StepScorer = StepScorer(),
                    labels: Sequence[str] | None = None) -> str:
    """The table with one method per evaluation directory (its <name>_summary.json)."""
    rows, n = {}, None
    for i, d in enumerate(run_dirs):
        summary = json.loads(scorer.file(Path(d), "summary.json").read_text())
        rows[labels[i] if labels else summary["label"]] = summary["datasets"]
        n = summary["settings"]["n"]
    return results_table(rows, scorer, n)


# -- `resrl eval --env NAME --data GAMES` -------------------------------------------------------------

def step_arguments(parser) -> None:
    """`resrl eval`'s options of a step-layout evaluation (with --max-steps / --history-window, which
    the ALFWorld family's group adds when registered; added here otherwise)."""
    from resrl.tasks.envs import STEP_ENVS

    g = parser.add_argument_group("step-layout policies (--env, and the step families' data; docs/evaluation.md)")
    g.add_argument("--env", default=None, metavar="NAME_OR_MODULE:FUNCTION",
                   help="score a step-layout policy: every --data value is a game set of this environment "
                        f"(a registered env.name: {', '.join(sorted(STEP_ENVS)) or 'none'}; or a 'module:function' "
                        "factory, e.g. resrl.envs.toy:make_toy_env, the corridor), played --n episodes per game of at "
                        "most --max-steps steps, --history-window handed to the factory")
    g.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a further option of the environment factory (value parsed as JSON when it is JSON)")
    g.add_argument("--max-step-tokens", type=int, default=None,
                   help="tokens the policy generates per step (default: --max-new-tokens)")
    g.add_argument("--env-workers", type=int, default=1, help="environment worker processes (default 1)")
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


def run_step_eval(args, out: Path, specs: Sequence[str] | None = None, env: str | None = None,
                  options: dict | None = None, scorer: StepScorer = StepScorer(), batch_size: int | None = None,
                  max_steps: int | None = None, max_prompt_tokens: int | None = None, label: str | None = None,
                  data_key: Callable[[str], str] | None = None) -> dict:
    """`resrl eval` of step games: each --data game set (or `specs`) played --n episodes per game
    (default 1, greedy at --temperature 0) in --env (or `env`, a family's env.name with its `options`),
    resumably, by `evaluate_episodes`, at most --max-steps (or `max_steps`) steps; prints the table, a
    line per data set and the files written. A family's evaluator calls it with its environment and
    scorer; `data_key(spec)`: a data set's key (default: a file's stem, else the spec)."""
    from resrl.eval.runner import _load_model
    from resrl.tasks.envs import step_games

    n = args.n if args.n is not None else 1
    max_step_tokens = args.max_step_tokens if args.max_step_tokens is not None else args.max_new_tokens
    options = {"history_window": args.history_window, **(options or {}), **_env_options(args.env_option)}
    model, tokenizer = _load_model(args.model, None)
    datasets = {}
    for spec in specs if specs is not None else args.data:
        name = data_key(spec) if data_key else (Path(spec).stem if Path(spec).is_file() else spec)
        if name in datasets:
            raise InputError(f"data set {spec!r}: a data set named {name!r} is already in this evaluation")
        datasets[name] = step_games(spec, args.data_dir, args.limit)
    summary = evaluate_episodes(model, tokenizer, datasets, env or args.env, options, out, n=n,
                                max_steps=max_steps if max_steps is not None else args.max_steps,
                                max_step_tokens=max_step_tokens, temperature=args.temperature, top_p=args.top_p,
                                seed=args.seed, batch_size=batch_size, num_workers=args.env_workers,
                                max_prompt_tokens=max_prompt_tokens,
                                use_chat_template=False if args.no_chat_template else None, scorer=scorer, label=label,
                                model_name=str(args.model), progress=not args.no_progress, ks=args.k or ())
    print(scorer.file(out, "results.md").read_text(), end="")
    for data, m in summary["datasets"].items():
        print(f"{data}: {m['episodes']} episodes, success {100 * m['success']:.1f}%, mean reward {m['reward']:.3f}, "
              f"mean steps {m['steps']:.1f}, invalid actions {100 * m['invalid_action_rate']:.1f}% / invalid format "
              f"{100 * m['invalid_format_rate']:.1f}% of steps")
    print("wrote " + ", ".join(str(scorer.file(out, f)) for f in ("episodes.jsonl", "summary.json", "results.md")))
    return summary


__all__ = ["step_env", "play_episodes", "step_metrics", "evaluate_steps", "StepScorer", "evaluate_episodes",
           "results_table", "table_from_runs", "step_arguments", "run_step_eval", "CHUNK_SEED_STRIDE", "RESUME_KEYS"]
