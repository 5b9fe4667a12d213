"""`WebShopEnv`: one WebShop-format goal on its catalog as an `Environment` (step layout).

    env = WebShopSpec(max_steps=15).build()
    env.reset(task_row)          # a row of resrl.tasks.webshop.data.load_goal_rows (dict or its JSON)
    env.step_prompt()            # the fresh prompt of this step (verl-agent's layout)
    env.step(model_text)         # StepResult(observation, reward, done, info)
    env.anchor()                 # GiGPO's anchor: the page as the agent sees it (or the exact state)
    env.expert_action()          # the scripted expert's next reply (resrl.tasks.webshop.policies)

Step semantics (WebShop's text environment, verl-agent's agent settings):
- the action is read from the model's message: the text inside the first <action>...</action>
  (at most `max_text_chars` of the message are read; the action is cut to `max_action_chars`,
  whitespace collapsed, non-printable characters dropped). The format is valid with that block
  and, for prompt_style "verl-agent", a <think>...</think> block (verl-agent's `valid`);
- an admissible action is `search[query]` on the search page (a non-empty query) or `click[x]`
  for a clickable x of the page (resrl.tasks.webshop.site), compared lower-cased as WebShop does.
  Anything else changes nothing (WebShop answers an invalid action with the same page): the step
  counts, `info["invalid_action"]` is set, and the next prompt says the action was not admissible;
- `click[buy now]` ends the episode: the purchase is scored by WebShop's reward
  (resrl.tasks.webshop.reward, eq. 1). The step reward is that score (`reward="score"`, WebShop's
  own) or 1 / 0 for a perfect purchase (`reward="success"`, verl-agent's won, without its ×10);
  success (`won`) is score = 1 either way;
- the episode ends after `max_steps` (15, the paper's WebShop cap) unbought: reward 0;
- `info` of every step: invalid_action, invalid_format, format_reason, action, step, page; on the
  last step also won, score, task_type (the goal's category), steps, invalid_actions,
  invalid_formats, game (the row id), bought (ASIN or None), options (chosen), reward_parts.

Prompt styles: "verl-agent" (the task, the last `history_window` observation/action pairs, the
observation, the admissible actions, reason in <think>, act in <action>; verl-agent's WebShop
template's fields, our wording) and "compact" (for the demo's tiny character model: the
instruction, the page, the last action if it was not admissible; answer <action>...</action>).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from resrl.envs.base import Environment, StepResult
from resrl.errors import DataError, InputError

STYLES = ("verl-agent", "compact")
REWARDS = ("score", "success")
NOT_ADMISSIBLE = "Your last action was not admissible; nothing happened."
_ACTION = re.compile(r"^(search|click)\[(.*)\]$", re.DOTALL)
_CJK = re.compile(r"[\u4e00-\u9fff]")

VERL_FIRST = """You are an expert autonomous agent shopping in the WebShop e-commerce environment.
Your task is to: {task}.
Your current observation is: {observation}.
Your admissible actions of the current situation are:
[
{actions}
].

Now it is your turn to take one action for the current step.
First reason step by step about the situation and which admissible action best advances the shopping goal; this reasoning MUST be enclosed in <think> </think> tags.
Then give the chosen admissible action inside <action> </action> tags.
"""

VERL_STEP = """You are an expert autonomous agent shopping in the WebShop e-commerce environment.
Your task is to: {task}.
Before this step you have already taken {steps} step(s). The most recent {window} observation(s) and the actions you took after them: {history}
You are now at step {step} and your current observation is: {observation}.{notice}
Your admissible actions of the current situation are:
[
{actions}
].

Now it is your turn to take one action for the current step.
First reason step by step about the situation and which admissible action best advances the shopping goal; this reasoning MUST be enclosed in <think> </think> tags.
Then give the chosen admissible action inside <action> </action> tags.
"""


@dataclass
class ParsedAction:
    action: str          # the action sent to the site ("" when nothing usable was found)
    format_ok: bool
    reason: str


def parse_action(text: Any, style: str = "verl-agent", max_text_chars: int = 20000,
                 max_action_chars: int = 200) -> ParsedAction:
    """The model's message -> the action (module docstring). Never raises; everything bounded."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    text = text[:max_text_chars]
    low = text.lower()
    start = low.find("<action>")
    end = low.find("</action>", start + 8) if start != -1 else -1
    reasons = []
    if start != -1 and end != -1:
        action = text[start + 8:end]
    else:
        action = ""
        reasons.append("no <action>...</action>")
    if style == "verl-agent" and (low.find("<think>") == -1 or low.find("</think>") == -1):
        reasons.append("no <think>...</think>")
    if _CJK.search(text):
        reasons.append("CJK characters")
    action = "".join(c for c in action if c.isprintable() or c.isspace())
    action = " ".join(action.split())[:max_action_chars]
    return ParsedAction(action=action, format_ok=not reasons, reason="; ".join(reasons))


