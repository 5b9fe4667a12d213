"""benchmarks/bench_smollm2_step.py's pure helpers: reading the per-step phase times a trainer logged
(log.phase_times) and the medians, ratios to GRPO and weights' share it reports. No model, no timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # it imports bench_step, beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_smollm2_step", BENCHMARKS / "bench_smollm2_step.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def _log(step, generation, old_logps, weights, forward_backward, other=0.5):
    total = generation + old_logps + weights + forward_backward + other
    return {"step": step, "loss": 0.0, "time/step_s": total, "time/generation_s": generation,
            "time/old_logps_s": old_logps, "time/weights_s": weights,
            "time/forward_backward_s": forward_backward, "time/other_s": other}


def test_phase_steps_drops_the_warm_up_and_the_run_summary(bench):
    history = [_log(1, 30.0, 0.0, 0.1, 90.0), _log(2, 20.0, 0.0, 0.1, 70.0), _log(3, 21.0, 0.0, 0.2, 71.0),
               {"train_runtime": 300.0, "step": 3}]
    steps = bench.phase_steps(history)
    assert [s["generation"] for s in steps] == [20.0, 21.0]
    assert set(steps[0]) == set(bench.COLUMNS) == {"generation", "old_logps", "weights", "forward_backward",
                                                    "other", "step"}
    assert steps[0]["step"] == pytest.approx(20.0 + 0.1 + 70.0 + 0.5)


def test_phase_steps_refuses_a_step_without_a_phase(bench):
    entry = _log(1, 1.0, 0.0, 0.1, 2.0)
    del entry["time/weights_s"]
    with pytest.raises(KeyError, match="weights"):
        bench.phase_steps([entry], warmup=0)


def test_summary_medians_ratios_and_weights_share(bench):
    grpo = [_log(i, g, 0.0, 0.1, 60.0) for i, g in enumerate([20.0, 22.0, 50.0])]
    extra = [_log(i, 22.0, 20.0, w, 60.0) for i, w in enumerate([1.0, 1.5, 9.0])]
    summary = bench.summarise({"grpo": bench.phase_steps(grpo, warmup=0),
                               "resrl extra-pass": bench.phase_steps(extra, warmup=0)})
    g, e = summary["grpo"], summary["resrl extra-pass"]
    assert g["steps"] == e["steps"] == 3
    assert g["median_s"]["generation"] == 22.0  # median, not mean: the 50 s outlier does not count
    assert e["median_s"]["weights"] == 1.5
    assert g["ratio_to_base"]["step"] == 1.0
    assert e["ratio_to_base"]["generation"] == pytest.approx(1.0)
    assert e["ratio_to_base"]["weights"] == pytest.approx(15.0)
    assert e["ratio_to_base"]["old_logps"] is None  # GRPO runs no old-log-prob pass: no ratio
    assert e["weights_share"] == pytest.approx(1.5 / e["median_s"]["step"])
    table = bench.markdown_table(summary).splitlines()
    assert len(table) == 4 and table[0].startswith("| variant | generation | old logps | weights |")
    assert "(15.00×)" in table[3] and table[3].endswith(f"| {100 * 1.5 / e['median_s']['step']:.3f} % |")
    assert "peak GPU memory" not in table[0]  # a CPU run has no memory column
    # a CUDA run: the peak memory of each variant, with its ratio to GRPO's
    g["peak_gpu_bytes"], e["peak_gpu_bytes"] = 900 * 2**20, 918 * 2**20
    table = bench.markdown_table(summary).splitlines()
    assert table[0].endswith("| peak GPU memory MiB |")
    assert table[2].endswith("| 900 |") and table[3].endswith("| 918 (1.020×) |")


def test_prompts_are_one_or_two_digit_additions_with_the_boxed_instruction(bench):
    rows = bench.addition_prompts(50)
    assert rows == bench.addition_prompts(50)  # seeded
    for row in rows:
        (message,) = row["prompt"]
        assert message["role"] == "user" and message["content"].endswith("Put the result in \\boxed{}.")
        a, b = (int(x) for x in message["content"].removeprefix("What is ").split("?")[0].split(" + "))
        assert 1 <= a <= 99 and 1 <= b <= 99 and row["answer"] == str(a + b)


def test_the_benchmark_trains_the_demos_top_layers_when_asked(bench, tmp_path):
    """--trainable-layers reaches the benchmark's trainer (bench_step.build_trainer loads the model
    itself, so it must freeze as resrl.train's runner does), and --micro-batch its micro-batch."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from train_helpers import build_small_model
    finally:
        sys.path.pop(0)
    from bench_step import build_trainer

    model_dir = build_small_model(tmp_path / "tiny")
    args = bench.parse_args(["--model", model_dir, "--prompts", "2", "--group-size", "4", "--tokens", "4",
                             "--steps", "1", "--micro-batch", "4", "--trainable-layers", "1"])
    assert [v[4] for v in bench.variants(args)] == [4, 4, 4]  # (label, kind, algorithm, mode, micro-batch, keys)
    trainer = build_trainer(model_dir, tmp_path / "out", args, "ours", "grpo", "auto", 4,
                            overrides=bench.trainer_overrides(args))
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("model.layers.1.") or n == "model.norm.weight" for n in trainable)
    # --compare-generation's "before" rows reach the trainer: TRL's generate call, nothing reused
    before = build_trainer(model_dir, tmp_path / "out2", args, "ours", "grpo", "auto", 4,
                           overrides=[*bench.trainer_overrides(args), *bench.BEFORE])
    r = before.rollout_path.resolved
    assert (r.backend, r.own_path, r.shared_prefill, r.reuse_frozen) == ("hf", False, False, False)
