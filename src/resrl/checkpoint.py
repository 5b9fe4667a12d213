"""Atomic checkpoints: write into a staging directory, fsync, then one `rename`.

A crash while writing leaves `.staging/` behind (ignored and cleared by the next save) and the
previous `checkpoint-N` untouched; `latest_checkpoint` only ever sees complete checkpoints
because a `checkpoint-N` name appears in one atomic `os.replace`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

STAGING = ".staging"
_CKPT = re.compile(r"^checkpoint-(\d+)$")


def fsync_tree(path: str | os.PathLike) -> None:
    """fsync every file under `path`, then the directories (so the names are durable too)."""
    for root, dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for root, dirs, files in os.walk(path, topdown=False):
        fsync_dir(root)


def fsync_dir(path: str | os.PathLike) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def publish(staged: str | os.PathLike, final: str | os.PathLike) -> None:
    """Make the complete directory `staged` appear as `final` in one rename (replacing an old one)."""
    staged, final = Path(staged), Path(final)
    fsync_tree(staged)
    if final.exists():  # same step saved twice: move the old one aside first, then drop it
        old = final.with_name(final.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(staged, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, final)
    fsync_dir(final.parent)


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of `run_dir`, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := _CKPT.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    ckpts = [p for p in list_checkpoints(run_dir) if (p / "trainer_state.json").is_file()]
    return ckpts[-1] if ckpts else None


def checkpoint_step(path: str | os.PathLike) -> int:
    state = json.loads((Path(path) / "trainer_state.json").read_text())
    return int(state["global_step"])


def rotate(run_dir: str | os.PathLike, keep: int | None) -> None:
    """Delete the oldest complete checkpoints beyond `keep` (None or <= 0: keep all)."""
    if not keep or keep <= 0:
        return
    for path in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
