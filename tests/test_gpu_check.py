"""The GPU check's CPU rehearsal (issue 34, docs/gpu.md): `scripts/gpu-check.sh OUT --device cpu --tiny`
runs every part on a tiny model and writes the report a GPU run would write; these tests read its
keys and the sanity of its numbers, so that the script cannot rot between GPUs. No test needs a GPU.

Also: a part that raises or overruns its budget is reported as such and the report is still
written, and `resrl.engines.trl.phases.PhaseTimer` (log.phase_times) times phases exclusively and is a
shared null context when off.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRAIN_PARTS = ("train-grpo-hf", "train-grpo", "train-resrl-aligned", "train-resrl-extra-pass")
ALL_PARTS = ("env", "model", "generation", *TRAIN_PARTS, "bench-weights", "numerics", "matrix", "engines")
STEPS = {"train-grpo-hf": 2}  # the HF-generation run that gives the step split before: 2 steps; the others 3


def _run_check(out: Path, *extra: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "RESRL_GPU_CHECK_PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(out), "--device", "cpu", "--tiny",
                           *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "out"
    t0 = time.perf_counter()
    proc = _run_check(out)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    return report, (out / "gpu_check.md").read_text(), wall


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow  # 1.5-5 min on 2 shared cores: eight subprocesses, three `resrl train` runs
def test_rehearsal_runs_every_part(rehearsal):
    report, md, _ = rehearsal
    assert report["finished"] is True and report["tiny"] is True and report["device_requested"] == "cpu"
    assert tuple(report["parts"]) == ALL_PARTS
    bad = {n: (e["status"], e.get("error"), e.get("log_tail", "")[-800:]) for n, e in report["parts"].items()
           if e["status"] != "ok"}
    assert not bad, bad
    for name, e in report["parts"].items():
        assert _positive(e["wall_s"]) and e["wall_s"] <= e["budget_s"] + 20, (name, e["wall_s"], e["budget_s"])
    env = report["parts"]["env"]
    assert env["versions"]["torch"] and env["versions"]["trl"] and env["cuda_available"] in (True, False)


@pytest.mark.slow
def test_rehearsal_training_numbers(rehearsal):
    report, _, _ = rehearsal
    for name in TRAIN_PARTS:
        e = report["parts"][name]
        n = STEPS.get(name, 3)
        assert e["steps_done"] == n and e["loss_finite"] is True, name
        # the run learned from something: the check's reward ran without a fault and told completions
        # apart (a reward the adapter could not call scored 0 everywhere and still "finished")
        assert not any(e["reward_faults"].values()) and e["rewards_mixed"] is True, (name, e["reward_faults"])
        assert any(s["grad_norm"] > 0 for s in e["steps"]), name
        assert all(math.isfinite(s["loss"]) for s in e["steps"])
        ck = e["checkpoint"]
        assert ck["ok"] and ck["global_step"] == n and ck["reloaded_forward_finite"], (name, ck)
        assert ck["reloaded_from"] == f"checkpoint-{n}" and ck["optimizer_state_params"] > 0, ck
        ph = e["phases"]
        for key in ("step_s", "generation_s", "forward_backward_s"):
            assert _positive(ph[key]), (name, key, ph[key])
        for key in ("old_logps_s", "weights_s", "other_s"):
            assert ph[key] is not None and math.isfinite(ph[key]) and ph[key] >= 0, (name, key, ph[key])
        # the phases add up to the step (other_s is the remainder, never negative)
        parts = sum(ph[f"{k}_s"] for k in ("generation", "old_logps", "weights", "forward_backward", "other"))
        assert parts == pytest.approx(ph["step_s"], rel=0.05), (name, ph)
        # peak memory: CUDA's allocator only; reported as unavailable on CPU
        assert all(ph[f"{k}_peak_gib"] is None for k in ("step", "generation", "weights", "forward_backward"))
        assert "unavailable on CPU" in e["memory_note"]
    ext = report["parts"]["train-resrl-extra-pass"]["phases"]
    ali = report["parts"]["train-resrl-aligned"]["phases"]
    grpo = report["parts"]["train-grpo"]["phases"]
    assert ext["old_logps_s"] > 0          # the extra no-grad pass is timed
    assert ali["old_logps_s"] == 0 and grpo["old_logps_s"] == 0  # one update per round: no old-log-prob pass
    assert ali["weights_s"] > 0 and ext["weights_s"] > 0
    ratios = report["summary"]["resrl_over_grpo"]
    for mode in ("resrl-aligned", "resrl-extra-pass"):
        assert _positive(ratios[mode]["step_s"]) and ratios[mode]["step_peak_gib"] is None
    # before: HF generate (TRL's call); after: the generation part's fastest path the trainer runs
    assert report["parts"]["train-grpo-hf"]["generation"] == {"backend": "hf", "shared_prefill": False,
                                                              "reuse_frozen": False}
    chosen = report["parts"]["generation"]["fastest_for_training"]["path"]
    for name in TRAIN_PARTS[1:]:
        assert report["parts"][name]["generation_from"].startswith(chosen), name
    assert _positive(report["summary"]["grpo_hf_over_fastest"]["step_s"])


@pytest.mark.slow
def test_rehearsal_generation_part(rehearsal):
    """Every path's tokens/s at the check's (here tiny) shape against HF generate, the table in OUT,
    and the fastest path the trainer can run chosen from the measured ones."""
    report, md, _ = rehearsal
    gen = report["parts"]["generation"]
    assert gen["status"] == "ok"
    assert set(gen["paths"]) == {"hf", "hf+shared", "compiled+shared"}
    for path, p in gen["paths"].items():
        assert p["status"] == "ok" and _positive(p["tokens_s"]) and _positive(p["call_s"]), (path, p)
        assert _positive(p["floor_ms"]) and p["peak_mib"] > 0
    assert gen["paths"]["hf"]["x_hf"] == pytest.approx(1.0)
    best = gen["fastest_for_training"]
    assert best["path"] in ("hf", "hf+shared")  # the rehearsal's trainer candidates (no inductor compile on CPU)
    assert best["tokens_s"] == max(gen["paths"][p]["tokens_s"] for p in ("hf", "hf+shared"))
    assert "## Generation" in md and "× hf" in md


@pytest.mark.slow
def test_rehearsal_weights_and_numerics(rehearsal):
    report, md, _ = rehearsal
    bw = report["parts"]["bench-weights"]
    assert [s["rows"] for s in bw["shapes"]] == [32, 64]
    for s in bw["shapes"]:
        assert _positive(s["resrl_s"]) and _positive(s["authors_loop_s"]) and _positive(s["speedup_vs_authors"])
        assert s["share_of_step"] is None  # an estimate against a GPU's peak: CUDA only
    nu = report["parts"]["numerics"]
    assert nu["finite"] and nu["negative_tokens"] > 0
    assert 0 <= nu["max_abs_delta_omega"] < 0.9 and nu["mean_abs_delta_omega"] <= nu["max_abs_delta_omega"]
    assert 0.5 < nu["spearman_omega"] <= 1.0
    en = report["parts"]["engines"]
    assert en["vLLM rollouts"]["ran"] is False and en["vLLM rollouts"]["why"]
    assert en["DeepSpeed ZeRO"]["ran"] is False
    for heading in ("## Parts", "## Generation", "## Training", "ResRL ÷ GRPO", "## ResRL's weights", "## Numerics",
                    "## What did not run, and why", "vLLM"):
        assert heading in md, heading
    # every output written straight to OUT: one log per part, the progress lines, the generation table
    out = Path(report["out"])
    assert {f"{n}.log" for n in ALL_PARTS} <= {p.name for p in (out / "logs").iterdir()}
    assert (out / "generation.md").is_file() and (out / "generation.json").is_file()
    assert len((out / "progress.log").read_text().splitlines()) == 2 * len(ALL_PARTS) + 1


@pytest.mark.slow
def test_rehearsal_matrix_part(rehearsal):
    """The conformance matrix part ran in its subprocess and wrote its table (its cells are checked in
    test_matrix_part_runs_the_conformance_checks, in-process)."""
    report, md, _ = rehearsal
    ma = report["parts"]["matrix"]
    assert ma["status"] == "ok" and ma["cells"] == 30 and not ma["failed"] and ma["skipped"] == 0, ma.get("failed")
    assert "## Conformance matrix" in md and "compiled_graphs" in md


def _gpu_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_matrix_part_runs_the_conformance_checks(tmp_path):
    """The GPU check's `matrix` part (issue 51), in-process with the CPU rehearsal's profile: every cell
    of resrl.models.conformance.run_matrix for the profile's families — each path x sampling's
    log-probs, the compiled path's graph count, the shortcut's gradient — judged against the profile's
    tolerances, its report section written. On a GPU the same part runs the sliding-window and
    mixed-layer families in bf16, compiled with inductor (CUDA graphs): the profile says so."""
    from types import SimpleNamespace

    from resrl.models.attention import attention_layout
    from resrl.models.conformance import FAMILIES, PATH_SPECS, config_of

    gc = _gpu_check_module()
    args = SimpleNamespace(device="cpu", tiny=True, budget=150.0, max_new_tokens=128)
    (tmp_path / "parts").mkdir()
    prof = gc.profile(args)
    res = gc.part_matrix(args, tmp_path, prof)
    rows = res["rows"]
    assert res["status"] == "ok", res.get("failed")
    assert len(rows) == 2 * (len(PATH_SPECS) * 2 + 2 + 1) and all(r["ok"] for r in rows)
    checks = {(r["family"], r["check"], r.get("path") or r.get("option"), r.get("sampling")) for r in rows}
    for family in ("qwen3-sliding", "gemma3"):
        assert (family, "compiled_graphs", None, None) in checks
        assert all((family, "logprobs", p, s) in checks for p in PATH_SPECS for s in ("temperature", "top-k/top-p"))
    assert all(r["value"] == 1 for r in rows if r["check"] == "compiled_graphs")
    assert all(r["value"] < 1e-4 and r["outside"] == 0 for r in rows if r["check"] == "logprobs")
    assert (tmp_path / "parts" / "matrix.json").is_file()  # written as the rows came
    # the report's section
    out = tmp_path / "out"
    out.mkdir()
    gc.write_report(out, {"started": "now", "tiny": True, "device_requested": "cpu", "command": "test",
                          "parts": {"matrix": {**res, "wall_s": 1.0, "budget_s": 150}}})
    md = (out / "gpu_check.md").read_text()
    assert "## Conformance matrix" in md and md.count("| yes |") == len(rows)
    # a cell out of tolerance fails the part, naming it
    bad = gc.matrix_verdict([{"family": "gemma3", "check": "logprobs", "path": "compiled+shared", "sampling": "top-k/top-p",
                              "value": 0.01, "outside": 5}, {"family": "gemma3", "check": "compiled_graphs", "value": 4}],
                            prof["matrix"])
    assert bad["status"] == "error" and len(bad["failed"]) == 2 and "compiled+shared" in bad["error"]
    # the GPU profile: bf16, inductor (CUDA graphs on CUDA), every sliding / mixed family of the matrix
    gpu = gc.profile(SimpleNamespace(tiny=False, max_new_tokens=128))["matrix"]
    assert (gpu["dtype"], gpu["compile_backend"]) == ("bfloat16", "inductor")
    assert set(gpu["families"]) == {f for f in FAMILIES if attention_layout(config_of(f)) == "sliding"}
    assert set(gpu["paths"]) == set(PATH_SPECS) and "matrix" in gc.part_names(SimpleNamespace(parts=None))


def test_broken_or_slow_part_is_reported_and_the_report_kept(tmp_path):
    """A part that raises is `error` with its message, one over its budget `timeout`; the others run
    and the report is written either way (fast: the env and engines parts only)."""
    out = tmp_path / "out"
    proc = _run_check(out, "--parts", "env,engines", "--plant", "env", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["parts"]["env"]["status"] == "error"
    assert "planted break" in report["parts"]["env"]["error"]
    assert report["parts"]["engines"]["status"] == "ok"
    md = (out / "gpu_check.md").read_text()
    assert "part `env`: error" in md and "planted break" in md

    out2 = tmp_path / "out2"
    proc = _run_check(out2, "--parts", "env", "--plant", "hang:env", "--budget-scale", "0.02", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out2 / "gpu_check.json").read_text())
    assert report["parts"]["env"]["status"] == "timeout" and report["finished"] is True
    assert "part `env`: timeout" in (out2 / "gpu_check.md").read_text()


# ---- log.phase_times: resrl.engines.trl.phases.PhaseTimer ---------------------------------------------

def test_phase_timer_off_is_a_shared_null_context():
    from resrl.engines.trl.phases import PhaseTimer

    timer = PhaseTimer(False, "cpu")
    assert timer.phase("generation") is timer.phase("weights")
    timer.begin_step()
    sink: dict = {}
    timer.end_step(sink)
    assert sink == {}


def test_phase_timer_times_are_exclusive_and_add_up():
    from collections import defaultdict

    from resrl.engines.trl.phases import PhaseTimer

    timer = PhaseTimer(True, "cpu")
    sink = defaultdict(list)
    timer.begin_step()
    with timer.phase("forward_backward"):
        time.sleep(0.02)
        with timer.phase("generation"):
            time.sleep(0.03)
            with timer.phase("old_logps"):
                time.sleep(0.02)
        with timer.phase("weights"):
            time.sleep(0.01)
    time.sleep(0.01)
    timer.end_step(sink)
    got = {k: v[0] for k, v in sink.items()}
    assert got["time/old_logps_s"] == pytest.approx(0.02, abs=0.015)
    assert got["time/generation_s"] == pytest.approx(0.03, abs=0.015)   # its nested pass subtracted
    assert got["time/weights_s"] == pytest.approx(0.01, abs=0.015)
    assert got["time/forward_backward_s"] == pytest.approx(0.02, abs=0.015)
    assert got["time/other_s"] == pytest.approx(0.01, abs=0.015)
    phases = sum(got[f"time/{k}_s"] for k in ("generation", "old_logps", "weights", "forward_backward", "other"))
    assert phases == pytest.approx(got["time/step_s"], rel=1e-6)
    assert not any(k.startswith("memory/") for k in got)  # CPU: no peak memory
