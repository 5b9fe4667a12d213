"""Procedurally generated tasks from the PyPI package `reasoning-gym` (pinned 0.1.25), as Problems.

    rg:TASK                                   e.g. rg:leg_counting, rg:basic_arithmetic
    rg:TASK?size=500&seed=1&test_size=100     options; any other key goes to the task's generator
    rg:basic_arithmetic?operators=[+,-]       (values are YAML scalars / lists; no URL encoding)
    rg:TASK?split=test                        the held-out split (default: train for training,
                                              test for evaluation and `resrl diagnose`)

Splits: the test split is the task generated with seed 2·seed + 1 (`test_size` items), the train
split with seed 2·seed (`size` items) minus every item whose question also appears in the test
split, so the two never share a question. Generator options (e.g. `min_animals=3`) are parsed
as YAML scalars and passed to `reasoning_gym.create_dataset`; an unknown task or option is one
ValueError naming it.

A problem's `answer` is not the plain reference answer but a small JSON key from which the `rg`
reward regenerates the exact entry (task, seed, size, options, index) and calls the package's own
`score_answer` on it; the plain reference answer is in `extra["reference_answer"]`.
"""

from __future__ import annotations

import json
from functools import lru_cache
import yaml

from resrl.data.problem import Problem

PREFIX = "rg:"
RESERVED = ("size", "seed", "test_size", "split")


def parse_rg_spec(spec: str) -> tuple[str, dict, dict]:
    """"rg:TASK?k=v&..." -> (task, settings {size, seed, test_size, split or None}, generator options)."""
    if not isinstance(spec, str) or not spec.startswith(PREFIX):
        raise ValueError(f"a reasoning-gym data spec starts with 'rg:', got {spec!r}")
    body = spec[len(PREFIX):]
    task, _, query = body.partition("?")
    task = task.strip()
    if not task:
        raise ValueError(f"{spec!r}: no task name after 'rg:'")
    settings = {"size": 1000, "seed": 0, "test_size": 200, "split": None}
    options = {}
    # split by hand: no URL decoding, so "+" stays "+" (operators=[+,-])
    pairs = [part.partition("=") for part in query.split("&") if part]
    for key, sep, raw in pairs:
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{spec!r}: option {key!r} needs a value (key=value)")
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError:
            value = raw
        if key in RESERVED:
            settings[key] = value
        else:
            options[key] = value
    for key in ("size", "seed", "test_size"):
        v = settings[key]
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= (0 if key == "seed" else 1)):
            raise ValueError(f"{spec!r}: option {key!r} must be an int >= {0 if key == 'seed' else 1}, got {v!r}")
    if settings["split"] not in (None, "train", "test"):
        raise ValueError(f"{spec!r}: option 'split' must be train or test, got {settings['split']!r}")
    return task, settings, options


def split_seed(seed: int, split: str) -> int:
    return 2 * seed + (1 if split == "test" else 0)


@lru_cache(maxsize=32)
def _dataset(task: str, size: int, seed: int, options_json: str):
    import reasoning_gym

    options = json.loads(options_json)
    try:
        return reasoning_gym.create_dataset(task, size=size, seed=seed, **options)
    except Exception as exc:  # unknown task / option: the package raises ValueError, TypeError, ...
        raise ValueError(f"reasoning-gym task {task!r} with options {options}: {type(exc).__name__}: {exc}") from None


def rg_entry(key: dict) -> dict:
    """The entry a problem's answer key names: {"task", "size", "seed", "options", "index"}."""
    ds = _dataset(key["task"], int(key["size"]), int(key["seed"]), json.dumps(key.get("options", {}), sort_keys=True))
    return ds[int(key["index"])]


def load_rg_problems(spec: str, split: str | None = None, limit: int | None = None) -> list[Problem]:
    """Problems of a reasoning-gym spec; `split` (train | test) unless the spec names one."""
    task, settings, options = parse_rg_spec(spec)
    split = settings["split"] or split or "train"
    opts_json = json.dumps(options, sort_keys=True)
    test_size, seed = settings["test_size"], settings["seed"]
    test = _dataset(task, test_size, split_seed(seed, "test"), opts_json)
    if split == "test":
        ds, size, ds_seed = test, test_size, split_seed(seed, "test")
        held_out = set()
    else:
        ds, size, ds_seed = _dataset(task, settings["size"], split_seed(seed, "train"), opts_json), settings["size"], \
            split_seed(seed, "train")
        held_out = {test[i]["question"] for i in range(test_size)}
    problems = []
    for i in range(size):
        if limit is not None and len(problems) >= limit:
            break
        entry = ds[i]
        if entry["question"] in held_out:
            continue
        key = {"task": task, "size": size, "seed": ds_seed, "options": options, "index": i}
        problems.append(Problem(id=f"{task}-{split}-{i}", prompt=entry["question"], answer=json.dumps(key, sort_keys=True),
                                data_source=f"rg:{task}",
                                extra={"reference_answer": str(entry["answer"]), "split": split}))
    if not problems:
        raise ValueError(f"{spec!r}: the {split} split is empty (every item is also in the test split?)")
    return problems


__all__ = ["parse_rg_spec", "load_rg_problems", "rg_entry", "split_seed"]
