"""Atomic checkpoints: write into a staging directory, fsync, then one `rename`; delete by one
`rename` out of sight, then `rmtree`.

A crash while writing leaves `.staging/` behind (ignored and cleared by the next save) and the
previous `checkpoint-N` untouched. A directory leaves the run the way it came in: `discard` renames
`checkpoint-N` to `.deleting-checkpoint-N` (one atomic `os.replace`, a name `list_checkpoints`
ignores), then deletes it; a crash during the deletion leaves the `.deleting-*` directory, which
the next save clears (`clear_leftovers`). So `list_checkpoints` and `latest_checkpoint` only ever
see complete checkpoints: a `checkpoint-N` name appears complete and disappears whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

STAGING = ".staging"
DELETING = ".deleting-"  # prefix of a directory being deleted (rotation, a replaced checkpoint)
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


def _out_of_sight(path: Path) -> Path:
    """Rename `path` to `.deleting-<name>` (one atomic rename, made durable); returns the new path."""
    trash = path.with_name(DELETING + path.name)
    if trash.exists():  # the leftover of an earlier interrupted deletion of the same name
        shutil.rmtree(trash)
    os.replace(path, trash)
    fsync_dir(path.parent)
    return trash


def discard(path: str | os.PathLike) -> None:
    """Delete the directory `path` so that it is never seen half-deleted under its name: renamed
    out of sight first, then removed (a crash during the removal leaves `.deleting-<name>`, which
    `clear_leftovers` removes)."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(_out_of_sight(path), ignore_errors=True)


def clear_leftovers(run_dir: str | os.PathLike) -> None:
    """Remove what interrupted deletions left in `run_dir` (`.deleting-*` directories)."""
    run_dir = Path(run_dir)
    if run_dir.is_dir():
        for p in run_dir.iterdir():
            if p.name.startswith(DELETING) and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


def publish(staged: str | os.PathLike, final: str | os.PathLike) -> None:
    """Make the complete directory `staged` appear as `final` in one rename (replacing an old one)."""
    staged, final = Path(staged), Path(final)
    fsync_tree(staged)
    if final.exists():  # same step saved twice: move the old one out of sight first, then drop it
        old = _out_of_sight(final)
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
    """Delete the oldest checkpoints beyond `keep` (None or <= 0: keep all), each through `discard`
    (renamed out of sight, then removed), and the leftovers of earlier interrupted deletions."""
    clear_leftovers(run_dir)
    if not keep or keep <= 0:
        return
    for path in list_checkpoints(run_dir)[:-keep]:
        discard(path)
