"""Tasks of the learning checks (tests/test_learning.py), one per rollout layout, written the way a
user writes them: a data set and a reward function (single-turn), an environment factory named in
the config as `learning_tasks:make_tool_env` (multi-turn) or `learning_tasks:make_two_step_env`
(step layout). Module-level, so that the step layout's environment workers import them by name.

Every task is a choice among the letters a, b, c, d; the letter `TARGET` pays. A tiny model
(untied input / output embeddings, `build_untied_model`) is warm-started (`warm_start`) to answer
one letter uniformly and stop, so that the rewarded choice starts near 1/4 and every message ends
(a random tiny model almost never samples EOS, and the multi-turn rollout hands the environment
only messages that end). The checks read the rewarded choice's probability EXACTLY from the
model's logits on the fixed contexts (`choice_probability`).

    single-turn   prompt "Pick a box (k)."                 reward 1 iff the completion starts with TARGET
    multi-turn    model: the call open(<first letter>)  ->  tool: what the box holds  ->  model: any
                  letter; reward (only at the end) 1 iff the tool was called with TARGET
    step layout   step 1 "Step 1 of 2: pick a door."  ->  step 2 "Step 2 of 2: pick a box."; the
                  step-1 choice pays nothing, reward 1 iff the step-2 choice is TARGET

Why untied embeddings: with the tiny model's tied embeddings, GRPO on these tasks collapsed in 1-2
of 5 seeds at every learning rate tried (2e-4 to 1e-3): P(EOS as the FIRST token) grew
0.005 -> 0.09 over six updates and to 0.98 on the seventh (multi-turn, lr 5e-4), after which every
answer is empty and the reward 0. Likely cause: the updates of the EOS token after the letter
(gradients near zero that Adam scales to full-size steps) move EOS's row of the shared embedding
towards the letter's, which the rewarded first position pulls in turn. With untied embeddings no
run of the checks collapsed (5 seeds each).
"""

from __future__ import annotations

import torch

from resrl.envs.base import Environment, StepResult
from resrl.models.tiny import TinyModelConfig, build_tiny_model

LETTERS = "abcd"
TARGET = "c"

# 2 decoder layers, d = 32 (as tests/train_helpers.SMALL), short contexts
LEARNING_MODEL = TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                 head_dim=16, intermediate_size=64, max_position_embeddings=160)


# ---- single-turn ----------------------------------------------------------------------------------

def pick_prompts(n: int = 8) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Pick a box ({k})."}] for k in range(n)]


def pick_dataset(n: int = 8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": p, "answer": TARGET} for p in pick_prompts(n)])


def pick_reward(completions: list[str], answers: list[str]) -> list[float]:
    """1 when the completion starts with the answer letter."""
    return [float(c.strip()[:1] == a) for c, a in zip(completions, answers)]


# ---- multi-turn: a tool call whose argument decides the reward --------------------------------------

TOOL_PROMPT = [{"role": "user", "content": "Open one box: a, b, c or d."}]


def tool_answer(arg: str) -> list[dict]:
    return [{"role": "tool", "content": f"box {arg[:1] or '?'}: " + ("key" if arg == TARGET else "empty")}]


class ToolEnv(Environment):
    """Turn 1: the model's message is the argument of `open(box)`; the tool answers what the box
    holds. Turn 2: any message ends the trajectory; the reward (given only now) is 1 iff the tool
    was called with TARGET."""

    def reset(self, prompt=None):
        self.turn, self.arg = 0, None
        return list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]

    def step(self, model_text):
        self.turn += 1
        if self.turn == 1:
            self.arg = model_text.strip()[:1]
            return StepResult(tool_answer(self.arg), 0.0, False, {"argument": self.arg})
        return StepResult([], float(self.arg == TARGET), True, {"argument": self.arg})


def make_tool_env(prompt):
    return ToolEnv()


