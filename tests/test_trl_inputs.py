"""`resrl train` takes what TRL takes: reward functions with TRL's signature (keywords: completions,
prompts, completion_ids, the dataset's columns) beside resrl's f(completions, answers), and TRL's
dataset rows (a `prompt`, standard or conversational, with any columns); `--check` loads the data."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

import pytest
from train_helpers import build_small_model

from resrl.tasks.data import load_problems
from resrl.data.prompts import problems_to_dataset, render_prompt
from resrl.engines.trl.rewards import IsolatedReward, RewardAdapter, reward_style
from resrl.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# ---- which convention a function follows ------------------------------------------------------------

def test_the_convention_comes_from_the_signature():
    def resrl_fn(completions, answers): ...
    def resrl_other_names(texts, refs): ...
    def trl_kwargs(completions, **kwargs): ...
    def trl_named(prompts, completions, solution): ...
    def trl_positional_with_kwargs(prompts, completions, **kw): ...
    def neither(completions, solution, level, extra): ...
    # resrl's two positionals with a **kwargs (gpu_check's reward had one): TRL cannot pass `answers`,
    # so calling it TRL's way raised on every item and scored 0 silently
    def resrl_with_kwargs(completions, answers, **kwargs): ...
    def kwargs_needing_an_unknown_keyword(completions, *, level, **kwargs): ...

    columns = {"solution": [], "trainer_state": None}
    assert reward_style(resrl_fn, columns) == "resrl"
    assert reward_style(resrl_other_names, columns) == "resrl"
    assert reward_style(trl_kwargs, columns) == "trl"
    assert reward_style(trl_named, columns) == "trl"
    assert reward_style(trl_positional_with_kwargs, columns) == "trl"
    assert reward_style(resrl_with_kwargs, columns) == "resrl"
    assert reward_style(resrl_with_kwargs, {**columns, "answers": []}) == "trl"  # a column TRL passes
    with pytest.raises(InputError, match="kwargs_needing_an_unknown_keyword"):
        reward_style(kwargs_needing_an_unknown_keyword, columns)
    with pytest.raises(InputError, match=r"'neither' has the signature .* fits neither resrl's .* nor TRL's"):
        reward_style(neither, columns)


def _trl_call(adapter, completions, **columns):
    metrics = {}
    return adapter([f"p{i}" for i in range(len(completions))], completions, log_metric=metrics.__setitem__,
                   completion_ids=[[1, 2]] * len(completions), trainer_state=object(), **columns), metrics


def test_a_trl_reward_gets_trl_keywords_and_its_columns():
    seen = {}

    def accuracy(completions, solution, **kwargs):
        seen.update(kwargs, completions=completions, solution=solution)
        return [float(c[0]["content"].strip() == s) for c, s in zip(completions, solution)]

    conv = [[{"role": "assistant", "content": "7"}], [{"role": "assistant", "content": "8"}]]
    scores, _ = _trl_call(RewardAdapter(accuracy), conv, solution=["7", "9"], answer=["", ""])
    assert scores == [1.0, 0.0]
    assert seen["completions"] == conv  # TRL's completions as TRL passes them (message lists)
    assert seen["prompts"] == ["p0", "p1"] and seen["completion_ids"] == [[1, 2], [1, 2]]
    assert "trainer_state" in seen and callable(seen["log_metric"])


def test_a_trl_reward_in_worker_processes_and_its_faults():
    iso = IsolatedReward(_module_fn(), timeout_s=5.0, num_workers=1)
    try:
        scores, m = _trl_call(RewardAdapter(iso, name="by_solution"), ["7", "8", "boom"], solution=["7", "9", "1"],
                              answer=["", "", ""])
    finally:
        iso.close()
    assert scores == [1.0, 0.0, 0.0] and m["reward/errors"] == 1.0


def _module_fn():
    from train_helpers import trl_solution_reward

    return trl_solution_reward


# ---- TRL rows -------------------------------------------------------------------------------------------

def test_trl_rows_keep_their_prompt_and_columns(tmp_path):
    data = tmp_path / "trl.jsonl"
    data.write_text(json.dumps({"prompt": "What is 3+4?", "solution": "7", "level": 1}) + "\n"
                    + json.dumps({"prompt": "What is 1+1?", "solution": "2", "level": 2, "answer": 2}) + "\n")
    problems = load_problems(str(data))
    ds = problems_to_dataset(problems)
    assert ds["prompt"] == ["What is 3+4?", "What is 1+1?"]  # standard format: the text as it is
    assert ds["solution"] == ["7", "2"] and ds["level"] == [1, 2] and ds["answer"] == ["", "2"]
    from resrl.models.tiny import build_char_tokenizer

    assert render_prompt(problems[0], build_char_tokenizer()) == "What is 3+4?"  # no instruction, no template
    conv = tmp_path / "conv.jsonl"
    conv.write_text(json.dumps({"prompt": [{"role": "user", "content": "2+2?"}], "solution": "4"}) + "\n")
    assert problems_to_dataset(load_problems(str(conv)))["prompt"] == [[{"role": "user", "content": "2+2?"}]]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"prompt": "2+2?"}) + "\n" + json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(InputError, match="mixes TRL rows"):
        problems_to_dataset(load_problems(str(mixed)))


# ---- through `resrl train` ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _train(argv):
    from resrl.train.command import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["train", "--config", str(ROOT / "configs" / "tiny_math.yaml"), *argv])
    return args.func(args)


@pytest.mark.parametrize("conversational", [False, True])
def test_resrl_train_takes_a_trl_reward_and_trl_rows(model_dir, tmp_path, conversational):
    data = tmp_path / "trl.jsonl"
    rows = []
    for i in range(8):
        prompt = f"What is {i} + {i}?"
        rows.append({"prompt": [{"role": "user", "content": prompt}] if conversational else prompt,
                     "solution": str(2 * i), "difficulty": i % 3})
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    module = tmp_path / "trl_reward.py"
    module.write_text(textwrap.dedent('''
        def columns_seen(completions, solution, difficulty, prompts, **kwargs):
            # 1 when TRL's keywords and the row's own columns arrived together, item by item
            ok = len(completions) == len(solution) == len(difficulty) == len(prompts)
            return [float(ok and isinstance(s, str) and int(s) == 2 * int(p.split()[2] if isinstance(p, str)
                    else p[-1]["content"].split()[2]) and d in (0, 1, 2))
                    for s, d, p in zip(solution, difficulty, prompts)]
    '''))
    out = tmp_path / "run"
    common = [f"model.path={model_dir}", f"train.output_dir={out}", f"data.train={data}",
              f"reward.function={module}:columns_seen", "train.max_steps=2", "train.max_completion_length=8",
              "log.progress=false", "log.report_to=[none]", "checkpoint.save_steps=0"]
    assert _train(common) == 0
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == 2
    assert all(s["reward"] == 1.0 and s["reward/errors"] == 0 and s["reward/wrong_type"] == 0 for s in steps)


def test_check_loads_the_data(model_dir, tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"prompt": "1+1?", "solution": "2"}) + "\n")
    assert _train(["--check", f"model.path={model_dir}", f"data.train={good}", "reward.function=exact"]) == 0
    out = capsys.readouterr().out
    assert "config OK" in out and "1 rows" in out and "solution" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "1+1?"}) + "\n" + json.dumps({"question": "?"}) + "\n")
    assert _train(["--check", f"model.path={model_dir}", f"data.train={bad}"]) == 2
    assert "bad.jsonl: row 2" in capsys.readouterr().err
