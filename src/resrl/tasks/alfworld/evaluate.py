"""ALFWorld-format evaluation: episodes of a model on games, success per task type, the paper's table.

    resrl eval --model DIR --data alfworld:valid_seen alfworld:valid_unseen [--n 1] [--temperature 0]
               [--prompt-style verl-agent|react] [--max-steps 50] [--history-window 2] [--label NAME]

Each game is played `n` times (episodes), in the step-level layout: at every step the model gets
the environment's fresh prompt (`AlfWorldEnv.step_prompt`, chat template applied), generates at
most --max-new-tokens, and its text goes to `AlfWorldEnv.step` (a generation cut by the budget is
passed on as it is: the parser then usually finds no action, as in verl-agent). Episodes of a
batch advance together, one generate call per step. Environments step in this process.

Output directory (next to a math / BFCL evaluation's files when --data mixes them):
    alfworld_config.json     settings (checked on resume)
    alfworld_episodes.jsonl  one transcript per episode, appended and flushed per batch: benchmark,
                             problem_id (game), sample_index, task_type, won, reward, steps,
                             invalid_actions, invalid_formats, actions, observations, texts
    alfworld_summary.json    per data set: success overall and per task type, mean steps,
                             invalid-action and invalid-format rates (per step)
    alfworld_results.md      the paper's layout: one row per method, success (%) per task type + All

Resume: as `resrl eval` (resrl.eval.runner.read_records): finished episodes are kept, a torn last
line is dropped, only the missing episodes run; changed settings are refused.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

from resrl.errors import InputError
from resrl.tasks.alfworld.data import SHORT_TYPES, dataset_label, load_alfworld_tasks

COLUMNS = {"pick": "Pick", "look": "Look", "clean": "Clean", "heat": "Heat", "cool": "Cool", "pick2": "Pick2"}
RESUME_KEYS = ("model", "temperature", "top_p", "max_new_tokens", "spec", "use_chat_template", "max_prompt_tokens")
SPLIT_NAMES = {"valid_seen": "seen", "valid_unseen": "unseen", "train": "train"}


def play_episodes(jobs: Sequence[tuple[dict, int]], policy, renderer, spec, *, eos_token_ids: Sequence[int],
                  max_new_tokens: int, max_prompt_tokens: int | None = None,
                  decode: Callable[[list[int]], str] | None = None) -> list[dict]:
    """Play one episode per (task row, sample index) job, all together; a record per episode.

    policy: resrl.engines.multiturn.StepPolicy (contexts, budgets -> [(ids, logprobs)]);
    renderer: resrl.engines.multiturn.ChatRenderer; spec: AlfWorldSpec.
    """
    from resrl.tasks.alfworld.env import AlfWorldEnv

    decode = decode or (lambda ids: renderer.tokenizer.decode(ids, skip_special_tokens=True))
    eos = {int(e) for e in eos_token_ids}
    envs, records = [], []
    for row, sample in jobs:
        env = AlfWorldEnv(spec)
        env.reset(row)
        envs.append(env)
        records.append({"problem_id": row["id"], "sample_index": sample, "task_type": row["task_type"],
                        "game_file": row["game_file"], "won": False, "reward": 0.0, "steps": 0,
                        "invalid_actions": 0, "invalid_formats": 0, "truncated_generations": 0, "task": env.task_text,
                        "observations": [env.observation], "actions": [], "texts": []})
    active = list(range(len(envs)))
    while active:
        contexts = []
        for i in active:
            ids = renderer.prompt_ids(envs[i].step_prompt())
            if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
                ids = ids[-max_prompt_tokens:]  # keep the end: current observation, actions, instruction
            contexts.append(ids)
        outs = policy(contexts, [max_new_tokens] * len(active))
        still = []
        for i, (ids, _) in zip(active, outs):
            ids = list(ids)[:max_new_tokens]
            rec = records[i]
            rec["truncated_generations"] += not (ids and ids[-1] in eos)
            text = decode(ids)
            result = envs[i].step(text)
            rec["texts"].append(text)
            rec["actions"].append(result.info["action"])
            rec["observations"].append(envs[i].observation)
            if result.done:
                rec.update(won=bool(result.info["won"]), reward=float(result.reward), steps=result.info["steps"],
                           invalid_actions=result.info["invalid_actions"],
                           invalid_formats=result.info["invalid_formats"])
            else:
                still.append(i)
        active = still
    for env in envs:
        env.close()
    return records


def dataset_metrics(records: Sequence[dict]) -> dict:
    """Success overall / per task type, mean steps, per-step invalid rates (over episodes)."""
    n = len(records)
    if n == 0:
        raise ValueError("dataset_metrics: no episodes")
    steps = sum(r["steps"] for r in records)
    per_type = {}
    for kind in SHORT_TYPES:
        mine = [r for r in records if r["task_type"] == kind]
        per_type[kind] = {"episodes": len(mine), "success": sum(r["won"] for r in mine) / len(mine) if mine else None}
    return {"episodes": n, "games": len({r["problem_id"] for r in records}), "success": sum(r["won"] for r in records) / n,
            "per_task_type": per_type, "mean_steps": steps / n,
            "invalid_action_rate": sum(r["invalid_actions"] for r in records) / max(1, steps),
            "invalid_format_rate": sum(r["invalid_formats"] for r in records) / max(1, steps),
            "truncated_generation_rate": sum(r.get("truncated_generations", 0) for r in records) / max(1, steps)}


def _cell(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def results_table(rows: dict[str, dict[str, dict]]) -> str:
    """Markdown in the paper's layout: {method label: {dataset name: metrics}} -> one line per
    (method, data set), success (%) per task type and All."""
    lines = ["| Method | Split | " + " | ".join(COLUMNS.values()) + " | All | mean steps | invalid actions (%) |",
             "|---|---|" + "---:|" * (len(COLUMNS) + 3)]
    for label, datasets in rows.items():
        for name, m in datasets.items():
            source, _, split = name.partition("_")
            where = SPLIT_NAMES.get(split, split) + (" (alfworld-synth)" if source == "alfworld-synth" else "")
            cells = [_cell(m["per_task_type"][k]["success"]) for k in COLUMNS]
            lines.append(f"| {label} | {where} | " + " | ".join(cells) +
                         f" | **{_cell(m['success'])}** | {m['mean_steps']:.1f} | {100 * m['invalid_action_rate']:.1f} |")
    return "\n".join(lines) + "\n"


def _check_resume(path: Path, settings: dict) -> None:
    if not path.exists():
        return
    old = json.loads(path.read_text())
    diffs = [f"{k}: {old.get(k)!r} (saved) vs {settings.get(k)!r} (now)" for k in RESUME_KEYS if old.get(k) != settings.get(k)]
    if diffs:
        raise InputError(f"{path.parent} holds an ALFWorld evaluation with different settings ({'; '.join(diffs)}); "
                         f"use another --out directory or delete it")


def evaluate_alfworld(model, tokenizer, specs: Sequence[str], out_dir: str | Path, *, spec=None, n: int = 1,
                      temperature: float = 0.0, top_p: float = 1.0, max_new_tokens: int = 512, batch_size: int = 8,
                      limit: int | None = None, seed: int = 0, label: str | None = None,
                      use_chat_template: bool | None = None, max_prompt_tokens: int | None = None,
                      model_name: str | None = None, policy=None, progress: bool = True, tools) -> dict:
    """Evaluate on ALFWorld data sets (module docstring); returns the summary (also written to out_dir).

    spec: AlfWorldSpec (max_steps, history_window, prompt_style, ...); policy: a StepPolicy to use
    instead of sampling from `model` (tests, custom engines); tools: the step policy, renderer and
    resume reader (`resrl.tasks.registry.EvalTools`, e.g. `resrl.eval.episodes.EngineTools()`).
    """
    from resrl.tasks.alfworld.engine import require_engine
    from resrl.tasks.alfworld.env import AlfWorldSpec

    require_engine()
    spec = spec or AlfWorldSpec()
    if n < 1 or batch_size < 1 or max_new_tokens < 1:
        raise InputError("ALFWorld evaluation: n, batch_size and max_new_tokens must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_name = model_name or str(getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__)
    label = label or (f"{Path(model_name).name} (ReAct prompt)" if spec.prompt_style == "react" else Path(model_name).name)
    settings = {"model": model_name, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens,
                "spec": asdict(spec), "use_chat_template": use_chat_template, "max_prompt_tokens": max_prompt_tokens,
                "n": n, "seed": seed, "label": label, "data": list(specs), "limit": limit}
    _check_resume(out / "alfworld_config.json", settings)
    (out / "alfworld_config.json").write_text(json.dumps(settings, indent=2) + "\n")
    done = tools.read_records(out / "alfworld_episodes.jsonl")
    datasets = {}
    for s in specs:
        if dataset_label(s) in datasets:
            raise InputError(f"data set {s!r}: a data set named {dataset_label(s)!r} is already in this evaluation")
        datasets[dataset_label(s)] = load_alfworld_tasks(s, limit=limit)
    jobs = [(name, row, s) for name, rows in datasets.items() for row in rows for s in range(n)
            if (name, row["id"], s) not in done]
    if jobs and policy is None:
        policy = tools.step_policy(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed)
    renderer = tools.renderer(tokenizer, use_chat_template)
    eos = getattr(policy, "eos_token_ids", None) or [tokenizer.eos_token_id]
    bar = None
    if progress and jobs:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="alfworld", unit="episode", dynamic_ncols=True)
    start = time.perf_counter()
    with (out / "alfworld_episodes.jsonl").open("a", encoding="utf-8") as sink:
        for i in range(0, len(jobs), batch_size):
            chunk = jobs[i:i + batch_size]
            recs = play_episodes([(row, s) for _, row, s in chunk], policy, renderer, spec, eos_token_ids=eos,
                                 max_new_tokens=max_new_tokens, max_prompt_tokens=max_prompt_tokens)
            for (name, _, _), rec in zip(chunk, recs):
                rec = {"benchmark": name, **rec}
                done[(name, rec["problem_id"], rec["sample_index"])] = rec
                sink.write(json.dumps(rec, ensure_ascii=False) + "\n")
            sink.flush()
            if bar is not None:
                bar.update(len(chunk))
    if bar is not None:
        bar.close()
    metrics = {}
    for name, rows in datasets.items():
        recs = [done.get((name, row["id"], s)) for row in rows for s in range(n)]
        if any(r is None for r in recs):
            raise RuntimeError(f"{name}: episodes missing after the evaluation")
        metrics[name] = dataset_metrics(recs)
    summary = {"label": label, "datasets": metrics, "settings": settings,
               "throughput": {"new_episodes": len(jobs), "wall_seconds": time.perf_counter() - start}}
    (out / "alfworld_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "alfworld_results.md").write_text(results_table({label: metrics}))
    return summary


def table_from_runs(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> str:
    """The paper's table with one method per evaluation directory (its alfworld_summary.json)."""
    rows = {}
    for i, d in enumerate(run_dirs):
        summary = json.loads((Path(d) / "alfworld_summary.json").read_text())
        rows[labels[i] if labels else summary["label"]] = summary["datasets"]
    return results_table(rows)


