"""The tool-use family: tool-calling rows, BFCL's single-turn and multi-turn data, call parsing,
BFCL's possible-answer matching, the `"tool_call"` / `"tool_call_exact"` rewards, the BFCL
multi-turn environment (`env.name: bfcl`) and the BFCL evaluation table.
"""

from resrl.tasks.registry import Deferred, EnvSpec, Evaluator, RowFormat, TaskFamily

PREFIX = "bfcl:"


def _load(spec: str, split: str = "train", limit: int | None = None) -> list:
    from resrl.tasks.tools.bfcl_data import bfcl_problems

    return bfcl_problems(spec[len(PREFIX):], limit=limit)


def _report_name(spec: str) -> str:
    from resrl.tasks.tools.bfcl_data import canonical_category

    return f"bfcl_{canonical_category(spec[len(PREFIX):])}"


def _is_row(row) -> bool:
    from resrl.tasks.tools.data import is_tool_row

    return is_tool_row(row)


def _to_problem(row: dict, index: int, source: str, where: str):
    from resrl.tasks.tools.data import tool_row_to_problem

    return tool_row_to_problem(row, index, source, where)


def _reward(spec: str, **_):
    from resrl.tasks.tools.reward import tool_reward_from_spec

    return tool_reward_from_spec(spec)


def _reward_name(spec: str) -> str | None:
    from resrl.tasks.tools.reward import tool_reward_name

    return tool_reward_name(spec)


def _concat_envs(train: str, limit: int | None) -> list:
    """(prompt, answer, make_env) per BFCL multi-turn entry of data.train (bfcl:<category>)."""
    from functools import partial

    from resrl.tasks.tools.bfcl_env import BFCLMultiTurnEnv, bfcl_multi_turn_envs

    out = []
    for env in bfcl_multi_turn_envs(train[len(PREFIX):], limit=limit):
        prompt = env.reset()
        out.append((prompt, env.entry["id"], partial(BFCLMultiTurnEnv, env.entry, env.ground_truth)))
    return out


def _multi_turn(spec: str) -> bool:
    from resrl.tasks.tools.bfcl_data import MULTI_TURN, canonical_category

    return str(spec).startswith(PREFIX) and canonical_category(str(spec)[len(PREFIX):]) in MULTI_TURN


FAMILY = TaskFamily(
    name="tools", prefixes=(PREFIX,), load=_load, report_name=_report_name, report_names_unique=False,
    rows=RowFormat(_is_row, _to_problem), rewards={"tool_call": _reward, "tool_call_exact": _reward},
    reward_name=_reward_name, data_reward="tool_call_exact",
    envs=(EnvSpec("bfcl", layouts=("concat",), concat_envs=_concat_envs,
                  data="a BFCL multi-turn category, e.g. bfcl:multi_turn_base"),),
    evaluator=Evaluator(takes=_multi_turn, run=Deferred("resrl.tasks.tools.evaluate:eval_report")))
