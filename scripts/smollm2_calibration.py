"""How often the base SmolLM2-135M-Instruct is right on the pretrained demo's task, at a token budget
and a temperature: the numbers the task's settings were chosen on (resrl.demo.arithmetic_task).

    .venv/bin/resrl convert-smollm2 runs/models/smollm2-135m-instruct     # once (or run the demo)
    OMP_NUM_THREADS=1 .venv/bin/python scripts/smollm2_calibration.py --tokens 48 --temperature 0.7

Prints accuracy (the task's reward: Math-Verify, the answer a number), Pass@n, the rate of \\boxed{}
answers, accuracy among them and the share of samples cut off at the budget, on the held-out split
of seed 0 (64 problems, `--samples` each; temperature 0 is greedy).
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="runs/models/smollm2-135m-instruct")
    p.add_argument("--digits", default="1,2", help="each term's digit counts, drawn per term (default 1,2)")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--problems", type=int, default=64)
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.demo.arithmetic_task import ArithmeticConfig, ArithmeticTask, arithmetic_eval_config, arithmetic_reward
    from resrl.eval.runner import read_records
    from resrl.experiments.kinds import format_metrics
    from resrl.experiments.method import run_evaluation as run

    torch.set_num_threads(1)
    task = ArithmeticTask(ArithmeticConfig(digits=tuple(int(d) for d in args.digits.split(",")),
                                           num_test=args.problems))
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    n = 1 if args.temperature == 0 else args.samples
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        run(model, tok, task.test, arithmetic_eval_config(n=n, max_new_tokens=args.tokens,
                                                          temperature=args.temperature), out, scorer=arithmetic_reward)
        records = list(read_records(Path(out) / "samples.jsonl").values())
        by_problem = collections.defaultdict(list)
        for r in records:
            by_problem[r["problem_id"]].append(r["correct"])
        m = format_metrics(out)
        print(f"digits {args.digits}, {args.tokens} tokens, temperature {args.temperature}, {len(by_problem)} problems "
              f"x {n}: accuracy {m['accuracy']:.3f}, Pass@{n} {sum(map(any, by_problem.values())) / len(by_problem):.3f}, "
              f"format rate {m['format_rate']:.3f}, accuracy among formatted {m['accuracy_formatted']:.3f}, "
              f"truncated {m['truncated']:.3f} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
