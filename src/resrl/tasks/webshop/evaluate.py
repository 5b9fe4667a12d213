"""WebShop-format evaluation: a model shops for each goal, score and success rate as the paper reports them.

    resrl eval --model DIR --data webshop-small:test [webshop:DIR:test] [--n 1] [--temperature 0]
               [--webshop-max-steps 15] [--history-window 2] [--webshop-prompt-style verl-agent|compact]

Each goal is played `n` times in the step layout: at every step the model gets the environment's
fresh prompt (`WebShopEnv.step_prompt`, chat template applied), generates at most
--max-new-tokens, and its text goes to `WebShopEnv.step`. Episodes of a batch advance together.

Output directory:
    webshop_config.json     settings (checked on resume)
    webshop_episodes.jsonl  one transcript per episode (benchmark, problem_id, sample_index, score, won,
                            steps, bought, actions, texts), appended per batch
    webshop_summary.json    per data set: score (mean × 100), success (%), per category, mean steps,
                            invalid-action and invalid-format rates
    webshop_results.md      the paper's columns: Score and Succ. per method and data set

Resume: finished episodes are kept (a torn last line dropped), changed settings refused.

`play(rows, policy, spec)` plays a reference policy (resrl.tasks.webshop.policies) on goal rows in
this process and `summary(records)` gives its score and success (`resrl webshop-ref`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable, Sequence

from resrl.errors import InputError
from resrl.tasks.webshop.data import dataset_label, load_goal_rows

RESUME_KEYS = ("model", "temperature", "top_p", "max_new_tokens", "spec", "use_chat_template", "max_prompt_tokens")


def play_episodes(jobs: Sequence[tuple[dict, int]], policy, renderer, spec, *, eos_token_ids: Sequence[int],
                  max_new_tokens: int, max_prompt_tokens: int | None = None,
                  decode: Callable[[list[int]], str] | None = None) -> list[dict]:
    """One episode per (goal row, sample index), all together; a record per episode. policy: a
    StepPolicy (contexts, budgets -> [(ids, logprobs)]); renderer: a ChatRenderer; spec: WebShopSpec."""
    decode = decode or (lambda ids: renderer.tokenizer.decode(ids, skip_special_tokens=True))
    eos = {int(e) for e in eos_token_ids}
    envs, records = [], []
    for row, sample in jobs:
        env = spec.build()
        env.reset(row)
        envs.append(env)
        records.append({"problem_id": row["id"], "sample_index": sample, "task_type": env.task_type,
                        "instruction": env.goal.instruction, "score": 0.0, "won": False, "steps": 0, "bought": None,
                        "invalid_actions": 0, "invalid_formats": 0, "truncated_generations": 0, "actions": [],
                        "texts": []})
    active = list(range(len(envs)))
    while active:
        contexts = []
        for i in active:
            ids = renderer.prompt_ids(envs[i].step_prompt())
            if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
                ids = ids[-max_prompt_tokens:]
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
            if result.done:
                info = result.info
                rec.update(score=float(info["score"]), won=bool(info["won"]), steps=info["steps"], bought=info["bought"],
                           invalid_actions=info["invalid_actions"], invalid_formats=info["invalid_formats"])
            else:
                still.append(i)
        active = still
    return records


def play(rows: Iterable[dict], policy: Callable, spec=None) -> list[dict]:
    """One episode of `policy` per goal row; a record per episode (score, won, steps, actions)."""
    from resrl.tasks.webshop.env import WebShopSpec

    spec = spec or WebShopSpec()
    records = []
    for row in rows:
        env = spec.build()
        env.reset(row)
        actions = []
        while True:
            result = env.step(policy(env))
            actions.append(result.info["action"])
            if result.done:
                break
        info = result.info
        records.append({"problem_id": row["id"], "score": float(info["score"]), "won": bool(info["won"]),
                        "steps": info["steps"], "invalid_actions": info["invalid_actions"], "actions": actions,
                        "task_type": info["task_type"]})
    return records


def summary(records: Sequence[dict]) -> dict:
    """Score (mean × 100) and success rate (× 100), as the paper's WebShop columns."""
    n = len(records)
    if not n:
        raise ValueError("summary: no episodes")
    return {"episodes": n, "score": 100 * sum(r["score"] for r in records) / n,
            "success": 100 * sum(r["won"] for r in records) / n,
            "mean_steps": sum(r["steps"] for r in records) / n}


