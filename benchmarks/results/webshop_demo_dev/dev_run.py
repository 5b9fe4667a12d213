"""The WebShop demo's dev run: the demo's settings, seed 0, GRPO and ResRL, evaluated on
webshop-medium:dev (30 products no training goal asks for) instead of the held-out test split.
When it was run `resrl demo` evaluated the step tasks on their held-out split only, hence this
script; `resrl demo` does it now:

    resrl demo --task webshop --eval-split dev --algorithms grpo,resrl --workers 2 --out OUT
    python benchmarks/results/webshop_demo_dev/dev_run.py OUT        # the same, from Python

The run in this folder (2026-11-28) read the training goals from a folder written by
`resrl make-webshop DIR --types 5 --products-per-type 40 --instructions-per-product 4
--attributes-in-title --all-options --asin-digits 3`, byte for byte the packaged webshop-medium
(tests/test_webshop_data.py regenerates it so), before that set was packaged. It then recorded
the dev split under the held-out name (the summary's `test_products`).
"""
import sys
from dataclasses import replace

from resrl.demo.webshop_task import webshop_config
from resrl.experiments.pipeline import run_experiment

if __name__ == "__main__":  # EnvPool's spawned workers import this module: no work at import
    cfg = replace(webshop_config(), out=sys.argv[1], seed=0, algorithms=("grpo", "resrl"), eval_split="dev")
    run_experiment(cfg, workers=2)
