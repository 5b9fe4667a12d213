"""The WebShop demo's dev run: the demo's settings (WebShopDemoConfig as committed), seed 0, GRPO and
ResRL, evaluated on webshop-medium:dev (30 products no training goal asks for) instead of the
held-out test split. `resrl demo` evaluates the steps tasks on their held-out split only, hence this
script:

    python benchmarks/results/webshop_demo_dev/dev_run.py OUT

The run in this folder (2026-11-28) read the training goals from a folder written by
`resrl make-webshop DIR --types 5 --products-per-type 40 --instructions-per-product 4
--attributes-in-title --all-options --asin-digits 3`, byte for byte the packaged webshop-medium
(tests/test_webshop_data.py regenerates it so), before that set was packaged.
"""
import sys
from dataclasses import replace

from resrl.demo.webshop_task import WebShopDemoConfig
from resrl.experiments.pipeline import run_experiment

if __name__ == "__main__":  # EnvPool's spawned workers import this module: no work at import
    cfg = replace(WebShopDemoConfig(), out=sys.argv[1], seed=0, algorithms=("grpo", "resrl"),
                  test_data="webshop-medium:dev")
    run_experiment(cfg, workers=2)
