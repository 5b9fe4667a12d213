"""The chained-addition task: chains, split, answer checking, first wrong token."""

import json

import pytest

from resrl.data.synthetic import (
    ChainAdditionConfig,
    ChainAdditionTask,
    chain_reward,
    chain_target,
    chain_terms,
    extract_answer,
    first_error_index,
    is_correct,
    make_problem,
    write_jsonl,
)


def test_make_problem_reduces_one_addition_at_a_time():
    p = make_problem([17, 45, 38])
    assert (p.prompt, chain_target(p), p.answer) == ("17+45+38=", "62+38=100", "100")
    p4 = make_problem([1, 2, 3, 4])
    assert (p4.prompt, chain_target(p4), p4.answer) == ("1+2+3+4=", "3+3+4=6+4=10", "10")
    assert chain_target(make_problem([5, 6])) == "11"
    with pytest.raises(ValueError):
        make_problem([3])


def test_chain_problems_are_the_projects_problem_type():
    from resrl.data.loaders import Problem

    p = make_problem([17, 45, 38])
    assert type(p) is Problem
    assert p == Problem(id="chain-17+45+38", prompt="17+45+38=", answer="100", data_source="chain",
                        extra={"terms": (17, 45, 38), "target": "62+38=100"})
    assert chain_terms(p) == (17, 45, 38)
    with pytest.raises(ValueError, match="not a chained-addition problem"):
        chain_target(Problem(id="x", prompt="1+1?", answer="2", data_source="math"))


def test_every_target_ends_in_its_answer_and_checks():
    task = ChainAdditionTask(ChainAdditionConfig(num_test=50, seed=3))
    for p in task.test + task.train_problems(50):
        assert p.answer == str(sum(chain_terms(p)))
        assert is_correct(chain_target(p), p.answer)  # the chain's last number is the answer
        assert p.prompt == "+".join(map(str, chain_terms(p))) + "=" and p.id == "chain-" + p.prompt[:-1]


def test_split_is_deterministic_and_disjoint():
    cfg = ChainAdditionConfig(num_terms=3, min_value=0, max_value=3, num_test=30, seed=1)
    a, b = ChainAdditionTask(cfg), ChainAdditionTask(cfg)
    assert a.test == b.test and len({chain_terms(p) for p in a.test}) == len({p.id for p in a.test}) == 30
    train = a.train_problems(500, "sft")
    assert train == b.train_problems(500, "sft")
    assert train != a.train_problems(500, "rl")  # streams are independent
    test_terms = {chain_terms(p) for p in a.test}
    assert not any(chain_terms(p) in test_terms for p in train)  # 30 of this small space of 64 are held out
    assert all(not a.is_test(p) for p in train) and all(a.is_test(p) for p in a.test)
    other = ChainAdditionTask(ChainAdditionConfig(num_terms=3, min_value=0, max_value=3, num_test=30, seed=2))
    assert other.test != a.test


@pytest.mark.parametrize("kwargs", [
    {"num_terms": 1}, {"min_value": 5, "max_value": 4}, {"min_value": -1}, {"num_test": 0},
    {"num_terms": 2},  # no chain: the completion would hold no `=` for the reward to read
    {"num_terms": 3, "min_value": 0, "max_value": 1, "num_test": 5},  # 8 problems: too few left to train
])
def test_config_errors_name_the_field(kwargs):
    with pytest.raises(ValueError, match="ChainAdditionConfig"):
        ChainAdditionConfig(**kwargs)


def test_answer_extraction_and_reward():
    assert extract_answer("62+38=100") == 100
    assert extract_answer("62+38= 100 ") == 100
    assert extract_answer("62+38=10a") is None
    assert extract_answer("62+38") is None
    assert extract_answer("") is None
    assert is_correct("5+5=10", "10") and not is_correct("5+5=100", 10)
    assert chain_reward(["62+38=100", "62+38=101", "garbage"], ["100", "100", "100"]) == [1.0, 0.0, 0.0]


def test_first_error_index_char_tokens():
    target, eos = "62+38=100", "<|im_end|>"
    assert first_error_index(list(target) + [eos], target, eos) is None  # the correct chain
    assert first_error_index(list("63+38=101") + [eos], target, eos) == 1
    assert first_error_index(list("62+38=1000") + [eos], target, eos) == 9  # extra digit instead of eos
    assert first_error_index(list(target) + ["0"], target, eos) == 9
    assert first_error_index(list("62+3"), target, eos) is None  # a correct prefix (truncated)
    assert first_error_index(list(target) + [eos, "5"], target, eos) == 10  # nothing may follow eos
    assert first_error_index(["x"], target, eos) == 0


def test_first_error_index_multi_char_tokens():
    # exact per token: the token that contains the first wrong character is the first wrong token
    assert first_error_index(["62", "+3", "8=1", "01"], "62+38=100") == 3
    assert first_error_index(["62", "+4", "8=110"], "62+38=100") == 1
    assert first_error_index(["62+38", "=100"], "62+38=100") is None


def test_write_jsonl_rows(tmp_path):
    task = ChainAdditionTask(ChainAdditionConfig(num_test=5))
    path = write_jsonl(task.test, tmp_path / "sub" / "test.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["problem"] for r in rows] == [p.prompt for p in task.test]
    assert [r["answer"] for r in rows] == [p.answer for p in task.test]
    assert [r["target"] for r in rows] == [chain_target(p) for p in task.test]
    from resrl.tasks.data import load_problems

    back = load_problems(path)  # the project's loader reads them back: same ids, prompts, answers, chains
    assert [(b.id, b.prompt, b.answer, chain_target(b)) for b in back] == [
        (p.id, p.prompt, p.answer, chain_target(p)) for p in task.test]
