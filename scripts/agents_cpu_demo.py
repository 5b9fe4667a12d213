"""The CPU demonstration of the step-level agent pipeline, now `resrl demo --task agents`
(resrl.demo.agents_task; docs/tasks/agents-training.md, "CPU demonstration"). Kept as a thin wrapper:

    PYTHONPATH=src python scripts/agents_cpu_demo.py --out runs/demo-agents [--quick] [--seed S] [--algorithms ...]
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from resrl.cli import main

    sys.exit(main(["demo", "--task", "agents", *sys.argv[1:]]))
