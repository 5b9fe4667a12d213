"""benchmarks/bench_generation.py at CI size (the tiny model, two paths, one timed call): it runs,
writes its table and JSON, and every case reports what the table promises. No timing assertion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_generation_runs_at_ci_size(tmp_path):
    out_json, out_md = tmp_path / "gen.json", tmp_path / "gen.md"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_generation.py"), "--device", "cpu",
                           "--shape", "tiny", "--paths", "hf,hf+shared,vllm", "--repeats", "1",
                           "--json", str(out_json), "--out-md", str(out_md)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out_json.read_text())
    cases = {r["path"]: r for r in report["results"]}
    assert set(cases) == {"hf", "hf+shared", "vllm"}
    for path in ("hf", "hf+shared"):
        r = cases[path]
        assert r["status"] == "ok" and r["rows"] == 16 and r["tokens"] == 8, r
        for key in ("first_s", "call_s", "tokens_s", "prefill_s", "floor_ms", "peak_mib", "x_hf"):
            assert isinstance(r[key], (int, float)) and r[key] > 0, (path, key, r[key])
        assert r["tokens_s"] == r["rows"] * r["tokens"] / r["call_s"]
    assert cases["hf"]["x_hf"] == 1.0
    assert cases["hf+shared"]["x_hf"] == cases["hf+shared"]["tokens_s"] / cases["hf"]["tokens_s"]
    # a path that cannot run is a row that says why, not a crash and not another sampler
    if cases["vllm"]["status"] == "unavailable":
        assert "vllm is not installed" in cases["vllm"]["note"]
    table = out_md.read_text()
    assert "| 16 | hf+shared |" in table and "× hf" in table and "floor ms / step" in table
    assert report["rate"]["flops_s"] > 0  # the CPU floor's measured matmul rate
