"""BFCL evaluation: the per-category table, and the multi-turn categories run as conversations.

Single-turn categories go through the ordinary `resrl.eval.runner.evaluate` with the
`tool_call_exact` scorer (one problem per entry; with n = 1 and temperature 0 Avg@1 is BFCL's
accuracy: the share of entries answered correctly). Multi-turn categories need the model to talk
to the API environment (`resrl.tasks.tools.bfcl_env`), so they run here: one trajectory per entry (n
trajectories with --n), greedy or sampled, every model step a generation, limits as in
`resrl.engines.multiturn` (whose rollout driver `resrl eval` hands over as `EvalTools`; this family
does not import the engines). Accuracy = share of trajectories the BFCL checker accepts.

Summary rows, like the paper's table (unweighted means of the categories present):
    Non-live   simple, multiple, parallel, parallel_multiple
    Live       live_simple, live_multiple, live_parallel, live_parallel_multiple
    Multi-turn base, miss_func, miss_param, long_context
    Hallucination  irrelevance, live_irrelevance (and live_relevance when present)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

from resrl.tasks.tools.bfcl_data import LIVE, MULTI_TURN, NON_LIVE, canonical_category

GROUPS = {"Non-live": NON_LIVE, "Live": LIVE, "Multi-turn": MULTI_TURN,
          "Hallucination": ("irrelevance", "live_irrelevance", "live_relevance")}


def split_bfcl_specs(specs: Sequence[str]) -> tuple[list[str], list[str]]:
    """--data values -> (everything but BFCL multi-turn, BFCL multi-turn categories)."""
    rest, multi = [], []
    for spec in specs:
        if str(spec).startswith("bfcl:") and canonical_category(str(spec)[5:]) in MULTI_TURN:
            multi.append(canonical_category(str(spec)[5:]))
        else:
            rest.append(spec)
    return rest, multi


def evaluate_multi_turn(model, tokenizer, categories: Sequence[str], out_dir: str | Path | None = None, *,
                        n: int = 1, temperature: float = 0.0, top_p: float = 1.0, max_turns: int = 40,
                        max_total_tokens: int = 8192, max_step_tokens: int = 512, batch_size: int = 8,
                        limit: int | None = None, seed: int = 0, style: str = "hermes",
                        progress: bool = True, tools) -> dict[str, dict]:
    """Run BFCL multi-turn categories; {category: {"accuracy", "entries", "samples", truncation rates}}.

    Writes `multi_turn_samples.jsonl` (one record per trajectory: id, sample, reward, error_type,
    error, truncation, model texts) to out_dir when given. tools: the step policy, renderer and
    rollout driver (`resrl.tasks.registry.EvalTools`, e.g. `resrl.eval.episodes.EngineTools()`).
    """
    import copy

    from resrl.tasks.tools.bfcl_env import bfcl_multi_turn_envs

    policy = tools.step_policy(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed)
    renderer = tools.renderer(tokenizer)
    out = Path(out_dir) if out_dir is not None else None
    sink = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        sink = (out / "multi_turn_samples.jsonl").open("w", encoding="utf-8")
    results = {}
    try:
        for category in categories:
            envs = bfcl_multi_turn_envs(category, limit=limit, style=style)
            jobs = [(e, s) for e in envs for s in range(n)]
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(jobs), desc=f"bfcl {category}", unit="traj", dynamic_ncols=True)
            trajs, start = [], time.perf_counter()
            for i in range(0, len(jobs), batch_size):
                chunk = jobs[i:i + batch_size]
                run_envs = [copy.deepcopy(e) for e, _ in chunk]
                got = tools.rollout_multi_turn(run_envs, [None] * len(chunk), policy, renderer,
                                         eos_token_ids=policy.eos_token_ids, max_turns=max_turns,
                                         max_total_tokens=max_total_tokens, max_step_tokens=max_step_tokens)
                for (env, s), t in zip(chunk, got):
                    if sink is not None:
                        sink.write(json.dumps({"category": category, "id": env.entry["id"], "sample": s,
                                               "reward": t.reward, "error_type": t.info.get("error_type"),
                                               "error": t.info.get("error"), "truncation": t.truncation,
                                               "model_turns": t.num_model_turns, "texts": t.texts},
                                              ensure_ascii=False) + "\n")
                        sink.flush()
                trajs += got
                if bar is not None:
                    bar.update(len(chunk))
            if bar is not None:
                bar.close()
            stats = tools.rollout_stats(trajs)
            results[category] = {"accuracy": sum(t.reward == 1.0 for t in trajs) / max(1, len(trajs)),
                                 "entries": len(envs), "samples": len(trajs),
                                 "seconds": time.perf_counter() - start,
                                 **{k: v for k, v in stats.items() if k.startswith("truncated_") or k == "model_turns_mean"}}
    finally:
        if sink is not None:
            sink.close()
    return results


def bfcl_rows(single_turn_summary: dict | None, multi_turn: dict[str, dict] | None) -> dict[str, tuple[int, float]]:
    """{category: (entries, accuracy)} from an `evaluate` summary (bfcl_* benchmarks) and multi-turn results."""
    rows: dict[str, tuple[int, float]] = {}
    for name, m in ((single_turn_summary or {}).get("benchmarks") or {}).items():
        if name.startswith("bfcl_"):
            rows[name[5:]] = (int(m["num_problems"]), float(m[f"avg@{m['n']}"]))
    for category, m in (multi_turn or {}).items():
        rows[category] = (int(m["entries"]), float(m["accuracy"]))
    return rows


def bfcl_table(rows: dict[str, tuple[int, float]]) -> str:
    """Markdown: one line per category, then the group means (unweighted) of the groups present."""
    lines = ["| BFCL category | entries | accuracy (%) |", "|---|---:|---:|"]
    for category, (entries, acc) in rows.items():
        lines.append(f"| {category} | {entries} | {100 * acc:.2f} |")
    for group, members in GROUPS.items():
        present = [rows[c][1] for c in members if c in rows]
        if present:
            lines.append(f"| **{group}** (mean of {len(present)}) | | **{100 * sum(present) / len(present):.2f}** |")
    return "\n".join(lines) + "\n"


def eval_report(run) -> None:
    """`resrl eval` with bfcl: data (the family's Evaluator.run): play the multi-turn categories among
    run.specs (if any), write bfcl_multi_turn.json and bfcl_results.md (single-turn rows from
    run.summary), print the table."""
    args, config, out = run.args, run.config, run.out
    multi_turn = [canonical_category(str(spec)[5:]) for spec in run.specs]
    results = None
    if multi_turn:
        model, tokenizer = run.tools.load_model(args.model)
        results = evaluate_multi_turn(model, tokenizer, multi_turn, out, n=config.n, temperature=config.temperature,
                                      top_p=config.top_p, max_turns=args.max_turns,
                                      max_total_tokens=args.max_total_tokens, max_step_tokens=config.max_new_tokens,
                                      batch_size=config.batch_size, limit=config.limit, seed=config.seed,
                                      progress=config.progress, tools=run.tools)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bfcl_multi_turn.json").write_text(json.dumps(results, indent=2) + "\n")
    table = bfcl_table(bfcl_rows(run.summary, results))
    out.mkdir(parents=True, exist_ok=True)
    (out / "bfcl_results.md").write_text(table)
    print(table, end="")
    print(f"wrote {out / 'bfcl_results.md'}")


__all__ = ["split_bfcl_specs", "evaluate_multi_turn", "bfcl_rows", "bfcl_table", "eval_report", "GROUPS"]
