"""Run by test_engine_distributed.py under two CPU processes: PPO whose critic (separate trunk) lives
outside DDP. Its gradients must be averaged over the processes (each process sees other completions,
so unsynchronised critics would differ), and the advantages must be whitened over both processes' rows
(equal to the core on the whole round). Prints `CHECK <name> ok|FAIL`; exit 1 if any fails.
argv: MODEL_DIR OUTPUT_DIR
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from dist_train_script import finish  # noqa: E402
from train_helpers import length_reward, overrides, toy_dataset  # noqa: E402

from resrl.core.registry import AdvantageInputs, compute_ppo_targets  # noqa: E402
from resrl.engines.trl import critic as critic_module  # noqa: E402
from resrl.engines.trl import trainer as trl_engine  # noqa: E402
from resrl.train import load_config, run_training  # noqa: E402


def main() -> int:
    rounds, critics = [], []
    real = critic_module.Critic.advantages

    def spy(self, trainer, out, inputs):
        critics.append(self)
        adv, stats = real(self, trainer, out, inputs)
        rounds.append({"adv": adv.detach().clone(), "values": out["old_values"].clone(), "mask": inputs.response_mask,
                       "rewards": inputs.rewards.clone(), "ev": stats["critic/explained_variance"]})
        return adv, stats

    critic_module.Critic.advantages = spy
    cfg = load_config(None, overrides(sys.argv[1], sys.argv[2], "algorithm.name=ppo", "train.rollout_prompts=4",
                                      "train.micro_batch_size=4", "train.max_steps=2", "critic.learning_rate=1e-2",
                                      "algorithm.ppo.gamma=0.9", "algorithm.ppo.lam=0.9"))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    world, rank = dist.get_world_size(), dist.get_rank()
    critic = critics[0]
    flat = torch.cat([p.detach().flatten() for p in critic.params])
    init = critic_module.ValueHead(critic.head.linear.in_features, seed=cfg.train.seed).linear.weight.flatten()
    flats = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(flats, flat)

    # the first round of both processes: the core on the whole round gives each process's advantages
    first = rounds[0]
    C = torch.tensor([first["mask"].shape[1]])
    width = [torch.zeros_like(C) for _ in range(world)]
    dist.all_gather(width, C)
    T = int(max(w.item() for w in width))

    def gathered(t, fill=0):
        t = torch.nn.functional.pad(t, (0, T - t.shape[1]), value=fill) if t.dim() == 2 else t
        out = [torch.zeros_like(t) for _ in range(world)]
        dist.all_gather(out, t.contiguous())
        return torch.cat(out)

    mask = gathered(first["mask"].long()).bool()
    whole = compute_ppo_targets(AdvantageInputs(gathered(first["rewards"]), torch.arange(mask.shape[0]), mask,
                                                values=gathered(first["values"])), cfg.algorithm)
    mine = torch.nn.functional.pad(first["adv"], (0, T - first["adv"].shape[1]))
    rows = first["adv"].shape[0]
    local_only = compute_ppo_targets(AdvantageInputs(first["rewards"], torch.arange(rows), first["mask"],
                                                     values=first["values"]), cfg.algorithm)
    checks = {
        "world": world == 2 and rows == 8,
        "critic-synced": torch.equal(flats[0], flats[1]),
        "critic-trained": not torch.allclose(critic.head.linear.weight.flatten(), init),
        "whitened-over-both": torch.allclose(mine, whole.advantages[rank * rows:(rank + 1) * rows], atol=1e-5)
                              and first["ev"] == first["ev"],
        "not-vacuous": not torch.allclose(local_only.advantages, first["adv"], atol=1e-4),
        "metrics": all("critic/value_loss" in m for m in result.metrics),
    }
    ok = True
    results = [torch.zeros(len(checks)) for _ in range(world)]
    dist.all_gather(results, torch.tensor([float(v) for v in checks.values()]))
    if rank == 0:
        for i, name in enumerate(checks):
            good = all(r[i].item() == 1.0 for r in results)
            print(f"CHECK {name} {'ok' if good else 'FAIL'}", flush=True)
            ok &= good
    return finish(ok)


if __name__ == "__main__":
    sys.exit(main())
