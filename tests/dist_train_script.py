"""Run by test_engine_distributed.py under two processes: a short ResRL run whose prompt groups
straddle the processes (3 prompts x G=4 = 12 completions, 6 per process), so the weights need the
split-group gather of the extra-pass mode. Checks that both ranks log the same metrics, that the
loss is finite and that the parameters are identical on both ranks afterwards. Exit 0 when fine.

    argv: MODEL_DIR OUTPUT_DIR
"""

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from train_helpers import length_reward, overrides, toy_dataset  # noqa: E402

from resrl.train import load_config, run_training  # noqa: E402


def main() -> int:
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    cfg = load_config(None, overrides(model_dir, out_dir, "algorithm.name=resrl", "train.rollout_prompts=3",
                                      "train.micro_batch_size=2", "train.max_steps=2"))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    ok = world == 2 and result.resrl_mode == "extra-pass"
    ok &= all(math.isfinite(m["loss"]) for m in result.metrics)
    ok &= all("resrl/omega_mean" in m for m in result.metrics)
    flat = torch.cat([p.detach().flatten() for p in result.model.parameters()])
    both = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(both, flat)
    ok &= bool(torch.equal(both[0], both[1]))
    losses = torch.tensor([m["loss"] for m in result.metrics])
    all_losses = [torch.zeros_like(losses) for _ in range(world)]
    dist.all_gather(all_losses, losses)
    ok &= bool(torch.equal(all_losses[0], all_losses[1]))
    print(f"rank {rank}: mode {result.resrl_mode}, losses {losses.tolist()}, ok {ok}", flush=True)
    flags = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(flags, torch.tensor([float(ok)]))
    dist.destroy_process_group()  # before exit: left to interpreter shutdown it can abort the process
    return 0 if all(f.item() == 1.0 for f in flags) else 1


if __name__ == "__main__":
    sys.exit(main())
