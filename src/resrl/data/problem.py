"""The `Problem` every loader returns, and the row checks the family loaders share.

Its own module so that the family loaders (code, tools, bfcl, reasoning-gym, synthetic, alfworld)
and the dispatcher that calls them (`resrl.tasks.data`) depend on it, not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from resrl.errors import DataError


@dataclass
class Problem:
    """One verifiable problem.

    id           unique within its data source (from the row, else `<file stem>-<row index>`)
    prompt       the problem text (str, no instruction appended) or a chat list [{"role", "content"}]
    answer       reference answer as a string (what the reward compares against)
    data_source  benchmark / data set name
    extra        everything else in the row (solution, meta, ability, extra_info, ...)
    """

    id: str
    prompt: str | list[dict]
    answer: str
    data_source: str
    extra: dict = field(default_factory=dict)


# Problem.extra key of a TRL-format row (`{"prompt": str | chat list, ...}` with no veRL reward_model):
# its prompt is final (no instruction added, a plain string stays plain: TRL's "standard" format
# has no chat template) and TRL_COLUMNS holds its other columns, which reach TRL-style rewards.
TRL_COLUMNS = "trl_columns"


def is_trl_row(problem: "Problem") -> bool:
    return TRL_COLUMNS in problem.extra


def check_chat(prompt: list, where: str) -> list[dict]:
    """A chat prompt -> plain {"role", "content"} messages; DataError naming `where` otherwise."""
    if not prompt:
        raise DataError(f"{where}: 'prompt' is an empty chat list")
    for i, m in enumerate(prompt):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise DataError(f"{where}: 'prompt'[{i}] must be {{'role': str, 'content': str}}, got {m!r}")
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


__all__ = ["Problem", "TRL_COLUMNS", "is_trl_row", "check_chat"]
