"""`resrl demo --task tools`: single-turn function calling, scored by the project's BFCL-style reward.

A problem is a short request in a tiny vocabulary; the model must pick the right function among
four (of arity 1, 1, 2 and 3) and fill its arguments from the request:

    prompt "ring bok;"          target "call(name=bok)"
    prompt "forecast dap;"      target "weather(city=dap)"
    prompt "wake 7 30;"         target "alarm(h=7,m=30)"
    prompt "12 usd in eur;"     target "fx(n=12,fr=usd,to=eur)"

Each function has two phrasings, only one of which names it (`ring` -> `call`, `forecast` ->
`weather`, `wake` -> `alarm`, and `fx` has no keyword at all), so choosing the function is a
mapping to learn, not a copy; names and cities are made-up three-letter words (consonant, vowel,
consonant: about 950 of them), so the string arguments must be copied from the request.

The completion is a call in Python-call syntax with bare words as string values — the most
compact format `resrl.tasks.tools.parsing` parses (BFCL's own format; a bare name is read as a
string, as BFCL reads it). Quoted strings (`call(name='bok')`), a one-call list
(`[call(name=bok)]`) or the JSON form are parsed too and are equally right; the alphabet of the
tiny model's tokenizer holds their characters, so the policy could emit any of them.

The reward is the tool family's own evaluation reward, `tool_call_exact`
(`resrl.tasks.tools.reward.ToolCallExactReward`: BFCL's AST matcher, `bfcl_match`), with answers in
the format it reads: `{"ground_truth": [the expected call], "functions": [the four docs]}`, so the
matcher also applies BFCL's type rules (integers for h, m and n, strings elsewhere, every required
parameter present). It pays 1.0 for exactly one call of the right function with exactly the right
arguments, in any order, and 0.0 for anything else: two calls, a call to every function, a missing
or extra argument, a wrong value or type, text around the call, output that does not parse.

The held-out split is a fixed set of distinct calls (each with one phrasing) drawn from the seed;
training streams never contain one of those calls, under any phrasing (as `ChainAdditionTask`).
"""

from __future__ import annotations

import json
import keyword
import random
import string
from dataclasses import dataclass
from functools import lru_cache

from resrl.data.problem import Problem
from resrl.data.synthetic import HeldOutSplitTask
from resrl.tasks.rewards import load_reward_function

DATA_SOURCE = "tools"

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
CURRENCIES = ("usd", "eur", "gbp", "jpy", "chf", "cad")

