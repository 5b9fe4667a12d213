"""Files of problems: where a named data set's file is, its rows (jsonl / jsonl.gz / parquet), and
the three generic row formats. No task family is known here: `resrl.tasks.data` (`load_problems`,
`load_benchmarks`, `row_to_problem`) asks the families first and reads files with this module.

Three row formats are accepted (per row; a training set of TRL rows must be all TRL rows):

- simple:  {"problem": str, "answer": str | number, "id"?: str, ...}   (the packaged math sets)
- veRL:    {"data_source": str, "prompt": str | [{"role", "content"}, ...], "ability"?: str,
            "reward_model": {"ground_truth": str | number | list, ...}, "extra_info"?: dict}
- TRL:     {"prompt": str | [{"role", "content"}, ...], "answer"?: str | number, ...any columns}
           (no reward_model): TRL's standard (a string, no chat template) or conversational
           prompt, used as it is; every other column reaches TRL-style reward functions as a
           keyword argument, as in TRL

Every row becomes a `Problem`. A row that is neither gives a ValueError naming the file and the
1-based row number (the line number for jsonl). `.jsonl.gz` files are read too.

Names: `aime24`, `aime25`, `amc23`, `math500`, `minerva`, `olympiadbench`, `gsm8k`,
`dapo_math_17k`, `dapo_math_17k_dedup` ship inside the package (`resrl.data.packaged_data`, gzip
jsonl checked against their sha256 on every read). A name is looked up first as
`<name>.jsonl` / `<name>.jsonl.gz` / `<name>.parquet` in the explicit directories, in this order:
the `data_dir` argument (`--data-dir`), then `$RESRL_DATA_DIR`; a file found there wins. Otherwise
a packaged name resolves to the packaged copy. Nothing else (no path relative to the checkout or
the working directory) is searched.
"""

from __future__ import annotations

from resrl.errors import DataError

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from resrl.data.packaged_data import PackagedFile
from resrl.data.problem import TRL_COLUMNS, Problem, check_chat

BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench", "gsm8k", "dapo_math_17k",
              "dapo_math_17k_dedup")  # the packaged math sets (resrl/data/packaged/math/manifest.json)
DATA_DIR_ENV = "RESRL_DATA_DIR"
DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")


# ---- where files are ----------------------------------------------------------------------------
def candidate_data_dirs(data_dir: str | Path | None = None) -> list[Path]:
    """The explicit directories searched for named data sets, in priority order: `data_dir`, then
    `$RESRL_DATA_DIR`. (Names not found there fall back to the packaged copies.)"""
    dirs = []
    if data_dir is not None:
        dirs.append(Path(data_dir).expanduser())
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]).expanduser())
    unique: list[Path] = []
    for d in dirs:
        if all(d.resolve() != u.resolve() for u in unique):
            unique.append(d)
    return unique


def default_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """The first existing explicit data directory, or None (then names resolve to packaged copies)."""
    return next((d for d in candidate_data_dirs(data_dir) if d.is_dir()), None)


def resolve_data_path(spec: str | Path, data_dir: str | Path | None = None,
                      also_named: Iterable[str] = ()) -> Path | PackagedFile:
    """A file path, or a data set name -> an existing file, or the packaged copy of a packaged name.
    DataError listing where it looked, and the names it knows (the packaged ones, then `also_named`:
    `resrl.tasks.data` passes the task families' data names)."""
    if isinstance(spec, PackagedFile):
        return spec
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    name = str(spec)
    looked = []
    if "/" not in name and not name.endswith((*DATA_SUFFIXES, ".json")):
        for d in candidate_data_dirs(data_dir):
            for suffix in DATA_SUFFIXES:
                candidate = d / f"{name}{suffix}"
                looked.append(str(candidate))
                if candidate.is_file():
                    return candidate
        from resrl.data import packaged_data

        entry = packaged_data.find_packaged(name)
        if entry is not None:
            return entry
        looked.append("the packaged data sets")
    hint = f"; looked for {looked}" if looked else ""
    raise DataError(f"data set {name!r} is neither an existing file nor a known name "
                     f"(names: {list(BENCHMARKS) + list(also_named)}; set --data-dir or ${DATA_DIR_ENV}){hint}")


