"""alfworld-synth generation speed, AlfWorldEnv step costs against the bare engine, and how often
a random policy wins (the expert wins every game).

    python benchmarks/bench_alfworld.py [--games 12] [--workers 2] [--seed 0] [--random-episodes 2]

1. Generation: the same `--games` train games (seed fixed) with 1 worker, then with `--workers`
   (the files must come out byte-identical): games/s and the ratio.
2. Steps: on each generated game, the engine's own PddlEnv.step of an admissible command (the
   baseline) against AlfWorldEnv.step with the same command wrapped in <think>/<action>, and an
   inadmissible command (answered without calling the engine); load + first reset, and a reset of
   the same game (the engine keeps the parsed game).
3. Policies: uniformly random admissible actions, 50 steps, `--random-episodes` seeds per game,
   against the planner's walkthrough; success per task type.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from resrl.tasks.alfworld.data import load_alfworld_tasks  # noqa: E402
from resrl.tasks.alfworld import AlfWorldSpec  # noqa: E402
from resrl.tasks.alfworld.engine import make_pddl_env  # noqa: E402
from resrl.tasks.alfworld.generator import generate  # noqa: E402


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-episodes", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-alfworld-"))
    rows = []
    gen = {}
    for workers in (1, args.workers):
        out = tmp / f"w{workers}"
        m = generate(out, {"train": args.games}, seed=args.seed, workers=workers, progress=None)
        gen[workers] = (m["games_per_s"], tree_hash(out / "json_2.1.1"), m["attempts"])
    same = gen[1][1] == gen[args.workers][1]
    rows.append(("generate, 1 worker (games/s)", f"{gen[1][0]:.3f}", "1.00", f"{gen[1][2]} attempts"))
    rows.append((f"generate, {args.workers} workers (games/s)", f"{gen[args.workers][0]:.3f}",
                 f"{gen[args.workers][0] / gen[1][0]:.2f}", f"byte-identical: {same}"))

    tasks = load_alfworld_tasks(f"alfworld-synth:{tmp / 'w1'}:train")
    engine = make_pddl_env()
    env = AlfWorldSpec().build()
    t_engine, t_env, t_invalid, t_load, t_again = [], [], [], [], []
    for row in tasks:
        walk = json.loads(Path(row["game_file"]).read_text())["walkthrough"]
        engine.load(row["game_file"])
        engine.reset()
        t0 = time.perf_counter()
        engine.step(walk[0])
        t_engine.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.reset(row)
        t_load.append(time.perf_counter() - t0)
        env.close()
        t0 = time.perf_counter()
        env.reset(row)
        t_again.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.step("<think>x</think><action>not a command</action>")
        t_invalid.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.step(f"<think>x</think><action>{walk[0]}</action>")
        t_env.append(time.perf_counter() - t0)
        env.close()
    base = statistics.median(t_engine)
    rows.append(("PddlEnv.step, admissible (ms, median)", f"{1000 * base:.1f}", "1.00", "the bare engine"))
    rows.append(("AlfWorldEnv.step, admissible (ms)", f"{1000 * statistics.median(t_env):.1f}",
                 f"{statistics.median(t_env) / base:.2f}", "parse + engine step"))
    rows.append(("AlfWorldEnv.step, not admissible (ms)", f"{1000 * statistics.median(t_invalid):.3f}",
                 f"{statistics.median(t_invalid) / base:.3f}", "'Nothing happens.' without the engine"))
    rows.append(("AlfWorldEnv.reset, new game (s)", f"{statistics.median(t_load):.2f}",
                 f"{statistics.median(t_load) / base:.0f}", f"max {max(t_load):.2f} s"))
    rows.append(("AlfWorldEnv.reset, same game (s)", f"{statistics.median(t_again):.2f}",
                 f"{statistics.median(t_again) / base:.0f}", "parsed game kept"))

    wins, seen = defaultdict(int), defaultdict(int)
    env = AlfWorldSpec(max_steps=50).build()
    for row in tasks:
        for s in range(args.random_episodes):
            rng = random.Random(f"{s}|{row['id']}")
            env.reset(row)
            while not env.done:
                result = env.step(f"<think>x</think><action>{rng.choice([a for a in env.admissible if a != 'help'])}</action>")
            wins[row["task_type"]] += result.info["won"]
            seen[row["task_type"]] += 1
    total = sum(seen.values())
    rows.append(("random policy, 50 steps (success)", f"{sum(wins.values()) / total:.3f}", "",
                 f"{total} episodes; " + ", ".join(f"{k} {wins[k]}/{seen[k]}" for k in seen)))
    rows.append(("planner walkthrough (success)", "1.000", "", f"every kept game (generation replays it)"))

    print(f"| {args.games} alfworld-synth train games, seed {args.seed} | value | ratio | note |")
    print("|---|---:|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
