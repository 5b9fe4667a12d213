"""One generation round of step-level rollouts in the TRL engine (resrl.engines.steps): TRL's
local prompts (each game repeated G times in a row) -> step rows with their tags, old log-probs,
step entropies and advantages, padded for TRL's split into micro-batches.

Every advantage is computed on the whole round (a game's rows vary in number), so the step layout
runs no aligned mode, no dynamic sampling and needs whole games per process (engines/trl/rules.py).
Processes hold different numbers of rows: metrics gather (rows, tokens) sums, never the rows.
"""

from __future__ import annotations

import torch

from resrl.core.registry import AdvantageInputs, compute_token_advantages, get_algorithm
from resrl.engines.trl import metrics as engine_metrics
from resrl.engines.trl import compat as trl_compat
from resrl.engines.trl.reference import reference_logps
from resrl.engines.steps import StepRolloutConfig
from resrl.models.checkpointing import checkpointing_disabled, checkpointing_kwargs


def no_grad_pass(trainer, out: dict, want_states: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(old log-probs (B, C), token entropies (B, C), penultimate states (B, C, d) | None) of the
    round's rows under the current policy, in one no-grad pass."""
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    C = out["completion_ids"].shape[1]
    with trainer.capture.armed(want_states) as captured:
        with torch.no_grad(), checkpointing_disabled(trainer.model, checkpointing_kwargs(trainer.args)):
            logps, entropy = trainer.per_token_logps(
                trainer.model, ids, attn, C, batch_size=trainer.args.per_device_train_batch_size,
                compute_entropy=True)[:2]
    # captured[0] is StateCapture.finish's (hidden, head sketch); the step layout refuses algorithms
    # that need the head sketch (engines/trl/rules.py), so only the penultimate states are used here
    return logps, entropy, (captured[0][0] if want_states else None)


class StepRound:
    """The step layout's generation round for one trainer; owns the environment worker pool."""

    def __init__(self, config: StepRolloutConfig):
        self.config = config
        self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __call__(self, trainer, inputs) -> dict:
        from resrl.engines.multiturn import ChatRenderer, HFStepPolicy, trl_sampling_settings
        from resrl.engines.steps import StepSample, episode_stats, pad_rows, rollout_steps, steps_to_batch

        cfg, G, device = self.config, trainer.num_generations, trainer.accelerator.device
        accelerator, args = trainer.accelerator, trainer.args
        mode = "train" if trainer.model.training else "eval"
        if self._pool is None:
            self._pool = cfg.make_pool()
        prompts = [x["prompt"] for x in inputs]
        n, rank = len(prompts), accelerator.process_index
        groups = [rank * (n // G) + i // G for i in range(n)]          # global game ids
        tokenizer = trainer.processing_class
        model = accelerator.unwrap_model(trainer.model)
        policy = HFStepPolicy(model, tokenizer, **trl_sampling_settings(args))  # the config's settings only
        samples, episodes = rollout_steps(
            self._pool, prompts, groups, policy, ChatRenderer(tokenizer), eos_token_ids=policy.eos_token_ids,
            max_steps=cfg.max_steps, max_step_tokens=cfg.max_step_tokens, max_prompt_tokens=cfg.max_prompt_tokens,
            episode_timeout_s=cfg.episode_timeout_s, invalid_format_penalty=cfg.invalid_format_penalty,
            reward_scale=cfg.reward_scale, trajectory_offset=rank * n)
        empty = not samples
        if empty:  # every environment failed before a step: one token-less row keeps TRL's loop going
            eos = policy.eos_token_ids[0]
            samples = [StepSample([eos], [eos], -1, -1, 0, "")]
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else policy.eos_token_ids[0]
        out = {k: v.to(device) for k, v in steps_to_batch(samples, pad_id).items()}
        if empty:
            out["completion_mask"].zero_()
        mask = out["completion_mask"]
        spec = get_algorithm(trainer.algorithm.name)
        need_old = args.steps_per_generation * trainer.num_iterations != args.gradient_accumulation_steps
        step_entropy, hidden = None, None
        if trainer.needs_hidden or spec.needs_step_entropy or need_old:
            logps, entropy, hidden = no_grad_pass(trainer, out, trainer.needs_hidden)
            out["old_per_token_logps"] = logps
            m = mask.float()
            step_entropy = (entropy.float() * m).sum(1) / m.sum(1).clamp(min=1.0)   # mean token entropy / step
        if trainer.needs_reference or trainer.beta != 0.0:
            out["ref_per_token_logps"] = reference_logps(trainer, out)
        # (an all-failed round's token-less row goes through too: every process makes the same collectives)
        inputs = AdvantageInputs(
            out["rewards"], out["group_index"], mask, hidden, out["truncated"],
            trajectory_index=out["trajectory_index"], step_index=out["step_index"],
            anchor_index=out["anchor_index"], step_rewards=out["step_rewards"], step_entropy=step_entropy)
        if trainer.critic is not None:  # PPO: GAE per environment step on the critic's values (engines/trl/critic.py)
            adv, stats = trainer.critic.advantages(trainer, out, inputs)
        else:
            adv, stats = compute_token_advantages(inputs, trainer.algorithm)
        out["advantages"] = adv * mask
        sink = trl_compat.metrics(trainer, mode)
        engine_metrics.log_stats(accelerator, sink, stats)
        out["num_items_in_batch"] = accelerator.gather(mask.sum()).sum()
        # metrics: per episode (success, steps, invalid rates, end reasons) and per step row
        local = episode_stats(episodes)
        keys = sorted(local)
        values = accelerator.gather(torch.tensor([[local[k] for k in keys]], device=device)).mean(0).tolist()
        for k, v in zip(keys, values):
            sink[k].append(v)
        # processes hold different numbers of rows: gather (rows, tokens) sums, never the rows themselves
        rows, tokens = accelerator.gather(torch.tensor(
            [[float(mask.shape[0] * (not empty)), float(mask.sum())]], device=device)).sum(0).tolist()
        sink["reward"].append(sink["episode/reward"][-1])  # TRL's name: the round's mean reward
        sink["accuracy"].append(sink["episode/success"][-1])
        sink["step_rows"].append(rows)
        sink["completions/mean_length"].append(tokens / max(rows, 1.0))  # TRL's name, per step row
        out, _ = pad_rows(out, args.steps_per_generation)
        return out