@dataclass(frozen=True)
class WebShopSpec:
    """Everything needed to build a `WebShopEnv` (picklable: sent to environment workers)."""

    max_steps: int = 15
    history_window: int = 2
    prompt_style: str = "verl-agent"
    observation_mode: str = "text"        # WebShop's simple text, or "text_rich"
    reward: str = "score"                 # or "success"
    page_size: int = 10
    show_attrs: bool = False
    anchor_mode: str = "observation"      # or "state"
    max_text_chars: int = 20000
    max_action_chars: int = 200
    type_words: str | None = None        # "module:function" for the type reward's words (None: reward.type_words)

    def __post_init__(self) -> None:
        from resrl.tasks.webshop.site import OBSERVATION_MODES

        for key, allowed in (("prompt_style", STYLES), ("reward", REWARDS), ("observation_mode", OBSERVATION_MODES),
                             ("anchor_mode", ("observation", "state"))):
            if getattr(self, key) not in allowed:
                raise InputError(f"webshop: {key} must be one of {list(allowed)}, got {getattr(self, key)!r}")
        for key in ("max_steps", "page_size", "max_text_chars", "max_action_chars"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"webshop: {key} must be an int >= 1, got {v!r}")
        if not isinstance(self.history_window, int) or self.history_window < 0:
            raise InputError(f"webshop: history_window must be an int >= 0, got {self.history_window!r}")

    def build(self, task: Any = None) -> "WebShopEnv":
        return WebShopEnv(self, task)


def task_row(task: Any) -> dict:
    """A goal row from a dict, its JSON string, or a Problem whose `extra` holds it."""
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            raise InputError("webshop: a task given as text must be a goal row as JSON") from None
    if hasattr(task, "extra") and isinstance(getattr(task, "extra"), dict):
        task = task.extra
    if not isinstance(task, dict) or "catalog" not in task or "goal" not in task:
        raise InputError(f"webshop: expected a goal row with 'catalog' and 'goal' (resrl.tasks.webshop.data."
                         f"load_goal_rows), got {type(task).__name__}")
    return task


