"""Multi-turn rollouts: a policy talks to `resrl.envs` environments; the result is a TRL-style batch
whose `tool_mask` marks the model's own tokens (1) and the environment's tokens (0).

Token layout of one trajectory (what the trainer sees):

    prompt_ids      = render(first observation) + generation prompt
    completion_ids  = m_1  e_1  m_2  e_2 ... m_K            m_k: model tokens of step k (ending
                                                            with EOS unless cut), e_k: the
                                                            environment's answer rendered as chat
                                                            turns + the next generation prompt
    env_mask        = 1..1 0..0 1..1 0..0 ... 1..1          (same length as completion_ids)

TRL's `completion_mask` is 1 on every real token (model and environment: all are context for
later tokens); the trainer multiplies it by `tool_mask` (`ResRLTrainer._loss_mask`), so the
environment's tokens get no loss, no token advantage (they are outside the response mask given
to `resrl.core`) and take no part in ResRL's positive subspace or negative-residual quantiles.

Limits: `max_turns` model steps per trajectory (turn limit), `max_total_tokens` completion tokens
(model + environment, the trainer's `max_completion_length`) and `max_step_tokens` per model
step. A trajectory that stops on a limit is reported in `truncation` ("turn_limit",
"token_limit", "step_token_limit") and gets the environment's `final_reward()` (0 by default).

Environment tokens are rendered with the tokenizer's chat template the way TRL renders tool
results: the suffix a template adds after an assistant turn that ended with EOS (found with a
dummy conversation), so a model step is never re-tokenized. Without a chat template a plain
"[role] content" layout is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import torch

from resrl.envs.base import Environment

TRUNCATIONS = ("turn_limit", "token_limit", "step_token_limit")


class StepPolicy(Protocol):
    """contexts (token ids) and per-context token budgets -> generated ids (ending with EOS when the
    model stopped) and their sampling log-probs (or None)."""

    def __call__(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]
                 ) -> list[tuple[list[int], list[float] | None]]: ...


@dataclass
class Trajectory:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)       # 1 model token, 0 environment token
    logprobs: list[float] | None = field(default_factory=list)  # model tokens: sampling log-probs; env: 0.0
    reward: float = 0.0
    num_model_turns: int = 0
    done: bool = False
    truncation: str | None = None
    texts: list[str] = field(default_factory=list)        # the model's messages (the last one cut if truncated)
    info: dict = field(default_factory=dict)              # the environment's last info


class ChatRenderer:
    """Messages -> token ids for prompts and for environment answers between model steps."""

    def __init__(self, tokenizer, use_chat_template: bool | None = None) -> None:
        self.tokenizer = tokenizer
        has = bool(getattr(tokenizer, "chat_template", None))
        self.use_chat_template = has if use_chat_template is None else use_chat_template
        if self.use_chat_template and not has:
            raise ValueError("use_chat_template=True but the tokenizer has no chat template")

    def _apply(self, messages, add_generation_prompt: bool) -> list[int]:
        out = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt,
                                                 return_dict=False)
        return list(out["input_ids"] if isinstance(out, dict) else out)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        if self.use_chat_template:
            return self._apply(messages, True)
        text = "\n\n".join(m["content"] for m in messages) + "\n"
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def observation_ids(self, messages: list[dict]) -> list[int]:
        """Tokens that follow a finished model step: the environment's messages and the next
        generation prompt."""
        if not messages:
            return []
        if not self.use_chat_template:
            text = "\n" + "\n".join(f"[{m['role']}] {m['content']}" for m in messages) + "\n"
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        dummy = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = self._apply(dummy, False)
        full = self._apply(dummy + list(messages), True)
        eos = self.tokenizer.eos_token_id
        ends = [i for i, t in enumerate(prefix) if t == eos]
        if ends:  # the model's EOS closes its turn; what the template adds after it is env context
            prefix = prefix[: ends[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ValueError("chat template renders a conversation prefix differently: cannot split off "
                             "the environment's tokens")
        return full[len(prefix):]


def rollout_multi_turn(envs: Sequence[Environment], prompts: Sequence[Any], policy: StepPolicy,
                       renderer: ChatRenderer, *, eos_token_ids: Sequence[int], max_turns: int = 8,
                       max_total_tokens: int = 1024, max_step_tokens: int = 256,
                       decode: Callable[[list[int]], str] | None = None) -> list[Trajectory]:
    """Run one trajectory per (environment, prompt) pair, stepping all active ones together.

    For G trajectories per prompt pass G environments and the prompt G times. `decode` turns a
    model step's ids into the text given to `env.step` (default: the renderer's tokenizer,
    special tokens skipped).
    """
    if len(envs) != len(prompts):
        raise ValueError(f"rollout_multi_turn: {len(envs)} environments for {len(prompts)} prompts")
    if max_turns < 1 or max_total_tokens < 1 or max_step_tokens < 1:
        raise ValueError("rollout_multi_turn: max_turns, max_total_tokens and max_step_tokens must be >= 1")
    eos = set(int(e) for e in eos_token_ids)
    decode = decode or (lambda ids: renderer.tokenizer.decode(ids, skip_special_tokens=True))
    trajs = [Trajectory(prompt_ids=renderer.prompt_ids(env.reset(p))) for env, p in zip(envs, prompts)]
    active = list(range(len(trajs)))
    while active:
        budgets = [min(max_step_tokens, max_total_tokens - len(trajs[i].completion_ids)) for i in active]
        outs = policy([trajs[i].prompt_ids + trajs[i].completion_ids for i in active], budgets)
        if len(outs) != len(active):
            raise RuntimeError(f"policy returned {len(outs)} generations for {len(active)} contexts")
        still = []
        for i, budget, (ids, logps) in zip(active, budgets, outs):
            t, env = trajs[i], envs[i]
            ids = list(ids)[:budget]
            t.completion_ids += ids
            t.env_mask += [1] * len(ids)
            if t.logprobs is not None:
                t.logprobs = t.logprobs + list(logps)[: len(ids)] if logps is not None else None
            t.num_model_turns += 1
            ended = bool(ids) and ids[-1] in eos
            if not ended:  # cut by a token budget: no complete message to give the environment
                t.texts.append(decode(ids))  # kept for diagnosis, never sent to the environment
                t.truncation = "token_limit" if len(t.completion_ids) >= max_total_tokens else "step_token_limit"
                t.reward += env.final_reward()
                continue
            text = decode(ids)
            t.texts.append(text)
            step = env.step(text)
            t.reward += float(step.reward)
            t.info = dict(step.info)
            if step.done:
                t.done = True
                continue
            if t.num_model_turns >= max_turns:
                t.truncation = "turn_limit"
                t.reward += env.final_reward()
                continue
            obs = renderer.observation_ids(step.observation)
            if len(t.completion_ids) + len(obs) >= max_total_tokens:  # no room for the answer and a step
                t.truncation = "token_limit"
                t.reward += env.final_reward()
                continue
            t.completion_ids += obs
            t.env_mask += [0] * len(obs)
            if t.logprobs is not None:
                t.logprobs = t.logprobs + [0.0] * len(obs)
            still.append(i)
        active = still
    return trajs


def trajectories_to_batch(trajs: Sequence[Trajectory], pad_token_id: int) -> dict[str, Any]:
    """Trajectories -> the tensors TRL's GRPOTrainer batch holds (shapes: B rows, P prompt, C completion).

    prompt_ids / prompt_mask (B, P) left-padded; completion_ids / completion_mask / tool_mask (B, C)
    right-padded (tool_mask pads with 1 as TRL does: padding is already 0 in completion_mask);
    rewards (B,) float32; truncation: list of B reasons or None.
    """
    if not trajs:
        raise ValueError("trajectories_to_batch: no trajectories")
    B = len(trajs)
    P = max(len(t.prompt_ids) for t in trajs)
    C = max(1, max(len(t.completion_ids) for t in trajs))
    prompt_ids = torch.full((B, P), pad_token_id, dtype=torch.long)
    prompt_mask = torch.zeros((B, P), dtype=torch.long)
    completion_ids = torch.full((B, C), pad_token_id, dtype=torch.long)
    completion_mask = torch.zeros((B, C), dtype=torch.long)
    tool_mask = torch.ones((B, C), dtype=torch.long)
    for b, t in enumerate(trajs):
        n, m = len(t.prompt_ids), len(t.completion_ids)
        if len(t.env_mask) != m:
            raise ValueError(f"trajectory {b}: env_mask has {len(t.env_mask)} entries for {m} tokens")
        prompt_ids[b, P - n:] = torch.tensor(t.prompt_ids, dtype=torch.long)
        prompt_mask[b, P - n:] = 1
        if m:
            completion_ids[b, :m] = torch.tensor(t.completion_ids, dtype=torch.long)
            completion_mask[b, :m] = 1
            tool_mask[b, :m] = torch.tensor(t.env_mask, dtype=torch.long)
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "tool_mask": tool_mask,
            "rewards": torch.tensor([t.reward for t in trajs], dtype=torch.float32),
            "truncation": [t.truncation for t in trajs]}


def rollout_stats(trajs: Sequence[Trajectory]) -> dict[str, float]:
    """Per-batch diagnostics: reward, turns, model / environment token counts, truncation rates."""
    n = max(1, len(trajs))
    stats = {"reward_mean": sum(t.reward for t in trajs) / n,
             "model_turns_mean": sum(t.num_model_turns for t in trajs) / n,
             "model_tokens_mean": sum(sum(t.env_mask) for t in trajs) / n,
             "env_tokens_mean": sum(len(t.env_mask) - sum(t.env_mask) for t in trajs) / n,
             "done_frac": sum(t.done for t in trajs) / n}
    for reason in TRUNCATIONS:
        stats[f"truncated_{reason}_frac"] = sum(t.truncation == reason for t in trajs) / n
    return stats


class HFStepPolicy:
    """A `StepPolicy` sampling with a Hugging Face causal LM (left-padded batches, `generate`).

    Sampling follows these settings alone — by default the full softmax at `temperature`, the
    distribution the policy loss assumes — never the model's own `generation_config` (Qwen3 ships
    top_k 20, top_p 0.95): `resrl.models.generation`. top_k 0 / None: no top-k cut; min_p None:
    no min-p cut; generation_kwargs: further GenerationConfig fields (TRL's `generation_kwargs`).
    temperature 0: greedy. `trl_sampling_settings(args)` gives the settings of TRL's own generation:
    HFStepPolicy(model, tokenizer, **trl_sampling_settings(trainer.args))."""

    def __init__(self, model, tokenizer, temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None,
                 *, top_k: int | None = 0, min_p: float | None = None, repetition_penalty: float = 1.0,
                 generation_kwargs: dict | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p = temperature, top_p
        self.top_k, self.min_p, self.repetition_penalty = top_k, min_p, repetition_penalty
        self.generation_kwargs = dict(generation_kwargs or {})
        self.generator_seed = seed
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad)
        eos = getattr(model.generation_config, "eos_token_id", None) or tokenizer.eos_token_id
        self.eos_token_ids = [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]

    @torch.no_grad()
    def __call__(self, contexts, max_new_tokens):
        from resrl.models.generation import cut_after_eos, generate_with, sampling_config

        if self.generator_seed is not None:
            torch.manual_seed(self.generator_seed)
            self.generator_seed += 1
        device = next(self.model.parameters()).device
        L = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), L), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(contexts), L), dtype=torch.long)
        for b, c in enumerate(contexts):
            ids[b, L - len(c):] = torch.tensor(list(c), dtype=torch.long)
            attn[b, L - len(c):] = 1
        config = sampling_config(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, min_p=self.min_p,
                                 repetition_penalty=self.repetition_penalty, max_new_tokens=max(max_new_tokens),
                                 eos_token_id=self.eos_token_ids, pad_token_id=self.pad_token_id,
                                 extra=self.generation_kwargs)
        out = generate_with(self.model, config, input_ids=ids.to(device), attention_mask=attn.to(device))
        rows = [out[b, L:].tolist()[:budget] for b, budget in enumerate(max_new_tokens)]
        lengths, _ = cut_after_eos(rows, self.eos_token_ids)
        return [(row[:n], None) for row, n in zip(rows, lengths)]


def trl_sampling_settings(args) -> dict:
    """HFStepPolicy's keyword arguments that sample as TRL's own generation does with GRPOConfig
    `args` (temperature, top_p, top_k, min_p, repetition_penalty, generation_kwargs): every layout
    samples with the training config's settings."""
    return dict(temperature=args.temperature, top_p=getattr(args, "top_p", 1.0), top_k=getattr(args, "top_k", 0),
                min_p=getattr(args, "min_p", None), repetition_penalty=getattr(args, "repetition_penalty", 1.0),
                generation_kwargs=getattr(args, "generation_kwargs", None))


def make_trl_rollout_func(env_for_prompt: Callable[[Any], Environment], *, max_turns: int = 8,
                          max_step_tokens: int = 256, temperature: float | None = None):
    """A TRL 1.16 `rollout_func(prompts, trainer) -> dict` running multi-turn episodes.

    The returned dict has TRL's required keys (prompt_ids, completion_ids, logprobs) plus
    `env_mask` (TRL turns it into `tool_mask`), `env_reward` and `truncation` (forwarded to reward
    functions as columns). `env_for_prompt(prompt)` builds the environment of a prompt (TRL gives
    a rollout function the prompts only). The trainer's `max_completion_length` is the total
    token limit; generation uses the trainer's model with HF `generate` and the sampling settings
    of TRL's own generation (`trl_sampling_settings`), never the model's generation_config.
    """

    def rollout_func(prompts, trainer):
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        temp = trainer.args.temperature if temperature is None else temperature
        policy = HFStepPolicy(model, tokenizer, **{**trl_sampling_settings(trainer.args), "temperature": temp})
        trajs = rollout_multi_turn([env_for_prompt(p) for p in prompts], prompts, policy, ChatRenderer(tokenizer),
                                   eos_token_ids=policy.eos_token_ids, max_turns=max_turns,
                                   max_total_tokens=trainer.args.max_completion_length,
                                   max_step_tokens=max_step_tokens)
        return {"prompt_ids": [t.prompt_ids for t in trajs], "completion_ids": [t.completion_ids for t in trajs],
                "logprobs": None, "env_mask": [t.env_mask for t in trajs],
                "env_reward": [t.reward for t in trajs], "truncation": [t.truncation for t in trajs]}

    return rollout_func


def prompt_key(prompt: Any) -> str:
    """A stable key for a prompt (chat list or string), to find its environment in a mapping.
    Message keys whose value is None are left out: a `datasets` round trip (Arrow) fills keys that
    other messages have with None, and the prompt TRL hands back must find the same key."""
    if isinstance(prompt, str):
        return prompt
    messages = [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in prompt]
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


__all__ = ["StepPolicy", "Trajectory", "ChatRenderer", "rollout_multi_turn", "trajectories_to_batch",
           "rollout_stats", "HFStepPolicy", "trl_sampling_settings", "make_trl_rollout_func", "prompt_key", "TRUNCATIONS"]