# the function docs every answer carries (BFCL's "function" entries: JSON-schema parameters)
FUNCTIONS = (
    {"name": "weather", "description": "Today's weather in a city.",
     "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "call", "description": "Phone a contact.",
     "parameters": {"type": "dict", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    {"name": "alarm", "description": "Set an alarm at h:m.",
     "parameters": {"type": "dict", "properties": {"h": {"type": "integer"}, "m": {"type": "integer"}},
                    "required": ["h", "m"]}},
    {"name": "fx", "description": "Convert n units of currency fr to currency to.",
     "parameters": {"type": "dict", "properties": {"n": {"type": "integer"}, "fr": {"type": "string"},
                                                   "to": {"type": "string"}},
                    "required": ["n", "fr", "to"]}},
)

# request phrasings per function: the first names the function, the second does not
PHRASINGS = {
    "weather": ("weather {city};", "forecast {city};"),
    "call": ("call {name};", "ring {name};"),
    "alarm": ("alarm {h} {m};", "wake {h} {m};"),
    "fx": ("{n} {fr} to {to};", "{n} {fr} in {to};"),
}

# the tokenizer's characters: what the prompts and targets use, plus what quoted strings, a call
# list and the JSON form need (so the reward, not the alphabet, is what rules those outputs out)
ALPHABET = string.ascii_lowercase + string.digits + " ;(),=[]'\"{}:"


@lru_cache(maxsize=None)
def words() -> tuple[str, ...]:
    """The made-up three-letter words (consonant, vowel, consonant) names and cities are drawn
    from; Python keywords (`for`, `def`, `not`, ...) are left out: a call must parse."""
    return tuple(w for w in (c + v + d for c in CONSONANTS for v in VOWELS for d in CONSONANTS)
                 if not keyword.iskeyword(w))


@dataclass
class ToolCallsConfig:
    """Shape of the task.

    num_test    size of the held-out split (distinct calls)
    seed        seed of the held-out split and of the training streams
    """

    num_test: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        space = 2 * len(words()) + 24 * 60 + 99 * len(CURRENCIES) * (len(CURRENCIES) - 1)
        if not isinstance(self.num_test, int) or not 1 <= self.num_test <= space // 8:
            # at most an eighth of the calls: the smallest function (weather, call) keeps most of its
            # calls for training
            raise ValueError(f"ToolCallsConfig.num_test must be an int in [1, {space // 8}], got {self.num_test!r}")


def format_call(name: str, arguments: dict) -> str:
    """{"name", "arguments"} -> the compact Python-call text: `fx(n=12,fr=usd,to=eur)` (bare words)."""
    return f"{name}(" + ",".join(f"{k}={v}" for k, v in arguments.items()) + ")"


def make_problem(name: str, arguments: dict, phrasing: int = 0) -> Problem:
    """One request: its prompt (the phrasing-th of `PHRASINGS[name]`), its answer (the expected call
    and the function docs, the reward's format) and in `extra` the call and its target text."""
    if name not in PHRASINGS:
        raise ValueError(f"unknown function {name!r} (choose from {sorted(PHRASINGS)})")
    prompt = PHRASINGS[name][phrasing].format(**arguments)
    call = {"name": name, "arguments": dict(arguments)}
    answer = json.dumps({"ground_truth": [call], "functions": list(FUNCTIONS)}, separators=(",", ":"))
    return Problem(id=f"{DATA_SOURCE}-{prompt}", prompt=prompt, answer=answer, data_source=DATA_SOURCE,
                   extra={"call": call, "target": format_call(name, arguments)})


def tool_target(problem: Problem) -> str:
    """The correct completion, e.g. `alarm(h=7,m=30)` (what the warm start imitates)."""
    try:
        return problem.extra["target"]
    except KeyError:
        raise ValueError(f"problem {problem.id!r} is not a tools-demo problem (no 'target' in extra)") from None


class ToolCallsTask(HeldOutSplitTask):
    """Generator of tool-call requests with a fixed held-out split of distinct calls: a held-out
    call never reaches training under any phrasing (the split key is the call, not the request)."""

    stream_prefix = "resrl-tools"

    def __init__(self, config: ToolCallsConfig | None = None) -> None:
        super().__init__(config or ToolCallsConfig())

    def draw_problem(self, rng: random.Random) -> Problem:
        name = rng.choice(tuple(PHRASINGS))
        if name == "weather":
            args = {"city": rng.choice(words())}
        elif name == "call":
            args = {"name": rng.choice(words())}
        elif name == "alarm":
            args = {"h": rng.randrange(24), "m": rng.randrange(60)}
        else:
            fr, to = rng.sample(CURRENCIES, 2)
            args = {"n": rng.randint(1, 99), "fr": fr, "to": to}
        return make_problem(name, args, rng.randrange(len(PHRASINGS[name])))

    def split_key(self, problem: Problem) -> str:
        return tool_target(problem)


def describe_tools(t: ToolCallsConfig) -> str:
    return ("one call among 4 functions (weather, call: 1 argument; alarm: 2; fx: 3), its arguments "
            "copied from the request")


# the tool family's evaluation reward (BFCL's matcher), one instance for training and evaluation
tool_reward = load_reward_function("tool_call_exact")  # the tool family's, through the registry (no family import here)


def tools_config(quick: bool = False):
    """`resrl demo --task tools`: the demo's budgets for this task (docs/demo.md, "Tasks").

    Completions are at most 22 characters (`fx(n=99,fr=usd,to=eur)`) + end of sequence, hence 24
    tokens for RL and 28 for evaluation."""
    from resrl.demo.config import tiny_model_experiment

    lengths = ("train.max_completion_length=24", "eval.max_new_tokens=28")
    return tiny_model_experiment("tools", ToolCallsConfig(num_test=48 if quick else 256), quick, quick_keys=lengths,
                                 keys=("start.check_every=10", "train.max_steps=150", *lengths))


__all__ = ["ALPHABET", "FUNCTIONS", "PHRASINGS", "ToolCallsConfig", "ToolCallsTask", "describe_tools",
           "format_call", "make_problem", "tool_reward", "tool_target", "tools_config", "words"]
