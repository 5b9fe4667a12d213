"""LiveCodeBench-style and CodeForces-style numbers from a `resrl eval` run on code problems.

`resrl eval` already reports, per data set, Avg@n and the unbiased Pass@k — the two numbers
LiveCodeBench reports (its `pass_k_utils.py`: pass@1 = the mean over problems of c/n, which is
Avg@n; pass@k = 1 - C(n-c, k)/C(n, k) per problem, averaged; a problem counts as solved by a
sample when every test passed). This module adds what LiveCodeBench's leaderboard and CodeForces
evaluations show beside them, from the run's `samples.jsonl` and the problems' metadata:

- the same metrics per difficulty (LiveCodeBench's easy / medium / hard) and per platform;
- a CodeForces rating estimate (`resrl.tasks.code.rating.rating_from_problems`, eq. 2-3 there)
  from the problems that carry a difficulty rating (CodeForces / CodeContests rows): every sample
  is one attempt at its problem.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

from resrl.metrics import pass_at_k
from resrl.tasks.code.rating import rating_from_problems


def group_metrics(correct_by_problem: dict[str, Sequence[bool]], ks: Iterable[int]) -> dict:
    """{num_problems, n, avg (LiveCodeBench's pass@1), pass@k for the requested k <= n}."""
    rows = list(correct_by_problem.values())
    n = min(len(r) for r in rows)
    c = np.array([sum(bool(x) for x in r[:n]) for r in rows])
    out = {"num_problems": len(rows), "n": n, "avg": float(np.mean(c / n))}
    out["pass@k"] = {str(k): float(pass_at_k(np.full(len(rows), n), c, k).mean()) for k in sorted(set(ks)) if 1 <= k <= n}
    return out


def code_report(records: Iterable[dict], extras: dict[tuple[str, str], dict], ks: Sequence[int]) -> dict:
    """records: samples.jsonl records (benchmark, problem_id, sample_index, correct); extras: the
    problems' `extra` by (benchmark, problem id). Returns {benchmark: {"overall", "by_difficulty",
    "by_platform", "rating"?, "unmatched"}}."""
    by_bench: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(records, key=lambda r: (r["benchmark"], str(r["problem_id"]), int(r["sample_index"]))):
        by_bench[r["benchmark"]][str(r["problem_id"])].append(bool(r["correct"]))
    out = {}
    for bench, problems in by_bench.items():
        ns = {len(v) for v in problems.values()}
        if len(ns) != 1:
            raise ValueError(f"{bench}: problems have different sample counts {sorted(ns)} (an unfinished run?)")
        entry = {"overall": group_metrics(problems, ks), "by_difficulty": {}, "by_platform": {}}
        unmatched = [pid for pid in problems if (bench, pid) not in extras]
        entry["unmatched"] = len(unmatched)
        for key, field in (("by_difficulty", "difficulty"), ("by_platform", "platform")):
            groups: dict[str, dict] = defaultdict(dict)
            for pid, flags in problems.items():
                value = extras.get((bench, pid), {}).get(field)
                if value is not None:
                    groups[str(value)][pid] = flags
            entry[key] = {g: group_metrics(v, ks) for g, v in sorted(groups.items())}
        rated = [(extras[(bench, pid)]["rating"], flags) for pid, flags in problems.items()
                 if isinstance(extras.get((bench, pid), {}).get("rating"), (int, float))]
        if rated:
            est = rating_from_problems([d for d, _ in rated], [sum(f) for _, f in rated], [len(f) for _, f in rated])
            entry["rating"] = {"rating": est.rating, "stderr": est.stderr, "at_bound": est.at_bound,
                               "problems": est.problems, "attempts": est.attempts, "solved": est.solved}
        out[bench] = entry
    return out


def report_markdown(report: dict, ks: Sequence[int]) -> str:
    lines = []
    for bench, entry in report.items():
        n = entry["overall"]["n"]
        shown = [k for k in sorted(set(ks)) if k <= n]
        lines += [f"### {bench}", "", "| group | problems | pass@1 (Avg@" + str(n) + ") | "
                  + " | ".join(f"Pass@{k}" for k in shown) + " |", "|---|---:|---:|" + "---:|" * len(shown)]
        groups = [("all", entry["overall"])] + [(f"difficulty {g}", m) for g, m in entry["by_difficulty"].items()] + [
            (f"platform {g}", m) for g, m in entry["by_platform"].items()]
        for name, m in groups:
            cells = [name, str(m["num_problems"]), f"{100 * m['avg']:.1f}"]
            cells += [f"{100 * m['pass@k'][str(k)]:.1f}" if str(k) in m["pass@k"] else "–" for k in shown]
            lines.append("| " + " | ".join(cells) + " |")
        rating = entry.get("rating")
        if rating:
            if rating["at_bound"]:
                text = (f"at the {rating['at_bound']} bound of the search range ({rating['rating']:.0f}): every attempt "
                        f"{'failed' if rating['at_bound'] == 'low' else 'succeeded'}, no finite estimate")
            else:
                text = f"{rating['rating']:.0f} ± {rating['stderr']:.0f} (standard error)"
            lines += ["", f"CodeForces rating estimate (maximum likelihood from {rating['problems']} rated problems, "
                          f"{rating['solved']} of {rating['attempts']} attempts solved): {text}"]
        if entry["unmatched"]:
            lines += ["", f"{entry['unmatched']} problems of the run were not found in the given data (no difficulty, "
                          f"platform or rating for them)"]
        lines.append("")
    return "\n".join(lines)


__all__ = ["group_metrics", "code_report", "report_markdown"]
