"""Step-level rollouts (verl-agent's layout): every environment step is its own prompt/response
sample, so a 50-step episode is 50 short samples instead of one 30k-token sequence.

Sample k of trajectory j:

    prompt_ids      = render(env.step_prompt()) + generation prompt   the task, the step count, the
                                                                      last `history_window` (obs,
                                                                      action) pairs, the current
                                                                      observation, admissible actions
    completion_ids  = the model's answer at that step (ends with EOS unless cut at max_step_tokens)
    tags            group (the game: the G trajectories of one prompt share it), trajectory j,
                    step k, anchor = env.anchor() before the step (GiGPO's state identity)
    step_reward     reward_scale · r_k − c · invalid_format_k
    episode_reward  reward_scale · Σ_k r_k (+ final_reward when stopped) − c · invalid_format_k
                    (verl-agent: every step row carries the episode score, minus its own penalty)

Every response token is trained on (the prompt is context only): the response mask is the
completion mask. Environments run in an `resrl.envs.pool.EnvPool`; an episode ends on `done`,
on `max_steps`, on `episode_timeout_s` wall time, on a step prompt longer than
`max_prompt_tokens`, or when its environment fails (timeout / crash / exception: score 0). The
reason is in `Episode.end`; failures are logged.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from resrl.engines.multiturn import ChatRenderer, StepPolicy, Trajectory, trajectories_to_batch
from resrl.envs.pool import EnvPool

logger = logging.getLogger(__name__)

END_REASONS = ("done", "max_steps", "episode_time_limit", "prompt_too_long", "env_failed")


@dataclass
class StepSample:
    prompt_ids: list[int]
    completion_ids: list[int]
    group: int
    trajectory: int
    step: int
    anchor: str
    step_reward: float = 0.0
    episode_reward: float = 0.0
    invalid_format: bool = False
    invalid_action: bool = False
    cut: bool = False          # stopped by max_step_tokens, no EOS
    text: str = ""


@dataclass
class Episode:
    trajectory: int
    group: int
    prompt: Any
    reward: float = 0.0
    won: bool = False
    steps: int = 0
    end: str | None = None
    error: str | None = None
    task_type: str | None = None
    invalid_formats: int = 0
    invalid_actions: int = 0
    actions: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # the environment's info at its last step (e.g. WebShop's score)


def rollout_steps(pool: EnvPool, prompts: Sequence[Any], groups: Sequence[int], policy: StepPolicy,
                  renderer: ChatRenderer, *, eos_token_ids: Sequence[int], max_steps: int = 50,
                  max_step_tokens: int = 512, max_prompt_tokens: int | None = None,
                  episode_timeout_s: float | None = None, invalid_format_penalty: float = 0.1,
                  reward_scale: float = 1.0, trajectory_offset: int = 0,
                  decode: Callable[[list[int]], str] | None = None) -> tuple[list[StepSample], list[Episode]]:
    """One trajectory per prompt, all stepped together; returns the step samples (in trajectory,
    then step order) and one `Episode` per prompt. groups[i] is prompt i's game id; trajectory ids
    are trajectory_offset + i."""
    if len(prompts) != len(groups):
        raise ValueError(f"rollout_steps: {len(prompts)} prompts for {len(groups)} group ids")
    if max_steps < 1 or max_step_tokens < 1:
        raise ValueError("rollout_steps: max_steps and max_step_tokens must be >= 1")
    eos = {int(e) for e in eos_token_ids}
    decode = decode or (lambda ids: renderer.tokenizer.decode(ids, skip_special_tokens=True))
    episodes = [Episode(trajectory_offset + i, int(g), p) for i, (p, g) in enumerate(zip(prompts, groups))]
    samples: list[list[StepSample]] = [[] for _ in prompts]
    view: dict[int, dict] = {}
    env_done: set[int] = set()
    started = time.monotonic()

    def end(i: int, reason: str, error: str | None = None) -> None:
        episodes[i].end, episodes[i].error = reason, error
        if error:
            logger.warning("step rollout: trajectory %d ended (%s): %s", episodes[i].trajectory, reason, error)

    for i, reply in enumerate(pool.reset(list(prompts))):
        if reply.ok:
            view[i] = reply.value
        else:
            end(i, "env_failed", reply.error)
    active = sorted(view)
    while active:
        contexts, live = [], []
        for i in active:
            ids = renderer.prompt_ids(view[i]["messages"])
            if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
                end(i, "prompt_too_long", f"step prompt of {len(ids)} tokens > {max_prompt_tokens}")
                continue
            contexts.append(ids)
            live.append(i)
        if not live:
            break
        outs = policy(contexts, [max_step_tokens] * len(live))
        if len(outs) != len(live):
            raise RuntimeError(f"policy returned {len(outs)} generations for {len(live)} contexts")
        texts, new = [], []
        for i, ctx, (ids, _) in zip(live, contexts, outs):
            ids = list(ids)[:max_step_tokens]
            text = decode(ids)
            s = StepSample(ctx, ids, episodes[i].group, episodes[i].trajectory, len(samples[i]),
                           view[i]["anchor"], cut=not (ids and ids[-1] in eos), text=text)
            samples[i].append(s)
            texts.append(text)
            new.append(s)
        replies = pool.step(live, texts)
        still = []
        for i, s, reply in zip(live, new, replies):
            ep = episodes[i]
            ep.steps += 1
            if not reply.ok:  # the environment failed: the trajectory ends with score 0
                ep.reward = 0.0
                end(i, "env_failed", reply.error)
                continue
            out = reply.value
            info = out.get("info") or {}
            s.invalid_format = bool(info.get("invalid_format", False))
            s.invalid_action = bool(info.get("invalid_action", False))
            ep.invalid_formats += s.invalid_format
            ep.invalid_actions += s.invalid_action
            ep.actions.append(str(info.get("action", s.text))[:200])
            ep.info = info
            r = reward_scale * float(out["reward"])
            s.step_reward = r
            ep.reward += r
            if out["done"]:
                ep.won = bool(info.get("won", False))
                ep.task_type = info.get("task_type")
                # an environment that ends the episode itself at its step limit (ALFWorld) reads as max_steps
                end(i, "max_steps" if not ep.won and ep.steps >= max_steps else "done")
                env_done.add(i)
                continue
            view[i] = {"messages": out["messages"], "anchor": out["anchor"]}
            if ep.steps >= max_steps:
                end(i, "max_steps")
            elif episode_timeout_s is not None and time.monotonic() - started > episode_timeout_s:
                end(i, "episode_time_limit")
            else:
                still.append(i)
        active = still
    stopped = [i for i, ep in enumerate(episodes)
               if ep.end in ("max_steps", "episode_time_limit", "prompt_too_long") and i not in env_done]
    if stopped:  # the environment's reward for a trajectory stopped before done (0 by default)
        for i, reply in zip(stopped, pool.final_reward(stopped)):
            r = reward_scale * float(reply.value.get("reward", 0.0)) if reply.ok else 0.0
            episodes[i].reward += r
            if samples[i]:
                samples[i][-1].step_reward += r
    flat = []
    for i, ep in enumerate(episodes):
        if ep.end == "env_failed":
            for s in samples[i]:
                s.step_reward = 0.0
        for s in samples[i]:
            s.step_reward -= invalid_format_penalty * s.invalid_format
            s.episode_reward = ep.reward - invalid_format_penalty * s.invalid_format
            flat.append(s)
    return flat, episodes


# ---- TRL batch ------------------------------------------------------------------------------------

def anchor_ids(anchors: Sequence[str]) -> torch.Tensor:
    """Equal anchor strings -> equal int64 ids (first-seen order). (B,)"""
    table: dict[str, int] = {}
    return torch.tensor([table.setdefault(a, len(table)) for a in anchors], dtype=torch.long)


def steps_to_batch(samples: Sequence[StepSample], pad_token_id: int) -> dict[str, Any]:
    """Step samples -> the TRL generation-batch tensors of `trajectories_to_batch` (B rows = steps)
    plus the per-row tags (B,): group_index, trajectory_index, step_index, anchor_index (int64),
    step_rewards, rewards (= episode_reward) (float32), truncated (bool: cut at max_step_tokens)."""
    trajs = [Trajectory(prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, env_mask=[1] * len(s.completion_ids),
                        reward=s.episode_reward) for s in samples]
    batch = trajectories_to_batch(trajs, pad_token_id)
    batch.pop("truncation")
    batch["group_index"] = torch.tensor([s.group for s in samples], dtype=torch.long)
    batch["trajectory_index"] = torch.tensor([s.trajectory for s in samples], dtype=torch.long)
    batch["step_index"] = torch.tensor([s.step for s in samples], dtype=torch.long)
    batch["anchor_index"] = anchor_ids([f"{s.group}\x00{s.anchor}" for s in samples])
    batch["step_rewards"] = torch.tensor([s.step_reward for s in samples], dtype=torch.float32)
    batch["truncated"] = torch.tensor([s.cut for s in samples], dtype=torch.bool)
    return batch


def episode_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """Success rate, mean steps and reward, invalid-format / -action rates, end reasons."""
    n = max(1, len(episodes))
    steps = max(1, sum(e.steps for e in episodes))
    stats = {"episode/success": sum(e.won for e in episodes) / n,
             "episode/reward": sum(e.reward for e in episodes) / n,
             "episode/steps": sum(e.steps for e in episodes) / n,
             "episode/invalid_format_rate": sum(e.invalid_formats for e in episodes) / steps,
             "episode/invalid_action_rate": sum(e.invalid_actions for e in episodes) / steps}
    for reason in END_REASONS:
        stats[f"episode/end_{reason}"] = sum(e.end == reason for e in episodes) / n
    return stats


__all__ = ["StepSample", "Episode", "rollout_steps", "steps_to_batch", "anchor_ids", "episode_stats", "END_REASONS"]


@dataclass
class StepRolloutConfig:
    """What the trainer needs to run step-level rollouts (built from the config's `env` section)."""
    factory: Callable[..., Any]          # factory(prompt, **options) -> Environment (picklable)
    options: dict = field(default_factory=dict)
    max_steps: int = 50
    max_step_tokens: int = 512
    max_prompt_tokens: int | None = None
    episode_timeout_s: float | None = None
    step_timeout_s: float = 60.0
    num_workers: int = 2
    invalid_format_penalty: float = 0.1
    reward_scale: float = 1.0
    start_method: str = "spawn"

    def make_pool(self) -> EnvPool:
        return EnvPool(self.factory, num_workers=self.num_workers, step_timeout_s=self.step_timeout_s,
                       options=self.options, start_method=self.start_method)


def pad_rows(batch: dict, multiple: int) -> tuple[dict, int]:
    """Append copies of row 0 with every mask zeroed so that the row count is a positive multiple of
    `multiple` (TRL splits a generation batch into that many equal micro-batches). Padding rows carry
    no token (completion_mask 0, advantages 0, PPO's value_mask 0) and group_index −1. Returns (batch, padding rows)."""
    B = batch["completion_ids"].shape[0]
    target = max(multiple, -(-B // multiple) * multiple)
    extra = target - B
    if extra == 0:
        return batch, 0
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == B:
            pad = value[:1].expand(extra, *value.shape[1:]).clone()
            if key in ("completion_mask", "advantages", "value_mask"):  # (value_mask: PPO's critic targets)
                pad.zero_()
            elif key == "group_index":
                pad.fill_(-1)
            out[key] = torch.cat([value, pad])
        else:
            out[key] = value
    return out, extra


__all__ += ["StepRolloutConfig", "pad_rows"]
