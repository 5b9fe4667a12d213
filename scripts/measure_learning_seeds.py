"""Measure a learning check of tests/test_learning.py over seeds 0-4 (the `measured` and `[seeds 1-4]`
columns of its tables): the check's own run (train_layout, the same task, warm start and settings) with
train.seed=N appended. Prints one line per run and, per check, the lowest seed minus 0.10 (the
threshold rule: at least 0.10 below the lowest seed).

    OMP_NUM_THREADS=1 python scripts/measure_learning_seeds.py options           # every EXPECTED_OPTIONS entry
    OMP_NUM_THREADS=1 python scripts/measure_learning_seeds.py losses cispo/grpo  # one EXPECTED_LOSSES entry
    OMP_NUM_THREADS=1 python scripts/measure_learning_seeds.py options --seeds 0 1
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests")
import torch  # noqa: E402

torch.set_num_threads(1)
from learning_tasks import choice_probability, pick_prompts, step_prompts, tool_contexts, warm_start  # noqa: E402
from test_learning import EXPECTED_LOSSES, EXPECTED_OPTIONS, LOSS_SETTINGS, OPTION_SETTINGS, train_layout  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

TABLES = {"losses": (EXPECTED_LOSSES, LOSS_SETTINGS), "options": (EXPECTED_OPTIONS, OPTION_SETTINGS)}

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("table", choices=list(TABLES))
parser.add_argument("checks", nargs="*", help="NAME/ALGORITHM entries (default: the whole table)")
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
args = parser.parse_args()
expected, settings = TABLES[args.table]
checks = [tuple(c.split("/")) for c in args.checks] or list(expected)
unknown = [c for c in checks if c not in expected]
if unknown:
    parser.error(f"unknown check(s) {unknown}; the table has {['/'.join(k) for k in expected]}")
tmp = Path(tempfile.mkdtemp())
first, second = tool_contexts()
warm = warm_start(tmp / "warm", pick_prompts() + first + second + step_prompts(), steps=100)
tok = AutoTokenizer.from_pretrained(warm)
for name, algo in checks:
    steps = expected[name, algo][0]
    ends = []
    for seed in args.seeds:
        model, contexts = train_layout("single-turn", algo, warm, tmp / f"{name}-{algo}-{seed}", steps,
                                       (*settings[name], f"train.seed={seed}"))
        ends.append(choice_probability(model, tok, contexts))
        print(f"{name} / {algo} seed {seed}: end {ends[-1]:.3f}", flush=True)
    print(f"{name} / {algo}: {' '.join(f'{e:.3f}' for e in ends)}; lowest - 0.10 = {min(ends) - 0.10:.3f}", flush=True)