def dataset_metrics(records: Sequence[dict]) -> dict:
    """Score (mean × 100) and success (%), per category too, mean steps, per-step invalid rates."""
    n = len(records)
    if n == 0:
        raise ValueError("dataset_metrics: no episodes")
    steps = sum(r["steps"] for r in records)
    per = {}
    for kind in sorted({r["task_type"] for r in records}):
        mine = [r for r in records if r["task_type"] == kind]
        per[kind] = {"episodes": len(mine), "score": 100 * sum(r["score"] for r in mine) / len(mine),
                     "success": 100 * sum(r["won"] for r in mine) / len(mine)}
    return {"episodes": n, "goals": len({r["problem_id"] for r in records}),
            "score": 100 * sum(r["score"] for r in records) / n, "success": 100 * sum(r["won"] for r in records) / n,
            "per_category": per, "mean_steps": steps / n,
            "invalid_action_rate": sum(r["invalid_actions"] for r in records) / max(1, steps),
            "invalid_format_rate": sum(r["invalid_formats"] for r in records) / max(1, steps),
            "truncated_generation_rate": sum(r.get("truncated_generations", 0) for r in records) / max(1, steps)}


def results_table(rows: dict[str, dict[str, dict]]) -> str:
    """Markdown in the paper's layout: {method: {data set: metrics}} -> Score and Succ. per line."""
    lines = ["| Method | Data | Score | Succ. (%) | mean steps | invalid actions (%) |", "|---|---|---:|---:|---:|---:|"]
    for label, datasets in rows.items():
        for name, m in datasets.items():
            lines.append(f"| {label} | {name} | **{m['score']:.1f}** | **{m['success']:.1f}** | {m['mean_steps']:.1f} | "
                         f"{100 * m['invalid_action_rate']:.1f} |")
    return "\n".join(lines) + "\n"


def _check_resume(path: Path, settings: dict) -> None:
    if not path.exists():
        return
    old = json.loads(path.read_text())
    diffs = [f"{k}: {old.get(k)!r} (saved) vs {settings.get(k)!r} (now)" for k in RESUME_KEYS if old.get(k) != settings.get(k)]
    if diffs:
        raise InputError(f"{path.parent} holds a WebShop evaluation with different settings ({'; '.join(diffs)}); "
                         f"use another --out directory or delete it")


