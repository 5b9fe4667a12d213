"""Carry a resumable `resrl demo` experiment (with --grid and --seeds too) to another machine without
its weights, so that a long experiment runs in parts on machines that keep nothing between sessions.

    python scripts/experiment_parts.py pack OUT DIR     OUT's finished work, without weights, into DIR
    python scripts/experiment_parts.py unpack DIR OUT   DIR back into OUT, each start re-linked

Run both from the directory the `resrl demo` command runs in (its OUT and the base model's directory
are relative to it), then run the same `resrl demo` command again: every run whose result.json came
back is kept (resrl.experiments.workers.run_methods), the others run.

`pack` copies, for OUT and every experiment below it (OUT/dev, OUT/seed-S: a directory holding
experiment.json): the experiment's own files (experiment.json, start.json, the rows its start wrote,
summary, report, plots, logs, run_config.json), its evaluation records (eval/: an interrupted
evaluation resumes from them), and each finished run's directory (result.json there): metrics.jsonl,
train_config.json, result.json, trained.json, worker.log. It leaves out the weights — a run's model/,
checkpoint-*/ and curve/ (the models kept at --curve-steps), and OUT/warm_start when it is a link to
the base model — and every unfinished run: its checkpoints cannot travel, so the same command trains
it again from the start. A grid's first seed, which evaluates the dev phase's models instead of
training them again, trains them again when they were packed (they have no model/ then): the same
seed and start, so the same training.

`unpack` copies DIR into OUT (refusing to overwrite a file that differs) and, in each experiment
whose start was the pretrained base model (config start.model_dir), links OUT/warm_start to it again,
converting it first where this machine has not (resrl.experiments.kinds.ensure_base_model).

A pack is meant to be committed, so its logs name no folder of the machine that ran them: the Python
environment's path (in warnings) reads `<python>`, the directory `pack` runs in reads `.`.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from pathlib import Path

from resrl.experiments.layout import HANDOFF_FILE, RESULT_FILE, TRAINED_FILE, WORKER_LOG
from resrl.experiments.method import CURVE_DIR

START_LINK = "warm_start"
WEIGHTS = ("model", CURVE_DIR)  # a run's saved model and the models kept at --curve-steps
RUN_FILES = ("metrics.jsonl", "train_config.json", RESULT_FILE, TRAINED_FILE, WORKER_LOG)


def experiments(out: Path) -> list[Path]:
    """OUT and every experiment directory below it (one holding experiment.json), OUT first; [] when
    there is none."""
    found = sorted({p.parent for p in out.rglob(HANDOFF_FILE)} - {out}, key=lambda p: (len(p.parts), str(p)))
    return [out, *found] if found or (out / HANDOFF_FILE).is_file() else []


def _is_run(path: Path) -> bool:
    return path.is_dir() and (any(path.glob("checkpoint-*")) or any((path / f).exists() for f in (*RUN_FILES, *WEIGHTS)))


def _no_weights(folder: str, names: list[str]) -> set[str]:
    """copytree's ignore: links (the base model) and weights (model/, curve/, checkpoint-*/)."""
    return {n for n in names if (Path(folder) / n).is_symlink() or n in WEIGHTS or n.startswith("checkpoint-")}


def pack(out: Path, dest: Path) -> dict:
    """Copy OUT's finished work, without weights, to `dest` (see the module docstring). Returns
    {"runs": [finished runs packed, relative to OUT], "left": [unfinished runs left out]}."""
    out, dest = Path(out), Path(dest)
    exps = experiments(out)
    if not exps:
        raise SystemExit(f"experiment_parts: {out} holds no experiment ({HANDOFF_FILE} nowhere below it)")
    packed, left = [], []
    nested = {e for e in exps if e != out}
    for exp in exps:
        for entry in sorted(exp.iterdir()):
            rel = entry.relative_to(out)
            if entry in nested:  # packed as an experiment of its own
                continue
            if entry.name == START_LINK and entry.is_symlink():
                continue  # the base model: unpack links it again
            if _is_run(entry):
                if (entry / RESULT_FILE).is_file():
                    (dest / rel).mkdir(parents=True, exist_ok=True)
                    for name in RUN_FILES:
                        if (entry / name).is_file():
                            shutil.copy2(entry / name, dest / rel / name)
                    packed.append(str(rel))
                else:
                    left.append(str(rel))
            elif entry.is_file() and not entry.is_symlink():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(entry, dest / rel)
            elif entry.is_dir() and not entry.is_symlink():
                # eval/ (records), a warm start the experiment trained itself (the tiny tasks': small), a
                # seed or dev directory whose experiment has not begun (its run_config.json)
                shutil.copytree(entry, dest / rel, dirs_exist_ok=True, ignore=_no_weights)
    for log in dest.rglob("*.log"):  # newline="": a progress bar's carriage returns stay as they were
        with open(log, encoding="utf-8", errors="replace", newline="") as f:
            text = f.read()
        with open(log, "w", encoding="utf-8", newline="") as f:
            f.write(without_machine_paths(text))
    return {"runs": packed, "left": left}


def without_machine_paths(text: str) -> str:
    """A log as it reads on any machine: where this machine's Python environment lies (a warning's
    `.../site-packages/transformers/...`) becomes `<python>`, the directory the experiment runs in
    (where `pack` runs) `.`. A pack is committed: it names no folder of the machine that ran it."""
    places = {str(Path(sys.prefix).resolve()): "<python>", str(Path(sys.prefix)): "<python>",
              str(Path.cwd().resolve()): ".", str(Path.cwd()): "."}
    for place in sorted(places, key=len, reverse=True):
        if place not in ("/", "."):
            text = text.replace(place, places[place])
    return text


def _copy_back(src: Path, out: Path) -> None:
    for path in sorted(src.rglob("*")):
        target = out / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif target.exists() and not filecmp.cmp(path, target, shallow=False):
            raise SystemExit(f"experiment_parts: {target} exists and differs from {path}; not overwritten")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def unpack(src: Path, out: Path) -> list[Path]:
    """Copy `src` (a pack) into OUT and link each experiment's start to the base model again. Returns
    the links made."""
    src, out = Path(src), Path(out)
    if not experiments(src):
        raise SystemExit(f"experiment_parts: {src} is not a pack ({HANDOFF_FILE} nowhere in it)")
    _copy_back(src, out)
    from resrl.experiments.kinds import ensure_base_model, link_start  # torch and transformers: unpack only

    links = []
    for exp in experiments(out):
        if not (exp / HANDOFF_FILE).is_file():  # a grid's or seeds' OUT: its experiments are below it
            continue
        model_dir = json.loads((exp / HANDOFF_FILE).read_text()).get("config", {}).get("start", {}).get("model_dir")
        if model_dir is not None and not (exp / START_LINK).exists():
            links.append(link_start(exp, ensure_base_model(model_dir)))
    return links


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="OUT's finished work, without weights, into DIR")
    a.add_argument("out")
    a.add_argument("dest")
    b = sub.add_parser("unpack", help="a pack back into OUT, each start re-linked")
    b.add_argument("src")
    b.add_argument("out")
    args = p.parse_args(argv)
    if args.cmd == "pack":
        done = pack(Path(args.out), Path(args.dest))
        print(f"packed {len(done['runs'])} finished runs: {', '.join(done['runs']) or '-'}")
        print(f"left out {len(done['left'])} unfinished runs (trained again from the start): {', '.join(done['left']) or '-'}")
    else:
        for link in unpack(Path(args.src), Path(args.out)):
            print(f"linked {link} -> {link.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
