"""WebShop-format evaluation: the one step-episode evaluator (`resrl.eval.steps`, reached through
`resrl eval`'s tools) on WebShop goals, with this family's environment (`env.name: webshop`,
`WebShopEnv`: its prompt style, max steps, history window, purchase reward) and its scorer: WebShop's
score and success as the paper reports them, per category too.

    resrl eval --model DIR --data webshop-small:test [webshop:DIR:test] [--n 1] [--temperature 0]
               [--webshop-max-steps 15] [--history-window 2] [--webshop-prompt-style verl-agent|compact]

Each goal is played `n` times in the step layout, as training plays it: at every step the model gets
the environment's fresh prompt (`WebShopEnv.step_prompt`, chat template applied) and generates at most
--max-step-tokens (default --max-new-tokens); --batch-size episodes advance together, the
environments in EnvPool worker processes (--env-workers).

Output directory:
    webshop_config.json     settings (checked on resume)
    webshop_episodes.jsonl  one record per episode (the evaluator's; `info` holds the purchase's score
                            and the product bought)
    webshop_summary.json    per data set: score and success (fractions), per category too, Pass@k,
                            mean steps, invalid-action and invalid-format rates
    webshop_results.md      the step evaluator's table, WebShop's score first (in %)

Resume: finished episodes are kept (a torn last line dropped), changed settings refused.

`play(rows, policy, spec)` plays a reference policy (resrl.tasks.webshop.policies) on goal rows in
this process and `summary(records)` gives its score and success (`resrl webshop-ref`).
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from resrl.tasks.webshop.data import dataset_label


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


def score_by_category(records) -> dict:
    """The scorer's breakdown: WebShop's score (the purchase's, from each episode's last info; 0 without
    a purchase) overall and, with success, per category (fractions)."""
    def score(r) -> float:
        return float((r.get("info") or {}).get("score", 0.0))

    per = {}
    for kind in sorted({r["task_type"] or "webshop" for r in records}):
        mine = [r for r in records if (r["task_type"] or "webshop") == kind]
        per[kind] = {"episodes": len(mine), "score": sum(map(score, mine)) / len(mine),
                     "success": sum(r["won"] for r in mine) / len(mine)}
    return {"score": sum(map(score, records)) / len(records), "per_category": per}


def score_column(metrics: dict) -> dict:
    """The scorer's column of the table: WebShop's score (the paper's Score, shown × 100)."""
    return {"Score": metrics["score"]}


# the family's scorer for the step-episode evaluator (resrl.eval.steps.StepScorer's fields)
SCORER = dict(name="webshop", breakdown=score_by_category, columns=score_column)


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
        a.add_argument("--max-prompt-tokens", type=int, default=None, help="a longer step prompt ends its episode")


def eval_report(run) -> None:
    """`resrl eval` with WebShop data (the family's Evaluator.run): play run.specs with the step-episode
    evaluator and print the table."""
    args = run.args
    options = {"prompt_style": args.webshop_prompt_style, "reward": args.webshop_reward,
               "type_words": args.webshop_type_words}
    run.tools.run_step_eval(args, run.out, run.specs, "webshop", options, batch_size=args.batch_size,
                            max_steps=args.webshop_max_steps, max_prompt_tokens=args.max_prompt_tokens,
                            label=args.webshop_label, data_key=dataset_label, **SCORER)


def __getattr__(name: str):
    """A name that left this module (evaluate_webshop, play_episodes, dataset_metrics, results_table): an
    ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)


__all__ = ["play", "summary", "score_by_category", "score_column", "SCORER", "eval_arguments", "eval_report"]