def evaluate_webshop(model, tokenizer, specs: Sequence[str], out_dir: str | Path, *, spec=None, n: int = 1,
                     temperature: float = 0.0, top_p: float = 1.0, max_new_tokens: int = 256, batch_size: int = 8,
                     limit: int | None = None, seed: int = 0, label: str | None = None,
                     use_chat_template: bool | None = None, max_prompt_tokens: int | None = None,
                     model_name: str | None = None, policy=None, progress: bool = True, tools) -> dict:
    """Evaluate on WebShop-format data sets (module docstring); returns the summary (also written).
    tools: resrl.tasks.registry.EvalTools; policy: a StepPolicy instead of sampling from `model`."""
    from resrl.tasks.webshop.env import WebShopSpec

    spec = spec or WebShopSpec()
    if n < 1 or batch_size < 1 or max_new_tokens < 1:
        raise InputError("WebShop evaluation: n, batch_size and max_new_tokens must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_name = model_name or str(getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__)
    label = label or Path(model_name).name
    settings = {"model": model_name, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens,
                "spec": asdict(spec), "use_chat_template": use_chat_template, "max_prompt_tokens": max_prompt_tokens,
                "n": n, "seed": seed, "label": label, "data": list(specs), "limit": limit}
    _check_resume(out / "webshop_config.json", settings)
    (out / "webshop_config.json").write_text(json.dumps(settings, indent=2) + "\n")
    done = tools.read_records(out / "webshop_episodes.jsonl")
    datasets = {}
    for s in specs:
        if dataset_label(s) in datasets:
            raise InputError(f"data set {s!r}: a data set named {dataset_label(s)!r} is already in this evaluation")
        datasets[dataset_label(s)] = load_goal_rows(s, limit=limit)
    jobs = [(name, row, k) for name, rows in datasets.items() for row in rows for k in range(n)
            if (name, row["id"], k) not in done]
    if jobs and policy is None:
        policy = tools.step_policy(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed)
    renderer = tools.renderer(tokenizer, use_chat_template)
    eos = getattr(policy, "eos_token_ids", None) or [tokenizer.eos_token_id]
    bar = None
    if progress and jobs:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="webshop", unit="episode", dynamic_ncols=True)
    start = time.perf_counter()
    with (out / "webshop_episodes.jsonl").open("a", encoding="utf-8") as sink:
        for i in range(0, len(jobs), batch_size):
            chunk = jobs[i:i + batch_size]
            recs = play_episodes([(row, k) for _, row, k in chunk], policy, renderer, spec, eos_token_ids=eos,
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
        recs = [done.get((name, row["id"], k)) for row in rows for k in range(n)]
        if any(r is None for r in recs):
            raise RuntimeError(f"{name}: episodes missing after the evaluation")
        metrics[name] = dataset_metrics(recs)
    summary = {"label": label, "datasets": metrics, "settings": settings,
               "throughput": {"new_episodes": len(jobs), "wall_seconds": time.perf_counter() - start}}
    (out / "webshop_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "webshop_results.md").write_text(results_table({label: metrics}))
    return summary


def eval_arguments(parser) -> None:
    """The WebShop options of `resrl eval` (the family's Evaluator.arguments)."""
    a = parser.add_argument_group("WebShop (webshop:* / webshop-small:* data; docs/tasks/webshop.md)")
    a.add_argument("--webshop-max-steps", type=int, default=15, help="steps per episode (default 15, the paper's)")
    a.add_argument("--webshop-prompt-style", choices=["verl-agent", "compact"], default="verl-agent",
                   help="verl-agent: task, history window, observation, admissible actions, <think> then <action>; "
                        "compact: instruction and page only (the demo's tiny models)")
    a.add_argument("--webshop-reward", choices=["score", "success"], default="score",
                   help="the step reward of a purchase (reports give score and success either way)")
    a.add_argument("--webshop-type-words", default=None, metavar="MODULE:FUNCTION",
                   help="the type reward's words of a title (e.g. a spaCy noun tagger, as WebShop's); default: the "
                        "built-in stand-in (docs/tasks/webshop.md)")
    a.add_argument("--webshop-label", default=None, help="row name in webshop_results.md (default: the model directory)")
    have = {s for action in parser._actions for s in action.option_strings}
    if "--history-window" not in have:
        a.add_argument("--history-window", type=int, default=2, help="observation/action pairs in each prompt (default 2)")
    if "--max-prompt-tokens" not in have:
        a.add_argument("--max-prompt-tokens", type=int, default=None, help="cut longer step prompts from the left")


def eval_report(run) -> None:
    """`resrl eval` with WebShop data (the family's Evaluator.run): play run.specs, print the table."""
    from resrl.tasks.webshop.env import WebShopSpec

    args, out = run.args, run.out
    spec = WebShopSpec(max_steps=args.webshop_max_steps, history_window=args.history_window,
                       prompt_style=args.webshop_prompt_style, reward=args.webshop_reward,
                       type_words=args.webshop_type_words)
    model, tokenizer = run.tools.load_model(args.model)
    summary = evaluate_webshop(model, tokenizer, run.specs, out, spec=spec, n=args.n if args.n is not None else 1,
                               temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                               batch_size=args.batch_size, limit=args.limit, seed=args.seed, label=args.webshop_label,
                               use_chat_template=False if args.no_chat_template else None,
                               max_prompt_tokens=args.max_prompt_tokens, model_name=str(args.model),
                               progress=not args.no_progress, tools=run.tools)
    print((out / "webshop_results.md").read_text(), end="")
    for name, m in summary["datasets"].items():
        print(f"{name}: {m['episodes']} episodes, score {m['score']:.1f}, success {m['success']:.1f}%, mean steps "
              f"{m['mean_steps']:.1f}, invalid actions {100 * m['invalid_action_rate']:.1f}% of steps")
    print(f"wrote {out / 'webshop_episodes.jsonl'}, {out / 'webshop_summary.json'}, {out / 'webshop_results.md'}")


__all__ = ["evaluate_webshop", "play", "summary", "play_episodes", "dataset_metrics", "results_table", "eval_arguments", "eval_report"]
