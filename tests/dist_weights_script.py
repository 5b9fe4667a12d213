"""Run by test_engine_distributed.py under `accelerate launch --cpu --num_processes 2`.

Builds one batch whose prompt groups straddle the process boundary (12 rows, G = 4, 6 rows per
process: group 1 is split), computes each process's token advantages with the adapter's
split-group gathering, gathers them, and compares with one single-process call of the core on
the whole batch. Also exercises the hook-free path (GRPO) and ragged lengths across processes.
Exit code 0 when equal.
"""

import sys

import torch
from accelerate import Accelerator

from resrl.core import AlgorithmConfig, ResRLConfig
from resrl.core.registry import AdvantageInputs, compute_token_advantages
from resrl.engines.trl.batches import local_token_advantages


def full_batch(B=12, T=10, d=16, G=4):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    lengths[:6] = torch.clamp(lengths[:6], max=T - 2)  # process 0's rows are shorter: ragged T
    mask = torch.arange(T)[None] < lengths[:, None]
    rewards = torch.tensor([1., 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0])  # split group 1: [0, 1 | 1, 1]
    hidden = torch.randn(B, T, d, generator=g)
    group = torch.arange(B) // G
    truncated = torch.zeros(B, dtype=torch.bool)
    truncated[[2, 7]] = True
    return AdvantageInputs(rewards, group, mask, hidden, truncated)


def main() -> int:
    acc = Accelerator(cpu=True)
    full = full_batch()
    B = full.rewards.shape[0]
    per = B // acc.num_processes
    rows = slice(acc.process_index * per, (acc.process_index + 1) * per)
    T_local = int(full.response_mask[rows].sum(1).max())  # each process pads to its own width
    ok = True
    for name in ("resrl", "grpo", "w-reinforce"):
        cfg = AlgorithmConfig(name=name, resrl=ResRLConfig(rank=4, svd="exact", truncation_guard=True,
                                                           truncation_tail=2))
        local = AdvantageInputs(full.rewards[rows], full.group_index[rows], full.response_mask[rows, :T_local],
                                full.hidden[rows, :T_local] if name == "resrl" else None, full.truncated[rows])
        adv, _ = local_token_advantages(local, cfg, acc)
        naive, _ = compute_token_advantages(local, cfg)  # negative control: split group not gathered
        naive_gathered = acc.gather(torch.nn.functional.pad(naive, (0, full.response_mask.shape[1] - T_local)))
        padded = torch.zeros(per, full.response_mask.shape[1])
        padded[:, :T_local] = adv
        gathered = acc.gather(padded)
        if acc.is_main_process:
            inputs = full if name == "resrl" else AdvantageInputs(full.rewards, full.group_index,
                                                                   full.response_mask, None, full.truncated)
            expected, _ = compute_token_advantages(inputs, cfg)
            err = (gathered - expected).abs().max().item()
            print(f"{name}: max |two-process - single-process| = {err:.3e}")
            ok &= err < 1e-5
            naive_err = (naive_gathered - expected).abs().max().item()
            print(f"{name}: without gathering the split group the error would be {naive_err:.3e}")
            if name != "w-reinforce":  # W-REINFORCE has no group baseline: nothing to gather
                ok &= naive_err > 1e-3
            if name == "resrl":  # split group 1 really is reweighted (weights below 1 somewhere)
                neg = (~(full.rewards > 0.5))[:, None] & full.response_mask
                ok &= bool((expected[neg].abs() < 0.999 * expected[neg].abs().max()).any())
    flag = acc.gather(torch.tensor([1 if ok else 0]))
    # tear the gloo group down before exit: left to interpreter shutdown it can abort the process
    torch.distributed.destroy_process_group()
    return 0 if bool(flag.min()) else 1


if __name__ == "__main__":
    sys.exit(main())
