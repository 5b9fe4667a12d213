"""Supervised warm start of the demo: a few hundred steps of next-token prediction on correct chains.

RL needs a policy that is sometimes right (groups with both rewards); a random model never is.
The warm start is deliberately short so that greedy accuracy lands around 20-60 %: far enough
from 100 % that RL has headroom, far enough from 0 % that groups have a positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from resrl.data.synthetic import Problem, chain_target


@dataclass
class WarmStartConfig:
    max_steps: int = 1000  # upper bound; training stops earlier once the target accuracy is reached
    batch_size: int = 64
    learning_rate: float = 3e-3  # constant after warm-up, so stopping early leaves no schedule half-run
    warmup_steps: int = 20
    weight_decay: float = 0.0
    target_accuracy: float = 0.3  # stop when greedy accuracy on a dev split (not the test split) reaches it
    check_every: int = 25
    seed: int = 0


def encode_sft_batch(tokenizer, problems: Sequence[Problem], target: Callable[[Problem], str] = chain_target):
    """Problems -> (input_ids (B, L), attention_mask (B, L), labels (B, L)) right-padded tensors.

    Each row is `prompt + target(problem) + eos`; labels are -100 on the prompt and padding so the
    loss only teaches the completion (what RL will later sample)."""
    import torch

    rows, label_rows = [], []
    for p in problems:
        prompt_ids = tokenizer(p.prompt, add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(target(p), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt_ids + target_ids)
        label_rows.append([-100] * len(prompt_ids) + target_ids)
    L = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.full((len(rows), L), pad, dtype=torch.long)
    labels = torch.full((len(rows), L), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), L), dtype=torch.long)
    for i, (r, lab) in enumerate(zip(rows, label_rows)):
        input_ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(r)] = torch.tensor(lab)
        mask[i, : len(r)] = 1
    return input_ids, mask, labels


def warm_start(model, tokenizer, problems: Sequence[Problem], config: WarmStartConfig,
               dev_accuracy: Callable[[], float] | None = None,
               on_step: Callable[[int, float, float | None], None] | None = None,
               target: Callable[[Problem], str] = chain_target) -> dict:
    """Train `model` in place on `problems` (cycled in order, batch_size per step) to complete each
    prompt with `target(problem)` (the demo task's correct completion).

    Every `check_every` steps `dev_accuracy()` (greedy accuracy on a dev split) is measured and
    training stops once it reaches `target_accuracy`: where a tiny model crosses 20-60 % moves a
    lot with the machine's arithmetic, a stopping rule on a measured accuracy does not.
    Returns {"losses", "steps", "dev_accuracy": [(step, acc), ...]}. Deterministic given the seed."""
    import torch

    if config.max_steps < 0 or config.batch_size < 1 or config.check_every < 1:
        raise ValueError("warm start: max_steps must be >= 0, batch_size and check_every >= 1")
    if not problems:
        raise ValueError("warm start: no training problems")
    torch.manual_seed(config.seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)

    def lr_at(step: int) -> float:  # linear warm-up, then constant
        return min(1.0, (step + 1) / max(1, config.warmup_steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    losses: list[float] = []
    checks: list[tuple[int, float]] = []
    for step in range(config.max_steps):
        start = (step * config.batch_size) % len(problems)
        batch = [problems[(start + j) % len(problems)] for j in range(config.batch_size)]
        input_ids, mask, labels = encode_sft_batch(tokenizer, batch, target)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        acc = None
        if dev_accuracy is not None and (step + 1) % config.check_every == 0:
            model.eval()
            acc = float(dev_accuracy())
            model.train()
            checks.append((step + 1, acc))
        if on_step is not None:
            on_step(step, losses[-1], acc)
        if acc is not None and acc >= config.target_accuracy:
            break
    model.eval()
    return {"losses": losses, "steps": len(losses), "dev_accuracy": checks}
