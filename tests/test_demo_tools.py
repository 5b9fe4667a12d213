"""`resrl demo --task tools`: the tool-call generator, the real tool reward on its answers (the
reference call pays, the cheap ways around it do not) and the quick demo end to end."""

from __future__ import annotations

import json

import pytest

from resrl.demo.tasks import get_demo_task
from resrl.demo.tools_task import (ALPHABET, FUNCTIONS, PHRASINGS, ToolCallsConfig, ToolCallsTask, format_call,
                                   tool_reward, tool_target, words)
from resrl.tasks.tools.reward import ToolCallExactReward


def _calls(problems) -> list[str]:
    return [tool_target(p) for p in problems]


def test_tools_task_is_registered_with_budgets_that_fit():
    from resrl.experiments.kinds import handoff_config
    from resrl.experiments.layout import config_to_dict

    task = get_demo_task("tools")
    # the tool family's own evaluation reward, not a new matcher
    assert isinstance(task.reward, ToolCallExactReward) and task.reward.__name__ == "tool_call_exact"
    for quick in (False, True):
        cfg = task.config(quick=quick)
        assert cfg.task_name == "tools" and isinstance(cfg.task, ToolCallsConfig) and cfg.is_quick == quick
        assert cfg.algorithms == ("grpo", "w-reinforce", "resrl")
        back = handoff_config(task, json.loads(json.dumps(config_to_dict(cfg))))  # what a worker reads
        assert back == cfg and type(back.task) is ToolCallsConfig
        gen = task.problems(cfg)
        assert len(gen.test) == cfg.task.num_test
        # every correct completion fits the RL and evaluation budgets (with the end-of-sequence token)
        longest = max(len(tool_target(p)) + 1 for p in gen.test + gen.train_problems(2000))
        assert longest <= cfg.train["train"]["max_completion_length"] <= cfg.eval.max_new_tokens
    full = task.config(quick=False)
    assert full.start.target_accuracy <= 0.4  # the warm start stops early: RL has room (docs/demo.md)
    with pytest.raises(ValueError, match="num_test"):
        ToolCallsConfig(num_test=10_000)


