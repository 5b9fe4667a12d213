"""The experiments' warm starts: supervised next-token prediction on a task's correct completions
(`warm_start`, the generated-problem demos) or on an expert policy's replies step by step
(`behaviour_cloning`, the step-layout demo), each stopped once a dev check reaches its target.

RL needs a policy that is sometimes right (groups with both rewards); a random model never is.
The warm start is deliberately short so that greedy accuracy lands around 20-60 %: far enough
from 100 % that RL has headroom, far enough from 0 % that groups have a positive.
"""

from __future__ import annotations

from typing import Callable, Sequence

from resrl.data.synthetic import Problem, chain_target
from resrl.demo.config import WarmStart


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


def supervised_steps(model, batch_at: Callable[[int], tuple], *, steps: int, learning_rate: float,
                     weight_decay: float, warmup_steps: int = 0, clip_norm: float | None = None,
                     check: Callable[[], tuple[bool, float]] | None = None, check_every: int = 25,
                     min_steps: int = 0, keep_best: bool = False,
                     on_step: Callable[[int, float, float | None], None] | None = None) -> dict:
    """The experiments' one supervised loop: at most `steps` AdamW steps on `batch_at(step)` ->
    (input_ids (B, L), attention_mask (B, L), labels (B, L), -100 where no loss), with a linear
    learning-rate warm-up over `warmup_steps` then a constant rate, gradients clipped to `clip_norm`.

    Every `check_every` steps from `min_steps` on, `check()` (in eval mode) returns (stop, value): a
    dev measure and whether it reached its target; the loop ends at the first stop. With `keep_best`,
    a loop that never stopped ends with the weights of its best check, not its last step's.
    on_step(step, loss, value or None) after each step. Returns {"losses", "steps", "checks":
    [(step, value), ...], "stopped", "kept": the step whose weights the model now holds}. The caller
    seeds torch; the model is left in eval mode."""
    import torch

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / max(1, warmup_steps)))
    losses: list[float] = []
    checks: list[tuple[int, float]] = []
    best = None  # (value, step, weights) of the best check so far
    stopped = False
    for step in range(steps):
        input_ids, mask, labels = batch_at(step)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        value = None
        if check is not None and step + 1 >= min_steps and (step + 1) % check_every == 0:
            model.eval()
            stopped, value = check()
            value = float(value)
            model.train()
            checks.append((step + 1, value))
        if on_step is not None:
            on_step(step, losses[-1], value)
        if stopped:
            break
        if keep_best and value is not None and (best is None or value > best[0]):
            best = (value, step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
    kept = len(losses)
    if keep_best and not stopped and best is not None and best[1] != kept:
        model.load_state_dict(best[2])
        kept = best[1]
    model.eval()
    return {"losses": losses, "steps": len(losses), "checks": checks, "stopped": stopped, "kept": kept,
            "best": None if best is None else best[0]}


def warm_start(model, tokenizer, problems: Sequence[Problem], config: WarmStart, seed: int = 0,
               dev_accuracy: Callable[[], float] | None = None,
               on_step: Callable[[int, float, float | None], None] | None = None,
               target: Callable[[Problem], str] = chain_target) -> dict:
    """Train `model` in place on `problems` (cycled in order, batch_size per step) to complete each
    prompt with `target(problem)` (the demo task's correct completion): `supervised_steps`.

    Every `check_every` steps `dev_accuracy()` (greedy accuracy on a dev split) is measured and
    training stops once it reaches `target_accuracy`: where a tiny model crosses 20-60 % moves a
    lot with the machine's arithmetic, a stopping rule on a measured accuracy does not.
    Returns {"losses", "steps", "dev_accuracy": [(step, acc), ...]}. Deterministic given the seed."""
    import torch

    if config.max_steps < 0 or config.batch_size < 1 or config.check_every < 1:
        raise ValueError("warm start: max_steps must be >= 0, batch_size and check_every >= 1")
    if not problems:
        raise ValueError("warm start: no training problems")
    torch.manual_seed(seed)

    def batch_at(step: int):
        start = (step * config.batch_size) % len(problems)
        return encode_sft_batch(tokenizer, [problems[(start + j) % len(problems)] for j in range(config.batch_size)],
                                target)

    def check() -> tuple[bool, float]:
        acc = float(dev_accuracy())
        return acc >= config.target_accuracy, acc

    r = supervised_steps(model, batch_at, steps=config.max_steps, learning_rate=config.learning_rate,
                         weight_decay=config.weight_decay, warmup_steps=config.warmup_steps, clip_norm=1.0,
                         check=check if dev_accuracy is not None else None, check_every=config.check_every,
                         on_step=on_step)
    return {"losses": r["losses"], "steps": r["steps"], "dev_accuracy": r["checks"]}


def encode_chat_batch(tokenizer, items: Sequence[tuple[list[int], list[int]]]):
    """(prompt ids, reply ids) pairs -> right-padded (input_ids, attention_mask, labels), the loss on
    the reply only."""
    import torch

    L = max(len(p) + len(a) for p, a in items)
    ids = torch.full((len(items), L), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(items), L), -100, dtype=torch.long)
    attn = torch.zeros((len(items), L), dtype=torch.long)
    for b, (p, a) in enumerate(items):
        seq = p + a
        ids[b, :len(seq)] = torch.tensor(seq)
        attn[b, :len(seq)] = 1
        labels[b, len(p):len(seq)] = torch.tensor(a)
    return ids, attn, labels