def tool_dataset(n: int = 8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": TOOL_PROMPT, "answer": str(k)} for k in range(n)])


# ---- step layout: two steps, only the second step's choice pays -------------------------------------

class TwoStepEnv(Environment):
    """Step 1: any reply moves on (the step-2 state does not depend on it: one anchor per step);
    step 2: reward 1 iff the reply is TARGET, and the episode ends."""

    def __init__(self, prompt=None, history_window: int = 0):
        self.reset(prompt)

    def reset(self, prompt=None):
        self.steps = 0
        return self.step_prompt()

    def step_prompt(self):
        what = "door" if self.steps == 0 else "box"
        return [{"role": "user", "content": f"Step {self.steps + 1} of 2: pick a {what}."}]

    def anchor(self):
        return f"step {self.steps}"

    def step(self, model_text):
        choice = model_text.strip()[:1]
        self.steps += 1
        info = {"invalid_format": choice not in tuple(LETTERS), "invalid_action": choice not in tuple(LETTERS),
                "action": choice}
        if self.steps == 1:
            return StepResult([{"role": "user", "content": "ok"}], 0.0, False, info)
        won = choice == TARGET
        return StepResult([], float(won), True, {**info, "won": won, "task_type": "two-step", "steps": 2})


def make_two_step_env(prompt, history_window: int = 0, **_ignored):
    return TwoStepEnv(prompt, history_window)


def step_prompts() -> list[list[dict]]:
    """The two step prompts (identical in every episode)."""
    env = TwoStepEnv()
    first = env.step_prompt()
    env.step("a")
    return [first, env.step_prompt()]


def write_step_games(path, n: int = 4) -> str:
    import json

    with open(path, "w") as f:
        for k in range(n):
            f.write(json.dumps({"problem": f"game {k}", "answer": str(k)}) + "\n")
    return str(path)


# ---- the warm start and the exact probability ---------------------------------------------------------

def _chat_ids(tokenizer, messages) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    return list(out["input_ids"] if isinstance(out, dict) else out)


def warm_start(path, contexts: list[list[dict]], *, steps: int = 150, lr: float = 3e-3, seed: int = 0,
               build=None) -> str:
    """A tiny model at `path` trained to answer each context (chat messages) with one letter of
    LETTERS, uniformly, then EOS: cross-entropy on the answer tokens (every context x every letter
    in each full-batch step, Adam). `build(path)`: writes the untrained model and its tokenizer there
    (default: LEARNING_MODEL, `build_untied_model`). Returns `path`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    if build is None:
        build_untied_model(path, LEARNING_MODEL)
    else:
        build(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    eos = tokenizer.eos_token_id
    rows = []
    for ctx in contexts:
        ids = _chat_ids(tokenizer, ctx)
        for letter in LETTERS:
            answer = tokenizer(letter, add_special_tokens=False)["input_ids"] + [eos]
            rows.append((ids + answer, len(ids)))
    L = max(len(r) for r, _ in rows)
    input_ids = torch.full((len(rows), L), tokenizer.pad_token_id)
    labels = torch.full((len(rows), L), -100)
    attn = torch.zeros((len(rows), L), dtype=torch.long)
    for b, (ids, start) in enumerate(rows):
        input_ids[b, :len(ids)] = torch.tensor(ids)
        labels[b, start:len(ids)] = torch.tensor(ids[start:])
        attn[b, :len(ids)] = 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for _ in range(steps):
            loss = model(input_ids=input_ids, attention_mask=attn, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.save_pretrained(path)
    return str(path)


def build_untied_model(path, config: TinyModelConfig):
    """The tiny model with separate input and output embeddings."""
    from transformers import AutoConfig, AutoModelForCausalLM

    build_tiny_model(path, config)
    model_config = AutoConfig.from_pretrained(path)
    model_config.tie_word_embeddings = False
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_config(model_config, dtype=torch.float32)
    model.generation_config = AutoModelForCausalLM.from_pretrained(path).generation_config
    model.save_pretrained(path)


@torch.no_grad()
def choice_probability(model, tokenizer, contexts: list[list[dict]], letter: str = TARGET,
                       then_eos: bool = False) -> float:
    """Mean over `contexts` of P(first answer token = letter | context) — with `then_eos`,
    P(letter, then EOS | context) — under the model's full softmax at temperature 1 (the
    checks' training temperature), from its logits."""
    was_training = model.training
    model.eval()
    eos = tokenizer.eos_token_id
    (tok,) = tokenizer(letter, add_special_tokens=False)["input_ids"]
    total = 0.0
    for ctx in contexts:
        ids = torch.tensor([_chat_ids(tokenizer, ctx) + [tok]])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, -2:].double(), dim=-1)
        total += float(torch.exp(logp[0, tok] + (logp[1, eos] if then_eos else 0.0)))
    model.train(was_training)
    return total / len(contexts)


def tool_contexts() -> tuple[list[list[dict]], list[list[dict]]]:
    """(contexts of the tool call, contexts of the second message after each possible call)."""
    second = [TOOL_PROMPT + [{"role": "assistant", "content": a}] + tool_answer(a) for a in LETTERS]
    return [TOOL_PROMPT], second