def eval_arguments(parser) -> None:
    """The ALFWorld options of `resrl eval` (the family's Evaluator.arguments)."""
    a = parser.add_argument_group("ALFWorld (alfworld:* / alfworld-synth:* data; docs/tasks/agents.md)")
    a.add_argument("--prompt-style", choices=["verl-agent", "react"], default="verl-agent",
                   help="verl-agent: fresh prompt per step with a history window (trained models); react: the "
                        "untrained think-then-act prompting baseline")
    a.add_argument("--max-steps", type=int, default=50, help="steps per episode (default 50)")
    a.add_argument("--history-window", type=int, default=2, help="observation/action pairs in each prompt (default 2)")
    a.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="cut longer step prompts from the left (default: no limit)")
    a.add_argument("--label", default=None, help="row name in alfworld_results.md (default: the model directory)")


def eval_report(run) -> None:
    """`resrl eval` with ALFWorld data (the family's Evaluator.run): play run.specs and print the
    paper-layout table."""
    from resrl.tasks.alfworld.env import AlfWorldSpec

    args, out = run.args, run.out
    spec = AlfWorldSpec(max_steps=args.max_steps, history_window=args.history_window, prompt_style=args.prompt_style)
    model, tokenizer = run.tools.load_model(args.model)
    summary = evaluate_alfworld(model, tokenizer, run.specs, out, spec=spec, n=args.n if args.n is not None else 1,
                                temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                                batch_size=args.batch_size, limit=args.limit, seed=args.seed, label=args.label,
                                use_chat_template=False if args.no_chat_template else None,
                                max_prompt_tokens=args.max_prompt_tokens, model_name=str(args.model),
                                progress=not args.no_progress, tools=run.tools)
    print((out / "alfworld_results.md").read_text(), end="")
    for name, m in summary["datasets"].items():
        print(f"{name}: {m['episodes']} episodes, success {100 * m['success']:.1f}%, mean steps {m['mean_steps']:.1f}, "
              f"invalid actions {100 * m['invalid_action_rate']:.1f}% / invalid format {100 * m['invalid_format_rate']:.1f}% of steps")
    print(f"wrote {out / 'alfworld_episodes.jsonl'}, {out / 'alfworld_summary.json'}, {out / 'alfworld_results.md'}")


__all__ = ["evaluate_alfworld", "play_episodes", "dataset_metrics", "results_table", "table_from_runs",
           "eval_arguments", "eval_report", "COLUMNS"]
