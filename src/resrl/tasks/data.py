"""Problems by data spec: the task families' data first (`resrl.tasks.registry`, beside this
module), then files and named data sets (`resrl.data.loaders`: the simple, veRL and TRL row
formats, the packaged math sets, `--data-dir` / `$RESRL_DATA_DIR`).

Rows of the shapes a family recognises are built by that family (code problems — `{"problem",
"tests"}`, HumanEval rows, veRL rows whose ground truth is a tests object — by `resrl.tasks.code`;
tool-calling rows — `{"tools", "messages", "expected"}` — by `resrl.tasks.tools`), and a spec a
family serves by its prefix or name is loaded by that family (`rg:TASK`, `bfcl:<category>`,
`humaneval`, `humanevalplus`, ...). Every other row is read by `resrl.data.loaders`.

    from resrl.tasks.data import load_problems, load_benchmarks
    load_problems("gsm8k", limit=8)            # a packaged math set
    load_benchmarks(["aime24", "humaneval"])   # {"aime24": [...], "HumanEval": [...]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resrl.data.loaders import PackagedFile, data_name, generic_row_to_problem, iter_rows, resolve_data_path
from resrl.data.problem import Problem
from resrl.errors import DataError
from resrl.tasks import registry as tasks


def _resolve(spec: str | Path, data_dir: str | Path | None) -> Path | PackagedFile:
    return resolve_data_path(spec, data_dir, also_named=tasks.data_names())


def row_to_problem(row: Any, index: int, source: str, where: str) -> Problem:
    """One decoded row -> Problem: a task family's row format (code, tool calling, ...) if one
    matches, else the generic formats (`resrl.data.loaders.generic_row_to_problem`). `where`
    ("file: row N") prefixes every error message."""
    if isinstance(row, dict):
        for rows in tasks.row_formats():
            if rows.matches(row):
                return rows.to_problem(row, index, source, where)
    return generic_row_to_problem(row, index, source, where)


def load_problems(spec: str | Path | PackagedFile, data_dir: str | Path | None = None, limit: int | None = None) -> list[Problem]:
    """Problems of one file or named data set (see module docstring); the first `limit` if given.
    A spec a task family serves (`rg:TASK?...`, `bfcl:<category>`, `humaneval`, ...) is loaded by
    that family, its train split where it has splits."""
    family = tasks.family_for_data(spec)
    if family is not None and family.load is not None:
        return family.load(str(spec), split="train", limit=limit)
    path = _resolve(spec, data_dir)
    source = data_name(path)
    problems = []
    for index, (rowno, row) in enumerate(iter_rows(path)):
        if limit is not None and index >= limit:
            break
        problems.append(row_to_problem(row, index, source, f"{path}: row {rowno}"))
    if not problems:
        raise DataError(f"{path}: no rows")
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"{path}: duplicate problem id {dup!r}")
    return problems


def load_benchmarks(specs: list[str], data_dir: str | Path | None = None,
                    limit: int | None = None) -> dict[str, list[Problem]]:
    """{name: problems} for several names / files; the key is the file stem, or for a spec a task
    family serves the family's report name (its held-out split where it has splits)."""
    out: dict[str, list[Problem]] = {}
    for spec in specs:
        family = tasks.family_for_data(spec)
        if family is not None and family.load is not None:
            name = family.report_name(str(spec)) if family.report_name is not None else str(spec)
            if family.report_names_unique and name in out:
                raise DataError(f"data set {spec!r}: a data set named '{name}' is already loaded")
            out[name] = family.load(str(spec), split="test", limit=limit)
            continue
        path = _resolve(spec, data_dir)
        name = data_name(path)
        if name in out:
            raise DataError(f"data set {spec!r}: a data set named '{name}' is already loaded")
        out[name] = load_problems(path, limit=limit)
    return out


__all__ = ["row_to_problem", "load_problems", "load_benchmarks"]