class WebShopEnv(Environment):
    """One goal at a time (module docstring)."""

    def __init__(self, spec: WebShopSpec | None = None, task: Any = None, **overrides) -> None:
        spec = spec if spec is not None else WebShopSpec(**overrides)
        self.spec = WebShopSpec(**{**asdict(spec), **overrides}) if overrides and spec is not None else spec
        self.task = task
        self._started = False
        self.done = True

    def __getstate__(self):
        return {"spec": self.spec, "task": self.task}

    def __setstate__(self, state):
        self.__init__(state["spec"], state["task"])

    # ---- episode --------------------------------------------------------------------------------
    def reset(self, prompt: Any = None) -> list[dict]:
        from resrl.tasks.webshop.data import Goal, load_catalog
        from resrl.tasks.webshop.site import Site

        task = prompt if prompt is not None else self.task
        if task is None:
            raise InputError("WebShopEnv.reset: no task given (a goal row of resrl.tasks.webshop.data)")
        row = task_row(task)
        self.task = row
        self.catalog = load_catalog(row["catalog"], seed=int(row.get("seed", 0)))
        self.goal = Goal.from_dict(row["goal"], where=f"webshop row {row.get('id', '?')}")
        if self.goal.asin not in self.catalog.by_asin:
            raise DataError(f"webshop row {row.get('id', '?')}: goal product {self.goal.asin!r} is not in {row['catalog']}")
        self.game = str(row.get("id", self.goal.asin))
        self.task_type = self.goal.category or "webshop"
        self.site = Site(self.catalog, self.goal.instruction, self.spec.page_size, self.spec.show_attrs)
        self.history: list[tuple[str, str]] = []
        self.steps = self.invalid_actions = self.invalid_formats = 0
        self.last_invalid = False
        self.won, self.done, self._started = False, False, True
        self.score, self.parts, self.bought = 0.0, None, None
        return self.step_prompt()

    @property
    def observation(self) -> str:
        """The page after the instruction (verl-agent's observation)."""
        return self.site.text(self.spec.observation_mode, after_instruction=True)

    def available_actions(self) -> list[str]:
        return self.site.available_actions()

    def _need_started(self) -> None:
        if not self._started:
            raise RuntimeError("WebShopEnv: call reset() first")

    def step_prompt(self) -> list[dict]:
        self._need_started()
        obs, task = self.observation, self.goal.instruction
        notice = f"\n{NOT_ADMISSIBLE}" if self.last_invalid else ""
        if self.spec.prompt_style == "compact":  # the options chosen so far as WebShop's text_rich mode says them
            return [{"role": "user", "content": f"Instruction: {task}\nPage: {self._chosen()}{obs}{notice}"}]
        actions = "\n".join(f"'{a}'," for a in self.available_actions())
        window = self.history[-self.spec.history_window:] if self.spec.history_window else []
        if not window:
            text = VERL_FIRST.format(task=task, observation=obs + notice, actions=actions)
        else:
            first = len(self.history) - len(window) + 1
            lines = [f"[Observation {first + i}: '{o}', Action {first + i}: '{a}']" for i, (o, a) in enumerate(window)]
            text = VERL_STEP.format(task=task, steps=len(self.history), window=len(window), history="\n" + "\n".join(lines),
                                    step=len(self.history) + 1, observation=obs, notice=notice, actions=actions)
        return [{"role": "user", "content": text}]

    def anchor(self) -> str:
        self._need_started()
        if self.spec.anchor_mode == "state":
            return "state:" + hashlib.sha1(self.site.state_key().encode()).hexdigest()
        if self.spec.prompt_style == "compact":  # what the compact prompt shows: the options chosen, then the page
            return self._chosen() + self.observation
        return self.observation

    def _chosen(self) -> str:
        return "".join(f"You have clicked {v}. " for v in self.site.session.options.values())

    def admissible(self, action: str) -> bool:
        """Whether `action` (already parsed) does something on the current page."""
        m = _ACTION.match(action)
        if m is None:
            return False
        name, arg = m.group(1), m.group(2).strip().lower()
        if name == "search":
            return self.site.has_search_bar() and bool(arg)
        return arg in self.site.clickables()

    def step(self, model_text: str) -> StepResult:
        from resrl.tasks.webshop.reward import resolve_words, webshop_reward

        self._need_started()
        if self.done:
            raise RuntimeError("WebShopEnv.step called after the episode ended (reset() starts the next)")
        parsed = parse_action(model_text, self.spec.prompt_style, self.spec.max_text_chars, self.spec.max_action_chars)
        before = self.observation
        valid = self.admissible(parsed.action)
        bought = False
        if valid:
            name, arg = _ACTION.match(parsed.action).groups()
            arg = arg.strip().lower()
            if name == "search":
                self.site.search(arg)
            else:
                bought = self.site.click(arg)
        self.history.append((before, parsed.action))
        self.steps += 1
        self.invalid_actions += not valid
        self.invalid_formats += not parsed.format_ok
        self.last_invalid = not valid
        reward = 0.0
        if bought:
            s = self.site.session
            product = self.catalog.by_asin[s.asin]
            self.parts = webshop_reward(product, self.goal, self.catalog.prices[s.asin], s.options,
                                        words=resolve_words(self.spec.type_words))
            self.score, self.won, self.bought = self.parts.score, self.parts.won, s.asin
            reward = self.score if self.spec.reward == "score" else float(self.won)
        self.done = bought or self.steps >= self.spec.max_steps
        info = {"invalid_action": not valid, "invalid_format": not parsed.format_ok, "action": parsed.action,
                "format_reason": parsed.reason, "step": self.steps, "page": self.site.session.page}
        if self.done:
            info.update(won=self.won, score=self.score, task_type=self.task_type, steps=self.steps,
                        invalid_actions=self.invalid_actions, invalid_formats=self.invalid_formats, game=self.game,
                        bought=self.bought, options=dict(self.site.session.options) if bought else {},
                        reward_parts=self.parts.as_dict() if self.parts is not None else None)
            return StepResult([], reward, True, info)
        return StepResult(self.step_prompt(), reward, False, info)

    def expert_action(self) -> str:
        """The scripted expert's reply for the current state (resrl.tasks.webshop.policies.expert_action)."""
        from resrl.tasks.webshop.policies import expert_action

        self._need_started()
        return expert_action(self)

    def final_reward(self) -> float:
        return 0.0  # stopped before buying: nothing bought


def webshop_step_env(prompt: Any, history_window: int = 2, max_steps: int = 15, **options) -> WebShopEnv:
    """The step-layout factory of `env.name: webshop` (imported by name in the environment workers):
    a `WebShopEnv` for one goal row (a dict or its JSON); options are `WebShopSpec` fields."""
    return WebShopEnv(WebShopSpec(max_steps=max_steps, history_window=history_window, **options), task_row(prompt))


__all__ = ["WebShopEnv", "WebShopSpec", "ParsedAction", "parse_action", "webshop_step_env", "task_row", "STYLES",
           "REWARDS", "NOT_ADMISSIBLE"]