# ---- reading rows -------------------------------------------------------------------------------
def iter_rows(path: Path | PackagedFile) -> Iterator[tuple[int, Any]]:
    """(1-based row number, decoded row) for jsonl / jsonl.gz / parquet files and packaged copies."""
    if isinstance(path, PackagedFile):
        from resrl.data.packaged_data import read_packaged

        yield from _json_lines(read_packaged(path).decode("utf-8").splitlines(), path)
        return
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
            raise DataError(f"{path}: reading parquet needs pyarrow ({exc})") from exc
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:
            raise DataError(f"{path}: cannot read parquet file: {exc}") from exc
        yield from enumerate(rows, start=1)
        return
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            yield from _json_lines(f, path)
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read file: {exc}") from None


def _json_lines(lines: Iterable[str], where: object) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: row {lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from None


def _answer_text(value: Any, where: str) -> str:
    if isinstance(value, bool) or value is None:
        raise DataError(f"{where}: answer must be a string or number, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 70.0 -> "70" (several sources store integers as floats)
    if isinstance(value, (str, int, float)):
        return str(value).strip()
    raise DataError(f"{where}: answer must be a string or number, got {type(value).__name__}")


def generic_row_to_problem(row: Any, index: int, source: str, where: str) -> Problem:
    """One decoded row of a generic format (simple, veRL, TRL) -> Problem. `where` ("file: row N")
    prefixes every error message. (`resrl.tasks.data.row_to_problem` tries the families' row
    formats first.)"""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if "problem" in row:  # simple format
        if not isinstance(row["problem"], str) or not row["problem"].strip():
            raise DataError(f"{where}: 'problem' must be a non-empty string")
        if "answer" not in row:
            raise DataError(f"{where}: has 'problem' but no 'answer'")
        extra = {k: v for k, v in row.items() if k not in ("id", "problem", "answer", "source")}
        return Problem(id=str(row.get("id", f"{source}-{index}")), prompt=row["problem"],
                       answer=_answer_text(row["answer"], where), data_source=str(row.get("source") or source),
                       extra=extra)
    if "prompt" in row:  # veRL format
        prompt = row["prompt"]
        if isinstance(prompt, list):
            prompt = check_chat(prompt, where)
        elif not isinstance(prompt, str) or not prompt.strip():
            raise DataError(f"{where}: 'prompt' must be a string or a chat list")
        if "reward_model" not in row:  # TRL format: the prompt and the columns a TRL reward reads
            answer = row.get("answer")
            columns = {k: v for k, v in row.items() if k not in ("prompt", "answer", "id", "data_source")}
            return Problem(id=str(row.get("id", f"{source}-{index}")), prompt=prompt,
                           answer="" if answer is None else _answer_text(answer, where),
                           data_source=str(row.get("data_source") or source), extra={TRL_COLUMNS: columns})
        reward_model = row.get("reward_model")
        if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
            raise DataError(f"{where}: veRL row needs 'reward_model': {{'ground_truth': ...}}")
        truth = reward_model["ground_truth"]
        extra = {k: v for k, v in row.items() if k not in ("prompt", "reward_model", "data_source")}
        if isinstance(truth, (list, tuple)):  # several accepted answers: the first is the reference
            if not truth:
                raise DataError(f"{where}: 'reward_model.ground_truth' is an empty list")
            extra["all_answers"] = [_answer_text(t, where) for t in truth]
            truth = truth[0]
        info = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        pid = row.get("id", info.get("id", info.get("index", f"{source}-{index}")))
        return Problem(id=str(pid), prompt=prompt, answer=_answer_text(truth, where),
                       data_source=str(row.get("data_source") or source), extra=extra)
    raise DataError(f"{where}: row has neither 'problem'/'answer' nor a 'prompt' (TRL or veRL format) "
                     f"(keys: {sorted(row)[:10]})")


def data_name(path: Path | PackagedFile) -> str:
    """A data set's name from its file: the stem, without `.jsonl` under a `.gz` (HumanEval.jsonl.gz -> HumanEval)."""
    if isinstance(path, PackagedFile):
        return path.name
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return Path(name).stem


def __getattr__(name: str):
    """A name that left this module in 0.2.0 (`load_problems`, `load_benchmarks`, `row_to_problem`, now
    in resrl.tasks.data): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)


__all__ = ["Problem", "BENCHMARKS", "DATA_DIR_ENV", "PackagedFile", "candidate_data_dirs", "default_data_dir",
           "resolve_data_path", "iter_rows", "generic_row_to_problem", "data_name"]
