"""Problem -> prompt: chat messages with the answer-format instruction, rendered for a tokenizer.

The instruction follows the usual math-RL convention (Qwen2.5-Math, DeepSeek-R1 evaluations):
the problem, a newline, then "Please reason step by step, and put your final answer within
\\boxed{}." A problem whose prompt is already a chat list (veRL data) is used unchanged: such
data sets carry their own instruction; so is a TRL-format row's prompt (`resrl.data.problem.TRL_COLUMNS`),
a string one without a chat template, as TRL uses it.
"""

from __future__ import annotations

from typing import Sequence

from resrl.data.problem import TRL_COLUMNS, Problem, is_trl_row
from resrl.errors import DataError

DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def build_prompt_messages(problem: Problem, instruction: str | None = DEFAULT_INSTRUCTION) -> list[dict]:
    """Chat messages for a problem: [{"role": "user", "content": problem + "\\n" + instruction}].

    A chat-list prompt is returned as a copy, without adding the instruction. An empty or None
    instruction adds nothing.
    """
    if isinstance(problem.prompt, list):
        return [dict(m) for m in problem.prompt]
    content = problem.prompt if not instruction or is_trl_row(problem) else f"{problem.prompt}\n{instruction}"
    return [{"role": "user", "content": content}]


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(problem: Problem, tokenizer, instruction: str | None = DEFAULT_INSTRUCTION,
                  use_chat_template: bool | None = None) -> str:
    """The text fed to the model.

    use_chat_template: None = when the tokenizer has one; True = required (ValueError if the
    tokenizer has none); False = plain text (the message contents joined by blank lines, then a
    newline), for base models without a chat template.
    """
    if is_trl_row(problem) and isinstance(problem.prompt, str):
        return problem.prompt  # TRL's standard format: the text as it is, no chat template
    messages = build_prompt_messages(problem, instruction)
    if use_chat_template is None:
        use_chat_template = has_chat_template(tokenizer)
    if use_chat_template:
        if not has_chat_template(tokenizer):
            raise ValueError("use_chat_template=True but the tokenizer has no chat template")
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages) + "\n"


def render_prompts(problems: Sequence[Problem], tokenizer, instruction: str | None = DEFAULT_INSTRUCTION,
                   use_chat_template: bool | None = None) -> list[str]:
    return [render_prompt(p, tokenizer, instruction, use_chat_template) for p in problems]


def problems_to_dataset(problems: Sequence[Problem], instruction: str | None = DEFAULT_INSTRUCTION,
                        conversational: bool = True):
    """A `datasets.Dataset` for TRL's GRPOTrainer with columns prompt, answer, id, data_source.

    conversational=True: `prompt` is a chat list (TRL applies the tokenizer's chat template);
    False: a plain string (problem + instruction), for tokenizers without a chat template.
    """
    from datasets import Dataset

    if not problems:
        raise ValueError("problems_to_dataset: no problems")
    trl = [is_trl_row(p) for p in problems]
    if any(trl) and not all(trl):
        raise DataError(f"the training data mixes TRL rows (a 'prompt' used as it is, e.g. {problems[trl.index(True)].id!r}) "
                        f"with other rows (e.g. {problems[trl.index(False)].id!r}): use one format")
    rows = {"prompt": [], "answer": [], "id": [], "data_source": []}
    for p in problems:
        if trl[0]:  # TRL rows: the prompt as TRL takes it (a string stays a string)
            rows["prompt"].append(p.prompt)
        else:
            messages = build_prompt_messages(p, instruction)
            rows["prompt"].append(messages if conversational else "\n\n".join(m["content"] for m in messages))
        rows["answer"].append(p.answer)
        rows["id"].append(p.id)
        rows["data_source"].append(p.data_source)
    if trl[0]:  # their other columns, for TRL-style rewards (a row without one gives None)
        names = list(dict.fromkeys(k for p in problems for k in p.extra[TRL_COLUMNS]))
        for name in names:
            rows[name] = [p.extra[TRL_COLUMNS].get(name) for p in problems]
    try:
        return Dataset.from_dict(rows)
    except (TypeError, ValueError) as exc:  # pyarrow: a column whose rows have different types
        raise DataError(f"the training data's columns cannot form one table ({exc}); give every row the same "
                        f"types per column") from None


__all__ = ["DEFAULT_INSTRUCTION", "build_prompt_messages", "has_chat_template", "render_prompt",
           "render_prompts", "problems_to_dataset"]