def behaviour_cloning(model_dir, out_dir, samples, steps, seed, lr=3e-3, batch=16, log=print,
                      stop=None, check_every: int = 10, min_steps: int = 0) -> dict:
    """Supervised fine-tuning on an expert's replies (loss on the reply tokens only), at most `steps` steps
    (`supervised_steps`: random batches of `batch`, AdamW's default weight decay, no warm-up or clipping).
    `samples`: (step prompt messages, expert reply) pairs, e.g. `resrl.demo.agents_task.expert_samples`; each
    prompt is rendered with the model's chat template, the reply ends with EOS.
    `stop(model, tokenizer) -> (bool, float)`, asked every `check_every` steps from `min_steps` on, ends it
    early (the math demo's warm start stops at a target accuracy the same way, so RL has room). When no check
    says stop, the weights of the check with the highest value are saved, not the last step's: at a constant
    lr 3e-3 the last step can be a spike (seed 3: loss 0.003 -> 0.079 at step 400, after which the model
    walked right in every game, held-out success 0.000).
    Returns {"samples", "steps", "checks": [(step, value), ...], "kept": the step whose weights were saved}."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = []
    for messages, reply in samples:
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
        answer = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        data.append((prompt, answer))
    rng = random.Random(seed)

    def on_step(step: int, loss: float, value: float | None) -> None:
        if value is not None:  # a check ran after this step: its value beside the loss
            log(f"  BC step {step}: loss {loss:.3f}, check {value:.3f}")
        elif step % 50 == 0 or step == steps - 1:
            log(f"  BC step {step}: loss {loss:.3f}")

    r = supervised_steps(model, lambda step: encode_chat_batch(tok, rng.sample(data, min(batch, len(data)))),
                         steps=steps, learning_rate=lr, weight_decay=0.01,  # torch's AdamW default
                         check=(lambda: stop(model, tok)) if stop is not None else None, check_every=check_every,
                         min_steps=min_steps, keep_best=True, on_step=on_step)
    if r["stopped"]:
        log(f"  BC stopped after {r['steps']} steps: check {r['checks'][-1][1]:.3f}")
    elif r["kept"] != r["steps"]:
        log(f"  BC did not reach its target in {r['steps']} steps: keeping the weights of step {r['kept']} "
            f"(check {r['best']:.3f}, the best)")
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"samples": len(data), "steps": r["steps"], "checks": r["checks"], "kept": r["kept"]}
