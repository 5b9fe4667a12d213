"""Data loaders (simple and veRL rows, jsonl and parquet, benchmark names) and prompt rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resrl.data.loaders import BENCHMARKS, Problem
from resrl.tasks.data import load_benchmarks, load_problems
from resrl.data.prompts import DEFAULT_INSTRUCTION, build_prompt_messages, problems_to_dataset, render_prompt

EXPECTED_COUNTS = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "minerva": 272,
                   "olympiadbench": 675, "gsm8k": 1319}


def test_benchmark_files_load_with_expected_counts():
    loaded = load_benchmarks(list(EXPECTED_COUNTS))
    assert {name: len(ps) for name, ps in loaded.items()} == EXPECTED_COUNTS
    for name, problems in loaded.items():
        assert all(isinstance(p.prompt, str) and p.prompt and p.answer for p in problems), name
        assert all(p.data_source == name for p in problems)
        assert len({p.id for p in problems}) == len(problems)
    assert loaded["aime25"][0].answer == "70"  # stored as integer string (README: floats converted)
    assert "dapo_math_17k" in BENCHMARKS


def test_data_dir_env_and_argument(tmp_path, monkeypatch):
    (tmp_path / "mini.jsonl").write_text(json.dumps({"problem": "1+1?", "answer": 2}) + "\n")
    monkeypatch.setenv("RESRL_DATA_DIR", str(tmp_path))
    (p,) = load_problems("mini")
    assert p == Problem(id="mini-0", prompt="1+1?", answer="2", data_source="mini", extra={})
    monkeypatch.delenv("RESRL_DATA_DIR")
    assert load_problems("mini", data_dir=tmp_path)[0].answer == "2"
    with pytest.raises(ValueError, match="neither an existing file nor a known name"):
        load_problems("mini_nowhere", data_dir=tmp_path)


def verl_rows():
    return [
        {"data_source": "toy", "prompt": [{"role": "user", "content": "What is 2+2?"}], "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"index": 7}},
        {"data_source": "toy", "prompt": "Plain prompt: 3*3?", "ability": "math",
         "reward_model": {"ground_truth": 9}, "extra_info": {"index": 8}},
    ]


def check_verl(problems):
    a, b = problems
    assert a.prompt == [{"role": "user", "content": "What is 2+2?"}] and a.answer == "4" and a.id == "7"
    assert a.data_source == "toy" and a.extra["ability"] == "math"
    assert b.prompt == "Plain prompt: 3*3?" and b.answer == "9" and b.id == "8"


def test_verl_jsonl_and_parquet(tmp_path):
    jl = tmp_path / "toy.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in verl_rows()))
    check_verl(load_problems(jl))

    import pyarrow as pa
    import pyarrow.parquet as pq

    # parquet needs one type per column: veRL writes chat-list prompts and string ground truths
    rows = verl_rows()
    rows[1]["prompt"] = [{"role": "user", "content": "Plain prompt: 3*3?"}]
    rows[1]["reward_model"] = {"style": "rule", "ground_truth": "9"}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "toy.parquet")
    a, b = load_problems(tmp_path / "toy.parquet")
    assert a.prompt == [{"role": "user", "content": "What is 2+2?"}] and a.answer == "4" and a.id == "7"
    assert b.prompt == rows[1]["prompt"] and b.answer == "9" and b.data_source == "toy"


@pytest.mark.parametrize("line, message", [
    ('{"problem": "x", "answer": "1"', "row 2: invalid JSON"),
    ('{"problem": "x"}', "row 2: has 'problem' but no 'answer'"),
    ('{"question": "x", "answer": "1"}', "row 2: row has neither"),
    ('{"prompt": [{"role": "user"}], "reward_model": {"ground_truth": "1"}}', r"row 2: 'prompt'\[0\] must be"),
    ('{"prompt": "hi", "reward_model": {}}', "row 2: veRL row needs 'reward_model'"),
    ('{"problem": "x", "answer": null}', "row 2: answer must be a string or number"),
    ('[1, 2]', "row 2: expected a JSON object"),
])
def test_malformed_row_names_file_and_row(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"problem": "ok", "answer": "1"}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message) as info:
        load_problems(path)
    assert str(path) in str(info.value)


def test_prompt_messages_and_rendering():
    from resrl.models.tiny import build_char_tokenizer

    problem = Problem(id="p", prompt="What is 1+1?", answer="2", data_source="t")
    messages = build_prompt_messages(problem)
    assert messages == [{"role": "user", "content": f"What is 1+1?\n{DEFAULT_INSTRUCTION}"}]
    assert build_prompt_messages(problem, instruction="")[0]["content"] == "What is 1+1?"
    chat = Problem(id="c", prompt=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                   answer="1", data_source="t")
    assert build_prompt_messages(chat) == chat.prompt  # veRL chat prompts are used as given

    tok = build_char_tokenizer()
    text = render_prompt(problem, tok, instruction="Box it.")
    assert text == "<|im_start|>user\nWhat is 1+1?\nBox it.<|im_end|>\n<|im_start|>assistant\n"
    assert render_prompt(problem, tok, instruction="Box it.", use_chat_template=False) == "What is 1+1?\nBox it.\n"
    tok.chat_template = None
    assert render_prompt(problem, tok, instruction="") == "What is 1+1?\n"  # no template: plain text
    with pytest.raises(ValueError, match="no chat template"):
        render_prompt(problem, tok, use_chat_template=True)


def test_problems_to_dataset():
    problems = [Problem(id=f"p{i}", prompt=f"{i}+1=?", answer=str(i + 1), data_source="toy") for i in range(3)]
    ds = problems_to_dataset(problems)
    assert ds.column_names == ["prompt", "answer", "id", "data_source"]
    assert ds[1]["prompt"] == [{"role": "user", "content": f"1+1=?\n{DEFAULT_INSTRUCTION}"}]
    assert ds["answer"] == ["1", "2", "3"]
    plain = problems_to_dataset(problems, instruction=None, conversational=False)
    assert plain[0]["prompt"] == "0+1=?"