def test_generator_split_streams_and_alphabet():
    """Distinct held-out calls that no training stream meets (under any phrasing), every function
    and phrasing drawn, everything fixed by the seed, and every character in the tokenizer."""
    from resrl.models.tiny import build_char_tokenizer

    task = ToolCallsTask(ToolCallsConfig(num_test=300, seed=3))
    held_out = _calls(task.test)
    assert len(set(held_out)) == len(held_out) == 300
    train = {s: task.train_problems(3000, stream=s) for s in ("sft", "rl", "dev", "omega")}
    for stream, problems in train.items():
        assert not set(_calls(problems)) & set(held_out), stream
        assert not any(task.is_test(p) for p in problems)
        names = [p.extra["call"]["name"] for p in problems]
        assert all(600 <= names.count(f) <= 900 for f in PHRASINGS), (stream, names)  # drawn uniformly
        prompts = {p.prompt.split()[0] if not p.prompt[0].isdigit() else p.prompt.split()[2] for p in problems}
        assert prompts == {"weather", "forecast", "call", "ring", "alarm", "wake", "to", "in"}
    assert [p.id for p in train["sft"][:50]] != [p.id for p in train["rl"][:50]]  # independent streams
    again = ToolCallsTask(ToolCallsConfig(num_test=300, seed=3))
    assert [p.id for p in again.test] == [p.id for p in task.test]
    assert [p.id for p in again.train_problems(50, "rl")] == [p.id for p in train["rl"][:50]]
    other = ToolCallsTask(ToolCallsConfig(num_test=300, seed=4))
    assert [p.id for p in other.test] != [p.id for p in task.test]
    # the tokenizer covers every character of prompts and targets: no unknown token anywhere
    tok = build_char_tokenizer(ALPHABET)
    texts = [t for p in task.test + train["sft"] for t in (p.prompt, tool_target(p))]
    assert set("".join(texts)) <= set(ALPHABET)
    ids = tok("".join(texts), add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids and tok.decode(ids) == "".join(texts)
    assert not any(w in ("for", "def", "not", "del", "pass") for w in words())  # a call must parse


def test_reference_call_earns_full_reward_and_so_do_equivalent_forms():
    """The target of every held-out problem (and of a training stream) gets 1.0 from the real
    reward; so do the call's other spellings the parser reads (argument order, quotes, list, JSON)."""
    gen = get_demo_task("tools").problems(get_demo_task("tools").config(quick=False))
    problems = gen.test + gen.train_problems(500, stream="rl")
    assert tool_reward(_calls(problems), [p.answer for p in problems]) == [1.0] * len(problems)
    for p in gen.test[:40]:
        call = p.extra["call"]
        args = call["arguments"]
        quoted = f"{call['name']}(" + ",".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        equivalent = [format_call(call["name"], dict(reversed(args.items()))), quoted, f"[{tool_target(p)}]",
                      json.dumps(call), f" {tool_target(p)} "]
        assert tool_reward(equivalent, [p.answer] * len(equivalent)) == [1.0] * len(equivalent), equivalent


def _hacks(problem) -> dict[str, str]:
    """Cheap outputs that must not be paid, for one problem."""
    call = problem.extra["call"]
    name, args = call["name"], call["arguments"]
    target = tool_target(problem)
    other = next(f["name"] for f in FUNCTIONS if f["name"] != name)
    first, value = next(iter(args.items()))
    every = ",".join(format_call(f["name"], {p: args.get(p, 1) for p in f["parameters"]["properties"]})
                     for f in FUNCTIONS)
    wrong_value = value + 1 if isinstance(value, int) else value[::-1] + "x"
    return {
        "the call twice": f"[{target},{target}]",
        "the call and another function": f"[{target},{format_call(other, args)}]",
        "a call to every function": f"[{every}]",
        "the right arguments, another function": format_call(other, args),
        "text after the call": target + " ok",
        "text before the call": "ok " + target,
        "two calls, no list": target + target,
        "an extra argument": format_call(name, {**args, "x": 1}),
        "a missing argument": format_call(name, dict(list(args.items())[1:])),
        "no arguments": f"{name}()",
        "a wrong value": format_call(name, {**args, first: wrong_value}),
        "a number as a string": format_call(name, {k: (repr(str(v)) if isinstance(v, int) else 1)
                                                   for k, v in args.items()}),
        "positional arguments": f"{name}(" + ",".join(str(v) for v in args.values()) + ")",
        "truncated": target[:-1],
        "malformed JSON": json.dumps(call)[:-1],
        "JSON with no arguments": json.dumps({"name": name}),
        "the function name alone": name,
        "the request echoed": problem.prompt,
        "nothing": "",
    }


def test_hacks_earn_nothing():
    """The cheapest outputs that could be paid (several calls, every function, extra or missing
    arguments, text around the call, malformed output) earn 0 from the real reward, on every
    held-out problem."""
    gen = get_demo_task("tools").problems(get_demo_task("tools").config(quick=False))
    for p in gen.test:
        hacks = _hacks(p)
        assert hacks["text after the call"] != tool_target(p)
        rewards = tool_reward(list(hacks.values()), [p.answer] * len(hacks))
        paid = [kind for kind, r in zip(hacks, rewards) if r != 0.0]
        assert not paid, (p.prompt, paid)


@pytest.mark.slow
def test_quick_tools_demo_end_to_end(tmp_path):
    """`resrl demo --task tools --quick`: the whole pipeline (warm start, RL, evaluation with the tool
    reward, ω analysis, plots, report) writes its outputs. One method: the pipeline is every task's
    (tests/test_demo.py runs all three default methods on math); what is the tools task's own here is
    its targets, its reward and its report."""
    import contextlib
    import io

    from resrl.cli import main

    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", "--task", "tools", "--quick", "--out", str(out), "--seed", "0", "--algorithms", "grpo"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["task_name"] == "tools"
    assert list(summary["results"]) == ["warm start", "grpo"]
    for r in summary["results"].values():
        assert 0 <= r["greedy"] <= 1 and 0 <= r["avg"] <= 1
    assert summary["results"]["warm start"]["avg"] > 0  # the warm start is sometimes right
    assert summary["example"]["target"] == tool_target(get_demo_task("tools").problems(get_demo_task("tools").config(True)).test[0])
    records = (out / "eval" / "grpo" / "sampled" / "samples.jsonl").read_text().splitlines()
    assert len(records) == 8 * 48
    assert json.loads((out / "eval" / "grpo" / "sampled" / "config.json").read_text())["reward"] == "tool_call_exact"
    report = (out / "report.md").read_text()
    assert "tool_call_exact" in report and "worked chain" not in report and "--task tools --quick" in report
    assert summary["omega"]["num_groups"] == 16 and summary["omega"]["groups_with_pos"] > 0
    for name in ("training_curves.png", "pass_at_k.png", "omega_tokens.png"):
        assert (out / name).stat().st_size > 1000
