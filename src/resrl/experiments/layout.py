"""Where an experiment's runs live on disk, and the one handoff between its processes.

    OUT/experiment.json          the handoff: the task's name, its config, the inputs every worker
                                 reads (`write_handoff` / `read_handoff`)
    OUT/<run>/                   one method's run: `run_dir(OUT, label)`, the label as one directory
                                 name (`resrl/resrl.rank=4` -> `resrl+resrl.rank=4`, `run_dir_name`)
    OUT/<run>/result.json        the run's result, written whole then renamed: its existence means
                                 done (`write_result`; RESULT_FILE)
    OUT/<run>/trained.json       the run's training finished and its model is saved; its evaluation
                                 may not be (TRAINED_FILE): a resumed run evaluates, it does not train
    OUT/<run>/worker.log         a worker's stdout and stderr (WORKER_LOG)
    OUT/summary.json             the experiment's summary, written last (SUMMARY_FILE: the name every
                                 summary of resrl's has, the evaluator's of OUT/eval/<policy>/greedy too)
    OUT/seed-S/                  one seed of a multi-seed experiment (`seed_dir`); its summary.json
                                 means done
    OUT/seed-S/run_config.json   the experiment config that seed's process runs (RUN_CONFIG_FILE,
                                 written by the parent: `resrl.experiments.seeds.run_seeds`); the
                                 grid's dev phase has its own in OUT/dev/

`resrl demo` (every task), `resrl demo --seeds`, `--grid` and `resrl compare` name their runs with
these functions; `resrl.experiments.jobs.run_jobs` runs them.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

HANDOFF_FILE = "experiment.json"
RESULT_FILE = "result.json"
TRAINED_FILE = "trained.json"
SUMMARY_FILE = "summary.json"
WORKER_LOG = "worker.log"
RUN_CONFIG_FILE = "run_config.json"


def run_dir_name(label: str) -> str:
    """A method's label (`resrl.train.variants`) as one directory name."""
    from resrl.train.variants import parse_variant

    return parse_variant(label).dir_name


def run_dir(out: str | Path, label: str) -> Path:
    return Path(out) / run_dir_name(label)


def seed_dir(out: str | Path, seed: int) -> Path:
    return Path(out) / f"seed-{seed}"


def jsonable(obj: Any) -> Any:
    """Nested dicts / lists / tuples / numpy or torch scalars -> JSON values (NaN -> null)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    if hasattr(obj, "item"):
        return obj.item()
    return obj


def write_json_atomic(path: Path, data: Any) -> Path:
    """Write `data` to `path` whole (a temporary file, then renamed): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(data), indent=1))
    tmp.replace(path)
    return path


def write_result(out: str | Path, label: str, result: dict) -> Path:
    """OUT/<run>/result.json, the run's done-marker."""
    return write_json_atomic(run_dir(out, label) / RESULT_FILE, result)


def read_result(out: str | Path, label: str) -> dict:
    return json.loads((run_dir(out, label) / RESULT_FILE).read_text())


# -- the handoff: a config dataclass to JSON and back ---------------------------------------------

def config_to_dict(cfg: Any) -> dict:
    return jsonable(dataclasses.asdict(cfg))


def config_from_dict(cls: type, data: dict, sections: dict[str, type] | None = None) -> Any:
    """The inverse of `config_to_dict`: `cls` built from `data`, a field whose annotation is a
    dataclass (or named in `sections`: a field whose type varies, e.g. a demo's task shape) built
    from its mapping the same way, JSON lists back to the tuples the dataclasses hold."""
    hints = typing.get_type_hints(cls)
    sections = sections or {}
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        section = sections.get(f.name, hints.get(f.name))
        if isinstance(value, dict) and isinstance(section, type) and dataclasses.is_dataclass(section):
            value = config_from_dict(section, value)
        else:
            value = _tuples(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def write_handoff(out: str | Path, task: str, cfg: Any, inputs: dict | None = None) -> Path:
    return write_json_atomic(Path(out) / HANDOFF_FILE, {"task": task, "config": config_to_dict(cfg),
                                                        "inputs": inputs or {}})


def read_handoff(out: str | Path) -> dict:
    """{"task", "config" (a dict: the experiment builds its dataclass), "inputs"}."""
    path = Path(out) / HANDOFF_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no experiment handoff (a worker runs inside an experiment's OUT)") from None


__all__ = ["HANDOFF_FILE", "RUN_CONFIG_FILE", "RESULT_FILE", "TRAINED_FILE", "SUMMARY_FILE", "WORKER_LOG", "run_dir_name", "run_dir", "seed_dir",
           "jsonable", "write_json_atomic", "write_result", "read_result", "config_to_dict", "config_from_dict",
           "write_handoff", "read_handoff"]
