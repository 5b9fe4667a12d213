"""Deprecated: split in resrl 0.2 into `resrl.tasks.tools.parsing` (parse_tool_calls, ToolCalls,
format_calls), `resrl.tasks.tools.bfcl_match` (bfcl_match, parse_reference, canonical_calls) and
`resrl.tasks.tools.reward` (ToolCallReward, ToolCallExactReward, toolrl_correctness,
tool_reward_from_spec). This module re-exports their public names for one release (it goes away
in 0.3); patch the new modules, not these names."""

import importlib
import warnings

warnings.warn("resrl.rewards.tools was split into resrl.tasks.tools.parsing, resrl.tasks.tools.bfcl_match and "
              "resrl.tasks.tools.reward in resrl 0.2; the old name goes away in resrl 0.3", DeprecationWarning,
              stacklevel=2)
_parsing = importlib.import_module("resrl.tasks.tools.parsing")
_match = importlib.import_module("resrl.tasks.tools.bfcl_match")
_reward = importlib.import_module("resrl.tasks.tools.reward")

ToolCalls, parse_tool_calls, format_calls, MAX_PARSE_CHARS = (
    _parsing.ToolCalls, _parsing.parse_tool_calls, _parsing.format_calls, _parsing.MAX_PARSE_CHARS)
bfcl_match, parse_reference, canonical_calls = _match.bfcl_match, _match.parse_reference, _match.canonical_calls
ToolCallReward, ToolCallExactReward, toolrl_correctness, tool_reward_name, tool_reward_from_spec = (
    _reward.ToolCallReward, _reward.ToolCallExactReward, _reward.toolrl_correctness, _reward.tool_reward_name,
    _reward.tool_reward_from_spec)

__all__ = ["ToolCalls", "parse_tool_calls", "bfcl_match", "parse_reference", "toolrl_correctness",
           "canonical_calls", "format_calls",
           "ToolCallReward", "ToolCallExactReward", "tool_reward_name", "tool_reward_from_spec", "MAX_PARSE_CHARS"]
