"""Atomic TRL checkpoints: TRL/HF's checkpoint (model, optimiser, scheduler, RNG states, trainer
state) written into `<output_dir>/.staging/`, extra files added beside it (the engine's state,
`ENGINE_STATE_FILE`), fsynced, then renamed to `checkpoint-N` in one step
(resrl.checkpoint.publish), and old checkpoints rotated (resrl.checkpoint.rotate: renamed out of
sight, then deleted).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from resrl.checkpoint import STAGING, clear_leftovers, publish, rotate


# the engine's own resumable state (e.g. dynamic sampling's refill-stream position), JSON
ENGINE_STATE_FILE = "resrl_engine_state.json"


def write_engine_state(checkpoint_dir: str | os.PathLike, state: dict) -> None:
    (Path(checkpoint_dir) / ENGINE_STATE_FILE).write_text(json.dumps(state, sort_keys=True))


def read_engine_state(checkpoint_dir: str | os.PathLike) -> dict:
    """The state `write_engine_state` wrote ({} for a checkpoint written before it existed)."""
    path = Path(checkpoint_dir) / ENGINE_STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def save_atomically(args, accelerator, global_step: int, write: Callable[[], None],
                    add_files: Callable[[str], None] | None = None) -> None:
    """args: the trainer's TrainingArguments (output_dir, save_total_limit; restored afterwards);
    write: the trainer's own checkpoint writer, into `args.output_dir`;
    add_files(checkpoint_dir): writes more files into the staged checkpoint (main process only).
    Every process calls this (the writer and the barriers are collective)."""
    run_dir = args.output_dir
    staging_root = os.path.join(run_dir, STAGING)
    name = f"checkpoint-{global_step}"
    if accelerator.is_main_process:  # what a crash left: a partial write, an interrupted deletion
        shutil.rmtree(staging_root, ignore_errors=True)
        clear_leftovers(run_dir)
    accelerator.wait_for_everyone()
    limit = args.save_total_limit
    args.output_dir, args.save_total_limit = staging_root, None
    try:
        write()
    finally:
        args.output_dir, args.save_total_limit = run_dir, limit
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if add_files is not None:
            add_files(os.path.join(staging_root, name))
        publish(os.path.join(staging_root, name), os.path.join(run_dir, name))
        shutil.rmtree(staging_root, ignore_errors=True)
        rotate(run_dir, limit)
    accelerator.wait_for_everyone()
