"""A demo task's split as a JSONL data file (`prompt`, `answer` per row), for the commands that read data
files: `resrl diagnose --data FILE`, `resrl eval --data FILE`. The rows are the problems the demo evaluates
(`--split test`: its held-out split) or chooses settings on (`--split dev`), for one seed.

    .venv/bin/python scripts/export_demo_split.py --task smollm2-arithmetic --split test --seed 0 \\
        --out runs/smollm2-heldout-seed0.jsonl
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="smollm2-arithmetic")
    p.add_argument("--split", choices=("test", "dev"), default="test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    task = get_demo_task(args.task)
    cfg = replace(task.config(quick=False), seed=args.seed, eval_split=args.split)
    problems = kind_of(task).eval_problems(cfg)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for prob in problems:
            f.write(json.dumps({"id": str(prob.id), "prompt": prob.prompt, "answer": prob.answer}) + "\n")
    print(f"wrote {len(problems)} {args.split} problems of {args.task} (seed {args.seed}) to {out}")


if __name__ == "__main__":
    main()
