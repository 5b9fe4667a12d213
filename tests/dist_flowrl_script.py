"""Run by test_engine_distributed.py under two CPU processes: FlowRL whose groups straddle the
processes. The log Z head is called outside DDP's forward; its gradients must still be averaged
over the processes (each process sees other completions, so unsynchronised heads would differ).
Prints `CHECK <name> ok|FAIL`; exit 1 if any fails.   argv: MODEL_DIR OUTPUT_DIR
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from dist_train_script import finish  # noqa: E402
from train_helpers import length_reward, overrides, toy_dataset  # noqa: E402

from resrl.engines.trl.trainer import LOG_Z_ATTR  # noqa: E402
from resrl.train import load_config, run_training  # noqa: E402


def main() -> int:
    cfg = load_config(None, overrides(sys.argv[1], sys.argv[2], "algorithm.name=flowrl", "train.rollout_prompts=3",
                                      "train.micro_batch_size=2", "train.max_steps=2", "train.learning_rate=1e-2"))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    head = getattr(result.model, LOG_Z_ATTR)
    flat = torch.cat([p.detach().flatten() for p in head.parameters()])
    body = torch.cat([p.detach().flatten() for n, p in result.model.named_parameters() if LOG_Z_ATTR not in n])
    world = dist.get_world_size()
    heads, bodies = [torch.zeros_like(flat) for _ in range(world)], [torch.zeros_like(body) for _ in range(world)]
    dist.all_gather(heads, flat)
    dist.all_gather(bodies, body)
    moved = len({round(m["flowrl/log_z"], 6) for m in result.metrics}) > 1
    checks = {
        "world": world == 2,
        "completions": [m["completions/update_rows"] for m in result.metrics] == [12.0, 12.0],
        "head-synced": torch.equal(heads[0], heads[1]) and moved,
        "body-synced": torch.equal(bodies[0], bodies[1]),
    }
    ok = True
    if dist.get_rank() == 0:
        for name, good in checks.items():
            print(f"CHECK {name} {'ok' if good else 'FAIL'}", flush=True)
            ok &= good
    return finish(ok)


if __name__ == "__main__":
    sys.exit(main())
