"""Evaluation: exact metric aggregation with a scripted generator, resume, and a real tiny-model run."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
import torch

from resrl.data.loaders import Problem
from resrl.eval import EvalConfig, Sample, evaluate, generate_samples
from resrl.eval.runner import read_records

# correctness pattern per problem (n = 4) and the wrong answers given, which steer maj@k
PATTERN = {
    "p0": ([1, 0, 0, 0], ["999", "999", "999"]),  # maj@4 votes the wrong 999
    "p1": ([1, 1, 1, 1], []),
    "p2": ([0, 0, 0, 0], ["1", "2", "3", "4"]),
    "p3": ([0, 1, 0, 1], ["5", "6"]),              # maj@2: tie 5 vs right -> earliest (5, wrong)
    "p4": ([0, 0, 1, 1], ["8", "9"]),              # maj@4: right has 2 votes
}
ANSWER = {pid: str(10 + i) for i, pid in enumerate(PATTERN)}


def problems(bench: str) -> list[Problem]:
    return [Problem(id=pid, prompt=f"question {pid}", answer=ANSWER[pid], data_source=bench) for pid in PATTERN]


class ScriptedGenerator:
    """Returns `\\boxed{right}` or `\\boxed{wrong}` by the pattern; counts the jobs it served."""

    def __init__(self, fail_after_calls: int | None = None):
        self.jobs = []
        self.fail_after_calls = fail_after_calls
        self.calls = 0

    def __call__(self, jobs):
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1
        out = []
        for job in jobs:
            self.jobs.append((job.benchmark, job.problem_id, job.sample_index))
            flags, wrongs = PATTERN[job.problem_id]
            if flags[job.sample_index]:
                text = f"so \\boxed{{{ANSWER[job.problem_id]}}}"
            else:
                wrong_index = sum(1 - f for f in flags[: job.sample_index])
                text = f"so \\boxed{{{wrongs[wrong_index]}}}"
            out.append(Sample(text=text, num_tokens=10 + job.sample_index, truncated=job.sample_index == 3))
        return out


def expected_pass(k: int) -> float:
    vals = [1 - Fraction(math.comb(4 - sum(f), k), math.comb(4, k)) for f, _ in PATTERN.values()]
    return float(sum(vals) / len(vals))


def config(**kw) -> EvalConfig:
    base = dict(n=4, ks=(1, 2, 4), reward="exact", batch_size=6, progress=False)
    return EvalConfig(**{**base, **kw})


def test_scripted_metrics_are_exact(tmp_path):
    out = tmp_path / "run"
    summary = evaluate(None, {"a": problems("a"), "b": problems("b")}, config(), out, generator=ScriptedGenerator())
    m = summary["benchmarks"]["a"]
    assert m["num_problems"] == 5 and m["n"] == 4
    assert m["avg@4"] == pytest.approx((1 + 4 + 0 + 2 + 2) / 20)
    per_problem = [0.25, 1.0, 0.0, 0.5, 0.5]  # standard error over problems of the per-problem accuracy
    mean = sum(per_problem) / 5
    assert m["avg_stderr"] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in per_problem) / 4 / 5))
    # hand values: pass@2 = mean(1/2, 1, 0, 5/6, 5/6); pass@4 = 4/5
    assert m["pass@k"]["2"] == pytest.approx((0.5 + 1 + 0 + 5 / 6 + 5 / 6) / 5)
    assert m["pass@k"]["4"] == pytest.approx(0.8)
    for k in range(1, 5):
        assert m["pass@k"][str(k)] == pytest.approx(expected_pass(k), abs=1e-12)
    # maj@1: p0, p1 right; maj@2: p0 (tie -> earliest right), p1; maj@4: p1, p3, p4
    assert m["maj@k"] == pytest.approx({"1": 2 / 5, "2": 2 / 5, "4": 3 / 5})
    assert m["mean_response_tokens"] == pytest.approx(11.5)
    assert m["truncation_rate"] == pytest.approx(0.25)
    assert m["timeouts"] == 0 and m["extracted_rate"] == 1.0
    assert summary["overall"]["avg@4"] == pytest.approx(m["avg@4"])
    assert summary["overall"]["pass@k"]["2"] == pytest.approx(m["pass@k"]["2"])

    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 40
    r = next(r for r in records if r["benchmark"] == "a" and r["problem_id"] == "p0" and r["sample_index"] == 1)
    assert r["completion"] == "so \\boxed{999}" and r["extracted"] == "999" and r["correct"] is False
    assert {"gen_seconds", "score_seconds", "answer", "truncated", "num_tokens"} <= set(r)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["benchmarks"]["b"]["pass@k"] == m["pass@k"]
    table = (out / "results.md").read_text()
    assert "| a | 5 | 45.0 | 45.0 | 63.3 | 80.0 | 60.0 |" in table and "| average |" in table
    assert (out / "passk.png").stat().st_size > 10_000


def test_resume_skips_finished_samples(tmp_path):
    out = tmp_path / "run"
    benches = {"a": problems("a")}
    with pytest.raises(KeyboardInterrupt):
        evaluate(None, benches, config(), out, generator=ScriptedGenerator(fail_after_calls=2))
    assert len(read_records(out / "samples.jsonl")) == 12  # two flushed batches of 6
    with (out / "samples.jsonl").open("a") as f:  # a torn line, as left by a kill mid-write
        f.write('{"benchmark": "a", "problem_id": "p4", "sam')

    gen = ScriptedGenerator()
    resumed = evaluate(None, benches, config(), out, generator=gen)
    assert len(gen.jobs) == 20 - 12
    assert not set(gen.jobs) & {(r["benchmark"], r["problem_id"], r["sample_index"])
                                for r in list(read_records(out / "samples.jsonl").values())[:12]}
    assert len((out / "samples.jsonl").read_text().splitlines()) == 20

    fresh = evaluate(None, benches, config(), tmp_path / "fresh", generator=ScriptedGenerator())
    assert resumed["benchmarks"] == fresh["benchmarks"]

    again = ScriptedGenerator()
    evaluate(None, benches, config(), out, generator=again)  # everything done: nothing generated
    assert again.jobs == []
    with pytest.raises(ValueError, match="different settings .*temperature"):
        evaluate(None, benches, config(temperature=1.0), out, generator=ScriptedGenerator())


class PromptRecorder(ScriptedGenerator):
    def __call__(self, jobs):
        self.prompts = getattr(self, "prompts", []) + [j.prompt for j in jobs]
        return super().__call__(jobs)


def test_raw_prompts_reach_the_model_unchanged(tmp_path):
    gen = PromptRecorder()
    evaluate(None, {"a": problems("a")}, config(raw_prompts=True, instruction="ignored"), tmp_path / "raw", generator=gen)
    assert set(gen.prompts) == {f"question {pid}" for pid in PATTERN}  # no instruction, no newline
    plain = PromptRecorder()
    evaluate(None, {"a": problems("a")}, config(instruction=""), tmp_path / "plain", generator=plain)
    assert set(plain.prompts) == {f"question {pid}\n" for pid in PATTERN}
    with pytest.raises(ValueError, match="different settings .*raw_prompts"):  # the rendering is part of a sample
        evaluate(None, {"a": problems("a")}, config(instruction=""), tmp_path / "raw", generator=PromptRecorder())
    chat = [Problem(id="c", prompt=[{"role": "user", "content": "hi"}], answer="1", data_source="a")]
    with pytest.raises(ValueError, match="raw_prompts needs string prompts"):
        evaluate(None, {"a": chat}, config(raw_prompts=True), None, generator=PromptRecorder())
    # an output directory written before raw_prompts existed resumes as raw_prompts=False
    settings = json.loads((tmp_path / "plain" / "config.json").read_text())
    del settings["raw_prompts"]
    (tmp_path / "plain" / "config.json").write_text(json.dumps(settings))
    again = PromptRecorder()
    evaluate(None, {"a": problems("a")}, config(instruction=""), tmp_path / "plain", generator=again)
    assert again.jobs == []


def test_config_validation():
    with pytest.raises(ValueError, match="EvalConfig.ks"):
        EvalConfig(n=4, ks=(1, 8))
    with pytest.raises(ValueError, match="EvalConfig.top_p"):
        EvalConfig(top_p=0.0)
    assert EvalConfig(n=12).ks == (1, 2, 4, 8, 12)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)  # 2 shared cores: OpenMP spinning across busy cores is very slow
    path = tmp_path_factory.mktemp("tiny")
    cfg = TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                          head_dim=16, intermediate_size=64, max_position_embeddings=256)
    build_tiny_model(path, cfg)
    return path


def test_generate_samples_shapes_and_truncation(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = ["1+2=", "10+20+30="]
    out = generate_samples(model, tok, prompts, n=3, temperature=1.0, max_new_tokens=6, batch_size=4, seed=1)
    assert [len(row) for row in out] == [3, 3]
    for s in (s for row in out for s in row):
        assert 1 <= s.num_tokens <= 6
        if s.num_tokens < 6:
            assert not s.truncated  # ended with the eos token before the budget
    assert any(s.truncated for row in out for s in row)  # a random model rarely stops within 6 tokens
    again = generate_samples(model, tok, prompts, n=3, temperature=1.0, max_new_tokens=6, batch_size=4, seed=1)
    assert [[s.text for s in r] for r in again] == [[s.text for s in r] for r in out]  # seeded
    greedy = generate_samples(model, tok, prompts[:1], n=2, temperature=0.0, max_new_tokens=6)
    assert greedy[0][0].text == greedy[0][1].text


def test_end_to_end_tiny_model_cli(tiny_model_dir, tmp_path, capsys, monkeypatch):
    from resrl.cli import main

    data = tmp_path / "arith.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {i}+{i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(10)))
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(tiny_model_dir), "--data", str(data), "--n", "4", "--k", "1,2,4",
            "--temperature", "1.0", "--max-new-tokens", "12", "--batch-size", "20", "--out", str(out),
            "--instruction", "", "--reward-timeout", "3", "--no-progress", "--backend", "hf"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    m = summary["benchmarks"]["arith"]
    assert m["num_problems"] == 10 and m["n"] == 4
    assert 0 <= m["avg@4"] <= m["pass@k"]["4"] <= 1
    assert 0 < m["mean_response_tokens"] <= 12 and 0 <= m["truncation_rate"] <= 1
    assert summary["throughput"]["new_samples"] == 40 and summary["throughput"]["samples_per_s"] > 0
    assert len((out / "samples.jsonl").read_text().splitlines()) == 40
    assert (out / "passk.png").exists() and "| arith | 10 |" in (out / "results.md").read_text()

    assert main(argv) == 0  # resume: nothing left to generate
    assert json.loads((out / "summary.json").read_text())["throughput"]["new_samples"] == 0
    # --correct-threshold reaches the scorer: a partial-credit reward of 0.5 on every sample is
    # correct under the default threshold 0 and incorrect under 0.75
    (tmp_path / "half_credit.py").write_text("def half(completions, answers):\n"
                                             "    return [0.5 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for threshold, want in ((None, 1.0), ("0.75", 0.0)):
        run = tmp_path / f"half-{threshold}"
        extra = ["--reward", "half_credit:half"] + (["--correct-threshold", threshold] if threshold else [])
        assert main([str(run) if a == str(out) else a for a in argv] + extra) == 0
        s = json.loads((run / "summary.json").read_text())
        assert s["settings"]["correct_threshold"] == float(threshold or 0)
        assert s["benchmarks"]["arith"]["avg@4"] == want

    png = tmp_path / "overlay.png"
    assert main(["plot-passk", str(out), str(out), "--out", str(png), "--labels", "GRPO", "ResRL"]) == 0
    assert png.stat().st_size > 10_000
    # bad input: one error line naming the problem, exit code 2, no traceback
    assert main(["plot-passk", str(tmp_path), "--out", str(png)]) == 2
    assert "no summary.json" in capsys.readouterr().err


def test_plain_callable_scorer_without_answers(tmp_path):
    def right(completions, answers):  # bools, no answer extraction -> no maj@k
        return [c.endswith(f"{{{a}}}") for c, a in zip(completions, answers)]

    summary = evaluate(None, {"a": problems("a")}, config(), tmp_path / "run", generator=ScriptedGenerator(),
                       scorer=right)
    m = summary["benchmarks"]["a"]
    assert m["avg@4"] == pytest.approx(9 / 20) and m["maj@k"] is None
    assert "| a | 5 | 45.0 | 45.0 | 63.3 | 80.0 | – |" in (tmp_path / "run" / "results.md").read_text()
