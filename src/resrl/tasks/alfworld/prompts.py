"""Prompts for ALFWorld-format games and the parsing of the model's answer.

Two styles (`prompt_style`):

verl-agent  (default; what GiGPO / EMPG / the paper train and evaluate with) — a fresh prompt every
            step, one user message: the task, how many steps were taken, the last `history_window`
            (default 2) observation/action pairs, the step number and current observation, the
            admissible actions (quoted, 'help' left out), and the request to reason inside
            <think>...</think> and answer one admissible action inside <action>...</action>. The
            first step has no history part (only the observation, which holds the task). Same
            structure and fields as verl-agent's ALFWORLD_TEMPLATE / _NO_HIS (our wording).
react       the untrained prompting baseline (the paper's "ReAct" row, zero-shot): the whole
            transcript so far (every action and what followed), then "think, then act": the answer
            is `Think: ...` followed by `Action: <command>` on its own line (<action> tags are
            accepted too).

Parsing follows verl-agent's projection: the action is the text inside the first
<action>...</action> (lower-cased, whitespace collapsed); the format is valid only when an
<action> block and a <think>...</think> block are present and the text has no CJK characters.
Without an <action> block the fallback action is the last 30 characters (lower-cased), as in
verl-agent — almost never an admissible command, so the step becomes "Nothing happens.". The
react style's format is valid when an `Action:` line (or an <action> block) is present.
Every input is bounded: at most `max_text_chars` of the model's text are read (the tail is
ignored), and the action is cut to `max_action_chars`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STYLES = ("verl-agent", "react")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_REACT_ACTION = re.compile(r"(?im)^\s*action\s*:\s*(.+?)\s*$")

VERL_FIRST = """
You are an expert agent acting in the ALFRED embodied household environment.
Your current observation is: {observation}
The admissible actions in the current situation are: [{actions}].

Now it is your turn to act.
First reason step by step about the current situation; this reasoning MUST be enclosed in <think> </think> tags.
Then choose one admissible action for this step and give it inside <action> </action> tags.
"""

VERL_STEP = """
You are an expert agent acting in the ALFRED embodied household environment. Your task is to: {task}
Before this step you have already taken {steps} step(s). The most recent {window} observation(s) and the actions you took after them: {history}
You are now at step {step} and your current observation is: {observation}
The admissible actions in the current situation are: [{actions}].

Now it is your turn to act.
First reason step by step about the current situation; this reasoning MUST be enclosed in <think> </think> tags.
Then choose one admissible action for this step and give it inside <action> </action> tags.
"""

REACT = """You are a household agent in a text-based home (ALFRED's ALFWorld). Reach the goal with the available actions.
Your task is to: {task}

Transcript so far:
{transcript}

Admissible actions now: [{actions}].

Think, then act. Answer in exactly this form:
Think: <your reasoning about what to do next>
Action: <one admissible action, copied exactly>
"""


def format_actions(admissible: list[str]) -> str:
    return "\n ".join(f"'{a}'" for a in admissible if a != "help")


def step_messages(style: str, task: str, observation: str, admissible: list[str],
                  history: list[tuple[str, str]], window: int = 2) -> list[dict]:
    """The chat messages of a fresh per-step prompt.

    history: every (observation, action) pair of this episode so far, oldest first (the observation
    the action answered); observation: the current one; task: the task sentence.
    """
    if style == "verl-agent":
        if not history or window <= 0:
            text = VERL_FIRST.format(observation=observation, actions=format_actions(admissible))
        else:
            recent = history[-window:]
            first = len(history) - len(recent) + 1
            lines = [f"[Observation {first + i}: '{o}', Action {first + i}: '{a}']" for i, (o, a) in enumerate(recent)]
            text = VERL_STEP.format(task=task, steps=len(history), window=len(recent), history="\n" + "\n".join(lines),
                                    step=len(history) + 1, observation=observation, actions=format_actions(admissible))
        return [{"role": "user", "content": text}]
    if style == "react":
        parts = [history[0][0] if history else observation]
        for i, (_, action) in enumerate(history):
            following = history[i + 1][0] if i + 1 < len(history) else observation
            parts.append(f"> {action}\n{following}")
        return [{"role": "user", "content": REACT.format(task=task, transcript="\n".join(parts),
                                                         actions=format_actions(admissible))}]
    raise ValueError(f"unknown prompt style {style!r} (styles: {STYLES})")


def observation_message(style: str, observation: str, admissible: list[str], step: int) -> list[dict]:
    """The environment's answer in the concatenated multi-turn layout (one growing conversation)."""
    tail = ("Think, then answer `Think: ...` and `Action: <command>`." if style == "react" else
            "Reason inside <think> </think>, then give one admissible action inside <action> </action>.")
    return [{"role": "user", "content": f"Step {step + 1}. Observation: {observation}\n"
                                        f"The admissible actions are: [{format_actions(admissible)}].\n{tail}"}]


@dataclass
class ParsedAction:
    action: str          # what is sent to the engine ("" when nothing usable was found)
    format_ok: bool      # verl-agent's `valid` (the rollout's 0.1 penalty applies when False)
    reason: str          # "" or why the format is invalid


def parse_action(text: str, style: str = "verl-agent", max_text_chars: int = 20000,
                 max_action_chars: int = 200) -> ParsedAction:
    """The model's message -> the command for the engine (module docstring). Never raises."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    text = text[:max_text_chars]
    low = text.lower()
    start, reasons = low.find("<action>"), []
    end = low.find("</action>", start + 8) if start != -1 else -1
    if start != -1 and end != -1:
        action = low[start + 8:end]
    elif style == "react" and _REACT_ACTION.search(text):
        action = _REACT_ACTION.findall(text)[-1].lower()
    else:
        action = low[-30:]
        reasons.append("no <action>...</action>" if style != "react" else "no 'Action:' line")
    if style != "react" and (low.find("<think>") == -1 or low.find("</think>") == -1):
        reasons.append("no <think>...</think>")
    if _CJK.search(text):
        reasons.append("CJK characters")
    action = " ".join(action.split())[:max_action_chars]
    return ParsedAction(action=action, format_ok=not reasons, reason="; ".join(reasons))


__all__ = ["STYLES", "format_actions", "step_messages", "observation_message", "parse_action", "ParsedAction"]
