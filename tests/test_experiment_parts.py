"""scripts/experiment_parts.py: an experiment's finished work travels without its weights, and comes back
resumable (issue 54's experiment runs in parts on machines that keep nothing between sessions)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _parts():
    spec = importlib.util.spec_from_file_location("experiment_parts", ROOT / "scripts" / "experiment_parts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _grid_out(tmp_path: Path) -> tuple[Path, Path]:
    """A grid experiment as `resrl demo --grid ... --seeds 0,1` leaves it midway: the dev phase with one
    finished run (weights, checkpoints, curve models) and one killed while training; seed 1 not begun."""
    base = tmp_path / "models" / "base"
    _write(base / "config.json", "{}")
    _write(base / "model.safetensors", "weights")
    out = tmp_path / "OUT"
    dev = out / "dev"
    _write(dev / "experiment.json", json.dumps({"task": "t", "config": {"start": {"model_dir": str(base)}}}))
    _write(dev / "start.json", "{}")
    _write(dev / "train_rows.jsonl", "{}\n")
    _write(dev / "demo.log")
    _write(dev / "run_config.json", "{}")
    (dev / "warm_start").symlink_to(base, target_is_directory=True)
    done = dev / "grpo+train.learning_rate=1e-05"
    for name in ("metrics.jsonl", "train_config.json", "result.json", "trained.json", "worker.log"):
        _write(done / name, name)
    _write(done / "model" / "model.safetensors", "weights")
    _write(done / "checkpoint-60" / "model.safetensors", "weights")
    _write(done / "curve" / "step-20" / "model.safetensors", "weights")
    killed = dev / "resrl+train.learning_rate=1e-05"
    _write(killed / "metrics.jsonl", "{}\n")
    _write(killed / "checkpoint-8" / "model.safetensors", "weights")
    _write(dev / "eval" / "grpo+train.learning_rate=1e-05" / "sampled" / "samples.jsonl", "{}\n")
    _write(out / "seed-1" / "run_config.json", "{}")
    return out, base


def test_pack_keeps_finished_runs_and_records_without_weights(tmp_path):
    parts = _parts()
    out, _ = _grid_out(tmp_path)
    dest = tmp_path / "pack"
    done = parts.pack(out, dest)
    assert done == {"runs": ["dev/grpo+train.learning_rate=1e-05"], "left": ["dev/resrl+train.learning_rate=1e-05"]}
    files = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink()}
    run = "dev/grpo+train.learning_rate=1e-05"
    assert {f"{run}/{n}" for n in ("metrics.jsonl", "train_config.json", "result.json", "trained.json", "worker.log")} <= files
    assert {"dev/experiment.json", "dev/start.json", "dev/train_rows.jsonl", "dev/run_config.json",
            "dev/eval/grpo+train.learning_rate=1e-05/sampled/samples.jsonl", "seed-1/run_config.json"} <= files
    assert not any(f.endswith(".safetensors") for f in files)  # no weights, no base model
    assert not any("resrl+train" in f and not f.startswith("dev/eval") for f in files)  # the unfinished run
    assert not (dest / "dev" / "warm_start").exists() and not (dest / "dev" / "warm_start").is_symlink()


def test_packed_logs_name_no_folder_of_the_machine(tmp_path, monkeypatch):
    """A pack is committed: a warning's path into this machine's Python environment, and the directory
    the experiment ran in, do not travel with it (every other line does)."""
    import sys

    parts = _parts()
    out, _ = _grid_out(tmp_path)
    monkeypatch.chdir(tmp_path)
    env = str(Path(sys.prefix).resolve())
    warning = f"{env}/lib/python3.11/site-packages/transformers/modeling_utils.py:3303: UserWarning: x\n"
    _write(out / "dev" / "grpo+train.learning_rate=1e-05" / "worker.log", warning + f"saved to {tmp_path}/OUT/dev\n")
    _write(out / "dev" / "console.log", f"[ 1.0 s] start from {tmp_path}/models/base\nbar 1%\rbar 2%\n")
    dest = tmp_path / "pack"
    parts.pack(out, dest)
    worker = (dest / "dev" / "grpo+train.learning_rate=1e-05" / "worker.log").read_text()
    console = (dest / "dev" / "console.log").read_bytes().decode()
    assert env in (out / "dev" / "grpo+train.learning_rate=1e-05" / "worker.log").read_text()  # it was there
    assert worker == ("<python>/lib/python3.11/site-packages/transformers/modeling_utils.py:3303: UserWarning: x\n"
                      "saved to ./OUT/dev\n")
    assert console == "[ 1.0 s] start from ./models/base\nbar 1%\rbar 2%\n"  # every other byte as it was
    assert not any(str(tmp_path) in p.read_text() or env in p.read_text() for p in dest.rglob("*.log"))


def test_unpack_links_the_start_again_and_the_run_is_kept_on_resume(tmp_path):
    parts = _parts()
    out, base = _grid_out(tmp_path)
    dest = tmp_path / "pack"
    parts.pack(out, dest)
    again = tmp_path / "OUT2"
    links = parts.unpack(dest, again)
    assert links == [again / "dev" / "warm_start"]
    assert (again / "dev" / "warm_start").resolve() == base.resolve()
    # what `resrl demo` reads to keep the finished run: the same names as resrl's layout
    from resrl.experiments.layout import HANDOFF_FILE, RESULT_FILE, run_dir
    from resrl.experiments.method import CURVE_DIR

    assert (parts.HANDOFF_FILE, parts.RESULT_FILE) == (HANDOFF_FILE, RESULT_FILE) and CURVE_DIR in parts.WEIGHTS
    assert (run_dir(again / "dev", "grpo/train.learning_rate=1e-05") / RESULT_FILE).is_file()
    # unpacking again is a no-op; a file that differs is not overwritten
    assert parts.unpack(dest, again) == []
    _write(again / "dev" / "start.json", '{"other": 1}')
    with pytest.raises(SystemExit, match="differs"):
        parts.unpack(dest, again)


def test_pack_of_a_directory_without_an_experiment_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no experiment"):
        _parts().pack(tmp_path, tmp_path / "pack")
